#!/usr/bin/env python3
"""kill -9 soak of `knmf factorize` (ctest soak_kill_resume; issue 15).

For each mode -- native (one results file, -o r.h5) and cNMF (a cNMF run folder, spectra
files, --skip-completed-runs) -- on a small `knmf simulate` input:

1. an uninterrupted reference run;
2. the same run started again and again, each session SIGKILLed after a seeded random delay,
   until --kills kills have landed, then run to completion;
3. after every kill: what the output holds is a prefix of the work, never wrong: each
   replicate the results file flags completed (each spectra file present) equals the
   reference's bit for bit, a completed replicate stays completed, and the next session
   reports exactly the replicates already complete (so it redoes none and loses none);
4. at the end: the outputs equal the reference bit for bit (native: every numeric dataset of
   every k group, except the wall times `seconds`; cNMF: every member of every spectra
   file byte for byte), the
   file says complete, one more run reports "nothing to do", and no temporary file remains.

The seed is printed; rerun with --seed (or KNMF_SOAK_SEED) to repeat the same kill times.
Needs Python 3 with numpy and h5py (Debian: python3-numpy python3-h5py).
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import h5py
import numpy as np

KS = [3, 4, 5]
N_ITER = 8
# One replicate at a time. What is compared bit for bit is a replicate's data, and that is
# bitwise reproducible only for the same batch layout: several replicates are solved as one
# BLAS product whose width (replicates x k) and whose slot positions change when a resumed
# session has fewer jobs pending, or when the last replicates of a k run alone (compaction).
# Some BLAS kernels round such products differently by width and position (OpenBLAS' Haswell
# and Zen kernels, the ones CPUs without AVX-512 get: relative differences ~1e-14), so with
# --batch 2 a resumed replicate can differ from the uninterrupted run in the last bits
# (docs/results-file.md, "Reproducibility"). --batch 1 gives every replicate the same layout
# in every session, on every CPU.
BATCH = "1"


def fail(msg):
    print(f"soak_kill_resume: FAIL: {msg}", flush=True)
    sys.exit(1)


class Knmf:
    def __init__(self, exe):
        self.exe = exe
        # One thread: what is tested is the writer and resume, and a run's length then does not
        # depend on how busy the machine's cores are (OpenMP barriers spin).
        self.env = dict(os.environ, OMP_PROC_BIND="false", OMP_NUM_THREADS="1")

    def run(self, args, cwd, check=True):
        p = subprocess.run([self.exe, *args], cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if check and p.returncode != 0:
            fail(f"knmf {' '.join(args)} exited {p.returncode}:\n{p.stdout}")
        return p

    def run_killed(self, args, cwd, delay, log):
        """Start knmf, SIGKILL it after `delay` s. Returns (killed, exit status, seconds it
        ran: the delay, or more on a busy machine)."""
        with open(log, "w") as out:
            t0 = time.monotonic()
            p = subprocess.Popen([self.exe, *args], cwd=cwd, env=self.env, stdout=out,
                                 stderr=subprocess.STDOUT)
            try:
                p.wait(timeout=delay)
                return False, p.returncode, time.monotonic() - t0
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                t = time.monotonic() - t0
                p.wait()
                return True, p.returncode, t


def already_complete(log_text):
    m = re.search(r"(\d+) job\(s\) to run, (\d+) already complete", log_text)
    return None if m is None else (int(m.group(1)), int(m.group(2)))


def temporaries(folder):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if "knmf-tmp" in f)


# --- native mode ---------------------------------------------------------------------------
# Every dataset of a k group but the wall times: the replicate's data, its table entries and
# its completed flag. Compared as raw bytes (NaN and -0.0 included).
NATIVE_SKIP = {"seconds"}


def native_state(path):
    """{k: {dataset: array}} of a results file; None when there is no file."""
    if not os.path.exists(path):
        return None
    with h5py.File(path, "r") as f:
        if f.attrs["format"] != "knmf-results":
            fail(f"{path}: not a knmf results file")
        return {k: {n: f[f"k_{k}/{n}"][()] for n in f[f"k_{k}"] if n not in NATIVE_SKIP}
                for k in KS}, int(f.attrs["complete"])


def native_completed(state):
    return 0 if state is None else sum(int(g["completed"].sum()) for g in state[0].values())


def check_native_prefix(state, ref, where):
    """Every replicate flagged completed holds exactly the reference's data."""
    if state is None:
        return
    groups, complete = state
    for k in KS:
        g, r = groups[k], ref[0][k]
        for i in np.flatnonzero(g["completed"]):
            for n, a in r.items():
                if a.shape and a.shape[0] == N_ITER and n != "completed":
                    if g[n][i].tobytes() != a[i].tobytes():
                        fail(f"{where}: k = {k} replicate {i} is flagged completed but its "
                             f"'{n}' differs from the uninterrupted run")
    if complete and native_completed(state) != len(KS) * N_ITER:
        fail(f"{where}: the file says complete with {native_completed(state)} replicates done")


