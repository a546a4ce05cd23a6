#!/usr/bin/env python3
"""GPU projection of issue 17 (perf/studies/accelerated-cd.md): the seed study's workload, 2.4 M cells
x 2,000 genes, k in {2, 4, 6, 12, 16, 18, 20, 22, 24, 36, 48, 60}, 100 replicates each, as hours
on an A100-80GB and an H200, for knmf's exact CD and the accelerated mode, against the 9.8 h
the PyTorch engine took on the A100.

  perf/gpu_projection.py [perf/results/accel]

A model, not a measurement (no GPU was lent to this task; perf/gpu/ holds the check that would
replace its assumptions). Per replicate and iteration it counts
  * the two products with X: 4 n g k flops dense; sparse (7% stored, pbmcA's 5.8% and
    mouse-brain's 6.9% are of that order) 4 nnz k flops;
  * the sweeps: W's and H's, 2 (n + g) k^2 flops each, and their memory traffic (read the factor
    and its numerator, write the factor: 3 (n + g) k values), plus the two Grams 2 (n + g) k^2;
  * the time of each as the larger of flops / (efficiency x peak) and bytes / bandwidth.
Iterations per replicate and, for the accelerated mode, products and sweeps per iteration are
the medians measured on the CPU (bench_accel's JSON lines), in two variants: the real runs
(pbmcA for k <= 8, mouse-brain-e18-10k for k = 10, 15, 20) and the dense synthetic 20,000 x
2,000 for k = 20 and 60 (with pbmcA below), interpolated in log k and held constant outside. Iteration counts at 2.4 M cells are not known; they are the model's weakest
input, and they scale both modes alike.

The same file holds the roofline model of perf/studies/roofline.md (issue 29), which
perf/roofline_table.py prints against the measured kernels: the machines (cpu_machine(): this
CPU from knmf_bench_machine's JSON; gpu_machine(): an A100, an H100 or an H200 from the vendor
figures VENDOR_GPUS), iteration_kernels() (the minimum bytes each kernel of one iteration must
move and the flops it must do, for given n, g, nnz, R, k, value size), kernel_bound()
(max(bytes / bandwidth, flops / usable peak)) and gather_time() (a sparse product's traffic
when nothing gathered is reused: not a bound, the cost cache blocking would remove).
The projection above keeps its own cost formulas (and its output): the shared parts are the
vendor figures and the byte counts of X and of the factors (x_bytes, factor_bytes).
"""
import json
import math
import os
import statistics as st
import sys

N, G, DENSITY, REPLICATES = 2_400_000, 2000, 0.07, 100
KS = [2, 4, 6, 12, 16, 18, 20, 22, 24, 36, 48, 60]
BYTES = 4  # fp32
# peak fp32 and fp64 (non-tensor, FMA) flop/s and HBM bandwidth (vendor figures:
# A100-SXM4-80GB, H100 SXM5 80GB, H200 SXM). The sweeps and Grams accumulate in double
# (kernels.hpp): they get the fp64 peak.
VENDOR_GPUS = {"A100-80GB": (19.5e12, 9.7e12, 2.04e12), "H100-SXM": (67.0e12, 34.0e12, 3.35e12),
               "H200": (67.0e12, 34.0e12, 4.8e12)}
GPUS = {name: VENDOR_GPUS[name] for name in ("A100-80GB", "H200")}  # the projection's two
# assumed efficiencies (fractions of peak): cuBLAS SGEMM for the dense products (knmf's CPU
# iteration runs at 80-95% of OpenBLAS' GEMM, section 1); a gather SpMM for the sparse ones;
# the sweeps and Grams (small-k register kernels), and the bandwidth any pass reaches
EFF_GEMM, EFF_SPMM, EFF_SWEEP, EFF_BW = 0.70, 0.10, 0.30, 0.80
PYTORCH_A100_HOURS = 9.8


# ------------------------------------------------------------------------ the roofline model
# (perf/studies/roofline.md, issue 29). Units: bytes, flops, seconds, bytes/s, flop/s.

INDEX_BYTES, OFFSET_BYTES = 4, 8  # a stored entry's column index; a row offset (CSR/CSC)
SLOT_CHUNK = 1024                 # columns per chunk of the per-slot reductions (kernels.hpp)
CHECK_EVERY = 10                  # MU's error check period (SolverOptions::check_every)


