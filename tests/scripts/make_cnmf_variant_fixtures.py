#!/usr/bin/python3
"""Real cNMF runs with the options knmf used to refuse, as golden data for its cNMF mode.

    /usr/bin/python3 tests/scripts/make_cnmf_variant_fixtures.py [--cnmf ../shared/tools/cnmf-reference]

For each variant, runs the reference cNMF 1.7.1 (`run_cnmf.sh prepare` then `factorize`, Debian 12's
numpy / scipy / scikit-learn 1.2.1) on tests/data/real/pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad
(1,107 cells x 507 genes, 300 highly variable genes, k = 3 and 4, 3 replicates each, seed 14) and
copies into tests/data/real/cnmf-pbmc1k-<variant>/:
  prepare/<name>/cnmf_tmp/  the files `cnmf factorize` reads (norm_counts.h5ad, nmf_params.df.npz,
                            nmf_idvrun_params.yaml) and <name>.overdispersed_genes.txt
  reference/                cNMF's per-replicate spectra (<name>.spectra.k_K.iter_I.df.npz)
Variants:
  kl      --beta-loss kullback-leibler (cNMF writes solver: mu)
  nndsvd  --init nndsvd (frobenius: solver cd)
The tests (tests/drivers/test_factorize_cnmf_variants.cpp) run `knmf factorize --output-dir
--name` on a copy of prepare/ and compare every replicate's spectra with cNMF's.
"""
import argparse, os, shutil, subprocess, tempfile

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
counts = os.path.join(repo, "tests/data/real/pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad")

VARIANTS = {
    "kl": ["--beta-loss", "kullback-leibler"],
    "nndsvd": ["--init", "nndsvd"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cnmf", default=os.path.join(repo, "..", "shared", "tools", "cnmf-reference"))
    args = ap.parse_args()
    run = os.path.join(os.path.abspath(args.cnmf), "run_cnmf.sh")
    for variant, extra in VARIANTS.items():
        name = "chr21" + variant
        with tempfile.TemporaryDirectory() as tmp:
            common = ["--output-dir", tmp, "--name", name]
            subprocess.run([run, "prepare", *common, "-c", counts, "-k", "3", "4", "--n-iter", "3",
                            "--seed", "14", "--numgenes", "300", *extra], check=True, cwd=tmp)
            subprocess.run([run, "factorize", *common], check=True, cwd=tmp)
            out = os.path.join(repo, "tests/data/real", "cnmf-pbmc1k-" + variant)
            shutil.rmtree(out, ignore_errors=True)
            src = os.path.join(tmp, name)
            dst = os.path.join(out, "prepare", name)
            os.makedirs(os.path.join(dst, "cnmf_tmp"))
            os.makedirs(os.path.join(out, "reference"))
            shutil.copy(os.path.join(src, name + ".overdispersed_genes.txt"), dst)
            for f in ("norm_counts.h5ad", "nmf_params.df.npz", "nmf_idvrun_params.yaml"):
                shutil.copy(os.path.join(src, "cnmf_tmp", name + "." + f), os.path.join(dst, "cnmf_tmp"))
            for f in sorted(os.listdir(os.path.join(src, "cnmf_tmp"))):
                if ".spectra.k_" in f and ".iter_" in f:
                    shutil.copy(os.path.join(src, "cnmf_tmp", f), os.path.join(out, "reference"))
            print(variant, "->", out, sorted(os.listdir(os.path.join(out, "reference"))))


if __name__ == "__main__":
    main()
