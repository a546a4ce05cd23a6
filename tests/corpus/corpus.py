#!/usr/bin/env python3
"""knmf's malformed-input corpus (issue 15): every bad input is built here from a small valid
base, the real `knmf` driver is run on it, and the outcome is checked (corpus_lib.check_case:
the exit status, one error line naming the file / option / value, nothing left behind).

    corpus.py --knmf build/drivers/knmf --work DIR --family truncation [--family ...] [-v]
    corpus.py --knmf build/drivers/knmf --work DIR --all
    corpus.py --knmf build/drivers/knmf --work DIR --list --min-cases 100

One function per family (`family_<name>`, registered by @family) yields its cases; ctest runs
one family per test (corpus_<name>, tests/corpus/CMakeLists.txt). Each family also yields
control cases (count=False): the valid base through the same command, which must succeed, so
a refusal is caused by the damage and not by a broken base. See README.md.
"""
import os
import shutil
import subprocess
import struct
import sys
import time
import zlib
import argparse
import pickle

import numpy as np
import h5py

import corpus_lib as L
from corpus_lib import (Case, Ctx, Member, Special, build_zip, base_x, csr_parts, write_h5ad,
                        npy_bytes, npy_with_pickle, deflate, job_rows, job_table_members,
                        make_cnmf_run, spectra_path, cnmf_factorize_argv, native_argv,
                        truncate_copy, flip_bit, results_complete, YAML_BASE, N_CELLS, N_GENES)

FAMILIES = {}


def family(fn):
    FAMILIES[fn.__name__.replace("family_", "")] = fn
    return fn


def h5ad_case(ctx, name, needles=(), argv_more=(), **kw):
    """A native factorize case on an h5ad written with write_h5ad(**kw)."""
    d = ctx.dir(name)
    inp = os.path.join(d, "x.h5ad")
    write_h5ad(inp, **kw)
    return Case(name, native_argv(inp, "r.h5", *argv_more), d, needles=[inp, *needles])


def control_native(ctx, name="control_base", **kw):
    d = ctx.dir(name)
    inp = os.path.join(d, "x.h5ad")
    write_h5ad(inp, **kw)
    return Case(name, native_argv(inp), d, expect="ok", outputs=["r.h5"],
                verify=results_complete(os.path.join(d, "r.h5")), count=False)


