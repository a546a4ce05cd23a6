#!/usr/bin/env bash
# knmf dependency bootstrap for a fresh Debian 12 machine.
#
#   cmake/bootstrap.sh [--cuda]        prints the Kokkos/KokkosKernels prefix on its last line
#
# 1. installs the Debian packages knmf builds against (skipped when KNMF_SKIP_APT=1 or not root);
# 2. builds Kokkos 3.4.01 + KokkosKernels 3.4.01 from Debian's trilinos 13.2 source package into
#    a cache prefix outside the repository, keyed by version and options, and reuses it later.
#    With --cuda it builds the CUDA-enabled variant (compile-only on machines without a GPU).
#
# Users who already have Kokkos/KokkosKernels (Spack, modules, their own build) skip this script
# and pass -DKokkos_ROOT=... -DKokkosKernels_ROOT=... to CMake.
set -euo pipefail

variant=openmp
for a in "$@"; do
  case "$a" in
    --cuda) variant=cuda ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "bootstrap.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KNMF_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/knmf-deps}
jobs=${KNMF_BUILD_JOBS:-$(nproc)}
log() { echo "[bootstrap] $*" >&2; }

# ---------------------------------------------------------------------------------------------
# 1. Debian packages
# ---------------------------------------------------------------------------------------------
pkgs=(cmake ninja-build g++ pkg-config libhdf5-dev libcli11-dev libgtest-dev libgmock-dev
      libbenchmark-dev libopenblas-dev libopenblas0-openmp libyaml-cpp-dev zlib1g-dev libcairo2-dev
      nlohmann-json3-dev libopenmpi-dev openmpi-bin python3-numpy python3-scipy python3-sklearn
      python3-pandas python3-h5py python3-anndata python3-yaml dpkg-dev)
if [[ "${KNMF_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
      log "missing Debian packages (run as root or install them): ${missing[*]}"; exit 1
    fi
    log "installing ${#missing[@]} Debian packages: ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
fi
# OpenBLAS' OpenMP variant: the pthread one pins all BLAS threads to one core when
# OMP_PROC_BIND/OMP_PLACES are set (Kokkos recommends setting them).
if [[ $(id -u) -eq 0 ]] && command -v update-alternatives >/dev/null; then
  for lib in libopenblas.so.0 libopenblas.so libblas.so.3 libblas.so liblapack.so.3 liblapack.so; do
    f=/usr/lib/x86_64-linux-gnu/openblas-openmp/$lib
    [[ -e $f ]] && update-alternatives --set "$lib-x86_64-linux-gnu" "$f" >/dev/null 2>&1 || true
  done
fi

# ---------------------------------------------------------------------------------------------
# 2. Kokkos + KokkosKernels 3.4.01
# ---------------------------------------------------------------------------------------------
kokkos_version=3.4.01
common_kokkos=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF
               -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
               -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_TESTS=OFF)
# Lean instantiation set: the only scalar/layout/space/index combinations knmf uses.
# (The full set takes ~44 min on 2 cores and its shared libraries link broken.)
common_kk=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF
           -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
           "-DKokkosKernels_ENABLED_COMPONENTS=BLAS;SPARSE;BATCHED"
           -DKokkosKernels_ENABLE_TPL_BLAS=ON -DBLAS_LIBRARIES=openblas
           -DKokkosKernels_ENABLE_TPL_LAPACK=OFF -DKokkosKernels_ENABLE_TESTS=OFF
           -DKokkosKernels_ENABLE_EXAMPLES=OFF -DKokkosKernels_ADD_DEFAULT_ETI=OFF)
if [[ $variant == openmp ]]; then
  kokkos_opts=("${common_kokkos[@]}")
  kk_opts=("${common_kk[@]}"
           -DKokkosKernels_INST_DOUBLE=ON -DKokkosKernels_INST_FLOAT=ON
           -DKokkosKernels_INST_LAYOUTLEFT=ON -DKokkosKernels_INST_LAYOUTRIGHT=OFF
           -DKokkosKernels_INST_EXECSPACE_OPENMP=ON -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF
           -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=ON
           -DKokkosKernels_INST_ORDINAL_INT=ON -DKokkosKernels_INST_ORDINAL_INT64_T=OFF
           -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=ON)
