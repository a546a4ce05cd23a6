#!/usr/bin/python3
"""Golden data for knmf's beta-divergence MU (solver='mu', beta_loss != 2), from
scikit-learn 1.2.1 (Debian python3-sklearn).

    /usr/bin/python3 tests/scripts/make_golden_beta.py [--real tests/data/real]

Writes tests/data/nmf/golden_beta.json (cases, iteration counts, errors) and raw little-endian
float64 arrays tests/data/nmf/beta_<case>.<name>.f64 (row-major, shapes in the JSON). The
synthetic matrices are those of make_golden_nmf.py (tests/data/nmf/synth*.X.f64, read back
here so both generators agree), plus a strictly positive one stored here for
Itakura-Saito. The real cases read cNMF's prepared pbmcA norm_counts.h5ad from tests/data/real
(the tests read it there too). Errors are scikit-learn's `_beta_divergence(X, W, H, beta,
square_root=True)`, as `reconstruction_err_` reports them.
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
from sklearn.decomposition._nmf import _beta_divergence, _initialize_nmf
from golden_nmf_lib import load_norm_counts

warnings.filterwarnings("ignore")
here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.normpath(os.path.join(here, "..", "data", "nmf"))
ap = argparse.ArgumentParser()
ap.add_argument("--real", default=os.path.join(here, "..", "data", "real"))
args = ap.parse_args()
assert sklearn.__version__ == "1.2.1", sklearn.__version__
meta = {"sklearn_version": sklearn.__version__, "numpy_version": np.__version__, "cases": {}}


def save(name, arr):
    arr = np.ascontiguousarray(arr, dtype="<f8")
    arr.tofile(os.path.join(out_dir, f"beta_{name}.f64"))
    return list(arr.shape)


def stored(which):
    g = json.load(open(os.path.join(out_dir, "golden.json")))
    shape = g["synthetic" if which == "synth" else "synthetic2"]["X"]
    return np.fromfile(os.path.join(out_dir, f"{which}.X.f64"), dtype="<f8").reshape(shape)



def add_run(case, X, matrix, k, seeds, beta, tol, max_iter, aW=0.0, aH=0.0, l1=0.0,
            keep_w=True):
    runs = []
    for s in seeds:
        W, H, n_iter = non_negative_factorization(
            X, n_components=k, init="random", update_H=True, solver="mu", beta_loss=beta,
            tol=tol, max_iter=max_iter, random_state=s, alpha_W=aW, alpha_H=aH, l1_ratio=l1)
        W0, H0 = _initialize_nmf(X, k, init="random", random_state=s)
        run = {"seed": s, "n_iter": int(n_iter),
               "error_at_init": float(_beta_divergence(X, W0, H0, beta, square_root=True)),
               "final_error": float(_beta_divergence(X, W, H, beta, square_root=True)),
               "H": save(f"{case}.s{s}.H", H)}
        if keep_w:
            run["W"] = save(f"{case}.s{s}.W", W)
        runs.append(run)
        print(case, s, n_iter, run["final_error"])
    meta["cases"][case] = {"matrix": matrix, "sparse": bool(sp.issparse(X)), "k": k,
                           "beta_loss": beta, "tol": tol, "max_iter": max_iter,
                           "alpha_W": aW, "alpha_H": aH, "l1_ratio": l1, "runs": runs}


def add_refit(case, X, matrix, H, beta, tol, max_iter, aW=0.0, l1=0.0):
    k = H.shape[0]
    W, _, n_iter = non_negative_factorization(
        X, H=H, n_components=k, update_H=False, solver="mu", beta_loss=beta, tol=tol,
        max_iter=max_iter, alpha_W=aW, alpha_H=0.0, l1_ratio=l1)
    avg = np.sqrt(X.mean() / k)
    W0 = np.full((X.shape[0], k), avg)
    meta["cases"][case] = {"matrix": matrix, "sparse": bool(sp.issparse(X)), "k": k,
                           "beta_loss": beta, "tol": tol, "max_iter": max_iter,
                           "alpha_W": aW, "l1_ratio": l1, "n_iter": int(n_iter),
                           "H": save(f"{case}.H", H), "W": save(f"{case}.W", W),
                           "error_at_init": float(_beta_divergence(X, W0, H, beta, square_root=True)),
                           "final_error": float(_beta_divergence(X, W, H, beta, square_root=True))}
    print(case, n_iter)


Xs = stored("synth")    # 60 x 40, an empty row and two empty columns
Xs2 = stored("synth2")  # 37 x 23
# strictly positive (Itakura-Saito refuses zeros): synth2 plus a small floor
Xpos = Xs2 + 0.05
meta["positive"] = {"X": save("positive.X", Xpos)}

# Kullback-Leibler (beta = 1)
add_run("kl_synth", Xs, "synth", 4, [1, 2, 14], "kullback-leibler", 1e-4, 1000)
add_run("kl_synth_reg", Xs, "synth", 4, [2, 9], "kullback-leibler", 1e-4, 1000,
        aW=0.05, aH=0.1, l1=0.4)
add_run("kl_synth_fixed", Xs, "synth", 4, [5], "kullback-leibler", 0.0, 60)
add_run("kl_synth_sparse", sp.csr_matrix(Xs), "synth", 4, [1], "kullback-leibler", 1e-4, 1000)
add_run("kl_synth2_l2", Xs2, "synth2", 3, [3], 1.0, 1e-4, 500, aW=0.02, aH=0.03, l1=0.0)
# Itakura-Saito (beta = 0) on positive X
add_run("is_positive", Xpos, "positive", 3, [4, 7], "itakura-saito", 1e-4, 600)
# other betas (gamma != 1 for beta < 1 and beta > 2)
add_run("b05_synth", Xs, "synth", 4, [3], 0.5, 1e-4, 800)
add_run("b15_synth", Xs, "synth", 4, [3], 1.5, 1e-4, 800, aW=0.01, aH=0.01, l1=0.5)
add_run("b3_synth2", Xs2, "synth2", 3, [6], 3.0, 1e-4, 800)
add_run("bm05_positive_fixed", Xpos, "positive", 3, [8], -0.5, 0.0, 40)
# fixed-H refits (update_H=False): scikit-learn keeps H_sum over the iterations, so an l1
# term accumulates in it (beta 1)
_, Hkl, _ = non_negative_factorization(Xs, n_components=4, init="random", random_state=3,
                                       solver="mu", beta_loss="kullback-leibler", tol=1e-4,
                                       max_iter=1000)
add_refit("refit_kl_synth", Xs, "synth", Hkl, "kullback-leibler", 1e-4, 1000)
add_refit("refit_kl_synth_reg", Xs, "synth", Hkl, "kullback-leibler", 1e-4, 1000, aW=0.02, l1=0.5)
add_refit("refit_b05_synth", Xs, "synth", Hkl, 0.5, 1e-4, 1000)
# a wide X (fewer rows than columns: 40 x 60, synth transposed), as consensus refits the TPM
# spectra on TPM^T (genes x cells)
Xw = np.ascontiguousarray(Xs.T)
_, Hw, _ = non_negative_factorization(Xw, n_components=4, init="random", random_state=5,
                                      solver="mu", beta_loss="kullback-leibler", tol=1e-4,
                                      max_iter=1000)
add_refit("refit_kl_wide", Xw, "synth_t", Hw, "kullback-leibler", 1e-4, 1000)

# the real matrix (cNMF's prepared pbmcA norm_counts: 2,896 x 2,000), as CSR and dense
Xr = load_norm_counts(args.real)
meta["real"] = {"shape": list(Xr.shape), "nnz": int(Xr.nnz)}
add_run("kl_real_sparse", Xr, "real", 5, [59886188], "kullback-leibler", 1e-4, 200)
add_run("kl_real_dense", Xr.toarray(), "real", 5, [59886188], "kullback-leibler", 1e-4, 200)
add_run("kl_real_reg_sparse", Xr, "real", 4, [1812018521], "kullback-leibler", 0.0, 30,
        aW=0.001, aH=0.002, l1=0.5)

with open(os.path.join(out_dir, "golden_beta.json"), "w") as f:
    json.dump(meta, f, indent=1)
print("wrote", out_dir)
