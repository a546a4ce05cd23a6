#!/usr/bin/env bash
# knmf.factorize from Python against the driver on cNMF's pbmcA run (issue 31;
# perf/studies/python-vs-driver.md): the same 80 jobs (k = 5..8, the run's own seeds: cNMF's
# table from seed 14), alternating, ROUNDS rounds, each a whole process on a fresh copy of the
# prepare folder:
#   driver   knmf factorize pbmcA.norm_counts.h5ad -o r.h5 -k 5 6 7 8 --n-iter 20 --seed 14
#            (native mode: reads the .h5ad, writes the spectra into one results file)
#   python   /usr/bin/python3: import knmf, read X (h5py, scipy CSR) and the job table, one
#            knmf.factorize per k with the table's seeds (no usages), the spectra saved (.npy)
#   cnmf     the driver in cNMF mode (--output-dir --name: 80 compressed spectra files), for
#            reference
# and python-in-process: the python runs' own seconds after the interpreter's start and the
# imports (numpy, scipy, h5py, knmf): X read, the four calls, the spectra saved.
# Both with Kokkos' threads = cores and OPENBLAS_CORETYPE=SkylakeX (default; set it to
# compare under another). The last round also checks that the two give the same spectra.
#   perf/python_vs_driver.sh [BUILD] [ROUNDS] [TAG]     (defaults: build, 7, run)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$(readlink -f "${1:-build}") ROUNDS=${2:-7} TAG=${3:-run}
prep=$PWD/tests/data/real/cnmf-pbmc-donor-a/prepare/pbmcA
OUT=perf/results/python_vs_driver_$TAG.txt
work=$(mktemp -d /tmp/knmf-py-vs-driver.XXXXXX)
trap 'rm -rf "$work"' EXIT
unset OMP_PROC_BIND OMP_PLACES
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} PYTHONPATH=$B/python
cat > "$work/run.py" <<'PY'
import sys, time
import h5py, numpy as np, scipy.sparse as sp
import knmf
t0 = time.perf_counter()  # after the interpreter's start and the imports
d = sys.argv[1]
with h5py.File(f"{d}/cnmf_tmp/pbmcA.norm_counts.h5ad", "r") as f:
    g = f["X"]
    X = sp.csr_matrix((g["data"][:], g["indices"][:], g["indptr"][:]),
                      shape=tuple(int(v) for v in g.attrs["shape"]))
t = np.load(f"{d}/cnmf_tmp/pbmcA.nmf_params.df.npz", allow_pickle=True)["data"]
for k in sorted(set(int(v) for v in t[:, 0])):
    seeds = [int(s) for kk, _, s, _ in t if int(kk) == k]
    res = knmf.factorize(X, k, seeds=seeds, save_usages=False)
    np.save(f"{d}/spectra_k{k}.npy", res.spectra)
open(f"{d}/seconds", "w").write(f"{time.perf_counter() - t0:.3f}")
PY
LIB_NAME=python_vs_driver
# shellcheck source=perf/lib.sh
source perf/lib.sh  # fresh, timed
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE; $("$B/drivers/knmf" --version | head -1)" | tee -a "$OUT"
for r in $(seq "$ROUNDS"); do
  fresh driver
  timed driver "$r" "$B/drivers/knmf" factorize "$work/driver/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad" \
    -o "$work/driver/r.h5" -k 5 6 7 8 --n-iter 20 --seed 14 --quiet
  fresh python
  timed python "$r" /usr/bin/python3 "$work/run.py" "$work/python/pbmcA"
  echo "python-in-process $r wall_s $(cat "$work/python/pbmcA/seconds") cpu_s 0" | tee -a "$OUT"
  fresh cnmf
  timed cnmf "$r" "$B/drivers/knmf" factorize --output-dir "$work/cnmf" --name pbmcA --quiet
done
# the same numbers: every job's spectra against the driver's results file and cNMF-mode files
/usr/bin/python3 - "$work" <<'PY' | tee -a "$OUT"
import sys
import h5py, numpy as np
w = sys.argv[1]
t = np.load(f"{w}/cnmf/pbmcA/cnmf_tmp/pbmcA.nmf_params.df.npz", allow_pickle=True)["data"]
same_native = same_cnmf = 0
with h5py.File(f"{w}/driver/r.h5", "r") as f:
    for k in sorted(set(int(v) for v in t[:, 0])):
        got = np.load(f"{w}/python/pbmcA/spectra_k{k}.npy")
        native = f[f"k_{k}/spectra"][:]
        iters = [int(i) for kk, i, _, _ in t if int(kk) == k]
        for j, it in enumerate(iters):
            same_native += np.array_equal(native[it], got[j])
            fn = f"{w}/cnmf/pbmcA/cnmf_tmp/pbmcA.spectra.k_{k}.iter_{it}.df.npz"
            same_cnmf += np.array_equal(np.load(fn, allow_pickle=True)["data"], got[j])
print(f"# spectra equal bit for bit: {same_native} of {len(t)} jobs to the driver's results file, "
      f"{same_cnmf} of {len(t)} to its cNMF-mode files")
PY
# medians, spreads ((max - min) / median) and the paired ratio python / driver of this session
/usr/bin/python3 - "$OUT" <<'PY'
import statistics, sys
lines = open(sys.argv[1]).read().split("\n")
start = max(i for i, l in enumerate(lines) if l.startswith("# ") and "cores" in l)
runs = {}
for l in lines[start + 1:]:
    w = l.split()
    if len(w) == 6 and w[2] == "wall_s":
        runs.setdefault(w[0], {})[int(w[1])] = float(w[3])
d, p = runs["driver"], runs["python"]
rounds = sorted(set(d) & set(p))
for name, v in (("driver", d), ("python", p), ("python-in-process", runs.get("python-in-process", {})),
                ("cnmf", runs.get("cnmf", {}))):
    if not v:
        continue
    xs = [v[r] for r in rounds]
    m = statistics.median(xs)
    print(f"{name}: {', '.join(f'{x:.3f}' for x in xs)} s; median {m:.3f}, spread {(max(xs) - min(xs)) / m:.3f}")
for name in ("python", "python-in-process"):
    ratios = [runs[name][r] / d[r] for r in rounds]
    print(f"{name} / driver, paired: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}) over {len(rounds)} rounds")
PY
