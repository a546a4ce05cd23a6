#!/bin/bash
# Smoke checks of knmf's peer harness on the real cNMF run of pbmc-donor-a (< 2 minutes).
#
#   perf/peers/selfcheck.sh            (KNMF_SHARED_DIR overrides the shared folder)
#
# 1. sklearn peer, solver cd, first 6 jobs: iteration counts equal the reference
#    sklearn_cd_jobs.jsonl exactly, final errors to 1e-15 relative (a few ulps), and the
#    spectra files it writes equal cNMF's own merged spectra to 1e-12.
# 2. sklearn peer, solver mu, first 4 jobs: same against sklearn_mu_jobs.jsonl.
# 3. torch MU peer, float64, --init sklearn --zero-guard replace-zero, 100 fixed
#    iterations on 3 jobs: W and H equal scikit-learn MU's (tol 0, max_iter 100) to 1e-9.
# 4. torch MU peer, float32, same run: W and H within 1e-4 of scikit-learn's.
# Exits non-zero on any mismatch (2 when a prerequisite is missing).
set -euo pipefail

PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${KNMF_SHARED_DIR:-$HERE/../../../shared}
DATA=$SHARED/data/cnmf-pbmc-donor-a
REF=$DATA/reference

if [ ! -d "$DATA/prepare/pbmcA" ]; then
  echo "selfcheck: $DATA/prepare/pbmcA not found (set KNMF_SHARED_DIR)" >&2
  exit 2
fi
if ! $PY -c "import sklearn, anndata, yaml, torch" 2>/dev/null; then
  echo "selfcheck: $PY lacks sklearn/anndata/yaml/torch (apt-get install python3-sklearn python3-anndata python3-torch)" >&2
  exit 2
fi

TMP=$(mktemp -d /tmp/knmf-peers-selfcheck.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp -r "$DATA/prepare/pbmcA" "$TMP/"
chmod -R u+w "$TMP/pbmcA"
RUN=(--output-dir "$TMP" --name pbmcA)
start=$SECONDS

echo "== 1. sklearn peer, cd, jobs 0-5 vs sklearn_cd_jobs.jsonl"
$PY "$HERE/sklearn_peer.py" "${RUN[@]}" --jobs 6 --threads 1 --quiet \
  --json "$TMP/cd.json" --write-spectra "$TMP/out"
$PY "$HERE/compare_outputs.py" jobs "$REF/sklearn_cd_jobs.jsonl" "$TMP/cd.json" --err-rtol 1e-15
$PY "$HERE/compare_outputs.py" spectra "$TMP/out/pbmcA" pbmcA \
  "$REF/pbmcA/cnmf_tmp/pbmcA.spectra.k_5.merged.df.npz" 5 0 1 2 3 4 5

echo "== 2. sklearn peer, mu, jobs 0-3 vs sklearn_mu_jobs.jsonl"
$PY "$HERE/sklearn_peer.py" "${RUN[@]}" --jobs 4 --solver mu --threads 1 --quiet --json "$TMP/mu.json"
$PY "$HERE/compare_outputs.py" jobs "$REF/sklearn_mu_jobs.jsonl" "$TMP/mu.json" --err-rtol 1e-15

echo "== 3. torch MU peer (float64, sklearn init, replace-zero) vs sklearn MU, 100 iterations"
$PY "$HERE/sklearn_peer.py" "${RUN[@]}" --jobs 3 --solver mu --tol 0 --max-iter 100 --quiet \
  --save-factors "$TMP/sk.npz"
$PY "$HERE/torch_mu_peer.py" "${RUN[@]}" --jobs 3 --batch 3 --dtype float64 --init sklearn \
  --zero-guard replace-zero --tol 0 --max-iter 100 --quiet --save-factors "$TMP/t64.npz"
$PY "$HERE/compare_outputs.py" factors "$TMP/sk.npz" "$TMP/t64.npz" --rtol 1e-9

echo "== 4. torch MU peer (float32) vs sklearn MU, 100 iterations"
$PY "$HERE/torch_mu_peer.py" "${RUN[@]}" --jobs 3 --batch 3 --dtype float32 --init sklearn \
  --zero-guard replace-zero --tol 0 --max-iter 100 --quiet --save-factors "$TMP/t32.npz"
$PY "$HERE/compare_outputs.py" factors "$TMP/sk.npz" "$TMP/t32.npz" --rtol 1e-4

echo "selfcheck: all checks passed in $((SECONDS - start)) s"
