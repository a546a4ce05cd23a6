#!/usr/bin/python3
"""PyTorch peer: batched-replicate Frobenius MU in the style of cNMF's GPU (torch) engine.

R replicates of one k run together against one shared dense X (moved to the device once):
W is [R, n, k], H is [R, k, g], and every product is one batched call
(torch.bmm / torch.matmul; X H^T and W^T X for all replicates are single (R k)-row GEMMs).
Per iteration, scikit-learn's order: W from the old H, then H from the new W:

    W <- W * (X H^T) / guard(W (H H^T))        H <- H * (W^T X) / guard((W^T W) H)

guard = ``add-eps`` (default, the engine's rule: + eps, eps = 1e-9) or ``replace-zero``
(scikit-learn's rule: entries exactly 0 become float32 eps, nothing added otherwise).
Every 10 iterations the error comes from the identity
``||X - WH||^2 = ||X||^2 - 2 <W^T X, H> + <W^T W, H H^T>`` (W^T X, W^T W from the H
update; only H H^T is new), summed in float64.

Modes:
  fixed       --tol 0 --max-iter N: every replicate runs exactly N iterations (what the
              benchmarks compare at equal iterations). Errors are still formed every 10
              iterations (kept on the device; --no-error-checks drops them).
  convergence --tol T > 0: the engine's per-batch rule: error_at_init is the error after
              the first 10 iterations; at each later 10th iteration the batch stops when
              EVERY replicate has (previous - error) / error_at_init < T at that same
              check (no per-replicate freezing: replicates that met T keep updating, so a
              replicate's result depends on its batch mates; scikit-learn/knmf differ).

Input: a cNMF run (--output-dir/--name), an .h5ad + -k/--n-iter/--seed, or --synthetic N G
(+ -k/--n-iter/--seed). Init: --init sklearn = scikit-learn's init='random' drawn with
numpy's RandomState(seed) in float64 then cast (knmf's starting points); --init torch =
avg * |randn| from a torch.Generator seeded with the job seed.

    /usr/bin/python3 perf/peers/torch_mu_peer.py --synthetic 20000 2000 -k 10 --n-iter 4 \\
        --seed 1 --batch 4 --max-iter 50 --tol 0 --dtype float32 --threads 2 --json out.json
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402  (stdlib only at import; numpy/torch come later)

EPS_FLOAT32 = 1.1920928955078125e-07  # np.finfo(np.float32).eps, scikit-learn's EPSILON


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    pc.add_input_args(p, synthetic=True)
    s = p.add_argument_group("solver")
    s.add_argument("--max-iter", type=int, help="iterations cap (default: the run's max_iter, 1000)")
    s.add_argument("--tol", type=float, help="0 = fixed iterations; > 0 = engine convergence rule (default: the run's tol)")
    s.add_argument("--batch", type=int, default=8, help="replicates per batch R (jobs of one k; default 8)")
    s.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    s.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda, cuda:1, ...")
    s.add_argument("--init", choices=["sklearn", "torch"], default="sklearn", help="starting point (default sklearn)")
    s.add_argument("--zero-guard", choices=["add-eps", "replace-zero"], default="add-eps", help="denominator guard (default add-eps)")
    s.add_argument("--eps", type=float, default=1e-9, help="eps of --zero-guard add-eps (default 1e-9)")
    s.add_argument("--no-error-checks", action="store_true", help="fixed mode: skip the every-10-iterations error")
    o = p.add_argument_group("run and output")
    o.add_argument("--threads", type=int, help="torch intra-op + BLAS threads (default: torch's default)")
    o.add_argument("--openblas-coretype", metavar="NAME", help="set OPENBLAS_CORETYPE before BLAS loads")
    o.add_argument("--json", help="write per-batch timings and totals here")
    o.add_argument("--save-factors", metavar="NPZ", help="save every job's W and H (float64; W_<job>, H_<job>)")
    o.add_argument("--write-spectra", metavar="DEST", help="write cNMF spectra files into DEST/NAME")
    o.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


class BatchedMU:
    """Frobenius MU on R replicates sharing X. Tensors: X [n, g], W [R, n, k], H [R, k, g]."""

    def __init__(self, X, normX2, zero_guard="add-eps", eps=1e-9):
        import torch

        self.torch = torch
        self.X = X
        self.Xt = X.t()  # a view: the GEMMs read X transposed, nothing is copied
        self.normX2 = normX2
        self.add_eps = zero_guard == "add-eps"
        self.eps = eps

    def _guard(self, den):
        if self.add_eps:
            return den.add_(self.eps)
        return den.masked_fill_(den == 0, EPS_FLOAT32)

    def _wtx(self, Wt):
        """W^T X for all replicates as ONE (R k) x n x g GEMM, laid out [R, k, g].

        torch.matmul on the transposed [R, k, n] view does not fold the batch (it runs R
        thin GEMMs, ~2.5x slower here); the explicit reshape copies only R k n values.
        """
        R, k, n = Wt.shape
        return self.torch.mm(Wt.reshape(R * k, n), self.X).view(R, k, -1)

    def step(self, W, H, want_error=False):
        """One iteration in place; on error iterations also returns the [R] float64 errors."""
        torch = self.torch
        HHt = torch.bmm(H, H.transpose(1, 2))
        XHt = torch.matmul(H, self.Xt).transpose(1, 2)
        W.mul_(XHt.div_(self._guard(torch.bmm(W, HHt))))
        del XHt
        Wt = W.transpose(1, 2)
        WtX = self._wtx(Wt)
        WtW = torch.bmm(Wt, W)
        den = self._guard(torch.bmm(WtW, H))
        if want_error:
            H.mul_(WtX / den)
            HHt = torch.bmm(H, H.transpose(1, 2))
            cross = torch.sum(WtX * H, dim=(1, 2), dtype=torch.float64)
            gram = torch.sum(WtW * HHt, dim=(1, 2), dtype=torch.float64)
            return torch.sqrt(torch.clamp(self.normX2 - 2.0 * cross + gram, min=0.0))
        H.mul_(WtX.div_(den))
        return None

    def error(self, W, H):
        """||X - W H||_F per replicate (float64 [R]) by the identity."""
        torch = self.torch
        WtX = self._wtx(W.transpose(1, 2))
        WtW = torch.bmm(W.transpose(1, 2), W)
        HHt = torch.bmm(H, H.transpose(1, 2))
        cross = torch.sum(WtX * H, dim=(1, 2), dtype=torch.float64)
        gram = torch.sum(WtW * HHt, dim=(1, 2), dtype=torch.float64)
        return torch.sqrt(torch.clamp(self.normX2 - 2.0 * cross + gram, min=0.0))


def main(argv=None):
    args = parse_args(argv)
    thread_record = pc.configure_threads(args.threads)
    pc.configure_openblas_coretype(args.openblas_coretype)

    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    limiter = pc.apply_threadpool_limits(args.threads)
    thread_record["threadpoolctl"] = limiter is not None
    thread_record["torch_threads"] = torch.get_num_threads()
    t_imports = pc.seconds_since_start()

    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    t0 = pc.time.perf_counter()
    problem = pc.load_problem(args, synthetic_dtype=args.dtype)
    jobs = pc.select_jobs(problem.jobs, args.jobs, args.worker_index, args.total_workers)
    for key in ("alpha_W", "alpha_H"):
        if float(problem.run_params.get(key, 0.0) or 0.0) != 0.0:
            raise SystemExit(f"{key} = {problem.run_params[key]}: regularization is not implemented in this peer")
    if problem.run_params.get("beta_loss", "frobenius") not in ("frobenius", 2, 2.0):
        raise SystemExit(f"beta_loss {problem.run_params['beta_loss']}: this peer is Frobenius only")
    max_iter = args.max_iter if args.max_iter is not None else int(problem.run_params.get("max_iter", 1000))
    tol = args.tol if args.tol is not None else float(problem.run_params.get("tol", 1e-4))
    mean = pc.x_mean(problem.X)  # scikit-learn's X.mean() on the object it would get
    n, g = problem.X.shape
    load_seconds = pc.time.perf_counter() - t0

    # X: dense, cast, moved to the device once and shared by every batch
    t0 = pc.time.perf_counter()
    Xnp = problem.X.toarray() if hasattr(problem.X, "toarray") else problem.X
    X = torch.from_numpy(Xnp).to(dtype=dtype).to(device)
    del Xnp
    problem.X = None
    normX2 = 0.0
    for r0 in range(0, n, 16384):  # ||X||^2 of the cast X, float64, in row blocks
        blk = X[r0 : r0 + 16384]
        normX2 += float(torch.sum(blk * blk, dtype=torch.float64))
    sync()
    x_seconds = pc.time.perf_counter() - t0
    solver = BatchedMU(X, normX2, args.zero_guard, args.eps)

    # batches: jobs of one k, in table order, R at a time
    by_k = {}
    for j in jobs:
        by_k.setdefault(j.k, []).append(j)
    R = args.batch if args.batch > 0 else max(len(v) for v in by_k.values())
    batches = [v[i : i + R] for v in by_k.values() for i in range(0, len(v), R)]

    spectra_paths = pc.prepare_spectra_dir(problem, args.write_spectra) if args.write_spectra else None
    factors, records = {}, []
    check_errors = tol > 0 or not args.no_error_checks
    for batch in batches:
        k, Rb = batch[0].k, len(batch)
        t0 = pc.time.perf_counter()
        if args.init == "sklearn":
            pairs = [pc.sklearn_random_init(mean, n, g, k, j.seed) for j in batch]
            W = torch.from_numpy(np.stack([w for w, _ in pairs])).to(dtype=dtype).to(device)
            H = torch.from_numpy(np.stack([h for _, h in pairs])).to(dtype=dtype).to(device)
            del pairs
        else:
            avg = math.sqrt(mean / k)
            Ws, Hs = [], []
            for j in batch:
                gen = torch.Generator(device=device).manual_seed(j.seed)
                Hs.append(torch.randn((k, g), generator=gen, dtype=dtype, device=device).abs_().mul_(avg))
                Ws.append(torch.randn((n, k), generator=gen, dtype=dtype, device=device).abs_().mul_(avg))
            W, H = torch.stack(Ws), torch.stack(Hs)
            del Ws, Hs
        sync()
        init_seconds = pc.time.perf_counter() - t0

        trace, err_init, prev, converged, it = [], None, None, False, 0
        t_start = pc.time.perf_counter()
        t_first = None
        for it in range(1, max_iter + 1):
            want = check_errors and it % 10 == 0
            err = solver.step(W, H, want)
            if it == 1:
                sync()
                t_first = pc.time.perf_counter() - t_start
            if err is None:
                continue
            if tol <= 0:
                trace.append((it, err))  # stays on the device: no sync in fixed mode
                continue
            e = err.cpu()
            trace.append((it, e))
            if err_init is None:  # the engine: error_at_init after the first 10 iterations
                err_init, prev = e, e
                continue
            done = bool(torch.all((prev - e) / err_init < tol))
            prev = e
            if done:
                converged = True
                break
        sync()
        loop_seconds = pc.time.perf_counter() - t_start
        iters = it
        final = solver.error(W, H).cpu().tolist()
        flops = 4.0 * n * g * Rb * k * iters
        rec = {
            "k": k,
            "R": Rb,
            "jobs": [j.index for j in batch],
            "seeds": [j.seed for j in batch],
            "iterations": iters,
            "converged": converged if tol > 0 else None,
            "init_seconds": init_seconds,
            "loop_seconds": loop_seconds,
            "first_iteration_seconds": t_first,
            "seconds_per_iteration": loop_seconds / max(iters, 1),
            "gflop_per_s": flops / loop_seconds / 1e9 if loop_seconds > 0 else None,
            "final_errors": final,
            "error_trace": [[i, [float(v) for v in e.cpu().tolist()]] for i, e in trace],
        }
        records.append(rec)
        if args.save_factors or spectra_paths:
            Wn = W.to(torch.float64).cpu().numpy()
            Hn = H.to(torch.float64).cpu().numpy()
            for r, j in enumerate(batch):
                if args.save_factors:
                    factors[f"W_{j.index}"] = Wn[r]
                    factors[f"H_{j.index}"] = Hn[r]
                if spectra_paths:
                    pc.write_spectra(spectra_paths, problem.var_names, j, Hn[r])
        del W, H
        if not args.quiet:
            print(
                f"k={k} R={Rb} jobs {batch[0].index}..{batch[-1].index}: {iters} it, "
                f"{rec['seconds_per_iteration'] * 1e3:.2f} ms/it, {rec['gflop_per_s']:.1f} GFLOP/s, "
                f"err {min(final):.6g}..{max(final):.6g}",
                flush=True,
            )

    if args.save_factors:
        np.savez(args.save_factors, **factors)
    loop = sum(r["loop_seconds"] for r in records)
    iters = sum(r["iterations"] for r in records)
    flops = sum(4.0 * n * g * r["R"] * r["k"] * r["iterations"] for r in records)
    totals = {
        "batches": len(records),
        "iterations": iters,
        "loop_seconds": loop,
        "seconds_per_iteration": loop / iters if iters else None,
        "gflop_per_s": flops / loop / 1e9 if loop > 0 else None,
        "init_seconds": sum(r["init_seconds"] for r in records),
        "x_to_device_seconds": x_seconds,
        "load_seconds": load_seconds,
        "import_seconds": t_imports,
        "wall_seconds": pc.seconds_since_start(),
        "peak_rss_bytes": pc.peak_rss_bytes(),
        "peak_device_bytes": int(torch.cuda.max_memory_allocated(device)) if cuda else None,
    }
    report = {
        "peer": "torch_mu",
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "input": dict(problem.source, n=int(n), g=int(g)),
        "settings": {
            "mode": "fixed" if tol <= 0 else "convergence",
            "max_iter": max_iter,
            "tol": tol,
            "batch": R,
            "dtype": args.dtype,
            "device": str(device),
            "init": args.init,
            "zero_guard": args.zero_guard,
            "eps": args.eps if args.zero_guard == "add-eps" else EPS_FLOAT32,
            "error_checks": check_errors,
            "flops_per_iteration": "4 n g R k (X H^T and W^T X)",
        },
        "threads": dict(thread_record, pools=pc.threadpool_summary()),
        "machine": dict(pc.machine_context(), device_name=torch.cuda.get_device_name(device) if cuda else None),
        "batches": records,
        "totals": totals,
    }
    pc.write_json(args.json, report)
    print(
        f"torch MU peer: {len(records)} batches, {iters} iterations, "
        f"{totals['seconds_per_iteration'] * 1e3 if iters else float('nan'):.2f} ms/it, "
        f"{totals['gflop_per_s'] or float('nan'):.1f} GFLOP/s, peak RSS {totals['peak_rss_bytes'] / 2**20:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
