#!/usr/bin/env python3
"""Static: no source file of the library, driver and headers over 900 lines, no function over
120 (docs/layout.md); functions from Universal Ctags' definitions and their end lines.

    tests/core/check_code_size.py [--root DIR] [--file-limit 900] [--limit 120] [DIR ...]
    (DIRs relative to the root; default: src include drivers)

Prints each longer file and function (lines, file:line, name) and exits 1 if there is any;
exits 2 when ctags is missing or is not Universal Ctags (it alone reports end lines:
cmake/bootstrap.sh installs Debian's universal-ctags)."""
import argparse
import os
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--file-limit", type=int, default=900)
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("dirs", nargs="*", default=["src", "include", "drivers"])
    a = ap.parse_args()
    os.chdir(a.root)
    big = []
    for d in a.dirs:
        for dirpath, _, files in os.walk(d):
            for f in files:
                if f.endswith((".cpp", ".hpp", ".h", ".cc")):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        n = sum(1 for _ in fh)
                    if n > a.file_limit:
                        big.append((n, path))
    for n, path in sorted(big, reverse=True):
        print(f"{n:5d} lines  {path}  (file)")
    ctags = shutil.which("ctags")
    if not ctags:
        print("check_code_size: ctags (Universal Ctags) not found", file=sys.stderr)
        return 2
    out = subprocess.run([ctags, "-R", "--languages=C++", "--langmap=C++:+.hpp", "--c++-kinds=f",
                          "--fields=+ne", "-o", "-"] + a.dirs, capture_output=True, text=True)
    if out.returncode != 0 or "end:" not in out.stdout:
        print("check_code_size: ctags gave no end lines (Universal Ctags is needed): " +
              out.stderr.strip(), file=sys.stderr)
        return 2
    long = []
    for line in out.stdout.splitlines():
        if line.startswith("!"):
            continue
        parts = line.split("\t")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if "line" in fields and "end" in fields:
            n = int(fields["end"]) - int(fields["line"]) + 1
            if n > a.limit:
                long.append((n, f"{parts[1]}:{fields['line']}", parts[0]))
    for n, where, name in sorted(long, reverse=True):
        print(f"{n:5d} lines  {where}  {name}")
    print(f"{len(big)} file(s) over {a.file_limit} lines, {len(long)} function(s) over "
          f"{a.limit} lines in {' '.join(a.dirs)}")
    return 1 if long or big else 0


if __name__ == "__main__":
    sys.exit(main())
