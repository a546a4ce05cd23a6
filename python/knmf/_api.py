"""knmf.factorize and friends: the checks and the documented conversions of the inputs, then
the compiled core (knmf._knmf), which copies X once into the library's own arrays."""

import collections.abc
import numbers
import operator
import os
import sys

from . import _knmf

__all__ = ["Consensus", "Factorization", "FactorizationError", "KSelection", "Prepared",
           "cnmf_seeds", "consensus", "factorize", "k_selection", "prepare", "set_num_threads"]

# ------------------------------------------------------------------------ argument checks
# The contract (docs/python.md, "Errors"): an argument of the wrong type raises TypeError (a
# float, str or bool where an integer is expected: nothing is truncated; numpy's integer
# scalars are integers), a value of the right type out of range or unknown raises ValueError.
# Every argument is checked here, or by the library with its message, before it is handed on.

_INT_MAX = 2**31 - 1  # the library's counts (k, replicates, batch, genes, folds) are C ints
_SEED_MAX = 2**32 - 1  # numpy's RandomState: 0 <= seed < 2**32


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_bool(value):
    return isinstance(value, bool) or (type(value).__module__ == "numpy"
                                       and type(value).__name__ in ("bool_", "bool"))


def _integer(value, name, where, lo=-_INT_MAX - 1, hi=_INT_MAX, why=""):
    """value as a Python int: an int or a numpy integer (TypeError for anything else, a bool or
    a float included), within [lo, hi] (ValueError, `why` appended)."""
    try:
        if _is_bool(value):
            raise TypeError
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: {name} = {_show(value)} is invalid: expected an integer, "
                        f"not {type(value).__name__}") from None
    if lo is not None and v < lo:
        raise ValueError(f"{where}: {name} = {v} is invalid: it must be at least {lo}{why}")
    if hi is not None and v > hi:
        raise ValueError(f"{where}: {name} = {v} is invalid: it must be at most {hi}{why}")
    return v


_SEED = " (a seed lies in [0, 2**32), as numpy's RandomState takes it)"


