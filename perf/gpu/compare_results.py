#!/usr/bin/env python3
"""Fallback for `knmf compare A B` when the driver has no compare command: two knmf results
files (HDF5, docs/results-file.md) of the same job table, compared as include/knmf/results/compare.hpp
describes (Hungarian matching of each job's programs on cosine similarity; per matched pair
d_i = max_j |a_ij - b_ij| / max(max_j |a_ij|, max_j |b_ij|)).

    compare_results.py A.h5 B.h5 [--rtol 1e-6] [--min-cos 0.999999] [--json OUT.json]

Exit status: 0 all jobs pass, 3 some job fails a threshold, 1 bad input (as `knmf compare`).
Needs numpy and h5py; uses scipy's linear_sum_assignment when present (else exhaustive search
over permutations for k <= 9, greedy beyond, said in the output).
"""
import argparse
import itertools
import json
import sys

import h5py
import numpy as np

try:
    from scipy.optimize import linear_sum_assignment
except ImportError:  # pragma: no cover - depends on the machine
    linear_sum_assignment = None


def load(path):
    """{(k, iter): (spectra k x g, iterations, final_error)} of the committed replicates."""
    out = {}
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("knmf-results", b"knmf-results"):
            raise ValueError(f"{path}: not a knmf results file (attribute 'format')")
        genes = [g.decode() if isinstance(g, bytes) else str(g) for g in f["genes"][()]]
        for name in f:
            if not name.startswith("k_"):
                continue
            grp = f[name]
            k = int(grp.attrs["k"])
            done = grp["completed"][()]
            spectra = grp["spectra"]
            its = grp["iterations"][()]
            err = grp["final_error"][()]
            for r in np.nonzero(done)[0]:
                out[(k, int(r))] = (np.asarray(spectra[r], dtype=np.float64), int(its[r]), float(err[r]))
    return genes, out


def assign(cos):
    k = cos.shape[0]
    if linear_sum_assignment is not None:
        rows, cols = linear_sum_assignment(-cos)
        m = np.empty(k, dtype=int)
        m[rows] = cols
        return m, "hungarian"
    if k <= 9:
        best, bm = -np.inf, None
        for p in itertools.permutations(range(k)):
            s = cos[np.arange(k), p].sum()
            if s > best:
                best, bm = s, np.array(p)
        return bm, "exhaustive"
    m, used = np.full(k, -1), set()
    for i, j in sorted(np.ndindex(k, k), key=lambda ij: -cos[ij]):
        if m[i] < 0 and j not in used:
            m[i] = j
            used.add(j)
    return m, "greedy"


def compare_job(a, b):
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (a @ b.T) / np.outer(na, nb)
    cos[np.outer(na == 0, nb == 0)] = 1.0
    cos[np.logical_xor.outer(na == 0, nb == 0)] = 0.0
    m, how = assign(np.nan_to_num(cos, nan=-2.0))
    d = []
    for i in range(a.shape[0]):
        x, y = a[i], b[m[i]]
        s = max(np.abs(x).max(), np.abs(y).max())
        d.append(0.0 if s == 0 else float(np.abs(x - y).max() / s))
    return np.array(d), cos[np.arange(a.shape[0]), m], how


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--min-cos", type=float, default=0.999999)
    ap.add_argument("--json")
    o = ap.parse_args()
    try:
        ga, ja = load(o.a)
        gb, jb = load(o.b)
    except (OSError, KeyError, ValueError) as e:
        print(f"compare_results: error: {e}", file=sys.stderr)
        return 1
    if ga != gb:
        if sorted(ga) != sorted(gb):
            print("compare_results: error: the two runs have different genes", file=sys.stderr)
            return 1
        pos = {g: i for i, g in enumerate(gb)}
        perm = np.array([pos[g] for g in ga])
        jb = {key: (s[:, perm], it, e) for key, (s, it, e) in jb.items()}
    keys = sorted(set(ja) & set(jb))
    if not keys:
        print("compare_results: error: the two runs share no (k, iter) job", file=sys.stderr)
        return 1
    jobs, methods = [], set()
    for key in keys:
        (sa, ia, ea), (sb, ib, eb) = ja[key], jb[key]
        d, c, how = compare_job(sa, sb)
        methods.add(how)
        mx, mc = float(np.max(d)), float(np.min(c))
        ok = mx <= o.rtol and mc >= o.min_cos  # NaN fails both
        den = max(abs(ea), abs(eb))
        jobs.append(dict(k=key[0], iter=key[1], max_rel_diff=mx, median_rel_diff=float(np.median(d)),
                         min_cos=mc, iterations_a=ia, iterations_b=ib,
                         final_error_rel_diff=(abs(ea - eb) / den if den > 0 else 0.0),
                         passed=bool(ok), d=d.tolist()))

    def summary(js, k):
        alld = np.concatenate([np.array(j["d"]) for j in js])
        return dict(k=k, jobs=len(js), failed=sum(not j["passed"] for j in js),
                    max_rel_diff=max(j["max_rel_diff"] for j in js),
                    median_rel_diff=float(np.median(alld)),
                    min_cos=min(j["min_cos"] for j in js),
                    iterations_different=sum(j["iterations_a"] != j["iterations_b"] for j in js),
                    max_abs_iteration_diff=max(abs(j["iterations_a"] - j["iterations_b"]) for j in js),
                    max_final_error_rel_diff=max(j["final_error_rel_diff"] for j in js))

    per_k = [summary([j for j in jobs if j["k"] == k], k) for k in sorted({j["k"] for j in jobs})]
    overall = summary(jobs, 0)
    print(f"A: {o.a} ({len(ja)} jobs)\nB: {o.b} ({len(jb)} jobs)\n"
          f"rtol {o.rtol:g}, min-cos {o.min_cos:.9g}, matching: {'/'.join(sorted(methods))}")
    print(f"only in A: {len(set(ja) - set(jb))}, only in B: {len(set(jb) - set(ja))}")
    hdr = f"{'k':>4} {'jobs':>5} {'failed':>6} {'max rel diff':>13} {'median':>10} {'min cos':>12} {'iters !=':>8} {'max |di|':>8} {'max err rd':>11}"
    print(hdr)
    for s in per_k + [overall]:
        print(f"{s['k'] or 'all':>4} {s['jobs']:>5} {s['failed']:>6} {s['max_rel_diff']:>13.3e} "
              f"{s['median_rel_diff']:>10.3e} {s['min_cos']:>12.9f} {s['iterations_different']:>8} "
              f"{s['max_abs_iteration_diff']:>8} {s['max_final_error_rel_diff']:>11.3e}")
    for j in jobs:
        if not j["passed"]:
            print(f"FAILED k={j['k']} iter={j['iter']}: max rel diff {j['max_rel_diff']:.3e}, "
                  f"min cos {j['min_cos']:.9f}, iterations {j['iterations_a']} vs {j['iterations_b']}")
    if o.json:
        for j in jobs:
            del j["d"]
        with open(o.json, "w") as f:
            json.dump(dict(a=o.a, b=o.b, rtol=o.rtol, min_cos=o.min_cos, per_k=per_k, overall=overall,
                           jobs=jobs, passed=overall["failed"] == 0, tool="perf/gpu/compare_results.py"),
                      f, indent=1)
    return 0 if overall["failed"] == 0 else 3


if __name__ == "__main__":
    sys.exit(main())
