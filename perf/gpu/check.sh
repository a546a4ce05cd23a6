#!/usr/bin/env bash
# The GPU check of knmf, run ON the device machine in one call of the device tool
# (perf/gpu/README.md gives the exact call). Everything it runs was built on a CPU machine by
# perf/gpu/prepare.sh and carried in .device/: the CUDA binaries (Kokkos 4.6.01, sm_90 code by
# default), a host-OpenMP driver and the shared libraries they need; the pbmcA data comes with
# the working tree (tests/data/real).
#
#   bash perf/gpu/check.sh            writes $OUT/summary.md, $OUT/check.log,
#                                     $OUT/bench_f32.json, $OUT/bench_f64.json,
#                                     $OUT/bench_sparse.json and
#                                     $OUT/compare_all.json (every comparison): 6 files of
#                                     the tool's 8
#
# Environment: OUT (default /tmp/knmf-gpu-check-out), KNMF_DEVICE_DIR (default .device),
#   KNMF_CHECK_GPU_KNMF (a driver to use instead of the CUDA one, "host" for the carried OpenMP
#   one: a test of this script's factorize/compare/summary on a CPU machine),
#   KNMF_CHECK_FORCE_LOADER=1 (run knmf's programs through the carried glibc loader even when
#   the machine's glibc would do),
#   KNMF_CHECK_BUDGET_S (default 420: the whole check, every step inside it; call with
#   timeout_s 480),
#   KNMF_CHECK_STEPS (default "smi,streamed,variants,factorize,bench,tests": a subset reruns
#   only those). The order puts first what only a GPU can show: the streamed and
#   memory-limited runs and tests, then the solver variants (beta, accelerated, NNDSVD,
#   k = 20 and 60) against the host build, then cNMF's job table (with a rerun at rtol 0),
#   the benchmark, the other unit tests.
# Each step runs under `timeout`, a failed step is recorded and the next one runs; the exit
# status is 0 when every step that ran passed, 1 otherwise. It never resets the GPU or changes
# its settings (nvidia-smi is only queried).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
D=${KNMF_DEVICE_DIR:-$ROOT/.device}
OUT=${OUT:-/tmp/knmf-gpu-check-out}
BUDGET=${KNMF_CHECK_BUDGET_S:-420}
STEPS=${KNMF_CHECK_STEPS:-smi,streamed,variants,factorize,bench,tests}
START=$(date +%s)
mkdir -p "$OUT"
LOG=$OUT/check.log
SUMMARY=$OUT/summary.md
WORK=$(mktemp -d /tmp/knmf-gpu-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT  # scratch only: everything kept goes to $OUT
RES=$WORK/steps.tsv  # step, status, seconds, note
: >"$LOG"
: >"$RES"
exec 3>&1  # the call's own output: progress lines (its tail comes back in the reply)

say() { echo "[$(($(date +%s) - START))s] $*" | tee -a "$LOG" >&3; }
left() { echo $((START + BUDGET - $(date +%s))); }
want() { [[ ",$STEPS," == *",$1,"* ]]; }
# cap SECONDS [RESERVE]: SECONDS, or what is left of the budget minus RESERVE (default 10) if
# that is less. The phases come in order of what matters most, so a reserve is needed only
# where a later phase must keep some time (the last tests keep 30 s from the benchmark).
cap() {
  local c=$1 l=$(($(left) - ${2:-10}))
  ((l < c)) && c=$l
  ((c < 1)) && c=1
  echo "$c"
}
# step NAME TIMEOUT CMD...: run CMD under timeout, its output into the log, record the outcome
step() {
  local name=$1 t=$2 s rc
  shift 2
  if (($(left) < 20 || t < 5)); then
    say "SKIP $name: budget spent"
    printf '%s\tskipped (budget)\t0\t\n' "$name" >>"$RES"
    return 99
  fi
  s=$(date +%s)
  say "RUN  $name (timeout ${t}s): $*"
  { timeout -k 5 "$t" "$@" </dev/null >"$WORK/last.out" 2>&1; rc=$?; } 2>/dev/null  # (no "Aborted" from bash)
  { echo "----- $name: $*"; cat "$WORK/last.out"; } >>"$LOG"
  local dt=$(($(date +%s) - s)) st
  case $rc in
    0) st=ok ;;
    124 | 137) st="TIMEOUT (${t}s)" ;;
    *) st="FAILED (rc $rc)" ;;
  esac
  local note=""
  if ((rc != 0)); then  # the first error-looking line of the output, for the summary
    note=$(grep -m1 -E 'what\(\):|Kokkos::.*ERROR' "$WORK/last.out" ||
      grep -m1 -iE 'error|abort|not found|FAILED' "$WORK/last.out" || tail -n1 "$WORK/last.out")
    note=$(tr -d '\t|`' <<<"${note:0:160}")
  fi
  say "     $name: $st in ${dt}s${note:+: $note}"
  printf '%s\t%s\t%s\t%s\n' "$name" "$st" "$dt" "$note" >>"$RES"
  return $rc
}

