#!/usr/bin/python3
"""Fixtures and golden values for knmf's .h5ad reader/writer (tests/io/test_h5ad*.cpp).

Run with Debian's Python stack (numpy 1.24, scipy, h5py 3.7, anndata 0.8):
    /usr/bin/python3 tests/scripts/make_h5ad_fixtures.py [--real tests/data/real]
Writes tests/data/h5ad/*.h5ad (tiny, valid and malformed) and tests/data/h5ad/golden.json.

golden.json holds
  * "fixtures": for each valid fixture its format, dtypes, the full matrix (dense, row-major)
    and the obs/var names;
  * "malformed": for each malformed fixture the substrings its one-line error must contain;
  * "real": shape, nnz, names and sums of the real matrices under tests/data/real (copies of ../shared/data).
Every number in the matrices is exactly representable in float32, so the test compares exactly.
"""
import argparse
import json
import math
import os
import shutil

import anndata
import h5py
import numpy as np
import pandas as pd
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "tests", "data", "h5ad")

# 6 cells x 5 genes; row 2 and column 3 are all zero; values exact in float32.
M = np.array([
    [1.0, 0.0, 2.5, 0.0, 4.0],
    [0.0, 0.0, 0.0, 0.0, 7.0],
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0, 0.125, 0.0, 0.0, 0.0],
    [0.0, 6.0, 1.0, 0.0, 2.0],
    [9.0, 0.0, 0.0, 0.0, 0.5],
])
MI = np.rint(M * 8).astype(np.int64)      # an integer-valued version (counts)
OBS = [f"cell{i}" for i in range(M.shape[0])]
VAR = ["GeneA", "GeneB", "Gène-β", "GeneD", "GeneE"]   # one non-ASCII UTF-8 name
VAR_ASCII = ["GeneA", "GeneB", "GeneC", "GeneD", "GeneE"]


def adata(X, obs=OBS, var=VAR):
    return anndata.AnnData(X=X, obs=pd.DataFrame(index=list(obs)),
                           var=pd.DataFrame(index=list(var)), dtype=X.dtype)


def write(name, ad):
    path = os.path.join(OUT, name)
    ad.write_h5ad(path, compression="gzip")
    return path


def replace_dataset(f, name, data, **kw):
    attrs = dict(f[name].attrs) if name in f else {}
    if name in f:
        del f[name]
    d = f.create_dataset(name, data=data, **kw)
    for k, v in attrs.items():
        d.attrs[k] = v
    return d


def record(golden, name, matrix, fmt, value_type, obs=OBS, var=VAR,
           index_type=None, indptr_type=None):
    golden["fixtures"][name] = {
        "format": fmt, "value_type": value_type,
        "index_type": index_type, "indptr_type": indptr_type,
        "shape": list(matrix.shape), "matrix": np.asarray(matrix, dtype=float).tolist(),
        "stored_nnz": None, "obs_names": list(obs), "var_names": list(var),
    }


