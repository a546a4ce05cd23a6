#!/usr/bin/env python3
"""Tables of perf/studies/accelerated-cd.md from knmf_bench_accel's JSON lines (perf/accel_measure.sh).

  perf/accel_summary.py perf/results/accel/NAME.jsonl ...

Per file and k: products with X (2 per iteration) of the exact mode (scikit-learn's CD, tol 1e-4)
and of the accelerated mode stopped by the same rule; the products the accelerated mode needs to
reach the exact mode's final objective; objectives; wall seconds per job (batch 1). Then, per
file, the other stopping rules read off the same traces.
"""
import json
import statistics as st
import sys


def load(path):
    rows, summary = [], None
    for line in open(path):
        d = json.loads(line)
        if d.get("summary"):
            summary = d
        else:
            rows.append(d)
    return rows, summary


def acc(x):
    """The accelerated mode stopped by CD's rule at the exact mode's tol: the untraced run where
    it was made (complete, its own wall time), else the trace's stop (None when the trace ended
    before the rule stopped)."""
    if x.get("accel_plain_iter") is not None:
        return dict(iter=x["accel_plain_iter"], products=2 * x["accel_plain_iter"],
                    sweeps=x["accel_plain_sweeps"], objective=x["accel_plain_objective"],
                    s=x["accel_plain_s"])
    if x["accel_iter"] is None:
        return None
    return dict(iter=x["accel_iter"], products=x["accel_products"], sweeps=x["accel_sweeps"],
                objective=x["accel_objective"], s=x["accel_s"])


def accel_s(x):
    """The accelerated run's wall seconds: the untraced run's where it was made."""
    return x["accel_plain_s"] if x.get("accel_plain_s") is not None else x["accel_s"]


def med(v):
    return st.median(v) if v else float("nan")


def main(paths):
    for path in paths:
        rows, summary = load(path)
        print(f"\n**{path.split('/')[-1]}** ({summary['context'] if summary else 'incomplete'})\n")
        print("| k | jobs | exact products (median) | accelerated products (median) | exact / accelerated (sums) "
              "| products to reach the exact objective (median, reached) | median accelerated / exact objective − 1 "
              "| jobs ending above exact | exact s / job | accelerated s / job | wall exact / accelerated (sums) "
              "| s to reach (median) |")
        print("|" + "---|" * 12)
        for k in sorted({r["k"] for r in rows}):
            r = [x for x in rows if x["k"] == k]
            s = [(x, acc(x)) for x in r if acc(x) is not None]
            reach = [x for x in r if x["reach_iter"] is not None]
            rel = [q["objective"] / x["exact_objective"] - 1 for x, q in s]
            print(f"| {k} | {len(r)} | {med([x['exact_products'] for x in r]):.0f} "
                  f"| {med([q['products'] for _, q in s]):.0f} ({len(s)}) "
                  f"| {sum(x['exact_products'] for x, _ in s) / max(1, sum(q['products'] for _, q in s)):.2f}x "
                  f"| {med([x['reach_products'] for x in reach]):.0f} ({len(reach)}/{len(r)}) "
                  f"| {med(rel):+.1e} | {sum(1 for v in rel if v > 0)} "
                  f"| {med([x['exact_s'] for x in r]):.3f} | {med([q['s'] for _, q in s]):.3f} "
                  f"| {sum(x['exact_s'] for x, _ in s) / max(1e-12, sum(q['s'] for _, q in s)):.2f}x "
                  f"| {med([x['reach_s'] for x in reach]):.3f} |")
        names = [q["rule"] for q in rows[0]["rules"] if q is not None] if rows else []
        print("\n| stopping rule (accelerated) | jobs stopped | products (sum) | exact / rule products (sums) "
              "| wall exact / rule (sums) | median objective / exact − 1 | jobs above exact "
              "| median objective / exact − 1, per k |")
        print("|---|---|---|---|---|---|---|---|")
        rules = [("the solver's own rule at the exact mode's tol (as a user runs it)",
                  [(x, {"products": acc(x)["products"], "s": acc(x)["s"], "untraced": True,
                        "objective_rel": acc(x)["objective"] / x["exact_objective"] - 1})
                   for x in rows if acc(x) is not None])]
        for i, name in enumerate(["cd 1e-3", "cd 1e-5", "mu 1e-4", "mu 1e-5", "mu 1e-6"]):
            rules.append((name, [(x, x["rules"][i]) for x in rows if x["rules"][i] is not None]))
        for name, got in rules:
            if not got:
                print(f"| {name} | 0 | | | | | | |")
                continue
            ep = sum(x["exact_products"] for x, _ in got)
            rp = sum(q["products"] for _, q in got)
            es = sum(x["exact_s"] for x, _ in got)
            # traced seconds, scaled by the job's untraced / traced time at CD's stop (the
            # trace's per-iteration error is not part of a user's run)
            rs = sum(q["s"] if q.get("untraced") else
                     q["s"] * (accel_s(x) / x["accel_s"] if x["accel_s"] else 1.0) for x, q in got)
            rel = [q["objective_rel"] for _, q in got]
            perk = ", ".join(f"{k}: {med([q['objective_rel'] for x, q in got if x['k'] == k]):+.1e}"
                             for k in sorted({x["k"] for x, _ in got}))
            print(f"| {name} | {len(got)}/{len(rows)} | {rp} | {ep / rp:.2f}x | {es / rs:.2f}x "
                  f"| {med(rel):+.1e} | {sum(1 for v in rel if v > 0)} | {perk} |")


if __name__ == "__main__":
    main(sys.argv[1:])
