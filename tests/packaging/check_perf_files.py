#!/usr/bin/env python3
"""Every file under perf/ is named by something that runs or cites it (perf/README.md).

A file counts as named when one of these names it (a file never names itself):
  * a script or benchmark source under perf/ (*.sh, *.py, *.cpp, *.hpp),
  * any CMakeLists.txt of the repository, or .ci/run,
  * a results page: a Markdown file under perf/ (RESULTS.md, README.md, studies/*.md, ...).
"Names" means the file's path appears in the namer's text: from the repository root
(perf/results/x.json), from perf/ (results/x.json), from the namer's own folder (check.sh in
perf/gpu/README.md, "bench_common.hpp" in an #include) or, for raw results, from perf/results/
(x.json, as run.sh and make_results.py write and read them); or one of the file's folders
below perf/results/ appears so, ending in "/" (perf/results/kokkos_ab/); or a pattern in the
namer matches it (cnmf_sklearn_t*_r*.json, torch_peer_${n}_${pdt}.json, f"ab_{tag}.txt"),
whose literal part before the first wildcard is at least 3 characters long; or, for a Python
module, an import of it from the same folder.

Prints every file nothing names, and exits 1 when there is one.

usage: check_perf_files.py REPO_ROOT
"""
import fnmatch
import os
import re
import sys

SCRIPT_EXT = (".sh", ".py", ".cpp", ".hpp")
# a token that may be a path or a pattern: ${var}, {expr} and $var become wildcards
TOKEN = re.compile(r"[A-Za-z0-9_.*/${}\[\]'\"-]+")
VAR = re.compile(r"\$\{[^}]*\}|\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def namers(root):
    found = [os.path.join(root, ".ci", "run")]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")]
        rel = os.path.relpath(dirpath, root)
        for f in filenames:
            if f == "CMakeLists.txt":
                found.append(os.path.join(dirpath, f))
            elif rel == "perf" or rel.startswith("perf" + os.sep):
                if f.endswith(SCRIPT_EXT) or f.endswith(".md"):
                    found.append(os.path.join(dirpath, f))
    return [p for p in found if os.path.isfile(p)]


def patterns(text):
    """The wildcard patterns in a text: tokens with a variable part, turned into fnmatch form."""
    out = set()
    for tok in TOKEN.findall(text):
        tok = tok.strip("'\"")
        pat = VAR.sub("*", tok)
        if "*" not in pat or "." not in pat.rsplit("/", 1)[-1]:
            continue
        pat = pat.strip("'\"").lstrip("./") if pat.startswith("./") else pat.strip("'\"")
        literal = pat.rsplit("/", 1)[-1].split("*", 1)[0]
        if len(literal) >= 3:
            out.add(pat)
    return out


def names_for(rel, namer_dir):
    """The spellings of repository path rel that count, as seen from a namer in namer_dir."""
    spell = {rel, rel[len("perf/"):]}
    if namer_dir.startswith("perf"):
        spell.add(os.path.relpath(rel, namer_dir))
    if rel.startswith("perf/results/"):
        spell.add(rel[len("perf/results/"):])
    return {s for s in spell if not s.startswith("..")}


def suffixes(text):
    """Every path-like token of a text and each of its tails after a "/": what it names. A
    spelling is named when it is one of these (so x.json is not named by max.json)."""
    out = set()
    for tok in TOKEN.findall(text):
        tok = tok.strip("'\"[]").rstrip(".")
        parts = tok.split("/")
        for i in range(len(parts)):
            tail = "/".join(parts[i:])
            if tail:
                out.add(tail)
    return out


def main(root):
    root = os.path.abspath(root)
    files = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "perf")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    texts = {}
    for p in namers(root):
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        texts[rel] = read(p)
    pats = {n: patterns(t) for n, t in texts.items()}
    names = {n: suffixes(t) for n, t in texts.items()}

    unnamed = []
    for rel in sorted(files):
        named = False
        for namer, text in texts.items():
            if namer == rel:
                continue
            ndir = os.path.dirname(namer)
            spellings = names_for(rel, ndir)
            if spellings & names[namer]:
                named = True
            elif rel.startswith("perf/results/"):
                # a folder below perf/results/ named as a folder
                parts = rel[len("perf/results/"):].split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i]) + "/"
                    if {d, "results/" + d, "perf/results/" + d} & names[namer]:
                        named = True
            if not named and any(fnmatch.fnmatchcase(s, p) for p in pats[namer] for s in spellings):
                named = True
            if not named and rel.endswith(".py") and ndir == os.path.dirname(rel):
                stem = os.path.basename(rel)[:-3]
                if re.search(r"\b(import|from)\s+" + re.escape(stem) + r"\b", text):
                    named = True
            if named:
                break
        if not named:
            unnamed.append(rel)
    for rel in unnamed:
        print(f"{rel}: no script, CMakeLists.txt, .ci/run or results page under perf/ names it: "
              "cite it where its figures are reported (perf/README.md says where) or remove it")
    if unnamed:
        print(f"check_perf_files: {len(unnamed)} of {len(files)} files under perf/ are named by nothing")
        return 1
    print(f"check_perf_files: all {len(files)} files under perf/ are named")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
