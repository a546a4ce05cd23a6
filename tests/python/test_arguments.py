"""The corpus's "Python arguments" family (issue 53): hostile arguments to every function of
the module, and the contract they meet (docs/python.md, "Errors"): an argument of the wrong
type raises TypeError, a value of the right type out of range or unknown raises ValueError,
each with one line naming the argument and its value; never a crash, a hang, a C++ exception
leaking through, or a value silently truncated. Legal values next to them (numpy integer
scalars, integer arrays, a float32 tolerance, ...) must pass.

A table rather than a family of tests/corpus/corpus.py: the corpus runs the driver and checks
its exit status and stderr line, while these cases are calls in one interpreter checked by the
exception they raise. Cases that crashed or hung the interpreter before (thread counts, a zero
k, interpreter exit under a live call) run in a child process with a timeout, so that a
regression fails its case instead of killing pytest.

Run by ctest `python_arguments` (tests/python/CMakeLists.txt) with PYTHONPATH=<build>/python."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import knmf

SETUP = """
import numpy as np, scipy.sparse as sp
import knmf
rng = np.random.default_rng(1)
X = rng.random((30, 12)) + 0.1               # cells x genes
S = rng.random((10, 2, 12))                   # 10 replicates of k = 2
counts = rng.poisson(2.0, (40, 30)).astype(np.int64) + np.eye(40, 30, dtype=np.int64)
"""

T, V, OK = TypeError, ValueError, "ok"

# (id, call, expected, words the message must hold)
ARGUMENTS = [
    # factorize: k
    ("k 2**40", "knmf.factorize(X, 2**40)", V, ["k = 1099511627776"]),
    ("k 0", "knmf.factorize(X, 0)", V, ["k = 0", "at least 1"]),
    ("k float", "knmf.factorize(X, 2.0)", T, ["k = 2.0", "integer"]),
    ("k bool", "knmf.factorize(X, True)", T, ["k = True"]),
    ("k str", "knmf.factorize(X, '2')", T, ["k = '2'"]),
    ("k numpy int", "knmf.factorize(X, np.int64(2), max_iter=3)", OK, []),
    # seeds, n_replicates, seed
    ("seeds 2**64", "knmf.factorize(X, 2, seeds=[2**64])", V, ["seeds[0] = 18446744073709551616"]),
    ("seeds negative", "knmf.factorize(X, 2, seeds=[3, -1])", V, ["seeds[1] = -1"]),
    ("seeds float", "knmf.factorize(X, 2, seeds=[1.7])", T, ["seeds[0] = 1.7"]),
    ("seeds bool", "knmf.factorize(X, 2, seeds=[True])", T, ["seeds[0] = True"]),
    ("seeds 2-D array", "knmf.factorize(X, 2, seeds=np.array([[1, 2]]))", V, ["seeds", "2 dimension"]),
    ("seeds nested list", "knmf.factorize(X, 2, seeds=[[1, 2]])", V, ["seeds", "dimension"]),
    ("seeds float array", "knmf.factorize(X, 2, seeds=np.array([1.0, 2.0]))", T, ["seeds", "float64"]),
    ("seeds scalar", "knmf.factorize(X, 2, seeds=5)", T, ["seeds = 5"]),
    ("seeds str", "knmf.factorize(X, 2, seeds='12')", T, ["seeds = '12'"]),
    ("seeds empty", "knmf.factorize(X, 2, seeds=[])", V, ["0 seeds"]),
    ("seeds uint32 array", "knmf.factorize(X, 2, seeds=np.array([1, 2**32 - 1], np.uint32), max_iter=3)",
     OK, []),
    ("seeds range", "knmf.factorize(X, 2, seeds=range(2), max_iter=3)", OK, []),
    ("n_replicates 10**12", "knmf.factorize(X, 2, n_replicates=10**12)", V, ["n_replicates = 1000000000000"]),
    ("n_replicates float", "knmf.factorize(X, 2, n_replicates=2.5)", T, ["n_replicates = 2.5"]),
    ("n_replicates 0", "knmf.factorize(X, 2, n_replicates=0)", V, ["n_replicates = 0"]),
    ("n_replicates beyond memory", "knmf.factorize(X, 2, n_replicates=2**31 - 1)", V,
     ["the results of 2147483647 replicate(s) would take", "memory"]),
    ("seed 2**32", "knmf.factorize(X, 2, seed=2**32)", V, ["seed = 4294967296"]),
    ("seed float", "knmf.factorize(X, 2, seed=14.0)", T, ["seed = 14.0"]),
    # dtype, batch, progress, save_usages, format
    ("dtype bogus", "knmf.factorize(X, 2, dtype='bogus')", V, ["dtype = 'bogus'"]),
    ("dtype int32", "knmf.factorize(X, 2, dtype=np.int32)", V, ["dtype = int32"]),
    ("dtype complex", "knmf.factorize(X, 2, dtype=complex)", V, ["dtype = complex128"]),
    ("dtype not a dtype", "knmf.factorize(X, 2, dtype=5)", T, ["dtype = 5"]),
    ("dtype float32", "knmf.factorize(X, 2, dtype=np.float32, max_iter=3)", OK, []),
    ("batch float", "knmf.factorize(X, 2, batch=1.5)", T, ["batch = 1.5"]),
    ("batch 0", "knmf.factorize(X, 2, batch=0)", V, ["batch = 0"]),
    ("batch 2**40", "knmf.factorize(X, 2, batch=2**40)", V, ["batch = 1099511627776"]),
    ("progress 5", "knmf.factorize(X, 2, progress=5)", T, ["progress = 5"]),
    ("progress str", "knmf.factorize(X, 2, progress='yes')", T, ["progress = 'yes'"]),
    ("progress numpy bool", "knmf.factorize(X, 2, progress=np.False_, max_iter=3)", OK, []),
    ("save_usages str", "knmf.factorize(X, 2, save_usages='no')", T, ["save_usages = 'no'"]),
    ("format int", "knmf.factorize(X, 2, format=3)", T, ["format = 3"]),
    ("format unknown", "knmf.factorize(X, 2, format='blocked')", V, ["blocked"]),
    # solver options: an int for integer options, a number for the others, a str for any
    ("max_iter float", "knmf.factorize(X, 2, max_iter=1.5)", T, ["max_iter = 1.5"]),
    ("max_iter bool", "knmf.factorize(X, 2, max_iter=True)", T, ["max_iter = True"]),
    ("max_iter 2**40", "knmf.factorize(X, 2, max_iter=2**40)", V, ["max_iter", "1099511627776"]),
    ("tol None", "knmf.factorize(X, 2, tol=None)", T, ["tol = None"]),
    ("tol list", "knmf.factorize(X, 2, tol=[1e-4])", T, ["tol = [0.0001]"]),
    ("tol text", "knmf.factorize(X, 2, tol='abc')", V, ["tol", "abc"]),
    ("tol negative", "knmf.factorize(X, 2, tol=-1)", V, ["tol", "-1"]),
    ("l1_ratio 2", "knmf.factorize(X, 2, l1_ratio=2)", V, ["l1_ratio", "2"]),
    ("check_every float", "knmf.factorize(X, 2, check_every=2.5)", T, ["check_every = 2.5"]),
    ("option unknown", "knmf.factorize(X, 2, frobnicate=3)", V, ["unknown option 'frobnicate'"]),
    ("options of numpy types", "knmf.factorize(X, 2, tol=np.float32(1e-3), max_iter=np.int32(3), "
     "inner_sweeps=np.int64(2), alpha_H='same')", OK, []),
    # X
    ("X complex", "knmf.factorize(X + 1j, 2)", T, ["complex"]),
    ("X complex sparse", "knmf.factorize(sp.csr_matrix(X + 0j), 2)", T, ["complex"]),
    ("X complex list", "knmf.factorize((X + 0j).tolist(), 2)", T, ["complex"]),
    ("X strings", "knmf.factorize(X.astype(str), 2)", T, ["<U"]),
    ("X objects", "knmf.factorize(np.array([[1, 'a'], [2, 3]], dtype=object), 1)", T, ["not real numbers"]),
    ("X None", "knmf.factorize(None, 2)", T, ["X = None"]),
    ("X 3-D", "knmf.factorize(X[None], 2)", V, ["3 dimension"]),
    ("X bool", "knmf.factorize(X > 0.5, 2, max_iter=3)", OK, []),
    ("X k above min(n, g)", "knmf.factorize(X, 13)", V, ["k = 13 exceeds min(cells, genes) = 12"]),
    # cnmf_seeds and set_num_threads (checks that raise before any state changes)
    ("cnmf_seeds seed", "knmf.cnmf_seeds(2**32, 2, [3])", V, ["seed = 4294967296"]),
    ("cnmf_seeds n_iter float", "knmf.cnmf_seeds(1, 2.0, [3])", T, ["n_iter = 2.0"]),
    ("cnmf_seeds n_iter 10**12", "knmf.cnmf_seeds(1, 10**12, [3])", V, ["n_iter = 1000000000000"]),
    ("cnmf_seeds k float", "knmf.cnmf_seeds(1, 2, [3.5])", T, ["ks[0] = 3.5"]),
    ("cnmf_seeds ks int", "knmf.cnmf_seeds(1, 2, 3)", T, ["ks = 3"]),
    ("cnmf_seeds numpy", "knmf.cnmf_seeds(np.int64(1), np.int32(2), np.array([3, 4]))", OK, []),
    ("set_num_threads 513", "knmf.set_num_threads(513)", V, ["set_num_threads(513)", "512"]),
    ("set_num_threads 0", "knmf.set_num_threads(0)", V, ["set_num_threads(0)"]),
    ("set_num_threads 2**70", "knmf.set_num_threads(2**70)", V, ["1180591620717411303424"]),
    ("set_num_threads float", "knmf.set_num_threads(2.0)", T, ["n = 2.0"]),
    ("set_num_threads bool", "knmf.set_num_threads(True)", T, ["n = True"]),
    # prepare
    ("numgenes float", "knmf.prepare(counts, 2.5)", T, ["numgenes = 2.5"]),
    ("numgenes 2**40", "knmf.prepare(counts, 2**40)", V, ["numgenes = 1099511627776"]),
    ("numgenes bool", "knmf.prepare(counts, True)", T, ["numgenes = True"]),
    ("genes str", "knmf.prepare(counts, 5, genes='G1')", T, ["genes = 'G1'"]),
    ("genes ints", "knmf.prepare(counts, 5, genes=[1, 2])", T, ["genes[0] = 1"]),
    ("var_names bytes", "knmf.prepare(counts, 5, var_names=[b'g'] * 30)", T, ["var_names[0] = b'g'"]),
    ("counts complex", "knmf.prepare(counts + 0j, 5)", T, ["complex"]),
    ("layer without AnnData", "knmf.prepare(counts, 5, layer='raw')", V, ["layer"]),
    ("layer missing", "knmf.prepare(anndata.AnnData(X=counts.astype(np.float32)), 5, layer='raw')",
     V, ["layer 'raw'", "none"]),
    ("layer int", "knmf.prepare(anndata.AnnData(X=counts.astype(np.float32)), 5, layer=3)",
     T, ["layer = 3"]),
    # consensus
    ("consensus spectra complex", "knmf.consensus(X, S + 0j)", T, ["spectra", "complex"]),
    ("consensus spectra 2-D", "knmf.consensus(X, S[0])", V, ["spectra has 2 dimension"]),
    ("consensus spectra empty", "knmf.consensus(X, np.zeros((0, 2, 12)))", V, ["spectra", "(0, 2, 12)"]),
    ("consensus density str", "knmf.consensus(X, S, density_threshold='0.5')", T, ["density_threshold = '0.5'"]),
    ("consensus hvg 2**40", "knmf.consensus(X, S, tpm=X, hvg_columns=[2**40] * 12)", V, ["hvg_columns[0]"]),
    ("consensus hvg float", "knmf.consensus(X, S, tpm=X, hvg_columns=np.arange(12) + 0.5)", T, ["hvg_columns"]),
    ("consensus gene_std str", "knmf.consensus(X, S, tpm=X, hvg_columns=range(12), gene_std=['a'] * 12)",
     T, ["gene_std"]),
    ("consensus X complex", "knmf.consensus(X + 0j, S)", T, ["X has complex"]),
    ("consensus max_iter float", "knmf.consensus(X, S, max_iter=10.5)", T, ["max_iter = 10.5"]),
    ("consensus int16 X", "knmf.consensus((X * 100).astype(np.int16), S, max_iter=10)", OK, []),
    # k_selection
    ("k_selection empty", "knmf.k_selection(X, {})", V, ["spectra is empty"]),
    ("k_selection float key", "knmf.k_selection(X, {2.0: S})", T, ["spectra's k = 2.0"]),
    ("k_selection key 0", "knmf.k_selection(X, {0: S})", V, ["spectra's k = 0"]),
    ("k_selection not factorizations", "knmf.k_selection(X, [S])", T, ["spectra[0]", "Factorization"]),
    ("k_selection cv_folds int", "knmf.k_selection(X, {2: S}, cv_folds=2)", T, ["cv_folds = 2"]),
    ("k_selection cv_folds three", "knmf.k_selection(X, {2: S}, cv_folds=(2, 2, 2))", V, ["cv_folds = (2, 2, 2)"]),
    ("k_selection cv_folds 2**40", "knmf.k_selection(X, {2: S}, cv_folds=(2**40, 2))", V, ["cv_folds[0]"]),
    ("k_selection cv_seed -1", "knmf.k_selection(X, {2: S}, cv_seed=-1)", V, ["cv_seed = -1"]),
    ("k_selection cross_validate str", "knmf.k_selection(X, {2: S}, cross_validate='yes')", T,
     ["cross_validate = 'yes'"]),
    ("k_selection cv_rule int", "knmf.k_selection(X, {2: S}, cv_rule=3)", T, ["cv_rule = 3"]),
    ("k_selection numpy key", "knmf.k_selection(X, {np.int64(2): S}, max_iter=10)", OK, []),
    # tl.cnmf: every argument checked before the first step
    ("tl.cnmf ks float", "knmf.tl.cnmf(None, 5.5)", T, ["ks[0] = 5.5"]),
    ("tl.cnmf ks str", "knmf.tl.cnmf(None, '5')", T, ["ks = '5'"]),
    ("tl.cnmf n_iter float", "knmf.tl.cnmf(None, [3], n_iter=1.5)", T, ["n_iter = 1.5"]),
    ("tl.cnmf seed 2**64", "knmf.tl.cnmf(None, [3], seed=2**64)", V, ["seed = 18446744073709551616"]),
    ("tl.cnmf components 4.0", "knmf.tl.cnmf(None, [3, 4], components=4.0)", T, ["components = 4.0"]),
    ("tl.cnmf components not in ks", "knmf.tl.cnmf(None, [3, 4], components=5)", V, ["components = 5"]),
    ("tl.cnmf key_added", "knmf.tl.cnmf(None, [3], key_added=None)", T, ["key_added = None"]),
    ("tl.cnmf batch float", "knmf.tl.cnmf(None, [3], batch=2.5)", T, ["batch = 2.5"]),
]


@pytest.fixture(scope="module")
def namespace():
    import anndata  # Debian's python3-anndata (cmake/bootstrap.sh)

    ns = {"anndata": anndata}
    exec(SETUP, ns)
    return ns


@pytest.mark.parametrize("call,expected,words", [c[1:] for c in ARGUMENTS],
                         ids=[c[0] for c in ARGUMENTS])
def test_python_arguments(namespace, call, expected, words):
    if expected == OK:
        eval(call, namespace)
        return
    with pytest.raises(Exception) as e:
        eval(call, namespace)
    assert type(e.value) is expected, f"{type(e.value).__name__}: {e.value}"
    msg = str(e.value)
    assert "\n" not in msg.strip(), msg  # one line
    for w in words:
        assert w in msg, msg


def run_child(body, env=None, timeout=120):
    """`body` after SETUP in a fresh interpreter: its exit status (a signal: negative), stdout
    and stderr. A hang past `timeout` fails the case."""
    full = {k: v for k, v in os.environ.items() if k != "KOKKOS_NUM_THREADS"}
    full.update(env or {})
    try:
        out = subprocess.run([sys.executable, "-c", SETUP + textwrap.dedent(body)],
                             capture_output=True, text=True, timeout=timeout, env=full)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {timeout} s")
    return out.returncode, out.stdout, out.stderr


CALL = """
try:
    {call}
    print("ok", knmf._knmf.concurrency())
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
"""
RUN = "knmf.factorize(X, 2, max_iter=3)"

# The thread counts that crashed or hung a first computation (the pool holds 512 threads in
# this build: _knmf.max_host_threads()), and a zero k. (id, call, environment, printed line)
CHILDREN = [
    ("set_num_threads 513", "knmf.set_num_threads(513); " + RUN, {},
     "ValueError: knmf.set_num_threads(513) is invalid"),
    ("set_num_threads 100000", "knmf.set_num_threads(100000); " + RUN, {},
     "ValueError: knmf.set_num_threads(100000) is invalid"),
    ("OMP_NUM_THREADS 513", RUN, {"OMP_NUM_THREADS": "513"},
     "ValueError: environment variable OMP_NUM_THREADS '513' is invalid"),
    ("OMP_NUM_THREADS 100000", RUN, {"OMP_NUM_THREADS": "100000"},
     "ValueError: environment variable OMP_NUM_THREADS '100000' is invalid"),
    ("KOKKOS_NUM_THREADS 0", RUN, {"KOKKOS_NUM_THREADS": "0"},
     "ValueError: environment variable KOKKOS_NUM_THREADS '0' is invalid"),
    ("set_num_threads over OMP_NUM_THREADS", "knmf.set_num_threads(2); " + RUN,
     {"OMP_NUM_THREADS": "100000"}, "ok 2"),
    ("consensus k 0", "knmf.consensus(X, np.zeros((3, 0, 12)))", {}, "ValueError: "),
]


@pytest.mark.parametrize("call,env,line", [c[1:] for c in CHILDREN], ids=[c[0] for c in CHILDREN])
def test_python_arguments_that_crashed(call, env, line):
    rc, out, err = run_child(CALL.format(call=call), env, timeout=60)
    assert rc == 0, f"exit {rc}: {err[-2000:]}"
    assert out.startswith(line), out + err[-2000:]
    assert "\n" not in out.strip(), out


DAEMON = """
import atexit, threading, time
atexit.unregister(knmf._at_exit)
atexit.register(knmf._at_exit, {wait})   # the seconds a running factorize is given to stop
X = rng.random((300, 200))
knmf.factorize(X, 2, max_iter=2)          # Kokkos started
started = threading.Event()