def _real(value, name, where):
    """value as a float: an int, a float or a numpy real scalar (TypeError otherwise, a bool or
    a str included); its range is the library's to check."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} = {_show(value)} is invalid: expected a number, "
                        f"not {type(value).__name__}")
    return float(value)


def _flag(value, name, where):
    if not _is_bool(value):
        raise TypeError(f"{where}: {name} = {_show(value)} is invalid: expected True or False")
    return bool(value)


def _text(value, name, where):
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} = {_show(value)} is invalid: expected a str, "
                        f"not {type(value).__name__}")
    return str(value)


def _sequence(values, name, where):
    """A 1-D sequence's items as a list: TypeError for a str or a non-iterable, ValueError for
    more dimensions (an array of two, or items that are sequences)."""
    if hasattr(values, "ndim") and hasattr(values, "dtype"):  # a numpy array
        if values.ndim != 1:
            raise ValueError(f"{where}: {name} has {values.ndim} dimension(s), expected 1")
        return values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, collections.abc.Iterable):
        raise TypeError(f"{where}: {name} = {_show(values)} is invalid: expected a sequence")
    items = list(values)
    for v in items:
        if isinstance(v, (list, tuple)) or getattr(v, "ndim", 0) > 0:
            raise ValueError(f"{where}: {name} has more than one dimension, expected 1")
    return items


def _integers(values, name, where, lo=-_INT_MAX - 1, hi=_INT_MAX, why=""):
    """A 1-D sequence of integers (an integer numpy array, or items _integer takes)."""
    if hasattr(values, "dtype") and values.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} has values of type {values.dtype}, expected integers")
    return [_integer(v, f"{name}[{i}]", where, lo, hi, why)
            for i, v in enumerate(_sequence(values, name, where))]


def _names(values, name, where):
    """A sequence of str (names; bytes are not decoded: TypeError)."""
    items = _sequence(values, name, where)
    for i, v in enumerate(items):
        if not isinstance(v, str):
            raise TypeError(f"{where}: {name}[{i}] = {_show(v)} is invalid: expected a str")
    return [str(v) for v in items]


def _progress(progress, where):
    if progress is None or _is_bool(progress):
        return bool(progress)
    if not callable(progress):
        raise TypeError(f"{where}: progress = {_show(progress)} is invalid: expected True, "
                        "False, None or a callable taking a dict")
    return progress


def _real_values(dtype, name, where):
    """TypeError unless an array's values are real numbers: complex values would lose their
    imaginary part (numpy converts them with a warning only); strings and the like are no
    numbers. Object arrays are converted, and refused where that fails."""
    if dtype.kind == "c":
        raise TypeError(f"{where}: {name} has complex values ({dtype}); knmf takes real "
                        f"matrices (pass {name}.real or abs({name}) if that is what you mean)")
    if dtype.kind not in "biufO":
        raise TypeError(f"{where}: {name} has values of type {dtype}, expected real numbers")


def _as_real(a, dtype, name, where, order="K"):
    """a converted to `dtype` (numpy), its values checked by _real_values first."""
    _real_values(a.dtype, name, where)
    try:
        return a.astype(dtype, order=order)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: {name} has values that are not real numbers ({e})") from None


def _real_array(a, name, where, ndim):
    """a as a float64 numpy array of `ndim` dimensions."""
    np = _numpy()
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{where}: {name} has {a.ndim} dimension(s), expected {ndim}")
    return a if a.dtype == np.float64 else _as_real(a, np.float64, name, where)


def _compute_dtype(dtype, where):
    """float32 or float64 (numpy's scalar type) from a dtype or its name."""
    np = _numpy()
    try:
        t = np.dtype(dtype).type
    except (TypeError, ValueError):
        if isinstance(dtype, str):  # an unknown name
            raise ValueError(f"{where}: dtype = {_show(dtype)} is invalid: expected float32 or "
                             "float64") from None
        raise TypeError(f"{where}: dtype = {_show(dtype)} is invalid: expected a numpy dtype or "
                        "its name (float32 or float64)") from None
    if t not in (np.float32, np.float64):
        raise ValueError(f"{where}: dtype = {np.dtype(t).name} is invalid: expected float32 or "
                         "float64")
    return t


def _fits_in_memory(nbytes, what, where):
    """ValueError when `what` alone needs more bytes than this machine has."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if total > 0 and nbytes > total:
        raise ValueError(f"{where}: {what} would take {nbytes / 2**30:.1f} GiB, more than this "
                         f"machine's {total / 2**30:.1f} GiB of memory")


_option_kinds = None


def _solver_options(given, where):
    """The solver options as (name, text) pairs for the library, which parses and checks each
    (ValueError: an unknown name, a value out of range or unknown). Types are checked here:
    a str is any option's text (the driver's); an integer option takes an int, any other a
    number; a bool or anything else is a TypeError."""
    global _option_kinds
    if _option_kinds is None:
        _option_kinds = dict(_knmf.solver_option_kinds())
    out = []
    for name, v in given.items():
        kind = _option_kinds.get(name)
        if isinstance(v, str) or kind is None:  # unknown names: the library refuses them
            out.append((name, str(v)))
        elif kind == "integer":
            out.append((name, str(_integer(v, name, where, None, None))))
        elif not _is_bool(v) and isinstance(v, numbers.Integral):
            out.append((name, str(int(v))))
        else:
            out.append((name, repr(_real(v, name, where))))  # the shortest exact text
    return out


class FactorizationError(RuntimeError):
    """Some replicates are not valid factorizations (NaN or Inf reached: status non_finite),
    as the driver's exit status 1 says; `result` holds every replicate, those included."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def set_num_threads(n):
    """Threads of knmf's OpenMP backend: call before knmf's first computation (Kokkos reads
    it when it starts; OMP_NUM_THREADS otherwise). n from 1 to the most Kokkos' thread pool
    holds (_knmf.max_host_threads()), else ValueError. Later, a different n raises
    RuntimeError."""
    _knmf.set_num_threads(_integer(n, "n", "knmf.set_num_threads", None, None))


def cnmf_seeds(seed, n_iter, ks):
    """The seeds `cnmf prepare --seed SEED --n-iter N -k KS` writes into its job table:
    {k: [n_iter seeds]} (numpy's RandomState(seed).randint(1, 2**31 - 1), in cNMF's order),
    so knmf.factorize(X, k, seeds=cnmf_seeds(s, n, ks)[k]) reproduces a cNMF run."""
    where = "knmf.cnmf_seeds"
    seed = _integer(seed, "seed", where, 0, _SEED_MAX, _SEED)
    n_iter = _integer(n_iter, "n_iter", where, 1)
    ks = _integers(ks, "ks", where, 1)
    _fits_in_memory(32 * n_iter * len(ks), f"a job table of {n_iter} x {len(ks)} seeds", where)
    return _knmf.cnmf_seeds(seed, n_iter, ks)


