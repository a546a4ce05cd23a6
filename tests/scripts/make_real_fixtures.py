#!/usr/bin/python3
"""Copy the real-data fixtures the tests read from ../shared/data into tests/data/real.

    /usr/bin/python3 tests/scripts/make_real_fixtures.py [--shared ../shared]

Needs Debian's python3-numpy and python3-h5py, and h5repack (Debian's hdf5-tools) for the two
raw count matrices. What it writes (tests/data/real/README.md says the same, with provenance):

  * the files of FILES, under the same relative paths as in ../shared/data; byte-for-byte
    copies, except the raw count matrices in REPACK, which are rewritten by
    `h5repack -f SHUF -f GZIP=9` (shuffle + deflate 9 instead of deflate 4: 1.8 MB less). The
    script checks that every group, dataset (shape, dtype, values) and attribute of a repacked
    file equals the original's;
  * cnmf-pbmc-donor-a/tpm_fingerprint.json: cNMF's prepare also wrote pbmcA.tpm.h5ad (6.5 MB,
    the TPM of every gene), which the tests derive instead (knmf's prepare on the raw counts)
    and check against this fingerprint of cNMF's file (shape, nnz, a 64-bit hash of the CSR
    entries in canonical order and of the obs/var names; see fingerprint() below and
    tests/support/test_support.cpp, which computes the same hash);
  * MANIFEST.sha256: sha256 of every committed file and of its source in ../shared/data.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "tests", "data", "real")

PREP = "cnmf-pbmc-donor-a/prepare/pbmcA"
REF = "cnmf-pbmc-donor-a/reference"
FILES = [
    "pbmc-donor-a/pbmc-donor-a.h5ad",
    "mouse-brain-e18-10k/mouse-brain-e18-10k.h5ad",
    "pbmc1k-v3-chr21/pbmc1k-v3-chr21.h5ad",
    "cnmf-pbmc-donor-a/README.md",
    f"{PREP}/pbmcA.overdispersed_genes.txt",
    f"{PREP}/cnmf_tmp/pbmcA.nmf_idvrun_params.yaml",
    f"{PREP}/cnmf_tmp/pbmcA.nmf_params.df.npz",
    f"{PREP}/cnmf_tmp/pbmcA.norm_counts.h5ad",
    f"{PREP}/cnmf_tmp/pbmcA.tpm_stats.df.npz",
    f"{REF}/sklearn_cd_jobs.jsonl",
    f"{REF}/pbmcA/pbmcA.k_selection.png",
    f"{REF}/pbmcA/pbmcA.k_selection_stats.df.npz",
] + [f"{REF}/pbmcA/cnmf_tmp/pbmcA.spectra.k_{k}.merged.df.npz" for k in (5, 6, 7, 8)] + [
    f"{REF}/pbmcA/cnmf_tmp/pbmcA.{f}.df.npz" for f in (
        "gene_spectra_score.k_7.dt_0_5", "gene_spectra_tpm.k_7.dt_0_5",
        "local_density_cache.k_7.merged", "spectra.k_7.dt_0_5.consensus",
        "starcat_spectra.k_7.dt_0_5", "usages.k_7.dt_0_5.consensus")
]
REPACK = {"pbmc-donor-a/pbmc-donor-a.h5ad", "mouse-brain-e18-10k/mouse-brain-e18-10k.h5ad"}
TPM = f"{PREP}/cnmf_tmp/pbmcA.tpm.h5ad"

M64 = (1 << 64) - 1
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(z):
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_words(words):
    """sum_i splitmix64(w_i + (i + 1) * golden) mod 2^64: order-sensitive, vectorizable."""
    words = np.asarray(words, dtype=np.uint64)
    with np.errstate(over="ignore"):
        idx = np.arange(1, words.size + 1, dtype=np.uint64) * GOLDEN
        return int(np.sum(splitmix64(words + idx), dtype=np.uint64))


def fingerprint_csr(indptr, indices, data):
    """Hash of a float32 CSR matrix: the row offsets, then each row's entries sorted by column
    as (column << 32 | float32 bits)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    bits = np.asarray(data, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    order = np.lexsort((indices, rows))
    entries = (indices[order].astype(np.uint64) << np.uint64(32)) | bits[order]
    return (hash_words(indptr.astype(np.uint64)) * 3 + hash_words(entries)) & M64


def fingerprint_names(names):
    """Hash of a list of names: their UTF-8 bytes, each name followed by a 0 byte."""
    b = b"".join(n.encode("utf-8") + b"\0" for n in names)
    return hash_words(np.frombuffer(b, dtype=np.uint8))


def names(f, group):
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in f[group]["_index"][()]]


