#!/usr/bin/env python3
"""The layout rule of knmf's library (docs/layout.md), checked on the tree.

Each area of the library (a folder of include/knmf/ and of src/) may include only the areas
listed for it below: the data flow input -> matrix -> init/solver -> run -> results ->
consensus, with core under everything and mpi supplying parts of the run. More rules:
solver internals (solver/detail/) are included only inside src/solver; no installed header
(include/knmf/) includes a file of src/ or sits in a detail/ folder (internal headers live in
src/); the umbrella header knmf/knmf.hpp includes every installed header (but those of
UMBRELLA_LEAVES_OUT) and no file of the library includes it. Prints every violation and exits
1 when there is one.

usage: check_layout.py REPO_ROOT
"""
import os
import re
import sys

MAY_INCLUDE = {
    "core": set(),
    "random": {"core"},
    "io": {"core", "random"},
    "matrix": {"core", "io"},
    "prepare": {"core", "random", "io", "matrix"},
    "solver": {"core", "random", "matrix"},
    "run": {"core", "random", "io", "matrix", "solver", "results"},
    "results": {"core", "random", "io", "solver"},
    "consensus": {"core", "random", "io", "matrix", "solver", "results"},
    "mpi": {"core", "random", "io", "matrix", "solver", "run", "results"},
}
TOP_LEVEL_HEADERS = {"knmf.hpp"}  # the umbrella header includes everything
# Installed headers the umbrella does not include: the figures are the driver's knmf_plot
# library (cairo), not libknmf.
UMBRELLA_LEAVES_OUT = {"consensus/plot.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main(root):
    problems = []
    seen_areas = set()
    public = set()
    for base in ("include/knmf", "src"):
        top = os.path.join(root, base)
        for dirpath, _, files in os.walk(top):
            for f in files:
                if not f.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, top)
                parts = rel.split(os.sep)
                if len(parts) == 1:
                    if base == "include/knmf" and f not in TOP_LEVEL_HEADERS:
                        problems.append(f"{base}/{rel}: a header outside every area")
                    continue
                area = parts[0]
                seen_areas.add(area)
                if base == "include/knmf":
                    public.add("/".join(parts))
                    if "detail" in parts[1:-1]:
                        problems.append(f"{base}/{rel}: an internal header (detail/) in the "
                                        f"installed tree (move it to src/{area}/)")
                if area not in MAY_INCLUDE:
                    problems.append(f"{base}/{rel}: area '{area}' is not in the layout "
                                    "(add it to docs/layout.md and to this check)")
                    continue
                text = open(path, encoding="utf-8").read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    if inc == "knmf/knmf.hpp":
                        problems.append(f"{base}/{rel}: includes the umbrella header (consumers "
                                        "only: include what is used)")
                    p = inc.split("/")
                    if p[0] == "knmf":
                        p = p[1:]
                    elif base == "include/knmf" and p[0] in MAY_INCLUDE:
                        problems.append(f"{base}/{rel}: installed header includes src/ file '{inc}'")
                    if not p or p[0] not in MAY_INCLUDE:
                        continue  # same-folder, generated (version.hpp, config.hpp) or third-party
                    target = p[0]
                    if target != area and target not in MAY_INCLUDE[area]:
                        problems.append(f"{base}/{rel}: {area}/ may not include {target}/ ('{inc}')")
                    if inc.startswith("solver/detail/") and not (base == "src" and area == "solver"):
                        problems.append(f"{base}/{rel}: solver internals '{inc}' outside src/solver")
    umbrella = os.path.join(root, "include/knmf/knmf.hpp")
    included = {m.group(1)[len("knmf/"):] for m in
                INCLUDE.finditer(open(umbrella, encoding="utf-8").read())}
    for h in sorted(public - UMBRELLA_LEAVES_OUT - included):
        problems.append(f"include/knmf/knmf.hpp: does not include the public header knmf/{h}")
    for area in MAY_INCLUDE:
        if area not in seen_areas:
            problems.append(f"area '{area}' of the layout has no files (remove it from the check)")
    for p in problems:
        print(p)
    print(f"check_layout: {len(problems)} problem(s) in {len(seen_areas)} areas")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
