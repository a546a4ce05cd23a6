#!/usr/bin/env bash
# One-command set-up, build and run for a fresh Debian 12 machine (see README.md).
#
#   cmake/dev.sh demo             install deps, build the knmf driver, run the built-in demo (the main job)
#   cmake/dev.sh test             install deps, build knmf and its tests, run ctest
#   cmake/dev.sh build            install deps and build only
#   cmake/dev.sh cuda-build [90|80]  build everything for CUDA (Kokkos 4.6.01 + nvcc) for sm_90
#                                 (H100/H200, the default) or sm_80 (A100); compile and link only
#                                 (KNMF_CUDA_EXTRA_ARCHS=80: the library and driver for sm_80 too)
#   cmake/dev.sh device-test      build the device-kernels build (OpenMP running the kernels a
#                                 GPU runs, device memory guarded) in build-device-kernels/, run ctest
#   cmake/dev.sh sanitize-test    build library, driver and tests with ASan + UBSan (KNMF_SANITIZE, no
#                                 MPI) in build-sanitize/ and run ctest there; any finding fails
#   cmake/dev.sh fuzz [seconds]   build the libFuzzer harnesses (clang) in build-fuzz/ and run each
#                                 for `seconds` (default 20) on its seed corpus (tests/fuzz/README.md)
#
# Environment: KNMF_BUILD_DIR (default build, or build-cuda-smNN), KNMF_DEPS_CACHE (default
# ~/.cache/knmf-deps), KNMF_DEPS_MIRROR (a folder holding the Kokkos tarballs, for machines
# without access to GitHub), KNMF_BUILD_JOBS (default nproc), KNMF_CMAKE_ARGS (extra configure
# arguments), KNMF_CTEST_ARGS (extra ctest arguments), KNMF_CTEST_JOBS (tests run at once,
# default nproc; the longest start first: COST in tests/CMakeLists.txt), KNMF_SKIP_APT=1,
# KNMF_CCACHE=0 (no ccache), KNMF_CUDA_HOST_OPT (cuda-build: the host compiler's -O level, default -O3).
# KNMF_PYTHON (the Python the module is built for and tested with; default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmd=${1:-test}; shift || true
jobs=${KNMF_BUILD_JOBS:-$(nproc)}
ctest_jobs=${KNMF_CTEST_JOBS:-$(nproc)}

configure_build() {  # $1 build dir, $2 prefix, rest: cmake args; builds $build_target (default all)
  local bdir=$1 prefix=$2; shift 2
  local launcher=()
  if command -v ccache >/dev/null && [[ "${KNMF_CCACHE:-1}" != 0 ]]; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # Paths under the checkout are hashed relative to it: clones in other folders share hits.
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
    # ... also for compiles with debug information (the sanitizer and fuzz builds, -g1/-g): by
    # default ccache hashes the working directory into those, so each clone's folder missed
    # every one of them (measured: the sanitizer build of a second clone compiled from
    # scratch). The cost: a cached object's debug information names the folder of the clone
    # that compiled it first (DW_AT_comp_dir), so a sanitizer report's file paths may point
    # there; file names and lines are right.
    export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
  fi
  cmake -G Ninja -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" "$@" ${KNMF_CMAKE_ARGS:-}
  cmake --build "$bdir" -j "$jobs" ${build_target:+--target "$build_target"}
}
build_target=""

# The Python module (python/, docs/python.md) for Debian's Python, which has numpy, scipy and
# pytest (another python3 first on PATH, e.g. pyenv's, may lack them): KNMF_PYTHON to choose.
python=(-DKNMF_ENABLE_PYTHON=ON "-DPython_EXECUTABLE=${KNMF_PYTHON:-/usr/bin/python3}")

