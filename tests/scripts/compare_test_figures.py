#!/usr/bin/env python3
"""The worst relative differences the tests print (worst/max ... rel diff / relative difference /
rel error N), per test and figure, in two ctest logs (Testing/Temporary/LastTest.log) side by
side: the "no number changes" check of a restructuring.

    compare_test_figures.py BEFORE.log AFTER.log
"""
import re, sys, collections
def load(p):
    cur = None; out = collections.defaultdict(float); seen = set()
    num = r'([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)'
    for line in open(p, errors='replace'):
        m = re.match(r'\d+/\d+ Testing: (\S+)', line)
        if m: cur = m.group(1); continue
        for m in re.finditer(r'((?:worst|max(?:imum)?)[a-zA-Z _-]*?(?:rel(?:ative)?)[a-zA-Z _-]*?(?:diff(?:erence)?|err(?:or)?)[a-zA-Z _-]*?)[:=]? *' + num, line):
            key = (cur, re.sub(r'\s+', ' ', m.group(1)).strip())
            out[key] = max(out[key], float(m.group(2)))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
print("| test | figure | before | after |\n|---|---|---|---|")
for k in sorted(set(a) | set(b), key=lambda k: (str(k[0]), k[1])):
    print(f"| {k[0]} | {k[1]} | {a.get(k, '-'):.3g} | {b.get(k, '-'):.3g} |" if k in a and k in b else f"| {k[0]} | {k[1]} | {a.get(k,'-')} | {b.get(k,'-')} |")