# ---------------------------------------------------------------------------------------------
@family
def family_truncation(ctx):
    """Files cut short: h5ad, results .h5, the job table .df.npz, a spectra .df.npz, and valid
    ZIPs whose .npy member is cut (magic, header, data, pickle)."""
    yield control_native(ctx)
    d0 = ctx.dir("_h5ad")
    base = os.path.join(d0, "x.h5ad")
    write_h5ad(base)
    n = os.path.getsize(base)
    for cut in sorted({0, 1, 7, 8, 64, 512, 1024, 2048, n // 3, n // 2, 2 * n // 3, n - 512, n - 8, n - 1}):
        d = ctx.dir(f"h5ad_cut_{cut}")
        inp = os.path.join(d, "x.h5ad")
        truncate_copy(base, inp, cut)
        yield Case(f"h5ad_cut_{cut}", native_argv(inp), d, needles=[inp])

    n = os.path.getsize(os.path.join(ctx.base("results"), "r.h5"))
    resume = ["-k", "2", "3", "--n-iter", "5", "--max-iter", "30", "--quiet"]
    d = ctx.dir("control_results_resume")
    x, r = ctx.copy_results(d)
    # x.h5ad as the base recorded it (relative): only the truncation differs
    yield Case("control_results_resume", ["factorize", "x.h5ad", *resume, "-o", r], d, expect="ok", outputs=["r.h5"],
               verify=results_complete(r), count=False)
    for cut in (0, 100, 2048, n // 2, n - 1):
        d = ctx.dir(f"results_resume_cut_{cut}")
        x, r = ctx.copy_results(d)
        truncate_copy(r, r, cut)
        yield Case(f"results_resume_cut_{cut}", ["factorize", "x.h5ad", *resume, "-o", r], d, needles=[r])
    for cut in (0, 4096, n // 2, n - 1):
        d = ctx.dir(f"results_consensus_cut_{cut}")
        x, r = ctx.copy_results(d)
        truncate_copy(r, r, cut)
        yield Case(f"results_consensus_cut_{cut}", ["consensus", "--results", r, "--counts", x, "-k", "2"], d,
                   needles=[r])
    for cut in (8, n // 3, n - 100):
        d = ctx.dir(f"results_compare_cut_{cut}")
        x, r = ctx.copy_results(d)
        good = os.path.join(d, "good.h5")
        shutil.copy(r, good)
        truncate_copy(r, r, cut)
        yield Case(f"results_compare_cut_{cut}", ["compare", r, good], d, needles=[r])

    jt = build_zip(job_table_members())
    d = ctx.dir("control_jobs")
    make_cnmf_run(d, jobs=jt)
    yield Case("control_jobs", cnmf_factorize_argv(d), d, expect="ok", outputs=["run/cnmf_tmp"], count=False)
    for cut in (0, 4, 30, 60, len(jt) // 2, len(jt) - 22, len(jt) - 10, len(jt) - 1):
        d = ctx.dir(f"jobs_npz_cut_{cut}")
        p = make_cnmf_run(d, jobs=jt[:cut])
        yield Case(f"jobs_npz_cut_{cut}", cnmf_factorize_argv(d), d, needles=[p["jobs"]])

    d = ctx.dir("control_spectra")
    ctx.copy_spectra_run(d)
    yield Case("control_spectra", ["consensus", "--output-dir", d, "--name", "run", "-k", "2"], d,
               expect="ok", outputs=["run"], count=False)
    sp_n = os.path.getsize(spectra_path({"tmp": os.path.join(ctx.base("spectra"), "run", "cnmf_tmp")}, 2, 1))
    for cut in (0, sp_n // 2, sp_n - 1):
        d = ctx.dir(f"spectra_npz_cut_{cut}")
        p = ctx.copy_spectra_run(d)
        sp = spectra_path(p, 2, 1)
        truncate_copy(sp, sp, cut)
        yield Case(f"spectra_npz_cut_{cut}", ["consensus", "--output-dir", d, "--name", "run", "-k", "2"], d,
                   needles=[sp])

    # a valid ZIP (right sizes and CRC) holding a cut .npy: the npy reader must notice
    for member, cuts in (("data.npy", (3, 8, 20, 100, 138, -1)), ("columns.npy", (130, -10, -1))):
        for cut in cuts:
            ms = job_table_members()
            m = next(m for m in ms if m.name == member)
            m.data = m.data[:cut]
            nm = f"npy_{member.split('.')[0]}_cut_{cut if cut > 0 else 'end' + str(cut)}"
            d = ctx.dir(nm)
            p = make_cnmf_run(d, jobs=ms)
            yield Case(nm, cnmf_factorize_argv(d), d, needles=[p["jobs"]])


# ---------------------------------------------------------------------------------------------
@family
def family_shape(ctx):
    """Shapes that disagree: obs/var names vs X, the shape attribute vs indptr / indices,
    dense X of the wrong rank, missing parts of X, obs or var."""
    yield control_native(ctx)
    yield control_native(ctx, "control_csc", fmt="csc")
    yield control_native(ctx, "control_dense", fmt="dense")
    cells = [f"cell{i}" for i in range(N_CELLS)]
    genes = [f"gene{j}" for j in range(N_GENES)]
    yield h5ad_case(ctx, "obs_short", obs=cells[:-1])
    yield h5ad_case(ctx, "obs_long", obs=cells + ["extra"])
    yield h5ad_case(ctx, "var_short", var=genes[:-1])
    yield h5ad_case(ctx, "var_long", var=genes + ["extra"])
    yield h5ad_case(ctx, "dense_var_long", fmt="dense", var=genes + ["extra"])
    yield h5ad_case(ctx, "dense_obs_short", fmt="dense", obs=cells[:-1])
    yield h5ad_case(ctx, "csc_var_short", fmt="csc", var=genes[:-1])
    yield h5ad_case(ctx, "shape_more_rows", shape=(N_CELLS + 1, N_GENES), obs=cells + ["extra"])
    yield h5ad_case(ctx, "shape_fewer_rows", shape=(N_CELLS - 1, N_GENES), obs=cells[:-1])
    yield h5ad_case(ctx, "shape_fewer_cols", shape=(N_CELLS, N_GENES - 1), var=genes[:-1])
    yield h5ad_case(ctx, "shape_more_cols", shape=(N_CELLS, N_GENES + 1))
    yield h5ad_case(ctx, "shape_rank3", shape=(N_CELLS, N_GENES, 1))
    yield h5ad_case(ctx, "shape_rank1", shape=(N_CELLS,))
    yield h5ad_case(ctx, "shape_negative", ["[-30, 12]", "negative"], shape=(-N_CELLS, N_GENES))
    yield h5ad_case(ctx, "csc_shape_fewer_rows", fmt="csc", shape=(N_CELLS - 1, N_GENES), obs=cells[:-1])
    d, i, p = csr_parts(base_x())
    yield h5ad_case(ctx, "data_longer_than_indices", data=np.append(d, np.float32(1)))
    yield h5ad_case(ctx, "indices_longer_than_data", indices=np.append(i, np.int32(0)))
    yield h5ad_case(ctx, "data_2d", data=d.reshape(1, -1))
    yield h5ad_case(ctx, "zero_cells", x=np.zeros((0, N_GENES)), obs=[])
    yield h5ad_case(ctx, "zero_genes", x=np.zeros((N_CELLS, 0)), var=[])
    yield h5ad_case(ctx, "dense_rank1", fmt="dense", dense=base_x().astype(np.float32).ravel())
    yield h5ad_case(ctx, "dense_rank3", fmt="dense", dense=base_x().astype(np.float32)[:, :, None])
    yield h5ad_case(ctx, "dense_scalar", fmt="dense", dense=np.float32(1))
    for part in ("data", "indices", "indptr"):
        yield h5ad_case(ctx, f"missing_{part}", drop=(part,))
    yield h5ad_case(ctx, "encoding_coo", encoding="coo_matrix")
    yield h5ad_case(ctx, "no_encoding", x_attrs={"encoding-type": None})
    yield h5ad_case(ctx, "no_shape_attr", x_attrs={"shape": None})
    for grp in ("obs", "var", "X"):
        d = ctx.dir(f"no_{grp}")
        inp = os.path.join(d, "x.h5ad")
        write_h5ad(inp)
        with h5py.File(inp, "a") as f:
            del f[grp]
        yield Case(f"no_{grp}", native_argv(inp), d, needles=[inp])
    d = ctx.dir("var_index_missing")
    inp = os.path.join(d, "x.h5ad")
    write_h5ad(inp)
    with h5py.File(inp, "a") as f:
        del f["var/_index"]
    yield Case("var_index_missing", native_argv(inp), d, needles=[inp])


# ---------------------------------------------------------------------------------------------
@family
def family_indptr(ctx):
    """Row pointers that are not a valid CSR/CSC structure."""
    yield control_native(ctx)
    d, i, p = csr_parts(base_x())
    nnz = len(d)

    def mod(**changes):
        q = p.copy()
        for k, v in changes.items():
            q[int(k.lstrip("_"))] = v
        return q

    swapped = p.copy()
    swapped[10], swapped[11] = swapped[11], swapped[10]
    yield h5ad_case(ctx, "non_monotone_middle", ["indptr"], indptr=swapped)
    dec = p.copy()
    dec[-2] = nnz + 1
    dec[-1] = nnz
    yield h5ad_case(ctx, "decreasing_at_end", ["indptr"], indptr=dec)
    yield h5ad_case(ctx, "first_not_zero", ["indptr[0]"], indptr=mod(_0=1))
    yield h5ad_case(ctx, "last_beyond_nnz", ["indptr"], indptr=mod(**{f"_{N_CELLS}": nnz + 5}))
    yield h5ad_case(ctx, "last_below_nnz", ["indptr"], indptr=mod(**{f"_{N_CELLS}": nnz - 1}))
    yield h5ad_case(ctx, "negative_entry", ["indptr"], indptr=mod(_3=-1))
    yield h5ad_case(ctx, "huge_entry", ["indptr"], indptr=mod(_5=2 ** 40))
    yield h5ad_case(ctx, "int64_min_entry", ["indptr"], indptr=mod(_5=-2 ** 63))
    yield h5ad_case(ctx, "int32_max_entry", ["indptr"], indptr=p.astype(np.int32) * 0 + np.int32(2 ** 31 - 1))
    yield h5ad_case(ctx, "one_short", ["indptr"], indptr=p[:-1])
    yield h5ad_case(ctx, "one_long", ["indptr"], indptr=np.append(p, p[-1]))
    yield h5ad_case(ctx, "empty", ["indptr"], indptr=np.zeros(0, np.int64))
    yield h5ad_case(ctx, "float_dtype", ["indptr"], indptr=p.astype(np.float64))
    yield h5ad_case(ctx, "two_d", ["indptr"], indptr=p.reshape(1, -1))
    cd, ci, cp = csr_parts(base_x().T)
    cq = cp.copy()
    cq[4], cq[5] = cq[5], cq[4]
    yield h5ad_case(ctx, "csc_non_monotone", ["indptr"], fmt="csc", indptr=cq)
    yield h5ad_case(ctx, "uint64_huge", ["indptr"], indptr=mod(_7=0).astype(np.uint64) + np.uint64(2 ** 63))


# ---------------------------------------------------------------------------------------------
@family
def family_indices(ctx):
    """Column (CSR) or row (CSC) indices out of range, negative, of a non-integer type; and the
    decisions on unsorted and duplicated indices (see README.md)."""
    yield control_native(ctx)
    d, i, p = csr_parts(base_x())

    def at(pos, v, dtype=np.int32):
        q = i.astype(dtype).copy()
        q[pos] = v
        return q

    yield h5ad_case(ctx, "equal_to_ncols", ["indices", str(N_GENES)], indices=at(7, N_GENES))
    yield h5ad_case(ctx, "last_equal_to_ncols", ["indices", str(N_GENES)], indices=at(len(i) - 1, N_GENES))
    yield h5ad_case(ctx, "int32_max", ["indices", str(2 ** 31 - 1)], indices=at(3, 2 ** 31 - 1))
    yield h5ad_case(ctx, "negative", ["indices", "-1"], indices=at(9, -1))
    yield h5ad_case(ctx, "int64_min", ["indices"], indices=at(9, -2 ** 63, np.int64))
    yield h5ad_case(ctx, "uint64_huge", ["indices"], indices=at(9, 2 ** 63, np.uint64))
    yield h5ad_case(ctx, "float_dtype", ["indices"], indices=i.astype(np.float64))
    yield h5ad_case(ctx, "float_fraction", ["indices"], indices=i.astype(np.float64) + 0.5)
    cd, ci, cp = csr_parts(base_x().T)
    cq = ci.copy()
    cq[5] = N_CELLS
    yield h5ad_case(ctx, "csc_row_out_of_range", ["indices", str(N_CELLS)], fmt="csc", indices=cq)
    cq = ci.copy()
    cq[5] = -3
    yield h5ad_case(ctx, "csc_row_negative", ["indices", "-3"], fmt="csc", indices=cq)
    # a column repeated in a row: scipy's meaning is the sum of the entries (sum_duplicates);
    # knmf's dense and sparse paths must both give that, never keep one of them
    yield DuplicateIndices(ctx)
    # unsorted (but distinct) columns in a row: scipy's has_sorted_indices=False; valid input,
    # must give the same factorization as the sorted file (checked with knmf compare)
    yield UnsortedIndices(ctx)


def _same_results(d, pairs):
    """Run each (h5ad, results, extra args) and `knmf compare` the results with the first."""
    probs = []
    for inp, out, more in pairs:
        rc, _, err, _, _ = L.run_process([L.KNMF] + native_argv(inp, out, *more), d, L.knmf_env(), 60)
        if rc != 0:
            probs.append(f"{inp} {' '.join(more)}: exit {rc}: {err.strip()[:300]}")
    for _, out, more in pairs[1:] if not probs else []:
        rc, o, err, _, _ = L.run_process([L.KNMF, "compare", pairs[0][1], out, "--rtol", "1e-12", "--min-cos",
                                          "0.999999999999"], d, L.knmf_env(), 60)
        if rc != 0:
            probs.append(f"knmf compare {pairs[0][1]} {out} --rtol 1e-12: exit {rc}: {(o + err)[-300:]}")
    return probs


class DuplicateIndices(Special):
    """Rows listing one column twice (values 1 and 2 at a column whose value was v): the
    results equal those of the file holding v + 3 once, with X dense and sparse on the device."""
    name = "duplicate_in_row_is_summed"

    def __init__(self, ctx):
        self.d = ctx.dir(self.name)
        x = base_x()
        d, i, p = csr_parts(x)
        summed = x.copy()
        for r in (2, 9, 20):  # each row's first column repeated: entries 1 and 2 more
            summed[r, i[p[r]]] += 3
        rows = []
        for r in range(N_CELLS):
            cols, vals = list(i[p[r]:p[r + 1]]), list(d[p[r]:p[r + 1]])
            if r in (2, 9, 20):
                cols = [cols[0]] + cols + [cols[0]]
                vals = [1.0] + vals[:1] + vals[1:] + [2.0]
            rows.append((cols, vals))
        data = np.array([v for c, vs in rows for v in vs], np.float32)
        idx = np.array([c for cs, v in rows for c in cs], np.int32)
        ptr = np.cumsum([0] + [len(c) for c, _ in rows]).astype(np.int64)
        write_h5ad(os.path.join(self.d, "dup.h5ad"), data=data, indices=idx, indptr=ptr)
        write_h5ad(os.path.join(self.d, "summed.h5ad"), x=summed)

    def run(self):
        t0 = time.monotonic()
        probs = _same_results(self.d, [("summed.h5ad", "summed.h5", ()),
                                       ("dup.h5ad", "dup_sparse.h5", ("--format", "sparse")),
                                       ("dup.h5ad", "dup_dense.h5", ("--format", "dense"))])
        return probs, [], time.monotonic() - t0


class UnsortedIndices(Special):
    """A CSR X whose rows list their columns in reverse order: accepted, and the results equal
    those of the sorted file up to summation order (`knmf compare --rtol 1e-12`)."""
    name = "unsorted_rows_same_result"

    def __init__(self, ctx):
        self.d = ctx.dir(self.name)
        x = base_x()
        d, i, p = csr_parts(x)
        for r in range(N_CELLS):
            d[p[r]:p[r + 1]] = d[p[r]:p[r + 1]][::-1].copy()
            i[p[r]:p[r + 1]] = i[p[r]:p[r + 1]][::-1].copy()
        write_h5ad(os.path.join(self.d, "sorted.h5ad"))
        write_h5ad(os.path.join(self.d, "unsorted.h5ad"), data=d, indices=i)

    def run(self):
        t0 = time.monotonic()
        probs = _same_results(self.d, [("sorted.h5ad", "sorted.h5", ()),
                                       ("unsorted.h5ad", "unsorted_sparse.h5", ("--format", "sparse")),
                                       ("unsorted.h5ad", "unsorted_dense.h5", ("--format", "dense"))])
        return probs, [], time.monotonic() - t0


# ---------------------------------------------------------------------------------------------
@family
def family_dtype(ctx):
    """X, indices and names of types knmf cannot take as counts."""
    yield control_native(ctx)
    yield control_native(ctx, "control_uint8", data=csr_parts(base_x())[0].astype(np.uint8))
    yield control_native(ctx, "control_int64_dense", fmt="dense", dense=base_x().astype(np.int64))
    d, i, p = csr_parts(base_x())
    yield h5ad_case(ctx, "data_fixed_strings", ["/X/data"], data=d.astype("S4"))
    yield h5ad_case(ctx, "data_vlen_strings", ["/X/data"], data=np.array([str(v) for v in d], dtype=h5py.string_dtype()))
    yield h5ad_case(ctx, "data_bool", ["/X/data"], data=d > 1)
    yield h5ad_case(ctx, "data_complex64", ["/X/data"], data=d.astype(np.complex64))
    yield h5ad_case(ctx, "data_complex128", ["/X/data"], data=d.astype(np.complex128) + 1j)
    yield h5ad_case(ctx, "data_float16", ["/X/data", "float16"], data=d.astype(np.float16))
    yield h5ad_case(ctx, "data_compound", ["/X/data"],
                    data=np.array([(v, v) for v in d], dtype=[("a", "<f4"), ("b", "<f4")]))
    big = d.astype(np.int64) * 60  # counts up to ~300: int8 wraps them negative
    yield h5ad_case(ctx, "data_int8_wrapped", ["/X/data", "-"], data=big.astype(np.int8))
    yield h5ad_case(ctx, "data_longdouble", ["/X/data"], data=d.astype(np.longdouble))
    yield h5ad_case(ctx, "dense_strings", ["/X"], fmt="dense", dense=base_x().astype("S4"))
    yield h5ad_case(ctx, "dense_bool", ["/X"], fmt="dense", dense=base_x() > 0)
    yield h5ad_case(ctx, "dense_complex", ["/X"], fmt="dense", dense=base_x().astype(np.complex128))
    yield h5ad_case(ctx, "dense_float16", ["/X", "float16"], fmt="dense", dense=base_x().astype(np.float16))
    yield h5ad_case(ctx, "dense_int8_wrapped", ["/X", "-"], fmt="dense", dense=(base_x() * 60).astype(np.int64).astype(np.int8))
    yield h5ad_case(ctx, "indices_strings", ["/X/indices"], indices=i.astype("S4"))
    yield h5ad_case(ctx, "indices_bool", ["/X/indices"], indices=i > 3)
    yield h5ad_case(ctx, "indptr_strings", ["/X/indptr"], indptr=p.astype("S8"))
    d2 = ctx.dir("var_names_integers")
    inp = os.path.join(d2, "x.h5ad")
    write_h5ad(inp)
    with h5py.File(inp, "a") as f:
        del f["var/_index"]
        f["var"].create_dataset("_index", data=np.arange(N_GENES))
    yield Case("var_names_integers", native_argv(inp), d2, needles=[inp, "var"])
    d2 = ctx.dir("var_names_not_utf8")
    inp = os.path.join(d2, "x.h5ad")
    write_h5ad(inp)
    with h5py.File(inp, "a") as f:
        del f["var/_index"]
        names = [f"gene{j}".encode() for j in range(N_GENES)]
        names[4] = b"gen\xff\xfe"
        f["var"].create_dataset("_index", data=np.array(names, dtype=h5py.string_dtype("utf-8", None)))
    yield Case("var_names_not_utf8", native_argv(inp), d2, needles=[inp, "UTF-8"])


# ---------------------------------------------------------------------------------------------
@family
def family_values(ctx):
    """NaN, infinities and negative values in X, dense and sparse, float and double."""
    yield control_native(ctx)
    zero = base_x().copy()
    zero[0, 0] = -0.0
    yield control_native(ctx, "control_negative_zero", fmt="dense", dense=zero.astype(np.float32))
    d, i, p = csr_parts(base_x())
    for name, v in (("nan", np.nan), ("inf", np.inf), ("neg_inf", -np.inf), ("negative", -1.0),
                    ("tiny_negative", -1e-30)):
        q = d.copy()
        q[11] = v
        yield h5ad_case(ctx, f"sparse_{name}", ["/X/data"], data=q)
        if name in ("nan", "negative"):
            yield h5ad_case(ctx, f"sparse_{name}_float", ["/X/data"], argv_more=("--dtype", "float"), data=q)
            q64 = d.astype(np.float64)
            q64[-1] = v
            yield h5ad_case(ctx, f"sparse_{name}_f64_last", ["/X/data"], data=q64)
    xd = base_x().astype(np.float32)
    for name, v in (("nan", np.nan), ("inf", np.inf), ("negative", -2.0)):
        q = xd.copy()
        q[17, 5] = v
        yield h5ad_case(ctx, f"dense_{name}", ["/X", "row 17", "column 5"], fmt="dense", dense=q)
    q = xd.astype(np.float64)
    q[-1, -1] = -np.inf
    yield h5ad_case(ctx, "dense_f64_neg_inf_last", ["/X"], fmt="dense", dense=q)
    x = base_x()
    x[3, 2] = -5
    yield h5ad_case(ctx, "csc_negative", ["/X/data"], fmt="csc", x=x)
    x = base_x()
    x[3, 2] = np.nan
    yield h5ad_case(ctx, "csc_nan", ["/X/data"], fmt="csc", x=x)
    yield h5ad_case(ctx, "sparse_int_negative", ["/X/data", "-7"], data=(d.astype(np.int32) * 0 - 7))
    # an X of zeros has nothing to factorize (W = H = 0 "fits" it): none stored, all stored 0
    yield h5ad_case(ctx, "dense_all_zero", ["no nonzero value"], fmt="dense",
                    dense=np.zeros_like(xd))
    yield h5ad_case(ctx, "sparse_all_stored_zero", ["no nonzero value"], data=d * 0)
    yield h5ad_case(ctx, "sparse_none_stored", ["no nonzero value"],
                    x=np.zeros_like(base_x()))


# ---------------------------------------------------------------------------------------------
def _exploit_pickles(marker):
    """Pickles that run `touch MARKER` when Python's pickle (np.load(allow_pickle=True)) loads
    them: name -> bytes. Opcode-level payloads (protocols 0-4) and real __reduce__ objects."""
    cmd = f"touch {marker}"
    q = repr(cmd).encode()
    p = {}
    p["os_system_p0"] = b"cos\nsystem\n(S" + q + b"\ntR."
    p["posix_system_p0"] = b"cposix\nsystem\n(S" + q + b"\ntR."
    p["builtins_eval"] = (b"cbuiltins\neval\n(S" + repr(f"__import__('os').system({cmd!r})").encode() + b"\ntR.")
    p["builtins_exec"] = (b"cbuiltins\nexec\n(S" + repr(f"import os; os.system({cmd!r})").encode() + b"\ntR.")
    p["dunder_builtin_eval"] = (b"c__builtin__\neval\n(S" + repr(f"__import__('os').system({cmd!r})").encode() + b"\ntR.")
    p["subprocess_call"] = (b"csubprocess\ncall\n((S'touch'\nS" + repr(marker).encode() + b"\nltR.")
    p["inst_opcode"] = b"(S" + q + b"\nios\nsystem\n."
    p["obj_opcode"] = b"(cos\nsystem\nS" + q + b"\no."

    def su(s):
        b = s.encode()
        return b"\x8c" + bytes([len(b)]) + b

    body = su("os") + su("system") + b"\x93" + su(cmd) + b"\x85R."
    p["stack_global_p4"] = b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body
    p["importlib_chain"] = (b"cbuiltins\ngetattr\n(cimportlib\nimport_module\n(S'os'\ntRS'system'\ntR(S" + q + b"\ntR.")

    class Exploit:
        def __reduce__(self):
            return (os.system, (cmd,))

    class ExploitSub:
        def __reduce__(self):
            return (subprocess.check_call, (["touch", marker],))

    import subprocess
    # a genuine object array holding the exploit objects (what an attacker would pickle)
    p["reduce_in_object_array"] = pickle.dumps(np.array([Exploit(), "iter", "nmf_seed"], dtype=object), protocol=3)
    p["reduce_subprocess_p2"] = pickle.dumps(np.array(["n_components", ExploitSub(), "nmf_seed"], dtype=object), protocol=2)
    p["reduce_p5"] = pickle.dumps(np.array(["n_components", "iter", Exploit()], dtype=object), protocol=5)
    return p


def _odd_pickles():
    """Pickles that are hostile to the unpickler itself (no code, but crash / memory bait)."""
    p = {}
    p["deep_nesting"] = b"\x80\x02" + b"]" * 200000 + b"a" * 199999 + b"."  # lists in lists
    p["deep_nesting_within_bound"] = b"\x80\x02" + b"]" * 90000 + b"a" * 89999 + b"."
    p["deep_dicts_within_bound"] = b"\x80\x02" + b"}" * 60000 + b"(K\x01" * 0 + b"."
    p["deep_tuples"] = b"(" * 100000 + b"t" * 100000 + b"."
    p["memo_get_huge"] = b"\x80\x02j\xff\xff\xff\xff."  # LONG_BINGET 2^32-1
    p["memo_get_unset"] = b"\x80\x02h\x05."  # BINGET 5
    p["binunicode_huge"] = b"\x80\x03X\xff\xff\xff\x7fabc."  # 2 GiB string claimed
    p["binbytes8_huge"] = b"\x80\x04\x8e" + struct.pack("<Q", 2 ** 62) + b"x."
    p["frame_huge"] = b"\x80\x04\x95" + struct.pack("<Q", 2 ** 40) + b"N."
    p["ext_opcode"] = b"\x80\x02\x82\x01."
    p["persid"] = b"Pfoo\n."
    p["binpersid"] = b"\x80\x02X\x03\x00\x00\x00foo" + b"Q."
    p["no_stop"] = b"\x80\x02]q\x00"
    p["empty"] = b""
    p["stop_on_empty_stack"] = b"\x80\x02."
    p["build_on_list"] = b"\x80\x02]}b."
    p["reconstruct_wrong_class"] = (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncos\nsystem\nK\x00\x85C\x01bc"
                                    b"numpy\ndtype\nX\x02\x00\x00\x00O8\x85R\x87R.")
    p["bad_protocol"] = b"\x80\x09N."
    return p


@family
def family_pickle(ctx):
    """Malicious pickles in the object arrays of cNMF's .df.npz files (the job table's columns
    and data, a spectra file's columns): exploit payloads that would `touch` a marker file -
    each first proven live under numpy's own loader (PickleControl) - and pickles hostile to
    the unpickler itself (deep nesting, huge lengths, memo, extension, persistent ids)."""
    d = ctx.dir("control_pickled_columns")
    make_cnmf_run(d)
    yield Case("control_pickled_columns", cnmf_factorize_argv(d), d, expect="ok", outputs=["run/cnmf_tmp"], count=False)
    sp0 = spectra_path({"tmp": os.path.join(ctx.base("spectra"), "run", "cnmf_tmp")}, 2, 3)
    with np.load(sp0, allow_pickle=True) as z:
        sp_data, sp_index = z["data"], z["index"]

    def jobs_npz(member):
        def build(marker, name):
            ms = job_table_members()
            # the header's shape as the member's real one: the pickle is what gets read
            shape = (len(job_rows()), 3) if member == "data.npy" else (3,)
            next(m for m in ms if m.name == member).data = npy_with_pickle(_exploit_pickles(marker)[name], shape=shape)
            return build_zip(ms)
        return build

    def spectra_npz(marker, name):
        return build_zip([Member("data.npy", npy_bytes(sp_data)), Member("index.npy", npy_bytes(sp_index)),
                          Member("columns.npy", npy_with_pickle(_exploit_pickles(marker)[name], shape=(N_GENES,)))])

    live = PickleControl(ctx.root)
    yield live  # runs first; its builds are filled in as the cases are generated
    for name in _exploit_pickles("/x"):
        wheres = [("jobs", "columns.npy")]
        if name in ("os_system_p0", "reduce_in_object_array", "stack_global_p4", "builtins_eval"):
            wheres += [("jobs", "data.npy"), ("spectra", "columns.npy")]
        for kind, member in wheres:
            cname = f"{name}_{kind}_{member.split('.')[0]}"
            d = ctx.dir(cname)
            marker = os.path.join(d, "PWNED")
            if kind == "jobs":
                build = jobs_npz(member)
                p = make_cnmf_run(d, jobs=build(marker, name))
                target = p["jobs"]
                argv = cnmf_factorize_argv(d)
            else:
                build = spectra_npz
                p = ctx.copy_spectra_run(d)
                target = spectra_path(p, 2, 3)
                with open(target, "wb") as f:
                    f.write(build(marker, name))
                argv = ["consensus", "--output-dir", d, "--name", "run", "-k", "2"]
            live.builds.append((cname, lambda m, b=build, n=name: b(m, n)))
            yield Case(cname, argv, d, needles=[target, member], marker=marker)
    for name, payload in _odd_pickles().items():
        d = ctx.dir(name)
        ms = job_table_members()
        ms[2].data = npy_with_pickle(payload)
        p = make_cnmf_run(d, jobs=ms)
        yield Case(name, cnmf_factorize_argv(d), d, needles=[p["jobs"], "columns.npy"])


class PickleControl(Special):
    """Proof that every exploit is live: numpy's own loader (np.load(allow_pickle=True), as
    cNMF's `pd.DataFrame(**np.load(...))`) creates the marker from the same file, built again
    in a scratch folder. Not counted as a case; a failure means a payload is broken, so knmf's
    refusal of it would prove nothing. One Python process loads them all."""
    count = False
    name = "control_exploits_are_live"

    def __init__(self, root):
        self.root, self.builds = root, []

    def run(self):
        t0 = time.monotonic()
        scratch = os.path.join(self.root, "_live")
        os.makedirs(scratch)
        paths = []
        for cname, build in self.builds:
            os.makedirs(os.path.join(scratch, cname))
            path = os.path.join(scratch, cname, "file.npz")
            with open(path, "wb") as f:
                f.write(build(os.path.join(scratch, cname, "PWNED")))
            paths.append(path)
        code = ("import numpy as np, sys\n"
                "for p in sys.argv[1:]:\n"
                "    z = np.load(p, allow_pickle=True)\n"
                "    for k in z.files:\n"
                "        try:\n            z[k]\n        except Exception:\n            pass\n")
        subprocess.run(["/usr/bin/python3", "-c", code, *paths], cwd=scratch, capture_output=True, timeout=120)
        problems = [f"numpy's loader did not run the payload in {p}" for p in paths
                    if not os.path.exists(os.path.join(os.path.dirname(p), "PWNED"))]
        if not self.builds:
            problems.append("no exploit to check")
        return problems, [f"{len(paths) - len(problems)} of {len(paths)} payloads ran under numpy"], \
            time.monotonic() - t0


def zero_bomb(prefix, nzeros):
    """Deflate of prefix + nzeros zero bytes, made in pieces: (payload, crc, size)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [c.compress(prefix)]
    crc = zlib.crc32(prefix)
    chunk = bytes(1 << 20)
    for _ in range(nzeros >> 20):
        out.append(c.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    out.append(c.flush())
    return b"".join(out), crc & 0xFFFFFFFF, len(prefix) + (nzeros >> 20 << 20)


# ---------------------------------------------------------------------------------------------
@family
def family_zip(ctx):
    """ZIP damage in the job table .df.npz: bombs (inflating far beyond the declared sizes),
    overlapping and duplicated entries, central directory and end-record lies, zip64 lies,
    unsupported methods, encryption, CRC and size mismatches."""
    d = ctx.dir("control_zip")
    make_cnmf_run(d)
    yield Case("control_zip", cnmf_factorize_argv(d), d, expect="ok", outputs=["run/cnmf_tmp"], count=False)

    def zcase(name, blob, needles=()):
        d = ctx.dir(name)
        p = make_cnmf_run(d, jobs=blob)
        return Case(name, cnmf_factorize_argv(d), d, needles=[p["jobs"], *needles])

    ms = job_table_members()
    good_data = ms[0].data
    # bombs: data.npy's header declares (10, 3) int64, the member inflates to 256 MiB
    # (compressed in pieces: this process stays small, its size is counted in the child's RSS)
    pay, crc, usize = zero_bomb(good_data, 256 << 20)
    for name, declared in (("bomb_honest_sizes", usize), ("bomb_size_lie", len(good_data))):
        m = job_table_members()
        m[0] = Member("data.npy", good_data, payload=pay, usize=declared,
                      crc=crc if declared == usize else zlib.crc32(good_data) & 0xFFFFFFFF)
        yield zcase(name, build_zip(m), ["data.npy"])
    # a bomb in the pickled columns (an object array's header gives no byte size)
    pay, crc, usize = zero_bomb(ms[2].data, 256 << 20)
    m = job_table_members()
    m[2] = Member("columns.npy", ms[2].data, payload=pay, usize=usize, crc=crc)
    yield zcase("bomb_pickled_member", build_zip(m), ["columns.npy"])
    m = job_table_members()
    m[2] = Member("columns.npy", ms[2].data, payload=pay, usize=len(ms[2].data), crc=zlib.crc32(ms[2].data))
    yield zcase("bomb_pickled_member_size_lie", build_zip(m), ["columns.npy"])
    # header declaring a huge array inside a small member
    huge = npy_bytes(np.zeros((1, 3), np.int64)).replace(b"'shape': (1, 3)", b"'shape': (1000000000000, 3)")
    m = job_table_members()
    m[0] = Member("data.npy", huge)
    yield zcase("npy_declares_8tb", build_zip(m), ["data.npy"])
    # overlapping: two central-directory entries share one local header / payload
    m2 = job_table_members()
    m2[1].over["offset"] = 0  # index.npy's entry points at data.npy's local header
    yield zcase("overlap_entries_same_local_header", build_zip(m2), [])
    m2 = job_table_members()
    m2[2].over["offset"] = 0
    m2[2].over["local_name"] = "columns.npy"
    yield zcase("overlap_entry_into_other_payload", build_zip(m2), [])
    yield zcase("duplicate_member_names", build_zip(job_table_members() + [Member("data.npy", npy_bytes(np.zeros((1, 3), np.int64)))]),
                ["data.npy"])
    yield zcase("missing_index_member", build_zip([x for x in job_table_members() if x.name != "index.npy"]), ["index"])
    yield zcase("missing_data_member", build_zip([x for x in job_table_members() if x.name != "data.npy"]), ["data"])
    yield zcase("empty_archive", build_zip([]), [])
    n = len(build_zip(job_table_members()))
    yield zcase("cd_offset_beyond_file", build_zip(job_table_members(), eocd={"offset": n + 100}), [])
    yield zcase("cd_offset_into_payload", build_zip(job_table_members(), eocd={"offset": 40}), [])
    yield zcase("cd_offset_huge", build_zip(job_table_members(), eocd={"offset": 0xFFFFFFF0}), [])
    yield zcase("cd_count_lie_more", build_zip(job_table_members(), eocd={"count": 9}), [])
    yield zcase("cd_count_lie_fewer", build_zip(job_table_members(), eocd={"count": 1}), [])
    yield zcase("cd_size_lie", build_zip(job_table_members(), eocd={"size": 5}), [])
    yield zcase("eocd_comment_len_lie", build_zip(job_table_members(), eocd={"comment_len": 500}), [])
    yield zcase("eocd_bad_signature", build_zip(job_table_members(), eocd={"sig": 0x06054B51}), [])
    # zip64: the end record says "see zip64" but no zip64 record exists; a locator to nowhere
    yield zcase("zip64_markers_no_record", build_zip(job_table_members(), eocd={"count": 0xFFFF, "size": 0xFFFFFFFF,
                                                                                "offset": 0xFFFFFFFF}), [])
    loc = struct.pack("<IIQI", 0x07064B50, 0, 2 ** 60, 1)
    yield zcase("zip64_locator_to_nowhere", build_zip(job_table_members(), eocd={"count": 0xFFFF, "size": 0xFFFFFFFF,
                                                                                 "offset": 0xFFFFFFFF}, cd_extra=loc), [])
    m = job_table_members()
    z64 = struct.pack("<HHQQ", 1, 16, 2 ** 62, 2 ** 62)
    m[0].over.update(csize=0xFFFFFFFF, usize=0xFFFFFFFF, cd_extra=z64)
    yield zcase("zip64_extra_sizes_lie", build_zip(m), ["data.npy"])
    m = job_table_members()
    m[0].over.update(usize=0xFFFFFFFF, cd_extra=struct.pack("<HH", 1, 4) + b"\0\0")
    yield zcase("zip64_extra_truncated", build_zip(m), [])
    for method in (12, 14, 99):
        m = job_table_members()
        m[0] = Member("data.npy", good_data, method=method, payload=deflate(good_data))
        yield zcase(f"method_{method}", build_zip(m), ["data.npy", str(method)])
    m = job_table_members()
    m[0].over["flags"] = 1
    yield zcase("encrypted_flag", build_zip(m), ["data.npy", "encrypted"])
    m = job_table_members()
    m[1].over["local_name"] = "xndex.npy"
    yield zcase("local_name_mismatch", build_zip(m), [])
    m = job_table_members()
    m[0].over["crc"] = 0x12345678
    yield zcase("crc_mismatch", build_zip(m), ["data.npy"])
    m = job_table_members()
    m[0] = Member("data.npy", good_data, method=0)
    m[0].over["crc"] = 0xDEADBEEF
    yield zcase("stored_crc_mismatch", build_zip(m), ["data.npy"])
    m = job_table_members()
    m[0] = Member("data.npy", good_data, method=0, usize=len(good_data) - 8)
    yield zcase("stored_size_mismatch", build_zip(m), ["data.npy"])
    m = job_table_members()
    m[0].over["csize"] = 10
    yield zcase("compressed_size_short", build_zip(m), ["data.npy"])
    m = job_table_members()
    m[0].over["lsig"] = 0x04034B51
    yield zcase("local_header_bad_signature", build_zip(m), [])
    yield zcase("not_a_zip", b"alpha_H: 0.0\n" * 10, [])


# ---------------------------------------------------------------------------------------------
@family
def family_yaml(ctx):
    """cNMF's NAME.nmf_idvrun_params.yaml: wrong types and ranges, missing keys, duplicated keys,
    tabs, not a mapping, alias bombs; an unknown key is a warning and the run goes on."""
    def ycase(name, text, needles=(), expect="refuse", warn=()):
        d = ctx.dir(name)
        p = make_cnmf_run(d, yaml=text)
        if expect == "ok":
            return Case(name, cnmf_factorize_argv(d), d, expect="ok", warn=warn, outputs=["run/cnmf_tmp"],
                        verify=_spectra_written(p))
        return Case(name, cnmf_factorize_argv(d), d, needles=[p["yaml"], *needles])

    yield ycase("control_yaml", YAML_BASE, expect="ok")
    sub = lambda key, val: "".join((f"{key}: {val}\n" if l.startswith(key + ":") else l + "\n")
                                   for l in YAML_BASE.splitlines())
    drop = lambda key: "".join(l + "\n" for l in YAML_BASE.splitlines() if not l.startswith(key + ":"))
    yield ycase("unknown_key_warns", YAML_BASE + "n_jobs: 4\n", expect="ok", warn=["n_jobs"])
    yield ycase("two_unknown_keys_warn", YAML_BASE + "verbose: 1\nshuffle: true\n", expect="ok",
                warn=["verbose", "shuffle"])
    yield ycase("max_iter_string", sub("max_iter", "abc"), ["max_iter", "abc"])
    yield ycase("max_iter_float", sub("max_iter", "50.5"), ["max_iter", "50.5"])
    yield ycase("max_iter_zero", sub("max_iter", "0"), ["max_iter"])
    yield ycase("max_iter_negative", sub("max_iter", "-5"), ["max_iter", "-5"])
    yield ycase("max_iter_overflow", sub("max_iter", "99999999999999999999"), ["max_iter"])
    yield ycase("tol_list", sub("tol", "[1, 2]"), ["tol"])
    yield ycase("tol_negative", sub("tol", "-0.1"), ["tol"])
    yield ycase("tol_nan", sub("tol", ".nan"), ["tol"])
    yield ycase("alpha_W_inf", sub("alpha_W", ".inf"), ["alpha_W"])
    yield ycase("l1_ratio_above_one", sub("l1_ratio", "1.5"), ["l1_ratio", "1.5"])
    yield ycase("solver_unknown", sub("solver", "lbfgs"), ["solver", "lbfgs"])
    yield ycase("solver_number", sub("solver", "5"), ["solver"])
    yield ycase("beta_loss_unknown", sub("beta_loss", "poisson"), ["beta_loss", "poisson"])
    yield ycase("init_mapping", sub("init", "{a: 1}"), ["init"])
    yield ycase("init_unknown", sub("init", "nnsvd"), ["init", "nnsvd"])
    yield ycase("init_nndsvd_runs", sub("init", "nndsvd"), expect="ok")
    yield ycase("missing_max_iter", drop("max_iter"), ["max_iter"])
    yield ycase("missing_solver", drop("solver"), ["solver"])
    yield ycase("duplicated_key", YAML_BASE + "max_iter: 60\n", ["max_iter"])
    yield ycase("tab_indentation", "params:\n\tmax_iter: 50\n", [])
    yield ycase("tab_in_mapping_value_line", YAML_BASE.replace("tol: 0.0001", "tol:\t0.0001\n\t- x"), [])
    yield ycase("not_a_mapping_list", "- 1\n- 2\n", ["mapping"])
    yield ycase("not_a_mapping_scalar", "frobenius\n", ["mapping"])
    yield ycase("empty_file", "", [])
    yield ycase("binary_garbage", "\x00\x01\xff\xfe" * 20, [])
    yield ycase("unclosed_flow", "{alpha_H: 0.0, max_iter: 50", [])
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))
    # yaml-cpp shares aliased nodes (nothing expands): the run goes on, warning of the keys
    yield ycase("billion_laughs", YAML_BASE + bomb, expect="ok", warn=["'a'", "'i'"])
    yield ycase("key_is_a_list", YAML_BASE + "[1, 2]: 3\n", [])


def _spectra_written(p):
    def check(case):
        files = sorted(f for f in os.listdir(p["tmp"]) if ".spectra." in f)
        want = sorted(f"run.spectra.k_{k}.iter_{i}.df.npz" for k, i, _ in job_rows())
        if files != want:
            return f"spectra files {files}, expected {want}"
        for f in files:
            with np.load(os.path.join(p["tmp"], f), allow_pickle=False) as z:
                if not np.all(np.isfinite(z["data"])):
                    return f"{f} holds non-finite spectra"
        return None
    return check


# ---------------------------------------------------------------------------------------------
@family
def family_jobtable(ctx):
    """cNMF's job table NAME.nmf_params.df.npz: duplicated (k, iter), bad seeds, k and iter,
    wrong or missing columns, shapes that disagree."""
    def jcase(name, needles=(), expect="refuse", **kw):
        d = ctx.dir(name)
        p = make_cnmf_run(d, jobs=job_table_members(**kw))
        if expect == "ok":
            return Case(name, cnmf_factorize_argv(d), d, expect="ok", outputs=["run/cnmf_tmp"], count=False)
        return Case(name, cnmf_factorize_argv(d), d, needles=[p["jobs"], *needles])

    yield jcase("control_jobtable", expect="ok")
    yield jcase("control_column_order", expect="ok", rows=[[1000 + 17 * k + i, i, k] for k, i, _ in job_rows()],
                columns=["nmf_seed", "iter", "n_components"])
    rows = job_rows()
    yield jcase("duplicated_k_iter", ["n_components 2", "iter 1"], rows=rows + [[2, 1, 555]])
    yield jcase("duplicated_row", ["iter"], rows=rows + [rows[3]])
    yield jcase("negative_seed", ["nmf_seed", "-1"], rows=[[2, 0, -1]] + rows[1:])
    yield jcase("seed_above_2_32", ["nmf_seed", str(2 ** 32)], rows=[[2, 0, 2 ** 32]] + rows[1:])
    yield jcase("k_zero", ["n_components", "0"], rows=[[0, 0, 5]] + rows[1:])
    yield jcase("k_negative", ["n_components", "-2"], rows=[[-2, 0, 5]] + rows[1:])
    yield jcase("iter_negative", ["iter", "-1"], rows=[[2, -1, 5]] + rows[1:])
    yield jcase("k_float", ["n_components"], data=np.array(rows, np.float64) + np.array([0.5, 0, 0]))
    yield jcase("missing_seed_column", ["nmf_seed"], rows=[r[:2] for r in rows], columns=["n_components", "iter"])
    yield jcase("renamed_column", ["nmf_seed"], columns=["n_components", "iter", "seed"])
    yield jcase("columns_longer_than_data", [], columns=JOB_COLUMNS_PLUS)
    yield jcase("index_longer_than_data", [], index=np.arange(len(rows) + 3, dtype=np.int64))
    yield jcase("data_1d", [], data=np.array(rows, np.int64).ravel())
    yield jcase("data_strings", [], data=np.array(rows, np.int64).astype("U4"))
    yield jcase("k_huge_int64", ["n_components"], rows=[[2 ** 40, 0, 5]] + rows[1:])
    obj = np.array(rows, dtype=object)
    obj[2, 0] = "two"
    yield jcase("object_cell_string", ["n_components", "two"], data=obj)
    obj = np.array(rows, dtype=object)
    obj[2, 2] = None
    yield jcase("object_cell_none", ["nmf_seed"], data=obj)
    yield jcase("data_float16", [], data=np.array(rows, np.float16))


JOB_COLUMNS_PLUS = ["n_components", "iter", "nmf_seed", "completed"]


# ---------------------------------------------------------------------------------------------
def _tsv_text(x, cells=None, genes=None):
    """cNMF's tab-separated counts table of x as bytes (cells x genes, a header of gene names)."""
    cells = cells or [f"cell{i}".encode() for i in range(x.shape[0])]
    genes = genes or [f"gene{j}".encode() for j in range(x.shape[1])]
    rows = [b"\t" + b"\t".join(genes)]
    for i in range(x.shape[0]):
        rows.append(cells[i] + b"\t" + b"\t".join(str(int(v)).encode() for v in x[i]))
    return b"\n".join(rows) + b"\n"


def _write_tenx_h5(path, x, barcodes=None, genes=None):
    """A Cell Ranger 3 .h5 of x (cells x genes): group `matrix`, CSC over cells (genes x cells)."""
    import scipy.sparse as sp
    m = sp.csc_matrix(x.T.astype(np.int32))
    barcodes = barcodes or [f"cell{i}".encode() for i in range(x.shape[0])]
    genes = genes or [f"gene{j}".encode() for j in range(x.shape[1])]
    with h5py.File(path, "w") as f:
        g = f.create_group("matrix")
        g.create_dataset("data", data=m.data)
        g.create_dataset("indices", data=m.indices.astype(np.int64))
        g.create_dataset("indptr", data=m.indptr.astype(np.int64))
        g.create_dataset("shape", data=np.array(m.shape, dtype=np.int32))
        g.create_dataset("barcodes", data=np.array(barcodes, dtype="S"))
        ft = g.create_group("features")
        ft.create_dataset("name", data=np.array(genes, dtype="S"))
        ft.create_dataset("id", data=np.array([b"ID" + n for n in genes], dtype="S"))
        ft.create_dataset("feature_type", data=np.array([b"Gene Expression"] * len(genes), dtype="S"))


def _prepare_argv(d, counts, *more):
    return ["prepare", "--output-dir", d, "--name", "run", "-c", counts, "-k", "2", "--n-iter", "2",
            "--seed", "1", "--numgenes", "6", *more]


class _PrepareSweep(Special):
    """A killed prepare's staging folders (the AtomicFolder naming `.run.knmf-tmp-PID-N` and
    the naming before issue 27, `.run.knmf-prepare-PID`), of a process that no longer runs, are
    removed by the next prepare into the same folder; a live process's is kept."""

    def __init__(self, ctx, tsv):
        self.name, self.ctx, self.tsv = "sweeps_dead_staging_folders", ctx, tsv

    def run(self):
        import subprocess as sp_
        d = self.ctx.dir(self.name)
        dead = sp_.Popen(["true"])
        dead.wait()  # a pid that no longer runs
        live = os.getpid()
        left = [f".run.knmf-tmp-{dead.pid}-0", f".run.knmf-prepare-{dead.pid}", f".run.knmf-tmp-{live}-7"]
        for name in left:
            os.makedirs(os.path.join(d, name, "cnmf_tmp"))
            with open(os.path.join(d, name, "cnmf_tmp", "run.tpm.h5ad"), "wb") as f:
                f.write(b"\0" * 4096)
        rc, out, err, _, secs = L.run_process([L.KNMF] + _prepare_argv(d, self.tsv), d, L.knmf_env(), 120)
        problems = []
        if rc != 0:
            problems.append(f"exit status {rc}: {err.strip()[-300:]!r}")
        for name in left[:2]:
            if os.path.exists(os.path.join(d, name)):
                problems.append(f"{name} (a dead writer's staging folder) was left")
        if not os.path.exists(os.path.join(d, left[2])):
            problems.append(f"{left[2]} (a live writer's staging folder) was removed")
        if not os.path.exists(os.path.join(d, "run", "cnmf_tmp", "run.norm_counts.h5ad")):
            problems.append("no run folder was made")
        return problems, L.nonblank_lines(err), secs


@family
def family_prepare(ctx):
    """`knmf prepare`'s inputs (issue 27): names that are not UTF-8 in every count format that
    carries names (tab-separated table, 10x mtx folder, 10x .h5), which the .h5ad outputs would
    store as UTF-8 strings anndata cannot read; a dead run's staging folders swept."""
    x = base_x()
    d0 = ctx.dir("_inputs")
    tsv = os.path.join(d0, "counts.tsv")
    with open(tsv, "wb") as f:
        f.write(_tsv_text(x))
    yield Case("control_tsv", _prepare_argv(ctx.dir("control_tsv"), tsv), ctx.root, expect="ok",
               outputs=[os.path.join(ctx.root, "control_tsv", "run")], count=False)
    h5 = os.path.join(d0, "counts.h5")
    _write_tenx_h5(h5, x)
    yield Case("control_h5", _prepare_argv(ctx.dir("control_h5"), h5), ctx.root, expect="ok",
               outputs=[os.path.join(ctx.root, "control_h5", "run")], count=False)

    def bad(name, write, needles):
        d = ctx.dir(name)
        counts = write(d)
        return Case(name, _prepare_argv(d, counts), d, needles=needles)

    cells = [f"cell{i}".encode() for i in range(x.shape[0])]
    genes = [f"gene{j}".encode() for j in range(x.shape[1])]

    def tsv_file(name, **names):
        def write(d):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(_tsv_text(x, **names))
            return p
        return write

    for label, raw in (("latin1", b"caf\xe9"), ("lone_continuation", b"a\x80b"),
                       ("overlong", b"\xc0\xaf"), ("surrogate", b"\xed\xa0\x80"),
                       ("truncated", b"ab\xe2\x82")):
        hexes = " ".join(f"{c:02x}" for c in raw)

        yield bad(f"tsv_cell_{label}", tsv_file("c.tsv", cells=cells[:3] + [raw] + cells[4:]), ["c.tsv", "line 5", hexes])
        yield bad(f"tsv_gene_{label}", tsv_file("g.tsv", genes=genes[:2] + [raw] + genes[3:]),
                  ["g.tsv", "line 1, field 4", hexes])

        def mtx_barcode(d, raw=raw):
            import scipy.io
            import scipy.sparse as sp
            m = os.path.join(d, "m")
            os.makedirs(m)
            scipy.io.mmwrite(os.path.join(m, "matrix.mtx"), sp.coo_matrix(x.T.astype(np.int64)), field="integer")
            with open(os.path.join(m, "barcodes.tsv"), "wb") as f:
                f.write(b"\n".join(cells[:5] + [raw] + cells[6:]) + b"\n")
            with open(os.path.join(m, "genes.tsv"), "wb") as f:
                f.write(b"\n".join(b"ID" + g + b"\t" + g for g in genes) + b"\n")
            return os.path.join(m, "matrix.mtx")
        yield bad(f"mtx_barcode_{label}", mtx_barcode, ["barcodes.tsv", "line 6", hexes])

        def h5_barcode(d, raw=raw):
            p = os.path.join(d, "b.h5")
            _write_tenx_h5(p, x, barcodes=cells[:7] + [raw] + cells[8:])
            return p
        yield bad(f"h5_barcode_{label}", h5_barcode, ["b.h5", "matrix/barcodes[7]", hexes])

        def h5_gene(d, raw=raw):
            p = os.path.join(d, "n.h5")
            _write_tenx_h5(p, x, genes=genes[:1] + [raw] + genes[2:])
            return p
        yield bad(f"h5_gene_{label}", h5_gene, ["n.h5", "features/name[1]", hexes])
    yield _PrepareSweep(ctx, tsv)


def _zero_gene_x():
    x = base_x().copy()
    x[:, 3] = 0  # gene3: no counts in any cell
    return x


@family
def family_consensus(ctx):
    """`knmf consensus --results` inputs (issue 27): a TPM matrix with a gene of no counts (its
    standard deviation 0; cNMF's starCAT spectra hold NaN there, knmf's 0 and a warning naming
    the gene, every output finite), and TPM / stats / k that do not fit the run."""
    d0 = ctx.dir("_base")
    write_h5ad(os.path.join(d0, "x.h5ad"), x=_zero_gene_x())
    ctx.knmf_ok(["factorize", "x.h5ad", "-k", "2", "3", "--n-iter", "4", "--max-iter", "30", "-o", "r.h5",
                 "--quiet"], d0)

    def run_dir(name):
        d = ctx.dir(name)
        for f in ("x.h5ad", "r.h5"):
            shutil.copy(os.path.join(d0, f), os.path.join(d, f))
        return d

    def finite_outputs(d, ks=(2, 3)):
        def check(case):
            import glob
            names = []
            for k in ks:
                names += glob.glob(os.path.join(d, "run", "cnmf_tmp", f"run.*k_{k}.dt_*.df.npz"))
            if len(names) < 5 * len(ks):
                return f"expected the consensus files of k {ks}, found {sorted(names)}"
            for p in names:
                with np.load(p, allow_pickle=True) as z:
                    v = z["data"]
                    if v.dtype.kind == "f" and not np.isfinite(v).all():
                        return f"{os.path.basename(p)} holds non-finite values"
            star = [p for p in names if ".starcat_spectra." in p]
            for p in star:
                with np.load(p, allow_pickle=True) as z:
                    cols = list(z["columns"].astype(str))
                    if not (z["data"][:, cols.index("gene3")] == 0).all():
                        return f"{os.path.basename(p)}: gene3 (no counts) is not 0"
            return None
        return check

    d = run_dir("zero_gene_tpm")
    yield Case("zero_gene_tpm", ["consensus", "--results", "r.h5", "-k", "2", "3", "--tpm", "x.h5ad",
                                 "--local-density-threshold", "2", "--output-dir", d, "--name", "run"],
               d, expect="ok", warn=["gene3", "standard deviation 0"], outputs=["run", "r.h5"],
               verify=finite_outputs(d))
    d = run_dir("zero_gene_tpm_read_only")
    yield Case("zero_gene_tpm_read_only", ["consensus", "--results", "r.h5", "-k", "2", "--tpm", "x.h5ad",
                                           "--read-only-results", "--local-density-threshold", "2",
                                           "--output-dir", d, "--name", "run"],
               d, expect="ok", warn=["gene3"], outputs=["run"], verify=finite_outputs(d, (2,)))

    def refuse(name, argv_more, needles, prep=None):
        d = run_dir(name)
        if prep:
            prep(d)
        return Case(name, ["consensus", "--results", "r.h5", "--local-density-threshold", "2",
                           "--output-dir", d, "--name", "run", *argv_more], d, needles=needles)

    yield refuse("k_not_in_run", ["-k", "4"], ["k = 4"])
    yield refuse("tpm_missing", ["-k", "2", "--tpm", "none.h5ad"], ["none.h5ad"])
    yield refuse("tpm_fewer_cells", ["-k", "2", "--tpm", "t.h5ad"], ["t.h5ad"],
                 prep=lambda d: write_h5ad(os.path.join(d, "t.h5ad"), x=_zero_gene_x()[:20]))
    yield refuse("tpm_nan", ["-k", "2", "--tpm", "t.h5ad"], ["t.h5ad"],
                 prep=lambda d: write_h5ad(os.path.join(d, "t.h5ad"),
                                           x=np.where(_zero_gene_x() == 1, np.nan, _zero_gene_x())))
    yield refuse("tpm_negative", ["-k", "2", "--tpm", "t.h5ad"], ["t.h5ad"],
                 prep=lambda d: write_h5ad(os.path.join(d, "t.h5ad"), x=-_zero_gene_x()))
    yield refuse("tpm_stats_missing", ["-k", "2", "--tpm", "x.h5ad", "--tpm-stats", "s.df.npz"], ["s.df.npz"])
    yield refuse("tpm_stats_without_tpm", ["-k", "2", "--tpm-stats", "s.df.npz"], ["--tpm-stats", "--tpm"])
    d = ctx.dir("tpm_in_cnmf_mode")
    make_cnmf_run(d)
    yield Case("tpm_in_cnmf_mode", ["consensus", "--output-dir", d, "--name", "run", "-k", "2", "--tpm",
                                    "x.h5ad"], d, needles=["--tpm", "native mode"])


@family
def family_combinations(ctx):
    """Option combinations and reruns (issue 27): options that contradict each other, and a
    rerun of a complete native run whose input was replaced by another X of the same shape and
    genes (it said "nothing to do" and exited 0; now refused naming both fingerprints)."""
    d = ctx.dir("replaced_input_complete_run")
    write_h5ad(os.path.join(d, "x.h5ad"))
    ctx.knmf_ok(native_argv("x.h5ad"), d)
    y = base_x().copy()
    y[0, 0] += 1  # one count more: the same shape and genes, another X
    write_h5ad(os.path.join(d, "x.h5ad"), x=y)
    yield Case("replaced_input_complete_run", native_argv("x.h5ad"), d, needles=["x.h5ad", "fingerprint"])
    d = ctx.dir("same_input_complete_run")
    write_h5ad(os.path.join(d, "x.h5ad"))
    ctx.knmf_ok(native_argv("x.h5ad"), d)
    # (r.h5 is an output here: a run with nothing to do still rewrites the file's bytes, not
    # its content; found by this case, left as it was)
    yield Case("same_input_complete_run", native_argv("x.h5ad"), d, expect="ok", outputs=["r.h5"],
               verify=results_complete(os.path.join(d, "r.h5")), count=False)

    def combo(name, more, needles):
        dd = ctx.dir(name)
        write_h5ad(os.path.join(dd, "x.h5ad"))
        return Case(name, native_argv("x.h5ad", "r.h5", *more), dd, needles=needles)

    yield combo("cd_with_kl", ["--solver", "cd", "--beta-loss", "kullback-leibler"], ["--beta-loss", "--solver"])
    yield combo("cd_with_itakura", ["--solver", "cd", "--beta-loss", "itakura-saito"], ["--beta-loss", "--solver"])


# ---------------------------------------------------------------------------------------------
@family
def family_options(ctx):
    """Bad command lines: k < 1 or not an integer, bad --n-iter, --dtype, --format, --batch,
    solver numbers, unknown options and subcommands, options that conflict, consensus and
    simulate ranges. A bad option is found before any input is read or output made."""
    d = ctx.dir("native")
    inp = os.path.join(d, "x.h5ad")
    write_h5ad(inp)
    base = ["factorize", inp, "--n-iter", "2", "--max-iter", "20", "-o", "r.h5", "--quiet"]
    yield Case("control_native", base + ["-k", "2"], d, expect="ok", outputs=["r.h5"], count=False)
    # a fresh folder per case: the control's r.h5 would otherwise turn cases into resumes
    def ocase(name, argv, needles, rc=1, where="native"):
        dd = ctx.dir(name)
        if where == "native":
            shutil.copy(inp, os.path.join(dd, "x.h5ad"))
        elif where == "cnmf":
            make_cnmf_run(dd)
        elif where == "spectra":
            ctx.copy_spectra_run(dd)
        elif where == "results":
            ctx.copy_results(dd)
        argv = [a.replace("@D", dd) for a in argv]
        return Case(name, argv, dd, rc=rc, needles=needles)

    nat = ["factorize", "@D/x.h5ad", "--max-iter", "20", "-o", "@D/r.h5", "--quiet"]
    nat_k = nat + ["--n-iter", "2", "-k", "2"]
    yield ocase("k_zero", nat + ["-k", "0"], ["-k", "0"])
    yield ocase("k_negative", nat + ["-k", "-3"], ["-k", "-3"])
    yield ocase("k_one_of_many_zero", nat + ["-k", "2", "0", "3"], ["-k", "0"])
    yield ocase("k_non_integer", nat + ["-k", "2.5"], ["2.5"], rc=2)
    yield ocase("k_text", nat + ["-k", "abc"], ["abc"], rc=2)
    yield ocase("k_missing_value", nat + ["-k"], ["--components"], rc=2)
    yield ocase("k_overflow", nat + ["-k", "99999999999999999999"], ["99999999999999999999"], rc=2)
    yield ocase("k_absent", nat, ["-k"])
    yield ocase("n_iter_zero", nat + ["-k", "2", "--n-iter", "0"], ["--n-iter", "0"])
    yield ocase("n_iter_negative", nat + ["-k", "2", "--n-iter", "-1"], ["--n-iter", "-1"])
    yield ocase("n_iter_text", nat + ["-k", "2", "--n-iter", "many"], ["many"], rc=2)
    # the demo's consensus needs int(0.30 x replicates) >= 1 neighbours: 3 replicates are refused
    # before anything is simulated (they used to fail at the consensus, after the factorize)
    yield ocase("demo_n_iter_three", ["demo", "--n-iter", "3"], ["--n-iter", "3", ">= 4 replicates"])
    yield ocase("seed_negative", nat_k + ["--seed", "-1"], ["--seed", "-1"])
    yield ocase("dtype_half", nat_k + ["--dtype", "half"], ["--dtype", "half"])
    yield ocase("dtype_empty", nat_k + ["--dtype", ""], ["--dtype"])
    yield ocase("format_csr", nat_k + ["--format", "csr"], ["--format", "csr"])
    yield ocase("batch_zero", nat_k + ["--batch", "0"], ["--batch", "0"])
    yield ocase("batch_negative", nat_k + ["--batch", "-4"], ["--batch", "-4"])
    yield ocase("batch_text", nat_k + ["--batch", "lots"], ["--batch", "lots"])
    yield ocase("memory_limit_zero", nat_k + ["--device-memory-limit", "0"], ["--device-memory-limit", "0"])
    yield ocase("memory_limit_unit", nat_k + ["--device-memory-limit", "4Q"], ["--device-memory-limit", "4Q"])
    yield ocase("solver_unknown", nat_k + ["--solver", "als"], ["--solver", "als"])
    yield ocase("zero_guard_unknown", nat_k + ["--zero-guard", "clip"], ["--zero-guard", "clip"])
    yield ocase("init_unknown", nat_k + ["--init", "svd"], ["--init", "svd"])
    yield ocase("max_iter_zero", ["factorize", "@D/x.h5ad", "-k", "2", "-o", "@D/r.h5", "--max-iter", "0"],
                ["--max-iter", "0"])
    yield ocase("tol_negative", nat_k + ["--tol", "-1"], ["--tol", "-1"])
    yield ocase("tol_nan", nat_k + ["--tol", "nan"], ["--tol", "nan"])
    yield ocase("eps_negative", nat_k + ["--solver", "mu", "--zero-guard", "add-eps", "--eps", "-1"], ["--eps", "-1"])
    yield ocase("check_every_zero", nat_k + ["--solver", "mu", "--check-every", "0"], ["--check-every", "0"])
    yield ocase("l1_ratio_above_one", nat_k + ["--l1-ratio", "2"], ["--l1-ratio", "2"])
    yield ocase("alpha_negative", nat_k + ["--alpha-usage", "-1"], ["--alpha-usage", "-1"])
    yield ocase("unknown_option", nat_k + ["--frobnicate"], ["--frobnicate"], rc=2)
    yield ocase("unknown_subcommand", ["factorise", "@D/x.h5ad"], ["factorise"], rc=2)
    yield ocase("extra_positional", nat_k + ["@D/x.h5ad"], ["x.h5ad"], rc=2)
    yield ocase("kokkos_threads_zero", nat_k + ["--kokkos-num-threads=0"], ["--kokkos-num-threads", "0"])
    yield ocase("native_without_output", ["factorize", "@D/x.h5ad", "-k", "2", "--quiet"], ["-o"])
    yield ocase("input_and_cnmf_mode", ["factorize", "@D/x.h5ad", "--output-dir", "@D", "--name", "run", "--quiet"],
                ["--output-dir"], where="cnmf")
    yield ocase("cnmf_mode_with_tol", ["factorize", "--output-dir", "@D", "--name", "run", "--tol", "0.1", "--quiet"],
                ["--tol"], where="cnmf")
    yield ocase("cnmf_mode_with_k", ["factorize", "--output-dir", "@D", "--name", "run", "-k", "3", "--quiet"],
                ["-k", "cNMF mode"], where="cnmf")
    yield ocase("worker_index_beyond", ["factorize", "--output-dir", "@D", "--name", "run", "--worker-index", "2",
                                        "--total-workers", "2", "--quiet"], ["--worker-index", "2"], where="cnmf")
    yield ocase("total_workers_zero", ["factorize", "--output-dir", "@D", "--name", "run", "--total-workers", "0",
                                       "--quiet"], ["--total-workers", "0"], where="cnmf")
    yield ocase("worker_index_negative", ["factorize", "--output-dir", "@D", "--name", "run", "--worker-index", "-1",
                                          "--quiet"], ["--worker-index", "-1"], where="cnmf")
    yield ocase("cnmf_name_missing_run", ["factorize", "--output-dir", "@D", "--name", "nosuch", "--quiet"],
                ["nosuch"], where="cnmf")
    cons = ["consensus", "--output-dir", "@D", "--name", "run", "-k", "2"]
    yield ocase("density_threshold_zero", cons + ["--local-density-threshold", "0"], ["--local-density-threshold", "0"],
                where="spectra")
    yield ocase("density_threshold_above_2", cons + ["--local-density-threshold", "2.5"],
                ["--local-density-threshold", "2.5"], where="spectra")
    yield ocase("neighborhood_zero", cons + ["--local-neighborhood-size", "0"], ["--local-neighborhood-size", "0"],
                where="spectra")
    yield ocase("neighborhood_above_1", cons + ["--local-neighborhood-size", "1.5"], ["--local-neighborhood-size", "1.5"],
                where="spectra")
    yield ocase("consensus_k_not_run", ["consensus", "--output-dir", "@D", "--name", "run", "-k", "7"], ["7"],
                where="spectra")
    yield ocase("consensus_k_zero", ["consensus", "--output-dir", "@D", "--name", "run", "-k", "0"], ["--components", "0"],
                where="spectra")
    yield ocase("compare_rtol_negative", ["compare", "@D/r.h5", "@D/r.h5", "--rtol", "-1"], ["--rtol", "-1"],
                where="results")
    yield ocase("compare_min_cos_above_1", ["compare", "@D/r.h5", "@D/r.h5", "--min-cos", "1.5"], ["--min-cos", "1.5"],
                where="results")
    sim = ["simulate", "-o", "@D/s.h5ad"]
    yield ocase("simulate_cells_zero", sim + ["--cells", "0"], ["--cells", "0"], where=None)
    yield ocase("simulate_genes_negative", sim + ["--genes", "-5"], ["--genes", "-5"], where=None)
    yield ocase("simulate_programs_zero", sim + ["--programs", "0", "--cells", "20", "--genes", "10"],
                ["--programs", "0"], where=None)
    yield ocase("simulate_usage_range", sim + ["--min-usage", "0.9", "--max-usage", "0.1", "--cells", "20", "--genes",
                                               "10"], ["--min-usage"], where=None)
    yield ocase("simulate_fraction_above_1", sim + ["--activity-fraction", "1.5", "--cells", "20", "--genes", "10"],
                ["--activity-fraction", "1.5"], where=None)


# ---------------------------------------------------------------------------------------------
@family
def family_output(ctx):
    """Outputs that cannot be written (as root, chmod stops nothing): a path under a regular
    file (ENOTDIR), a folder as -o, /proc, a missing parent folder, an empty name; and the
    same for --log-json, k-selection's --plot and simulate's -o. Each is refused before
    anything is computed or written."""
    def out_case(name, argv_of, needles, where="native", rc=1):
        d = ctx.dir(name)
        inp = os.path.join(d, "x.h5ad")
        if where == "native":
            write_h5ad(inp)
        elif where == "spectra":
            ctx.copy_spectra_run(d)
        elif where == "results":
            ctx.copy_results(d)
        with open(os.path.join(d, "file"), "w") as f:
            f.write("a regular file\n")
        os.makedirs(os.path.join(d, "folder"))
        argv, needles = argv_of(d, inp), [n.replace("@D", d) for n in needles]
        return Case(name, argv, d, rc=rc, needles=needles)

    nat = lambda o: (lambda d, inp: ["factorize", inp, "-k", "2", "--n-iter", "2", "--max-iter", "20", "-o",
                                     o.replace("@D", d), "--quiet"])
    # -o's folder is named (the part of the path that is wrong)
    yield out_case("o_under_regular_file", nat("@D/file/r.h5"), ["-o", "@D/file", "not an existing directory"])
    yield out_case("o_is_a_folder", nat("@D/folder"), ["@D/folder"])
    yield out_case("o_missing_parent", nat("@D/no/such/dir/r.h5"), ["-o", "@D/no/such/dir"])
    yield out_case("o_in_proc", nat("/proc/knmf-corpus/r.h5"), ["-o", "/proc/knmf-corpus"])
    yield out_case("o_proc_file", nat("/proc/version"), ["-o", "/proc"])
    yield out_case("o_empty", nat(""), ["-o"])
    yield out_case("o_is_the_input", nat("@D/x.h5ad"), ["-o", "@D/x.h5ad"])
    yield out_case("o_is_a_regular_non_hdf5_file", nat("@D/file"), ["@D/file"])
    yield out_case("o_dev_null", nat("/dev/null"), ["/dev/null"])
    logj = lambda o: (lambda d, inp: ["factorize", inp, "-k", "2", "--n-iter", "2", "--max-iter", "20", "-o",
                                      os.path.join(d, "r.h5"), "--log-json", o.replace("@D", d), "--quiet"])
    yield out_case("log_json_under_file", logj("@D/file/log.json"), ["--log-json", "@D/file/log.json"])
    yield out_case("log_json_is_folder", logj("@D/folder"), ["--log-json", "@D/folder"])
    yield out_case("log_json_in_proc", logj("/proc/knmf-corpus.json"), ["--log-json", "/proc/knmf-corpus.json"])
    cnmf = lambda d, inp: ["factorize", "--output-dir", os.path.join(d, "file"), "--name", "run", "--quiet"]
    yield out_case("cnmf_output_dir_is_file", cnmf, ["@D/file"])
    ks = lambda plot: (lambda d, inp: ["k-selection", "--output-dir", d, "--name", "run", "--plot",
                                       plot.replace("@D", d)])
    yield out_case("plot_under_file", ks("@D/file/k.png"), ["--plot", "@D/file/k.png"], where="spectra")
    yield out_case("plot_is_folder", ks("@D/folder"), ["--plot", "@D/folder"], where="spectra")
    yield out_case("plot_missing_parent", ks("@D/no/k.png"), ["--plot", "@D/no/k.png"], where="spectra")
    ksn = lambda d, inp: ["k-selection", "--results", os.path.join(d, "r.h5"), "--counts", os.path.join(d, "x.h5ad"),
                          "--plot", os.path.join(d, "file", "k.png")]
    yield out_case("plot_under_file_native", ksn, ["--plot", "@D/file/k.png"], where="results")
    cons = lambda d, inp: ["consensus", "--results", os.path.join(d, "r.h5"), "--counts", os.path.join(d, "x.h5ad"),
                           "-k", "2", "--output-dir", os.path.join(d, "file"), "--name", "run"]
    yield out_case("consensus_output_dir_is_file", cons, ["@D/file"], where="results")
    ksd = lambda d, inp: ["k-selection", "--results", os.path.join(d, "r.h5"), "--counts", os.path.join(d, "x.h5ad"),
                          "--output-dir", os.path.join(d, "file"), "--name", "run"]
    yield out_case("k_selection_output_dir_is_file", ksd, ["@D/file"], where="results")
    sim = lambda o: (lambda d, inp: ["simulate", "--cells", "20", "--genes", "10", "-o", o.replace("@D", d)])
    yield out_case("simulate_under_file", sim("@D/file/s.h5ad"), ["@D/file/s.h5ad"], where=None)
    yield out_case("simulate_is_folder", sim("@D/folder"), ["@D/folder"], where=None)
    yield out_case("simulate_missing_parent", sim("@D/no/s.h5ad"), ["@D/no/s.h5ad"], where=None)
    cmp_json = lambda d, inp: ["compare", os.path.join(d, "r.h5"), os.path.join(d, "r.h5"), "--json",
                               os.path.join(d, "file", "c.json")]
    yield out_case("compare_json_under_file", cmp_json, ["--json", "@D/file/c.json"], where="results")


# ---------------------------------------------------------------------------------------------
@family
def family_bitflip(ctx):
    """Single bit flips at seeded positions. In a .df.npz every flip inside a member's deflate
    stream or in a CRC field changes what the CRC protects, so it must be refused; in an h5ad
    or a results file a flip may hit plain data, so the run may succeed (with a complete,
    readable result) or refuse cleanly - never crash, hang or write a partial file."""
    rng = np.random.RandomState(1515)
    blob = build_zip(job_table_members())
    spans = _zip_payload_spans(blob)
    flips = []
    for name, (start, end, crc_at) in spans.items():
        picked = 0
        while picked < 2:
            pos = int(rng.randint(start, end - 1))  # the last byte may hold only padding bits
            bit = int(rng.randint(8))
            flipped = bytearray(blob)
            flipped[pos] ^= 1 << bit
            try:
                same = zlib.decompress(bytes(flipped[start:end]), -15) == zlib.decompress(blob[start:end], -15)
            except zlib.error:
                same = False
            if same:
                continue
            flips.append((f"jobs_{name.split('.')[0]}_payload_{pos}_{bit}", pos, bit))
            picked += 1
        flips.append((f"jobs_{name.split('.')[0]}_cd_crc_{crc_at}", crc_at, int(rng.randint(8))))
    for cname, pos, bit in flips:
        d = ctx.dir(cname)
        b = bytearray(blob)
        b[pos] ^= 1 << bit
        p = make_cnmf_run(d, jobs=bytes(b))
        yield Case(cname, cnmf_factorize_argv(d), d, needles=[p["jobs"]])

    # a spectra file: consensus must refuse each flip
    sp_src = spectra_path({"tmp": os.path.join(ctx.base("spectra"), "run", "cnmf_tmp")}, 2, 0)
    with open(sp_src, "rb") as f:
        sblob = f.read()
    for name, (start, end, crc_at) in list(_zip_payload_spans(sblob).items())[:3]:
        for _ in range(5):
            pos, bit = int(rng.randint(start, end - 1)), int(rng.randint(8))
            fl = bytearray(sblob)
            fl[pos] ^= 1 << bit
            try:
                if zlib.decompress(bytes(fl[start:end]), -15) == zlib.decompress(sblob[start:end], -15):
                    continue
            except zlib.error:
                pass
            break
        cname = f"spectra_{name.split('.')[0]}_payload_{pos}_{bit}"
        d = ctx.dir(cname)
        p = ctx.copy_spectra_run(d)
        sp = spectra_path(p, 2, 0)
        flip_bit(sp, pos, bit)
        yield Case(cname, ["consensus", "--output-dir", d, "--name", "run", "-k", "2"], d, needles=[sp])

    # h5ad: anywhere in the file
    d0 = ctx.dir("_h5ad")
    base = os.path.join(d0, "x.h5ad")
    write_h5ad(base)
    n = os.path.getsize(base)
    for _ in range(12):
        pos, bit = int(rng.randint(n)), int(rng.randint(8))
        cname = f"h5ad_{pos}_{bit}"
        d = ctx.dir(cname)
        inp = os.path.join(d, "x.h5ad")
        shutil.copy(base, inp)
        flip_bit(inp, pos, bit)
        yield Case(cname, native_argv(inp), d, expect="either", needles=[inp], outputs=["r.h5"],
                   verify=results_complete(os.path.join(d, "r.h5")))
    # results file: compare it with an intact copy (0: same, 3: differs; both are answers)
    n = os.path.getsize(os.path.join(ctx.base("results"), "r.h5"))
    for _ in range(6):
        pos, bit = int(rng.randint(n)), int(rng.randint(8))
        cname = f"results_{pos}_{bit}"
        d = ctx.dir(cname)
        x, r = ctx.copy_results(d)
        good = os.path.join(d, "good.h5")
        shutil.copy(r, good)
        flip_bit(r, pos, bit)
        yield Case(cname, ["compare", r, good], d, expect="either", ok_rcs=(0, 3), needles=[r])


def _zip_payload_spans(blob):
    """name -> (payload start, payload end, offset of the CRC in its central-directory entry)."""
    spans = {}
    at = blob.rfind(b"PK\x05\x06")
    count, _, cd_off = struct.unpack_from("<HII", blob, at + 10)
    pos = cd_off
    for _ in range(count):
        (_, _, _, _, _, _, _, crc, csize, usize, nlen, elen, clen, _, _, _, loff) = struct.unpack_from(
            "<IHHHHHHIIIHHHHHII", blob, pos)
        name = blob[pos + 46:pos + 46 + nlen].decode()
        lnlen, lelen = struct.unpack_from("<HH", blob, loff + 26)
        start = loff + 30 + lnlen + lelen
        spans[name] = (start, start + csize, pos + 16)
        pos += 46 + nlen + elen + clen
    return spans


# ---------------------------------------------------------------------------------------------
@family
def family_concurrent(ctx):
    """Two `knmf factorize` processes on the same -o at once: one finishes, the other refuses
    with one line naming the file (or, when it starts after the first is done, finds nothing
    to do); the finished file is complete and equals a run made alone. And two cNMF-mode
    workers on the same run folder: every spectra file valid, no temporary left."""
    ConcurrentNative.refusals = 0
    for r in range(3):
        yield ConcurrentNative(ctx, f"native_same_output_{r}", last=r == 2)
    yield ConcurrentCnmf(ctx, "cnmf_same_folder")


def _big_x():
    rng = np.random.RandomState(77)
    w = rng.gamma(1.0, 1.0, size=(400, 4))
    h = rng.gamma(1.0, 1.0, size=(4, 60))
    return rng.poisson(w @ h * 3).astype(np.float64)


class ConcurrentNative(Special):
    refusals = 0

    def __init__(self, ctx, name, last=False):
        self.name, self.last = name, last
        self.d = ctx.dir(name)
        write_h5ad(os.path.join(self.d, "x.h5ad"), x=_big_x(), fmt="dense", dense=_big_x().astype(np.float32))
        self.argv = ["factorize", "x.h5ad", "-k", "3", "4", "--n-iter", "6", "--max-iter", "400", "--tol", "0",
                     "--quiet"]

    def run(self):
        t0 = time.monotonic()
        probs = []
        env = L.knmf_env()
        ps = [subprocess.Popen([L.KNMF] + self.argv + ["-o", "r.h5"], cwd=self.d, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE) for _ in range(2)]
        res = [(p.wait(timeout=120), p.stdout.read().decode(), p.stderr.read().decode()) for p in ps]
        for p in ps:
            p.stdout.close()
            p.stderr.close()
        ok = [r for r in res if r[0] == 0]
        bad = [r for r in res if r[0] != 0]
        if not ok:
            probs.append(f"neither run succeeded: {[(r[0], r[2].strip()) for r in res]}")
        for rc, out, err in bad:
            lines = L.nonblank_lines(err)
            if rc != 1 or len(lines) != 1 or not lines[0].startswith("knmf: error: ") or "r.h5" not in lines[0]:
                probs.append(f"the refused run: exit {rc}, stderr {err.strip()!r}")
        ConcurrentNative.refusals += len(bad)
        if self.last and ConcurrentNative.refusals == 0:
            probs.append("no round overlapped (every second run found nothing to do): the race was not tested")
        if not probs:
            rc, out, err, _, _ = L.run_process([L.KNMF] + self.argv + ["-o", "alone.h5"], self.d, env, 120)
            if rc != 0:
                probs.append(f"the run alone failed: {err}")
            else:
                rc, out, err, _, _ = L.run_process([L.KNMF, "compare", "r.h5", "alone.h5", "--rtol", "1e-12"],
                                                   self.d, env, 60)
                if rc != 0:
                    probs.append(f"r.h5 differs from the run alone (compare exit {rc}): {(out + err)[-300:]}")
            why = results_complete(os.path.join(self.d, "r.h5"))(None)
            if why:
                probs.append(why)
        left = sorted(f for f in os.listdir(self.d) if f not in ("x.h5ad", "r.h5", "alone.h5"))
        if left:
            probs.append(f"left behind: {left}")
        lines = [f"{len(bad)} of 2 refused" + (f": {L.nonblank_lines(bad[0][2])[0]}" if bad else "")]
        return probs, lines, time.monotonic() - t0


class ConcurrentCnmf(Special):
    def __init__(self, ctx, name):
        self.name = name
        self.d = ctx.dir(name)
        x = _big_x()
        self.p = make_cnmf_run(self.d, yaml=YAML_BASE.replace("max_iter: 50", "max_iter: 400").replace(
            "tol: 0.0001", "tol: 0.0"), x_writer=lambda path: write_h5ad(path, x=x, fmt="dense",
                                                                          dense=x.astype(np.float32)))
        with open(os.path.join(self.p["dir"], "run.overdispersed_genes.txt"), "w") as f:
            f.write("".join(f"gene{j}\n" for j in range(x.shape[1])))

    def run(self):
        t0 = time.monotonic()
        probs = []
        argv = [L.KNMF] + cnmf_factorize_argv(self.d)
        ps = [subprocess.Popen(argv, cwd=self.d, env=L.knmf_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
              for _ in range(2)]
        res = [(p.wait(timeout=120), p.stdout.read().decode(), p.stderr.read().decode()) for p in ps]
        for p in ps:
            p.stdout.close()
            p.stderr.close()
        if not any(r[0] == 0 for r in res):
            probs.append(f"neither worker succeeded: {[(r[0], r[2].strip()) for r in res]}")
        for rc, out, err in res:
            lines = L.nonblank_lines(err)
            if rc != 0 and (rc != 1 or len(lines) != 1 or not lines[0].startswith("knmf: error: ")):
                probs.append(f"a worker: exit {rc}, stderr {err.strip()!r}")
        files = sorted(os.listdir(self.p["tmp"]))
        want = sorted([os.path.basename(self.p[k]) for k in ("x", "yaml", "jobs")] +
                      [f"run.spectra.k_{k}.iter_{i}.df.npz" for k, i, _ in job_rows()])
        if files != want:
            probs.append(f"cnmf_tmp holds {sorted(set(files) ^ set(want))} unexpectedly")
        for f in files:
            if ".spectra." in f:
                try:
                    with np.load(os.path.join(self.p["tmp"], f), allow_pickle=True) as z:
                        if z["data"].shape != (int(f.split(".k_")[1].split(".")[0]), 60):
                            probs.append(f"{f}: data of shape {z['data'].shape}")
                except Exception as e:  # noqa: BLE001
                    probs.append(f"{f} does not load with numpy: {e}")
        return probs, [f"exits {[r[0] for r in res]}"], time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--knmf", help="the knmf driver (the build's drivers/knmf)")
    ap.add_argument("--work", help="folder for the generated cases (emptied per family)")
    ap.add_argument("--family", action="append", default=[], help="a family to run (repeatable)")
    ap.add_argument("--all", action="store_true", help="every family")
    ap.add_argument("--case", help="only cases whose name contains this")
    ap.add_argument("--list", action="store_true", help="generate every family, print the counts, run nothing")
    ap.add_argument("--min-cases", type=int, default=0, help="with --list: fail below this many cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's stderr line")
    a = ap.parse_args()
    names = list(FAMILIES) if (a.all or a.list) else a.family
    for n in names:
        if n not in FAMILIES:
            ap.error(f"unknown family {n!r} (families: {', '.join(FAMILIES)})")
    if not names:
        ap.error("give --family NAME, --all or --list")
    if not a.work:
        ap.error("--work is required")
    L.KNMF = os.path.abspath(a.knmf) if a.knmf else None
    if not L.KNMF or not os.access(L.KNMF, os.X_OK):
        ap.error(f"--knmf {a.knmf!r} is not an executable")
    failed = total = 0
    t_all = time.monotonic()
    for n in names:
        ctx = Ctx(os.path.abspath(a.work), n)
        t0 = time.monotonic()
        cases = list(FAMILIES[n](ctx))
        counted = [c for c in cases if c.count]
        if a.list:
            print(f"{n:12s} {len(counted):4d} cases")
            total += len(counted)
            continue
        fam_failed = 0
        for c in cases:
            if a.case and a.case not in c.name:
                continue
            if isinstance(c, Special):
                problems, errl, secs = c.run()
            else:
                problems, errl, secs = L.check_case(c)
            tag = "ok  " if not problems else "FAIL"
            line = errl[-1] if errl else ""
            if problems or a.verbose:
                print(f"{tag} {n}/{c.name} ({secs:.2f} s){': ' + line if line else ''}")
            for p in problems:
                print(f"       - {p}")
            fam_failed += bool(problems)
            total += c.count
        print(f"{n}: {len(counted)} cases, {fam_failed} failed, {time.monotonic() - t0:.1f} s")
        failed += fam_failed
    if a.list:
        print(f"total {total} cases")
        if total < a.min_cases:
            print(f"FAIL: fewer than {a.min_cases} cases")
            return 1
        return 0
    print(f"corpus: {failed} failed, {time.monotonic() - t_all:.1f} s")
    return 1 if failed else 0



if __name__ == "__main__":
    sys.exit(main())