class Factorization:
    """The replicates of one knmf.factorize call, in the order of their seeds. numpy owns
    every array.

    spectra  (R, k, g) float64   H of each replicate
    usages   (R, n, k) dtype     W of each replicate ((0, n, k) with save_usages=False)
    n_iter   (R,) int64          iterations run
    errors   (R,) float64        the final ||X - W H||_F
    errors_at_init (R,) float64  ||X - W0 H0||_F
    seeds    (R,) int64          each replicate's seed
    status   list of str         converged, max_iter or non_finite
    dtype                        the compute type
    x_format                     X's format in the library ('sparse' or 'dense') and why
    input_bytes_copied           bytes the whole-matrix conversions of X made before the
                                 library's own copy (0 for CSR and for C- or Fortran-ordered
                                 float arrays, whatever their widths)
    """

    def __init__(self, d, dtype, copied):
        self.spectra = d["spectra"]
        self.usages = d["usages"]
        self.n_iter = d["n_iter"]
        self.errors = d["errors"]
        self.errors_at_init = d["errors_at_init"]
        self.seeds = d["seeds"]
        self.status = list(d["status"])
        self.dtype = dtype
        self.x_format = (d["x_format"], d["x_format_reason"])
        self.input_bytes_copied = copied

    def __repr__(self):
        R, k, g = self.spectra.shape
        return (f"<knmf.Factorization: {R} replicate(s) of k = {k} over {g} genes, "
                f"{self.dtype.__name__}, mean n_iter {self.n_iter.mean():.1f}>")


def _numpy():
    import numpy as np  # numpy only when arrays are used: `import knmf` works without it

    return np


def _run_options(where, solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H, l1_ratio):
    """The run's solver options (what the consensus refits and the cross-validation use) as
    the module takes them: (name, text) pairs."""
    run = dict(solver=solver, beta_loss=beta_loss, init=init, tol=tol, max_iter=max_iter,
               alpha_W=alpha_W, alpha_H=alpha_H, l1_ratio=l1_ratio)
    return _solver_options(run, where)


def _as_array(X, name, where):
    """X as a numpy array (a list, ...; TypeError for what is no array of numbers: None, a
    str, an object)."""
    np = _numpy()
    a = np.asarray(X)
    if a.dtype.kind in "OUSV" and a.ndim == 0:
        raise TypeError(f"{where}: {name} = {_show(X)} is invalid: expected a numpy array or a "
                        "scipy.sparse matrix")
    return a


def _prepare_x(X, dtype, where):
    """X as the compiled core reads it: CSR arrays (int32 or int64 indices, in the order they
    are stored, as the driver reads a file's: the sums follow that order; float32 or float64
    values) or a C- or Fortran-ordered float32 / float64 array. Those
    are passed as they are (the core converts index widths and value types block by block
    while copying X into the library). Anything else is converted here, once. Returns (kind,
    arrays, compute dtype, bytes those conversions copied). Unsorted indices are not sorted:
    the driver does not sort them either, and sorting would change the order of the sums."""
    np = _numpy()
    copied = 0
    floats = (np.float32, np.float64)
    sp = sys.modules.get("scipy.sparse")
    if sp is None and type(X).__module__.startswith("scipy.sparse"):
        import scipy.sparse as sp
    if sp is not None and sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"X has {X.ndim} dimensions, expected 2 (cells x genes)")
        _real_values(X.dtype, "X", where)
        if X.format != "csr":
            X = X.tocsr()  # CSC, COO, ...: converted once
            copied += X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        if dtype is None:
            dtype = X.dtype.type if X.dtype in floats else np.float64
        indptr, indices, data = X.indptr, X.indices, X.data
        if data.dtype not in floats:
            data = _as_real(data, dtype, "X", where)
            copied += data.nbytes
        arrays = []
        for a in (indptr, indices, data):
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
                copied += a.nbytes
            arrays.append(a)
        n, g = X.shape
        return "csr", (int(n), int(g), *arrays), dtype, copied
    if not isinstance(X, np.ndarray):
        X = _as_array(X, "X", where)
        copied += X.nbytes
    if X.ndim != 2:
        raise ValueError(f"X has {X.ndim} dimension(s), expected 2 (cells x genes)")
    _real_values(X.dtype, "X", where)
    if dtype is None:
        dtype = X.dtype.type if X.dtype in floats else np.float64
    if X.dtype not in floats:
        X = _as_real(X, dtype, "X", where, order="C")
        copied += X.nbytes
    elif not (X.flags.c_contiguous or X.flags.f_contiguous):
        X = np.ascontiguousarray(X)  # strided views: one C-ordered copy
        copied += X.nbytes
    return "dense", (X,), dtype, copied