# ---- what travelled --------------------------------------------------------------------------
# .device/payload.tar.xz holds the programs and libraries (bin/, host/, lib/); unpack into /tmp.
P=$D
if [[ -f $D/payload.tar.xz ]]; then
  P=$WORK/payload
  mkdir -p "$P"
  if ! tar -C "$P" -xJf "$D/payload.tar.xz" 2>>"$LOG"; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$D/payload.tar.xz" "$P" 2>>"$LOG"
  fi
fi
if [[ ! -x $P/bin/knmf ]]; then
  say "no knmf program in $D: run perf/gpu/prepare.sh on the build machine and name .device in carry"
  printf '# knmf GPU check\n\nNOT RUN: no knmf program in %s (prepare.sh not run, or .device not carried).\n' "$D" >"$SUMMARY"
  exit 1
fi
DATA=$ROOT/tests/data/real/cnmf-pbmc-donor-a
H5AD=$DATA/prepare/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad

# Libraries: the carried ones, then cuBLAS and the driver from the machine (never carried: too
# big, and libcuda must be the driver's own). Only knmf's programs get this path (python's
# packages must not see the carried libstdc++).
cuda_dirs=""
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && cuda_dirs+=":$d"
done
# cuBLAS and cuBLASLt come from the machine (no cuSPARSE: cmake/bootstrap.sh builds Kokkos
# Kernels without it, and prepare.sh refuses a program that needs it): where the loader's cache
# does not list one, find it.
for lib in libcublas.so.13 libcublasLt.so.13; do
  if ! ldconfig -p 2>/dev/null | grep -q "$lib "; then
    f=$(timeout 30 find /usr/local /opt /usr/lib -name "$lib" -print -quit 2>/dev/null)
    [[ -n $f && $cuda_dirs != *":$(dirname "$f")"* ]] && cuda_dirs+=":$(dirname "$f")"
  fi
done
LIBPATH=$P/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# KX prefixes every knmf program: the library path, and the carried glibc's loader when the
# machine's glibc is older than the build's (decided below).
KX=(env "LD_LIBRARY_PATH=$LIBPATH")
export OMP_PROC_BIND=spread OMP_PLACES=threads
export CUDA_CACHE_MAXSIZE=4294967296  # an sm_80 build on Hopper: keep every JIT-compiled kernel
NPROC=$(nproc)

say "knmf GPU check in $ROOT, carried folder $D, OUT=$OUT, budget ${BUDGET}s, steps $STEPS"
{
  echo "----- manifest"
  cat "$D/MANIFEST" 2>/dev/null
  echo "----- machine"
  uname -a
  ldd --version 2>&1 | head -1
  echo "nproc $NPROC; library path for knmf: $LIBPATH"
} >>"$LOG"

# ---- 1. the GPU as found (queries only) ------------------------------------------------------
GPU_NAME="(no GPU found)"
if want smi; then
  step nvidia-smi 20 nvidia-smi
  step nvidia-smi-query 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,utilization.gpu --format=csv
