#!/usr/bin/env python3
"""The tables of perf/studies/roofline.md (issue 29): an iteration's kernels, measured
(knmf_bench_iteration --kernels), against their roofline bounds on this CPU (the model in
perf/gpu_projection.py, this CPU's figures from knmf_bench_machine).

  perf/roofline_table.py [FOLDER...]      (default perf/results/roofline_before)
  perf/roofline_table.py --compare BEFORE AFTER [MACHINE]   (per kernel, before -> after;
      the bounds from AFTER's machine figures, or MACHINE's, or BEFORE's)

Reads FOLDER/machine.json (one knmf_bench_machine object), FOLDER/iterations.jsonl
(knmf_bench_iteration --kernels lines, each with a "case" name), FOLDER/context.json and
context_end.json; prints markdown. A case run several times (in one folder, or in several
folders: passes of perf/roofline.sh): the repeats of every run pooled (merge()); the machine
figures of the first folder. Nothing is typed in: every figure comes from those files and
the model.

The measured kernels are mapped onto the model's by their profiling path: under
knmf::{mu,cd}::update_W the Gram (knmf::gram::*) is H H^T, the product (knmf::spmm_gather*,
a KokkosBlas::gemm region, knmf::products::transpose_P) is P = X H^T and knmf::{mu,cd}::update
is W's update; under update_H the product is Q = W^T X, the Gram W^T W, the update H's.
Everything else inside the iteration region (small kernels, mask uploads, the host code of the
regions: partial sums, the decisions) is "error bookkeeping"; the rest of the solver's run
region and the time outside every region is "between iterations" (no bound).
"""
import json
import os
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_projection as model  # noqa: E402

BETWEEN = "between iterations"


def load(folder):
    # a pass of only some cases (ROOFLINE_ONLY without "machine") has no machine figures
    machine_path = os.path.join(folder, "machine.json")
    machine = json.load(open(machine_path)) if os.path.exists(machine_path) else None
    context_path = os.path.join(folder, "context.json")
    context = json.load(open(context_path)) if os.path.exists(context_path) else {}
    end_path = os.path.join(folder, "context_end.json")
    if os.path.exists(end_path):
        context.update(json.load(open(end_path)))
    rows = [json.loads(l) for l in open(os.path.join(folder, "iterations.jsonl")) if l.strip()]
    return machine, context, rows


def classify(path, solver):
    """The model kernel a profiling path's exclusive time belongs to (iteration_kernels' names),
    or BETWEEN."""
    parts = path.split("/")
    side = "W" if any(p.endswith("::update_W") for p in parts) else (
        "H" if any(p.endswith("::update_H") for p in parts) else None)
    in_iteration = any(p.endswith("::iteration") for p in parts)
    kind = None
    for p in reversed(parts):
        if p.startswith("knmf::spmm_gather") or p.startswith("knmf::products::transpose") or \
                p.startswith("KokkosBlas::gemm"):
            kind = "product"
        elif p.startswith("knmf::gram::"):
            kind = "gram"
        elif p in ("knmf::mu::update", "knmf::cd::update"):
            kind = "update"
        if kind:
            break
    if kind and side:
        if kind == "product":
            return "P = X H^T" if side == "W" else "Q = W^T X"
        if kind == "gram":
            return "Gram H H^T" if side == "W" else "Gram W^T W"
        return f"{solver.upper()} update of {side}"
    return "error bookkeeping" if in_iteration else BETWEEN


def exclusive_times(row):
    """Exclusive seconds per iteration of every kernel and region path (a region's own time:
    inclusive minus its direct children), which sum to the solver's run region."""
    kernels, regions = row["kernel_seconds"], row["region_seconds"]
    out = dict(kernels)
    for path, t in regions.items():
        children = [v for p, v in list(kernels.items()) + list(regions.items())
                    if p.startswith(path + "/") and "/" not in p[len(path) + 1:]]
        out[path] = t - sum(children)
    return out


def categories(row):
    """Seconds per iteration per model kernel (short names), plus BETWEEN (with the
    unattributed time outside every region), from one set of figures."""
    acc = {}
    for path, t in exclusive_times(row).items():
        key = classify(path, row["solver"])
        acc[key] = acc.get(key, 0.0) + t
    acc[BETWEEN] = acc.get(BETWEEN, 0.0) + row.get("unattributed_seconds", 0.0)
    return acc


