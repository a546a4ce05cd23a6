"""knmf from Python: consensus NMF's batched factorization (Kokkos; OpenMP or CUDA) on numpy
arrays and scipy.sparse matrices in memory, with the driver's numbers. See docs/python.md.

    import knmf
    res = knmf.factorize(X, 7, n_replicates=20, seed=14)   # X: cells x genes
    res.spectra.shape                                       # (20, 7, genes)

Kokkos starts on knmf's first computation (knmf.set_num_threads(n) before it, otherwise
OMP_NUM_THREADS) and stops at interpreter exit when knmf started it.
"""

import atexit as _atexit
import os as _os

from . import _knmf, tl
from ._api import (Consensus, Factorization, FactorizationError, KSelection, Prepared, cnmf_seeds,
                   consensus, factorize, k_selection, prepare, set_num_threads)

__version__ = _knmf.__version__
__all__ = ["Consensus", "Factorization", "FactorizationError", "KSelection", "Prepared",
           "cnmf_seeds", "consensus", "factorize", "k_selection", "prepare", "set_num_threads", "tl",
           "__version__"]

# Kokkos is finalized at exit only if knmf initialized it (every View is released by then:
# results are numpy arrays, no View outlives a call).
_atexit.register(_knmf._finalize)
# OpenMP's threads do not survive fork: a child forked after knmf started them raises a clear
# error on its first knmf call instead of hanging.
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_knmf._after_fork_in_child)
