#!/usr/bin/python3
"""Golden facts of `cnmf prepare` (cNMF 1.7.1) for `knmf prepare`'s tests (tests/prepare).

    /usr/bin/python3 tests/scripts/make_golden_prepare_cli.py [/path/to/cnmf-reference] [--only=ID,ID]

Runs the real cNMF (`run_cnmf.sh prepare`, default ../shared/tools/cnmf-reference beside the
checkout) in a temporary folder on inputs already under tests/data/real/, and writes
tests/data/prepare/cnmf_prepare_cli.json: per case the options, whether cNMF refused the input
(and its message), and otherwise compact facts of every file of the run folder:

  * the folders cNMF created under OUTPUT/NAME and the files in them;
  * the gene list file's exact text (`NAME.overdispersed_genes.txt`);
  * the yaml file's exact text (`NAME.nmf_idvrun_params.yaml`);
  * the job table as cNMF's load_df_from_npz reads it: columns, index, the per-column dtype
    and the Python type of each cell, and the rows (n_components, iter, nmf_seed, completed);
  * norm_counts.h5ad and tpm.h5ad: shape, nnz, obs/var names' hashes (fingerprint_names of
    make_real_fixtures.py), and knmf's order-free
    X fingerprint (include/knmf/io/fingerprint.hpp: the sum over non-zeros of
    mix(mix(mix(row) ^ col) ^ bits(double(v))), mixed with nnz, n, g), so equal fingerprints
    mean the same values bit for bit whatever the entry order (cNMF's stand-in scanpy leaves
    some rows with unsorted columns);
  * tpm_stats.df.npz: index labels' hash, and the `__mean`/`__std` columns in full for small
    runs (<= 1,000 genes), else their sums and 10 sampled rows.
No test runs Python: the test reads the JSON.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import pandas as pd

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(here, "..", ".."))
real = os.path.join(repo, "tests", "data", "real")
out_json = os.path.join(repo, "tests", "data", "prepare", "cnmf_prepare_cli.json")
args = [a for a in sys.argv[1:] if not a.startswith("--only=")]
only = [a[len("--only="):].split(",") for a in sys.argv[1:] if a.startswith("--only=")]
only = only[0] if only else None  # --only=id,id: rerun these cases, keep the others' facts
cnmf_ref = args[0] if args else os.path.normpath(
    os.path.join(repo, "..", "shared", "tools", "cnmf-reference"))
M64 = (1 << 64) - 1


def mix(z):
    z = (z + np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def x_fingerprint(indptr, indices, data, n, g):
    """knmf::io::XFingerprint of a CSR matrix (zeros skipped, values as double)."""
    with np.errstate(over="ignore"):
        indptr = np.asarray(indptr, dtype=np.int64)
        rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        vals = np.asarray(data).astype(np.float64)
        keep = vals != 0
        bits = vals[keep].view(np.uint64)
        r = rows[keep].astype(np.uint64)
        c = np.asarray(indices, dtype=np.int64)[keep].astype(np.uint64)
        h = mix(mix(mix(r) ^ c) ^ bits)
        s = np.sum(h, dtype=np.uint64)
        v = mix(mix(mix(s ^ np.uint64(int(keep.sum()))) ^ np.uint64(n)) ^ np.uint64(g))
    return f"{int(v):016x}"


sys.path.insert(0, here)
from make_real_fixtures import fingerprint_names  # noqa: E402  (tests/support: names_fingerprint)


def names_sha(names):
    """The 64-bit hash of make_real_fixtures.fingerprint_names (knmf::test::names_fingerprint)."""
    return f"{fingerprint_names(names):016x}"


def h5_names(f, group):
    idx = f[group].attrs.get("_index", "_index")
    idx = idx.decode() if isinstance(idx, bytes) else idx
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in f[group][idx][()]]


def h5ad_facts(path):
    with h5py.File(path, "r") as f:
        X = f["X"]
        if isinstance(X, h5py.Group):
            enc = X.attrs.get("encoding-type", "")
            enc = enc.decode() if isinstance(enc, bytes) else enc
            assert enc == "csr_matrix", (path, enc)
            n, g = [int(v) for v in X.attrs["shape"]]
            indptr, indices, data = X["indptr"][()], X["indices"][()], X["data"][()]
            dtype = str(data.dtype)
        else:
            n, g = X.shape
            dense = X[()]
            dtype = str(dense.dtype)
            csr = __import__("scipy.sparse", fromlist=["csr_matrix"]).csr_matrix(dense)
            indptr, indices, data = csr.indptr, csr.indices, csr.data
        obs, var = h5_names(f, "obs"), h5_names(f, "var")
    return {
        "n_obs": n, "n_vars": g, "nnz": int(np.count_nonzero(data)), "dtype": dtype,
        "fingerprint": x_fingerprint(indptr, indices, data, n, g),
        "obs_names_hash": names_sha(obs), "var_names_hash": names_sha(var),
        "first_obs": obs[:3], "first_var": var[:3],
    }


def job_table_facts(path):
    with np.load(path, allow_pickle=True) as f:
        raw = {k: str(f[k].dtype) for k in f.files}
        df = pd.DataFrame(**f)
    return {
        "npz_array_dtypes": raw,
        "columns": [str(c) for c in df.columns],
        "index": [int(i) for i in df.index],
        "dtypes": [str(t) for t in df.dtypes],
        "cell_types": sorted({type(v).__name__ for v in df.values.ravel()}),
        "rows": [[int(r.n_components), int(r.iter), int(r.nmf_seed), bool(r.completed)]
                 for r in df.itertuples()],
    }


def tpm_stats_facts(path):
    with np.load(path, allow_pickle=True) as f:
        df = pd.DataFrame(**f)
    facts = {"rows": len(df), "columns": [str(c) for c in df.columns],
             "index_hash": names_sha([str(i) for i in df.index])}
    if len(df) <= 1000:
        facts["mean"] = [float(v) for v in df["__mean"]]
        facts["std"] = [float(v) for v in df["__std"]]
    else:
        facts["mean_sum"] = float(df["__mean"].sum())
        facts["std_sum"] = float(df["__std"].sum())
        rows = np.linspace(0, len(df) - 1, 10).astype(int)
        facts["sample_rows"] = [int(r) for r in rows]
        facts["sample_mean"] = [float(df["__mean"].iloc[r]) for r in rows]
        facts["sample_std"] = [float(df["__std"].iloc[r]) for r in rows]
    return facts


def run_case(case, work):
    out = os.path.join(work, case["id"])
    args = [os.path.join(cnmf_ref, "run_cnmf.sh"), "prepare", "--output-dir", out,
            "--name", case["name"], "-c", os.path.join(real, case["counts"])] + case["args"]
    if "tpm_from" in case:  # --tpm: the tpm.h5ad of an earlier case's run
        src = next(c for c in CASES if c["id"] == case["tpm_from"])
        args += ["--tpm", os.path.join(work, src["id"], src["name"], "cnmf_tmp", src["name"] + ".tpm.h5ad")]
    p = subprocess.run(args, cwd=work, capture_output=True, text=True)
    facts = {"id": case["id"], "name": case["name"], "counts": case["counts"],
             "args": case["args"], "tpm_from": case.get("tpm_from"), "cnmf_exit": p.returncode}
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().split("\n") if l.strip()]
        facts["cnmf_error"] = lines[-1] if lines else ""
        return facts
    run = os.path.join(out, case["name"])
    tmp = os.path.join(run, "cnmf_tmp")
    nm = case["name"]
    facts["folders"] = sorted(os.path.relpath(os.path.join(d, s), run)
                              for d, subs, _ in os.walk(run) for s in subs)
    facts["files"] = sorted(os.path.relpath(os.path.join(d, x), run)
                            for d, _, fs in os.walk(run) for x in fs)
    with open(os.path.join(run, nm + ".overdispersed_genes.txt")) as f:
        facts["genes_text"] = f.read()
    with open(os.path.join(tmp, nm + ".nmf_idvrun_params.yaml")) as f:
        facts["yaml_text"] = f.read()
    facts["job_table"] = job_table_facts(os.path.join(tmp, nm + ".nmf_params.df.npz"))
    facts["norm_counts"] = h5ad_facts(os.path.join(tmp, nm + ".norm_counts.h5ad"))
    facts["tpm"] = h5ad_facts(os.path.join(tmp, nm + ".tpm.h5ad"))
    facts["tpm_stats"] = tpm_stats_facts(os.path.join(tmp, nm + ".tpm_stats.df.npz"))
    return facts


CASES = [
    # the run of tests/data/real/cnmf-pbmc-donor-a (same options)
    {"id": "pbmc_donor_a", "name": "pbmcA", "counts": "pbmc-donor-a/pbmc-donor-a.h5ad",
     "args": ["-k", "5", "6", "7", "8", "--n-iter", "20", "--seed", "14", "--numgenes", "2000"]},
    {"id": "pbmc1k_chr21", "name": "chr21", "counts": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
     "args": ["-k", "3", "4", "--n-iter", "5", "--seed", "7", "--numgenes", "150"]},
    # repeated and unsorted k, KL loss (solver mu), nndsvd, another max iteration count
    {"id": "pbmc1k_chr21_kl", "name": "chr21kl", "counts": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
     "args": ["-k", "4", "2", "4", "--n-iter", "3", "--seed", "123456", "--numgenes", "150",
              "--beta-loss", "kullback-leibler", "--init", "nndsvd", "--max-nmf-iter", "250"]},
    # --tpm: the TPM cNMF computed in the case pbmc1k_chr21, given back (cNMF copies it)
    {"id": "pbmc1k_chr21_tpm", "name": "chr21tpm", "counts": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
     "tpm_from": "pbmc1k_chr21",
     "args": ["-k", "3", "4", "--n-iter", "5", "--seed", "7", "--numgenes", "150"]},
    # 100 genes leave 2 cells without counts in them: cNMF refuses
    {"id": "pbmc1k_chr21_100", "name": "chr21r", "counts": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
     "args": ["-k", "3", "--n-iter", "2", "--seed", "1", "--numgenes", "100"]},
    {"id": "pbmc1k_chr21_is", "name": "chr21is", "counts": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
     "args": ["-k", "2", "--n-iter", "2", "--seed", "0", "--numgenes", "120",
              "--beta-loss", "itakura-saito"]},
    # 1 all-zero cell (and 285 all-zero genes): cNMF refuses (zero counts in the HVGs)
    {"id": "mouse_brain", "name": "mouse", "counts": "mouse-brain-e18-10k/mouse-brain-e18-10k.h5ad",
     "args": ["-k", "5", "--n-iter", "2", "--seed", "1", "--numgenes", "300"]},
]


def main():
    results = []
    old = {}
    if only and os.path.exists(out_json):
        with open(out_json) as f:
            old = {c["id"]: c for c in json.load(f)["cases"]}
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            needed = only and any(c.get("tpm_from") == case["id"] and c["id"] in only for c in CASES)
            if only and case["id"] not in only and case["id"] in old and not needed:
                results.append(old[case["id"]])
                continue
            print("cnmf prepare:", case["id"], flush=True)
            facts = run_case(case, work)
            results.append(old[case["id"]] if only and case["id"] not in only and case["id"] in old else facts)
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump({"generator": "tests/scripts/make_golden_prepare_cli.py",
                   "cnmf": "cNMF 1.7.1 (dylkot/cNMF 5dbc5baa), Debian 12 numpy/scipy/pandas/anndata",
                   "cases": results}, f, indent=1)
    print("wrote", out_json)


if __name__ == "__main__":
    main()
