#!/usr/bin/python3
"""Small .npy / .npz / .zip / .yaml fixtures for knmf's io tests (tests/io/).

Run with Debian's Python stack (numpy 1.24):  /usr/bin/python3 tests/scripts/make_io_fixtures.py
Writes tests/data/io/* and tests/data/io/fixtures.json (what each valid fixture must decode to).

Hostile pickles are assembled by hand from opcodes; NOTHING here unpickles them. The one that
names os.system would run `touch /tmp/knmf-io-fixture-pwned` if a real unpickler loaded it;
the tests check that knmf rejects it and that the marker file never appears.
"""
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "data", "io")
PWNED_MARKER = "/tmp/knmf-io-fixture-pwned"


def npy_bytes(arr, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def object_npy_with_pickle(payload, shape):
    """An object-array .npy header followed by an arbitrary (hand-made) pickle payload."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "|O", "fortran_order": False, "shape": shape})
    return buf.getvalue() + payload


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(data)


def cell_json(v):
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return {"bool": bool(v)}
    if isinstance(v, (int, np.integer)):
        return {"int": int(v)}
    if isinstance(v, (float, np.floating)):
        return {"float": float(v).hex()}
    return {"str": str(v)}


def main():
    os.makedirs(OUT, exist_ok=True)
    expect = {"pwned_marker": PWNED_MARKER, "numeric": {}, "object": {}, "malicious": {}}

    # ---- numeric and unicode arrays of every dtype the reader supports -------------------------
    numeric = {
        "f8_2d_c.npy": np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0,
        "f8_2d_fortran.npy": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0),
        "f8_3d_fortran.npy": np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),
        "f4_1d.npy": np.array([0.1, -2.5, 1e-4, 3.4e38], dtype=np.float32),
        "i8_1d.npy": np.array([0, -1, 2**62, -2**63], dtype=np.int64),
        "i4_2d.npy": np.array([[1, -2], [2**31 - 1, -2**31]], dtype=np.int32),
        "u4_1d.npy": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
        "u1_1d.npy": np.array([0, 7, 255], dtype=np.uint8),
        "b1_1d.npy": np.array([True, False, True]),
        "U_1d.npy": np.array(["TTLL10", "", "h\u00e9llo", "\U0001F600x"]),
        "f8_big_endian.npy": np.array([1.5, -2.25], dtype=">f8"),
        "f8_0d.npy": np.array(3.25),
        "f8_empty.npy": np.zeros((0, 3)),
    }
    for name, arr in numeric.items():
        write(name, npy_bytes(arr))
        flat = np.ascontiguousarray(arr).reshape(-1)
        e = {"descr": arr.dtype.str, "shape": list(arr.shape),
             "fortran_order": bool(arr.flags.f_contiguous and not arr.flags.c_contiguous and arr.ndim > 1)}
        if arr.dtype.kind == "f":
            e["doubles"] = [float(v).hex() for v in flat]
        elif arr.dtype.kind in "iub":
            e["ints"] = [int(v) for v in flat]
        else:
            e["strings"] = [str(v) for v in flat]
        expect["numeric"][name] = e
    # Format 2.0 (4-byte header length), as numpy writes for huge headers.
    arr = np.arange(5, dtype=np.int64)
    write("i8_v2.npy", npy_bytes(arr, version=(2, 0)))
    expect["numeric"]["i8_v2.npy"] = {"descr": "<i8", "shape": [5], "fortran_order": False,
                                      "ints": [int(v) for v in arr]}

    # ---- object arrays: what numpy.save pickles (protocol 3) and hand-made variants ----------------
    mixed = np.array([np.int64(5), np.float64(2.5), np.bool_(True), np.str_("h\u00e9llo"), np.int32(-3),
                      np.float32(1.5), np.uint8(7), None, 1.25, -2**63, "x", True, 2**40, "x"],
                     dtype=object)
    strings2d = np.array([["a", "bb"], ["c", "dd"], ["e", "ff"]], dtype=object)
    jobs = np.empty((3, 4), dtype=object)
    for r in range(3):
        jobs[r] = [5, r, 1000 + r, False]
    jobs = np.asfortranarray(jobs)  # cNMF's job table is a Fortran-ordered object array
    objects = {"object_mixed.npy": mixed, "object_strings_2d.npy": strings2d,
               "object_jobs_fortran.npy": jobs}
    for name, arr in objects.items():
        write(name, npy_bytes(arr))
        expect["object"][name] = {"shape": list(arr.shape),
                                  "cells": [cell_json(v) for v in arr.reshape(-1, order="C")]}
    # Protocol 5 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL), as a newer writer could emit.
    write("object_proto5.npy", object_npy_with_pickle(pickle.dumps(strings2d, protocol=5), (3, 2)))
    expect["object"]["object_proto5.npy"] = expect["object"]["object_strings_2d.npy"]
    # numpy 2 spells the module numpy._core.multiarray.
    p3 = pickle.dumps(mixed, protocol=3).replace(b"cnumpy.core.multiarray\n", b"cnumpy._core.multiarray\n")
    write("object_numpy2_names.npy", object_npy_with_pickle(p3, (len(mixed),)))
    expect["object"]["object_numpy2_names.npy"] = expect["object"]["object_mixed.npy"]

    # ---- hostile or broken pickles -----------------------------------------------------------------
    good = pickle.dumps(strings2d, protocol=3)
    malicious = {
        # os.system('touch MARKER'), protocol 2 with GLOBAL
        "pickle_os_system.npy": (b"\x80\x02cos\nsystem\nX" + struct.pack("<I", len("touch " + PWNED_MARKER))
                                 + ("touch " + PWNED_MARKER).encode() + b"\x85R.", "os.system"),
        # builtins.eval('1+1') via STACK_GLOBAL, protocol 4
        "pickle_eval.npy": (b"\x80\x04\x8c\x08builtins\x94\x8c\x04eval\x94\x93\x94\x8c\x031+1\x94\x85\x94R\x94.",
                            "builtins.eval"),
        # subprocess.Popen hidden behind a valid numpy prefix
        "pickle_popen_after_numpy.npy": (good[:good.index(b"]")] + b"csubprocess\nPopen\n)R.",
                                         "subprocess.Popen"),
        # INST opcode (protocol 0 style object creation)
        "pickle_inst_opcode.npy": (b"\x80\x02(X\x02\x00\x00\x00idios\nsystem\n.", "INST"),
        # an opcode that does not exist
        "pickle_unknown_opcode.npy": (good[:40] + b"\xff" + good[40:], "0xff"),
        # the valid pickle cut in half
        "pickle_truncated.npy": (good[: len(good) // 2], "truncated"),
        # a valid pickle of a dict, not an array
        "pickle_not_array.npy": (pickle.dumps({"a": 1}, protocol=3), "not a numpy object array"),
    }
    for name, (payload, needle) in malicious.items():
        write(name, object_npy_with_pickle(payload, (3, 2)))
        expect["malicious"][name] = needle
    # The os.system pickle as the index of an otherwise fine .df.npz.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("data.npy", npy_bytes(np.zeros((3, 2))))
        z.writestr("index.npy", object_npy_with_pickle(malicious["pickle_os_system.npy"][0], (3,)))
        z.writestr("columns.npy", npy_bytes(np.array(["a", "b"])))
    write("malicious_index.df.npz", buf.getvalue())

    # ---- ZIP archives: valid (stored, deflate), corrupt CRC, truncated ------------------------------
    small = pd_like_npz()
    write("small.df.npz", small)
    stored = io.BytesIO()
    np.savez(stored, data=np.arange(6.0).reshape(2, 3), index=np.array([1, 2]),
             columns=np.array(["a", "b", "c"]))
    stored = stored.getvalue()
    write("stored.df.npz", stored)
    # flip one data byte of the stored data.npy (its CRC no longer matches)
    at = stored.index(b"\x93NUMPY") + 128 + 8
    bad = bytearray(stored)
    bad[at] ^= 0xFF
    write("bad_crc.df.npz", bytes(bad))
    write("truncated_tail.df.npz", small[:-30])       # end record cut off
    write("truncated_half.df.npz", small[: len(small) // 2])
    write("not_a_zip.df.npz", b"this is not a zip archive at all, just text\n" * 3)

    # ---- YAML run parameters ------------------------------------------------------------------------
    base = ("alpha_H: 0.0\nalpha_W: 0.0\nbeta_loss: frobenius\ninit: random\nl1_ratio: 0.0\n"
            "max_iter: 1000\nsolver: cd\ntol: 0.0001\n")
    write("params_ok_extra_key.yaml", (base + "random_state: 3\nverbose: 0\n").encode())
    write("params_missing_tol.yaml", base.replace("tol: 0.0001\n", "").encode())
    write("params_bad_max_iter.yaml", base.replace("max_iter: 1000", "max_iter: lots").encode())
    write("params_bad_solver.yaml", base.replace("solver: cd", "solver: [cd, mu]").encode())
    write("params_alpha_same.yaml",
          base.replace("alpha_H: 0.0", "alpha_H: same").replace("alpha_W: 0.0", "alpha_W: 0.25").encode())
    write("params_not_yaml.yaml", b"alpha_H: [0.0\n  : :\n")

    with open(os.path.join(OUT, "fixtures.json"), "w") as fh:
        json.dump(expect, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    print("wrote", OUT)


def pd_like_npz():
    """A .df.npz written exactly as cNMF's save_df_to_npz (np.savez_compressed)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, data=np.arange(6.0).reshape(2, 3),
                        index=np.array(["r1", "r2"], dtype=object),
                        columns=np.array(["a", "b", "c"], dtype=object))
    return buf.getvalue()


if __name__ == "__main__":
    main()