fi
n=$(timeout 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[[ -n $n ]] && GPU_NAME=$n

# ---- 2. can the programs start here (glibc, libraries, CUDA) ---------------------------------
LOADER=0
if [[ ${KNMF_CHECK_FORCE_LOADER:-0} == 1 ]] || "${KX[@]}" "$P/host/knmf" --version 2>&1 | grep -q 'GLIBC_'; then
  KX=(env "LD_LIBRARY_PATH=$LIBPATH" "$P/lib/glibc/ld-linux-x86-64.so.2" --library-path "$LIBPATH:$P/lib/glibc")
  LOADER=1
  say "the machine's glibc is older than the build's: knmf's programs run through the carried loader"
fi
# KNMF_CHECK_GPU_KNMF replaces the CUDA driver (a test of this script on a CPU machine: the
# host driver then plays the GPU's part in the factorize/compare steps).
GK=${KNMF_CHECK_GPU_KNMF:-$P/bin/knmf}
[[ $GK == host ]] && GK=$P/host/knmf
[[ $GK != "$P/bin/knmf" ]] && say "NOTE: the 'gpu' driver is $GK (KNMF_CHECK_GPU_KNMF), not the CUDA build"
step ldd-gpu 20 env LD_LIBRARY_PATH="$LIBPATH" ldd "$P/bin/knmf"
# every library of every CUDA program resolved (a missing one fails this row and names it)
step libraries 30 env LD_LIBRARY_PATH="$LIBPATH" bash -c 'm=0
  for f in "$1"/bin/*; do
    nf=$(ldd "$f" | grep "not found" | tr -s " \t" " " | tr "\n" ";")
    [[ -n $nf ]] && { echo "$(basename "$f"): not found:$nf"; m=1; }
  done
  exit $m' _ "$P"
step host-version 30 "${KX[@]}" "$P/host/knmf" --version
step gpu-version 120 "${KX[@]}" "$GK" --version  # first CUDA start (sm_80 on Hopper: the PTX JIT)
# What the plan leaves unplanned on this device, as the GPU driver itself computes it
# (drivers/cli.cpp: "memory plan: free F bytes, unplanned U bytes ..."); section 3 falls back to
# an estimate from nvidia-smi where an older driver does not print it.
PLAN_UNPLANNED=$(sed -n 's/^memory plan: .*unplanned \([0-9][0-9]*\) bytes.*/\1/p' "$WORK/last.out" | head -n1)
if [[ $GPU_NAME == "(no GPU found)" ]] && grep -q '^device: ' "$WORK/last.out"; then
  GPU_NAME=$(sed -n 's/^device: \(.*\) (device [0-9]*)$/\1/p' "$WORK/last.out" | head -n1)
  [[ -n $GPU_NAME ]] || GPU_NAME="(no GPU found)"
fi

# ---- comparisons: knmf compare (or the python fallback), each report into compare_all.json -----
have_compare=0
if "${KX[@]}" "$P/host/knmf" compare --help >"$WORK/compare_help" 2>&1; then have_compare=1; fi
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import h5py, numpy' 2>/dev/null; then PY=$p; break; fi
done
COMPARES=$WORK/compares.txt
: >"$COMPARES"
mkdir -p "$WORK/cmp"
# compare NAME A B RTOL MINCOS: knmf compare (or the python fallback for two results files)
compare() {
  local name=$1 a=$2 b=$3 rtol=$4 mincos=$5 rc
  if [[ ! -e $a || ! -e $b ]]; then
    say "SKIP compare $name: an input is missing"
    printf 'compare %s\tskipped (input missing)\t0\t\n' "$name" >>"$RES"
    return
  fi
  if ((have_compare)); then
    step "compare $name" "$(cap 30 30)" "${KX[@]}" "$P/host/knmf" compare "$a" "$b" --rtol "$rtol" \
      --min-cos "$mincos" --json "$WORK/cmp/$name.json"
    rc=$?
    local tool="knmf compare"
  elif [[ -n $PY && -f $a && -f $b ]]; then
    step "compare $name (python fallback)" "$(cap 30 30)" "$PY" perf/gpu/compare_results.py "$a" "$b" \
      --rtol "$rtol" --min-cos "$mincos" --json "$WORK/cmp/$name.json"
    rc=$?
    local tool="perf/gpu/compare_results.py (knmf compare not in this build)"
  else
    say "SKIP compare $name: no knmf compare in this build and no python3 with h5py (or a cNMF folder)"
    printf 'compare %s\tskipped (no comparer)\t0\t\n' "$name" >>"$RES"
    return
  fi
  {
    echo "### $name: \`$(basename "$a")\` vs \`$(basename "$b")\` (rtol $rtol, min-cos $mincos; $tool; exit $rc)"
    echo
    echo '```'
    head -n 8 "$WORK/last.out"
    local nl
    nl=$(wc -l <"$WORK/last.out")
    ((nl > 8)) && echo "... ($((nl - 8)) more lines in check.log)"
    echo '```'
    echo
  } >>"$COMPARES"
}

# gpu_run NAME ARGS...: factorize on the GPU into $WORK/NAME.h5; host_run likewise on the host
gpu_run() {
  local name=$1 t=$2
  shift 2
  step "gpu $name" "$(cap "$t" 60)" "${KX[@]}" "$GK" factorize "$H5AD" "$@" -o "$WORK/$name.h5"
}
host_run() {
  local name=$1 t=$2
  shift 2
  step "host $name ($NPROC threads)" "$(cap "$t" 60)" env OMP_NUM_THREADS="$NPROC" "${KX[@]}" \
    "$P/host/knmf" factorize "$H5AD" "$@" -o "$WORK/$name.h5"
}

# ---- 3. streamed X and a batch sized by a device-memory limit (what only a GPU can show) -----
# The limit: what the plan leaves unplanned on this device (the driver's --version line; else the
# estimate below: the slack max(256 MiB, 2% of the GPU's memory)
# and a 2 MiB granule for each of its 30 Views, src/run/memory.cpp; on a host-played run 8 MiB),
# plus one replicate of k = 7 (about 1 MiB at pbmcA's size), plus MARGIN: too little room for X
# (pbmcA in fp64: 46 MB dense, 8 MB sparse), so X is streamed and the batch is sized by what is
# left. A limit the plan finds too small is retried once with 8 MiB more.
UNPLANNED=$((8 << 20))
if [[ -n $PLAN_UNPLANNED ]]; then
  UNPLANNED=$PLAN_UNPLANNED
elif [[ $GK == "$P/bin/knmf" ]]; then
  tot=$(timeout 10 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -dc 0-9)
  if [[ -n $tot ]]; then
    t_b=$((tot << 20))
    sl=$((t_b / 50))
    ((sl < (256 << 20))) && sl=$((256 << 20))
    UNPLANNED=$((sl + 30 * ((2 << 20) - 1)))
  fi
fi
SJOBS=(-k 7 --n-iter 5 --seed 14 --dtype double)
streamed_run() {  # NAME FORMAT MARGIN_MIB
  local name=$1 fmt=$2 m=$3 try rc
  for try in 1 2; do
    local lim=$((UNPLANNED + ((1 + m) << 20)))
    gpu_run "$name" 60 "${SJOBS[@]}" --format "$fmt" --device-memory-limit "$lim"
    rc=$?
    if ((rc != 0)) && ((try == 1)) && grep -q 'not enough device memory\|cannot hold' "$WORK/last.out"; then
      sed -i '$d' "$RES"  # (this row is replaced by the retry's)
      say "     $name: limit $lim too small, again with 8 MiB more"
      m=$((m + 8))
      continue
    fi
    break
  done
  ((rc == 0)) || return
  local plan
  plan=$(grep -m2 '^plan:' "$WORK/last.out" | tr '\n' ' ' | tr -d '\t|`')
  say "     $name: limit $lim: $plan"
  if ! grep -q 'streamed from host memory' "$WORK/last.out"; then
    sed -i '$d' "$RES"
    printf '%s\t%s\t0\t%s\n' "gpu $name" "FAILED (X was not streamed)" "${plan:0:200}" >>"$RES"
  else
    STREAM_PLANS+="- $name (--format $fmt, --device-memory-limit $lim): ${plan:0:400}"$'\n'
  fi
}
STREAM_PLANS=""
EARLY_TESTS=(test_solver_streamed test_solver_batch)
if want streamed; then
  streamed_run stream_dense dense 24
  streamed_run stream_sparse sparse 6
  host_run stream_ref 60 "${SJOBS[@]}"
  compare stream_dense_host "$WORK/stream_ref.h5" "$WORK/stream_dense.h5" 1e-6 0.999999
  compare stream_sparse_host "$WORK/stream_ref.h5" "$WORK/stream_sparse.h5" 1e-6 0.999999
fi

# ---- 4. the unit tests of the memory plan and of streaming, on the GPU ------------------------
export KNMF_TEST_DATA_DIR=$ROOT/tests/data KNMF_TEST_DERIVED_DIR=$WORK/derived
TESTS=$WORK/tests.txt
: >"$TESTS"
run_test() {  # NAME [FILTER [TIMEOUT]]: the ctest entry NAME of tests.txt (program, arguments)
  local t=$1 filter=${2:-} args=() prog src
  IFS=$'\t' read -r _ prog src < <(awk -F'\t' -v t="$t" '$1 == t' "$D/tests.txt")
  [[ -n $prog && -x $P/bin/$prog ]] || { printf '%s\tmissing\t0\t\n' "test $t" >>"$RES"; return; }
  read -r -a args <<<"$src"
  [[ -n $filter ]] && args+=(--gtest_filter="$filter")
  step "test $t" "$(cap 60 "${3:-10}")" "${KX[@]}" "$P/bin/$prog" "${args[@]}"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran|^\[ +peak|peak / plan' "$WORK/last.out" | sed "s/^/$t: /" >>"$TESTS"
}
if want tests; then
  for t in "${EARLY_TESTS[@]}"; do run_test "$t" "" 120; done
fi

# ---- 5. the solver's variants on the GPU against the host build ------------------------------
if want variants; then
  VJOBS=(--seed 14 --dtype double)
  while read -r name args; do
    # shellcheck disable=SC2086
    gpu_run "v_$name" 40 "${VJOBS[@]}" $args && host_run "v_${name}_host" 60 "${VJOBS[@]}" $args &&
      compare "$name" "$WORK/v_${name}_host.h5" "$WORK/v_$name.h5" 1e-6 0.999999
  done <<'VARIANTS'
beta_kl -k 7 --n-iter 3 --solver mu --beta-loss kullback-leibler --max-iter 200
accelerated -k 7 --n-iter 3 --inner-sweeps auto
nndsvda -k 7 --n-iter 3 --init nndsvda
k20 -k 20 --n-iter 3
k60 -k 60 --n-iter 2
VARIANTS
fi

# ---- 6. cNMF's pbmcA job table on the GPU (fp64 twice, fp32, cNMF mode) and on the host --------
if want factorize; then
  JOBS=(-k 5 6 7 8 --n-iter 20 --seed 14)  # cNMF's pbmcA job table: 80 jobs, cd, tol 1e-4
  gpu_run gpu_f64 90 "${JOBS[@]}" --dtype double
  gpu_run gpu_f64_again 90 "${JOBS[@]}" --dtype double
  gpu_run gpu_f32 60 "${JOBS[@]}" --dtype float
  mkdir -p "$WORK/cnmf"
  cp -r "$DATA/prepare/pbmcA" "$WORK/cnmf/"
  cnmf_out=$WORK/cnmf/pbmcA
  step "gpu cNMF mode" "$(cap 60 60)" "${KX[@]}" "$GK" factorize \
    --output-dir "$WORK/cnmf" --name pbmcA || cnmf_out=$WORK/cnmf/failed  # (compare: input missing)
  host_run host_f64 90 "${JOBS[@]}" --dtype double
  compare host64_gpu64 "$WORK/host_f64.h5" "$WORK/gpu_f64.h5" 1e-6 0.999999
  compare gpu64_rerun "$WORK/gpu_f64.h5" "$WORK/gpu_f64_again.h5" 0 0
  compare host64_gpu32 "$WORK/host_f64.h5" "$WORK/gpu_f32.h5" 1e-2 0.999
  compare gpucnmf_reference "$cnmf_out" "$DATA/reference/pbmcA" 1e-6 0.999999
  compare gpu64_gpucnmf "$WORK/gpu_f64.h5" "$cnmf_out" 1e-12 0.999999999
fi

# ---- 7. the iteration benchmark (MU, CD) and cuBLAS GEMM of the same shapes, fp32 and fp64 ----
# One run per precision: each has its own timeout and JSON, so one stuck run keeps the other.
if want bench; then
  step "bench_solver fp32" "$(cap 80 60)" "${KX[@]}" "$P/bin/knmf_bench_solver" \
    --benchmark_filter='<float' --benchmark_out="$OUT/bench_f32.json" --benchmark_out_format=json
  step "bench_solver fp64" "$(cap 80 30)" "${KX[@]}" "$P/bin/knmf_bench_solver" \
    --benchmark_filter='<double' --benchmark_out="$OUT/bench_f64.json" --benchmark_out_format=json
  # a sparse X with 8 genes in every one of 400,000 cells: rows of X^T of 400,000 entries,
  # gathered in segments (docs/device-kernels.md); one JSON line per solver
  for solver in mu cd; do
    step "bench_iteration sparse $solver" "$(cap 40 30)" "${KX[@]}" "$P/bin/knmf_bench_iteration" \
      --format sparse --n 400000 --g 2000 --density 0.05 --dense-genes 8 --R 8 --k 20 \
      --solver $solver --dtype float --repeats 3 &&
      grep '^{' "$WORK/last.out" >>"$OUT/bench_sparse.json"
  done
fi

# ---- 8. the other unit tests on the GPU ------------------------------------------------------
if want tests; then
  while IFS=$'\t' read -r t _; do
    [[ -z $t || $t == \#* ]] && continue
    filter=""
    [[ " ${EARLY_TESTS[*]} " == *" $t "* ]] && continue
    # The schema test reads a results file with python3's h5py; a device without it (the first
    # H200 had none) runs the rest of the suite and says so instead of failing on the machine.
    if [[ $t == test_results_file && -z $filter ]] && ! python3 -c 'import h5py, numpy' 2>/dev/null; then
      filter=-ResultsFile.PythonReadsTheSchema
      say "     test_results_file: no python3 h5py on this machine: ResultsFile.PythonReadsTheSchema not run"
    fi
    run_test "$t" "${filter:-}"
  done <"$D/tests.txt"
fi

# ---- summary ---------------------------------------------------------------------------------
{
  echo "# knmf GPU check"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); GPU: $GPU_NAME; host: $NPROC CPUs"
  grep -E '^(git|built|nvcc|kokkos)' "$D/MANIFEST" 2>/dev/null | sed 's/^/- /'
  ((LOADER)) && echo "- programs ran through the carried glibc loader (machine glibc older than the build's)"
  echo "- check wall time: $(($(date +%s) - START)) s of a ${BUDGET} s budget; steps: $STEPS"
  echo
  echo "## Steps"
  echo
  echo "| step | result | s | first error line |"
  echo "|---|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$RES"
  echo
  if [[ -n $STREAM_PLANS ]]; then
    echo "## Streamed and memory-limited runs (pbmcA, k = 7 x 5, fp64)"
    echo
    echo "$STREAM_PLANS"
  fi
  if [[ -s $COMPARES ]]; then
    echo "## Agreement (stream_*: k = 7 x 5; variants: k = 7 x 3, k20, k60; pbmcA table: k = 5..8 x 20, cd, tol 1e-4)"
    echo
    cat "$COMPARES"
  fi
  bench=()
  for f in "$OUT"/bench_f32.json "$OUT"/bench_f64.json; do [[ -s $f ]] && bench+=("$f"); done
  if [[ -s $OUT/bench_sparse.json ]]; then
    echo "## Sparse iteration with long rows (knmf_bench_iteration, seconds per iteration)"
    cat "$OUT/bench_sparse.json"
  fi
  if ((${#bench[@]})); then
    echo "## Iteration benchmark (perf/bench_solver.cpp), medians of 5"
    echo
    if command -v python3 >/dev/null; then
      python3 perf/gpu/summarize_bench.py "${bench[@]}" --gpu "$GPU_NAME" 2>&1
    else
      echo "(no python3: raw numbers in bench_f*.json and check.log)"
    fi
    echo
  fi
  if [[ -s $TESTS ]]; then
    echo "## Unit tests on the GPU"
    echo
    echo '```'
    cat "$TESTS"
    echo '```'
  fi
} >"$SUMMARY"
# every comparison's JSON in one file (the tool brings back 8 files at most)
{
  echo "{"
  first=1
  for f in "$WORK"/cmp/*.json; do
    [[ -s $f ]] || continue
    ((first)) || echo ","
    first=0
    printf '"%s": ' "$(basename "$f" .json)"
    cat "$f"
  done
  echo "}"
} >"$OUT/compare_all.json"
cat "$SUMMARY" >&3
status=0
grep -qv $'\tok\t' "$RES" && status=1
exit $status
