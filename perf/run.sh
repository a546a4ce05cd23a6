#!/usr/bin/env bash
# Reproduces perf/RESULTS.md: knmf's benchmarks and the peers (scikit-learn, a PyTorch
# batched-MU engine) measured on the same inputs, in one session, then the tables.
#
#   perf/run.sh [--quick] [--only SECTION[,SECTION...]]
#
# Needs the README's set-up done (cmake/dev.sh build) and, for the peers, Debian's
# python3-sklearn and python3-torch (apt-get install -y python3-torch). Runs ~40 minutes on
# 2 cores (--quick: small sizes, a few minutes, for checking the script). Raw results go to
# perf/results/<section>.json*, the report to perf/RESULTS.md.
# Sections: solver memory sparse oocore scaling cnmf torch mpi consensus devkernels beta
# (devkernels needs the device-kernels build too: cmake/dev.sh device-test, or
# KNMF_DEVICE_BUILD_DIR)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# the sections' temporary run folders and files, removed however the script ends
TMP_PATHS=()
trap 'rm -rf "${TMP_PATHS[@]}"' EXIT
ROOT=$(pwd)
B=${KNMF_BUILD_DIR:-build}
QUICK=0
ONLY=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY=$2; shift ;;
    *) echo "usage: perf/run.sh [--quick] [--only sections]" >&2; exit 2 ;;
  esac
  shift
done
want() { [[ -z $ONLY || ",$ONLY," == *",$1,"* ]]; }

KNMF=$B/drivers/knmf
for t in "$KNMF" "$B/perf/knmf_bench_solver" "$B/perf/knmf_bench_iteration" "$B/perf/knmf_bench_memory"; do
  [[ -x $t ]] || { echo "perf/run.sh: $t missing: run cmake/dev.sh build first" >&2; exit 1; }
done
PY=/usr/bin/python3
SHARED=${KNMF_SHARED_DIR:-$ROOT/../shared}
RES=perf/results
mkdir -p "$RES"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
# knmf re-selects OpenBLAS' kernels on CPUs that OpenBLAS 0.3.21 misdetects; give the peers
# (numpy, torch) the same kernels so that the comparison is about the code, not the BLAS.
CORE=$("$KNMF" --version | awk -F': ' '/host BLAS kernels/{print $2}')
[[ -n $CORE && $CORE != unknown && -z ${OPENBLAS_CORETYPE:-} ]] && export OPENBLAS_CORETYPE=$CORE
NT=$(nproc)
log() { echo "[perf] $(date +%H:%M:%S) $*" >&2; }
q() { if ((QUICK)); then echo "$1"; else echo "$2"; fi; }

# -- machine --------------------------------------------------------------------------------
{
  echo "{"
  echo "\"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "\"cpu\": \"$(lscpu | awk -F': +' '/Model name/{print $2}')\","
  echo "\"cores\": $NT,"
  echo "\"memory_gb\": $(awk '/MemTotal/{printf "%.1f", $2/1048576}' /proc/meminfo),"
  echo "\"load_start\": \"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "\"knmf\": \"$("$KNMF" --version | head -1)\","
  echo "\"kokkos\": \"$("$KNMF" --version | sed -n 2p)\","
  echo "\"blas\": \"${OPENBLAS_CORETYPE:-$CORE}\","
  echo "\"quick\": $QUICK"
  echo "}"
} > $RES/machine.json

# -- issue 3: one iteration vs the GEMMs it is made of ---------------------------------------
if want solver; then
  log "solver iteration vs GEMM roofline"
  filt=$(q '/20000/40' '.')
  "$B/perf/knmf_bench_solver" --benchmark_filter="$filt" --benchmark_format=json \
    --benchmark_out=$RES/solver.json --benchmark_out_format=json > /dev/null
fi

# -- issue 3: peak memory against the memory model --------------------------------------------
if want memory; then
  log "peak memory"
  "$B/perf/knmf_bench_memory" $(q "20000 2000 8 20 2 float mu" "200000 2000 8 20 5 float mu") \
    > $RES/memory.txt
fi

