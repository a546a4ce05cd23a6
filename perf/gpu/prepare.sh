#!/usr/bin/env bash
# Build HERE (a CPU machine with nvcc 13) everything perf/gpu/check.sh runs on the device
# machine, and stage it in .device/ (git-ignored), the folder the device tool's `carry` names.
# See perf/gpu/README.md.
#
#   perf/gpu/prepare.sh             sm_90 (H100/H200: the device machine's H200)
#   KNMF_DEVICE_ARCH=80 perf/gpu/prepare.sh   sm_80 (A100)
#
# It builds, with MPI off (no OpenMPI to carry):
#   * CUDA (cmake/bootstrap.sh --cuda 90: Kokkos 4.6.01 Cuda+OpenMP+Serial, HOPPER90, static)
#     in build-device-cuda-sm90/: the driver, knmf_bench_solver and the GPU-relevant tests;
#   * host OpenMP (cmake/bootstrap.sh) in build-device-host/: the driver;
# then stages in .device/: payload.tar.xz holding bin/ (the CUDA programs), host/knmf, lib/
# (every shared library they need but the C library, the CUDA driver and cuBLAS, which
# the device machine has; the CUDA runtime libcudart.so.13 travels) and lib/glibc/ (this
# machine's C library and loader, used only where the device's glibc is older); next to it
# tests.txt (the tests to run: ctest name, program, its arguments) and MANIFEST. The data (tests/data, with the pbmcA run in
# tests/data/real) travels in the working tree. It checks, before packing, that each program's
# libraries resolve from lib/, that each CUDA program holds sm_90 code and compute_90 PTX for
# every module with kernels, and that the folder plus the working tree stay under the tool's
# 64 MiB.
#
# Environment: KNMF_DEVICE_ARCH (90 or 80; default 90), KNMF_DEVICE_STAGE (default .device),
# KNMF_CUDA_BUILD_DIR, KNMF_HOST_BUILD_DIR, KNMF_BUILD_JOBS (default 2), KNMF_SKIP_BUILD=1
# (stage what is built).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
stage=${KNMF_DEVICE_STAGE:-$root/.device}
arch=${KNMF_DEVICE_ARCH:-90}
[[ $arch == 90 || $arch == 80 ]] || { echo "prepare: KNMF_DEVICE_ARCH=$arch: expected 90 or 80" >&2; exit 2; }
cuda_bdir=${KNMF_CUDA_BUILD_DIR:-build-device-cuda-sm$arch}
host_bdir=${KNMF_HOST_BUILD_DIR:-build-device-host}
jobs=${KNMF_BUILD_JOBS:-2}
limit=$((64 * 1024 * 1024))
log() { echo "prepare: $*" >&2; }

# The tests worth running on a GPU, the memory-limited ones first (check.sh runs the first two
# early) (device kernels: the per-slot kernels at their path
# boundaries, host mirrors, solver dense/sparse/streamed, refit,
# clustering and the consensus against cNMF's, simulation, RNG, the runtime, the loaders),
# optionally each with a gtest filter after its name. All their data is in tests/data.
tests_txt='test_solver_streamed
test_solver_batch
test_kernels
test_host_access
test_runtime
test_random_state
test_solver_synthetic
test_solver_sparse
test_solver_real
test_consensus_refit
test_consensus_clustering
test_consensus_reference
test_demo_pipeline
test_h5ad_reader
test_results_file'
# ctest entries, not programs: the tests of an area are one program (tests/CMakeLists.txt,
# knmf_test_program), and an entry runs it with --knmf_source=FILE (its own cases only).
# test_rows: "name<TAB>program<TAB>arguments" of each, read from the add_test() lines CMake
# writes into the build's CTestTestfile.cmake files: they name each program before it is built
# (ctest --show-only=json-v1 leaves out the command of a program not built yet, and this list
# chooses what to build).
test_rows_of() {  # $1: a configured build dir
  find "$1/tests" -name CTestTestfile.cmake -print0 | xargs -0 cat | /usr/bin/python3 -c '
import os, re, shlex, sys
want = sys.argv[1].split()
tests = {}
for line in sys.stdin:
    m = re.match(r"add_test\(\[=\[(.+?)\]=\] (.*)\)\s*$", line)
    if m:
        tests[m.group(1)] = shlex.split(m.group(2))
for n in want:
    if not tests.get(n):
        sys.exit("prepare: no ctest entry %s in the CUDA build" % n)
    cmd = tests[n]
    print("%s\t%s\t%s" % (n, os.path.basename(cmd[0]), " ".join(cmd[1:])))
' "$(tr '\n' ' ' <<<"$tests_txt")"
}

