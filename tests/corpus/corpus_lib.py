"""The corpus' machinery: running knmf on a case and checking the outcome, and the builders
of the valid bases (h5ad, npy, ZIP, cNMF run folders). The families are in corpus.py.

    corpus.py --knmf build/drivers/knmf --work DIR --family truncation [--family ...]
    corpus.py --knmf ... --work DIR --all          every family
    corpus.py --list [--min-cases 100]             the families and their case counts

A refused case must: exit with the expected status (1 for bad input, 2 for a bad command
line; never a signal), print nothing on stdout and exactly one line on stderr, starting
"knmf: error: " and naming the file / option / value given in the case, and leave its folder
exactly as it was (no new file or folder - no output, no temporary leftover - and no input
changed). A warning case must succeed, warn on stderr and leave only the declared outputs.
Every case also runs under a memory check (peak RSS) and a time limit.

Everything is deterministic (fixed seeds, no timestamps in the generated files), so a case
means the same bytes on every run. The cases are generated at test time into --work; see
README.md for the families and how to add a case.
"""
import hashlib
import io
import os
import shutil
import signal
import struct
import subprocess
import threading
import time
import zlib

import numpy as np
import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
KNMF = None
MAX_RSS_KIB = 400 * 1024  # a refusal of a tiny input needs far less; a zip bomb would need more
if "ASAN_OPTIONS" in os.environ:  # the sanitizer build: shadow memory and ASan's 256 MB quarantine
    MAX_RSS_KIB *= 3

# ---------------------------------------------------------------------------------------------
# cases and their checks
# ---------------------------------------------------------------------------------------------


class Case:
    """One knmf invocation and what it must do.

    expect: 'refuse' (non-zero `rc`, one error line holding every needle, nothing changed),
            'ok' (exit 0; `warn` needles must each appear on a stderr line; only `outputs` new),
            'either' (a bit flip that may hit data: 'ok' with `verify` passing, or 'refuse').
    """

    def __init__(self, name, argv, cwd, expect="refuse", rc=1, needles=(), warn=(), outputs=(),
                 verify=None, marker=None, env=None, timeout=60, count=True, ok_rcs=(0,)):
        self.name, self.argv, self.cwd = name, [str(a) for a in argv], str(cwd)
        self.expect, self.rc, self.needles, self.warn = expect, rc, [str(n) for n in needles], list(warn)
        self.outputs = [os.path.abspath(os.path.join(self.cwd, o)) for o in outputs]
        self.verify, self.marker, self.env, self.timeout, self.count = verify, marker, env or {}, timeout, count
        self.ok_rcs = ok_rcs


def snapshot(d):
    """Every file and folder under d: relative path -> ('d',) or ('f', size, sha1)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for x in dirs:
            out[os.path.relpath(os.path.join(root, x), d)] = ("d",)
        for x in files:
            p = os.path.join(root, x)
            if os.path.islink(p):
                out[os.path.relpath(p, d)] = ("l", os.readlink(p))
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = ("f", os.path.getsize(p), hashlib.sha1(f.read()).hexdigest())
    return out


def knmf_env(extra=None):
    env = dict(os.environ)
    # one thread: the machines running the suite are small and shared; the corpus checks input
    # handling, not speed
    env.update(OMP_NUM_THREADS="1", OMP_PROC_BIND="false", KNMF_MPI="0")
    env.pop("PYTHONPATH", None)
    env.update(extra or {})
    return env


def run_process(argv, cwd, env, timeout):
    """Run argv; returns (status, stdout, stderr, max RSS KiB, seconds). status < 0: signal."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs = {}

    def reader(key, f):
        outs[key] = f.read()

    threads = [threading.Thread(target=reader, args=(k, f)) for k, f in (("out", p.stdout), ("err", p.stderr))]
    for t in threads:
        t.start()
    killed = []
    timer = threading.Timer(timeout, lambda: (killed.append(1), os.kill(p.pid, signal.SIGKILL)))
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    for t in threads:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout.close()
    p.stderr.close()
    rc = p.returncode if not killed else "timeout"
    return (rc, outs["out"].decode("utf-8", "replace"), outs["err"].decode("utf-8", "replace"),
            ru.ru_maxrss, time.monotonic() - t0)


def nonblank_lines(s):
    return [l for l in s.splitlines() if l.strip()]


