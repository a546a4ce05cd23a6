#!/usr/bin/python3
"""Golden data for knmf's highly-variable-gene rule (tests/prepare), from pandas 1.5 / numpy 1.24.

    /usr/bin/python3 tests/scripts/make_golden_prepare.py

Writes tests/data/prepare/hvg_golden.json. The rule is cNMF's (get_highvar_genes_sparse,
Klein et al. 2015), written out here with the pandas operations it uses, so that quantiles,
medians, NaN handling and sorting follow pandas exactly:
  fano = var / mean; A = min(sqrt(var) / mean) over the 20 genes of largest mean;
  B = sqrt(median fano inside the open 10%-90% quantile box of mean and fano);
  ratio = fano / (A^2 mean + B^2); keep the numgenes genes of largest ratio.
Cases cover zero-mean genes (NaN fano), numgenes above the number of finite ratios, fewer
than 20 genes, ties (n <= 16, where numpy's quicksort is an insertion sort, i.e. stable).
"""
import json
import os

import numpy as np
import pandas as pd

here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.normpath(os.path.join(here, "..", "data", "prepare"))
os.makedirs(out_dir, exist_ok=True)


def hvg(mean, var, numgenes):
    gene_mean = pd.Series(mean)
    gene_var = pd.Series(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        fano = gene_var / gene_mean
        top = gene_mean.sort_values(ascending=False)[:20].index
        A = (np.sqrt(gene_var) / gene_mean)[top].min()
        m_lo, m_hi = gene_mean.quantile([0.10, 0.90])
        f_lo, f_hi = fano.quantile([0.10, 0.90])
        box = (fano > f_lo) & (fano < f_hi) & (gene_mean > m_lo) & (gene_mean < m_hi)
        B = np.sqrt(fano[box].median())
        expected = (A ** 2) * gene_mean + (B ** 2)
        ratio = fano / expected
    chosen = ratio.sort_values(ascending=False).index[:numgenes]
    return A, B, ratio, sorted(int(i) for i in chosen)


def nan_to_none(values):
    return [None if np.isnan(v) else float(v) for v in values]


rng = np.random.RandomState(7)
cases = {}


def add(name, mean, var, numgenes):
    A, B, ratio, chosen = hvg(np.asarray(mean, float), np.asarray(var, float), numgenes)
    cases[name] = {"mean": [float(x) for x in mean], "var": [float(x) for x in var],
                   "numgenes": numgenes, "A": float(A), "B": float(B),
                   "fano_ratio": nan_to_none(ratio.values), "selected": chosen}


# Count-like genes: mean ~ gamma, var ~ mean (1 + overdispersion).
m = rng.gamma(0.5, 20.0, 400)
add("random400", m, m * (1 + m * rng.gamma(1.0, 0.5, 400)), 60)
# With zero-mean genes (NaN fano) among them.
m = rng.gamma(0.5, 5.0, 150)
v = m * (1 + m * rng.gamma(1.0, 1.0, 150))
zero = rng.rand(150) < 0.2
m[zero] = 0.0
v[zero] = 0.0
add("with_zero_genes", m, v, 40)
# More genes requested than finite ratios: the NaN genes come last, in order.
add("numgenes_above_finite", m, v, 140)
# Fewer than 20 genes, with exact ties in mean and ratio.
m = np.array([1.0, 2.0, 2.0, 3.0, 1.0, 5.0, 2.0, 0.5, 4.0, 1.0, 3.0, 2.0])
v = np.array([2.0, 8.0, 8.0, 9.0, 2.0, 40.0, 8.0, 0.5, 20.0, 3.0, 9.0, 5.0])
add("ties12", m, v, 5)
add("ties12_cut", m, v, 3)  # the cut falls inside the tie of genes 1, 2, 6

with open(os.path.join(out_dir, "hvg_golden.json"), "w") as f:
    json.dump({"pandas_version": pd.__version__, "numpy_version": np.__version__,
               "cases": cases}, f, indent=1)
print("wrote", os.path.join(out_dir, "hvg_golden.json"))