def _progress_printer(total):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(total=total, unit="replicate")

        def show(p):
            bar.n = p["done"]
            bar.set_postfix(k=p["k"], running=p["running"])
            bar.refresh()
            if p["done"] == p["total"]:
                bar.close()

        return show

    def show(p):
        print(f"knmf: k = {p['k']}: {p['done']}/{p['total']} replicates done, "
              f"{p['running']} running, {p['seconds']:.1f} s", file=sys.stderr, flush=True)

    return show


def factorize(X, k, *, seeds=None, n_replicates=None, seed=14, solver="cd",
              beta_loss="frobenius", init="random", tol=1e-4, max_iter=1000, alpha_W=0.0,
              alpha_H="same", l1_ratio=0.0, dtype=None, batch=None, inner_sweeps=1,
              progress=False, save_usages=True, format="auto", **options):
    """Factorize X (cells x genes: numpy float32/float64 in C or Fortran order, or a
    scipy.sparse matrix or array, CSR or CSC, int32 or int64 indices) at rank k, once per
    seed, with the batched solver: the driver's `knmf factorize` in memory.

    seeds: the replicates' seeds (e.g. cnmf_seeds(s, n, ks)[k]); or n_replicates (default 1)
    seeds drawn as cNMF draws them from `seed`. The solver options are scikit-learn's NMF
    names (solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H, l1_ratio) and the
    driver's (inner_sweeps, and in **options: check_every, zero_guard, eps, inner_alpha,
    inner_eps), with the driver's defaults. dtype: the compute type (default: X's when it is
    float32 or float64, else float64). batch: replicates per batch (None: planned from the
    memory model, as the driver). progress: True for a progress bar (tqdm when installed,
    else lines on stderr) or a callable taking a dict. Ctrl-C stops the run between two
    iterations (KeyboardInterrupt). An argument of the wrong type raises TypeError, a value
    out of range or unknown ValueError (with the driver's message where the library checks
    it; docs/python.md, "Errors").
    """
    np = _numpy()
    where = "knmf.factorize"
    k = _integer(k, "k", where, 1, None)  # and at most min(cells, genes), checked below
    if seeds is not None and n_replicates is not None:
        raise ValueError(f"{where}: give seeds or n_replicates, not both")
    if seeds is None:  # drawn below, once X and the results' memory are checked
        R = 1 if n_replicates is None else _integer(n_replicates, "n_replicates", where, 1)
        seed = _integer(seed, "seed", where, 0, _SEED_MAX, _SEED)
    else:
        seeds = _integers(seeds, "seeds", where, 0, _SEED_MAX, _SEED)
        R = len(seeds)
        if R == 0 or R > _INT_MAX:
            raise ValueError(f"{where}: {R} seeds: from 1 to {_INT_MAX} replicates are run")
    if dtype is not None:
        dtype = _compute_dtype(dtype, where)
    batch = 0 if batch is None else _integer(batch, "batch", where, 1)
    progress = _progress(progress, where)
    save_usages = _flag(save_usages, "save_usages", where)
    format = _text(format, "format", where)
    given = dict(solver=solver, beta_loss=beta_loss, init=init, tol=tol, max_iter=max_iter,
                 alpha_W=alpha_W, alpha_H=alpha_H, l1_ratio=l1_ratio, inner_sweeps=inner_sweeps)
    given.update(options)
    opts = _solver_options(given, where)
    kind, parts, dtype, copied = _prepare_x(X, dtype, where)
    n, g = (parts[0], parts[1]) if kind == "csr" else parts[0].shape
    if n == 0 or g == 0:
        raise ValueError(f"X is empty ({n} cells x {g} genes)")
    if k > min(n, g):  # the library's check, here for a k beyond its int as well
        raise ValueError(f"k = {k} exceeds min(cells, genes) = {min(n, g)} of X")
    # every replicate's H (and W) in double in the library, then in the numpy arrays returned
    usages = R * n * k * (8 + np.dtype(dtype).itemsize) if save_usages else 0
    _fits_in_memory(R * k * g * 16 + usages, f"the results of {R} replicate(s)", where)
    if seeds is None:
        seeds = cnmf_seeds(seed, R, [1])[1]  # one k's seeds: the same for every k
    jobs = [(k, i, s) for i, s in enumerate(seeds)]
    if progress is True:
        progress = _progress_printer(len(seeds))
    elif progress is False:
        progress = None
    name = "float32" if dtype == np.float32 else "float64"
    call = getattr(_knmf, f"_factorize_{kind}")
    d = call(*parts, name, jobs, opts, batch, format, save_usages, progress, 0.5)
    res = Factorization(d, dtype, copied)
    failed = [int(s) for s, st in zip(res.seeds, res.status) if st == "non_finite"]
    if failed:
        raise FactorizationError(
            f"{len(failed)} of {len(res.status)} replicate(s) of k = {k} reached NaN or Inf and "
            f"are not factorizations (seeds {', '.join(map(str, failed[:5]))}"
            f"{', ...' if len(failed) > 5 else ''}); the error's .result holds them all", res)
    return res


