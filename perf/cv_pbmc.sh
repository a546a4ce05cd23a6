#!/usr/bin/env bash
# Issue 30 on real data: pbmcA's prepared matrix (cNMF's prepare of pbmc donor A, 2,896 cells x
# 2,000 HVG) factorized for k = 2..15, 5 replicates each (native mode, seed 14), then
# `knmf k-selection` without and with --cross-validate (2 x 2 folds, 2 replicates per block):
# the table and the seconds of each step.
#
#   perf/cv_pbmc.sh KNMF [OUT_DIR]     (reads ${KNMF_SHARED_DIR:-../shared}/data/cnmf-pbmc-donor-a)
set -euo pipefail
knmf=$(readlink -f "$1"); out=${2:-$(mktemp -d /tmp/knmf-cv-pbmc.XXXXXX)}
shared=${KNMF_SHARED_DIR:-$PWD/../shared}
x="$shared/data/cnmf-pbmc-donor-a/prepare/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad"
mkdir -p "$out"; rm -f "$out/pbmcA_k2_15.h5"
t() { local s; s=$(date +%s.%N); "$@"; echo "seconds $(echo "$(date +%s.%N) - $s" | bc) for: ${*:2:3}" >&2; }
t "$knmf" factorize "$x" -k $(seq 2 15) --n-iter 5 --seed 14 -o "$out/pbmcA_k2_15.h5" --quiet
t "$knmf" k-selection --results "$out/pbmcA_k2_15.h5" --plot "$out/plain.png" > "$out/plain.txt"
t "$knmf" k-selection --results "$out/pbmcA_k2_15.h5" --cross-validate --cv-replicates 2 \
  --plot "$out/k_selection_cv.png" | tee "$out/cv.txt"
