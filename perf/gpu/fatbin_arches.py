#!/usr/bin/env python3
"""What GPU code an executable carries (no cuobjdump needed): walks its .nv_fatbin section
(fat binary blobs, magic 0xBA55ED50, one per CUDA translation unit) and counts the entries by
kind (ELF machine code / PTX) and architecture.

    fatbin_arches.py EXE [--need-elf 80] [--need-ptx 80]

Prints e.g. "EXE: 62 modules; sm_80 ELF 62, compute_80 PTX 61; 0 modules with kernels lack PTX".
Exit 1 when some module that holds kernels (mangled names in its machine code) lacks machine
code for --need-elf or PTX for --need-ptx: a GPU of another architecture (the H200's sm_90)
could not JIT-compile that module. Standard library only; objcopy extracts the section.
"""
import argparse
import collections
import re
import struct
import subprocess
import sys
import tempfile

MAGIC = 0xBA55ED50
KIND = {1: "PTX", 2: "ELF"}


def modules(data):
    """Yield [(kind, arch, payload)] per fat binary blob."""
    off = 0
    while off + 16 <= len(data):
        magic, _ver, hsz, fsz = struct.unpack_from("<IHHQ", data, off)
        if magic != MAGIC:
            off += 8  # blobs are 8-byte aligned
            continue
        e, end, entries = off + hsz, off + hsz + fsz, []
        while e + 32 <= end:
            kind, _u, ehs, size = struct.unpack_from("<HHIQ", data, e)
            arch = struct.unpack_from("<I", data, e + 28)[0]
            entries.append((kind, arch, data[e + ehs:e + ehs + size]))
            e += ehs + size
        yield entries
        off = end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--need-elf", type=int, default=80)
    ap.add_argument("--need-ptx", type=int, default=80)
    o = ap.parse_args()
    with tempfile.NamedTemporaryFile() as tmp:
        r = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", o.exe, tmp.name],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{o.exe}: objcopy failed: {r.stderr.strip()}")
            return 1
        data = open(tmp.name, "rb").read()
    count = collections.Counter()
    n, bad = 0, 0
    for entries in modules(data):
        n += 1
        for kind, arch, _ in entries:
            count[(KIND.get(kind, str(kind)), arch)] += 1
        has_kernels = any(k == 2 and re.search(rb"_Z\w{8,}", p) for k, _, p in entries)
        has_elf = any(k == 2 and a == o.need_elf for k, a, _ in entries)
        has_ptx = any(k == 1 and a == o.need_ptx for k, a, _ in entries)
        if has_kernels and not (has_elf and has_ptx):
            bad += 1
    if n == 0:
        print(f"{o.exe}: no fat binary (no GPU code)")
        return 1
    parts = ", ".join(f"{'sm' if k == 'ELF' else 'compute'}_{a} {k} {c}" for (k, a), c in sorted(count.items()))
    print(f"{o.exe}: {n} modules; {parts}; {bad} modules with kernels lack sm_{o.need_elf} or compute_{o.need_ptx}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
