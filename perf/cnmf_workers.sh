#!/usr/bin/env bash
# knmf factorize against cNMF's own factorize on the same cores (issue 29;
# perf/studies/same-cores.md): cNMF's prepared pbmcA run (2,896 cells x 2,000 genes, 80 jobs,
# k = 5..8), each runner on a fresh copy of the prepare folder, alternating runner by runner, ROUNDS rounds:
#   knmf        knmf factorize --output-dir --name (cNMF mode, exact CD), Kokkos' threads = cores
#   knmf-accel  the same with --inner-sweeps auto (the accelerated CD mode)
#   knmf-base   the same with a second build (KNMF_BASE=BUILD_DIR, e.g. the commit before)
#   cnmf-N      cNMF 1.7.1 (../shared/tools/cnmf-reference) as its users parallelize it: N = cores
#               worker processes (--worker-index i --total-workers N), each single-threaded
#               (OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1), no thread pinning
#   cnmf-1      one cNMF process, its BLAS with its default threads
# Every runner under the same OPENBLAS_CORETYPE (default SkylakeX, what knmf picks here by
# itself; set it to compare under another) and without OMP_PROC_BIND / OMP_PLACES (with
# spread exported, cNMF's workers pin to one core). Wall seconds and CPU seconds (user + sys,
# /usr/bin/time) per run; the summary gives medians and the paired ratios (each round's own
# ratio, then their median).
#   perf/cnmf_workers.sh [BUILD] [ROUNDS] [TAG]     (defaults: build-perf, 5, run)
# Env: KNMF_SHARED_DIR (default ../shared), KNMF_BASE (optional second build), CNMF_ONE=0 (skip
# the one-process cNMF runs). cNMF needs Debian's python3-numpy, -scipy, -pandas, -sklearn,
# -anndata, -h5py, -yaml and -matplotlib (its run_cnmf.sh lists them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=${1:-build-perf} ROUNDS=${2:-5} TAG=${3:-run}
SHARED=${KNMF_SHARED_DIR:-../shared}
CNMF=$SHARED/tools/cnmf-reference/run_cnmf.sh
[[ -x $CNMF ]] || { echo "cnmf_workers: $CNMF not found (set KNMF_SHARED_DIR)" >&2; exit 1; }
prep=$PWD/tests/data/real/cnmf-pbmc-donor-a/prepare/pbmcA
cores=$(nproc)
OUT=perf/results/cnmf_workers_$TAG.txt
work=$(mktemp -d /tmp/knmf-cnmf-workers.XXXXXX)
trap 'rm -rf "$work"' EXIT
unset OMP_PROC_BIND OMP_PLACES
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}

LIB_NAME=cnmf_workers
# shellcheck source=perf/lib.sh
source perf/lib.sh  # fresh, timed
cnmf_workers() {  # the N workers in parallel, timed together
  local pids=() i
  for ((i = 0; i < cores; i++)); do
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
      "$CNMF" factorize --output-dir "$work/cnmfN" --name pbmcA --worker-index $i \
      --total-workers "$cores" > /dev/null 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}
export -f cnmf_workers
export CNMF work cores

{
  echo "# $(date -u +%FT%TZ) $cores cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
    "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE; $("$B/drivers/knmf" --version | head -1)" \
    "${KNMF_BASE:+; base: $("$KNMF_BASE/drivers/knmf" --version | head -1)}"
} | tee -a "$OUT"
for r in $(seq "$ROUNDS"); do
  fresh knmf
  timed knmf "$r" "$B/drivers/knmf" factorize --output-dir "$work/knmf" --name pbmcA --quiet
  fresh accel
  timed knmf-accel "$r" "$B/drivers/knmf" factorize --output-dir "$work/accel" --name pbmcA \
    --quiet --inner-sweeps auto
  if [[ -n ${KNMF_BASE:-} ]]; then
    fresh base
    timed knmf-base "$r" "$KNMF_BASE/drivers/knmf" factorize --output-dir "$work/base" \
      --name pbmcA --quiet
  fi
  fresh cnmfN
  timed "cnmf-$cores" "$r" bash -c cnmf_workers
  if [[ ${CNMF_ONE:-1} != 0 ]]; then
    fresh cnmf1
    timed cnmf-1 "$r" "$CNMF" factorize --output-dir "$work/cnmf1" --name pbmcA
  fi
done
# the same answers: knmf's spectra against cNMF's own (last round)
"$B/drivers/knmf" compare "$work/knmf/pbmcA" "$work/cnmfN/pbmcA" | tail -2 | tee -a "$OUT"
/usr/bin/python3 perf/cnmf_workers_table.py "$OUT"
