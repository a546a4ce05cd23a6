#!/usr/bin/python3
"""Golden values for knmf's .npy/.npz/DataFrame readers and writers (tests/io/).

Run with Debian's Python stack (numpy 1.24, pandas 1.5):
    /usr/bin/python3 tests/scripts/make_golden_io.py [REAL_DIR]
REAL_DIR defaults to tests/data/real (copies of ../shared/data, tests/scripts/make_real_fixtures.py);
the "file" paths below are relative to it. Writes tests/data/io_golden.json:

* "reference": for each cNMF .df.npz of the pbmc-donor-a reference run, loaded exactly as cNMF
  loads it (pd.DataFrame(**np.load(path, allow_pickle=True))): shape, dtype, a CRC-32 of the
  values in C order (in their stored dtype), CRC-32s of the labels joined by newlines, the
  first/last labels, sampled values (float.hex, exact), and a CRC-32 + length of what
  df.to_csv(path, sep='\\t') writes (the .txt copies cNMF makes).
* "float_repr": doubles and float32s with the text pandas' to_csv writes for them.
* "to_csv": small crafted frames (special floats, quoting, int/bool/float32 data) and their
  exact to_csv text.
"""
import io
import json
import os
import sys
import zlib

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REAL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests", "data", "real")
RUN = "cnmf-pbmc-donor-a"

FILES = [
    "prepare/pbmcA/cnmf_tmp/pbmcA.nmf_params.df.npz",
    "prepare/pbmcA/cnmf_tmp/pbmcA.tpm_stats.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.spectra.k_5.merged.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.spectra.k_6.merged.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.spectra.k_7.merged.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.spectra.k_8.merged.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.local_density_cache.k_7.merged.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.spectra.k_7.dt_0_5.consensus.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.usages.k_7.dt_0_5.consensus.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.gene_spectra_score.k_7.dt_0_5.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.gene_spectra_tpm.k_7.dt_0_5.df.npz",
    "reference/pbmcA/cnmf_tmp/pbmcA.starcat_spectra.k_7.dt_0_5.df.npz",
    "reference/pbmcA/pbmcA.k_selection_stats.df.npz",
]


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def label_json(v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, str):
        return v
    raise TypeError("unexpected label %r" % (v,))


def labels_crc(labels):
    return crc("\n".join(str(label_json(v)) for v in labels).encode("utf-8"))


def cell_json(v):
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v).hex()
    return str(v)


def reference_entry(rel):
    path = os.path.join(REAL, RUN, rel)
    with np.load(path, allow_pickle=True) as f:
        raw = {k: f[k] for k in f.files}
        df = pd.DataFrame(**f)
    values = raw["data"]
    rows, cols = values.shape
    e = {
        "file": RUN + "/" + rel,
        "rows": rows,
        "cols": cols,
        "descr": values.dtype.str,
        "fortran_order": bool(values.flags.f_contiguous and not values.flags.c_contiguous),
        "index_descr": raw["index"].dtype.str,
        "columns_descr": raw["columns"].dtype.str,
        "index_crc32": labels_crc(df.index),
        "columns_crc32": labels_crc(df.columns),
        "index_head": [label_json(v) for v in df.index[:3]],
        "index_tail": [label_json(v) for v in df.index[-3:]],
        "columns_head": [label_json(v) for v in df.columns[:3]],
        "columns_tail": [label_json(v) for v in df.columns[-3:]],
    }
    rng = np.random.RandomState(7)
    picks = [(0, 0), (rows - 1, cols - 1), (0, cols - 1), (rows - 1, 0)]
    picks += [(int(rng.randint(rows)), int(rng.randint(cols))) for _ in range(8)]
    if values.dtype == object:
        e["cells"] = [[r, c, cell_json(values[r, c])] for r, c in picks]
    else:
        e["data_crc32"] = crc(np.ascontiguousarray(values).tobytes())
        e["values"] = [[r, c, float(values[r, c]).hex()] for r, c in picks]
        buf = io.StringIO()
        df.to_csv(buf, sep="\t")
        text = buf.getvalue().encode("utf-8")
        e["to_csv_crc32"] = crc(text)
        e["to_csv_bytes"] = len(text)
    return e


def to_csv_text(df):
    buf = io.StringIO()
    df.to_csv(buf, sep="\t")
    return buf.getvalue()


def float_repr_cases():
    rng = np.random.RandomState(11)
    doubles = [0.0, -0.0, 1.0, 0.1, 1e-4, 1e-5, 9.999999999999999e-05, 1e16, 9999999999999998.0,
               1e15, 123456789.123, 1 / 3, 2 / 3, 5e-324, 2.2250738585072014e-308,
               1.7976931348623157e308, 100.0, 1e22, 1.5e-7, 0.5, 12345.678, -2.5e-10, 3e100]
    mags = rng.uniform(-12, 20, size=300)
    doubles += list(rng.uniform(-1, 1, size=300) * 10.0 ** mags)
    doubles += list(np.round(rng.uniform(0, 1e6, size=40)))  # integral values
    floats = [0.0, -0.0, 1.0, 0.1, 1e-4, 1e-5, 1e16, 9.999999e15, 123456789.0, 1 / 3, 1e-45,
              3.4028235e38, 100.0, 0.2, 7.0e-3]
    floats += list(rng.uniform(-1, 1, size=300) * 10.0 ** rng.uniform(-12, 20, size=300))
    d = np.array(doubles, dtype=np.float64)
    f = np.array(floats, dtype=np.float32)
    # Exactly the path pandas 1.5 takes in to_csv for float blocks: values.astype(str).
    return {
        "float64": [[float(x).hex(), s] for x, s in zip(d, d.astype(str))],
        "float32": [[float(x).hex(), s] for x, s in zip(f, f.astype(str))],
    }


def frame_json(df, descr):
    return {
        "descr": descr,
        "index": [label_json(v) for v in df.index],
        "columns": [label_json(v) for v in df.columns],
        "values": [[float(v).hex() for v in row] for row in df.values.astype(np.float64)],
        "text": to_csv_text(df),
    }


def to_csv_cases():
    special = np.array([[0.1, 1e-5, 1e16, 123456789.123],
                        [-0.0, np.nan, np.inf, 1 / 3],
                        [5e-324, 1.7976931348623157e308, 100.0, 1e-4]])
    cols = ["a b", 'c"d', "e\tf", "g\u00e9"]
    f64 = pd.DataFrame(special, index=[1, 2, 3], columns=cols)
    f32 = pd.DataFrame(np.array([[0.1, 1e-4, 123456789.123], [1 / 3, np.nan, -2.5]], dtype=np.float32),
                       index=["cellA", "cellB"], columns=[1, 2, 3])
    ints = pd.DataFrame(np.array([[1, 2], [3, -4], [2**40, 0]], dtype=np.int64), index=["x", "y", "z"],
                        columns=["n_components", "iter"])
    bools = pd.DataFrame(np.array([[True, False]]), index=["r"], columns=[5, 6])
    return [frame_json(f64, "<f8"), frame_json(f32, "<f4"), frame_json(ints, "<i8"),
            frame_json(bools, "|b1")]


def main():
    out = {
        "numpy_version": np.__version__,
        "pandas_version": pd.__version__,
        "reference": [reference_entry(rel) for rel in FILES],
        "float_repr": float_repr_cases(),
        "to_csv": to_csv_cases(),
    }
    dst = os.path.join(REPO, "tests", "data", "io_golden.json")
    with open(dst, "w") as fh:
        json.dump(out, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print("wrote", dst)


if __name__ == "__main__":
    main()
