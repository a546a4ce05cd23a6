#!/usr/bin/env python3
"""perf/RESULTS.md is exactly what perf/make_results.py makes of the committed raw results
(perf/results/) and the studies in perf/studies/: nothing in it is written by hand, so that
rerunning perf/run.sh loses nothing (perf/README.md). Prints the first differences and the
command that regenerates it, and exits 1, when they differ.

usage: check_perf_results.py REPO_ROOT
"""
import difflib
import os
import subprocess
import sys


def main(root):
    script = os.path.join(root, "perf", "make_results.py")
    page = os.path.join(root, "perf", "RESULTS.md")
    made = subprocess.run([sys.executable, script, os.path.join(root, "perf", "results")],
                          stdout=subprocess.PIPE, text=True, check=True).stdout
    with open(page) as f:
        have = f.read()
    if made == have:
        print("check_perf_results: perf/RESULTS.md is perf/make_results.py's output")
        return 0
    diff = list(difflib.unified_diff(have.splitlines(), made.splitlines(), "perf/RESULTS.md",
                                     "perf/make_results.py perf/results", lineterm="", n=1))
    print("\n".join(diff[:40]))
    print("check_perf_results: perf/RESULTS.md differs from what perf/make_results.py makes "
          "(a hand edit, a new study, or a changed script); regenerate it with: "
          "/usr/bin/python3 perf/make_results.py perf/results > perf/RESULTS.md "
          "(hand-written measurements go into perf/studies/NAME.md: perf/README.md)")
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(os.path.abspath(sys.argv[1])))
