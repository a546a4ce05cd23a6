#!/usr/bin/python3
"""Golden values for tests/consensus (run with Debian's /usr/bin/python3: numpy 1.24,
scikit-learn 1.2.1, pandas 1.5).

    /usr/bin/python3 tests/scripts/make_golden_consensus.py

Writes tests/data/consensus/golden.json and the small synthetic inputs next to it:
  * scikit-learn KMeans(n_clusters=k, n_init=10, random_state=1) on cNMF's L2-normalized
    merged spectra of the pbmcA reference run (k = 5..8 all replicates, as cNMF's
    k_selection_plot clusters them, and k = 7 after the 0.5 density filter, as consensus
    does): labels, inertia, n_iter, silhouette;
  * the same on synthetic blobs that are hard to cluster (restarts disagree), so that the
    k-means++ draws and the choice among restarts are exercised, plus other seeds/n_init.
"""
import json
import os

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.metrics.pairwise import euclidean_distances

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "consensus")
REF = os.path.join(HERE, "..", "data", "real", "cnmf-pbmc-donor-a", "reference", "pbmcA",
                      "cnmf_tmp")


def load(f):
    with np.load(f, allow_pickle=True) as d:
        return pd.DataFrame(**d)


def km(x, k, n_init=10, seed=1):
    m = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(x)
    sil = silhouette_score(x, m.labels_, metric="euclidean") if 1 < len(set(m.labels_)) < len(x) else None
    return {"k": k, "n_init": n_init, "seed": seed, "labels": m.labels_.tolist(),
            "inertia": float(m.inertia_), "n_iter": int(m.n_iter_), "silhouette": sil}


def main():
    os.makedirs(OUT, exist_ok=True)
    golden = {"pbmc": {}, "synthetic": []}
    for k in (5, 6, 7, 8):
        ms = load(os.path.join(REF, "pbmcA.spectra.k_%d.merged.df.npz" % k))
        l2 = (ms.T / np.sqrt((ms ** 2).sum(axis=1))).T
        golden["pbmc"]["k%d_all" % k] = km(l2.values, k)
        if k == 7:
            nn = int(0.3 * ms.shape[0] / k)
            d = euclidean_distances(l2.values)
            po = np.argpartition(d, nn + 1)[:, :nn + 1]
            dens = d[np.arange(d.shape[0])[:, None], po].sum(1) / nn
            keep = dens < 0.5
            golden["pbmc"]["k7_dt0_5"] = km(l2.values[keep], k)
            golden["pbmc"]["k7_dt0_5"]["kept"] = np.where(keep)[0].tolist()

    rs = np.random.RandomState(7)
    centers = rs.uniform(0, 1, size=(6, 10))
    x = np.vstack([c + 0.35 * rs.standard_normal((40, 10)) for c in centers])
    x = x[rs.permutation(len(x))]
    x.astype("<f8").tofile(os.path.join(OUT, "blobs.240x10.f64"))
    for k, n_init, seed in ((6, 10, 1), (4, 3, 0), (9, 10, 12345), (2, 1, 99), (1, 2, 1)):
        golden["synthetic"].append(km(x, k, n_init, seed))

    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
