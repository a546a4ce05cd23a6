"""knmf.tl: tools on an AnnData, in scanpy's style (`tl.cnmf(adata, ...)` writes its results
into the AnnData, as `sc.tl.pca` and `sc.pp.pca` do)."""

from . import _api

__all__ = ["cnmf"]


def cnmf(adata, ks, *, n_iter=100, seed=14, numgenes=2000, layer=None, components=None,
         density_threshold=0.5, key_added="cnmf", copy=False, batch=None,
         cross_validate=True, progress=False):
    """cNMF's whole pipeline on an in-memory AnnData of raw counts (cells x genes), with the
    driver's arithmetic at every step: prepare (numgenes overdispersed genes), factorize
    (n_iter replicates of every k in ks, cNMF's seeds from `seed`), k selection (stability,
    prediction error and, with cross_validate, the bi-cross-validation of the normalized
    counts), and the consensus of one k: `components`, or, when None, the k that
    cross-validation chooses (printed, and recorded in uns).

    Writes (scanpy's conventions):
      obsm['X_' + key_added]      cells x k usages of the chosen k (cNMF's consensus usages)
      varm[key_added + '_spectra']  genes x k consensus spectra, zero outside the genes used
      uns[key_added]              'k', 'k_chosen_by' ('components' or 'cross-validation'),
                                  'k_selection' (k, silhouette, prediction_error,
                                  cv_prediction_error, cv_prediction_error_sd), 'params',
                                  'genes' (the genes used), 'gene_spectra_score' (k x genes),
                                  'gene_spectra_tpm' (k x genes)
    Returns the AnnData when copy=True, else None."""
    np = _api._numpy()
    where = "knmf.tl.cnmf"
    # every argument checked before the first step runs (the contract: docs/python.md)
    one_k = not isinstance(ks, (str, bytes)) and not hasattr(ks, "__iter__")
    ks = sorted(set(_api._integers([ks] if one_k else ks, "ks", where, 1)))
    if not ks:
        raise ValueError(f"{where}: ks is empty")
    n_iter = _api._integer(n_iter, "n_iter", where, 1)
    seed = _api._integer(seed, "seed", where, 0, _api._SEED_MAX, _api._SEED)
    if components is not None:
        components = _api._integer(components, "components", where, 1)
    key_added = _api._text(key_added, "key_added", where)
    copy = _api._flag(copy, "copy", where)
    cross_validate = _api._flag(cross_validate, "cross_validate", where)
    if batch is not None:
        batch = _api._integer(batch, "batch", where, 1)
    _api._progress(progress, where)
    density_threshold = _api._real(density_threshold, "density_threshold", where)
    if components is None and not cross_validate:
        raise ValueError("components=None takes the k that cross-validation chooses: "
                         "give components= or leave cross_validate=True")
    if components is not None and components not in ks:
        raise ValueError(f"components = {components} is not one of ks {ks}")
    if copy:
        adata = adata.copy()
    prepared = _api.prepare(adata, numgenes, layer=layer)
    seeds = _api.cnmf_seeds(seed, n_iter, ks)
    runs = {k: _api.factorize(prepared.norm_counts, k, seeds=seeds[k], batch=batch,
                              save_usages=False, progress=progress) for k in ks}
    table = _api.k_selection(prepared, runs, cross_validate=cross_validate,
                             density_threshold=density_threshold)
    if components is None:
        k, chosen_by = table.cv_choice, "cross-validation"
        print(f"knmf.tl.cnmf: cross-validation chooses k = {k} (most stable k: {table.stable_k})")
    else:
        k, chosen_by = components, "components"
    c = _api.consensus(prepared, runs[k], density_threshold=density_threshold)
    adata.obsm["X_" + key_added] = np.asarray(c.usages)
    spectra = np.zeros((adata.n_vars, k), dtype=np.float64)
    spectra[np.asarray(prepared.genes), :] = c.spectra.T
    adata.varm[key_added + "_spectra"] = spectra
    adata.uns[key_added] = {
        "k": k,
        "k_chosen_by": chosen_by,
        "k_selection": {name: np.asarray(getattr(table, name)) for name in
                        ("k", "silhouette", "prediction_error", "cv_prediction_error",
                         "cv_prediction_error_sd")},
        "params": {"ks": np.asarray(ks), "n_iter": n_iter, "seed": seed, "numgenes": numgenes,
                   "density_threshold": density_threshold, "layer": layer or "X"},
        "genes": np.asarray(prepared.gene_names, dtype=object),
        "gene_spectra_score": c.spectra_score,
        "gene_spectra_tpm": c.spectra_tpm,
    }
    return adata if copy else None
