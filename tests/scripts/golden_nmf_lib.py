"""What the NMF golden generators share (make_golden_nmf.py, make_golden_beta.py,
make_golden_nndsvd.py): the synthetic count matrix and the real pbmcA norm_counts."""
import os

import h5py
import numpy as np
import scipy.sparse as sp


def synthetic(n, g, k, seed, zero_rows=(), zero_cols=()):
    """Poisson counts / 3 of a gamma-distributed W H, with the given rows/columns zeroed."""
    rs = np.random.RandomState(seed)
    W = rs.gamma(0.5, 1.0, size=(n, k))
    H = rs.gamma(0.3, 1.0, size=(k, g))
    X = rs.poisson(W @ H * 3.0).astype(np.float64) / 3.0
    for r in zero_rows:
        X[r, :] = 0
    for c in zero_cols:
        X[:, c] = 0
    return X


def load_norm_counts(real_dir):
    """cNMF's pbmcA.norm_counts.h5ad under tests/data/real as a scipy CSR matrix."""
    path = os.path.join(real_dir, "cnmf-pbmc-donor-a", "prepare", "pbmcA", "cnmf_tmp",
                        "pbmcA.norm_counts.h5ad")
    with h5py.File(path, "r") as f:
        g = f["X"]
        shape = tuple(g.attrs["shape"])
        X = sp.csr_matrix((g["data"][:], g["indices"][:], g["indptr"][:]), shape=shape)
    return X
