#!/usr/bin/env bash
# How often `knmf k-selection --cross-validate` chooses the planted k (issue 30): for each K0
# and seed, `knmf simulate --cells 3000 --genes 1000 --programs K0-1 --activity 1` (K0 planted
# programs; other options at their defaults), `knmf prepare --numgenes 500` with k from 2 to
# 2 K0, `knmf factorize` (cNMF mode), `knmf k-selection --cross-validate`; one JSON line per
# run on stdout: K0, seed, the k cross-validation chooses by each rule (--cv-rule 3se, the
# default; 1se; min), the most stable k, the table, seconds of factorize and of k-selection.
#
#   perf/cv_study.sh KNMF K0_LIST SEEDS [N_ITER]
#     e.g. perf/cv_study.sh build-perf/drivers/knmf "4 6 9 12" "1 2 3 4 5 6 7 8 9 10" 10
# Env: CV_ARGS (extra k-selection options, e.g. "--cv-replicates 2"), WORK (scratch folder).
set -euo pipefail
knmf=$(readlink -f "$1"); k0s=$2; seeds=$3; n_iter=${4:-10}
work=${WORK:-$(mktemp -d /tmp/knmf-cv-study.XXXXXX)}
for K0 in $k0s; do
  for seed in $seeds; do
    d="$work/k${K0}_s${seed}"; rm -rf "$d"; mkdir -p "$d"
    "$knmf" simulate -o "$d/sim.h5ad" --cells 3000 --genes 1000 --programs $((K0 - 1)) --activity 1 \
      --seed "$seed" > /dev/null
    ks=$(seq 2 $((2 * K0)) | tr '\n' ' ')
    # shellcheck disable=SC2086  # ks: one word per k
    "$knmf" prepare --output-dir "$d" --name run -c "$d/sim.h5ad" -k $ks -n "$n_iter" --seed 14 \
      --numgenes 500 > /dev/null
    t0=$(date +%s.%N)
    "$knmf" factorize --output-dir "$d" --name run --quiet
    t1=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$knmf" k-selection --output-dir "$d" --name run --cross-validate ${CV_ARGS:-} > "$d/ks.txt"
    t2=$(date +%s.%N)
    python3 - "$d" "$K0" "$seed" "$t0" "$t1" "$t2" <<'PY'
import json, re, sys
d, K0, seed, t0, t1, t2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(float, sys.argv[4:])
rows, choice, stable, others = [], None, None, {}
for line in open(f"{d}/ks.txt"):
    m = re.match(r"\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+) \((\S+)\)", line)
    if m:
        rows.append(dict(k=int(m[1]), silhouette=float(m[2]), prediction_error=float(m[3]),
                         cv=float(m[4]), cv_sd=float(m[5])))
    m = re.search(r"cross-validation chooses k = (\d+).*most stable k is (\d+)", line)
    if m:
        choice, stable = int(m[1]), int(m[2])
    others.update({r: int(k) for r, k in re.findall(r"--cv-rule (\w+): k = (\d+)", line)})
print(json.dumps(dict(K0=K0, seed=seed, cv_choice_3se=choice, cv_choice_1se=others["1se"],
                      cv_choice_min=others["min"], stability_choice=stable,
                      factorize_s=round(t1 - t0, 2), k_selection_s=round(t2 - t1, 2),
                      rows=rows)), flush=True)
PY
  done
done
