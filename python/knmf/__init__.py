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
import sys as _sys

from . import _knmf, tl
from ._api import (Consensus, Factorization, FactorizationError, KSelection, Prepared, cnmf_seeds,
                   consensus, factorize, k_selection, prepare, set_num_threads)

__version__ = _knmf.__version__
__all__ = ["Consensus", "Factorization", "FactorizationError", "KSelection", "Prepared",
           "cnmf_seeds", "consensus", "factorize", "k_selection", "prepare", "set_num_threads", "tl",
           "__version__"]



def _at_exit(wait_seconds=5.0):
    """Kokkos is finalized at exit only if knmf initialized it (results are numpy arrays: no
    View outlives a call). A knmf.factorize still running in a daemon thread is stopped at its
    next iteration (`wait_seconds` at most). A call still running then leaves Kokkos as it is
    (finalizing under it would abort the process), the process ends when the call leaves knmf
    (a long consensus or k_selection runs to its end), and knmf says so."""
    still, stopped = _knmf._finalize(wait_seconds)
    if (still or stopped) and _sys.stderr is not None:
        if still:
            line = (f"knmf: warning: {still} knmf call(s) still running in other threads at exit: "
                    "Kokkos is not finalized, the process ends when they leave knmf")
        else:
            line = (f"knmf: warning: {stopped} knmf call(s) running in other threads at exit "
                    "were stopped (their results are lost)")
        print(line, file=_sys.stderr, flush=True)


_atexit.register(_at_exit)
# OpenMP's threads do not survive fork: a child forked after knmf started them raises a clear
# error on its first knmf call instead of hanging.
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_knmf._after_fork_in_child)
