"""knmf.factorize and friends: the checks and the documented conversions of the inputs, then
the compiled core (knmf._knmf), which copies X once into the library's own arrays."""

import sys

from . import _knmf

__all__ = ["Consensus", "Factorization", "FactorizationError", "KSelection", "Prepared",
           "cnmf_seeds", "consensus", "factorize", "k_selection", "prepare", "set_num_threads"]


class FactorizationError(RuntimeError):
    """Some replicates are not valid factorizations (NaN or Inf reached: status non_finite),
    as the driver's exit status 1 says; `result` holds every replicate, those included."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def set_num_threads(n):
    """Threads of knmf's OpenMP backend: call before knmf's first computation (Kokkos reads
    it when it starts; OMP_NUM_THREADS otherwise). Later, a different n raises RuntimeError."""
    _knmf.set_num_threads(int(n))


def cnmf_seeds(seed, n_iter, ks):
    """The seeds `cnmf prepare --seed SEED --n-iter N -k KS` writes into its job table:
    {k: [n_iter seeds]} (numpy's RandomState(seed).randint(1, 2**31 - 1), in cNMF's order),
    so knmf.factorize(X, k, seeds=cnmf_seeds(s, n, ks)[k]) reproduces a cNMF run."""
    return _knmf.cnmf_seeds(int(seed), int(n_iter), [int(k) for k in ks])


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


def _option_text(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)  # shortest text that reads back as the same double
    return str(v)


def _run_options(solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H, l1_ratio):
    """The run's solver options (what the consensus refits and the cross-validation use) as
    the module takes them: (name, text) pairs."""
    run = dict(solver=solver, beta_loss=beta_loss, init=init, tol=tol, max_iter=max_iter,
               alpha_W=alpha_W, alpha_H=alpha_H, l1_ratio=l1_ratio)
    return [(n, _option_text(v)) for n, v in run.items()]


def _prepare_x(X, dtype):
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
        if X.format != "csr":
            X = X.tocsr()  # CSC, COO, ...: converted once
            copied += X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        if dtype is None:
            dtype = X.dtype.type if X.dtype in floats else np.float64
        indptr, indices, data = X.indptr, X.indices, X.data
        if data.dtype not in floats:
            data = data.astype(dtype)
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
        X = np.asarray(X)
        copied += X.nbytes
    if X.ndim != 2:
        raise ValueError(f"X has {X.ndim} dimension(s), expected 2 (cells x genes)")
    if dtype is None:
        dtype = X.dtype.type if X.dtype in floats else np.float64
    if X.dtype not in floats:
        X = np.ascontiguousarray(X, dtype=dtype)
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
    iterations (KeyboardInterrupt). Bad input raises ValueError with the driver's message.
    """
    np = _numpy()
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k = {k!r} is invalid: expected an integer")
    k = int(k)
    if k < 1:
        raise ValueError(f"k = {k} is invalid: it must be at least 1")
    if seeds is not None and n_replicates is not None:
        raise ValueError("give seeds or n_replicates, not both")
    if seeds is None:
        n = 1 if n_replicates is None else int(n_replicates)
        if n < 1:
            raise ValueError(f"n_replicates = {n} is invalid: it must be at least 1")
        seeds = cnmf_seeds(seed, n, [k])[k]
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds is empty")
    if dtype is not None:
        dtype = np.dtype(dtype).type
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype = {np.dtype(dtype).name} is invalid: expected float32 or float64")
    kind, parts, dtype, copied = _prepare_x(X, dtype)
    given = dict(solver=solver, beta_loss=beta_loss, init=init, tol=tol, max_iter=max_iter,
                 alpha_W=alpha_W, alpha_H=alpha_H, l1_ratio=l1_ratio, inner_sweeps=inner_sweeps)
    given.update(options)
    opts = [(name, _option_text(v)) for name, v in given.items()]
    jobs = [(k, i, s) for i, s in enumerate(seeds)]
    if batch is None:
        batch = 0
    elif int(batch) < 1:
        raise ValueError(f"batch = {batch} is invalid: it must be at least 1")
    if progress is True:
        progress = _progress_printer(len(seeds))
    elif progress is False:
        progress = None
    name = "float32" if dtype == np.float32 else "float64"
    call = getattr(_knmf, f"_factorize_{kind}")
    d = call(*parts, name, jobs, opts, int(batch), str(format), bool(save_usages), progress, 0.5)
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


