#!/usr/bin/env python3
"""Issue 30: how often each rule for choosing k from the blocks' prediction errors finds the
planted K0, on perf/cv_blocks.py's output. The three rules knmf ships (--cv-rule 3se, 1se,
min; written here as consensus::choose_k computes them) and the variants they were chosen
from: c standard errors of the paired difference to the minimum (pc), the smallest k no
larger k beats by c paired standard errors (fc), and c pooled standard errors (the standard
error of a difference between neighbouring k, pooled over k; 3se is c = 3).

Each rule sees one value per block, the mean of the block's replicates, as choose_k pairs them.

  perf/cv_rules.py FILE.jsonl [FILE.jsonl ...]     (one table per file)"""
import json
import sys

import numpy as np


def block_means(run):
    """The run's errors per k as one value per block (the mean of its replicates)."""
    E = np.asarray(run["errors"])
    reps = run.get("replicates", run.get("reps", 1))
    return E.reshape(E.shape[0], E.shape[1] // reps, reps).mean(axis=2)


def paired(e, i, j):
    d = np.asarray(e[i]) - np.asarray(e[j])
    return d.mean(), d.std(ddof=1) / np.sqrt(len(d))


def pooled_se(e):
    E = np.asarray(e)
    return np.sqrt(np.mean((E[:-1] - E[1:]).var(axis=1, ddof=1)) / E.shape[1])


def smallest_mean(ks, e):
    return ks[int(np.argmin([np.mean(x) for x in e]))]


def paired_se(c):  # c = 1: --cv-rule 1se
    def rule(ks, e):
        b = int(np.argmin([np.mean(x) for x in e]))
        for i in range(b):
            m, s = paired(e, i, b)
            if m <= c * s:
                return ks[i]
        return ks[b]
    return rule


def no_larger_better(c):
    def rule(ks, e):
        for i in range(len(ks)):
            if all(paired(e, i, j)[0] <= c * paired(e, i, j)[1] for j in range(i + 1, len(ks))):
                return ks[i]
        return ks[-1]
    return rule


def pooled(c):  # c = 3: --cv-rule 3se, the default
    def rule(ks, e):
        mu = np.array([np.mean(x) for x in e])
        s, lo = pooled_se(e), mu.min()
        return ks[int(np.argmax(mu <= lo + c * s))]
    return rule


RULES = {"min": smallest_mean, "1se": paired_se(1), "3se": pooled(3),
         **{f"p{c}": paired_se(c) for c in (1.5, 2, 3)},
         **{f"f{c}": no_larger_better(c) for c in (1, 2, 3)},
         **{f"pooled{c}": pooled(c) for c in (1, 2, 2.5, 4)}}

def main(paths):
    for path in paths:
        runs = [json.loads(line) for line in open(path)]
        k0s = sorted({r["K0"] for r in runs})
        seeds = sorted({r["seed"] for r in runs})
        print(f"{path}: {len(runs)} runs, seeds {seeds[0]}-{seeds[-1]}; per K0: hits/runs (misses)")
        print("| rule | " + " | ".join(f"K0 = {k}" for k in k0s) + " |")
        print("|---|" + "---|" * len(k0s))
        for name, rule in RULES.items():
            cells = []
            for K0 in k0s:
                chosen = [rule(r["ks"], block_means(r)) for r in runs if r["K0"] == K0]
                hits = sum(c == K0 for c in chosen)
                miss = ", ".join(str(c) for c in chosen if c != K0)
                cells.append(f"{hits}/{len(chosen)}" + (f" ({miss})" if miss else ""))
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