def check_native_equal(state, ref):
    groups, complete = state
    if not complete:
        fail("native: the resumed file is not complete")
    for k in KS:
        if sorted(groups[k]) != sorted(ref[0][k]):
            fail(f"native: k = {k} has datasets {sorted(groups[k])}, the reference {sorted(ref[0][k])}")
        for n, a in ref[0][k].items():
            b = groups[k][n]
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                fail(f"native: /k_{k}/{n} differs from the uninterrupted run")


# --- cNMF mode -----------------------------------------------------------------------------
def make_cnmf_folder(sim_h5ad, out_dir, name):
    """A cNMF run folder as `cnmf prepare` leaves it: the normalized counts (the simulated
    counts stand in), the job table and the per-run parameters."""
    tmp = os.path.join(out_dir, name, "cnmf_tmp")
    os.makedirs(tmp)
    shutil.copyfile(sim_h5ad, os.path.join(tmp, f"{name}.norm_counts.h5ad"))
    rs = np.random.RandomState(14)  # cNMF: np.random.seed(seed), then randint for the seeds
    seeds = rs.randint(low=1, high=(2 ** 31) - 1, size=N_ITER)
    rows = [[k, i, int(seeds[i]), False] for k in KS for i in range(N_ITER)]
    data = np.empty((len(rows), 4), dtype=object)
    data[:] = rows
    columns = np.array(["n_components", "iter", "nmf_seed", "completed"], dtype=object)
    np.savez_compressed(os.path.join(tmp, f"{name}.nmf_params.df.npz"), data=data,
                        index=np.arange(len(rows), dtype=np.int64), columns=columns)
    with open(os.path.join(tmp, f"{name}.nmf_idvrun_params.yaml"), "w") as f:
        f.write("alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: random\n"
                "l1_ratio: 0.0\nmax_iter: 1000\nsolver: cd\ntol: 0.0001\n")


SPECTRA = re.compile(r"^[^.].*\.spectra\.k_\d+\.iter_\d+\.df\.npz$")


def cnmf_state(out_dir, name):
    """{spectra file: {member: bytes}}: each .df.npz's members as stored (the .npy bytes);
    the ZIP entries' modification times, which differ between runs, are left out."""
    tmp = os.path.join(out_dir, name, "cnmf_tmp")
    out = {}
    for f in sorted(os.listdir(tmp)):
        if SPECTRA.match(f):
            with zipfile.ZipFile(os.path.join(tmp, f)) as z:
                out[f] = {m: z.read(m) for m in z.namelist()}  # checks each CRC as well
    return out


def check_cnmf_prefix(state, ref, where):
    for f, b in state.items():
        if f not in ref:
            fail(f"{where}: {f} is not a file of the uninterrupted run")
        if b != ref[f]:
            fail(f"{where}: {f} differs from the uninterrupted run")