def _counts_arrays(X):
    """The counts as the compiled core reads them (prepare): CSR arrays or a C- / Fortran-
    ordered array, int32 / int64 / float32 / float64 values, read where they are; anything
    else converted once."""
    np = _numpy()
    kinds = (np.float32, np.float64, np.int32, np.int64)
    sp = sys.modules.get("scipy.sparse")
    if sp is None and type(X).__module__.startswith("scipy.sparse"):
        sp = _scipy_sparse()
    empty = np.zeros(0, dtype=np.int64)
    if sp is not None and sp.issparse(X):
        if X.format != "csr":
            X = X.tocsr()
        data = X.data if X.data.dtype in kinds else X.data.astype(np.float32)
        arrays = [np.ascontiguousarray(a) for a in (X.indptr, X.indices, data)]
        return "csr", X.shape, arrays
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"counts have {X.ndim} dimension(s), expected 2 (cells x genes)")
    if X.dtype not in kinds:
        X = np.ascontiguousarray(X, dtype=np.float32)
    if X.flags.c_contiguous:
        return "dense_rows", X.shape, [empty, empty, X.reshape(-1)]
    if X.flags.f_contiguous:
        return "dense_columns", X.shape, [empty, empty, X.reshape(-1, order="F")]
    X = np.ascontiguousarray(X)
    return "dense_rows", X.shape, [empty, empty, X.reshape(-1)]


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
    if hasattr(data, "obs_names") and hasattr(data, "var_names") and hasattr(data, "X"):
        X = data.layers[layer] if layer is not None else data.X
        obs_names = [str(s) for s in data.obs_names]
        var_names = [str(s) for s in data.var_names]
    else:
        if layer is not None:
            raise ValueError("layer= needs an AnnData")
        X = data
    kind, shape, arrays = _counts_arrays(X)
    n, g = int(shape[0]), int(shape[1])
    obs = [str(s) for s in obs_names] if obs_names is not None else []
    var = [str(s) for s in var_names] if var_names is not None else []
    if obs and len(obs) != n:
        raise ValueError(f"obs_names has {len(obs)} names for {n} cells")
    if var and len(var) != g:
        raise ValueError(f"var_names has {len(var)} names for {g} genes")
    given = ()
    if tpm is not None:
        t_var = []
        if hasattr(tpm, "var_names") and hasattr(tpm, "X"):
            t_var, tpm = [str(s) for s in tpm.var_names], tpm.X
        t_kind, t_shape, t_arrays = _counts_arrays(tpm)
        given = (t_kind, int(t_shape[0]), int(t_shape[1]), *t_arrays, t_var)
    d = _knmf._prepare(kind, n, g, *arrays, obs, var, int(numgenes),
                       [str(s) for s in (genes or [])], "counts", given)
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


def _csr_parts(X):
    sp = _scipy_sparse()
    np = _numpy()
    if not sp.issparse(X):
        X = sp.csr_matrix(np.asarray(X))
    elif X.format != "csr":
        X = X.tocsr()
    n, g = X.shape
    return (int(n), int(g), np.ascontiguousarray(X.indptr), np.ascontiguousarray(X.indices),
            np.ascontiguousarray(X.data))


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
    if isinstance(spectra, Factorization):
        spectra = spectra.spectra
    S = np.asarray(spectra, dtype=np.float64)
    if S.ndim != 3:
        raise ValueError(f"spectra has {S.ndim} dimension(s), expected (replicates, k, genes)")
    R, k, g = S.shape
    if isinstance(data, Prepared):
        X = data.norm_counts
        if tpm is None:
            tpm = data.tpm
            hvg_columns = data.genes if hvg_columns is None else hvg_columns
            gene_std = np.sqrt(data.stats["var"]) if gene_std is None else gene_std
    else:
        X = data
    parts = _csr_parts(X)
    if parts[1] != g:
        raise ValueError(f"spectra have {g} genes, X has {parts[1]}")
    tpm_parts = None
    if tpm is not None:
        tpm_parts = _csr_parts(tpm)
        if hvg_columns is None:
            raise ValueError("tpm= needs hvg_columns= (the TPM column of each of X's genes)")
    run = _run_options(solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H, l1_ratio)
    d = _knmf._consensus(*parts, np.ascontiguousarray(S.reshape(R * k, g)), int(k), tpm_parts,
                         [int(c) for c in (hvg_columns if hvg_columns is not None else [])],
                         [float(v) for v in (gene_std if gene_std is not None else [])], run,
                         float(density_threshold), float(local_neighborhood_size))
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
    np = _numpy()
    if not isinstance(spectra, dict):
        spectra = {int(f.spectra.shape[1]): f for f in spectra}
    ks = sorted(int(k) for k in spectra)
    stacks = []
    for k in ks:
        S = spectra[k].spectra if isinstance(spectra[k], Factorization) else spectra[k]
        S = np.asarray(S, dtype=np.float64)
        if S.ndim != 3 or S.shape[1] != k:
            raise ValueError(f"the spectra of k = {k} have shape {S.shape}, expected (R, {k}, genes)")
        stacks.append(np.ascontiguousarray(S.reshape(-1, S.shape[2])))
    X = data.norm_counts if isinstance(data, Prepared) else data
    run = _run_options(solver, beta_loss, init, tol, max_iter, alpha_W, alpha_H, l1_ratio)
    p, q = cv_folds
    d = _knmf._k_selection(*_csr_parts(X), stacks, ks, run, float(density_threshold),
                           float(local_neighborhood_size), bool(cross_validate), int(p), int(q),
                           int(cv_replicates), int(cv_seed), str(cv_rule))
    return KSelection(d)