def check_case(c):
    """Run one case; returns (list of problems, the stderr lines, seconds)."""
    tmpdir = os.path.join(c.cwd, "tmp")
    os.makedirs(tmpdir, exist_ok=True)
    before = snapshot(c.cwd)
    rc, out, err, rss, secs = run_process([KNMF] + c.argv, c.cwd, knmf_env(dict(c.env, TMPDIR=tmpdir)), c.timeout)
    after = snapshot(c.cwd)
    problems = []
    errl = nonblank_lines(err)
    if rc == "timeout":
        problems.append(f"ran past {c.timeout} s and was killed")
    elif rc < 0:
        problems.append(f"killed by signal {-rc}")
    elif rc in (134, 139, 70):
        problems.append(f"exit status {rc} (abort / crash / knmf bug)")
    if rss > MAX_RSS_KIB:
        problems.append(f"peak RSS {rss // 1024} MiB > {MAX_RSS_KIB // 1024} MiB")
    if c.marker and os.path.exists(c.marker):
        problems.append(f"the exploit's marker {c.marker} exists: the payload RAN")
    new = sorted(set(after) - set(before))
    changed = sorted(p for p in set(after) & set(before) if after[p] != before[p])
    gone = sorted(set(before) - set(after))
    relout = {os.path.relpath(o, c.cwd) for o in c.outputs}
    expect = c.expect
    if expect == "either":
        expect = "ok" if rc in c.ok_rcs else "refuse"
    if expect == "refuse":
        if rc == 0:
            problems.append("exit status 0: the bad input was accepted")
        elif rc != c.rc and not problems:
            problems.append(f"exit status {rc}, expected {c.rc}")
        if out.strip():
            problems.append(f"stdout is not empty: {out.strip()[:200]!r}")
        if len(errl) != 1:
            problems.append(f"stderr has {len(errl)} lines, expected 1: {err[:600]!r}")
        elif not errl[0].startswith("knmf: error: "):
            problems.append(f"the error line does not start with 'knmf: error: ': {errl[0]!r}")
        if errl:
            for n in c.needles:
                if n not in errl[-1]:
                    problems.append(f"the error line does not name {n!r}")
        if new:
            problems.append(f"left behind: {new}")
        if changed:
            problems.append(f"changed: {changed}")
        if gone:
            problems.append(f"removed: {gone}")
        for o in c.outputs:
            if os.path.lexists(o) and os.path.relpath(o, c.cwd) not in before:
                problems.append(f"output {o} exists")
    else:  # ok
        if rc not in c.ok_rcs:
            problems.append(f"exit status {rc}, expected {c.ok_rcs}: {err.strip()[-400:]!r}")
        for n in c.warn:
            if not any(n in l and "warning" in l for l in errl):
                problems.append(f"no warning line names {n!r}: {err[:400]!r}")
        extra = [p for p in new if p not in relout and not any(p.startswith(r + os.sep) for r in relout)]
        if extra:
            problems.append(f"files besides the outputs: {extra}")
        leftovers = [p for p in new if ".tmp" in os.path.basename(p) or os.path.basename(p).startswith(".")]
        if leftovers:
            problems.append(f"temporary leftovers: {leftovers}")
        for o in c.outputs:
            if not os.path.exists(o):
                problems.append(f"output {o} is missing")
        changed = [p for p in changed if p not in relout]
        if changed or gone:
            problems.append(f"inputs changed or removed: {changed + gone}")
        if c.verify and not problems:
            why = c.verify(c)
            if why:
                problems.append(why)
    if os.listdir(tmpdir):
        problems.append(f"files left in TMPDIR: {os.listdir(tmpdir)}")
    return problems, errl, secs


# ---------------------------------------------------------------------------------------------
# building blocks: h5ad, npy, zip, cNMF run folders
# ---------------------------------------------------------------------------------------------

N_CELLS, N_GENES = 30, 12


def base_x():
    """30 cells x 12 genes of small counts, about 60% non-zero, every row and column non-zero."""
    rng = np.random.RandomState(15)
    x = rng.poisson(1.2, size=(N_CELLS, N_GENES)).astype(np.float64)
    for i in range(N_CELLS):
        x[i, i % N_GENES] += 1
    return x


def csr_parts(x):
    data, indices, indptr = [], [], [0]
    for row in x:
        nz = np.nonzero(row)[0]
        indices.extend(nz)
        data.extend(row[nz])
        indptr.append(len(data))
    return np.array(data, np.float32), np.array(indices, np.int32), np.array(indptr, np.int64)


