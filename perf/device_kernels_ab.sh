#!/usr/bin/env bash
# Same-session A/B of the solver's device kernels, one iteration (knmf_bench_iteration) of two
# device-kernels builds (-DKNMF_DEVICE_KERNELS_ON_HOST=ON -DKNMF_ENABLE_PERF=ON), e.g. before
# and after a kernel change (issue 26): the shapes of docs/device-kernels.md, dense X at
# k = 20, 60 and 100 with CD and MU, and a sparse X with one gene in every cell (a row of X^T
# longer than gather_segment_entries). The builds alternate run by run, so that the drift of a
# shared machine hits both alike. Prints the median seconds per iteration of each and B/A;
# raw JSON lines to perf/results/device_kernels_ab_<tag>.txt.
#
#   perf/device_kernels_ab.sh BUILD_A BUILD_B [TAG]      (env ROUNDS, default 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$1 B=$2 TAG=${3:-ab}
ROUNDS=${ROUNDS:-3}
OUT=perf/results/device_kernels_ab_$TAG.txt
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
for b in "$A" "$B"; do
  [[ -x $b/perf/knmf_bench_iteration ]] || { echo "$0: $b lacks perf/knmf_bench_iteration" >&2; exit 2; }
done
shapes=(
  "--format dense --n 4000 --g 2000 --R 4 --k 20 --solver cd --dtype double"
  "--format dense --n 4000 --g 2000 --R 4 --k 60 --solver cd --dtype double"
  "--format dense --n 4000 --g 2000 --R 4 --k 100 --solver cd --dtype double"
  "--format dense --n 4000 --g 2000 --R 4 --k 100 --solver mu --dtype float"
  "--format sparse --n 40000 --g 2000 --density 0.05 --dense-genes 1 --R 4 --k 20 --solver mu --dtype float"
)
{
  echo "# perf/device_kernels_ab.sh $A (A) vs $B (B), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for shape in "${shapes[@]}"; do
    for ((i = 0; i < ROUNDS; ++i)); do
      for side in A B; do
        b=$A; [[ $side == B ]] && b=$B
        # shellcheck disable=SC2086
        echo "$side $("$b/perf/knmf_bench_iteration" $shape --repeats 1 --iters 1,3 2>/dev/null)"
      done
    done
  done
} | tee "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith('#'): continue
    side, js = line.split(' ', 1)
    d = json.loads(js)
    key = (d['format'], d['n'], d['k'], d['solver'], d['dtype'], d['dense_genes'])
    rows.setdefault(key, {}).setdefault(side, []).append(d['seconds_per_iteration'])
print('| format | n | k | solver | dtype | dense genes | A s/iter | B s/iter | B/A |')
print('|---|---|---|---|---|---|---|---|---|')
for key, v in rows.items():
    a, b = statistics.median(v['A']), statistics.median(v['B'])
    print('| %s | %d | %d | %s | %s | %d | %.4g | %.4g | %.3f |' % (*key, a, b, b / a))
PY
