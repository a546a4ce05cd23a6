#!/usr/bin/python3
"""Seed corpora of knmf's libFuzzer harnesses: tests/fuzz/corpus/<harness>/.

Run with Debian's Python stack (numpy 1.24, pandas 1.5, h5py 3.7):
    /usr/bin/python3 tests/fuzz/make_seeds.py
Small valid inputs as numpy, pandas, cNMF and h5py write them, plus edge cases (empty, 0-d,
big-endian, Fortran order, ZIP64, stored members, legacy h5ad layouts) and a few refused ones.
The seed corpora also take the small fixtures of tests/data (copied here, so that a fixture's
change does not silently change the fuzz seeds), and crash inputs found by the fuzzers are
added under their own name (regressions) -- this script never deletes files it did not write.
Nothing here unpickles anything.
"""
import io
import os
import pickle
import shutil
import struct
import zipfile

import h5py
import numpy as np
import pandas as pd
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
DATA = os.path.join(ROOT, "tests", "data")


def out(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as fh:
        fh.write(data)


def copy(harness, src, name=None):
    with open(src, "rb") as fh:
        out(harness, name or os.path.basename(src), fh.read())


def npy(arr, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def npz(compressed=True, zip64=False, **arrays):
    """np.savez(_compressed) bytes; zip64 forces ZIP64 records as numpy does for big members."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=method, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=zip64) as fh:
                fh.write(npy(arr))
    return buf.getvalue()


def df_npz(df, **kw):
    """cNMF's save_df_to_npz: np.savez_compressed(data=values, index=..., columns=...)."""
    return npz(data=df.values, index=df.index.values, columns=df.columns.values, **kw)


def seeds_npy():
    h = "npy"
    for f in sorted(os.listdir(os.path.join(DATA, "io"))):
        if f.endswith(".npy"):
            copy(h, os.path.join(DATA, "io", f))
    out(h, "u1_2d.npy", npy(np.arange(6, dtype=np.uint8).reshape(2, 3)))
    out(h, "u8_1d.npy", npy(np.array([0, 2**63 - 1], dtype=np.uint64)))
    out(h, "i2_be.npy", npy(np.array([-3, 7], dtype=">i2")))
    out(h, "f4_nan_inf.npy", npy(np.array([np.nan, np.inf, -0.0, 1e-45], dtype=np.float32)))
    out(h, "u_3.npy", npy(np.array(["a", "\u00e9\u4e2d", ""], dtype="<U3")))
    out(h, "zero_rows.npy", npy(np.zeros((0, 4))))
    out(h, "v3_header.npy", npy(np.array(["x"]), version=(3, 0)))
    out(h, "object_1d.npy", npy(np.array([None, True, 3, 2.5, "gene"], dtype=object)))
    out(h, "truncated.npy", npy(np.arange(8.0))[:-5])


def seeds_pickle():
    h = "pickle"
    for f in sorted(os.listdir(os.path.join(DATA, "io"))):
        if f.endswith(".npy") and (f.startswith("object") or f.startswith("pickle")):
            with open(os.path.join(DATA, "io", f), "rb") as fh:
                raw = fh.read()
            # The pickle after the .npy header (magic 6, version 2, length 2 in v1.0).
            hlen = struct.unpack("<H", raw[8:10])[0]
            out(h, f.replace(".npy", ".pkl"), raw[10 + hlen:])
    arr = np.array([None, False, -1, 2**40, 0.5, "n", np.int64(5), np.float32(1.5), np.str_("s")],
                   dtype=object)
    for proto in (2, 3, 4, 5):
        out(h, "cells_p%d.pkl" % proto, pickle.dumps(arr, protocol=proto))
    grid = np.array([["a", 1], [None, 2.0]], dtype=object)
    out(h, "grid_c.pkl", pickle.dumps(grid, protocol=4))
    out(h, "grid_f.pkl", pickle.dumps(np.asfortranarray(grid), protocol=2))
    out(h, "empty.pkl", pickle.dumps(np.array([], dtype=object), protocol=3))


def seeds_zip():
    h = "zip"
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    out(h, "savez.npz", npz(compressed=False, a=a, b=np.array(["x", "yz"])))
    out(h, "savez_compressed.npz", npz(a=a, o=np.array([1, "two", None], dtype=object)))
    out(h, "zip64.npz", npz(zip64=True, a=np.arange(5, dtype=np.int32)))
    out(h, "empty_member.npz", npz(e=np.zeros(0)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "not an array")
        zf.comment = b"archive comment"
    out(h, "comment_text.zip", buf.getvalue())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w"):
        pass
    out(h, "empty.zip", buf.getvalue())
    for f in ("bad_crc.df.npz", "not_a_zip.df.npz"):
        copy(h, os.path.join(DATA, "io", f))


def spectra_frame(k, genes, iters):
    rows, labels = [], []
    rng = np.random.RandomState(0)
    for r in iters:
        for t in range(1, k + 1):
            labels.append("iter%d_topic%d" % (r, t))
            rows.append(rng.rand(len(genes)))
    return pd.DataFrame(np.array(rows), index=labels, columns=genes)


def seeds_dataframe():
    h = "dataframe"
    genes = ["Gene%d" % i for i in range(5)]
    out(h, "merged_k2.df.npz", df_npz(spectra_frame(2, genes, [0, 1])))
    out(h, "merged_k1.df.npz", df_npz(spectra_frame(1, genes[:2], [3])))
    rep = pd.DataFrame(np.arange(10.0).reshape(2, 5), index=[1, 2], columns=genes)
    out(h, "replicate_k2.df.npz", df_npz(rep))
    out(h, "float32.df.npz", df_npz(rep.astype(np.float32)))
    out(h, "int_frame.df.npz", df_npz(pd.DataFrame(np.arange(6).reshape(3, 2), columns=["a", "b"])))
    out(h, "object_frame.df.npz",
        df_npz(pd.DataFrame({"n": [1, 2], "name": ["x", None], "v": [0.5, True]})))
    out(h, "empty.df.npz", df_npz(pd.DataFrame(np.zeros((0, 3)), columns=genes[:3])))
    out(h, "stored_zip64.df.npz", df_npz(rep, compressed=False, zip64=True))
    for f in ("bad_crc.df.npz", "malicious_index.df.npz"):
        copy(h, os.path.join(DATA, "io", f))
    ref = os.path.join(DATA, "real", "cnmf-pbmc-donor-a", "reference", "pbmcA")
    copy(h, os.path.join(ref, "pbmcA.k_selection_stats.df.npz"))
    copy(h, os.path.join(ref, "cnmf_tmp", "pbmcA.local_density_cache.k_7.merged.df.npz"))


def job_table(ks, n_iter, seed, extra=True):
    """cNMF prepare's job table (cnmf.py: _nmf_params DataFrame with a 'completed' column)."""
    np.random.seed(seed)
    seeds = np.random.randint(low=1, high=(2**31) - 1, size=len(ks) * n_iter)
    rows = [[k, i] for k in sorted(set(ks)) for i in range(n_iter)]
    df = pd.DataFrame(rows, columns=["n_components", "iter"])
    df["nmf_seed"] = seeds
    if extra:
        df["completed"] = False
    return df


def seeds_job_table():
    h = "job_table"
    copy(h, os.path.join(DATA, "real", "cnmf-pbmc-donor-a", "prepare", "pbmcA", "cnmf_tmp",
                         "pbmcA.nmf_params.df.npz"))
    out(h, "k3-4_n2.df.npz", df_npz(job_table([3, 4], 2, 14)))  # object frame (bool column)
    out(h, "k5_n3_int.df.npz", df_npz(job_table([5], 3, 1, extra=False)))  # int64 frame
    out(h, "float.df.npz", df_npz(job_table([2], 2, 7, extra=False).astype(np.float64)))
    dup = job_table([3], 2, 5, extra=False)
    dup.loc[1, "iter"] = 0
    out(h, "duplicate_job.df.npz", df_npz(dup))


def seeds_nmf_params():
    h = "nmf_params"
    for f in sorted(os.listdir(os.path.join(DATA, "io"))):
        if f.endswith(".yaml"):
            copy(h, os.path.join(DATA, "io", f))
    kw = dict(alpha_W=0.0, alpha_H=0.0, l1_ratio=0.0, beta_loss="frobenius", solver="cd",
              tol=1e-4, max_iter=1000, init="random")
    out(h, "cnmf_default.yaml", yaml.dump(kw).encode())
    kw2 = dict(kw, alpha_H="same", beta_loss="kullback-leibler", solver="mu", init="nndsvda",
               l1_ratio=0.5, tol=1e-6)
    out(h, "mu_kl.yaml", yaml.dump(kw2).encode())
    out(h, "flow_style.yaml", yaml.dump(kw, default_flow_style=True).encode())
    out(h, "extra_keys.yaml", yaml.dump(dict(kw, verbose=1, random_state=None)).encode())
    out(h, "anchors.yaml", b"base: &b 0.0\nalpha_W: *b\nalpha_H: *b\nl1_ratio: !!float 0\n"
                           b"tol: 1.0e-4\nmax_iter: 0x10\nbeta_loss: frobenius\ninit: random\n"
                           b"solver: cd\n---\nsecond: doc\n")


def seeds_spectra_name():
    h = "spectra_name"
    for i, s in enumerate([
            "pbmcA.spectra.k_7.iter_0.df.npz", "pbmcA.spectra.k_12.merged.df.npz",
            "run.v2.spectra.k_3.iter_199.df.npz", "a.spectra.k_0.iter_1.df.npz",
            "pbmcA.usages.k_7.iter_0.df.npz", ".spectra.k_1.merged.df.npz",
            "x.spectra.k_123456789.iter_123456789.df.npz", "iter0_topic1", "iter12_topic7",
            "iter_topic1", "iter3_topic0"]):
        out(h, "name%02d" % i, s.encode())


def h5_small(path, build, libver="latest"):
    with h5py.File(path, "w", libver=libver) as f:
        build(f)


def seeds_h5ad(tmp):
    h = "h5ad"
    for f in ("csr_f32.h5ad", "csc_f32.h5ad", "dense_f64.h5ad", "legacy_compound.h5ad",
              "fixed_strings.h5ad", "csr_i64_index.h5ad", "bad_indptr_not_monotone.h5ad",
              "bad_truncated.h5ad"):
        copy(h, os.path.join(DATA, "h5ad", f))
    str_dt = h5py.string_dtype("utf-8")
    M = np.array([[0, 1.5, 0], [2, 0, 0], [0, 0, 3], [0, 0, 0]], dtype=np.float32)

    def names(f, n_obs, n_vars):
        for elem, n, pre in (("obs", n_obs, "c"), ("var", n_vars, "g")):
            g = f.create_group(elem)
            g.attrs["_index"] = "_index"
            g.attrs["encoding-type"] = "dataframe"
            g.create_dataset("_index", data=np.array([pre + str(i) for i in range(n)], dtype=object),
                             dtype=str_dt)

    def sparse(kind):
        def build(f):
            import scipy.sparse as sp
            S = sp.csr_matrix(M) if kind == "csr" else sp.csc_matrix(M)
            g = f.create_group("X")
            g.attrs["encoding-type"] = kind + "_matrix"
            g.attrs["encoding-version"] = "0.1.0"
            g.attrs["shape"] = np.array(M.shape, dtype=np.int64)
            g.create_dataset("data", data=S.data)
            g.create_dataset("indices", data=S.indices.astype(np.int32))
            g.create_dataset("indptr", data=S.indptr.astype(np.int64))
            names(f, *M.shape)
        return build

    def dense(f):
        f.create_dataset("X", data=M.astype(np.float64), chunks=(2, 3), compression="gzip")
        names(f, *M.shape)

    def legacy(f):
        import scipy.sparse as sp
        S = sp.csr_matrix(M)
        g = f.create_group("X")
        g.attrs["h5sparse_format"] = np.bytes_(b"csr")
        g.attrs["h5sparse_shape"] = np.array(M.shape, dtype=np.int64)
        g.create_dataset("data", data=S.data.astype(np.int16))
        g.create_dataset("indices", data=S.indices.astype(np.uint8))
        g.create_dataset("indptr", data=S.indptr.astype(np.int32))
        for elem, n in (("obs", 4), ("var", 3)):
            dt = np.dtype([("index", "S4")])
            f.create_dataset(elem, data=np.array([(b"n%d" % i,) for i in range(n)], dtype=dt))

    for name, build in (("csr_small.h5ad", sparse("csr")), ("csc_small.h5ad", sparse("csc")),
                        ("dense_gzip.h5ad", dense), ("legacy_small.h5ad", legacy)):
        p = os.path.join(tmp, name)
        h5_small(p, build)
        copy(h, p)


def main():
    import tempfile
    seeds_npy()
    seeds_pickle()
    seeds_zip()
    seeds_dataframe()
    seeds_job_table()
    seeds_nmf_params()
    seeds_spectra_name()
    tmp = tempfile.mkdtemp()
    try:
        seeds_h5ad(tmp)
    finally:
        shutil.rmtree(tmp)
    for d in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, d))
        size = sum(os.path.getsize(os.path.join(CORPUS, d, f)) for f in files)
        print("%-14s %3d files %7d bytes" % (d, len(files), size))


if __name__ == "__main__":
    main()
