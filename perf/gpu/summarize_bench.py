#!/usr/bin/env python3
"""Markdown table of knmf_bench_solver's JSON output (Google Benchmark, --benchmark_out):
seconds per MU / CD iteration, achieved TFLOP/s (4 n g R k per iteration: the two products
with X), the rate of the same two products through KokkosBlas::gemm (cuBLAS on CUDA) for the
same shape (BM_Gemm), their ratio, and the fraction of the GPU's datasheet peak.

    summarize_bench.py bench_f32.json [bench_f64.json ...] [--gpu "NVIDIA H200"]

Standard library only (runs on whatever python3 the device machine has).
"""
import argparse
import json
import re
import sys

# Datasheet peaks (dense, TFLOP/s) that a BLAS GEMM can use, by GPU name: fp32 without TF32
# (cuBLAS' default math mode), fp64 through the tensor cores (DGEMM) and on the plain FP64 units.
PEAKS = [
    (r"H200|H100.*(SXM|HBM3)", {"float": 67.0, "double": 67.0, "double_vector": 34.0}, "H100/H200 SXM datasheet"),
    (r"H100", {"float": 51.0, "double": 51.0, "double_vector": 26.0}, "H100 PCIe datasheet"),
    (r"A100", {"float": 19.5, "double": 19.5, "double_vector": 9.7}, "A100 datasheet"),
]

NAME = re.compile(r"BM_(Gemm|Iteration)<([^>]*)>/(\d+)/(\d+)")


def parse(path):
    with open(path) as f:
        doc = json.load(f)
    rows = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        m = NAME.search(b.get("name", ""))
        if not m:
            continue
        kind, targs, n, rk = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        dtype = "double" if "double" in targs else "float"
        solver = "gemm" if kind == "Gemm" else ("mu" if re.search(r"\bmu\b", targs) else "cd")
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        sec = float(b["real_time"]) * unit
        gflops = float(b.get("GFLOPs", 0.0))
        # a median row wins over a plain repetition row
        key = (dtype, solver, n, rk)
        if key not in rows or b.get("run_type") == "aggregate":
            rows[key] = dict(sec=sec, tflops=gflops / 1e3, R=b.get("R"), k=b.get("k"))
    return doc.get("context", {}), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--gpu", default="")
    o = ap.parse_args()
    ctx, rows = {}, {}
    for path in o.json:
        try:
            c, r = parse(path)
        except (OSError, ValueError, KeyError) as e:  # e.g. a run killed before it closed its JSON
            print(f"(cannot read {path}: {e})  ")
            continue
        ctx = ctx or c
        rows.update(r)
    if not rows:
        print(f"(no benchmark rows in {' '.join(o.json)})")
        return 1
    peak, peak_src = None, None
    for pat, p, src in PEAKS:
        if re.search(pat, o.gpu):
            peak, peak_src = p, src
            break
    print(f"context: {ctx.get('knmf', '')}  ")
    print(f"GPU: {o.gpu or '?'}; peak used: "
          + (f"{peak_src}: fp32 {peak['float']:g}, fp64 {peak['double']:g} (tensor core; "
             f"{peak['double_vector']:g} on the FP64 units) TFLOP/s" if peak else "unknown GPU, no peak"))
    print()
    print("| dtype | solver | n | R*k (R x k) | ms / iteration | TFLOP/s | cuBLAS GEMM TFLOP/s, same shape | iteration / GEMM | % of peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (dtype, solver, n, rk), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "float", kv[0][1] != "gemm", kv[0][1], kv[0][2], kv[0][3])):
        g = rows.get((dtype, "gemm", n, rk))
        ratio = f"{r['tflops'] / g['tflops']:.2f}" if g and g["tflops"] > 0 and solver != "gemm" else ""
        pk = f"{100 * r['tflops'] / peak[dtype]:.1f}" if peak else ""
        shape = f"{rk}" + (f" ({int(r['R'])} x {int(r['k'])})" if r.get("R") and r.get("k") else "")
        gcol = f"{g['tflops']:.2f}" if g else ""
        print(f"| {dtype} | {solver} | {n} | {shape} | {1e3 * r['sec']:.3f} | {r['tflops']:.2f} | {gcol} | {ratio} | {pk} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