# --- the soak ------------------------------------------------------------------------------
def soak(knmf, mode, rng, kills, work, t_ref, t_startup, ref, run_args, state_of, completed_of, prefix_check,
         restart):
    """Kill sessions of `run_args` until `kills` kills landed, then finish the run."""
    total = len(KS) * N_ITER
    landed, sessions, done, rounds = 0, 0, 0, 0
    while landed < kills:
        sessions += 1
        if sessions > 4 * kills + 4:
            fail(f"{mode}: {sessions} sessions and only {landed} kills landed")
        # one kill in four during start-up (Kokkos, reading X, opening the output), the others
        # somewhere in what is left of the work
        left = max(total - done, 1) / total
        if rng.random() < 0.25:
            delay = rng.uniform(0.0, t_startup)
        else:
            delay = t_startup + rng.uniform(0.0, 1.0) * max(t_ref - t_startup, 0.05) * left
        log = os.path.join(work, f"{mode}-session{sessions}.log")
        killed, status, ran = knmf.run_killed(run_args, work, delay, log)
        text = open(log).read()
        st = state_of()
        now = completed_of(st)
        prefix_check(st, ref, f"{mode} session {sessions}")
        header = already_complete(text)
        if header is not None and header[1] != done:
            fail(f"{mode} session {sessions}: reported {header[1]} replicates already complete, "
                 f"the output held {done}:\n{text}")
        if now < done:
            fail(f"{mode} session {sessions}: {done} completed replicates before it, {now} after "
                 f"(work lost)")
        print(f"  {mode} session {sessions}: {'SIGKILL' if killed else 'exit ' + str(status)} "
              f"after {ran:.2f} s, completed {done} -> {now} of {total}", flush=True)
        if not killed:
            if status != 0:
                fail(f"{mode} session {sessions} exited {status}:\n{text}")
            if now != total:
                fail(f"{mode} session {sessions} exited 0 with {now} of {total} replicates")
            # finished before the kill could land: start the run over, so that every kill
            # counted landed in a running session. The reference's time was measured once, on
            # a machine whose load changes: when a session did the rest of the work faster,
            # the kills are timed by that session from now on.
            rounds += 1
            if rounds > 3 * kills:
                fail(f"{mode}: {rounds} sessions finished before their kill")
            if done < total:  # (a session that found all done has nothing to time)
                t_ref = min(t_ref, t_startup + max(ran - t_startup, 0.0) * total / (total - done))
            restart()
            done = 0
            continue
        landed += 1
        done = now
    # run to completion: either it computes what is left, or there is nothing left to do
    p = knmf.run(run_args, work)
    header = already_complete(p.stdout)
    if header is None or header[1] != done or header[0] != total - done:
        fail(f"{mode} final session: expected {total - done} to run, {done} already complete:\n{p.stdout}")
    if done == total and "nothing to do" not in p.stdout:
        fail(f"{mode} final session: all {total} were complete but it did not say 'nothing to do'")
    print(f"  {mode} final session: ran {total - done}, exit 0", flush=True)
    p = knmf.run(run_args, work)
    if "nothing to do" not in p.stdout:
        fail(f"{mode}: a run after completion did not report 'nothing to do':\n{p.stdout}")
    return landed, sessions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--knmf", required=True, help="the knmf driver")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kills", type=int, default=6, help="kills per mode")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(os.environ.get("KNMF_SOAK_SEED", "0") or 0)
    if seed == 0:
        seed = random.SystemRandom().randrange(1, 2 ** 31)
    print(f"soak_kill_resume: seed {seed} (rerun: --seed {seed} or KNMF_SOAK_SEED={seed})", flush=True)
    rng = random.Random(seed)
    knmf = Knmf(os.path.abspath(a.knmf))
    work = tempfile.mkdtemp(prefix="knmf-soak-")
    t_start = time.monotonic()
    try:
        knmf.run(["simulate", "-o", "sim.h5ad", "--cells", "300", "--genes", "200",
                  "--programs", "4", "--seed", "5"], work)

        # native mode
        args = ["factorize", "sim.h5ad", "-k", *map(str, KS), "--n-iter", str(N_ITER),
                "--batch", BATCH, "--save-usages"]
        t0 = time.monotonic()
        knmf.run(args + ["-o", "ref.h5"], work)
        t_ref = time.monotonic() - t0
        t0 = time.monotonic()
        knmf.run(args + ["-o", "ref.h5"], work)  # nothing to do: start-up only
        t_startup = time.monotonic() - t0
        ref = native_state(os.path.join(work, "ref.h5"))
        print(f"  native reference: {t_ref:.2f} s (start-up {t_startup:.2f} s)", flush=True)
        out = os.path.join(work, "r.h5")
        landed, sessions = soak(knmf, "native", rng, a.kills, work, t_ref, t_startup, ref, args + ["-o", "r.h5"],
                                lambda: native_state(out), native_completed, check_native_prefix,
                                lambda: os.remove(out))
        check_native_equal(native_state(out), ref)
        print(f"soak_kill_resume: native: {landed} kills in {sessions} sessions, resumed file "
              f"bitwise equal to the uninterrupted run", flush=True)

        # cNMF mode
        for d in ("ref", "soak"):
            make_cnmf_folder(os.path.join(work, "sim.h5ad"), os.path.join(work, d), "sim")
        t0 = time.monotonic()
        knmf.run(["factorize", "--output-dir", "ref", "--name", "sim", "--batch", BATCH], work)
        t_ref = time.monotonic() - t0
        t0 = time.monotonic()
        knmf.run(["factorize", "--output-dir", "ref", "--name", "sim", "--skip-completed-runs"], work)
        t_startup = max(time.monotonic() - t0, t_startup)  # "nothing to do" may stop earlier
        ref = cnmf_state(os.path.join(work, "ref"), "sim")
        if len(ref) != len(KS) * N_ITER:
            fail(f"cnmf reference: {len(ref)} spectra files, expected {len(KS) * N_ITER}")
        print(f"  cnmf reference: {t_ref:.2f} s (start-up {t_startup:.2f} s)", flush=True)
        args = ["factorize", "--output-dir", "soak", "--name", "sim", "--batch", BATCH,
                "--skip-completed-runs"]
        state = lambda: cnmf_state(os.path.join(work, "soak"), "sim")
        def restart():
            shutil.rmtree(os.path.join(work, "soak"))
            make_cnmf_folder(os.path.join(work, "sim.h5ad"), os.path.join(work, "soak"), "sim")
        landed, sessions = soak(knmf, "cnmf", rng, a.kills, work, t_ref, t_startup, ref, args, state, len,
                                check_cnmf_prefix, restart)
        if state() != ref:
            fail("cnmf: the resumed run's spectra files differ from the uninterrupted run's")
        print(f"soak_kill_resume: cnmf: {landed} kills in {sessions} sessions, spectra files "
              f"(their .npy members) byte for byte those of the uninterrupted run", flush=True)

        left = temporaries(work)
        if left:
            fail(f"temporary files remain: {left}")
        print(f"soak_kill_resume: PASS in {time.monotonic() - t_start:.1f} s (seed {seed})")
    finally:
        if a.keep:
            print(f"soak_kill_resume: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
