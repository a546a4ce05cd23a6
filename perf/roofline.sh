#!/usr/bin/env bash
# The roofline measurements of perf/studies/roofline.md (issue 29): this CPU's figures
# (knmf_bench_machine) and the per-kernel timings of an iteration (knmf_bench_iteration
# --kernels) at n = 3,000 to 1,000,000, raw JSON lines into perf/results/roofline_<TAG>/;
# perf/roofline_table.py prints the tables from them.
#
#   perf/roofline.sh [BUILD] [TAG]        (default: build before)
#
# Env: ROOFLINE_ONLY (a regular expression: run only the cases whose name matches, e.g.
# 'machine|n1000000'), ROOFLINE_SKIP_MILLION=1 (no n = 1,000,000 runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${1:-build} TAG=${2:-before}
OUT=perf/results/roofline_$TAG
mkdir -p "$OUT"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
ONLY=${ROOFLINE_ONLY:-.}
want() { [[ $1 =~ $ONLY ]]; }

{
  echo "{\"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\", \"host_cores\": $(nproc)," \
    "\"lscpu_model\": \"$(lscpu | sed -n 's/^Model name: *//p' | head -1)\"," \
    "\"l2\": \"$(lscpu | sed -n 's/^L2 cache: *//p')\", \"l3\": \"$(lscpu | sed -n 's/^L3 cache: *//p')\"," \
    "\"knmf\": \"$("$B/drivers/knmf" --version | head -1)\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
} > "$OUT/context.json"

if want machine; then
  "$B/perf/knmf_bench_machine" > "$OUT/machine.json"
fi

iter() {  # name, then knmf_bench_iteration arguments
  local name=$1; shift
  want "$name" || return 0
  echo "roofline: $name $*" >&2
  "$B/perf/knmf_bench_iteration" --kernels --g 2000 "$@" | sed "s/^{/{\"case\": \"$name\", /" \
    >> "$OUT/iterations.jsonl"
}

# The four sizes, sparse 5%, fp32, R k = 80 (R = 4, k = 20), MU and CD.
for solver in mu cd; do
  iter "n3000_sparse_f32_${solver}_rk80" --n 3000 --density 0.05 --R 4 --k 20 --solver $solver --iters 5,25 --repeats 5
  iter "n10000_sparse_f32_${solver}_rk80" --n 10000 --density 0.05 --R 4 --k 20 --solver $solver --iters 4,16 --repeats 5
  iter "n100000_sparse_f32_${solver}_rk80" --n 100000 --density 0.05 --R 4 --k 20 --solver $solver --iters 2,6 --repeats 3
done
# One million cells (about 2-3 GB, minutes per run): few iterations and repeats.
if [[ ${ROOFLINE_SKIP_MILLION:-0} != 1 ]]; then
  for solver in mu cd; do
    iter "n1000000_sparse_f32_${solver}_rk80" --n 1000000 --density 0.05 --R 4 --k 20 --solver $solver --iters 1,3 --repeats 3
  done
fi
# Dense X where it fits (n <= 100,000: 0.8 GB in fp32).
for solver in mu cd; do
  iter "n3000_dense_f32_${solver}_rk80" --n 3000 --density 0.05 --format dense --R 4 --k 20 --solver $solver --iters 5,25 --repeats 5
  iter "n10000_dense_f32_${solver}_rk80" --n 10000 --density 0.05 --format dense --R 4 --k 20 --solver $solver --iters 4,16 --repeats 5
  iter "n100000_dense_f32_${solver}_rk80" --n 100000 --density 0.05 --format dense --R 4 --k 20 --solver $solver --iters 1,3 --repeats 3
done
# At n = 100,000: fp64, and R k = 40 and 320.
for solver in mu cd; do
  iter "n100000_sparse_f64_${solver}_rk80" --n 100000 --density 0.05 --dtype double --R 4 --k 20 --solver $solver --iters 2,6 --repeats 3
  iter "n100000_sparse_f32_${solver}_rk40" --n 100000 --density 0.05 --R 2 --k 20 --solver $solver --iters 2,6 --repeats 3
  iter "n100000_sparse_f32_${solver}_rk320" --n 100000 --density 0.05 --R 16 --k 20 --solver $solver --iters 1,3 --repeats 3
done
echo "{\"date_end\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\", \"load_end\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" \
  > "$OUT/context_end.json"
