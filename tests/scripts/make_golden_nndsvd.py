#!/usr/bin/python3
"""Golden data for knmf's NNDSVD initializations, from scikit-learn 1.2.1 (Debian python3-sklearn).

    /usr/bin/python3 tests/scripts/make_golden_nndsvd.py [--real tests/data/real]

Writes tests/data/nmf/nndsvd.json and raw little-endian float64 arrays
tests/data/nmf/nndsvd_<case>.<name>.f64 (row-major, shapes in the JSON):
  * `_initialize_nmf(X, k, init=nndsvd|nndsvda|nndsvdar, random_state=seed)` W0 and H0 on a
    tall synthetic X (n > g), a wide one (n < g: randomized_svd's transposed branch), a small
    one with k + 10 > min(n, g) (the range finder's LU/QR shrink to min(n, g) columns) and the
    real matrix of the solver tests (cNMF's pbmcA norm_counts, CSR, read from tests/data/real);
  * the same in float32 (X.astype(float32): scikit-learn then computes the SVD in float32);
  * full `non_negative_factorization(X, k, init='nndsvd', solver='cd'|'mu')` runs: n_iter, H, W.
The synthetic matrices are those of make_golden_nmf.py (synth) plus a wide one stored here.
Every init case is computed from the dense X and from its CSR form (safe_sparse_dot's sparse
path): the script records the largest difference between the two and fails above 1e-12.
"""
import argparse
import json
import os
import warnings

import h5py
import numpy as np
import scipy
import scipy.sparse as sp
import sklearn
from sklearn.decomposition import non_negative_factorization
from sklearn.decomposition._nmf import _initialize_nmf
from golden_nmf_lib import synthetic, load_norm_counts

warnings.filterwarnings("ignore")
here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.normpath(os.path.join(here, "..", "data", "nmf"))
ap = argparse.ArgumentParser()
ap.add_argument("--real", default=os.path.join(here, "..", "data", "real"))
args = ap.parse_args()
meta = {"sklearn_version": sklearn.__version__, "numpy_version": np.__version__,
        "scipy_version": scipy.__version__, "matrices": {}, "inits": {}, "runs": {}}


def save(name, arr):
    arr = np.ascontiguousarray(arr, dtype="<f8")
    arr.tofile(os.path.join(out_dir, f"nndsvd_{name}.f64"))
    return list(arr.shape)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))




worst_dense_vs_csr = 0.0


def add_init(case, X, k, seed, dtype=np.float64, variants=("nndsvd", "nndsvda", "nndsvdar")):
    """W0, H0 of each variant, from X as given (dense or CSR) in `dtype`; the other storage
    must agree."""
    global worst_dense_vs_csr
    Xd = X.toarray() if sp.issparse(X) else X
    Xd = Xd.astype(dtype)
    Xc = sp.csr_matrix(Xd)
    runs = []
    for v in variants:
        W, H = _initialize_nmf(Xc if sp.issparse(X) else Xd, k, init=v, random_state=seed)
        W2, H2 = _initialize_nmf(Xd if sp.issparse(X) else Xc, k, init=v, random_state=seed)
        d = max(rel(W2.astype(np.float64), W.astype(np.float64)),
                rel(H2.astype(np.float64), H.astype(np.float64)))
        assert d < (1e-12 if dtype == np.float64 else 1e-5), (case, v, d)
        if dtype == np.float64:
            worst_dense_vs_csr = max(worst_dense_vs_csr, d)
        tag = f"{case}.{v}"
        runs.append({"init": v, "W": save(tag + ".W", W), "H": save(tag + ".H", H),
                     "dense_vs_csr": d})
    meta["inits"][case] = {"k": k, "seed": seed, "dtype": np.dtype(dtype).name,
                           "n_iter_svd": 7 if k < 0.1 * min(X.shape) else 4,
                           "transposed": bool(X.shape[0] < X.shape[1]), "runs": runs}


def add_run(case, X, k, seed, solver, tol, max_iter, keep_w=True):
    W, H, n_iter = non_negative_factorization(
        X, n_components=k, init="nndsvd", update_H=True, solver=solver, beta_loss="frobenius",
        tol=tol, max_iter=max_iter, random_state=seed)
    W0, H0 = _initialize_nmf(X, k, init="nndsvd", random_state=seed)
    Xd = X.toarray() if sp.issparse(X) else X
    meta["runs"][case] = {"k": k, "seed": seed, "solver": solver, "tol": tol, "max_iter": max_iter,
                          "n_iter": int(n_iter), "H": save(case + ".H", H),
                          "error_at_init": float(np.linalg.norm(Xd - W0 @ H0)),
                          "final_error": float(np.linalg.norm(Xd - W @ H))}
    if keep_w:
        meta["runs"][case]["W"] = save(case + ".W", W)


# ---- matrices --------------------------------------------------------------------------------
Xs = synthetic(60, 40, 4, 7, zero_rows=(5,), zero_cols=(11, 12))  # = make_golden_nmf.py's synth
Xw = synthetic(30, 70, 5, 21, zero_rows=(2,), zero_cols=(40,))     # wide: the transposed branch
Xt = synthetic(37, 23, 3, 11)                                      # = make_golden_nmf.py's synth2
for name, X in (("tall", Xs), ("wide", Xw), ("small", Xt)):
    meta["matrices"][name] = {"X": save(name + ".X", X)}
Xr = load_norm_counts(args.real)
meta["matrices"]["real"] = {"shape": list(Xr.shape), "nnz": int(Xr.nnz)}

# ---- _initialize_nmf -----------------------------------------------------------------------
add_init("tall_k4_s1", Xs, 4, 1)                   # k = 0.1 min(n, g): 4 power iterations
add_init("tall_k3_s1812018521", Xs, 3, 1812018521)  # 7 power iterations
add_init("wide_k2_s14", Xw, 2, 14)
add_init("wide_k5_s59886188", Xw, 5, 59886188)
add_init("small_k15_s3", Xt, 15, 3)                # k + 10 = 25 > min(n, g) = 23
add_init("real_k7_s59886188", Xr, 7, 59886188)     # CSR, as cNMF hands it to scikit-learn
add_init("f32_tall_k4_s1", Xs, 4, 1, np.float32, ("nndsvd", "nndsvdar"))
add_init("f32_wide_k5_s59886188", Xw, 5, 59886188, np.float32, ("nndsvd",))
add_init("f32_real_k7_s59886188", Xr, 7, 59886188, np.float32, ("nndsvd",))
meta["worst_dense_vs_csr"] = worst_dense_vs_csr

# ---- full factorizations with init='nndsvd' ---------------------------------------------------
add_run("run_cd_tall", Xs, 4, 2, "cd", 1e-4, 1000)
add_run("run_mu_tall", Xs, 4, 2, "mu", 1e-4, 1000)
add_run("run_cd_wide", Xw, 5, 7, "cd", 1e-4, 1000)
add_run("run_cd_real", Xr, 5, 59886188, "cd", 1e-4, 1000, keep_w=False)
add_run("run_mu_real", Xr, 5, 59886188, "mu", 1e-4, 200, keep_w=False)

with open(os.path.join(out_dir, "nndsvd.json"), "w") as f:
    json.dump(meta, f, indent=1)
print("wrote", out_dir, "; dense vs CSR worst", worst_dense_vs_csr)
