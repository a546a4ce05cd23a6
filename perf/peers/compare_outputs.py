#!/usr/bin/python3
"""Checks used by selfcheck.sh: compare a peer's output with a reference. Exit 1 on mismatch.

    compare_outputs.py jobs REF.jsonl PEER.json [--err-rtol 0]
        every job in PEER.json: n_iter equal, err equal (exactly unless --err-rtol > 0)
    compare_outputs.py factors A.npz B.npz --rtol 1e-9
        every W_<job>/H_<job> in A also in B, max |a-b| / max |a| <= rtol (per array)
    compare_outputs.py spectra RUN_DIR NAME MERGED.df.npz K ITERS...
        cnmf_tmp/NAME.spectra.k_K.iter_R.df.npz equal the rows iterR_topic* of a cNMF
        merged spectra file (values to 1e-12 relative, gene columns identical)
"""

import argparse
import json
import os
import sys

import numpy as np
import pandas as pd


def load_df_npz(path):
    with np.load(path, allow_pickle=True) as f:
        return pd.DataFrame(**f)


def cmd_jobs(a):
    ref = {}
    with open(a.ref) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                ref[r["job"]] = r
    peer = json.load(open(a.peer))["jobs"]
    bad = 0
    for r in peer:
        q = ref.get(r["job"])
        if q is None:
            print(f"job {r['job']}: not in {a.ref}")
            bad += 1
            continue
        same_iter = r["n_iter"] == q["n_iter"]
        rel = abs(r["err"] - q["err"]) / abs(q["err"])
        same_err = r["err"] == q["err"] if a.err_rtol == 0 else rel <= a.err_rtol
        status = "ok" if same_iter and same_err else "MISMATCH"
        print(f"job {r['job']:3d} k={r['k']} seed={r['seed']}: n_iter {r['n_iter']} vs {q['n_iter']}, err {r['err']!r} vs {q['err']!r} (rel {rel:.1e}) {status}")
        bad += status != "ok"
    print(f"{len(peer) - bad}/{len(peer)} jobs match {os.path.basename(a.ref)}")
    return 1 if bad or not peer else 0


def cmd_factors(a):
    A, B = np.load(a.a), np.load(a.b)
    worst, bad = 0.0, 0
    for key in sorted(A.files):
        if key not in B.files:
            print(f"{key}: missing in {a.b}")
            bad += 1
            continue
        x, y = A[key], B[key]
        if x.shape != y.shape:
            print(f"{key}: shape {x.shape} vs {y.shape}")
            bad += 1
            continue
        d = float(np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-300))
        worst = max(worst, d)
        print(f"{key}: max|diff|/max|a| = {d:.2e}")
        bad += d > a.rtol
    print(f"worst {worst:.2e} (limit {a.rtol:.0e}) over {len(A.files)} arrays")
    return 1 if bad or not A.files else 0


def cmd_spectra(a):
    merged = load_df_npz(a.merged)
    bad = 0
    for r in a.iters:
        path = os.path.join(a.run_dir, "cnmf_tmp", f"{a.name}.spectra.k_{a.k}.iter_{r}.df.npz")
        df = load_df_npz(path)
        ref = merged.loc[[f"iter{r}_topic{t}" for t in range(1, a.k + 1)]]
        same_cols = list(df.columns) == list(ref.columns) and list(df.index) == list(range(1, a.k + 1))
        d = float(np.max(np.abs(df.values - ref.values)) / np.max(np.abs(ref.values)))
        ok = same_cols and d <= 1e-12
        print(f"k={a.k} iter={r}: labels {'same' if same_cols else 'DIFFER'}, max rel diff {d:.1e} {'ok' if ok else 'MISMATCH'}")
        bad += not ok
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("jobs")
    j.add_argument("ref")
    j.add_argument("peer")
    j.add_argument("--err-rtol", type=float, default=0.0)
    f = sub.add_parser("factors")
    f.add_argument("a")
    f.add_argument("b")
    f.add_argument("--rtol", type=float, required=True)
    s = sub.add_parser("spectra")
    s.add_argument("run_dir")
    s.add_argument("name")
    s.add_argument("merged")
    s.add_argument("k", type=int)
    s.add_argument("iters", type=int, nargs="+")
    a = p.parse_args()
    return {"jobs": cmd_jobs, "factors": cmd_factors, "spectra": cmd_spectra}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
