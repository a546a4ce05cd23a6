"""knmf's Python module (python/, docs/python.md) against the driver of the same build.

Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH=<build>/python and KNMF_DRIVER set
to the driver; the fixtures are made by the driver itself (`knmf simulate`), so the test needs
no data file. Bitwise: the same X, seeds, options, batch, thread count and BLAS kernel give the
driver's spectra, usages, iterations and errors exactly."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import anndata  # Debian's python3-anndata (cmake/bootstrap.sh): the test fails without it
import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import knmf

DRIVER = os.environ["KNMF_DRIVER"]


def run_driver(*args):
    subprocess.run([DRIVER, *map(str, args)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """A simulated counts matrix (400 cells x 300 genes, 4 programs) as .h5ad and as CSR."""
    d = tmp_path_factory.mktemp("sim")
    path = d / "sim.h5ad"
    run_driver("simulate", "-o", path, "--cells", 400, "--genes", 300, "--programs", 3,
               "--seed", 5)
    with h5py.File(path, "r") as f:
        g = f["X"]
        shape = tuple(int(v) for v in g.attrs["shape"])
        X = sp.csr_matrix((g["data"][:], g["indices"][:], g["indptr"][:]), shape=shape)
    return path, X


def driver_run(tmp_path, h5ad, k, *extra):
    out = tmp_path / "res.h5"
    run_driver("factorize", h5ad, "-o", out, "-k", k, "--n-iter", 3, "--seed", 14, "--batch", 2,
               "--save-usages", "--quiet", *extra)
    with h5py.File(out, "r") as f:
        g = f[f"k_{k}"]
        return {name: g[name][:] for name in
                ("spectra", "usages", "seeds", "iterations", "final_error", "error_at_init")}


def assert_same(res, want):
    assert np.array_equal(res.seeds, want["seeds"])
    assert np.array_equal(res.n_iter, want["iterations"])
    assert np.array_equal(res.spectra, want["spectra"])  # bit for bit
    assert res.usages.dtype == want["usages"].dtype
    assert np.array_equal(res.usages, want["usages"])
    assert np.array_equal(res.errors, want["final_error"])
    assert np.array_equal(res.errors_at_init, want["error_at_init"])


def test_import_and_version():
    out = subprocess.run([DRIVER, "--version"], check=True, capture_output=True, text=True)
    assert knmf.__version__ in out.stdout.splitlines()[0]
    assert isinstance(knmf.__version__, str) and knmf.__version__.count(".") == 2


def test_cnmf_seeds_are_the_driver_job_table(sim, tmp_path):
    h5ad, _ = sim
    out = tmp_path / "res.h5"
    run_driver("factorize", h5ad, "-o", out, "-k", 3, 4, "--n-iter", 5, "--seed", 7, "--quiet",
               "--max-iter", 2)
    seeds = knmf.cnmf_seeds(7, 5, [3, 4])
    with h5py.File(out, "r") as f:
        for k in (3, 4):
            assert seeds[k] == [int(s) for s in f[f"k_{k}/seeds"][:]]


@pytest.mark.parametrize("dtype,extra", [("float64", ()), ("float32", ("--dtype", "float"))])
def test_factorize_equals_the_driver_sparse(sim, tmp_path, dtype, extra):
    h5ad, X = sim  # 48% dense: sparse by choice (the plan's crossover is 20%)
    want = driver_run(tmp_path, h5ad, 4, "--format", "sparse", *extra)
    res = knmf.factorize(X, 4, n_replicates=3, seed=14, batch=2, dtype=dtype, format="sparse")
    assert res.x_format[0] == "sparse"
    assert res.input_bytes_copied == 0  # scipy's int32 CSR and float32 values: read in place
    assert_same(res, want)


def test_factorize_equals_the_driver_by_the_plan(sim, tmp_path):
    h5ad, X = sim  # the plan's own choice (dense here), from a sparse X, as the driver's
    want = driver_run(tmp_path, h5ad, 5)
    res = knmf.factorize(X, 5, n_replicates=3, seed=14, batch=2, dtype="float64")
    assert res.x_format[0] == "dense" and "crossover" in res.x_format[1]
    assert_same(res, want)


def test_factorize_equals_the_driver_dense(sim, tmp_path):
    h5ad, X = sim
    want = driver_run(tmp_path, h5ad, 4, "--format", "dense")
    dense = X.astype(np.float64).toarray()
    res = knmf.factorize(dense, 4, n_replicates=3, seed=14, batch=2)
    assert res.x_format[0] == "dense"
    assert res.input_bytes_copied == 0  # C order, float64: read where it is
    assert_same(res, want)
    # a sparse X the plan makes dense (format='dense'): the same numbers
    res2 = knmf.factorize(X, 4, n_replicates=3, seed=14, batch=2, dtype="float64",
                          format="dense")
    assert_same(res2, want)


def test_layouts_give_the_same_numbers_and_count_their_copies(sim):
    _, X = sim
    X = X.astype(np.float64)
    n, g = X.shape
    base = knmf.factorize(X, 3, n_replicates=2, max_iter=50, batch=2, format="sparse")
    dense_base = knmf.factorize(X.toarray(), 3, n_replicates=2, max_iter=50, batch=2)
    i64 = X.copy()
    i64.indptr = i64.indptr.astype(np.int64)
    i64.indices = i64.indices.astype(np.int64)
    strided = np.zeros((n, 2 * g))
    strided[:, ::2] = X.toarray()
    # (X, format, bytes the package copies, the numbers it must give)
    cases = {
        "csr int32": (X, "sparse", 0, base),
        "csr int64": (i64, "sparse", 0, base),
        "csc": (X.tocsc(), "sparse", None, base),
        "coo": (X.tocoo(), "sparse", None, base),
        "csr float32 values, float64 compute": (X.astype(np.float32), "sparse", 0, None),
        "dense C order": (X.toarray(), "auto", 0, dense_base),
        "dense Fortran order": (np.asfortranarray(X.toarray()), "auto", 0, dense_base),
        "dense float32, float64 compute": (X.toarray().astype(np.float32), "auto", 0, None),
        "dense strided view": (strided[:, ::2], "auto", n * g * 8, dense_base),
        "dense int64": (X.toarray().astype(np.int64), "auto", n * g * 8, None),
        "list of lists": (X.toarray().tolist(), "auto", n * g * 8, dense_base),
    }
    if hasattr(sp, "csr_array"):
        cases["csr_array"] = (sp.csr_array(X), "sparse", 0, base)
    for name, (A, fmt, copied, want) in cases.items():
        res = knmf.factorize(A, 3, n_replicates=2, max_iter=50, batch=2, dtype="float64",
                             format=fmt)
        if copied is None:
            assert res.input_bytes_copied > 0, name
        else:
            assert res.input_bytes_copied == copied, name
        if want is not None:
            assert np.array_equal(res.spectra, want.spectra), name
            assert np.array_equal(res.usages, want.usages), name
    # float32 values read in place give what an explicit float64 copy gives
    f32 = X.astype(np.float32)
    a = knmf.factorize(f32, 3, n_replicates=2, max_iter=50, batch=2, dtype="float64",
                       format="sparse")
    b = knmf.factorize(f32.astype(np.float64), 3, n_replicates=2, max_iter=50, batch=2,
                       format="sparse")
    assert np.array_equal(a.spectra, b.spectra)


def test_unsorted_indices_are_read_as_stored_like_the_driver(sim, tmp_path):
    """cNMF's prepared matrices often have unsorted rows: read as stored (no copy), the sums in
    that order, as the driver reads the same file."""
    h5ad, X = sim
    U = X.copy()
    for r in range(0, U.shape[0], 3):  # every third row reversed
        s = slice(U.indptr[r], U.indptr[r + 1])
        U.indices[s] = U.indices[s][::-1].copy()
        U.data[s] = U.data[s][::-1].copy()
    U.has_sorted_indices = False
    path = tmp_path / "unsorted.h5ad"
    path.write_bytes(h5ad.read_bytes())
    with h5py.File(path, "r+") as f:
        f["X/indices"][:] = U.indices
        f["X/data"][:] = U.data
    want = driver_run(tmp_path, path, 4, "--format", "sparse")
    res = knmf.factorize(U, 4, n_replicates=3, seed=14, batch=2, dtype="float64",
                         format="sparse")
    assert res.input_bytes_copied == 0
    assert_same(res, want)
    sorted_ = knmf.factorize(X, 4, n_replicates=3, seed=14, batch=2, dtype="float64",
                             format="sparse")
    assert np.allclose(res.spectra, sorted_.spectra, rtol=1e-9, atol=1e-12)


def read_h5ad_x(path):
    with h5py.File(path, "r") as f:
        g = f["X"]
        X = sp.csr_matrix((g["data"][:], g["indices"][:], g["indptr"][:]),
                          shape=tuple(int(v) for v in g.attrs["shape"]))
        index = lambda grp: [s.decode() for s in f[grp][f[grp].attrs["_index"]][:]]  # noqa: E731
        return X, index("obs"), index("var")


def test_prepare_equals_the_driver_and_feeds_factorize(sim, tmp_path):
    h5ad, _ = sim
    counts, obs, var = read_h5ad_x(h5ad)
    run_driver("prepare", "-c", h5ad, "--output-dir", tmp_path, "--name", "run", "-k", 3,
               "-n", 2, "--numgenes", 100, "--seed", 14)
    tmp = tmp_path / "run" / "cnmf_tmp"
    p = knmf.prepare(counts, 100, obs_names=obs, var_names=var)
    norm, _, names = read_h5ad_x(tmp / "run.norm_counts.h5ad")
    for a in ("data", "indices", "indptr"):
        assert np.array_equal(getattr(p.norm_counts, a), getattr(norm, a)), a
    assert p.gene_names == names
    assert p.gene_names == (tmp_path / "run" / "run.overdispersed_genes.txt").read_text().split()
    tpm, _, _ = read_h5ad_x(tmp / "run.tpm.h5ad")
    for a in ("data", "indices", "indptr"):
        assert np.array_equal(getattr(p.tpm, a), getattr(tpm, a)), a
    stats = np.load(tmp / "run.tpm_stats.df.npz", allow_pickle=True)["data"]
    assert np.array_equal(stats[:, 0], p.stats["mean"])
    assert np.array_equal(stats[:, 1], np.sqrt(p.stats["var"]))
    # the same counts as numpy (int, C and Fortran order) and as an AnnData: the same result
    dense = counts.toarray().astype(np.int64)
    for X in (dense, np.asfortranarray(dense), counts.tocsc()):
        q = knmf.prepare(X, 100)
        assert np.array_equal(q.norm_counts.data, p.norm_counts.data)
        assert np.array_equal(q.norm_counts.indices, p.norm_counts.indices)
    ad = anndata.AnnData(X=counts)
    ad.obs_names, ad.var_names = obs, var
    q = knmf.prepare(ad, 100)
    assert q.gene_names == p.gene_names and np.array_equal(q.norm_counts.data, p.norm_counts.data)
    # then the driver's factorize of that run (cNMF mode) and knmf.factorize of p.norm_counts
    run_driver("factorize", "--output-dir", tmp_path, "--name", "run", "--batch", 2, "--quiet")
    seeds = knmf.cnmf_seeds(14, 2, [3])[3]
    res = knmf.factorize(p.norm_counts, 3, seeds=seeds, batch=2, save_usages=False)
    for it in range(2):
        want = np.load(tmp / f"run.spectra.k_3.iter_{it}.df.npz", allow_pickle=True)["data"]
        assert np.array_equal(res.spectra[it], want), it


def test_consensus_k_selection_and_tl_cnmf_equal_the_driver(sim, tmp_path):
    """The driver's pipeline on a run folder (prepare, factorize, k-selection with the
    cross-validation, consensus of the k it chooses) against knmf.tl.cnmf on the same counts
    as an AnnData, and against the module's steps one by one: every number bit for bit."""
    h5ad, _ = sim
    counts, obs, var = read_h5ad_x(h5ad)
    run_driver("prepare", "-c", h5ad, "--output-dir", tmp_path, "--name", "run", "-k", 2, 3, 4,
               "-n", 5, "--numgenes", 100, "--seed", 14)
    run_driver("factorize", "--output-dir", tmp_path, "--name", "run", "--batch", 2, "--quiet")
    out = subprocess.run([DRIVER, "k-selection", "--output-dir", tmp_path, "--name", "run",
                          "--cross-validate"], check=True, capture_output=True, text=True)
    chosen = int(out.stdout.split("cross-validation chooses k = ")[1].split()[0])
    run_driver("consensus", "--output-dir", tmp_path, "--name", "run", "-k", chosen,
               "--local-density-threshold", 0.5)
    d = tmp_path / "run"
    load = lambda f: np.load(d / "cnmf_tmp" / f, allow_pickle=True)["data"]  # noqa: E731

    ad = anndata.AnnData(X=counts)
    ad.obs_names, ad.var_names = obs, var
    knmf.tl.cnmf(ad, [2, 3, 4], n_iter=5, seed=14, numgenes=100, batch=2)
    u = ad.uns["cnmf"]
    assert u["k"] == chosen and u["k_chosen_by"] == "cross-validation"
    stats = np.load(d / "run.k_selection_stats.df.npz", allow_pickle=True)
    for j, name in enumerate(stats["columns"]):
        if str(name) in u["k_selection"]:
            assert np.array_equal(stats["data"][:, j].astype(float),
                                  u["k_selection"][str(name)].astype(float)), name
    tag = f"k_{chosen}.dt_0_5"
    assert np.array_equal(ad.obsm["X_cnmf"], load(f"run.usages.{tag}.consensus.df.npz"))
    spectra = load(f"run.spectra.{tag}.consensus.df.npz")
    genes = [var.index(gname) for gname in u["genes"]]
    assert np.array_equal(ad.varm["cnmf_spectra"][genes].T, spectra)
    others = np.setdiff1d(np.arange(len(var)), genes)
    assert not ad.varm["cnmf_spectra"][others].any()  # zero outside the genes used
    assert np.array_equal(u["gene_spectra_score"], load(f"run.gene_spectra_score.{tag}.df.npz"))
    assert np.array_equal(u["gene_spectra_tpm"], load(f"run.gene_spectra_tpm.{tag}.df.npz"))
    # every rule's choice as the driver prints it (the other two beside the chosen one)
    others = dict(re.findall(r"--cv-rule (\w+): k = (\d+)", out.stdout))
    assert sorted(others) == ["1se", "min"], out.stdout
    prepared = knmf.prepare(ad, 100)
    runs = {k: knmf.factorize(prepared.norm_counts, k, seeds=knmf.cnmf_seeds(14, 5, [2, 3, 4])[k],
                              batch=2, save_usages=False) for k in (2, 3, 4)}
    for rule, k in [("3se", chosen)] + [(r, int(v)) for r, v in others.items()]:
        assert knmf.k_selection(prepared, runs, cross_validate=True, cv_rule=rule).cv_choice == k, rule
    with pytest.raises(ValueError, match="cv_rule '2se'"):
        knmf.k_selection(prepared, runs, cross_validate=True, cv_rule="2se")
    # the steps one by one: consensus of the chosen k at another threshold (2: keep all)
    run_driver("consensus", "--output-dir", tmp_path, "--name", "run", "-k", chosen,
               "--local-density-threshold", 2)
    p = knmf.prepare(ad, 100)
    res = knmf.factorize(p.norm_counts, chosen, seeds=knmf.cnmf_seeds(14, 5, [2, 3, 4])[chosen],
                         batch=2, save_usages=False)
    c = knmf.consensus(p, res, density_threshold=2)
    tag = f"k_{chosen}.dt_2_0"
    assert np.array_equal(c.spectra, load(f"run.spectra.{tag}.consensus.df.npz"))
    assert np.array_equal(c.usages, load(f"run.usages.{tag}.consensus.df.npz"))
    assert np.array_equal(c.starcat, load(f"run.starcat_spectra.{tag}.df.npz"))


