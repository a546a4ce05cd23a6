#!/usr/bin/env python3
"""Issue 30: does the 3se rule (--cv-rule 3se) depend on the replicates per block? On
perf/cv_blocks.py records made with REPLICATES > 1, the rule applied to
  all-values   every (block, replicate) error as a value, as choose_k sees the table
  block-means  each block's mean over its replicates, one value per block
  replicate-0  the first replicate of each block only (what one replicate per block gives)
and how often each finds the planted K0.

  perf/cv_replicates.py FILE.jsonl [...]
Needs numpy."""
import json
import sys

import numpy as np


def three_se(E, ks):
    """The smallest k within 3 pooled paired standard errors of the smallest mean; E is
    (k, values), the values paired across k (as choose_k in cross_validation.cpp)."""
    means = E.mean(1)
    b = int(np.argmin(means))
    var = [np.var(E[i] - E[i + 1], ddof=1) for i in range(len(ks) - 1)]
    se = np.sqrt(np.mean(var) / E.shape[1])
    return next(k for i, k in enumerate(ks) if means[i] <= means[b] + 3 * se)


choices = {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        ks, E = r["ks"], np.array(r["errors"])
        reps = r.get("replicates", r.get("reps", 1))
        B = E.reshape(len(ks), E.shape[1] // reps, reps)
        for name, values in (("all-values", E), ("block-means", B.mean(2)),
                             ("replicate-0", B[:, :, 0])):
            choices.setdefault((r["K0"], name), []).append(three_se(values, ks))
print("| K0 | 3se on | found K0 | choices |\n|---|---|---|---|")
for (K0, name), v in sorted(choices.items()):
    print(f"| {K0} | {name} | {sum(k == K0 for k in v)}/{len(v)} | {', '.join(map(str, v))} |")
