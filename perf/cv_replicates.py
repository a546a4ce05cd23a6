#!/usr/bin/env python3
"""Issue 30: does the 3se rule (--cv-rule 3se) depend on the replicates per block? On
perf/cv_blocks.py records made with REPLICATES > 1, the rule applied to
  all-values   every (block, replicate) error as a value (choose_k before 06114bd)
  block-means  each block's mean over its replicates, one value per block (choose_k now)
  replicate-0  the first replicate of each block only (what one replicate per block gives)
and how often each finds the planted K0. The rule is perf/cv_rules.py's.

  perf/cv_replicates.py FILE.jsonl [...]
Needs numpy."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cv_rules import pooled  # noqa: E402  (3se as choose_k computes it)

three_se = pooled(3)
choices = {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        ks, E = r["ks"], np.array(r["errors"])
        reps = r.get("replicates", r.get("reps", 1))
        B = E.reshape(len(ks), E.shape[1] // reps, reps)
        for name, values in (("all-values", E), ("block-means", B.mean(2)),
                             ("replicate-0", B[:, :, 0])):
            choices.setdefault((r["K0"], name), []).append(three_se(ks, values))
print("| K0 | 3se on | found K0 | choices |\n|---|---|---|---|")
for (K0, name), v in sorted(choices.items()):
    print(f"| {K0} | {name} | {sum(k == K0 for k in v)}/{len(v)} | {', '.join(map(str, v))} |")