def test_prepare_with_a_given_tpm_equals_the_driver(sim, tmp_path):
    """tpm= is the driver's --tpm: a TPM given instead of the one computed from the counts
    (here the computed one halved, so that using it shows in the statistics)."""
    h5ad, _ = sim
    counts, obs, var = read_h5ad_x(h5ad)
    own = knmf.prepare(counts, 100, obs_names=obs, var_names=var)
    half = own.tpm.multiply(np.float32(0.5)).tocsr()
    given = anndata.AnnData(X=half)
    given.obs_names, given.var_names = obs, var
    given.write_h5ad(tmp_path / "half_tpm.h5ad")
    run_driver("prepare", "-c", h5ad, "--tpm", tmp_path / "half_tpm.h5ad", "--output-dir",
               tmp_path, "--name", "run", "-k", 3, "-n", 2, "--numgenes", 100, "--seed", 14)
    tmp = tmp_path / "run" / "cnmf_tmp"
    for t in (given, half, half.toarray()):
        p = knmf.prepare(counts, 100, obs_names=obs, var_names=var, tpm=t)
        stats = np.load(tmp / "run.tpm_stats.df.npz", allow_pickle=True)["data"]
        assert np.array_equal(stats[:, 0], p.stats["mean"])
        assert np.array_equal(stats[:, 1], np.sqrt(p.stats["var"]))
        tpm, _, _ = read_h5ad_x(tmp / "run.tpm.h5ad")
        assert np.array_equal(p.tpm.toarray(), tpm.toarray())
        norm, _, names = read_h5ad_x(tmp / "run.norm_counts.h5ad")
        assert p.gene_names == names and np.array_equal(p.norm_counts.data, norm.data)
    assert np.allclose(p.stats["mean"], 0.5 * own.stats["mean"], rtol=1e-6)
    with pytest.raises(ValueError, match="TPM matrix is"):
        knmf.prepare(counts, 100, tpm=half[:-1])
    swapped = given.copy()
    swapped.var_names = list(reversed(var))
    with pytest.raises(ValueError, match="the genes must be the same"):
        knmf.prepare(counts, 100, obs_names=obs, var_names=var, tpm=swapped)


