#!/usr/bin/env bash
# knmf dependency bootstrap for a fresh Debian 12 machine.
#
#   cmake/bootstrap.sh                  OpenMP + Serial build; prints its prefix on the last line
#   cmake/bootstrap.sh --cuda 90|80     CUDA (+ OpenMP + Serial) for sm_90 (Hopper) or sm_80 (Ampere)
#   cmake/bootstrap.sh --prefix-only    step 2 only: no Debian package, nothing changed outside the
#                                       cache (what `pip install .` runs: setup.py)
#
# 1. installs the Debian packages knmf builds against (skipped when KNMF_SKIP_APT=1 or not root)
#    and selects OpenBLAS' OpenMP variant;
# 2. builds Kokkos 4.6.01 + Kokkos Kernels 4.6.01 from their official release tarballs into a
#    cache prefix outside the repository, keyed by version, options and patches, and reuses it.
#
# The tarballs are taken, in this order, from the cache's src/ folder (kept from an earlier
# run), from $KNMF_DEPS_MIRROR (a folder holding them, for machines without access to GitHub),
# from ../shared/deps beside the checkout (the development machines' offline mirror), or
# downloaded from the release URLs. Whatever the source, the sha256 is checked against the
# official value before anything is unpacked; a mismatch stops the bootstrap.
#
# Users who already have Kokkos/Kokkos Kernels 4.x (Spack, modules, their own build) skip this
# script and pass -DKokkos_ROOT=... -DKokkosKernels_ROOT=... to CMake.
set -euo pipefail