class Prepared:
    """`cnmf prepare`'s results in memory (knmf.prepare): numpy owns every array.

    norm_counts   scipy CSR float64, cells x selected genes: counts of the overdispersed genes,
                  each gene scaled to unit variance (cNMF's norm_counts; the matrix to factorize)
    genes         int32, the input column of each of its columns (sorted)
    gene_names    their names
    gene_std      the standard deviation each column was divided by
    tpm           scipy CSR float32, cells x all genes: counts per million (cNMF's TPM)
    stats         dict of per-gene TPM statistics over all genes: mean, var, fano,
                  expected_fano, fano_ratio (the v-score), high_var (1: selected), A, B
    cells         int64, the input row of each row
    """

    def __init__(self, d, obs_names, var_names):
        sp = _scipy_sparse()
        self.norm_counts = sp.csr_matrix(
            (d["norm_counts"]["data"], d["norm_counts"]["indices"], d["norm_counts"]["indptr"]),
            shape=d["norm_counts"]["shape"])
        self.tpm = sp.csr_matrix((d["tpm"]["data"], d["tpm"]["indices"], d["tpm"]["indptr"]),
                                 shape=d["tpm"]["shape"])
        self.genes = d["genes"]
        self.gene_names = list(d["gene_names"])
        self.gene_std = d["gene_std"]
        self.stats = dict(d["stats"])
        self.cells = d["cells"]
        self.obs_names = obs_names
        self.var_names = var_names
        self.zero_cells = int(d["zero_cells"])
        self.zero_genes = int(d["zero_genes"])

    def __repr__(self):
        n, g = self.norm_counts.shape
        return f"<knmf.Prepared: {n} cells x {g} overdispersed genes of {self.tpm.shape[1]}>"


def _scipy_sparse():
    import scipy.sparse as sp

    return sp


def _counts_arrays(X, name, where):
    """The counts as the compiled core reads them (prepare): CSR arrays or a C- / Fortran-
    ordered array, int32 / int64 / float32 / float64 values, read where they are; other real
    values converted once (to float32, as the driver's readers read them)."""
    np = _numpy()
    kinds = (np.float32, np.float64, np.int32, np.int64)
    sp = sys.modules.get("scipy.sparse")
    if sp is None and type(X).__module__.startswith("scipy.sparse"):
        sp = _scipy_sparse()
    empty = np.zeros(0, dtype=np.int64)
    if sp is not None and sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{where}: {name} have {X.ndim} dimension(s), expected 2 (cells x genes)")
        _real_values(X.dtype, name, where)
        if X.format != "csr":
            X = X.tocsr()
        data = X.data if X.data.dtype in kinds else _as_real(X.data, np.float32, name, where)
        arrays = [np.ascontiguousarray(a) for a in (X.indptr, X.indices, data)]
        return "csr", X.shape, arrays
    X = _as_array(X, name, where)
    if X.ndim != 2:
        raise ValueError(f"{where}: {name} have {X.ndim} dimension(s), expected 2 (cells x genes)")
    if X.dtype not in kinds:
        X = _as_real(X, np.float32, name, where, order="C")
    if X.flags.c_contiguous:
        return "dense_rows", X.shape, [empty, empty, X.reshape(-1)]
    if X.flags.f_contiguous:
        return "dense_columns", X.shape, [empty, empty, X.reshape(-1, order="F")]
    X = np.ascontiguousarray(X)
    return "dense_rows", X.shape, [empty, empty, X.reshape(-1)]


