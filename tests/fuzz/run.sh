#!/usr/bin/env bash
# Runs knmf's libFuzzer harnesses (tests/fuzz/README.md), each for SECONDS on a scratch corpus
# seeded from tests/fuzz/corpus/<harness> (never written to), with its dictionary.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]      (default: every fuzz_* in BUILD_DIR)
#   tests/fuzz/run.sh BUILD_DIR --sort-h5ad ARTIFACT...    (sort the findings of a long h5ad run)
#
# Any finding fails (exit 1): a crash, a sanitizer report, a leak, a timeout (-timeout=10 s per
# input) or more than 2 GB of memory. The h5ad harness runs in libFuzzer's fork mode, which
# keeps going after a finding; each of its artifacts is then rerun alone. A leak is HDF5's when
# every leaked block was allocated inside libhdf5 (other than variable-length data a read hands
# to knmf); a crash, timeout or out-of-memory is HDF5's when h5image_check (HDF5 alone, no knmf
# code) fails on the input too. HDF5's are reported and kept in RUNS/hdf5-bugs/, not failed on;
# the rest are the h5ad reader's and fail the run; one that does not fail alone is reported
# (RUNS/not-reproduced/).
# Logs, artifacts and the grown corpora: BUILD_DIR/fuzz-runs/ (KNMF_FUZZ_RUNS overrides).
# Extra libFuzzer options: KNMF_FUZZ_ARGS (e.g. "-jobs=2 -workers=2"; -seed=N).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bdir=${1:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
secs=${2:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
fz=$bdir/tests/fuzz
if [[ $secs == --sort-h5ad ]]; then :
elif (($#)); then harnesses=("$@"); else
  harnesses=(); for exe in "$fz"/fuzz_*; do harnesses+=("${exe##*/fuzz_}"); done
fi
runs=${KNMF_FUZZ_RUNS:-$bdir/fuzz-runs}
mkdir -p "$runs"
common=(-max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1)

# A leak report (LeakSanitizer, full stacks) on stdin: does any leaked allocation belong to
# knmf? HDF5's own allocations (first frame past the allocator inside libhdf5) are HDF5's, except
# variable-length data HDF5 allocates for the caller of H5Dread/H5Aread, which the caller
# (knmf) must reclaim. Prints "knmf" or "hdf5".
leak_owner() {
  awk '/^(Direct|Indirect) leak/ { if (inblk) decide(); inblk = 1; first = ""; vlen = 0; next }
       inblk && /^ +#[0-9]+ / {
         if (first == "" && $0 !~ / in (malloc|calloc|realloc|strdup|strndup|posix_memalign|aligned_alloc|operator new|__interceptor_)/) first = $0
         if ($0 ~ /H5T__conv_vlen|H5T__vlen|H5D__vlen/) vlen = 1 }
       inblk && /^$/ { decide(); inblk = 0 }
       function decide() { if (first !~ /libhdf5/ || vlen) knmf = 1 }
       END { if (inblk) decide(); print (knmf ? "knmf" : "hdf5") }'
}

# An AddressSanitizer allocation-size-too-big report on stdin ("requested allocation size ...
# exceeds maximum supported size"): was the allocation requested by HDF5 itself (first frame past
# the allocator inside libhdf5, e.g. H5C_protect sizing a metadata entry from a corrupt file)?
# Prints "hdf5" or "knmf". HDF5 alone (h5image_check) need not reach the same metadata entry,
# so this is decided from the stack (found by CI's fuzzing on 2026-12-06).
huge_alloc_owner() {
  awk '/requested allocation size .* exceeds maximum supported size/ { inrep = 1; next }
       inrep && /^ +#[0-9]+ / {
         if ($0 ~ / in (malloc|calloc|realloc|posix_memalign|aligned_alloc|operator new|__interceptor_)/) next
         owner = ($0 ~ /libhdf5/) ? "hdf5" : "knmf"; exit }
       END { print (owner == "" ? "knmf" : owner) }'
}

# Sorts h5ad artifacts (ASAN_OPTIONS/LSAN_OPTIONS as for fuzzing): not failing alone (fork mode
# can blame the input a job ended on), HDF5's own bug, or the h5ad reader's (appended to `ours`).
sort_h5ad() {
  local h=h5ad a
  for a in "$@"; do
    if "$fz/fuzz_$h" -timeout=10 -rss_limit_mb=2048 "$a" > "$a.alone.log" 2>&1; then
      mkdir -p "$runs/not-reproduced"; mv "$a" "$a.alone.log" "$runs/not-reproduced/"
      echo "fuzz $h: ${a##*/} does not fail when run alone (kept in $runs/not-reproduced/)"
    elif [[ ${a##*/} == h5ad-leak-* ]]; then
      if [[ $(leak_owner < "$a.alone.log") == hdf5 ]]; then
        mkdir -p "$runs/hdf5-bugs"; mv "$a" "$a".*.log "$runs/hdf5-bugs/"
        echo "fuzz $h: HDF5's own leak (every leaked block allocated inside libhdf5): $runs/hdf5-bugs/${a##*/}"
      elif ! "$fz/h5image_check" -timeout=10 -rss_limit_mb=2048 "$a" > "$a.hdf5-alone.log" 2>&1 &&
           grep -q "ERROR: LeakSanitizer" "$a.hdf5-alone.log"; then
        # variable-length data leaked in a read that fails: HDF5 alone (which reclaims what a
        # read gives it) leaks too, so the blocks never reached the caller's buffer
        mkdir -p "$runs/hdf5-bugs"; mv "$a" "$a".*.log "$runs/hdf5-bugs/"
        echo "fuzz $h: HDF5's own leak (HDF5 alone leaks on it too): $runs/hdf5-bugs/${a##*/}"
      else
        ours+=("$a")
      fi
    elif [[ $(huge_alloc_owner < "$a.alone.log") == hdf5 ]]; then
      mkdir -p "$runs/hdf5-bugs"; mv "$a" "$a".*.log "$runs/hdf5-bugs/"
      echo "fuzz $h: HDF5's own bug (an allocation of an impossible size requested inside libhdf5): $runs/hdf5-bugs/${a##*/}"
    elif ! "$fz/h5image_check" -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 "$a" > "$a.hdf5-alone.log" 2>&1; then
      mkdir -p "$runs/hdf5-bugs"; mv "$a" "$a".*.log "$runs/hdf5-bugs/"
      echo "fuzz $h: HDF5's own bug (fails with HDF5 alone too): $runs/hdf5-bugs/${a##*/}" \
           "($(grep -m1 -oE 'ERROR: [A-Za-z]+: [A-Za-z -]+' "$runs/hdf5-bugs/${a##*/}.hdf5-alone.log"))"
    else
      ours+=("$a")
    fi
  done
}
h5ad_env() {
  export ASAN_OPTIONS=fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/hdf5-leaks.supp
}

# tests/fuzz/run.sh BUILD_DIR --sort-h5ad FILE...: sort artifacts of a long h5ad run (moved to
# RUNS/hdf5-bugs/ or RUNS/not-reproduced/; the reader's own are listed and fail).
if [[ $secs == --sort-h5ad ]]; then
  h5ad_env; ours=(); sort_h5ad "$@"
  ((${#ours[@]} == 0)) || { echo "fuzz h5ad: the h5ad reader's findings: ${ours[*]}" >&2; exit 1; }
  exit 0
fi

# One harness: its runs, its findings sorted; returns 1 on a finding in knmf's code. The
# harnesses run KNMF_FUZZ_PARALLEL at a time (default: the cores; each fuzzes on one core),
# each in a subshell of its own (the h5ad harness' environment stays its own).
run_one() {
  local h=$1 t0 rc stats execs found ours mode
  [[ -x $fz/fuzz_$h ]] || { echo "fuzz $h: no $fz/fuzz_$h" >&2; return 1; }
  rm -rf "$runs/$h-corpus" "$runs/$h"-crash-* "$runs/$h"-leak-* "$runs/$h"-timeout-* "$runs/$h"-oom-* \
         "$runs/$h"-slow-unit-*
  mkdir -p "$runs/$h-corpus"
  mode=()
  if [[ $h == h5ad ]]; then
    # Fork mode goes on after a finding (HDF5's own hangs and crashes would end the run);
    # HDF5's proven leaks are suppressed (hdf5-leaks.supp, which needs the slow unwinder).
    mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    h5ad_env
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$fz/fuzz_$h" "${common[@]}" "${mode[@]}" -dict="tests/fuzz/dict/$h.dict" \
    -artifact_prefix="$runs/$h-" ${KNMF_FUZZ_ARGS:-} "$runs/$h-corpus" "tests/fuzz/corpus/$h" \
    > "$runs/$h.log" 2>&1
  rc=$?
  found=($(ls -d "$runs/$h"-{crash,leak,timeout,oom}-* 2>/dev/null | grep -v '\.log$'))
  ours=()
  if [[ $h == h5ad ]]; then
    sort_h5ad "${found[@]}"
    unset ASAN_OPTIONS LSAN_OPTIONS
    ((rc != 0 && ${#found[@]} == 0)) && ours+=("(exit $rc, no artifact)")
  else
    ((rc != 0 || ${#found[@]})) && ours=("${found[@]:-(exit $rc, no artifact)}")
  fi
  stats=$(grep -E '^#[0-9]+:?[[:space:]]+(DONE|cov:)' "$runs/$h.log" | tail -n1)
  execs=$(grep -E 'stat::number_of_executed_units' "$runs/$h.log" | awk '{print $2}')
  echo "fuzz $h: $(( $(date +%s) - t0 )) s, ${stats:-no stats}${execs:+ (executions $execs)}," \
       "corpus $(ls "$runs/$h-corpus" | wc -l) new + $(ls "tests/fuzz/corpus/$h" | wc -l) seeds"
  if ((${#ours[@]})); then
    tail -n 60 "$runs/$h.log" >&2
    echo "fuzz $h: FAILED: ${ours[*]} (log $runs/$h.log)" >&2
    return 1
  fi
}

par=${KNMF_FUZZ_PARALLEL:-$(nproc)}
declare -A pid_of=()
for h in "${harnesses[@]}"; do
  while (( $(jobs -rp | wc -l) >= par )); do wait -n || true; done
  run_one "$h" &
  pid_of[$h]=$!
done
failed=()
for h in "${harnesses[@]}"; do wait "${pid_of[$h]}" || failed+=("$h"); done
((${#failed[@]} == 0)) || { echo "fuzz: findings in ${failed[*]}" >&2; exit 1; }
echo "fuzz: ${harnesses[*]}: ${secs} s each, no finding in knmf's code"