def x_bytes(nnz, value_bytes, dense):
    """Bytes of X's stored values (and column indices when sparse), without row offsets."""
    return nnz * (value_bytes if dense else value_bytes + INDEX_BYTES)


def factor_bytes(m, rk, value_bytes):
    """Bytes of an (R k) x m factor (or of P, Q: the same shape)."""
    return m * rk * value_bytes


def iteration_kernels(n, g, nnz, R, k, value_bytes, solver="mu", dense=False, tol=0.0):
    """The kernels of one iteration of the batched Frobenius solver (src/solver/detail) and,
    for each, the minimum bytes it must move (every operand read once, every result written
    once, nothing re-read; row offsets included) and the flops it must do. Returns a list of
    dicts: name, bytes, flops, precision ("T": the value type's arithmetic; "double": knmf's
    kernels accumulate in double), fma (True where the arithmetic is a BLAS GEMM, built with
    FMA; knmf's own kernels are built with -ffp-contract=off).

    Per iteration, in order: update_W = Gram H H^T, P = X H^T, W's update; update_H = Q = W^T X,
    Gram W^T W, H's update. A multiply-add is 2 flops. Grams: the symmetric half, k (k + 1) / 2
    pairs (the host kernel forms both triangles: twice that). MU's update per value: k
    multiply-adds for the denominator (F G)[t], then about 4 (regularization, guard, multiply,
    divide); CD's per value: k multiply-adds for the gradient, about 5 for the step. The error
    bookkeeping: the per-slot chunk partials of the reductions (violations, the error's <Q, H>)
    written and read back, and with tol > 0 MU's error every CHECK_EVERY iterations (<Q, H> and
    H H^T again) amortized."""
    rk = R * k
    v = value_bytes
    if dense:
        prod_flops = 2.0 * n * g * rk
        p_bytes = x_bytes(n * g, v, True) + factor_bytes(g, rk, v) + factor_bytes(n, rk, v)
        q_bytes = p_bytes
    else:
        prod_flops = 2.0 * nnz * rk
        p_bytes = (x_bytes(nnz, v, False) + OFFSET_BYTES * (n + 1) + factor_bytes(g, rk, v)
                   + factor_bytes(n, rk, v))
        q_bytes = (x_bytes(nnz, v, False) + OFFSET_BYTES * (g + 1) + factor_bytes(n, rk, v)
                   + factor_bytes(g, rk, v))

    def gram(m):
        return dict(bytes=factor_bytes(m, rk, v), flops=R * k * (k + 1.0) * m,
                    precision="double", fma=False)

    def update(m):
        per_value = 2.0 * k + (4.0 if solver == "mu" else 5.0)
        return dict(bytes=3.0 * factor_bytes(m, rk, v), flops=per_value * rk * m,
                    precision="double", fma=False)

    chunks = math.ceil(n / SLOT_CHUNK) + math.ceil(g / SLOT_CHUNK)
    book_bytes = 2.0 * 8 * R * chunks
    book_flops = R * chunks
    if solver == "mu" and tol > 0:
        book_bytes += (2.0 * factor_bytes(g, rk, v) + factor_bytes(g, rk, v)) / CHECK_EVERY
        book_flops += (2.0 * rk * g + R * k * (k + 1.0) * g) / CHECK_EVERY
    label = solver.upper()
    prod = "GEMM" if dense else "gather"
    # a sparse product without reuse of the gathered factor: each stored entry brings that
    # factor's column (R k values) from wherever the factor fits (gather_time)
    p_gather = {} if dense else dict(gather_bytes=nnz * rk * v, gathered=factor_bytes(g, rk, v),
                                     streamed=p_bytes - factor_bytes(g, rk, v))
    q_gather = {} if dense else dict(gather_bytes=nnz * rk * v, gathered=factor_bytes(n, rk, v),
                                     streamed=q_bytes - factor_bytes(n, rk, v))
    return [
        dict(name="Gram H H^T", **gram(g)),
        dict(name=f"P = X H^T ({prod}{'' if dense else ', CSR'})", bytes=p_bytes,
             flops=prod_flops, precision="T", fma=dense, **p_gather),
        dict(name=f"{label} update of W", **update(n)),
        dict(name=f"Q = W^T X ({prod}{'' if dense else ', CSC'})", bytes=q_bytes,
             flops=prod_flops, precision="T", fma=dense, **q_gather),
        dict(name="Gram W^T W", **gram(n)),
        dict(name=f"{label} update of H", **update(g)),
        dict(name="error bookkeeping", bytes=book_bytes, flops=book_flops, precision="double",
             fma=False),
    ]