def _layer(data, layer, where):
    """The AnnData's matrix: .X, or .layers[layer] (ValueError naming the layers it has)."""
    if layer is None:
        return data.X
    layer = _text(layer, "layer", where)
    if layer not in data.layers:
        have = ", ".join(repr(str(k)) for k in data.layers.keys()) or "none"
        raise ValueError(f"{where}: layer {layer!r} is not one of the AnnData's layers ({have})")
    return data.layers[layer]


def prepare(data, numgenes=2000, *, genes=None, layer=None, obs_names=None, var_names=None,
            tpm=None):
    """`knmf prepare` (cNMF's `cnmf prepare`) in memory: from raw counts (cells x genes), the
    overdispersed genes, their unit-variance normalized counts (what knmf.factorize takes),
    the TPM and its statistics, with the driver's arithmetic and refusals (ValueError).

    data: an AnnData (its .X, or .layers[layer]; its obs and var names) or a numpy array /
    scipy.sparse matrix of counts (int or float; obs_names / var_names optional). numgenes:
    the overdispersed genes to select (--numgenes); genes: a list of gene names to use
    instead (--genes-file). tpm: a pre-computed TPM of the same cells and genes (--tpm; an
    AnnData, whose genes must be the counts', or a numpy array / scipy.sparse matrix) used
    instead of the one computed from the counts."""
    where = "knmf.prepare"
    numgenes = _integer(numgenes, "numgenes", where, 1)
    genes = [] if genes is None else _names(genes, "genes", where)
    if hasattr(data, "obs_names") and hasattr(data, "var_names") and hasattr(data, "X"):
        X = _layer(data, layer, where)
        obs_names = [str(s) for s in data.obs_names]
        var_names = [str(s) for s in data.var_names]
    else:
        if layer is not None:
            raise ValueError(f"{where}: layer= needs an AnnData")
        X = data
    kind, shape, arrays = _counts_arrays(X, "counts", where)
    n, g = int(shape[0]), int(shape[1])
    obs = _names(obs_names, "obs_names", where) if obs_names is not None else []
    var = _names(var_names, "var_names", where) if var_names is not None else []
    if obs and len(obs) != n:
        raise ValueError(f"obs_names has {len(obs)} names for {n} cells")
    if var and len(var) != g:
        raise ValueError(f"var_names has {len(var)} names for {g} genes")
    given = ()
    if tpm is not None:
        t_var = []
        if hasattr(tpm, "var_names") and hasattr(tpm, "X"):
            t_var, tpm = [str(s) for s in tpm.var_names], tpm.X
        t_kind, t_shape, t_arrays = _counts_arrays(tpm, "tpm", where)
        given = (t_kind, int(t_shape[0]), int(t_shape[1]), *t_arrays, t_var)
    d = _knmf._prepare(kind, n, g, *arrays, obs, var, numgenes, genes, "counts", given)
    return Prepared(d, obs or [str(i) for i in range(n)], var or [str(j) for j in range(g)])


class Consensus:
    """cNMF's consensus of one k in memory (knmf.consensus); numpy owns every array.

    spectra        (k, g) float64: the consensus spectra over X's genes, rows sum to 1
                   (cNMF's spectra.k_K.dt_T.consensus), programs ordered by total usage
    usages         (n, k): cNMF's usages (float32 when refitted from a float32 TPM, as cNMF)
    spectra_tpm    (k, genes) over the TPM's genes (gene_spectra_tpm), with a TPM
    spectra_score  (k, genes) z-scored gene scores (gene_spectra_score), with a TPM
    starcat        (k, g) starCAT reference spectra, with a TPM
    prediction_error, silhouette; local_density, nonzero_rows, used_rows: the filter's
    """

    def __init__(self, d):
        self.__dict__.update({k: v for k, v in d.items() if k != "warnings"})
        self.warnings = list(d["warnings"])
        for name in ("spectra_tpm", "spectra_score", "starcat"):
            self.__dict__.setdefault(name, None)

    def __repr__(self):
        k, g = self.spectra.shape
        return f"<knmf.Consensus: k = {k} over {g} genes, {self.usages.shape[0]} cells>"


