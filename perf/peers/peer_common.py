"""Shared pieces of knmf's peer harness (sklearn_peer.py, torch_mu_peer.py).

Everything a peer needs to read a problem the way cNMF does, build cNMF's job table,
reproduce scikit-learn's ``init='random'`` starting point, time and report.

numpy, pandas, anndata, ... are imported lazily inside the functions: a peer parses its
command line and calls ``configure_threads()`` first, so that OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS are in the environment before numpy's BLAS is loaded.

Runs with Debian's /usr/bin/python3 (numpy 1.24, scipy 1.10, scikit-learn 1.2.1,
pandas 1.5, anndata 0.8, PyYAML, threadpoolctl, python3-torch 1.13).
"""

import argparse
import itertools
import json
import os
import platform
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

# Process start, as close as we can get to it: peers import this module first.
T_START = time.perf_counter()
LOADAVG_AT_START = list(os.getloadavg())

# cNMF prepare's run parameters for beta_loss='frobenius' (what
# cnmf_tmp/NAME.nmf_idvrun_params.yaml holds for the runs knmf targets).
CNMF_DEFAULT_RUN_PARAMS = dict(
    alpha_H=0.0,
    alpha_W=0.0,
    beta_loss="frobenius",
    init="random",
    l1_ratio=0.0,
    max_iter=1000,
    solver="cd",
    tol=1e-4,
)


# --------------------------------------------------------------------------- threads

_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def configure_openblas_coretype(coretype: Optional[str]) -> Optional[str]:
    """OPENBLAS_CORETYPE for OpenBLAS' DYNAMIC_ARCH kernel choice. Call BEFORE numpy.

    The kernel family changes the last bits of every BLAS product. On this project's
    machines (Cooper Lake CPUs) OpenBLAS picks its Cooperlake kernels; ``Haswell``
    reproduces the spectra of the reference cNMF run of pbmc-donor-a bit for bit.
    """
    if coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    return coretype


def configure_threads(threads: Optional[int]) -> dict:
    """Pin BLAS/OpenMP thread counts. Call BEFORE numpy (or torch) is imported.

    Sets the environment variables (always, so that every library loaded later sees
    them) and returns a small record of what was done. ``apply_threadpool_limits()``
    later adds a threadpoolctl limit when threadpoolctl is importable.
    """
    if threads is None:
        return {"requested": None, "env": {}}
    if threads < 1:
        raise SystemExit(f"--threads: must be >= 1, got {threads}")
    if "numpy" in sys.modules:
        print("warning: numpy already imported; thread env vars may not apply", file=sys.stderr)
    for var in _THREAD_ENV:
        os.environ[var] = str(threads)
    return {"requested": threads, "env": {v: str(threads) for v in _THREAD_ENV}}


def apply_threadpool_limits(threads: Optional[int]):
    """threadpoolctl limit (kept alive by the caller) or None when not requested/available."""
    if threads is None:
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=threads)


def threadpool_summary() -> list:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [
        {
            "api": i.get("internal_api"),
            "threads": i.get("num_threads"),
            "lib": os.path.basename(i.get("filepath", "")),
            "architecture": i.get("architecture"),
        }
        for i in threadpool_info()
    ]


# --------------------------------------------------------------------------- jobs


@dataclass
class Job:
    """One replicate: row ``index`` of cNMF's job table."""

    index: int
    k: int
    iter: int
    seed: int


def build_job_table(ks, n_iter: int, seed: Optional[int]) -> List[Job]:
    """cNMF ``prepare``'s job table (cNMF.get_nmf_iter_params), exactly.

    ``np.random.seed(seed); seeds = np.random.randint(1, 2**31 - 1, size=len(ks) * n_iter)``
    then jobs over ``itertools.product(sorted(set(ks)), range(n_iter))``. ``size`` counts
    the k values as given (repeats included); the product uses the unique sorted set.
    """
    import numpy as np

    ks = [int(k) for k in ks]
    k_list = sorted(set(ks))
    n_runs = len(ks) * n_iter
    np.random.seed(seed=seed)
    seeds = np.random.randint(low=1, high=(2**31) - 1, size=n_runs)
    return [Job(i, int(k), int(r), int(seeds[i])) for i, (k, r) in enumerate(itertools.product(k_list, range(n_iter)))]


def load_df_npz(path):
    """cNMF's load_df_from_npz: ``pd.DataFrame(**np.load(path, allow_pickle=True))``."""
    import numpy as np
    import pandas as pd

    with np.load(path, allow_pickle=True) as f:
        return pd.DataFrame(**f)