def write_h5ad(path, x=None, fmt="csr", data=None, indices=None, indptr=None, shape=None,
               obs=None, var=None, dense=None, encoding=None, drop=(), x_attrs=None):
    """An AnnData file as anndata 0.8 writes it (X csr/csc group or dense dataset, obs/var
    dataframes with a string _index). Each part may be replaced to damage it."""
    x = base_x() if x is None else x
    with h5py.File(path, "w", track_order=False) as f:
        if fmt == "dense":
            f.create_dataset("X", data=x.astype(np.float32) if dense is None else dense)
        else:
            src = x if fmt == "csr" else x.T
            d, i, p = csr_parts(src)
            g = f.create_group("X")
            g.attrs["encoding-type"] = encoding or ("csr_matrix" if fmt == "csr" else "csc_matrix")
            g.attrs["encoding-version"] = "0.1.0"
            g.attrs["shape"] = np.array(x.shape if shape is None else shape, dtype=np.int64)
            for name, val in (("data", d if data is None else data), ("indices", i if indices is None else indices),
                              ("indptr", p if indptr is None else indptr)):
                if name not in drop:
                    g.create_dataset(name, data=val)
            for k, v in (x_attrs or {}).items():
                if v is None:
                    del g.attrs[k]
                else:
                    g.attrs[k] = v
        for grp, labels in (("obs", obs if obs is not None else [f"cell{i}" for i in range(x.shape[0])]),
                            ("var", var if var is not None else [f"gene{j}" for j in range(x.shape[1])])):
            g = f.create_group(grp)
            g.attrs["_index"] = "_index"
            g.attrs["encoding-type"] = "dataframe"
            g.attrs["encoding-version"] = "0.2.0"
            g.attrs["column-order"] = np.array([], dtype=h5py.string_dtype())
            ds = g.create_dataset("_index", data=np.array(labels, dtype=object), dtype=h5py.string_dtype())
            ds.attrs["encoding-type"] = "string-array"
            ds.attrs["encoding-version"] = "0.2.0"


def npy_bytes(arr):
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asanyarray(arr), allow_pickle=True)
    return b.getvalue()


def npy_with_pickle(payload, descr="|O", shape=(3,)):
    """An .npy v1.0 object array whose pickle is `payload` (raw bytes)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    total = len(header) + 10 + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def deflate(data, level=6):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


class Member:
    """One ZIP entry; every header field may be overridden to damage the archive."""

    def __init__(self, name, data, method=8, **over):
        self.name, self.data, self.method, self.over = name, data, method, over

    def payload(self):
        if "payload" in self.over:
            return self.over["payload"]
        return deflate(self.data) if self.method == 8 else self.data


def build_zip(members, eocd=None, extra_tail=b"", cd_extra=None):
    """A ZIP archive (no timestamps: deterministic). `eocd` overrides end-record fields
    (count, size, offset, comment_len, sig); member overrides: crc, csize, usize, flags,
    local_name, offset (central directory's local header offset), lsig."""
    out = bytearray()
    cds = []
    for m in members:
        o = m.over
        pay = m.payload()
        crc = o.get("crc", zlib.crc32(m.data) & 0xFFFFFFFF)
        csize, usize = o.get("csize", len(pay)), o.get("usize", len(m.data))
        lname = o.get("local_name", m.name).encode()
        offset = len(out)
        flags = o.get("flags", 0)
        lextra = o.get("local_extra", b"")
        out += struct.pack("<IHHHHHIIIHH", o.get("lsig", 0x04034B50), 20, flags, m.method, 0, 0x21,
                           crc, o.get("lcsize", csize) & 0xFFFFFFFF, o.get("lusize", usize) & 0xFFFFFFFF,
                           len(lname), len(lextra)) + lname + lextra
        out += pay
        cds.append((m, crc, csize, usize, o.get("offset", offset), flags))
    cd_start = len(out)
    for m, crc, csize, usize, offset, flags in cds:
        name = m.name.encode()
        cextra = m.over.get("cd_extra", b"")
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, flags, m.method, 0, 0x21, crc,
                           csize & 0xFFFFFFFF, usize & 0xFFFFFFFF, len(name), len(cextra), 0, 0, 0, 0,
                           offset & 0xFFFFFFFF) + name + cextra
    cd_size = len(out) - cd_start
    e = dict(sig=0x06054B50, count=len(members), size=cd_size, offset=cd_start, comment_len=0)
    e.update(eocd or {})
    if cd_extra:
        out += cd_extra
    out += struct.pack("<IHHHHIIH", e["sig"], 0, 0, e["count"], e["count"], e["size"] & 0xFFFFFFFF,
                       e["offset"] & 0xFFFFFFFF, e["comment_len"]) + extra_tail
    return bytes(out)


JOB_COLUMNS = ["n_components", "iter", "nmf_seed"]


def job_rows(ks=(2, 3), n_iter=5):
    return [[k, it, 1000 + 17 * k + it] for k in ks for it in range(n_iter)]


def job_table_members(rows=None, columns=None, data=None, index=None):
    rows = job_rows() if rows is None else rows
    data = np.array(rows, dtype=np.int64) if data is None else data
    index = np.arange(len(rows), dtype=np.int64) if index is None else index
    columns = np.array(JOB_COLUMNS if columns is None else columns, dtype=object)
    return [Member("data.npy", npy_bytes(data)), Member("index.npy", npy_bytes(index)),
            Member("columns.npy", npy_bytes(columns))]


