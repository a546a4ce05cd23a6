#!/usr/bin/env python3
"""The table of perf/cnmf_workers.sh's raw lines (the last run in the file): per runner the wall
and CPU seconds of every round and their medians, and each runner against knmf as paired
ratios (round by round, then the median of those ratios; above 1: knmf faster)."""
import statistics
import sys


def main(path):
    lines = open(path).read().splitlines()
    start = max(i for i, l in enumerate(lines) if l.startswith("# "))
    header = lines[start][2:]
    runs = {}  # runner -> round -> (wall, cpu)
    for l in lines[start + 1:]:
        f = l.split()
        if len(f) == 6 and f[2] == "wall_s":
            runs.setdefault(f[0], {})[int(f[1])] = (float(f[3]), float(f[5]))
    print(f"`{path}`: {header}\n")
    print("| runner | wall s per round | wall median | CPU s median | wall: runner / knmf (paired median) | CPU: runner / knmf (paired median) |")
    print("|---|---|---|---|---|---|")
    ref = runs.get("knmf", {})
    for name, rs in runs.items():
        rounds = sorted(rs)
        walls = [rs[r][0] for r in rounds]
        cpus = [rs[r][1] for r in rounds]
        both = [r for r in rounds if r in ref]
        pw = statistics.median(rs[r][0] / ref[r][0] for r in both) if both else float("nan")
        pc = statistics.median(rs[r][1] / ref[r][1] for r in both) if both else float("nan")
        print(f"| {name} | {', '.join(f'{w:.2f}' for w in walls)} | {statistics.median(walls):.2f} "
              f"| {statistics.median(cpus):.2f} | {pw:.2f} | {pc:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "perf/results/cnmf_workers_run.txt")