def measured_by_kernel(row):
    """categories() of each repeat ("..._by_repeat"), then each category's median over the
    repeats; for lines without them, of the per-path medians (whose differences, a region
    less its children, can then come out negative by the noise)."""
    if "kernel_seconds_by_repeat" not in row:
        return categories(row)
    per = row["seconds_per_iteration_by_repeat"]
    reps = []
    for i in range(len(per)):
        one = dict(solver=row["solver"],
                   kernel_seconds={p: v[i] for p, v in row["kernel_seconds_by_repeat"].items()},
                   region_seconds={p: v[i] for p, v in row["region_seconds_by_repeat"].items()})
        top = sum(v for p, v in list(one["kernel_seconds"].items()) +
                  list(one["region_seconds"].items()) if "/" not in p)
        one["unattributed_seconds"] = per[i] - top
        reps.append(categories(one))
    keys = {k for r in reps for k in r}
    return {k: st.median(r.get(k, 0.0) for r in reps) for k in keys}


def merge(rows):
    """One line of a case run several times: every run's repeats pooled (the per-path
    "..._by_repeat" arrays side by side, 0 where a run lacked a path) and the iteration time the
    median of all of them. A single line, or lines without per-repeat figures: the last."""
    if len(rows) == 1 or any("kernel_seconds_by_repeat" not in r for r in rows):
        return rows[-1]
    out = dict(rows[-1])
    per = [v for r in rows for v in r["seconds_per_iteration_by_repeat"]]
    for field in ("kernel_seconds_by_repeat", "region_seconds_by_repeat"):
        paths = {p for r in rows for p in r[field]}
        out[field] = {p: [v for r in rows for v in
                          r[field].get(p, [0.0] * len(r["seconds_per_iteration_by_repeat"]))]
                      for p in paths}
    out["seconds_per_iteration_by_repeat"] = per
    out["seconds_per_iteration"] = st.median(per)
    out["repeats"] = len(per)
    out["runs"] = len(rows)
    return out


def short(name):
    """iteration_kernels' name without its parenthesis (the key classify() gives)."""
    return name.split(" (")[0]


def bounds(row, machine):
    vb = 4 if row["dtype"] == "float" else 8
    ks = model.iteration_kernels(row["n"], row["g"], row["nnz"], row["R"], row["k"], vb,
                                 solver=row["solver"], dense=row["format"] == "dense")
    return [(k, *model.kernel_bound(machine, k, vb)) for k in ks]


def fmt_s(t):
    if t >= 1.0:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} µs"


def series_key(row):
    fmt = "sparse 5%" if row["format"] == "sparse" else "dense"
    return (fmt, row["dtype"], row["solver"], row["R"] * row["k"], row["R"], row["k"])


def machine_table(figures, context, rows):
    blas = sorted({r.get("blas", "?") for r in rows})
    print(f"Machine: {figures['cpu']}, {figures['threads']} threads (Kokkos OpenMP), "
          f"L2 {context.get('l2', '?')}, L3 {context.get('l3', '?')}; "
          f"OPENBLAS_CORETYPE={figures['openblas_coretype'] or '(unset)'}, OpenBLAS kernels "
          f"{', '.join(blas)} (knmf's choice); {context.get('knmf', '')}; measured "
          f"{context.get('date', '?')} to {context.get('date_end', '?')}, load average at start "
          f"{context.get('load', '?')}, at end {context.get('load_end', '?')}.\n")
    print("| footprint (3 arrays) | triad GB/s median (best) | copy GB/s median (best) | read GB/s median (best) |")
    print("|---|---|---|---|")
    for b in figures["bandwidth_gbs"]:
        mib = b["footprint_bytes"] / 2**20
        cells = [f"{b[v]['median']:.1f} ({b[v]['best']:.1f})" for v in ("triad", "copy", "read")]
        print(f"| {mib:,.{1 if mib < 10 else 0}f} MiB | " + " | ".join(cells) + " |")
    pk = figures["peak_gflops"]
    print(f"\n| arithmetic peak ({figures['peak_isa']}, {figures['peak_chains']} chains per thread, "
          "all threads) | GFLOP/s median (best) |")
    print("|---|---|")
    for key, label in (("double_muladd", "double, multiply + add (knmf's kernels: -ffp-contract=off)"),
                       ("double_fma", "double, fused multiply-add"),
                       ("float_muladd", "float, multiply + add"),
                       ("float_fma", "float, fused multiply-add")):
        print(f"| {label} | {pk[key]['median']:.1f} ({pk[key]['best']:.1f}) |")
    print(f"\nFMA against separate multiply and add: {pk['double_fma']['median'] / pk['double_muladd']['median']:.2f}x "
          f"in double, {pk['float_fma']['median'] / pk['float_muladd']['median']:.2f}x in float (medians).")