else
  arch_flags="-arch=sm_80"
  kokkos_opts=("${common_kokkos[@]}" -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON
               -DKokkos_ARCH_AMPERE80=ON "-DCMAKE_CXX_FLAGS=$arch_flags")
  # 3.4's cuSPARSE code calls APIs removed in CUDA 12: cuSPARSE off; no ETI.
  kk_opts=("${common_kk[@]}" -DKokkosKernels_ENABLE_TPL_CUBLAS=ON
           -DKokkosKernels_ENABLE_TPL_CUSPARSE=OFF "-DCMAKE_CXX_FLAGS=$arch_flags"
           -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF
           -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF
           -DKokkosKernels_INST_EXECSPACE_OPENMP=OFF -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF
           -DKokkosKernels_INST_EXECSPACE_CUDA=OFF -DKokkosKernels_INST_MEMSPACE_CUDASPACE=OFF
           -DKokkosKernels_INST_MEMSPACE_CUDAUVMSPACE=OFF -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF
           -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF
           -DKokkosKernels_INST_OFFSET_INT=OFF)
fi
patch_file=$here/patches/kokkos-3.4.01-cuda13.patch
key_src=$(printf '%s\n' "$kokkos_version" "$variant" "${kokkos_opts[@]}" "${kk_opts[@]}";
          [[ $variant == cuda ]] && cat "$patch_file"; true)
key=$(printf '%s' "$key_src" | sha256sum | cut -c1-12)
prefix=$cache/kokkos-$kokkos_version-$variant-$key

if [[ -f $prefix/.complete ]]; then
  log "reusing $prefix"
  echo "$prefix"; exit 0
fi

work=$cache/work-$variant-$key
rm -rf "$work" "$prefix"; mkdir -p "$work/lists/partial"
t0=$(date +%s)
src_tar=$cache/trilinos_13.2.0.orig.tar.gz
if [[ ! -f $src_tar ]]; then
  # Debian's trilinos 13.2 source package is the only Kokkos + KokkosKernels pair the archive
  # serves. Use the mirror this machine is configured with; the system's apt state is untouched.
  uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    uri=$(awk '/^URIs:/{print $2; exit}' "$f"); [[ -n $uri ]] && break
  done
  if [[ -z $uri && -f /etc/apt/sources.list ]]; then
    uri=$(awk '$1=="deb"{for(i=2;i<=NF;i++) if($i ~ /^(http|https|file|ftp):/){print $i; exit}}' /etc/apt/sources.list)
  fi
  [[ -n $uri ]] || { log "no Debian mirror configured in /etc/apt"; exit 1; }
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" > "$work/src.sources"
  o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work" -o "Dir::State::Lists=$work/lists")
  log "downloading Debian source package trilinos 13.2.0-4 from $uri"
  apt-get "${o[@]}" update -qq >&2
  (cd "$work" && apt-get "${o[@]}" source -qq --download-only trilinos=13.2.0-4 >&2)
  mkdir -p "$cache"; mv "$work/trilinos_13.2.0.orig.tar.gz" "$src_tar.part" && mv "$src_tar.part" "$src_tar"
fi
log "extracting Kokkos and KokkosKernels"
tar xzf "$src_tar" -C "$work" --wildcards '*/packages/kokkos/*' '*/packages/kokkos-kernels/*'
srcroot=$(ls -d "$work"/*/packages | head -n1)

cxx=()
if [[ $variant == cuda ]]; then
  log "applying $patch_file (CUDA 13 fixes)"
  patch -d "$srcroot/kokkos" -p1 < "$patch_file" >&2
  export PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc >/dev/null || { log "--cuda needs nvcc (looked in PATH and /usr/local/cuda/bin)"; exit 1; }
  cxx=(-DCMAKE_CXX_COMPILER="$srcroot/kokkos/bin/nvcc_wrapper")
fi

log "building Kokkos $kokkos_version ($variant) -> $prefix"
cmake -G Ninja -S "$srcroot/kokkos" -B "$work/build-kokkos" -DCMAKE_INSTALL_PREFIX="$prefix" \
  "${cxx[@]}" "${kokkos_opts[@]}" >&2
cmake --build "$work/build-kokkos" -j "$jobs" >&2
cmake --install "$work/build-kokkos" >&2
t1=$(date +%s); log "Kokkos built in $((t1 - t0)) s"
if [[ $variant == cuda ]]; then cxx=(-DCMAKE_CXX_COMPILER="$prefix/bin/nvcc_wrapper"); fi

log "building KokkosKernels $kokkos_version ($variant)"
cmake -G Ninja -S "$srcroot/kokkos-kernels" -B "$work/build-kk" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DKokkos_ROOT="$prefix" "${cxx[@]}" "${kk_opts[@]}" >&2
cmake --build "$work/build-kk" -j "$jobs" >&2
cmake --install "$work/build-kk" >&2
log "KokkosKernels built in $(( $(date +%s) - t1 )) s"

printf '%s\n' "$key_src" > "$prefix/.options"
touch "$prefix/.complete"
rm -rf "$work"
log "done in $(( $(date +%s) - t0 )) s"
echo "$prefix"