# -- issue 13: the portable (GPU) kernels run on this CPU, against the host-tuned ones ---------
DB=${KNMF_DEVICE_BUILD_DIR:-build-device-kernels}
if want devkernels; then
  if [[ -x $DB/perf/knmf_bench_iteration ]] &&
     "$DB/drivers/knmf" --version | grep -q KNMF_DEVICE_KERNELS_ON_HOST; then
    log "device kernels on the host vs host-tuned kernels"
    out=$RES/devkernels.jsonl
    : > $out
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $("$B/drivers/knmf" --version | head -1) against" \
      "$("$DB/drivers/knmf" --version | head -1), load average $(cut -d' ' -f1-3 /proc/loadavg)" \
      > $RES/devkernels.context
    n=$(q 4000 20000)
    # alternate the two builds, case by case, so that the machine's drift hits both alike
    for round in $(seq 1 $(q 1 3)); do
      for c in "dense cd" "dense mu" "sparse cd" "sparse mu"; do
        set -- $c
        for build in host-tuned portable; do
          bdir=$B; [[ $build == portable ]] && bdir=$DB
          "$bdir/perf/knmf_bench_iteration" --n $n --g 2000 --density 0.05 --R 8 --k 20 \
            --dtype float --format $1 --solver $2 --iters 2,6 --repeats 3 |
            sed "s/^{/{\"kernels\": \"$build\", \"round\": $round, /" >> $out
        done
      done
    done
  else
    log "devkernels: skipped, no device-kernels build in $DB (cmake/dev.sh device-test)"
  fi
fi

# -- issue 5: sparse vs dense, crossover, 1M cells, out of core --------------------------------
it() { "$B/perf/knmf_bench_iteration" "$@"; }
if want sparse; then
  log "sparse vs dense"
  n=$(q 20000 200000)
  : > $RES/sparse.jsonl
  for d in 0.02 0.05 0.10 0.20 0.35; do
    for f in sparse dense; do
      it --n $n --density $d --R 4 --k 20 --format $f --iters 1,4 --repeats $(q 1 3) >> $RES/sparse.jsonl
    done
  done
  log "X^T products: CSC gather vs KokkosSparse transposed SpMM"
  "$B/perf/knmf_bench_transpose" $(q "20000 2000 0.05 80" "200000 2000 0.05 80") > $RES/transpose.json
  log "1M x 2000 at 5%, 50 iterations"
  it --n $(q 100000 1000000) --density 0.05 --R 4 --k 20 --format sparse --iters 1,50 --repeats 1 \
    > $RES/million.json
fi
if want oocore; then
  log "out of core"
  n=$(q 20000 200000)
  : > $RES/oocore.jsonl
  for f in sparse streamed-sparse dense streamed-dense; do
    it --n $n --density 0.05 --R 4 --k 20 --format $f --blocks 4 --iters 1,4 --repeats $(q 1 3) >> $RES/oocore.jsonl
  done
fi
if want scaling; then
  log "scaling with n and with R*k"
  : > $RES/scaling.jsonl
  for n in $(q "10000 30000" "10000 100000 1000000"); do
    it --n $n --density 0.05 --R 4 --k 20 --format sparse --iters 1,$(q 3 4) --repeats 1 >> $RES/scaling.jsonl
  done
  for R in 1 4 8 16 32 48; do
    it --n $(q 20000 100000) --density 0.05 --R $R --k 10 --format sparse --iters 1,3 --repeats 1 >> $RES/scaling.jsonl
  done
fi