def valid_fixtures(golden):
    # dense float32 / float64 / int64
    write("dense_f32.h5ad", adata(M.astype(np.float32)))
    record(golden, "dense_f32.h5ad", M, "dense", "float32")
    write("dense_f64.h5ad", adata(M.astype(np.float64)))
    record(golden, "dense_f64.h5ad", M, "dense", "float64")
    write("dense_i64.h5ad", adata(MI.astype(np.int64)))
    record(golden, "dense_i64.h5ad", MI, "dense", "int64")

    # CSR float32 (the common case), float64, integer values, CSC
    write("csr_f32.h5ad", adata(sp.csr_matrix(M.astype(np.float32))))
    record(golden, "csr_f32.h5ad", M, "csr", "float32", index_type="int32", indptr_type="int32")
    write("csr_f64.h5ad", adata(sp.csr_matrix(M.astype(np.float64))))
    record(golden, "csr_f64.h5ad", M, "csr", "float64", index_type="int32", indptr_type="int32")
    write("csr_int32_values.h5ad", adata(sp.csr_matrix(MI.astype(np.int32))))
    record(golden, "csr_int32_values.h5ad", MI, "csr", "int32", index_type="int32",
           indptr_type="int32")
    write("csc_f32.h5ad", adata(sp.csc_matrix(M.astype(np.float32))))
    record(golden, "csc_f32.h5ad", M, "csc", "float32", index_type="int32", indptr_type="int32")

    # CSR with int64 indices and indptr, uint16 values (rewritten with h5py)
    path = write("csr_i64_index.h5ad", adata(sp.csr_matrix(MI.astype(np.float32))))
    with h5py.File(path, "r+") as f:
        replace_dataset(f, "X/indices", f["X/indices"][:].astype(np.int64))
        replace_dataset(f, "X/indptr", f["X/indptr"][:].astype(np.int64))
        replace_dataset(f, "X/data", f["X/data"][:].astype(np.uint16))
    record(golden, "csr_i64_index.h5ad", MI, "csr", "uint16", index_type="int64",
           indptr_type="int64")

    # fixed-length (numpy 'S') names, NUL-padded ASCII; obs as space-padded fixed strings
    path = write("fixed_strings.h5ad", adata(sp.csr_matrix(M.astype(np.float32)), var=VAR_ASCII))
    with h5py.File(path, "r+") as f:
        replace_dataset(f, "var/_index", np.array(VAR_ASCII, dtype="S8"))
        attrs = dict(f["obs/_index"].attrs)
        del f["obs/_index"]
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(10)
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        space = h5py.h5s.create_simple((len(OBS),))
        dsid = h5py.h5d.create(f["obs"].id, b"_index", tid, space)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL,
                   np.array([s.ljust(10).encode() for s in OBS], dtype="S10"))
        for k, v in attrs.items():
            f["obs/_index"].attrs[k] = v
    record(golden, "fixed_strings.h5ad", M, "csr", "float32", var=VAR_ASCII,
           index_type="int32", indptr_type="int32")

    # the dataframe attribute _index names a non-default dataset (index.name set)
    ad = adata(sp.csr_matrix(M.astype(np.float32)))
    ad.var.index.name = "gene_ids"
    ad.obs.index.name = "barcodes"
    path = write("named_index.h5ad", ad)
    with h5py.File(path, "r") as f:
        assert f["var"].attrs["_index"] == "gene_ids" and "gene_ids" in f["var"]
        assert f["obs"].attrs["_index"] == "barcodes" and "barcodes" in f["obs"]
    record(golden, "named_index.h5ad", M, "csr", "float32", index_type="int32",
           indptr_type="int32")

    # pre-0.7 layout: X group tagged h5sparse_format="csr" + h5sparse_shape, obs/var as
    # structured (compound) datasets with an "index" field (fixed-length for var, vlen for obs)
    path = os.path.join(OUT, "legacy_compound.h5ad")
    X = sp.csr_matrix(M.astype(np.float32))
    with h5py.File(path, "w") as f:
        g = f.create_group("X")
        g.attrs["h5sparse_format"] = np.bytes_(b"csr")
        g.attrs["h5sparse_shape"] = np.array(M.shape, dtype=np.int64)
        g.create_dataset("data", data=X.data)
        g.create_dataset("indices", data=X.indices)
        g.create_dataset("indptr", data=X.indptr)
        var = np.array([(n.encode(), f"ENSG{i:05d}".encode()) for i, n in enumerate(VAR_ASCII)],
                       dtype=[("index", "S8"), ("gene_ids", "S9")])
        f.create_dataset("var", data=var)
        vs = h5py.string_dtype()
        obs = np.array([(n, i) for i, n in enumerate(OBS)],
                       dtype=[("n_genes", "<i4"), ("index", vs)][::-1])
        f.create_dataset("obs", data=obs)
    record(golden, "legacy_compound.h5ad", M, "csr", "float32", var=VAR_ASCII,
           index_type="int32", indptr_type="int32")

    for name, fx in golden["fixtures"].items():
        with h5py.File(os.path.join(OUT, name), "r") as f:
            x = f["X"]
            fx["stored_nnz"] = int(x["data"].shape[0]) if isinstance(x, h5py.Group) \
                else int(np.prod(x.shape))