def write_df_npz(path, members):
    with open(path, "wb") as f:
        f.write(build_zip(members))


YAML_BASE = ("alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: random\nl1_ratio: 0.0\n"
             "max_iter: 50\nsolver: cd\ntol: 0.0001\n")


def make_cnmf_run(parent, name="run", yaml=YAML_BASE, jobs=None, x_writer=None):
    """A run folder PARENT/NAME as `cnmf prepare` leaves it for factorize; returns its paths."""
    tmp = os.path.join(parent, name, "cnmf_tmp")
    os.makedirs(tmp, exist_ok=True)
    p = {"dir": os.path.join(parent, name), "tmp": tmp,
         "x": os.path.join(tmp, f"{name}.norm_counts.h5ad"),
         "yaml": os.path.join(tmp, f"{name}.nmf_idvrun_params.yaml"),
         "jobs": os.path.join(tmp, f"{name}.nmf_params.df.npz")}
    (x_writer or write_h5ad)(p["x"])
    with open(p["yaml"], "w") as f:
        f.write(yaml)
    if isinstance(jobs, (bytes, bytearray)):
        with open(p["jobs"], "wb") as f:
            f.write(jobs)
    else:
        write_df_npz(p["jobs"], jobs or job_table_members())
    with open(os.path.join(p["dir"], f"{name}.overdispersed_genes.txt"), "w") as f:
        f.write("".join(f"gene{j}\n" for j in range(N_GENES)))
    return p


def spectra_path(p, k, it, name="run"):
    return os.path.join(p["tmp"], f"{name}.spectra.k_{k}.iter_{it}.df.npz")


def cnmf_factorize_argv(parent, name="run"):
    return ["factorize", "--output-dir", parent, "--name", name, "--quiet"]


def native_argv(inp, out="r.h5", *more):
    return ["factorize", inp, "-k", "2", "--n-iter", "2", "--max-iter", "20", "-o", out, "--quiet", *more]


class Ctx:
    """One family's work folder: a fresh folder per case, and the bases made once per family."""

    def __init__(self, work, family):
        self.root = os.path.join(work, family)
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root)
        self._base = {}

    def dir(self, case):
        d = os.path.join(self.root, case)
        os.makedirs(d)
        return d

    def knmf_ok(self, argv, cwd):
        rc, out, err, _, _ = run_process([KNMF] + argv, cwd, knmf_env(), 120)
        if rc != 0:
            raise RuntimeError(f"building a base: knmf {' '.join(argv)} failed ({rc}): {err}")

    def base(self, what):
        """Valid inputs made by knmf itself, once per family: 'results' (a results file of k 2 3,
        5 replicates each, over base x) and 'spectra' (a cNMF run folder after factorize)."""
        if what in self._base:
            return self._base[what]
        d = os.path.join(self.root, "_base_" + what)
        os.makedirs(d)
        if what == "results":
            write_h5ad(os.path.join(d, "x.h5ad"))
            self.knmf_ok(["factorize", "x.h5ad", "-k", "2", "3", "--n-iter", "5", "--max-iter", "30",
                          "-o", "r.h5", "--quiet"], d)
        elif what == "spectra":
            make_cnmf_run(d)
            self.knmf_ok(cnmf_factorize_argv(d), d)
        self._base[what] = d
        return d

    def copy_results(self, d):
        """x.h5ad and r.h5 (the results base) copied into d."""
        b = self.base("results")
        for f in ("x.h5ad", "r.h5"):
            shutil.copy(os.path.join(b, f), os.path.join(d, f))
        return os.path.join(d, "x.h5ad"), os.path.join(d, "r.h5")

    def copy_spectra_run(self, d):
        shutil.copytree(os.path.join(self.base("spectra"), "run"), os.path.join(d, "run"))
        return {"dir": os.path.join(d, "run"), "tmp": os.path.join(d, "run", "cnmf_tmp"),
                "jobs": os.path.join(d, "run", "cnmf_tmp", "run.nmf_params.df.npz")}


def truncate_copy(src, dst, n):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[:n])
    return len(data)


def flip_bit(path, byte, bit):
    with open(path, "r+b") as f:
        f.seek(byte)
        b = f.read(1)[0]
        f.seek(byte)
        f.write(bytes([b ^ (1 << bit)]))


def results_complete(path):
    """A verify(): the results file reads as complete with h5py."""
    def check(case):
        try:
            with h5py.File(path, "r") as f:
                if int(f.attrs.get("complete", 0)) != 1:
                    return f"{path} is not marked complete"
        except Exception as e:  # noqa: BLE001
            return f"{path} does not open with h5py: {e}"
        return None
    return check


class Special:
    """A case with its own run() (several processes, result comparisons): returns
    (problems, lines to show, seconds)."""
    count = True