def test_prepare_refuses_as_the_driver():
    rng = np.random.default_rng(4)
    counts = rng.poisson(1.0, (50, 40)).astype(np.float32)
    with pytest.raises(ValueError, match="larger than"):
        knmf.prepare(counts, 45)
    neg = counts.copy()
    neg[3, 3] = -2
    with pytest.raises(ValueError, match="negative"):
        knmf.prepare(neg, 10)
    zero_row = counts.copy()
    zero_row[7] = 0
    with pytest.raises(ValueError, match="zero counts"):
        knmf.prepare(zero_row, 10)
    with pytest.raises(ValueError, match="numgenes"):
        knmf.prepare(counts, 0)


def test_bad_input_raises_value_error_with_the_driver_message():
    rng = np.random.default_rng(1)
    good = rng.random((20, 10))
    neg = good.copy()
    neg[3, 4] = -1.0
    nan = good.copy()
    nan[2, 2] = np.nan
    inf = good.copy()
    inf[1, 1] = np.inf
    cases = [
        (lambda: knmf.factorize(neg, 2), "negative"),
        (lambda: knmf.factorize(nan, 2), "NaN"),
        (lambda: knmf.factorize(inf, 2), "inf"),
        (lambda: knmf.factorize(sp.csr_matrix(neg), 2), "negative"),
        (lambda: knmf.factorize(np.zeros((0, 10)), 2), "empty"),
        (lambda: knmf.factorize(good[0], 2), "dimension"),
        (lambda: knmf.factorize(good, 0), "at least 1"),
        (lambda: knmf.factorize(good, 11), "exceeds"),
        (lambda: knmf.factorize(good, 2, solver="als"), "solver"),
        (lambda: knmf.factorize(good, 2, tol=-1), "tol"),
        (lambda: knmf.factorize(good, 2, beta_loss="hinge"), "beta"),
        (lambda: knmf.factorize(good, 2, frobnicate=3), "unknown option 'frobnicate'"),
        (lambda: knmf.factorize(good, 2, format="blocked"), "format"),
        (lambda: knmf.factorize(good, 2, dtype="float16"), "dtype"),
        (lambda: knmf.cnmf_seeds(1, 0, [3]), "n_iter"),
        (lambda: knmf.factorize(np.where(good > 0.5, 3e38, 1.0).astype(np.float32), 2),
         "float32"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert words.lower() in msg.lower(), msg
        assert "\n" not in msg.strip(), msg  # one line


def test_replicates_that_reach_nan_or_inf_raise():
    X = np.random.default_rng(3).random((30, 20)) * 1e154  # ||X||^2 overflows double
    with pytest.raises(knmf.FactorizationError) as e:
        knmf.factorize(X, 2, n_replicates=2, max_iter=30)
    assert "2 of 2 replicate(s)" in str(e.value)
    assert e.value.result.status == ["non_finite", "non_finite"]


def test_set_num_threads_after_start_raises():
    knmf.factorize(np.ones((6, 5)), 2, max_iter=2)
    n = knmf._knmf.concurrency()
    knmf.set_num_threads(n)  # the same: fine
    with pytest.raises(RuntimeError, match="too late"):
        knmf.set_num_threads(n + 1)


def test_ctrl_c_stops_a_run_between_iterations():
    rng = np.random.default_rng(2)
    X = rng.random((300, 200))
    fired = []

    def interrupt():
        time.sleep(0.5)
        fired.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        knmf.factorize(X, 8, n_replicates=4, tol=0, max_iter=10**7)
    t.join()
    assert fired and time.monotonic() - fired[0] < 5.0, "not stopped within an iteration"
    # the module still works afterwards
    res = knmf.factorize(X, 2, max_iter=5)
    assert res.n_iter[0] == 5 and time.monotonic() - t0 < 60


def run_script(body, timeout=120):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_fork_after_start_raises_in_the_child_and_never_hangs():
    out = run_script("""
        import os, sys
        import numpy as np
        import knmf
        knmf.factorize(np.ones((8, 6)), 2, max_iter=3)   # threads started
        pid = os.fork()
        if pid == 0:
            try:
                knmf.factorize(np.ones((8, 6)), 2, max_iter=3)
            except RuntimeError as e:
                os._exit(0 if "forked" in str(e) else 2)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print(knmf.factorize(np.ones((8, 6)), 2, max_iter=3).n_iter[0])
    """, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["child", "0", "3"], out.stdout


def test_import_use_exit_and_use_after_finalize():
    out = run_script("""
        import numpy as np
        import knmf
        print(knmf._knmf.is_initialized())
        r = knmf.factorize(np.ones((8, 6)) + np.eye(8, 6), 2, max_iter=4)
        print(knmf._knmf.is_initialized(), r.n_iter[0])
        knmf._knmf._finalize()
        try:
            knmf.factorize(np.ones((8, 6)), 2)
        except RuntimeError as e:
            print("raised", "finalized" in str(e))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "4", "raised", "True"], out.stdout
    # a plain exit after use: Kokkos finalized by knmf's atexit hook, no error, exit 0
    out = run_script("""
        import numpy as np, knmf
        knmf.factorize(np.ones((8, 6)), 2, max_iter=2)
    """)
    assert out.returncode == 0 and "error" not in out.stderr.lower(), out.stderr


def test_progress_lines_without_tqdm(capsys):
    knmf.factorize(np.ones((10, 8)) + np.eye(10, 8), 2, n_replicates=3, max_iter=5, progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err or "100%" in err, err  # the plain line, or tqdm's bar when installed
    seen = []
    knmf.factorize(np.ones((10, 8)) + np.eye(10, 8), 2, n_replicates=3, max_iter=5,
                   progress=seen.append)
    assert seen and seen[-1]["done"] == 3 and seen[-1]["total"] == 3
