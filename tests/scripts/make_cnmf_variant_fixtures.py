#!/usr/bin/python3
"""Real cNMF runs with the options knmf used to refuse, as golden data for its cNMF mode.

    /usr/bin/python3 tests/scripts/make_cnmf_variant_fixtures.py [--cnmf ../shared/tools/cnmf-reference]

For each variant, runs the reference cNMF 1.7.1 (`run_cnmf.sh prepare` then `factorize`, Debian 12's
numpy / scipy / scikit-learn 1.2.1) on tests/data/real/pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad
(1,107 cells x 507 genes; 300 highly variable genes, 150 for kl; k = 3 and 4, 3 replicates each,
seed 14) and
copies into tests/data/real/cnmf-pbmc1k-<variant>/:
  prepare/<name>/cnmf_tmp/  the files `cnmf factorize` reads (norm_counts.h5ad, nmf_params.df.npz,
                            nmf_idvrun_params.yaml) and <name>.overdispersed_genes.txt
  reference/                cNMF's per-replicate spectra (<name>.spectra.k_K.iter_I.df.npz)
Variants:
  kl      --beta-loss kullback-leibler (cNMF writes solver: mu)
  nndsvd  --init nndsvd (frobenius: solver cd)
The tests (tests/drivers/test_factorize_cnmf_variants.cpp) run `knmf factorize --output-dir
--name` on a copy of prepare/ and compare every replicate's spectra with cNMF's.

For kl, cNMF's later steps too, whose refits run with the run's beta_loss: `combine`,
`k_selection_plot` and `consensus --components K --local-density-threshold 2.0
--local-neighborhood-size 0.5` for K = 3 and 4 (9 or 12 replicate spectra: the default
neighbourhood, 0.3, would give int(0.3 * 3) = 0 neighbours, which cNMF divides by). Also copied:
prepare/<name>/cnmf_tmp/<name>.tpm.h5ad and .tpm_stats.df.npz (what consensus reads), and into
reference/ cNMF's merged spectra, k_selection_stats.df.npz and, per K, the consensus spectra and
usages, gene_spectra_tpm, gene_spectra_score and starcat_spectra (.df.npz, dt_2_0). The test
(tests/consensus/test_consensus_beta.cpp) runs knmf's consensus and k-selection on them.

scikit-learn 1.2.1's beta-divergence MU misreads a CSC X: _multiplicative_update_w divides X.data
(CSC order) by the values of _special_sparse_dot(W, H, X), which it returns in CSR order, so the
ratio X / (W H) pairs entries of different cells and genes. cNMF's refit_spectra passes tpm.X.T,
the CSC transpose of the CSR TPM, so with beta_loss != frobenius its TPM spectra are computed from
that misaligned ratio (and here the final usages come out NaN). The same factorization of the same
matrix as CSR (or dense) agrees with knmf's. So for kl this script also runs cNMF's own consensus
once more (its Python API, k = 3 and 4) with only that changed: refit_spectra given X.T as CSR.
Its outputs go to reference/csr_refit/ (same file names); the test compares knmf with those, and
checks that cNMF's unpatched TPM outputs differ from them by far more than its bound.

Reruns reproduce the committed files except cNMF's nndsvd spectra, which move by about 6e-15
relative (OpenBLAS threading in the randomized SVD); the committed ones are the first run's.
"""
import argparse, os, shutil, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
counts = os.path.join(repo, "tests/data/real/pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad")

CONSENSUS = {"kl": ["--local-density-threshold", "2.0", "--local-neighborhood-size", "0.5"]}
CONSENSUS_OUTPUTS = ("spectra.k_%d.dt_2_0.consensus", "usages.k_%d.dt_2_0.consensus",
                     "gene_spectra_tpm.k_%d.dt_2_0", "gene_spectra_score.k_%d.dt_2_0",
                     "starcat_spectra.k_%d.dt_2_0")

# kl: 150 genes, since only 201 of the 507 have a non-zero variance and cNMF's consensus divides
# the TPM spectra of its genes by their standard deviations (0/0 = NaN for the others)
NUMGENES = {"kl": "150", "nndsvd": "300"}

VARIANTS = {
    "kl": ["--beta-loss", "kullback-leibler"],
    "nndsvd": ["--init", "nndsvd"],
}


def csr_refit_consensus(cnmf_dir, tmp, name, out):
    """cNMF's consensus (k = 3, 4) through its Python API with refit_spectra given X.T as CSR."""
    code = r"""
import os, sys, warnings
import scipy.sparse as sp
warnings.filterwarnings("ignore")
from cnmf.cnmf import cNMF
tmp, name = sys.argv[1], sys.argv[2]
obj = cNMF(output_dir=tmp, name=name)
def refit_spectra(X, usage):
    Xt = X.T.tocsr() if sp.issparse(X) else X.T
    return obj.refit_usage(Xt, usage.T).T
obj.refit_spectra = refit_spectra
for k in (3, 4):
    obj.consensus(k, density_threshold=2.0, local_neighborhood_size=0.5, show_clustering=False,
                  close_clustergram_fig=True)
"""
    env = dict(os.environ, PYTHONPATH=cnmf_dir)
    subprocess.run([sys.executable, "-c", code, tmp, name], check=True, env=env, cwd=tmp)
    os.makedirs(out)
    for k in (3, 4):
        for f in CONSENSUS_OUTPUTS:
            shutil.copy(os.path.join(tmp, name, "cnmf_tmp", name + "." + (f % k) + ".df.npz"), out)


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
                            "--seed", "14", "--numgenes", NUMGENES[variant], *extra], check=True, cwd=tmp)
            subprocess.run([run, "factorize", *common], check=True, cwd=tmp)
            if variant in CONSENSUS:
                subprocess.run([run, "combine", *common], check=True, cwd=tmp)
                subprocess.run([run, "k_selection_plot", *common], check=True, cwd=tmp)
                for k in (3, 4):
                    subprocess.run([run, "consensus", *common, "--components", str(k),
                                    *CONSENSUS[variant]], check=True, cwd=tmp)
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
            if variant in CONSENSUS:
                for f in ("tpm.h5ad", "tpm_stats.df.npz"):
                    shutil.copy(os.path.join(src, "cnmf_tmp", name + "." + f),
                                os.path.join(dst, "cnmf_tmp"))
                ref = os.path.join(out, "reference")
                shutil.copy(os.path.join(src, name + ".k_selection_stats.df.npz"), ref)
                for k in (3, 4):
                    shutil.copy(os.path.join(src, "cnmf_tmp", "%s.spectra.k_%d.merged.df.npz" % (name, k)), ref)
                    for f in CONSENSUS_OUTPUTS:
                        shutil.copy(os.path.join(src, "cnmf_tmp", name + "." + (f % k) + ".df.npz"), ref)
                csr_refit_consensus(os.path.abspath(args.cnmf), tmp, name, os.path.join(ref, "csr_refit"))
            print(variant, "->", out, sorted(os.listdir(os.path.join(out, "reference"))))


if __name__ == "__main__":
    main()
