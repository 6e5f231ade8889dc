"""The gallery's grid search on a dask LocalCluster: 2 workers against 1 and in-process.

The search of ``examples/plot_distributed_grid_search.py`` (12 fits: width in
{8, 32, 128} x stochastic/fixed encodings x 2 folds, scored at T and 4T)
runs ``repeats`` times in three ways:

- ``sequential``: in this process, joblib's default backend;
- ``1 worker`` and ``2 workers``: :func:`stsq_learn.distributed.dask_backend`
  with ``"local:1"`` / ``"local:2"`` (single-threaded worker processes, one
  torch thread each), a fresh cluster per repeat, timing its start-up, the
  first search on it (``cold``: the workers import torch and the package)
  and a second one (``warm``).

Every run must return the sequential scores exactly. Needs the
``distributed`` extra; skipped without it.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

from stsq_learn import SparseTokenSelector, length_shift_scoring, make_sparse_token_selection

CONFIG = dict(n_samples=1000, seq_len=16, n_features=4, n_selected=3, workers=(1, 2), repeats=3)
QUICK = dict(repeats=1)


def make_search():
    """The example's search (keep in step with examples/plot_distributed_grid_search.py)."""
    return GridSearchCV(
        SparseTokenSelector(max_iter=50, learning_rate_init=0.03, random_state=0),
        {"width": [8, 32, 128], "positional_encoding": ["stochastic", "fixed"]},
        scoring=length_shift_scoring((1, 4), random_state=0),
        cv=KFold(2, shuffle=True, random_state=0),
        refit=False,
    )


def _scores(search):
    return np.concatenate(
        [v for k, v in sorted(search.cv_results_.items()) if k.startswith("split")]
    )


def _timed_search(X, y):
    search = make_search()
    t0 = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - t0, _scores(search)


def run(cfg, ctx):
    try:
        from stsq_learn.distributed import dask_backend
    except ImportError as exc:
        return {"skipped": f"needs the distributed extra (pip install '.[distributed]'): {exc}"}
    X, y = make_sparse_token_selection(
        cfg["n_samples"], cfg["seq_len"], cfg["n_features"], cfg["n_selected"], random_state=0
    )
    times = {"sequential": []}
    for n in cfg["workers"]:
        for phase in ("start-up", "cold", "warm"):
            times[f"{n} worker(s) {phase}"] = []
    reference = None
    for _ in range(cfg["repeats"]):
        seconds, got = _timed_search(X, y)
        times["sequential"].append(seconds)
        reference = got if reference is None else reference
        if not np.array_equal(got, reference):
            raise RuntimeError("the sequential search is not reproducible")
        for n in cfg["workers"]:
            t0 = time.perf_counter()
            with dask_backend(f"local:{n}"):
                times[f"{n} worker(s) start-up"].append(time.perf_counter() - t0)
                for phase in ("cold", "warm"):
                    seconds, got = _timed_search(X, y)
                    times[f"{n} worker(s) {phase}"].append(seconds)
                    if not np.array_equal(got, reference):
                        raise RuntimeError(f"{n} worker(s), {phase} search: other scores")
    med = {k: float(np.median(v)) for k, v in times.items()}
    rec = {"seconds": med, "all_seconds": times, "scores_identical": True}
    if 1 in cfg["workers"] and 2 in cfg["workers"]:
        rec["speedup_2_vs_1_warm"] = med["1 worker(s) warm"] / med["2 worker(s) warm"]
        rec["speedup_2_vs_1_cold"] = med["1 worker(s) cold"] / med["2 worker(s) cold"]
        rec["speedup_2_warm_vs_sequential"] = med["sequential"] / med["2 worker(s) warm"]
    return rec


def table(rec):
    lines = [(f"{k} (median s)", f"{v:.2f}") for k, v in rec["seconds"].items()]
    for key in ("speedup_2_vs_1_warm", "speedup_2_vs_1_cold", "speedup_2_warm_vs_sequential"):
        if key in rec:
            lines.append((key.replace("_", " "), f"{rec[key]:.2f}x"))
    lines.append(("every run gave the sequential scores", str(rec["scores_identical"])))
    return lines
