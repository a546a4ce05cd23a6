#!/usr/bin/env bash
# The measurements of perf/studies/accelerated-cd.md (issue 17), one JSON line per job from
# knmf_bench_accel into perf/results/accel/, summarized by perf/accel_summary.py:
#   pbmcA   cNMF's pbmcA run (80 jobs, sparse): fp64 with the defaults, fp32, and the
#           accelerated mode's settings scanned (--sweeps 2 / 3, alpha 0.25, eps 0.3 / 0.5)
#   mu      pbmcA with --solver mu (the accelerated MU against scikit-learn's MU)
#   mouse   mouse-brain-e18-10k prepared as cNMF does (`knmf prepare`, 500 HVGs, k 10/15/20)
#   dense   the dense synthetic X of bench_common (planted programs), 20,000 x 2,000, k 20, 60
#   dense100k  the same with 100,000 rows, k 20, one job
#   perf/accel_measure.sh [BUILD_DIR] [pbmcA|mu|mouse|dense|dense100k ...]
#   (default: pbmcA mu mouse dense)
# mouse reads ../shared/data (the all-zero cell is dropped first, as cNMF asks).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; shift || true
sets=${*:-pbmcA mu mouse dense}
bench=$PWD/$build/perf/knmf_bench_accel
out=perf/results/accel
mkdir -p "$out"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
P=tests/data/real/cnmf-pbmc-donor-a/prepare/pbmcA/cnmf_tmp
one() {  # one NAME ARGS...: the bench into $out/NAME.jsonl
  local name=$1; shift
  echo "$(date -u +%FT%TZ) $name: $*" >&2
  "$bench" "$@" > "$out/$name.jsonl.tmp" && mv "$out/$name.jsonl.tmp" "$out/$name.jsonl"
}
for s in $sets; do
  case $s in
    pbmcA)
      pb=(--input $P/pbmcA.norm_counts.h5ad --job-table $P/pbmcA.nmf_params.df.npz)
      one pbmcA_f64 "${pb[@]}"
      one pbmcA_f32 "${pb[@]}" --dtype float
      one pbmcA_s2 "${pb[@]}" --sweeps 2 --reach 2
      one pbmcA_s3 "${pb[@]}" --sweeps 3 --reach 2
      one pbmcA_a025 "${pb[@]}" --alpha 0.25 --reach 2
      one pbmcA_e03 "${pb[@]}" --eps 0.3 --reach 2
      one pbmcA_e05 "${pb[@]}" --eps 0.5 --reach 2 ;;
    mu)  # the accelerated MU against scikit-learn's MU, pbmcA's 80 jobs
      one pbmcA_mu --input $P/pbmcA.norm_counts.h5ad --job-table $P/pbmcA.nmf_params.df.npz \
        --solver mu ;;
    mouse)
      work=$(mktemp -d /tmp/knmf-accel-mouse.XXXXXX)
      trap 'rm -rf "$work"' EXIT  # also when a step fails (set -e)
      /usr/bin/python3 - "$work" <<'PY'
import sys, h5py, numpy as np, scipy.sparse as sp
f = h5py.File("../shared/data/mouse-brain-e18-10k/mouse-brain-e18-10k.h5ad", "r")
X = f["X"]
m = sp.csr_matrix((X["data"][:], X["indices"][:], X["indptr"][:]), shape=tuple(X.attrs["shape"]))
def names(g):
    v = f[g][f[g].attrs.get("_index", "_index")][:]
    return np.array([x.decode() if isinstance(x, bytes) else x for x in v], dtype=object)
keep = np.asarray(m.sum(1)).ravel() > 0
np.savez_compressed(sys.argv[1] + "/counts.df.npz", data=m[keep].toarray().astype(np.float64),
                    index=names("obs")[keep], columns=names("var"))
PY
      "$build/drivers/knmf" prepare --output-dir "$work" --name mb -c "$work/counts.df.npz" \
        -k 10 15 20 -n 4 --seed 14 --numgenes 500 >&2
      one mouse_f64 --input "$work/mb/cnmf_tmp/mb.norm_counts.h5ad" \
        --job-table "$work/mb/cnmf_tmp/mb.nmf_params.df.npz"
      rm -rf "$work" ;;
    dense)  # 20,000 rows: the issue's 100,000 did not finish one job of k = 20 in 15 minutes
      one dense20k_k20 --n 20000 --g 2000 -k 20 --jobs 2 --reach 2 --no-plain
      one dense20k_k60 --n 20000 --g 2000 -k 60 --jobs 1 --reach 1.5 --no-plain ;;
    dense100k)
      one dense100k_k20 --n 100000 --g 2000 -k 20 --jobs 1 --reach 1.25 --no-plain ;;
  esac
done