def _csr_parts(X, name, where):
    """X (scipy.sparse or dense, cells x genes) as CSR arrays the compiled core reads: int32 /
    int64 / float32 / float64 values as they are, other real values as float64."""
    sp = _scipy_sparse()
    np = _numpy()
    kinds = (np.float32, np.float64, np.int32, np.int64)
    if not sp.issparse(X):
        X = _as_array(X, name, where)
    if X.ndim != 2:
        raise ValueError(f"{where}: {name} has {X.ndim} dimension(s), expected 2 (cells x genes)")
    _real_values(X.dtype, name, where)
    if not sp.issparse(X):
        X = sp.csr_matrix(X if X.dtype in kinds else _as_real(X, np.float64, name, where))
    elif X.format != "csr":
        X = X.tocsr()
    data = X.data if X.data.dtype in kinds else _as_real(X.data, np.float64, name, where)
    n, g = X.shape
    return (int(n), int(g), np.ascontiguousarray(X.indptr), np.ascontiguousarray(X.indices),
            np.ascontiguousarray(data))


def _spectra_stack(S, k, name, where):
    """(R, k, g) real spectra as the (R k, g) float64 rows the compiled core takes."""
    S = _real_array(S.spectra if isinstance(S, Factorization) else S, name, where, 3)
    if S.size == 0 or (k is not None and S.shape[1] != k):
        want = "(R, k, genes), none of them 0" if k is None else f"(R, {k}, genes), R and genes > 0"
        raise ValueError(f"{where}: {name} have shape {S.shape}, expected {want}")
    return _numpy().ascontiguousarray(S.reshape(-1, S.shape[2])), S.shape


def consensus(data, spectra, *, tpm=None, hvg_columns=None, gene_std=None,
              density_threshold=0.5, local_neighborhood_size=0.30, solver="cd",
              beta_loss="frobenius", init="random", tol=1e-4, max_iter=1000, alpha_W=0.0,
              alpha_H="same", l1_ratio=0.0):
    """`knmf consensus` (cNMF's `cnmf consensus`) of one k in memory, through the driver's
    consensus: the replicate spectra clustered (local-density filter, k-means), the median
    spectra, the usages refitted on X, and with a TPM its spectra, gene scores and starCAT
    spectra.

    data: a knmf.Prepared (X = its norm_counts, with its TPM, HVG columns and gene std) or X
    itself (scipy.sparse or numpy, cells x genes of the spectra). spectra: a
    knmf.Factorization, or its (R, k, g) spectra. tpm: cells x all genes (with hvg_columns:
    the TPM column of each of X's genes, and gene_std: each TPM gene's std; default computed
    from the TPM). The solver options are the run's (cNMF's defaults), as the refits use them."""
    np = _numpy()
    where = "knmf.consensus"
    rows, (R, k, g) = _spectra_stack(spectra, None, "spectra", where)
    if isinstance(data, Prepared):
        X = data.norm_counts
        if tpm is None:
            tpm = data.tpm
            hvg_columns = data.genes if hvg_columns is None else hvg_columns
            gene_std = np.sqrt(data.stats["var"]) if gene_std is None else gene_std
    else:
        X = data
    parts = _csr_parts(X, "X", where)
    if parts[1] != g:
        raise ValueError(f"spectra have {g} genes, X has {parts[1]}")
    tpm_parts = None
    if tpm is not None:
        tpm_parts = _csr_parts(tpm, "tpm", where)
        if hvg_columns is None:
            raise ValueError("tpm= needs hvg_columns= (the TPM column of each of X's genes)")
    hvg = [] if hvg_columns is None else _integers(hvg_columns, "hvg_columns", where, 0)
    std = [] if gene_std is None else _real_array(gene_std, "gene_std", where, 1).tolist()
    density_threshold = _real(density_threshold, "density_threshold", where)
    local_neighborhood_size = _real(local_neighborhood_size, "local_neighborhood_size", where)
    run = _run_options(where, solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H,
                       l1_ratio)
    d = _knmf._consensus(*parts, rows, k, tpm_parts, hvg, std, run, density_threshold,
                         local_neighborhood_size)
    return Consensus(d)


