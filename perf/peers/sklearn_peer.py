#!/usr/bin/python3
"""scikit-learn peer: ``cnmf factorize`` without cNMF, timed per job.

Runs scikit-learn's ``non_negative_factorization`` over a cNMF job table exactly as
``cNMF.factorize`` does: X = norm_counts.X as anndata loads it (CSR float64), the run
parameters from NAME.nmf_idvrun_params.yaml (cd, tol 1e-4, max_iter 1000, init random),
``random_state`` = the job's nmf_seed, ``n_components`` = k; one job after another in one
process (one cNMF worker).

Input: a prepared cNMF run (``--output-dir DIR --name NAME``) or an .h5ad plus the job
table arguments of ``cnmf prepare`` (``--h5ad F -k 5 6 --n-iter 20 --seed 14``).

    /usr/bin/python3 perf/peers/sklearn_peer.py --output-dir RUNS --name pbmcA \\
        --threads 1 --json sklearn_cd.json [--jobs 20] [--solver mu] [--write-spectra OUT]

The JSON holds one record per job (k, iter, seed, n_iter, err, rel_err, seconds of the
solver call alone) and totals (wall seconds of the whole process, sum of job seconds).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (stdlib only at import; numpy comes later)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    pc.add_input_args(p)
    s = p.add_argument_group("solver (defaults: the run's yaml; cNMF prepare's values for .h5ad input)")
    s.add_argument("--solver", choices=["cd", "mu"], help="override the yaml's solver")
    s.add_argument("--tol", type=float, help="override the yaml's tol")
    s.add_argument("--max-iter", type=int, help="override the yaml's max_iter")
    o = p.add_argument_group("run and output")
    o.add_argument("--threads", type=int, help="BLAS/OpenMP threads (threadpoolctl + env vars); default: library default")
    o.add_argument("--openblas-coretype", metavar="NAME", help="set OPENBLAS_CORETYPE (e.g. Haswell) before numpy loads")
    o.add_argument("--json", help="write the per-job records and totals here")
    o.add_argument("--write-spectra", metavar="DEST", help="write cNMF spectra files into DEST/NAME (a copy of the run)")
    o.add_argument("--save-factors", metavar="NPZ", help="save every job's W and H (W_<job>, H_<job>) to this .npz")
    o.add_argument("--quiet", action="store_true", help="no per-job progress lines")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    thread_record = pc.configure_threads(args.threads)
    pc.configure_openblas_coretype(args.openblas_coretype)

    import warnings

    import numpy as np
    import scipy
    import sklearn
    from sklearn.decomposition import non_negative_factorization
    from sklearn.exceptions import ConvergenceWarning

    limiter = pc.apply_threadpool_limits(args.threads)
    thread_record["threadpoolctl"] = limiter is not None
    t_imports = pc.seconds_since_start()

    t0 = pc.time.perf_counter()
    problem = pc.load_problem(args)
    jobs = pc.select_jobs(problem.jobs, args.jobs, args.worker_index, args.total_workers)
    load_seconds = pc.time.perf_counter() - t0

    # What cNMF passes: the yaml's kwargs, then random_state and n_components per job.
    nmf_kwargs = dict(problem.run_params)
    if args.solver:
        nmf_kwargs["solver"] = args.solver
    if args.tol is not None:
        nmf_kwargs["tol"] = args.tol
    if args.max_iter is not None:
        nmf_kwargs["max_iter"] = args.max_iter

    X = problem.X
    normX2 = pc.squared_norm_X(X)
    spectra_paths = pc.prepare_spectra_dir(problem, args.write_spectra) if args.write_spectra else None
    factors = {}

    records = []
    for job in jobs:
        kw = dict(nmf_kwargs, random_state=job.seed, n_components=job.k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t = pc.time.perf_counter()
            W, H, n_iter = non_negative_factorization(X, **kw)
            seconds = pc.time.perf_counter() - t
        err = pc.frobenius_error(X, W, H, normX2)
        rec = {
            "job": job.index,
            "k": job.k,
            "iter": job.iter,
            "seed": job.seed,
            "solver": kw["solver"],
            "n_iter": int(n_iter),
            "hit_max_iter": int(n_iter) >= kw["max_iter"],
            "err": err,
            "rel_err": err / np.sqrt(normX2),
            "seconds": seconds,
        }
        records.append(rec)
        if spectra_paths:
            pc.write_spectra(spectra_paths, problem.var_names, job, H)
        if args.save_factors:
            factors[f"W_{job.index}"] = W
            factors[f"H_{job.index}"] = H
        if not args.quiet:
            print(f"job {job.index:4d} k={job.k} iter={job.iter} seed={job.seed}: n_iter={n_iter} err={err:.10g} {seconds:.3f} s", flush=True)

    if args.save_factors:
        np.savez(args.save_factors, **factors)

    wall = pc.seconds_since_start()
    job_seconds = sum(r["seconds"] for r in records)
    totals = {
        "n_jobs": len(records),
        "wall_seconds": wall,
        "import_seconds": t_imports,
        "load_seconds": load_seconds,
        "sum_job_seconds": job_seconds,
        "sum_n_iter": sum(r["n_iter"] for r in records),
        "peak_rss_bytes": pc.peak_rss_bytes(),
    }
    report = {
        "peer": "sklearn",
        "versions": {"sklearn": sklearn.__version__, "numpy": np.__version__, "scipy": scipy.__version__},
        "input": dict(problem.source, n=int(X.shape[0]), g=int(X.shape[1]), format=type(X).__name__, dtype=str(X.dtype)),
        "nmf_kwargs": nmf_kwargs,
        "threads": dict(thread_record, pools=pc.threadpool_summary()),
        "selection": {"jobs": args.jobs, "worker_index": args.worker_index, "total_workers": args.total_workers},
        "spectra_dir": spectra_paths["run_dir"] if spectra_paths else None,
        "machine": pc.machine_context(),
        "jobs": records,
        "totals": totals,
    }
    pc.write_json(args.json, report)
    print(f"sklearn peer: {len(records)} jobs, solver {nmf_kwargs['solver']}, sum of jobs {job_seconds:.2f} s, wall {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