def work():
    started.set()
    {call}

threading.Thread(target=work, daemon=True).start()
started.wait()
time.sleep(0.1)  # inside the call (the k_selection below takes about a second)
print("exit", flush=True)
"""


@pytest.mark.parametrize("wait,call,warning", [
    # stopped at its next iteration within the wait: Kokkos finalized
    (5.0, "knmf.factorize(X, 8, n_replicates=4, tol=0, max_iter=10**7)",
     "1 knmf call(s) running in other threads at exit were stopped"),
    # no wait: still running at the hook, which leaves Kokkos as it is; the process ends when
    # the call leaves knmf (a factorize at its next iteration, a k_selection at its end)
    (0.0, "knmf.factorize(X, 8, n_replicates=4, tol=0, max_iter=10**7)",
     "1 knmf call(s) still running in other threads at exit: Kokkos is not finalized"),
    (0.0, "knmf.k_selection(X, {3: rng.random((10, 3, 200))}, cross_validate=True, tol=0, "
          "max_iter=400)",
     "1 knmf call(s) still running in other threads at exit: Kokkos is not finalized"),
], ids=["factorize stopped", "factorize still running", "k_selection still running"])
def test_exit_while_a_daemon_thread_is_inside_knmf(wait, call, warning):
    rc, out, err = run_child(DAEMON.format(wait=wait, call=call), timeout=120)
    assert rc == 0, f"exit {rc}: {err[-2000:]}"  # before: 134, Kokkos' abort
    assert out.split() == ["exit"], out
    lines = err.strip().splitlines()
    assert lines == ["knmf: warning: " + warning + (" (their results are lost)" if wait else
                                                      ", the process ends when they leave knmf")], err
