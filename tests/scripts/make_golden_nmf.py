#!/usr/bin/python3
"""Golden data for knmf's solver tests, from scikit-learn 1.2.1 (Debian python3-sklearn).

    /usr/bin/python3 tests/scripts/make_golden_nmf.py [--real tests/data/real]

Writes tests/data/nmf/golden.json (metadata, iteration counts, errors) and raw little-endian
float64 arrays tests/data/nmf/<case>.<name>.f64 (row-major, shapes in the JSON).
Synthetic matrices are stored too, so the synthetic tests need no other input; the real-matrix
cases read cNMF's prepared pbmcA norm_counts.h5ad from tests/data/real at test time.
"""
import argparse
import json
import os
import warnings

import h5py
import numpy as np
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
os.makedirs(out_dir, exist_ok=True)
meta = {"sklearn_version": sklearn.__version__, "numpy_version": np.__version__, "cases": {}}


def save(case, name, arr):
    arr = np.ascontiguousarray(arr, dtype="<f8")
    arr.tofile(os.path.join(out_dir, f"{case}.{name}.f64"))
    return list(arr.shape)




def nmf(X, k, seed, solver, tol, max_iter, aW=0.0, aH=0.0, l1=0.0):
    W, H, n_iter = non_negative_factorization(
        X, n_components=k, init="random", update_H=True, solver=solver, beta_loss="frobenius",
        tol=tol, max_iter=max_iter, random_state=seed, alpha_W=aW, alpha_H=aH, l1_ratio=l1)
    return W, H, n_iter


def frob(X, W, H):
    D = (X.toarray() if sp.issparse(X) else X) - W @ H
    return float(np.sqrt(np.sum(D * D)))


def add_run(case, X, k, seeds, solver, tol, max_iter, aW=0.0, aH=0.0, l1=0.0, keep_w=True):
    runs = []
    for s in seeds:
        W, H, n_iter = nmf(X, k, s, solver, tol, max_iter, aW, aH, l1)
        tag = f"s{s}"
        run = {"seed": s, "n_iter": int(n_iter), "final_error": frob(X, W, H),
               "H": save(case, tag + ".H", H)}
        if keep_w:
            run["W"] = save(case, tag + ".W", W)
        W0, H0 = _initialize_nmf(X, k, init="random", random_state=s)
        run["error_at_init"] = frob(X, W0, H0)
        runs.append(run)
    meta["cases"][case] = {"k": k, "solver": solver, "tol": tol, "max_iter": max_iter,
                           "alpha_W": aW, "alpha_H": aH, "l1_ratio": l1, "runs": runs}


def add_refit(case, X, H, solver, tol, max_iter, aW=0.0, l1=0.0):
    k = H.shape[0]
    W, _, n_iter = non_negative_factorization(
        X, H=H, n_components=k, update_H=False, solver=solver, beta_loss="frobenius", tol=tol,
        max_iter=max_iter, alpha_W=aW, alpha_H=0.0, l1_ratio=l1)
    meta["cases"][case] = {"k": k, "solver": solver, "tol": tol, "max_iter": max_iter,
                           "alpha_W": aW, "l1_ratio": l1, "n_iter": int(n_iter),
                           "H": save(case, "H", H), "W": save(case, "W", W),
                           "final_error": frob(X, W, H)}


# ---- synthetic matrices (stored) --------------------------------------------------------
Xs = synthetic(60, 40, 4, 7, zero_rows=(5,), zero_cols=(11, 12))
meta["synthetic"] = {"X": save("synth", "X", Xs)}
Xs2 = synthetic(37, 23, 3, 11)
meta["synthetic2"] = {"X": save("synth2", "X", Xs2)}

# init='random' (H first, then W; abs; avg = sqrt(mean/k))
inits = []
for k, s in [(4, 0), (4, 14), (5, 59886188), (3, 1812018521)]:
    W0, H0 = _initialize_nmf(Xs, k, init="random", random_state=s)
    inits.append({"k": k, "seed": s, "H": save("init_synth", f"k{k}s{s}.H", H0),
                  "W": save("init_synth", f"k{k}s{s}.W", W0)})
meta["cases"]["init_synth"] = {"runs": inits}

add_run("mu_synth_tol", Xs, 4, [1, 2, 3, 14], "mu", 1e-4, 1000)
add_run("mu_synth_fixed", Xs, 4, [1, 5], "mu", 0.0, 50)
add_run("mu_synth_reg", Xs, 4, [2, 9], "mu", 1e-4, 1000, aW=0.05, aH=0.1, l1=0.4)
add_run("mu_synth2_tol", Xs2, 5, [3, 4], "mu", 1e-5, 400)
add_run("cd_synth_tol", Xs, 4, [1, 2, 3, 14], "cd", 1e-4, 1000)
add_run("cd_synth_reg", Xs, 4, [2, 9], "cd", 1e-4, 1000, aW=0.05, aH=0.1, l1=0.4)
add_run("cd_synth2_fixed", Xs2, 3, [6], "cd", 0.0, 25)
_, Hmu, _ = nmf(Xs, 4, 3, "mu", 1e-4, 1000)
add_refit("refit_mu_synth", Xs, Hmu, "mu", 1e-4, 1000)
add_refit("refit_mu_synth_reg", Xs, Hmu, "mu", 1e-4, 1000, aW=0.02, l1=0.5)
add_refit("refit_cd_synth", Xs, Hmu, "cd", 1e-4, 1000)
add_refit("refit_cd_synth_reg", Xs, Hmu, "cd", 1e-4, 1000, aW=0.02, l1=0.5)

# ---- the real matrix: cNMF's prepared pbmcA norm_counts (read from tests/data/real by the tests) --
Xr = load_norm_counts(args.real)
meta["real"] = {"shape": list(Xr.shape), "nnz": int(Xr.nnz), "sum": float(Xr.sum()),
                "norm2": float(Xr.multiply(Xr).sum())}
W0, H0 = _initialize_nmf(Xr, 7, init="random", random_state=59886188)
meta["cases"]["init_real"] = {"runs": [{"k": 7, "seed": 59886188,
                                        "H": save("init_real", "H", H0),
                                        "W": save("init_real", "W", W0)}]}
add_run("mu_real_tol", Xr, 5, [59886188, 1812018521], "mu", 1e-4, 1000)
add_run("mu_real_fixed_reg", Xr, 6, [683264407], "mu", 0.0, 30, aW=0.001, aH=0.002, l1=0.5)
_, Hr, _ = nmf(Xr, 5, 59886188, "mu", 1e-4, 1000)
add_refit("refit_mu_real", Xr, Hr, "mu", 1e-4, 1000)
add_refit("refit_cd_real", Xr, Hr, "cd", 1e-4, 1000)

with open(os.path.join(out_dir, "golden.json"), "w") as f:
    json.dump(meta, f, indent=1)
print("wrote", out_dir)