def series_tables(rows, machine):
    series = {}
    for r in rows:
        series.setdefault(series_key(r), []).append(r)
    for key in sorted(series, key=lambda k: (k[0] != "sparse 5%", k[1] != "float", k[2], k[3])):
        fmt, dtype, solver, rk, R, k = key
        # one column per n (a case run several times, in one folder or in several passes:
        # its repeats pooled, merge())
        by_n = {}
        for r in series[key]:
            by_n.setdefault(r["n"], []).append(r)
        cases = [merge(by_n[n]) for n in sorted(by_n)]
        print(f"\n**{fmt}, {'fp32' if dtype == 'float' else 'fp64'}, {solver.upper()}, "
              f"R·k = {rk} (R = {R}, k = {k}), g = {cases[0]['g']:,}**: per kernel, seconds per "
              "iteration measured / bound = bound as a fraction of measured (B: bytes-bound, "
              "F: flop-bound)\n")
        print("| kernel | " + " | ".join(f"n = {r['n']:,}" for r in cases) + " |")
        print("|---|" + "---|" * len(cases))
        per_case = [(r, measured_by_kernel(r), bounds(r, machine)) for r in cases]
        names = [short(b[0]["name"]) for b in per_case[0][2]]
        for i, name in enumerate(names):
            cells = []
            for r, meas, bnd in per_case:
                kern, t_bound, limiter, _ = bnd[i]
                t = meas.get(name, 0.0)
                frac = f"{t_bound / t:.0%}" if t > 0 else "-"
                cells.append(f"{fmt_s(t)} / {fmt_s(t_bound)} = {frac} {limiter[0].upper()}")
            print(f"| {name} | " + " | ".join(cells) + " |")
        cells = [fmt_s(meas.get(BETWEEN, 0.0)) for _, meas, _ in per_case]
        print(f"| {BETWEEN} (no bound) | " + " | ".join(cells) + " |")
        cells = []
        for r, meas, bnd in per_case:
            total_bound = sum(b[1] for b in bnd)
            t = r["seconds_per_iteration"]
            cells.append(f"**{fmt_s(t)} / {fmt_s(total_bound)} = {total_bound / t:.0%}**")
        print("| **iteration** | " + " | ".join(cells) + " |")
        cells = []
        for r, meas, bnd in per_case:
            rate = 4.0 * rk * (r["n"] * r["g"] if r["format"] == "dense" else r["nnz"])
            cells.append(f"{rate / r['seconds_per_iteration'] * 1e-9:.1f} / "
                         f"{rate / sum(b[1] for b in bnd) * 1e-9:.1f}")
        print("| products' GFLOP/s measured / at the bound | " + " | ".join(cells) + " |")
        if fmt != "dense":
            for i, name in enumerate(names):
                if "gather_bytes" not in per_case[0][2][i][0]:
                    continue
                cells = []
                for r, meas, bnd in per_case:
                    t_nr = model.gather_time(machine, bnd[i][0])
                    cells.append(f"{fmt_s(t_nr)} (measured {meas.get(name, 0.0) / t_nr:.2f}x that)")
                print(f"| {name} if no gathered column were reused (model, not a bound) | "
                      + " | ".join(cells) + " |")


def pinned(rows, machine, figures):
    match = [r for r in rows if r["n"] == 1_000_000 and r["g"] == 2000 and r["format"] == "sparse"
             and r["dtype"] == "float" and r["solver"] == "mu" and r["R"] * r["k"] == 80]
    if not match:
        print("\n(no pinned case in these results)")
        return
    r = merge(match)
    bnd = bounds(r, machine)
    tb = sum(b[1] for b in bnd)
    t = r["seconds_per_iteration"]
    vb = 4
    main = machine.main_memory_bandwidth()
    t_main = sum(max(b[0]["bytes"] / main,
                     b[0]["flops"] / machine.peak("float" if b[0]["precision"] == "T" else "double",
                                                  b[0]["fma"])) for b in bnd)
    print(f"\n**The pinned case** (1,000,000 x 2,000, 5% stored: nnz = {r['nnz']:,}; fp32, MU, "
          f"R·k = 80): {fmt_s(t)} per iteration measured (median of {r.get('repeats', 3)} "
          f"repeats of --iters {r.get('iters', '1,3')} in {r.get('runs', 1)} run(s)); the bound {fmt_s(tb)} "
          f"(every kernel's data from main memory at {main * 1e-9:.1f} GB/s: {fmt_s(t_main)}); "
          f"the iteration runs at **{tb / t:.0%} of its bound** ({t / tb:.1f}x above it). "
          f"Per non-zero and R·k: {t / (r['nnz'] * 80) * 1e12:.3g} ps measured, "
          f"{tb / (r['nnz'] * 80) * 1e12:.3g} ps at the bound.")
    print("\nThe same iteration's bound on the GPUs of the projection (vendor peaks, HBM at every "
          "footprint, the kernels' arithmetic as on the CPU but with FMA where nvcc contracts; "
          "a bound, not a projection):\n")
    gpus = [model.gpu_machine(name) for name in model.VENDOR_GPUS]
    print("| kernel | this CPU | " + " | ".join(m.name for m in gpus) + " |")
    print("|---|---|" + "---|" * len(gpus))
    ks = model.iteration_kernels(r["n"], r["g"], r["nnz"], r["R"], r["k"], vb, solver="mu")
    totals = [0.0] * (len(gpus) + 1)
    for kern in ks:
        gk = dict(kern, fma=True)
        vals = [model.kernel_bound(machine, kern, vb)] + [model.kernel_bound(m, gk, vb) for m in gpus]
        for i, v in enumerate(vals):
            totals[i] += v[0]
        print(f"| {short(kern['name'])} | " + " | ".join(f"{fmt_s(v[0])} {v[1][0].upper()}" for v in vals) + " |")
    print("| **iteration** | " + " | ".join(f"**{fmt_s(t)}**" for t in totals) + " |")