def save_df_npz(df, path):
    """cNMF's save_df_to_npz, written to a temporary name and renamed into place."""
    import numpy as np

    tmp = path[: -len(".npz")] + ".tmp-peer.npz" if path.endswith(".npz") else path + ".tmp-peer.npz"
    np.savez_compressed(tmp, data=df.values, index=df.index.values, columns=df.columns.values)
    os.replace(tmp, path)


def read_job_table(path) -> List[Job]:
    df = load_df_npz(path)
    return [
        Job(i, int(row["n_components"]), int(row["iter"]), int(row["nmf_seed"])) for i, (_, row) in enumerate(df.iterrows())
    ]


def parse_job_spec(spec: Optional[str], n_total: int) -> List[int]:
    """``--jobs``: ``N`` = the first N jobs; ``a-b,c,...`` = those indices (``7-7`` is job 7)."""
    if spec is None:
        return list(range(n_total))
    spec = spec.strip()
    if spec.isdigit():
        return list(range(min(int(spec), n_total)))
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if lo > hi:
                raise SystemExit(f"--jobs: empty range '{part}'")
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    for i in out:
        if not 0 <= i < n_total:
            raise SystemExit(f"--jobs: job {i} outside the table (0..{n_total - 1})")
    return out


def select_jobs(jobs: List[Job], spec, worker_index: int, total_workers: int) -> List[Job]:
    """``--jobs`` selection, then cNMF's worker_filter: ``(i - worker_index) % total_workers == 0``."""
    if total_workers < 1 or not 0 <= worker_index < total_workers:
        raise SystemExit(f"--worker-index {worker_index} / --total-workers {total_workers}: invalid")
    chosen = [jobs[i] for i in parse_job_spec(spec, len(jobs))]
    return [j for j in chosen if (j.index - worker_index) % total_workers == 0]


# --------------------------------------------------------------------------- inputs


def add_input_args(parser: argparse.ArgumentParser, synthetic: bool = False):
    g = parser.add_argument_group("input (a cNMF run directory, an .h5ad + job table args" + (", or --synthetic)" if synthetic else ")"))
    g.add_argument("--output-dir", help="cNMF --output-dir (reads OUTPUT_DIR/NAME/cnmf_tmp/NAME.*)")
    g.add_argument("--name", help="cNMF --name of the run; for other inputs the NAME --write-spectra uses (default peer)")
    g.add_argument("--h5ad", help="normalized cells x genes .h5ad (used as is, like NAME.norm_counts.h5ad)")
    if synthetic:
        g.add_argument("--synthetic", nargs=2, type=int, metavar=("N", "G"), help="dense synthetic X, N cells x G genes")
        g.add_argument("--synthetic-seed", type=int, default=1, help="seed of the synthetic generator (default 1)")
    g.add_argument("-k", "--components", type=int, nargs="+", help="k values (h5ad/synthetic input), as cnmf prepare -k")
    g.add_argument("--n-iter", type=int, default=100, help="replicates per k (h5ad/synthetic input; cNMF default 100)")
    g.add_argument("--seed", type=int, default=None, help="cnmf prepare --seed (h5ad/synthetic input)")
    g.add_argument("--jobs", help="N = first N jobs of the table; or a list 'a-b,c' of job indices")
    g.add_argument("--worker-index", type=int, default=0, help="cnmf factorize --worker-index (default 0)")
    g.add_argument("--total-workers", type=int, default=1, help="cnmf factorize --total-workers (default 1)")


@dataclass
class Problem:
    X: object  # scipy.sparse.csr_matrix or numpy.ndarray, exactly as handed to the solver
    var_names: list
    jobs: List[Job]  # the full table (selection happens later)
    run_params: dict
    source: dict
    run_dir: Optional[str] = None  # OUTPUT_DIR/NAME for run-directory input
    name: str = "peer"
    extra: dict = field(default_factory=dict)


def run_paths(output_dir, name):
    tmp = os.path.join(output_dir, name, "cnmf_tmp")
    return {
        "run_dir": os.path.join(output_dir, name),
        "norm_counts": os.path.join(tmp, f"{name}.norm_counts.h5ad"),
        "run_params": os.path.join(tmp, f"{name}.nmf_idvrun_params.yaml"),
        "job_table": os.path.join(tmp, f"{name}.nmf_params.df.npz"),
        "spectra": os.path.join(tmp, f"{name}.spectra.k_%d.iter_%d.df.npz"),
    }


def _read_h5ad_X(path):
    """X and var names as cNMF's ``sc.read(path)`` yields them (anndata.read_h5ad)."""
    import anndata

    a = anndata.read_h5ad(path)
    return a.X, list(a.var.index)