t0=$(date +%s)
if [[ ${KNMF_SKIP_BUILD:-0} != 1 ]]; then
  cuda_prefix=$(cmake/bootstrap.sh --cuda "$arch" | tail -n1)
  host_prefix=$(cmake/bootstrap.sh | tail -n1)
  export PATH=/usr/local/cuda/bin:$PATH
  launcher=()
  if command -v ccache >/dev/null && [[ "${KNMF_CCACHE:-1}" != 0 ]]; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
  fi
  cmake -G Ninja -S . -B "$cuda_bdir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DKokkos_ROOT="$cuda_prefix" -DKokkosKernels_ROOT="$cuda_prefix" \
    -DCMAKE_CXX_COMPILER="$cuda_prefix/bin/nvcc_wrapper" -DCMAKE_CXX_FLAGS="-arch=sm_$arch" \
    -DKNMF_ENABLE_MPI=OFF -DKNMF_ENABLE_PERF=ON -DKNMF_ENABLE_TESTS=ON >&2
  mapfile -t cuda_programs < <(test_rows_of "$cuda_bdir" | cut -f2 | sort -u)
  ((${#cuda_programs[@]})) || { log "no test program found in $cuda_bdir"; exit 1; }
  cmake --build "$cuda_bdir" -j "$jobs" --target knmf_driver knmf_bench_solver knmf_bench_iteration "${cuda_programs[@]}" >&2
  cmake -G Ninja -S . -B "$host_bdir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DKokkos_ROOT="$host_prefix" -DKokkosKernels_ROOT="$host_prefix" -DKNMF_ENABLE_MPI=OFF >&2
  cmake --build "$host_bdir" -j "$jobs" --target knmf_driver >&2
fi
test_rows=$(test_rows_of "$cuda_bdir") || exit 1
mapfile -t cuda_programs < <(cut -f2 <<<"$test_rows" | sort -u)
t1=$(date +%s)

# ---- stage -----------------------------------------------------------------------------------
new=$(realpath -m "$cuda_bdir")/device-stage  # inside the (ignored) build folder: never part of the working tree
rm -rf "$new"
mkdir -p "$new"/{bin,host,lib/glibc}
find_exe() {  # the built program $1 under build dir $2
  local f
  f=$(find "$2" -name "$1" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -n1)
  [[ -n $f ]] || { log "missing $1 in $2 (build it first)"; exit 1; }
  echo "$f"
}
for p in knmf knmf_bench_solver knmf_bench_iteration "${cuda_programs[@]}"; do
  cp "$(find_exe "$p" "$cuda_bdir")" "$new/bin/$p"
done
cp "$(find_exe knmf "$host_bdir")" "$new/host/knmf"
# Symbols only (no debug info in Release); the CUDA fat binary is a section strip keeps.
strip --strip-unneeded "$new"/bin/* "$new"/host/*
printf '%s\n' "$test_rows" >"$new/tests.txt"

# Shared libraries: everything ldd resolves, except the C library (lib/glibc/ instead), the
# CUDA driver and cuBLAS (the device machine's own), copied under their sonames.
glibc_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libmvec)\.so'
device_re='^(libcuda|libcublas|libcublasLt|libnvidia-)\.so'
for exe in "$new"/bin/* "$new"/host/*; do
  ldd "$exe" | awk '/=>/ {print $1, $3} !/=>/ && $1 ~ /^\// {print $1, $1}'
done | sort -u | while read -r soname path; do
  base=$(basename "$soname")
  if [[ $base =~ $glibc_re ]]; then
    [[ -f $path ]] && cp -L "$path" "$new/lib/glibc/$base"
  elif [[ $base =~ $device_re ]]; then
    :
  elif [[ $path == "not" || ! -f $path ]]; then
    log "unresolved library $soname (needed by a program)"
  else
    cp -L "$path" "$new/lib/$base"
  fi
done
[[ -f $new/lib/glibc/ld-linux-x86-64.so.2 ]] || cp -L /lib64/ld-linux-x86-64.so.2 "$new/lib/glibc/"

# Data: nothing to stage; check.sh reads the pbmcA run from tests/data/real of the copied tree.

# ---- checks ----------------------------------------------------------------------------------
fail=0
for exe in "$new"/bin/* "$new"/host/*; do
  # cuSPARSE is off in the CUDA Kokkos Kernels (cmake/bootstrap.sh): a program that still
  # needs it (or nvJitLink, which it pulls in) would not start on a machine without them
  if /usr/bin/ldd "$exe" | grep -Eq 'lib(cusparse|nvJitLink)\.so'; then
    log "$exe needs cuSPARSE or nvJitLink (cmake/bootstrap.sh builds Kokkos Kernels without them)"
    fail=1
  fi
  # (libcuda.so.1, which Kokkos 4 links for the driver API, is the device machine's driver)
  miss=$(env -i LD_LIBRARY_PATH="$new/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib" /usr/bin/ldd "$exe" |
    grep 'not found' | grep -Ev "^[[:space:]]*(libcuda|libnvidia-)\.so" || true)
  if [[ -n $miss ]]; then log "$exe: $miss"; fail=1; fi
  # every resolved library but the C library and the device's own CUDA ones from .device/lib
  while read -r soname path; do
    base=$(basename "$soname")
    [[ $base =~ $glibc_re || $base =~ $device_re ]] && continue
    [[ $path == "$new/lib/"* ]] || { log "$exe: $soname resolves outside the stage: $path"; fail=1; }
  done < <(env -i LD_LIBRARY_PATH="$new/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib" /usr/bin/ldd "$exe" | awk '/=>/ {print $1, $3}')
done
fatbins=$(for exe in "$new"/bin/*; do
  /usr/bin/python3 perf/gpu/fatbin_arches.py "$exe" --need-elf "$arch" --need-ptx "$arch" ||
    echo "FAIL: $exe lacks sm_$arch code or compute_$arch PTX"
done)
[[ $fatbins == *FAIL* ]] && fail=1
glibc_need=$(for exe in "$new"/bin/* "$new"/host/* "$new"/lib/*.so*; do
  objdump -T "$exe" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true
done | sort -uV | tail -n1)
glibcxx_need=$(for exe in "$new"/bin/* "$new"/host/* "$new"/lib/*.so*; do
  objdump -T "$exe" 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' || true
done | sort -uV | tail -n1)

stage_bytes=$(du -sb "$new" | cut -f1)
tree_bytes=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n1 | cut -f1)
{
  echo "git $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include drivers perf tests CMakeLists.txt || echo ' (+ uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2); Kokkos 4.6.01 CUDA (sm_$arch code + compute_$arch PTX) and OpenMP; MPI off"
  echo "kokkos prefixes: $(sed -n "s/^Kokkos_ROOT:[A-Z]*=//p" "$cuda_bdir/CMakeCache.txt") $(sed -n "s/^Kokkos_ROOT:[A-Z]*=//p" "$host_bdir/CMakeCache.txt")"
  echo "needs: $glibc_need (glibc $(ldd --version | head -1 | grep -o '[0-9.]*$') here; lib/glibc/ is the fallback), $glibcxx_need (libstdc++ carried)"
  echo "GPU code (perf/gpu/fatbin_arches.py):"
  sed "s#$new/##" <<<"$fatbins"
  echo "size: $stage_bytes bytes staged; working tree $tree_bytes bytes; limit $limit"
  echo "files:"
  (cd "$new" && find . -type f -printf '%s %p\n' | sort -k2)
} >"$new/MANIFEST"

# The programs are ~60 MB stripped (each CUDA program holds its own fat binary); xz packs them
# (and the libraries) about 6-fold. check.sh unpacks payload.tar.xz into /tmp there.
tar -C "$new" -cf - bin host lib | xz -T"$jobs" -6 >"$new/payload.tar.xz"
unpacked_bytes=$stage_bytes
rm -rf "${new:?}"/{bin,host,lib}
stage_bytes=$(du -sb "$new" | cut -f1)
sed -i "s#^size: .*#size: $stage_bytes bytes carried (programs and libraries in payload.tar.xz; $unpacked_bytes unpacked); working tree $tree_bytes bytes; limit $limit#" "$new/MANIFEST"
if ((stage_bytes + tree_bytes > limit)); then
  log "too big: staged $stage_bytes + working tree $tree_bytes bytes > $limit"
  fail=1
fi
if ((fail)); then
  log "checks failed; the new stage is left in $new for inspection"
  exit 1
fi
rm -rf "$stage"
mv "$new" "$stage"
sed -i "s#$new#$stage#g" "$stage/MANIFEST"
log "built in $((t1 - t0)) s; staged $(du -sh "$stage" | cut -f1) in $stage (+ working tree $((tree_bytes / 1024 / 1024)) MiB; limit 64 MiB)"
log "needs $glibc_need; carry: [\"$(realpath --relative-to="$root" "$stage")\"]"