class KSelection:
    """cNMF's k-selection table in memory (knmf.k_selection), one entry per k:

    k, silhouette (stability), prediction_error (||X - W H||^2 of the consensus refit),
    cv_prediction_error and cv_prediction_error_sd (bi-cross-validation, when asked; NaN
    otherwise), cv_errors (each held-out block's), cv_choice (the k cross-validation chooses,
    0 without it), stable_k (the k of the largest silhouette)."""

    def __init__(self, d):
        np = _numpy()
        self.__dict__.update(d)
        self.cv_errors = list(d["cv_errors"])
        self.cv_choice = int(d["cv_choice"])
        self.stable_k = int(self.k[int(np.nanargmax(self.silhouette))]) if len(self.k) else 0

    def __repr__(self):
        return (f"<knmf.KSelection: k = {list(map(int, self.k))}, most stable k = {self.stable_k}"
                + (f", cross-validation chooses k = {self.cv_choice}>" if self.cv_choice else ">"))


def k_selection(data, spectra, *, cross_validate=False, cv_folds=(2, 2), cv_replicates=1,
                cv_seed=14, cv_rule="3se", density_threshold=0.5,
                local_neighborhood_size=0.30, solver="cd", beta_loss="frobenius",
                init="random", tol=1e-4, max_iter=1000, alpha_W=0.0, alpha_H="same",
                l1_ratio=0.0):
    """`knmf k-selection` (cNMF's `k_selection_plot` statistics) in memory: for every k, the
    stability (silhouette of the replicate spectra's clustering) and the prediction error of
    the consensus refit; with cross_validate=True also the bi-cross-validation of X at every
    k (the driver's --cross-validate: cv_folds cells x genes groups, cv_replicates, cv_seed)
    and the k it chooses (cv_rule, the driver's --cv-rule: "3se", the smallest k within three
    pooled standard errors of the smallest mean; "1se", within one paired standard error;
    "min", the smallest mean).

    data: a knmf.Prepared or X (cells x genes of the spectra). spectra: {k: knmf.Factorization
    or (R, k, g) array}, or a list of Factorizations. The solver options are the run's."""
    where = "knmf.k_selection"
    if isinstance(spectra, dict):
        runs = {_integer(k, "spectra's k", where, 1): S for k, S in spectra.items()}
    else:
        if isinstance(spectra, (str, bytes)) or not isinstance(spectra, collections.abc.Iterable):
            raise TypeError(f"{where}: spectra = {_show(spectra)} is invalid: expected a dict "
                            "{k: spectra} or a list of knmf.Factorization")
        runs = {}
        for i, f in enumerate(spectra):
            if not isinstance(f, Factorization):
                raise TypeError(f"{where}: spectra[{i}] = {_show(f)} is invalid: expected a "
                                "knmf.Factorization (arrays: give a dict {k: spectra})")
            k = int(f.spectra.shape[1])
            if k in runs:
                raise ValueError(f"{where}: spectra holds two Factorizations of k = {k}")
            runs[k] = f
    if not runs:
        raise ValueError(f"{where}: spectra is empty: no k to select from")
    ks = sorted(runs)
    stacks = [_spectra_stack(runs[k], k, f"the spectra of k = {k}", where)[0] for k in ks]
    X = data.norm_counts if isinstance(data, Prepared) else data
    cross_validate = _flag(cross_validate, "cross_validate", where)
    folds = _integers(cv_folds, "cv_folds", where)
    if len(folds) != 2:
        raise ValueError(f"{where}: cv_folds = {_show(cv_folds)} is invalid: expected two "
                         "numbers (cell groups, gene groups)")
    cv_replicates = _integer(cv_replicates, "cv_replicates", where)
    cv_seed = _integer(cv_seed, "cv_seed", where, 0, 2**63 - 1)
    cv_rule = _text(cv_rule, "cv_rule", where)
    density_threshold = _real(density_threshold, "density_threshold", where)
    local_neighborhood_size = _real(local_neighborhood_size, "local_neighborhood_size", where)
    run = _run_options(where, solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H,
                       l1_ratio)
    d = _knmf._k_selection(*_csr_parts(X, "X", where), stacks, ks, run, density_threshold,
                           local_neighborhood_size, cross_validate, folds[0], folds[1],
                           cv_replicates, cv_seed, cv_rule)
    return KSelection(d)