def load_problem(args, synthetic_dtype=None) -> Problem:
    """Read the input named by add_input_args()' options."""
    import numpy as np
    import yaml

    if getattr(args, "synthetic", None):
        if args.output_dir or args.h5ad:
            raise SystemExit("--synthetic excludes --output-dir/--h5ad")
        n, g = args.synthetic
        if not args.components:
            raise SystemExit("--synthetic needs -k/--components")
        X = synthetic_matrix(n, g, args.synthetic_seed, synthetic_dtype or "float64")
        jobs = build_job_table(args.components, args.n_iter, args.seed)
        return Problem(
            X=X,
            var_names=[f"g{j}" for j in range(g)],
            jobs=jobs,
            run_params=dict(CNMF_DEFAULT_RUN_PARAMS),
            source={"kind": "synthetic", "n": n, "g": g, "seed": args.synthetic_seed, "dtype": str(X.dtype)},
            name=args.name or "peer",
        )
    if args.output_dir:
        if not args.name:
            raise SystemExit("run-directory input needs both --output-dir and --name")
        if args.h5ad or args.components:
            raise SystemExit("--output-dir/--name excludes --h5ad and -k (the job table comes from the run)")
        p = run_paths(args.output_dir, args.name)
        for key in ("norm_counts", "run_params", "job_table"):
            if not os.path.isfile(p[key]):
                raise SystemExit(f"{p[key]}: missing (is this a prepared cNMF run?)")
        X, var_names = _read_h5ad_X(p["norm_counts"])
        with open(p["run_params"]) as f:
            run_params = yaml.load(f, Loader=yaml.FullLoader)
        jobs = read_job_table(p["job_table"])
        return Problem(
            X=X,
            var_names=var_names,
            jobs=jobs,
            run_params=run_params,
            source={"kind": "cnmf-run", "output_dir": os.path.abspath(args.output_dir), "name": args.name},
            run_dir=p["run_dir"],
            name=args.name,
        )
    if args.h5ad:
        if not args.components:
            raise SystemExit("--h5ad needs -k/--components (and --n-iter, --seed) to build the job table")
        X, var_names = _read_h5ad_X(args.h5ad)
        if X.dtype != np.float64:
            # cNMF prepare stores norm_counts as float64; factorize hands that to sklearn.
            X = X.astype(np.float64)
        return Problem(
            X=X,
            var_names=var_names,
            jobs=build_job_table(args.components, args.n_iter, args.seed),
            run_params=dict(CNMF_DEFAULT_RUN_PARAMS),
            source={"kind": "h5ad", "path": os.path.abspath(args.h5ad), "ks": args.components, "n_iter": args.n_iter, "seed": args.seed},
            name=args.name or "peer",
        )
    raise SystemExit("no input: give --output-dir DIR --name NAME, or --h5ad FILE -k ...")


def synthetic_matrix(n: int, g: int, seed: int, dtype="float64", chunk: int = 8192):
    """Dense non-negative n x g matrix shaped like knmf's perf/bench_common.cpp generator.

    Gene j belongs to planted program j % 10; each cell picks programs a (weight 2) and b
    (weight 1) out of 10; x_ij = (2[p==a] + [p==b] + 0.1) * U(0, 1). Same shape, density
    (fully dense) and value distribution as knmf's; not the same random stream.
    """
    import numpy as np

    X = np.empty((n, g), dtype=dtype)
    rng = np.random.RandomState(seed)
    prog = np.arange(g) % 10
    for r0 in range(0, n, chunk):
        r1 = min(n, r0 + chunk)
        a = rng.randint(0, 10, size=r1 - r0)
        b = rng.randint(0, 10, size=r1 - r0)
        base = 2.0 * (prog[None, :] == a[:, None]) + 1.0 * (prog[None, :] == b[:, None]) + 0.1
        X[r0:r1] = base * rng.random_sample((r1 - r0, g))
    return X


def x_mean(X) -> float:
    """``X.mean()`` as scikit-learn's _initialize_nmf takes it (the same call on the same
    object for sparse or float64 X; float64 accumulation for a float32 array)."""
    import numpy as np
    import scipy.sparse as sp

    if sp.issparse(X) or X.dtype == np.float64:
        return float(X.mean())
    return float(X.mean(dtype=np.float64))


