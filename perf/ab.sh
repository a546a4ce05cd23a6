#!/usr/bin/env bash
# Same-session A/B of two builds of knmf (e.g. before and after a restructuring): RESULTS
# section 1 (one iteration, knmf_bench_solver) and section 3 (cNMF's pbmcA run end to end,
# cNMF mode), the two builds alternated run by run so that the drift of a shared machine hits
# both alike. Prints medians, spreads ((max - min) / median), the ratio B/A and the median of
# the rounds' own B/A (paired); raw figures to perf/results/ab_<tag>.txt.
#
#   perf/ab.sh BUILD_A BUILD_B [TAG]      (builds configured with -DKNMF_ENABLE_PERF=ON)
#
# Env: AB_ROUNDS (default 5), AB_FILTER (knmf_bench_solver cases, default the n = 20,000 ones),
# KNMF_SHARED_DIR (default ../shared: the pbmcA prepare folder).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$1 B=$2 TAG=${3:-ab}
ROUNDS=${AB_ROUNDS:-5}
FILTER=${AB_FILTER:-BM_Iteration<.*>/20000/}
SHARED=${KNMF_SHARED_DIR:-$PWD/../shared}
OUT=perf/results/ab_$TAG.txt
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
for b in "$A" "$B"; do
  [[ -x $b/drivers/knmf && -x $b/perf/knmf_bench_solver ]] ||
    { echo "perf/ab.sh: $b lacks drivers/knmf or perf/knmf_bench_solver" >&2; exit 2; }
done
RUNS=$(mktemp -d /tmp/knmf-ab.XXXXXX)
trap 'rm -rf "$RUNS"' EXIT
cp -r "$SHARED/data/cnmf-pbmc-donor-a/prepare/pbmcA" "$RUNS/" && chmod -R u+w "$RUNS"
{
  echo "# perf/ab.sh $A (A) vs $B (B), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# A: $("$A/drivers/knmf" --version | head -1)"
  echo "# B: $("$B/drivers/knmf" --version | head -1)"
} > "$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  for side in A B; do
    b=$A; [[ $side == B ]] && b=$B
    # section 1: the per-iteration times (median of the benchmark's own 5 repeats)
    "$b/perf/knmf_bench_solver" --benchmark_filter="$FILTER" --benchmark_format=json \
      > "$RUNS/iter_${side}_$r.json" 2>/dev/null
    python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["benchmarks"]:
    if x.get("aggregate_name") == "median":
        print("iter", sys.argv[2], sys.argv[3], x["run_name"].replace(" ", ""), x["real_time"])' \
      "$RUNS/iter_${side}_$r.json" $side $r >> "$OUT"
    # section 3: pbmcA end to end (80 jobs, cNMF mode)
    rm -f "$RUNS"/pbmcA/cnmf_tmp/*.spectra.*
    t0=$(date +%s.%N)
    "$b/drivers/knmf" factorize --output-dir "$RUNS" --name pbmcA --quiet
    awk -v a="$t0" -v b="$(date +%s.%N)" -v s=$side -v r=$r \
      'BEGIN{printf "pbmcA %s %d wall_s %.3f\n", s, r, b - a}' >> "$OUT"
  done
done
python3 - "$OUT" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(lambda: {"A": [], "B": []})
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    f = line.split()
    if f[0] == "iter": rows[f[3]][f[1]].append(float(f[4]))
    else: rows["pbmcA end to end (s)"][f[1]].append(float(f[4]))
# spread: (max - min) / median of each side's runs, the noise a difference must beat;
# paired: the median of each round's B/A (A and B of a round ran back to back, so the drift of
# a shared machine over the rounds cancels in it), with its range over the rounds
print(f"{'case':60s} {'A median':>10s} {'A spread':>9s} {'B median':>10s} {'B spread':>9s} {'B/A':>6s}"
      f" {'paired':>7s} {'paired range':>13s}")
for case, v in rows.items():
    a, b = statistics.median(v["A"]), statistics.median(v["B"])
    sa = (max(v["A"]) - min(v["A"])) / a
    sb = (max(v["B"]) - min(v["B"])) / b
    pr = [y / x for x, y in zip(v["A"], v["B"])]
    print(f"{case:60s} {a:10.4g} {sa:9.3f} {b:10.4g} {sb:9.3f} {b / a:6.3f}"
          f" {statistics.median(pr):7.3f} {min(pr):6.3f}-{max(pr):6.3f}")
EOF
