#!/usr/bin/env bash
# Accelerated CD (--inner-sweeps auto) against the exact mode and against scikit-learn as cNMF
# runs it, on cNMF's prepared pbmcA run (2,896 cells x 2,000 genes, 80 jobs, k = 5..8), side by
# side in one run (perf/studies/accelerated-cd.md):
#   * end to end: `knmf factorize --output-dir --name` (cNMF mode) exact and accelerated, and
#     perf/peers/sklearn_peer.py (1 thread), alternating, RUNS times each; wall seconds;
#   * agreement: `knmf k-selection` and `knmf consensus --components K --local-density-threshold
#     0.5` for K = 5..8 on both modes' files; per K the consensus programs matched by the
#     Hungarian assignment on correlation (worst matched correlation), silhouette and
#     prediction error side by side, and the k the stability favours in each.
#   perf/accel_pbmc.sh [BUILD_DIR] [RUNS]        (defaults: build, 3)
# ACCEL_OPTS: the accelerated mode's options (default --inner-sweeps auto).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-3}
read -r -a accel_opts <<< "${ACCEL_OPTS:---inner-sweeps auto}"
knmf=$PWD/$build/drivers/knmf
prep=$PWD/tests/data/real/cnmf-pbmc-donor-a/prepare/pbmcA
work=$(mktemp -d /tmp/knmf-accel-pbmc.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
# shellcheck source=perf/lib.sh
source perf/lib.sh  # fresh
wall() {  # wall CMD...: seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
declare -a t_exact t_accel t_sk
for _ in $(seq "$runs"); do
  fresh exact
  t_exact+=("$(wall "$knmf" factorize --output-dir "$work/exact" --name pbmcA --quiet)")
  fresh accel
  t_accel+=("$(wall "$knmf" factorize --output-dir "$work/accel" --name pbmcA --quiet "${accel_opts[@]}")")
  t_sk+=("$(wall /usr/bin/python3 perf/peers/sklearn_peer.py --output-dir "$work/exact" --name pbmcA --threads 1 --quiet)")
done
for mode in exact accel; do
  "$knmf" k-selection --output-dir "$work/$mode" --name pbmcA > /dev/null
  for k in 5 6 7 8; do
    "$knmf" consensus --output-dir "$work/$mode" --name pbmcA --components $k \
      --local-density-threshold 0.5 > /dev/null
  done
done
echo "# accelerated: ${accel_opts[*]}"
echo "# $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $("$knmf" --version | head -1)"
/usr/bin/python3 - "$work" "${t_exact[*]}" "${t_accel[*]}" "${t_sk[*]}" "${accel_opts[*]}" <<'EOF'
import sys, statistics as st
import numpy as np
from scipy.optimize import linear_sum_assignment
work, te, ta, ts = sys.argv[1], *[list(map(float, a.split())) for a in sys.argv[2:5]]
accel_name = "knmf " + sys.argv[5]
def load(p):
    with np.load(p, allow_pickle=True) as d:
        return d["data"]
me, ma, msk = st.median(te), st.median(ta), st.median(ts)
print("| run | wall s (runs) | median |")
print("|---|---|---|")
for name, t in (("knmf exact (scikit-learn's CD)", te), (accel_name, ta), ("scikit-learn as cNMF runs it, 1 thread", ts)):
    print(f"| {name} | {', '.join(f'{x:.2f}' for x in t)} | {st.median(t):.2f} |")
print(f"\naccelerated: {me / ma:.2f}x the exact mode, {msk / ma:.2f}x scikit-learn; exact: {msk / me:.2f}x scikit-learn\n")
ks = {m: load(f"{work}/{m}/pbmcA/pbmcA.k_selection_stats.df.npz") for m in ("exact", "accel")}
print("| k | worst matched correlation | silhouette exact / accel | prediction error exact / accel |")
print("|---|---|---|---|")
for i, k in enumerate((5, 6, 7, 8)):
    a = load(f"{work}/exact/pbmcA/cnmf_tmp/pbmcA.spectra.k_{k}.dt_0_5.consensus.df.npz")
    b = load(f"{work}/accel/pbmcA/cnmf_tmp/pbmcA.spectra.k_{k}.dt_0_5.consensus.df.npz")
    c = np.corrcoef(a, b)[:k, k:]
    r, s = linear_sum_assignment(-c)
    e, f = ks["exact"][i], ks["accel"][i]
    print(f"| {k} | {c[r, s].min():.6f} | {e[2]:.4f} / {f[2]:.4f} | {e[3]:.6e} / {f[3]:.6e} |")
best = {m: int(ks[m][np.argmax(ks[m][:, 2]), 0]) for m in ks}
print(f"\nthe k of the highest stability (silhouette): exact {best['exact']}, accelerated {best['accel']}")
EOF
