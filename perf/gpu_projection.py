#!/usr/bin/env python3
"""GPU projection of issue 17 (perf/RESULTS.md section 12): the seed study's workload, 2.4 M cells
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
"""
import json
import math
import os
import statistics as st
import sys

N, G, DENSITY, REPLICATES = 2_400_000, 2000, 0.07, 100
KS = [2, 4, 6, 12, 16, 18, 20, 22, 24, 36, 48, 60]
BYTES = 4  # fp32
# peak fp32 and fp64 (non-tensor) flop/s and HBM bandwidth (vendor figures: A100-SXM4-80GB,
# H200 SXM). The sweeps and Grams accumulate in double (kernels.hpp): they get the fp64 peak.
GPUS = {"A100-80GB": (19.5e12, 9.7e12, 2.04e12), "H200": (67.0e12, 34.0e12, 4.8e12)}
# assumed efficiencies (fractions of peak): cuBLAS SGEMM for the dense products (knmf's CPU
# iteration runs at 80-95% of OpenBLAS' GEMM, section 1); a gather SpMM for the sparse ones;
# the sweeps and Grams (small-k register kernels), and the bandwidth any pass reaches
EFF_GEMM, EFF_SPMM, EFF_SWEEP, EFF_BW = 0.70, 0.10, 0.30, 0.80
PYTORCH_A100_HOURS = 9.8


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
    bytes_prod = (nnz * (BYTES if dense else BYTES + 4)) * 2 + 2 * (N + G) * k * BYTES
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