def sklearn_random_init(mean: float, n: int, g: int, k: int, seed: int):
    """scikit-learn 1.2.1 ``_initialize_nmf(init='random')`` for float64 X, in numpy.

    ``avg = sqrt(X.mean() / k)``; RandomState(seed); H = avg * N(0,1) (k x g) drawn FIRST,
    then W = avg * N(0,1) (n x k); absolute values. Returns float64 (W, H): cast to the
    compute dtype afterwards (knmf's rule for float32).
    """
    import numpy as np

    avg = np.sqrt(mean / k)
    rng = np.random.RandomState(seed)
    H = avg * rng.standard_normal(size=(k, g))
    W = avg * rng.standard_normal(size=(n, k))
    np.abs(H, out=H)
    np.abs(W, out=W)
    return W, H


def squared_norm_X(X) -> float:
    """||X||_F^2 (sparse: ``X.multiply(X).sum()``, the form the reference jsonl used)."""
    import numpy as np
    import scipy.sparse as sp

    if sp.issparse(X):
        return float(X.multiply(X).sum())
    return float(np.einsum("ij,ij->", X, X, dtype=np.float64))


def frobenius_error(X, W, H, normX2: float) -> float:
    """||X - WH||_F by the identity of docs/numerics.md (no n x g temporary).

    ``sqrt(max(||X||^2 - 2 <W^T X, H> + <W^T W, H H^T>, 0))``, evaluated as
    ``np.sum((W.T @ X) * H)`` etc.: for cNMF's pbmcA run this is bit-identical to the
    ``err`` column of the reference sklearn_*_jobs.jsonl.
    """
    import numpy as np

    cross = np.sum((W.T @ X) * H)
    gram = np.sum((W.T @ W) * (H @ H.T))
    return float(np.sqrt(max(normX2 - 2 * cross + gram, 0)))


# --------------------------------------------------------------------------- outputs


def prepare_spectra_dir(problem: Problem, dest_output_dir: str) -> dict:
    """A writable cNMF run directory DEST/NAME for ``--write-spectra DEST``.

    Run-directory input: a copy of the source run (made once; an existing copy is reused).
    h5ad input: DEST/NAME/cnmf_tmp with the job table, the run yaml and a symlink
    NAME.norm_counts.h5ad -> the input, i.e. what ``cnmf prepare`` would have left.
    Never writes into the source run directory.
    """
    import pandas as pd
    import yaml

    paths = run_paths(dest_output_dir, problem.name)
    dest = os.path.realpath(paths["run_dir"])
    if problem.run_dir and os.path.realpath(problem.run_dir) == dest:
        raise SystemExit(f"--write-spectra {dest_output_dir}: that is the source run; give a different directory")
    if os.path.isdir(paths["run_dir"]):
        if not os.path.isdir(os.path.join(paths["run_dir"], "cnmf_tmp")):
            raise SystemExit(f"{paths['run_dir']}: exists but is not a cNMF run directory")
        return paths
    if problem.run_dir:
        shutil.copytree(problem.run_dir, paths["run_dir"])
        # the source may be read-only (e.g. /work/shared): make the copy writable
        for root, dirs, files in os.walk(paths["run_dir"]):
            for n in dirs + files:
                p = os.path.join(root, n)
                os.chmod(p, os.stat(p).st_mode | 0o200)
        os.chmod(paths["run_dir"], os.stat(paths["run_dir"]).st_mode | 0o200)
        return paths
    os.makedirs(os.path.join(paths["run_dir"], "cnmf_tmp"))
    table = pd.DataFrame(
        [[j.k, j.iter, j.seed, False] for j in problem.jobs], columns=["n_components", "iter", "nmf_seed", "completed"]
    )
    save_df_npz(table, paths["job_table"])
    with open(paths["run_params"], "w") as f:
        yaml.dump(problem.run_params, f)
    if problem.source.get("path"):
        os.symlink(problem.source["path"], paths["norm_counts"])
    return paths


def write_spectra(paths: dict, var_names, job: Job, H):
    """cnmf_tmp/NAME.spectra.k_K.iter_R.df.npz exactly as cNMF factorize writes it."""
    import numpy as np
    import pandas as pd

    df = pd.DataFrame(np.asarray(H, dtype=np.float64), index=np.arange(1, job.k + 1), columns=var_names)
    save_df_npz(df, paths["spectra"] % (job.k, job.iter))


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def machine_context() -> dict:
    ctx = {
        "host": platform.node(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": LOADAVG_AT_START,
        "loadavg_at_end": list(os.getloadavg()),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    ctx["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return ctx


def write_json(path: Optional[str], obj: dict):
    if not path:
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def seconds_since_start() -> float:
    """Seconds since this process started (interpreter start-up and imports included).

    From /proc (10 ms resolution); falls back to the time since this module was imported.
    """
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - T_START
