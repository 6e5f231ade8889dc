"""The width searches of the separation experiment: per (T, model), which widths reach a target.

Two regimes (see :func:`~stsq_learn.experiments.width_separation`): online
training per width, in increasing order, stopping at the first that reaches
the target (optionally side by side on a dask cluster); or scikit-learn's
``GridSearchCV`` over ``width`` on finite rows. Then the least-squares
growth laws of the minimal widths.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, ShuffleSplit

from .._validation import check_positive_int
from ._common import train_online

MODELS = ("transformer", "fcn")


def per_model(value, default, name):
    """``{"transformer": ..., "fcn": ...}`` from a dict naming some of the models (or None)."""
    value = {} if value is None else value
    if not isinstance(value, dict) or set(value) - set(MODELS):
        raise ValueError(f"{name} must be a dict with keys among {list(MODELS)}, got {value!r}.")
    return {**default, **value}


def checked_grids(widths, n_steps, default_widths, default_steps):
    """The sorted width grid and the online steps of each model, validated."""
    grids = {
        model: sorted({check_positive_int(w, f"widths[{model!r}][i]") for w in grid})
        for model, grid in per_model(widths, default_widths, "widths").items()
    }
    for name, grid in grids.items():
        if not grid:
            raise ValueError(
                f"widths[{name!r}] must hold at least one width, got an empty sequence."
            )
    steps = {
        model: check_positive_int(k, f"n_steps[{model!r}]")
        for model, k in per_model(n_steps, default_steps, "n_steps").items()
    }
    return grids, steps


def backend(scheduler):
    """joblib's dask backend on ``scheduler``, or nothing when it is None."""
    if scheduler is None:
        return contextlib.nullcontext()
    from ..distributed import dask_backend

    return dask_backend(scheduler)


def fit_growth_law(xs, ws, *, intercept=True):
    """Least squares ``w = a + b x`` (``a = 0`` without intercept); None if under-determined.

    Returns a dict with ``intercept`` (a), ``slope`` (b) and ``r2``, the
    coefficient of determination of the fit (1 - residual / total sum of squares).
    """
    xs, ws = np.asarray(xs, float), np.asarray(ws, float)
    if len(xs) < (2 if intercept else 1) or (intercept and np.ptp(xs) == 0):
        return None
    if intercept:
        b, a = np.polyfit(xs, ws, 1)
    else:
        a, b = 0.0, float(xs @ ws / (xs @ xs))
    resid = ws - (a + b * xs)
    ss = float(((ws - ws.mean()) ** 2).sum())
    return {
        "intercept": float(a),
        "slope": float(b),
        "r2": float(1 - (resid**2).sum() / ss) if ss > 0 else float(np.allclose(resid, 0)),
    }


def growth_laws(seq_lens, minimal, n_features):
    """Per model, the fits ``w = a + b log2 T`` (``"log_T"``) and ``w = b T d`` (``"T_d"``)."""
    laws = {}
    for model, widths in minimal.items():
        pairs = [(T, w) for T, w in zip(seq_lens, widths) if w is not None]
        Ts = [T for T, _ in pairs]
        ws = [w for _, w in pairs]
        laws[model] = {
            "log_T": fit_growth_law([math.log2(T) for T in Ts], ws),
            "T_d": fit_growth_law([T * n_features for T in Ts], ws, intercept=False),
        }
    return laws


def _fit_score_online(estimator, width, task, n_steps, X_val, y_val):
    """One width of an online search, as a task for a worker."""
    model = clone(estimator).set_params(width=width).fit_online(task, n_steps=n_steps)
    return float(model.score(X_val, y_val))


def search_online(
    estimator, task, widths, n_steps, n_val, target, stop, seed, progress, desc, parallel=False
):
    """Train each width online and score it on fresh rows; ``{width: R^2}``.

    With ``parallel``, the widths go to joblib's active backend in batches of
    its worker count; widths past the first that reaches the target are
    dropped, so the result is the sequential one.
    """
    X_val, y_val = task.sample(n_val, random_state=seed)
    found = {}
    if parallel:
        batch = max(1, effective_n_jobs())
        for start in range(0, len(widths), batch):
            chunk = widths[start : start + batch]
            got = Parallel()(
                delayed(_fit_score_online)(estimator, w, task, n_steps, X_val, y_val) for w in chunk
            )
            for w, score in zip(chunk, got):
                found[w] = score
                if stop and score >= target:
                    return found
        return found
    for w in widths:
        model = clone(estimator).set_params(width=w)
        train_online(model, task, n_steps, desc=f"{desc} width={w}", progress=progress)
        found[w] = float(model.score(X_val, y_val))
        if stop and found[w] >= target:
            break
    return found


def search_grid(estimator, task, widths, n_train, seed):
    """GridSearchCV over ``width`` on ``n_train`` rows, one hold-out split; ``{width: R^2}``."""
    X, y = task.sample(n_train, random_state=seed)
    search = GridSearchCV(
        estimator,
        {"width": list(widths)},
        scoring="r2",
        cv=ShuffleSplit(n_splits=1, test_size=0.2, random_state=seed),
        refit=False,
        error_score="raise",
    ).fit(X, y)
    params = search.cv_results_["params"]
    means = search.cv_results_["mean_test_score"]
    return {p["width"]: float(s) for p, s in zip(params, means)}