class Machine:
    """A machine's figures: bandwidth (bytes/s) as a function of the data a kernel touches,
    and the arithmetic peaks (flop/s) by precision, with and without FMA."""

    def __init__(self, name, peaks, bandwidth_steps):
        self.name = name
        self.peaks = peaks                      # {("double"|"float", fma: bool): flop/s}
        self.steps = sorted(bandwidth_steps)    # [(footprint bytes, bytes/s)], ascending

    def bandwidth(self, footprint):
        """The measured bandwidth of the smallest measured footprint at least this one (the
        largest one's, main memory, beyond the sweep): data that fits a cache level streams at
        that level's rate at best."""
        for size, bw in self.steps:
            if footprint <= size:
                return bw
        return self.steps[-1][1]

    def main_memory_bandwidth(self):
        return self.steps[-1][1]

    def peak(self, precision, fma):
        return self.peaks[(precision, fma)]


def gpu_machine(name):
    """A vendor-figure GPU: HBM bandwidth at every footprint (its caches not modelled), FMA
    peaks (nvcc contracts device code by default; the non-FMA peak is half)."""
    p32, p64, bw = VENDOR_GPUS[name]
    peaks = {("float", True): p32, ("double", True): p64,
             ("float", False): p32 / 2, ("double", False): p64 / 2}
    return Machine(name, peaks, [(1.0, bw)])


def cpu_machine(figures, statistic="median"):
    """This CPU from knmf_bench_machine's JSON object: the triad bandwidth sweep and the
    multiply-add peaks (statistic: "median" or "best" of the repeats)."""
    steps = [(b["footprint_bytes"], b["triad"][statistic] * 1e9) for b in figures["bandwidth_gbs"]]
    pk = figures["peak_gflops"]
    peaks = {("double", False): pk["double_muladd"][statistic] * 1e9,
             ("double", True): pk["double_fma"][statistic] * 1e9,
             ("float", False): pk["float_muladd"][statistic] * 1e9,
             ("float", True): pk["float_fma"][statistic] * 1e9}
    return Machine(f"{figures['cpu']} ({figures['threads']} threads)", peaks, steps)


def kernel_bound(machine, kernel, value_bytes):
    """(seconds, limiter, bandwidth used) of one kernel of iteration_kernels() on `machine`:
    max(bytes / bandwidth at the kernel's footprint, flops / usable peak); the usable peak is
    the one of the kernel's precision, with FMA only where the kernel has it."""
    precision = kernel["precision"]
    if precision == "T":
        precision = "float" if value_bytes == 4 else "double"
    bw = machine.bandwidth(kernel["bytes"])
    t_bytes = kernel["bytes"] / bw
    t_flops = kernel["flops"] / machine.peak(precision, kernel["fma"])
    return (max(t_bytes, t_flops), "bytes" if t_bytes >= t_flops else "flops", bw)


def gather_time(machine, kernel):
    """Not a bound: the time of a sparse product's traffic when nothing of the gathered factor
    is reused between stored entries (each entry's R k values from the level the whole factor
    fits, at that level's bandwidth) plus X's stored entries from the level X fits. What cache
    blocking of the products would save; None for a dense product."""
    if "gather_bytes" not in kernel:
        return None
    xb = kernel["streamed"]  # X's entries and offsets, and the output
    return (kernel["gather_bytes"] / machine.bandwidth(kernel["gathered"])
            + xb / machine.bandwidth(xb))