def malformed_fixtures(golden):
    base = os.path.join(OUT, "csr_f32.h5ad")
    bad = {}

    def variant(name, edit, expect, source=base):
        path = os.path.join(OUT, name)
        shutil.copyfile(source, path)
        with h5py.File(path, "r+") as f:
            edit(f)
        bad[name] = expect

    def no_x(f):
        del f["X"]
    variant("bad_no_x.h5ad", no_x, ["not an AnnData file", "no /X"])

    def indptr_not_monotone(f):
        p = f["X/indptr"][:]
        p[4] = 3                         # [0, 3, 4, 4, 3, 9, 11]: indptr[4] < indptr[3]
        replace_dataset(f, "X/indptr", p)
    variant("bad_indptr_not_monotone.h5ad", indptr_not_monotone,
            ["/X/indptr", "non-decreasing"])

    def index_out_of_range(f):
        i = f["X/indices"][:]
        i[4] = 5                         # row 3 (entries 4,5), n_vars = 5
        replace_dataset(f, "X/indices", i)
    variant("bad_index_out_of_range.h5ad", index_out_of_range,
            ["/X/indices", "out of range", "row 3"])

    def shape_mismatch(f):
        f["X"].attrs["shape"] = np.array([7, 5], dtype=np.int64)
    variant("bad_shape_mismatch.h5ad", shape_mismatch, ["/X/indptr", "shape"])

    def indptr_end(f):
        p = f["X/indptr"][:]
        p[-1] -= 1
        replace_dataset(f, "X/indptr", p)
    variant("bad_indptr_end.h5ad", indptr_end, ["/X/indptr", "nnz"])

    def data_len(f):
        replace_dataset(f, "X/data", f["X/data"][:-1])
    variant("bad_data_length.h5ad", data_len, ["/X/data", "/X/indices"])

    def nan_value(f):
        d = f["X/data"][:]
        d[5] = np.nan                    # row 3, column 1
        replace_dataset(f, "X/data", d)
    variant("bad_nan_value.h5ad", nan_value, ["/X/data", "nan", "row 3", "column 1"])

    def negative_value(f):
        d = f["X/data"][:]
        d[6] = -6.0                      # row 4, column 1
        replace_dataset(f, "X/data", d)
    variant("bad_negative_value.h5ad", negative_value,
            ["/X/data", "-6", "row 4", "column 1", "negative"])

    # CSC (converted to CSR on read): the messages still give the cell row and gene column
    csc = os.path.join(OUT, "csc_f32.h5ad")

    def csc_negative(f):
        d = f["X/data"][:]
        d[4] = -6.0                      # column 1 holds rows 3, 4: entry 4 is row 4
        replace_dataset(f, "X/data", d)
    variant("bad_csc_negative.h5ad", csc_negative,
            ["/X/data[4]", "-6", "row 4", "column 1", "negative"], source=csc)

    def csc_row_out_of_range(f):
        i = f["X/indices"][:]
        i[3] = 6                         # entry 3 is in column 1; n_obs = 6
        replace_dataset(f, "X/indices", i)
    variant("bad_csc_index_out_of_range.h5ad", csc_row_out_of_range,
            ["/X/indices[3]", "out of range", "column 1"], source=csc)

    def x_rank1(f):
        del f["X"]
        f.create_dataset("X", data=np.arange(5, dtype=np.float32))
    variant("bad_dense_rank1.h5ad", x_rank1, ["/X", "rank 1"])

    def dense_inf(f):
        del f["X"]
        d = M.astype(np.float32).copy()
        d[4, 2] = np.inf
        f.create_dataset("X", data=d)
    variant("bad_dense_inf.h5ad", dense_inf, ["/X", "inf", "row 4", "column 2"])

    def x_group_unknown(f):
        del f["X"].attrs["encoding-type"]
    variant("bad_x_not_sparse.h5ad", x_group_unknown, ["/X", "encoding-type"])

    def var_missing(f):
        del f["var"]
    variant("bad_no_var.h5ad", var_missing, ["/var"])

    def var_wrong_length(f):
        replace_dataset(f, "var/_index", np.array(VAR_ASCII[:4], dtype=object),
                        dtype=h5py.string_dtype())
    variant("bad_var_length.h5ad", var_wrong_length, ["/var/_index", "4", "5"])

    # an HDF5 file that is not AnnData; a file that is not HDF5 at all
    path = os.path.join(OUT, "bad_not_anndata.h5ad")
    with h5py.File(path, "w") as f:
        f.create_dataset("matrix/data", data=np.arange(4.0))
    bad["bad_not_anndata.h5ad"] = ["not an AnnData file", "no /X"]
    with open(os.path.join(OUT, "bad_not_hdf5.h5ad"), "w") as f:
        f.write("cell,GeneA\ncell0,1\n")
    bad["bad_not_hdf5.h5ad"] = ["not an HDF5 file"]

    # truncated: the end of a valid file cut off (HDF5 notices at open: EOF < stored EOA)
    with open(base, "rb") as f:
        raw = f.read()
    with open(os.path.join(OUT, "bad_truncated.h5ad"), "wb") as f:
        f.write(raw[: len(raw) * 2 // 3])
    bad["bad_truncated.h5ad"] = ["truncated"]

    # a corrupted gzip chunk inside /X/data: the read fails and the message names the dataset
    path = os.path.join(OUT, "bad_corrupt_chunk.h5ad")
    shutil.copyfile(base, path)
    with h5py.File(path, "r") as f:
        info = f["X/data"].id.get_chunk_info(0)
    with open(path, "r+b") as f:
        f.seek(info.byte_offset)
        f.write(b"\xff" * info.size)
    bad["bad_corrupt_chunk.h5ad"] = ["/X/data", "cannot read"]

    golden["malformed"] = bad


def real_golden(golden, real_dir):
    files = {
        "pbmc1k-v3-chr21": "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
        "mouse-brain-e18-10k": "mouse-brain-e18-10k/mouse-brain-e18-10k.h5ad",
        "pbmcA.norm_counts": "cnmf-pbmc-donor-a/prepare/pbmcA/cnmf_tmp/pbmcA.norm_counts.h5ad",
    }
    real = {}
    for key, rel in files.items():
        ad = anndata.read_h5ad(os.path.join(real_dir, rel))
        X = sp.csr_matrix(ad.X)
        n, g = X.shape
        rows = sorted({0, 1, 2, 7, n // 2, n - 1})
        cols = sorted({0, 1, g // 2, g - 1})
        Xd64 = X.astype(np.float64)
        row_sums = {str(r): math.fsum(Xd64.data[X.indptr[r]:X.indptr[r + 1]]) for r in rows}
        csc = Xd64.tocsc()
        col_sums = {str(c): math.fsum(csc.data[csc.indptr[c]:csc.indptr[c + 1]]) for c in cols}
        with h5py.File(os.path.join(real_dir, rel), "r") as f:
            dtypes = {k: str(f["X"][k].dtype) for k in ("data", "indices", "indptr")}
        real[key] = {
            "path": rel, "n_obs": n, "n_vars": g, "nnz": int(X.nnz),
            "value_type": dtypes["data"], "index_type": dtypes["indices"],
            "indptr_type": dtypes["indptr"],
            "var_first": list(ad.var_names[:5]), "var_last": list(ad.var_names[-5:]),
            "obs_first": list(ad.obs_names[:3]), "obs_last": list(ad.obs_names[-3:]),
            "row_nnz": {str(r): int(X.indptr[r + 1] - X.indptr[r]) for r in rows},
            "row_sums": row_sums, "col_sums": col_sums,
            "total_sum": math.fsum(Xd64.data), "max": float(Xd64.data.max()),
        }
    golden["real"] = real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", default=os.path.join(REPO, "tests", "data", "real"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".h5ad"):
            os.remove(os.path.join(OUT, f))
    golden = {"anndata_version": anndata.__version__, "h5py_version": h5py.__version__,
              "fixtures": {}}
    valid_fixtures(golden)
    malformed_fixtures(golden)
    real_golden(golden, args.real)
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