case "$cmd" in
  demo|test|build)
    prefix=$(cmake/bootstrap.sh | tail -n1)
    bdir=${KNMF_BUILD_DIR:-build}
    # The benchmarks (perf/) are built by `build` and by the device-kernels and CUDA builds
    # (CI), not by `test`: no test runs them. `demo` configures as `test` does (so the one after
    # the other reconfigures nothing) and builds only the driver and what it links.
    perf=ON
    [[ $cmd == test || $cmd == demo ]] && perf=OFF
    [[ $cmd == demo ]] && build_target=knmf_driver
    configure_build "$bdir" "$prefix" -DKNMF_ENABLE_MPI=ON -DKNMF_ENABLE_PERF=$perf "${python[@]}"
    export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
    case "$cmd" in
      demo) exec "$bdir/drivers/knmf" demo "$@" ;;
      test) cd "$bdir" && exec ctest --output-on-failure -j "$ctest_jobs" ${KNMF_CTEST_ARGS:-} "$@" ;;
    esac ;;
  device-test)
    prefix=$(cmake/bootstrap.sh | tail -n1)
    bdir=${KNMF_BUILD_DIR:-build-device-kernels}
    # The same compiler flags as the default build (`test`): every file that does not include
    # knmf/kernel_config.hpp compiles to the same object, which ccache then shares between the
    # two builds (.ci/README.md). So no -Werror here; a compiler warning fails the step instead,
    # found in the build's output (ccache replays a cached compile's warnings).
    mkdir -p "$bdir"
    configure_build "$bdir" "$prefix" -DKNMF_ENABLE_MPI=ON -DKNMF_DEVICE_KERNELS_ON_HOST=ON "${python[@]}" \
      -DKNMF_ENABLE_PERF=ON 2>&1 | tee "$bdir/device-build.log"
    if grep -Ei 'warning' "$bdir/device-build.log" >&2; then
      echo "device-test: the compiler printed warnings (above; full log $bdir/device-build.log)" >&2
      exit 1
    fi
    export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
    "$bdir/drivers/knmf" --version | grep -q "KNMF_DEVICE_KERNELS_ON_HOST" ||
      { echo "device-test: $bdir is not a device-kernels build" >&2; exit 1; }
    cd "$bdir" && exec ctest --output-on-failure -j "$ctest_jobs" ${KNMF_CTEST_ARGS:-} "$@" ;;
  sanitize-test)
    prefix=$(cmake/bootstrap.sh | tail -n1)
    bdir=${KNMF_BUILD_DIR:-build-sanitize}
    # No MPI: Open MPI's own allocations leak and would need LeakSanitizer suppressions beyond
    # the one committed (docs/sanitizers.md); the MPI paths are tested by the other builds.
    # (KNMF_SANITIZE compiles at -O1 -g1 whatever the build type: CMakeLists.txt)
    configure_build "$bdir" "$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKNMF_SANITIZE=ON \
      -DKNMF_ENABLE_MPI=OFF -DKNMF_ENABLE_PERF=OFF "${python[@]}"
    export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
    # exitcode 86: a finding in a driver run by a test is never mistaken for the driver's own
    # exit status 1 (a refused input). No detect_stack_use_after_return: GCC 12's fake stack
    # frames are not 64-byte aligned, and the AVX-512 gathers' register blocks are (vmovaps,
    # a fault; docs/sanitizers.md).
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:exitcode=86:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/cmake/lsan.supp:print_suppressions=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=86}
    cd "$bdir" && exec ctest --output-on-failure -j "$ctest_jobs" ${KNMF_CTEST_ARGS:-} "$@" ;;
  cuda-build)
    arch=${1:-90}
    prefix=$(cmake/bootstrap.sh --cuda "$arch" | tail -n1)
    export PATH=/usr/local/cuda/bin:$PATH
    bdir=${KNMF_BUILD_DIR:-build-cuda-sm$arch}
    # -arch for CMake's own compiler checks (nvcc_wrapper's default sm_70 is gone in CUDA 13);
    # knmf's targets get Kokkos' architecture flags from Kokkos::kokkos.
    # KNMF_CUDA_LIBRARY_ONLY=1: the library and the driver only (the kernels for this
    # architecture; the tests' and benchmarks' host code is the same for every architecture)
    # KNMF_CUDA_EXTRA_ARCHS="80": the library's and the driver's device code also for these
    # architectures (CMakeLists.txt), e.g. A100's inside an sm_90 build (CI).
    # KNMF_CUDA_HOST_OPT=-O1 (CI): the host compiler's optimization level in place of
    # Release's -O3 (device code is optimized by cicc and ptxas whatever it is). A compile-only
    # check spends two thirds of nvcc's time on the host compile at -O3; -O1 keeps g++'s
    # flow-based warnings and took 29% off src/solver/nmf.cpp's nvcc time (.ci/README.md).
    # Not for programs that run: perf/gpu/prepare.sh builds its own, at -O3.
    tests=ON
    [[ "${KNMF_CUDA_LIBRARY_ONLY:-0}" == 1 ]] && tests=OFF
    extra=${KNMF_CUDA_EXTRA_ARCHS:-}
    host_opt=${KNMF_CUDA_HOST_OPT:--O3}  # given each time: a build folder keeps no earlier choice
    [[ "$host_opt" =~ ^-O[0-3s]$ ]] ||
      { echo "cuda-build: KNMF_CUDA_HOST_OPT='$host_opt' is not -O0 .. -O3 or -Os" >&2; exit 2; }
    mkdir -p "$bdir"
    configure_build "$bdir" "$prefix" -DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper" \
      -DCMAKE_CXX_FLAGS_RELEASE="$host_opt -DNDEBUG" \
      -DCMAKE_CXX_FLAGS="-arch=sm_$arch" -DKNMF_ENABLE_MPI=ON -DKNMF_ENABLE_PERF=$tests \
      -DKNMF_ENABLE_TESTS=$tests -DKNMF_WARNINGS_AS_ERRORS=ON \
      -DKNMF_CUDA_EXTRA_ARCHS="${extra//[ ,]/;}" 2>&1 | tee "$bdir/cuda-build.log"
    # No warning may pass: nvcc's warnings about device code are GPU bugs in waiting.
    if grep -Ei 'warning' "$bdir/cuda-build.log" >&2; then
      echo "cuda-build sm_$arch: the compilers printed warnings (above; full log $bdir/cuda-build.log)" >&2
      exit 1
    fi
    # Each extra architecture's code is in the library and the driver: ptxas records its
    # options ("-arch sm_80 -m 64 -Werror") in every cubin it writes.
    for a in ${extra//,/ }; do
      for f in "$bdir/src/libknmf.a" "$bdir/drivers/knmf"; do
        grep -qa -- "-arch sm_$a -m 64 -Werror" "$f" ||
          { echo "cuda-build sm_$arch: $f holds no sm_$a code assembled with -Werror" >&2; exit 1; }
      done
    done
    echo "cuda-build sm_$arch${extra:+ (+ sm_${extra//[ ,]/, sm_} library and driver)}: built with no compiler warnings ($bdir)" ;;
  fuzz)
    # The parsers' libFuzzer harnesses (tests/fuzz): a build of their own (no Kokkos), then
    # tests/fuzz/run.sh: each harness for a fixed time on its seed corpus; any finding in
    # knmf's code fails (crash, sanitizer report, leak, timeout, out of memory).
    secs=${1:-20}
    cmake/bootstrap.sh >/dev/null  # the Debian packages, clang-14 and its libFuzzer among them
    bdir=${KNMF_BUILD_DIR:-build-fuzz}
    launcher=()
    if command -v ccache >/dev/null && [[ "${KNMF_CCACHE:-1}" != 0 ]]; then
      launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
      export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
    fi
    cmake -G Ninja -S . -B "$bdir" -DKNMF_ENABLE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER="${KNMF_FUZZ_CXX:-clang++-14}" -DCMAKE_C_COMPILER="${KNMF_FUZZ_CC:-clang-14}" \
      "${launcher[@]}" ${KNMF_CMAKE_ARGS:-}
    cmake --build "$bdir" -j "$jobs"
    exec tests/fuzz/run.sh "$bdir" "$secs" ;;
  *) echo "usage: cmake/dev.sh demo|test|build|device-test|sanitize-test|cuda-build [90|80]|fuzz [seconds]" >&2; exit 2 ;;
esac