# -- issue 6: cNMF's real run end to end, knmf vs scikit-learn (cNMF's engine) ----------------
if want cnmf; then
  log "pbmcA end to end: knmf vs scikit-learn"
  RUNS=$(mktemp -d /tmp/knmf-perf-cnmf.XXXXXX)
  TMP_PATHS+=("$RUNS")
  cp -r "$SHARED/data/cnmf-pbmc-donor-a/prepare/pbmcA" "$RUNS/"
  chmod -R u+w "$RUNS"
  : > $RES/cnmf_knmf.txt
  jobs_arg=""; ((QUICK)) && jobs_arg="--worker-index 0 --total-workers 8"
  for rep in 1 2 3; do
    rm -f "$RUNS"/pbmcA/cnmf_tmp/*.spectra.*
    t0=$(date +%s.%N)
    "$KNMF" factorize --output-dir "$RUNS" --name pbmcA --quiet $jobs_arg
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.3f\n", b - a}' >> $RES/cnmf_knmf.txt
  done
  # quick: worker 0's jobs only; the reference's others have no partner
  unpaired=""; ((QUICK)) && unpaired="--allow-unpaired"
  "$KNMF" compare "$RUNS/pbmcA" "$SHARED/data/cnmf-pbmc-donor-a/reference/pbmcA" $unpaired \
    --json $RES/cnmf_compare.json > /dev/null || true
  peer_jobs=""
  ((QUICK)) && peer_jobs="--worker-index 0 --total-workers 8"
  for th in 1 $NT; do
    for rep in $(q "1" "1 2 3"); do
      $PY perf/peers/sklearn_peer.py --output-dir "$RUNS" --name pbmcA --threads $th $peer_jobs \
        --json $RES/cnmf_sklearn_t${th}_r${rep}.json > /dev/null
    done
  done
  rm -rf "$RUNS"
fi

# -- issue 6: fixed-iteration MU, knmf vs the PyTorch batched engine ---------------------------
if want torch; then
  log "fixed-iteration MU: knmf vs PyTorch"
  : > $RES/torch_knmf.jsonl
  shapes=$(q "20000:4:10" "20000:4:10 100000:8:20")
  for s in $shapes; do
    IFS=: read -r n R k <<< "$s"
    for dt in float double; do
      it --n $n --density 1.0 --R $R --k $k --dtype $dt --format dense --iters 2,$(q 6 12) --repeats $(q 1 3) >> $RES/torch_knmf.jsonl
      pdt=float32; [[ $dt == double ]] && pdt=float64
      $PY perf/peers/torch_mu_peer.py --synthetic $n 2000 -k $k --n-iter $R --seed 1 --batch $R \
        --tol 0 --max-iter $(q 6 12) --dtype $pdt --threads $NT --no-error-checks \
        --json $RES/torch_peer_${n}_${pdt}.json > /dev/null
    done
  done
fi

# -- issue 7: MPI strong scaling and communication volume ---------------------------------------
if want mpi; then
  log "MPI strong scaling"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  IN="$SHARED/data/cnmf-pbmc-donor-a/prepare/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad"
  : > $RES/mpi.txt
  for np in 1 2; do
    for mode in jobs rows; do
      out=$(mktemp -u /tmp/knmf-perf-mpi.XXXXXX.h5)
      TMP_PATHS+=("$out")
      t0=$(date +%s.%N)
      OMP_NUM_THREADS=$((NT / np)) mpiexec -n $np --oversubscribe "$KNMF" factorize "$IN" -k 5 6 7 8 \
        --n-iter $(q 2 10) --seed 14 -o "$out" --quiet --distribute $mode
      awk -v n=$np -v m=$mode -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%s %s %.3f\n", n, m, b - a}' >> $RES/mpi.txt
      rm -f "$out"
    done
  done
fi

# -- issue 8: consensus at scale ----------------------------------------------------------------
# -- the beta-divergence MU (Kullback-Leibler) against Frobenius MU ------------------------------
if want beta; then
  log "Kullback-Leibler MU vs Frobenius MU"
  n=$(q 5000 20000)
  : > $RES/beta.jsonl
  for f in dense sparse; do
    for b in frobenius kullback-leibler; do
      it --n $n --density 0.05 --R 2 --k 20 --dtype double --format $f --solver mu --beta-loss $b \
        --iters 1,4 --repeats $(q 1 5) >> $RES/beta.jsonl
    done
  done
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ); $("$KNMF" --version | head -1); load average $(cut -d' ' -f1-3 /proc/loadavg)" \
    > $RES/beta.context
fi

if want consensus && [[ -x $B/perf/knmf_bench_consensus ]]; then
  log "consensus k = 20, 100 replicates"
  "$B/perf/knmf_bench_consensus" $(q "100000 2000 20 100" "1000000 2000 20 100") > $RES/consensus.txt
fi

echo "{\"load_end\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" > $RES/machine_end.json
log "writing perf/RESULTS.md"
$PY perf/make_results.py $RES > perf/RESULTS.md
log "done"