def same_h5(a, b):
    """Every group, dataset and attribute of HDF5 file a equals b's."""
    fa, fb = h5py.File(a, "r"), h5py.File(b, "r")
    seen = []

    def attrs_equal(x, y, name):
        if sorted(x.attrs.keys()) != sorted(y.attrs.keys()):
            raise SystemExit(f"{b}: attributes of {name} differ")
        for k in x.attrs:
            if not np.array_equal(np.asarray(x.attrs[k]), np.asarray(y.attrs[k])):
                raise SystemExit(f"{b}: attribute {name}@{k} differs")

    def visit(name, obj):
        seen.append(name)
        other = fb.get(name)
        if other is None or type(other) is not type(obj):
            raise SystemExit(f"{b}: {name} missing or of another kind")
        attrs_equal(obj, other, name)
        if isinstance(obj, h5py.Dataset):
            if obj.shape != other.shape or obj.dtype != other.dtype:
                raise SystemExit(f"{b}: {name} has another shape or dtype")
            if not np.array_equal(obj[()], other[()]):
                raise SystemExit(f"{b}: values of {name} differ")

    attrs_equal(fa, fb, "/")
    fa.visititems(visit)
    extra = []
    fb.visit(lambda n: extra.append(n) if n not in seen else None)
    if extra:
        raise SystemExit(f"{b}: extra objects {extra}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(REPO), "shared"))
    args = ap.parse_args()
    src_root = os.path.join(args.shared, "data")
    manifest = []
    for rel in FILES:
        src, dst = os.path.join(src_root, rel), os.path.join(OUT, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.exists(dst):
            os.chmod(dst, 0o644)
            os.remove(dst)
        if rel in REPACK:
            subprocess.run(["h5repack", "-f", "SHUF", "-f", "GZIP=9", src, dst], check=True)
            same_h5(src, dst)
        else:
            shutil.copyfile(src, dst)
        os.chmod(dst, 0o644)
        manifest.append(f"{sha256(dst)}  {rel}  (source sha256 {sha256(src)})")
        print(f"{rel}: {os.path.getsize(src)} -> {os.path.getsize(dst)} bytes")

    with h5py.File(os.path.join(src_root, TPM), "r") as f:
        X = f["X"]
        shape = [int(s) for s in X.attrs["shape"]]
        fp = {
            "file": TPM,
            "source_sha256": sha256(os.path.join(src_root, TPM)),
            "n_obs": shape[0],
            "n_vars": shape[1],
            "nnz": int(X["data"].shape[0]),
            "dtype": str(X["data"].dtype),
            "matrix_hash": f"{fingerprint_csr(X['indptr'][()], X['indices'][()], X['data'][()]):016x}",
            "obs_names_hash": f"{fingerprint_names(names(f, 'obs')):016x}",
            "var_names_hash": f"{fingerprint_names(names(f, 'var')):016x}",
            "hash": "see tests/scripts/make_real_fixtures.py: fingerprint_csr, fingerprint_names",
        }
    fp_path = os.path.join(OUT, "cnmf-pbmc-donor-a", "tpm_fingerprint.json")
    with open(fp_path, "w") as f:
        json.dump(fp, f, indent=1)
        f.write("\n")
    manifest.append(f"{sha256(fp_path)}  cnmf-pbmc-donor-a/tpm_fingerprint.json  (made by this script)")
    with open(os.path.join(OUT, "MANIFEST.sha256"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    total = sum(os.path.getsize(os.path.join(d, x)) for d, _, fs in os.walk(OUT) for x in fs)
    print(f"tests/data/real: {total} bytes")


if __name__ == "__main__":
    sys.exit(main())