def compare(before, after, machine_folder=None):
    """Per series and n present in both folders: each kernel's time before -> after and the
    after's fraction of its bound (the bound from the after folder's machine figures)."""
    figures, _, rows_b = load(before)
    fig_a, _, rows_a = load(after)
    if machine_folder:
        fig_a = load(machine_folder)[0]
    machine = model.cpu_machine(fig_a or figures)

    def grouped(rows):
        out = {}
        for r in rows:
            out.setdefault((series_key(r), r["n"]), []).append(r)
        return {k: merge(v) for k, v in out.items()}

    b, a = grouped(rows_b), grouped(rows_a)
    keys = sorted({k[0] for k in a if k in b},
                  key=lambda k: (k[0] != "sparse 5%", k[1] != "float", k[2], k[3]))
    for key in keys:
        fmt, dtype, solver, rk, R, k = key
        ns = sorted(n for (s, n) in a if s == key and (s, n) in b)
        print(f"\n**{fmt}, {'fp32' if dtype == 'float' else 'fp64'}, {solver.upper()}, "
              f"R·k = {rk}**: seconds per iteration before -> after (after's bound; the bound as "
              "a fraction of the after time)\n")
        print("| kernel | " + " | ".join(f"n = {n:,}" for n in ns) + " |")
        print("|---|" + "---|" * len(ns))
        cases = [(b[(key, n)], a[(key, n)]) for n in ns]
        per = [(measured_by_kernel(rb), measured_by_kernel(ra), bounds(ra, machine))
               for rb, ra in cases]
        names = [short(x[0]["name"]) for x in per[0][2]]
        for i, name in enumerate(names):
            cells = []
            for mb, ma, bnd in per:
                tb, ta, bound = mb.get(name, 0.0), ma.get(name, 0.0), bnd[i][1]
                frac = f"{bound / ta:.0%}" if ta > 0 else "-"
                cells.append(f"{fmt_s(tb)} -> {fmt_s(ta)} ({fmt_s(bound)}, {frac})")
            print(f"| {name} | " + " | ".join(cells) + " |")
        cells = []
        for (rb, ra), (_, _, bnd) in zip(cases, per):
            total = sum(x[1] for x in bnd)
            tb, ta = rb["seconds_per_iteration"], ra["seconds_per_iteration"]
            cells.append(f"**{fmt_s(tb)} -> {fmt_s(ta)}** ({tb / ta:.2f}x; bound {fmt_s(total)}, "
                         f"{total / ta:.0%})")
        print("| **iteration** | " + " | ".join(cells) + " |")


def main(folders):
    if folders and folders[0] == "--compare":
        compare(*folders[1:4])
        return
    passes = [load(f) for f in folders]
    figures, context, _ = passes[0]
    rows = [r for _, _, rs in passes for r in rs]
    machine = model.cpu_machine(figures)
    machine_table(figures, context, rows)
    for f, (fig, ctx, _) in zip(folders[1:], passes[1:]):
        pk = fig["peak_gflops"]
        print(f"\nAnother pass ({os.path.basename(f.rstrip('/'))}, {ctx.get('date', '?')}, load "
              f"{ctx.get('load', '?')} to {ctx.get('load_end', '?')}): main-memory triad "
              f"{fig['bandwidth_gbs'][-1]['triad']['median']:.1f} GB/s, peaks "
              f"{pk['double_muladd']['median']:.1f} / {pk['double_fma']['median']:.1f} (double) and "
              f"{pk['float_muladd']['median']:.1f} / {pk['float_fma']['median']:.1f} (float) GFLOP/s "
              "multiply + add / FMA; the model uses the first pass's figures, the timings below pool "
              "the repeats of every pass.")
    series_tables(rows, machine)
    pinned(rows, machine, figures)


if __name__ == "__main__":
    main(sys.argv[1:] or
         [os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "roofline_before")])
