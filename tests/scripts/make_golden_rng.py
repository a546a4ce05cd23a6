#!/usr/bin/python3
"""Golden values for knmf's numpy RandomState port (tests/random/test_random_state.cpp).

Run with Debian's python3-numpy (1.24):  /usr/bin/python3 tests/scripts/make_golden_rng.py
Writes tests/data/rng_golden.json. Floats are stored as hex (float.hex) so they are exact.
"""
import itertools
import json
import os

import numpy as np

out = {"numpy_version": np.__version__, "seeds": []}
for seed in [0, 1, 14, 42, 59886188, 1812018521, 2**31 - 2, 2**32 - 1]:
    rs = np.random.RandomState(seed)
    normals = rs.standard_normal(25)            # odd count: leaves a cached gauss
    samples = rs.random_sample(7)               # consumes raw draws; cache survives
    more_normals = rs.standard_normal(4)        # first value comes from the cache
    rs2 = np.random.RandomState(seed)
    ints = rs2.randint(1, 2**31 - 1, size=12)
    small = rs2.randint(3, 10, size=12)
    rs3 = np.random.RandomState(seed)
    raw = rs3.randint(0, 2**32, size=5, dtype=np.uint64)  # full 32-bit range
    out["seeds"].append({
        "seed": seed,
        "standard_normal": [float(v).hex() for v in normals],
        "random_sample": [float(v).hex() for v in samples],
        "standard_normal_after": [float(v).hex() for v in more_normals],
        "randint_1_2p31m1": [int(v) for v in ints],
        "randint_3_10": [int(v) for v in small],
        "uint32_raw": [int(v) for v in raw],
    })

# cNMF's job table: cnmf prepare -k 5 6 7 8 --n-iter 20 --seed 14, and one with a repeated k
def cnmf_jobs(ks, n_iter, seed):
    np.random.seed(seed)
    seeds = np.random.randint(low=1, high=(2**31) - 1, size=len(ks) * n_iter)
    rows = []
    for i, (k, r) in enumerate(itertools.product(sorted(set(ks)), range(n_iter))):
        rows.append([int(k), int(r), int(seeds[i])])
    return rows

out["cnmf_jobs"] = [
    {"ks": [5, 6, 7, 8], "n_iter": 20, "seed": 14, "jobs": cnmf_jobs([5, 6, 7, 8], 20, 14)},
    {"ks": [7, 3, 7], "n_iter": 3, "seed": 1, "jobs": cnmf_jobs([7, 3, 7], 3, 1)},
]

path = os.path.join(os.path.dirname(__file__), "..", "data", "rng_golden.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print("wrote", os.path.normpath(path))