def medians(path):
    rows = [json.loads(l) for l in open(path)]
    out = {}
    for k in sorted({r["k"] for r in rows if not r.get("summary")}):
        r = [x for x in rows if not x.get("summary") and x["k"] == k and x["accel_iter"] is not None]
        if not r:
            continue
        out[k] = dict(
            exact_iter=st.median(x["exact_iter"] for x in r),
            accel_iter=st.median(x["accel_iter"] for x in r),
            sweeps_per_iter=st.median(x["accel_sweeps"] / x["accel_iter"] for x in r))
    return out


def interpolate(table, k):
    ks = sorted(table)
    if k <= ks[0]:
        return table[ks[0]]
    if k >= ks[-1]:
        return table[ks[-1]]
    for a, b in zip(ks, ks[1:]):
        if a <= k <= b:
            t = (math.log(k) - math.log(a)) / (math.log(b) - math.log(a))
            return {f: table[a][f] + t * (table[b][f] - table[a][f]) for f in table[a]}


def seconds_per_iteration(k, sweeps, dense, peak, peak64, bw):
    nnz = N * G * (1.0 if dense else DENSITY)
    flops_prod = 4.0 * nnz * k
    bytes_prod = x_bytes(nnz, BYTES, dense) * 2 + 2 * factor_bytes(N + G, k, BYTES)
    t_prod = max(flops_prod / ((EFF_GEMM if dense else EFF_SPMM) * peak), bytes_prod / (EFF_BW * bw))
    # per sweep over both factors (half a "sweeps" count each), and the two Grams per iteration
    flops_sweep = 2.0 * (N + G) * k * k / 2
    bytes_sweep = 3.0 * (N + G) * k * BYTES / 2
    t_sweep = max(flops_sweep / (EFF_SWEEP * peak64), bytes_sweep / (EFF_BW * bw))
    t_gram = max(2.0 * (N + G) * k * k / (EFF_SWEEP * peak64), (N + G) * k * BYTES / (EFF_BW * bw))
    return t_prod, sweeps * t_sweep + t_gram


def project(table, title):
    print(f"\n{title}: measured medians (k: exact iterations, accelerated iterations, accelerated "
          "sweeps per iteration): " + "; ".join(f"{k}: {v['exact_iter']:.0f}, {v['accel_iter']:.0f}, "
                                               f"{v['sweeps_per_iter']:.1f}" for k, v in sorted(table.items())))
    print(f"\n| X | GPU | exact CD hours | accelerated hours | exact / accelerated "
          f"| PyTorch {PYTORCH_A100_HOURS} h (A100) / exact | / accelerated | products: share of exact time |")
    print("|---|---|---|---|---|---|---|---|")
    for dense in (True, False):
        for gpu, (peak, peak64, bw) in GPUS.items():
            he = ha = prod = 0.0
            for k in KS:
                m = interpolate(table, k)
                pe, re = seconds_per_iteration(k, 2, dense, peak, peak64, bw)
                pa, ra = seconds_per_iteration(k, m["sweeps_per_iter"], dense, peak, peak64, bw)
                he += REPLICATES * m["exact_iter"] * (pe + re)
                ha += REPLICATES * m["accel_iter"] * (pa + ra)
                prod += REPLICATES * m["exact_iter"] * pe
            he, ha = he / 3600, ha / 3600
            label = "dense fp32" if dense else f"sparse fp32, {DENSITY:.0%} stored"
            print(f"| {label} | {gpu} | {he:.2f} | {ha:.2f} | {he / ha:.2f}x | {PYTORCH_A100_HOURS / he:.1f}x "
                  f"| {PYTORCH_A100_HOURS / ha:.1f}x | {prod / 3600 / he:.0%} |")


def main(folder):
    pbmc = medians(os.path.join(folder, "pbmcA_f64.jsonl"))
    real = dict(pbmc)
    real.update(medians(os.path.join(folder, "mouse_f64.jsonl")))
    project(real, "Iterations of the real runs (pbmcA k = 5-8, mouse-brain-e18-10k k = 10, 15, 20)")
    synthetic = dict(pbmc)
    for name in ("dense20k_k20.jsonl", "dense20k_k60.jsonl"):
        synthetic.update(medians(os.path.join(folder, name)))
    project(synthetic, "Iterations of the dense synthetic X (k = 20, 60: the exact mode at max_iter 1000)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "accel"))
