#!/usr/bin/env python3
"""Issue 30: each held-out block's prediction error for the simulations of perf/cv_study.sh,
through the Python module (the library's cross_validate, the same folds, seeds and solver
options as `knmf k-selection --cross-validate`), so that rules for choosing k can be compared
on the same numbers (perf/cv_rules.py). Only the cross-validation runs: no factorize, so the
stability column of cv_study.sh is not here.

  perf/cv_blocks.py BUILD K0_LIST SEEDS [REPLICATES] [FOLDS] > out.jsonl
    e.g. perf/cv_blocks.py build 4,6,9,12 1,2,3,4,5,6,7,8,9,10
  (simulate --cells 3000 --genes 1000 --programs K0-1 --activity 1 --seed S; prepare
   --numgenes 500 -k 2..2K0 -n 10 --seed 14; the cross-validation of the normalized counts
   with REPLICATES per block (default 1) on a FOLDS grid (default 2x2))
Env: WORK (scratch folder; default a new one under /tmp); SIM_ARGS (more `knmf simulate`
options, e.g. "--bcv 0.1"; recorded as sim_args). Needs numpy, scipy and h5py."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import scipy.sparse as sp

build = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(build, "python"))
import knmf  # noqa: E402

knmf.set_num_threads(os.cpu_count())
driver = os.path.join(build, "drivers", "knmf")
k0s = [int(v) for v in sys.argv[2].split(",")]
seeds = [int(v) for v in sys.argv[3].split(",")]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
folds = tuple(int(v) for v in sys.argv[5].split("x")) if len(sys.argv) > 5 else (2, 2)
work = os.environ.get("WORK") or tempfile.mkdtemp(prefix="knmf-cv-blocks.")
sim_args = os.environ.get("SIM_ARGS", "").split()
for K0 in k0s:
    for seed in seeds:
        d = os.path.join(work, f"k{K0}_s{seed}")
        x = os.path.join(d, "run", "cnmf_tmp", "run.norm_counts.h5ad")
        ks = list(range(2, 2 * K0 + 1))
        if not os.path.exists(x):
            os.makedirs(d, exist_ok=True)
            quiet = dict(check=True, stdout=subprocess.DEVNULL)
            subprocess.run([driver, "simulate", "-o", f"{d}/sim.h5ad", "--cells", "3000",
                            "--genes", "1000", "--programs", str(K0 - 1), "--activity", "1",
                            "--seed", str(seed), *sim_args], **quiet)
            subprocess.run([driver, "prepare", "--output-dir", d, "--name", "run", "-c",
                            f"{d}/sim.h5ad", "-k", *map(str, ks), "-n", "10", "--seed", "14",
                            "--numgenes", "500"], **quiet)
        with h5py.File(x) as h:
            X = sp.csr_matrix((h["X/data"][:], h["X/indices"][:], h["X/indptr"][:]),
                              shape=tuple(h["X"].attrs["shape"]))
        # k_selection needs spectra for its stability columns; any will do (not used here)
        rng = np.random.default_rng(0)
        spectra = {k: np.abs(rng.standard_normal((2, k, X.shape[1]))) for k in ks}
        t = knmf.k_selection(X, spectra, cross_validate=True, cv_folds=folds,
                             cv_replicates=reps, density_threshold=2.0)
        print(json.dumps(dict(K0=K0, seed=seed, replicates=reps, folds=list(folds), ks=ks,
                              **(dict(sim_args=" ".join(sim_args)) if sim_args else {}),
                              errors=[list(map(float, e)) for e in t.cv_errors])), flush=True)