variant=openmp
cuda_arch=""
system=1
while (($#)); do
  case "$1" in
    --prefix-only) system=0; shift ;;
    --cuda) variant=cuda; cuda_arch=${2:-}; shift 2 || { echo "bootstrap.sh: --cuda needs 80 or 90" >&2; exit 2; } ;;
    --cuda=*) variant=cuda; cuda_arch=${1#--cuda=}; shift ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) echo "bootstrap.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [[ $variant == cuda ]]; then
  case "$cuda_arch" in
    90) kokkos_arch=HOPPER90 ;;
    80) kokkos_arch=AMPERE80 ;;
    *) echo "bootstrap.sh: --cuda '$cuda_arch': expected 90 (H100/H200) or 80 (A100)" >&2; exit 2 ;;
  esac
  variant=cuda-sm$cuda_arch
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KNMF_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/knmf-deps}
jobs=${KNMF_BUILD_JOBS:-$(nproc)}
log() { echo "[bootstrap] $*" >&2; }
die() { echo "[bootstrap] error: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# 1. Debian packages
# ---------------------------------------------------------------------------------------------
pkgs=(cmake ninja-build g++ pkg-config ccache curl ca-certificates libhdf5-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libopenblas0-openmp
      libyaml-cpp-dev zlib1g-dev libcairo2-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
      python3-numpy python3-scipy python3-sklearn python3-pandas python3-h5py python3-anndata
      python3-yaml universal-ctags  # (tests/core/check_code_size.py: functions' end lines)
      python3-dev pybind11-dev python3-pytest  # the Python module (python/) and its tests
      python3-venv python3-setuptools python3-wheel  # pip install . (setup.py) into a venv
      clang-14 libclang-rt-14-dev)  # libFuzzer + sanitizers (libclang_rt.fuzzer): tests/fuzz
# (libopenblas-dev is BLAS for Kokkos Kernels and LAPACK for the NNDSVD init: find_package(LAPACK)
# with BLA_VENDOR=OpenBLAS; python3-sklearn/scipy are only for tests/scripts/make_golden_*.py)
if ((system)) && [[ "${KNMF_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
      die "missing Debian packages (run as root or install them): ${missing[*]}"
    fi
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
fi
# OpenBLAS' OpenMP variant: the pthread one pins all BLAS threads to one core when
# OMP_PROC_BIND/OMP_PLACES are set (Kokkos recommends setting them).
if ((system)) && [[ $(id -u) -eq 0 ]] && command -v update-alternatives >/dev/null; then
  for lib in libopenblas.so.0 libopenblas.so libblas.so.3 libblas.so liblapack.so.3 liblapack.so; do
    f=/usr/lib/x86_64-linux-gnu/openblas-openmp/$lib
    [[ -e $f ]] && update-alternatives --set "$lib-x86_64-linux-gnu" "$f" >/dev/null 2>&1 || true
  done
fi

# ---------------------------------------------------------------------------------------------
# 2. Kokkos + Kokkos Kernels 4.6.01
# ---------------------------------------------------------------------------------------------
kokkos_version=4.6.01
kokkos_tar=kokkos-$kokkos_version.tar.gz
kokkos_url=https://github.com/kokkos/kokkos/releases/download/$kokkos_version/$kokkos_tar
kokkos_sha=b9d70e4653b87a06dbb48d63291bf248058c7c7db4bd91979676ad5609bb1a3a
kk_tar=kokkos-kernels-$kokkos_version.tar.gz
kk_url=https://github.com/kokkos/kokkos-kernels/releases/download/$kokkos_version/$kk_tar
kk_sha=95b9357f37ab3b9c3913c00741acb2501831c28ea8664de67818ae79c69c5908

common_kokkos=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF
               -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
               -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_TESTS=OFF
               -DKokkos_ENABLE_EXAMPLES=OFF)
# Components: knmf calls KokkosBlas::gemm and uses KokkosSparse::CrsMatrix (spmv in one
# benchmark); SPARSE drags in BATCHED, LAPACK and GRAPH (its CMake forces them on).
common_kk=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF
           -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
           -DKokkosKernels_ENABLE_COMPONENT_BLAS=ON -DKokkosKernels_ENABLE_COMPONENT_SPARSE=ON
           -DKokkosKernels_ENABLE_TPL_BLAS=ON -DBLAS_LIBRARIES=openblas
           -DKokkosKernels_ENABLE_TPL_LAPACK=OFF -DKokkosKernels_ENABLE_TESTS=OFF
           -DKokkosKernels_ENABLE_PERFTESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF
           -DKokkosKernels_ADD_DEFAULT_ETI=OFF
           # No explicit instantiations at all: the dense products go to the vendor BLAS
           # (OpenBLAS / cuBLAS TPL specializations are header-only) and knmf's sparse products
           # are its own kernels, so an ETI library would only be build time (about 8 minutes on
           # 2 cores for the lean double+float set) for code knmf never calls.
           -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF
           -DKokkosKernels_INST_COMPLEX_DOUBLE=OFF -DKokkosKernels_INST_COMPLEX_FLOAT=OFF
           -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF
           -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF
           -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF
           -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_ORDINAL_INT64_T=OFF
           -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF)
patches=()
if [[ $variant == openmp ]]; then
  kokkos_opts=("${common_kokkos[@]}")
  kk_opts=("${common_kk[@]}")
else
  # nvcc_wrapper's default architecture (sm_70) is not supported by CUDA 13: name it.
  arch_flags="-arch=sm_$cuda_arch"
  kokkos_opts=("${common_kokkos[@]}" -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON
               "-DKokkos_ARCH_$kokkos_arch=ON" "-DCMAKE_CXX_FLAGS=$arch_flags")
  # cuBLAS for the dense products; no cuSPARSE (nor cuSOLVER, which needs it): knmf's sparse
  # products are its own kernels (src/solver/detail/products.hpp), and the TPLs only made
  # every CUDA program need libcusparse and libnvJitLink on the GPU machine (issue 26).
  kk_opts=("${common_kk[@]}" -DKokkosKernels_ENABLE_TPL_CUBLAS=ON
           -DKokkosKernels_ENABLE_TPL_CUSPARSE=OFF -DKokkosKernels_ENABLE_TPL_CUSOLVER=OFF
           "-DCMAKE_CXX_FLAGS=$arch_flags"
           -DKokkosKernels_INST_EXECSPACE_CUDA=OFF -DKokkosKernels_INST_MEMSPACE_CUDASPACE=OFF
           -DKokkosKernels_INST_MEMSPACE_CUDAUVMSPACE=OFF)
  patches=("$here"/patches/kokkos-$kokkos_version-cuda13*.patch)
  [[ -f ${patches[0]} ]] || die "no CUDA 13 patch for Kokkos $kokkos_version in $here/patches"
fi
launcher=()
if command -v ccache >/dev/null && [[ "${KNMF_CCACHE:-1}" != 0 ]]; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
key_src=$(printf '%s\n' "$kokkos_version" "$kokkos_sha" "$kk_sha" "$variant" \
            "${kokkos_opts[@]}" "${kk_opts[@]}"; ((${#patches[@]})) && cat "${patches[@]}"; true)
key=$(printf '%s' "$key_src" | sha256sum | cut -c1-12)
prefix=$cache/kokkos-$kokkos_version-$variant-$key

if [[ -f $prefix/.complete ]]; then
  log "reusing $prefix"
  echo "$prefix"; exit 0
fi

# fetch NAME URL SHA256: prints the path of a verified copy of the tarball in $cache/src (the
# cache keeps verified sources, so a later build needs neither the mirror nor the network).
fetch() {
  local name=$1 url=$2 sha=$3 f got
  local from=$url
  local cached=$cache/src/$name
  mkdir -p "$cache/src"
  if [[ -f $cached ]]; then
    got=$(sha256sum "$cached" | cut -d' ' -f1)
    if [[ $got == "$sha" ]]; then log "$name: sha256 verified ($cached)"; echo "$cached"; return; fi
    log "$cached: sha256 $got, expected $sha: removing it"
    rm -f "$cached"
  fi
  local mirror_dirs=()
  [[ -n ${KNMF_DEPS_MIRROR:-} ]] && mirror_dirs+=("$KNMF_DEPS_MIRROR")
  mirror_dirs+=("$here/../../shared/deps")
  for d in "${mirror_dirs[@]}"; do
    f=$d/$name
    [[ -f $f ]] || continue
    cp "$f" "$cached.part"
    from=$f
    break
  done
  if [[ ! -f $cached.part ]]; then
    log "downloading $url"
    if ! curl -fsSL --retry 2 --connect-timeout 20 -o "$cached.part" "$url"; then
      rm -f "$cached.part"
      die "cannot download $url; on a machine without access to GitHub put $name (sha256 $sha) in a folder and set KNMF_DEPS_MIRROR to it"
    fi
  fi
  got=$(sha256sum "$cached.part" | cut -d' ' -f1)
  if [[ $got != "$sha" ]]; then
    rm -f "$cached.part"
    die "$from: sha256 $got, expected $sha (the official $name); not using it"
  fi
  mv "$cached.part" "$cached"
  log "$name: sha256 verified ($from)"
  echo "$cached"
}
kokkos_src_tar=$(fetch "$kokkos_tar" "$kokkos_url" "$kokkos_sha")
kk_src_tar=$(fetch "$kk_tar" "$kk_url" "$kk_sha")

work=$cache/work-$variant-$key
rm -rf "$work" "$prefix"; mkdir -p "$work"
t0=$(date +%s)
log "extracting Kokkos and Kokkos Kernels $kokkos_version"
tar xzf "$kokkos_src_tar" -C "$work"
tar xzf "$kk_src_tar" -C "$work"
ksrc=$work/kokkos-$kokkos_version kksrc=$work/kokkos-kernels-$kokkos_version
[[ -d $ksrc && -d $kksrc ]] || die "unexpected tarball layout in $work"

cxx=()
if [[ $variant == cuda-* ]]; then
  for p in "${patches[@]}"; do
    log "applying $(basename "$p")"
    patch -d "$ksrc" -p1 --forward --quiet < "$p" >&2 || die "$p does not apply to Kokkos $kokkos_version"
  done
  export PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc >/dev/null || die "--cuda needs nvcc (looked in PATH and /usr/local/cuda/bin)"
  cxx=(-DCMAKE_CXX_COMPILER="$ksrc/bin/nvcc_wrapper")
fi

log "building Kokkos $kokkos_version ($variant) -> $prefix"
cmake -G Ninja -S "$ksrc" -B "$work/build-kokkos" -DCMAKE_INSTALL_PREFIX="$prefix" \
  "${cxx[@]}" "${launcher[@]}" "${kokkos_opts[@]}" >&2
cmake --build "$work/build-kokkos" -j "$jobs" >&2
cmake --install "$work/build-kokkos" >&2
t1=$(date +%s); log "Kokkos built in $((t1 - t0)) s"
if [[ $variant == cuda-* ]]; then cxx=(-DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper"); fi

log "building Kokkos Kernels $kokkos_version ($variant)"
cmake -G Ninja -S "$kksrc" -B "$work/build-kk" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DKokkos_ROOT="$prefix" "${cxx[@]}" "${launcher[@]}" "${kk_opts[@]}" >&2
cmake --build "$work/build-kk" -j "$jobs" >&2
cmake --install "$work/build-kk" >&2
log "Kokkos Kernels built in $(( $(date +%s) - t1 )) s"

printf '%s\n' "$key_src" > "$prefix/.options"
touch "$prefix/.complete"
rm -rf "$work"
log "done in $(( $(date +%s) - t0 )) s"
echo "$prefix"
