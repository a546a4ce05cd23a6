#!/usr/bin/env bash
# One-command set-up, build and run for a fresh Debian 12 machine (see README.md).
#
#   cmake/dev.sh demo        install deps, build knmf, run the built-in demo (the main job)
#   cmake/dev.sh test        install deps, build knmf and its tests, run ctest
#   cmake/dev.sh build       install deps and build only
#   cmake/dev.sh cuda-build  build the CUDA variant (Kokkos 3.4.01 + nvcc, sm_80) compile-only
#
# Environment: KNMF_BUILD_DIR (default build), KNMF_DEPS_CACHE (default ~/.cache/knmf-deps),
# KNMF_BUILD_JOBS (default nproc), KNMF_CMAKE_ARGS (extra configure arguments),
# KNMF_CTEST_ARGS (extra ctest arguments).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cmd=${1:-test}; shift || true
jobs=${KNMF_BUILD_JOBS:-$(nproc)}

configure_build() {  # $1 build dir, $2 prefix, rest: cmake args
  local bdir=$1 prefix=$2; shift 2
  cmake -G Ninja -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release \
    -DKokkos_ROOT="$prefix" -DKokkosKernels_ROOT="$prefix" "$@" ${KNMF_CMAKE_ARGS:-}
  cmake --build "$bdir" -j "$jobs"
}

case "$cmd" in
  demo|test|build)
    prefix=$(cmake/bootstrap.sh | tail -n1)
    bdir=${KNMF_BUILD_DIR:-build}
    configure_build "$bdir" "$prefix" -DKNMF_ENABLE_MPI=ON
    export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
    case "$cmd" in
      demo) exec "$bdir/drivers/knmf" demo "$@" ;;
      test) cd "$bdir" && exec ctest --output-on-failure -j 1 ${KNMF_CTEST_ARGS:-} "$@" ;;
    esac ;;
  cuda-build)
    prefix=$(cmake/bootstrap.sh --cuda | tail -n1)
    export PATH=/usr/local/cuda/bin:$PATH
    bdir=${KNMF_BUILD_DIR:-build-cuda}
    configure_build "$bdir" "$prefix" -DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper" \
      -DCMAKE_CXX_FLAGS="-arch=sm_80" -DKNMF_ENABLE_MPI=ON -DKNMF_ENABLE_PERF=ON \
      -DKNMF_ENABLE_TESTS=ON ;;
  *) echo "usage: cmake/dev.sh demo|test|build|cuda-build" >&2; exit 2 ;;
esac
