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


def _quality(ws, fitted):
    """Residuals ``w - fit``, their root mean square, and the fit's R^2."""
    resid = np.asarray(ws, float) - np.asarray(fitted, float)
    ss = float(((ws - np.mean(ws)) ** 2).sum())
    return {
        "r2": float(1 - (resid**2).sum() / ss) if ss > 0 else float(np.allclose(resid, 0)),
        "rms_residual": float(np.sqrt(np.mean(resid**2))),
        "residuals": [float(r) for r in resid],
    }


def fit_growth_law(xs, ws, *, intercept=True):
    """Least squares ``w = a + b x`` (``a = 0`` without intercept); None if under-determined.

    A fit needs more points than parameters (3 with the intercept, 2
    without): a line through two points fits them exactly and says nothing
    of the law. Returns a dict with ``intercept`` (a), ``slope`` (b), ``r2`` (the
    coefficient of determination, 1 - residual / total sum of squares),
    ``rms_residual`` and ``residuals`` (``w - fit``, one per point).
    """
    xs, ws = np.asarray(xs, float), np.asarray(ws, float)
    if len(xs) < (3 if intercept else 2) or (intercept and np.ptp(xs) == 0):
        return None
    if intercept:
        b, a = np.polyfit(xs, ws, 1)
    else:
        a, b = 0.0, float(xs @ ws / (xs @ xs))
    return {"intercept": float(a), "slope": float(b), **_quality(ws, a + b * xs)}


# The exponents c the shifted power law tries. As c -> 0, a + b T^c -> a' + b' log T: a best c
# at the grid's lower edge means the data ask for the logarithm.
_EXPONENTS = np.geomspace(0.001, 2.0, 200)


def fit_power_law(Ts, ws, *, offset=True):
    """Least squares ``w = a + b T^c`` (``offset``) or ``w = b T^c``; None if under-determined.

    With ``offset`` the exponent c is the best of a grid of 200 values in
    [0.001, 2] (log-spaced) refined by a parabola through the best three, and a, b are
    linear least squares at each c (4 points at least: three parameters and
    one residual). Without, ``log w = log b + c log T`` is fitted (3 points
    at least: two parameters and one residual). Returns ``intercept`` (a, 0
    without offset), ``slope`` (b), ``exponent`` (c) and the fit's quality as
    :func:`fit_growth_law`.
    """
    Ts, ws = np.asarray(Ts, float), np.asarray(ws, float)
    if len(Ts) < (4 if offset else 3) or np.ptp(Ts) == 0:
        return None
    if not offset:
        c, log_b = np.polyfit(np.log(Ts), np.log(ws), 1)
        a, b = 0.0, float(np.exp(log_b))
    else:

        def sse(c):
            A = np.column_stack([np.ones_like(Ts), Ts**c])
            coef = np.linalg.lstsq(A, ws, rcond=None)[0]
            return float(((A @ coef - ws) ** 2).sum()), coef

        errors = [sse(c)[0] for c in _EXPONENTS]
        k = int(np.clip(np.argmin(errors), 1, len(_EXPONENTS) - 2))
        x, y = _EXPONENTS[k - 1 : k + 2], errors[k - 1 : k + 2]
        curve = np.polyfit(x, y, 2)
        c = -curve[1] / (2 * curve[0]) if curve[0] > 0 else _EXPONENTS[int(np.argmin(errors))]
        c = float(np.clip(c, x[0], x[-1]))
        a, b = sse(c)[1]
    fitted = a + b * Ts**c
    return {
        "intercept": float(a),
        "slope": float(b),
        "exponent": float(c),
        **_quality(ws, fitted),
    }


def growth_laws(seq_lens, minimal, n_features):
    """Per model, the least-squares laws of the minimal widths against T.

    ``"log_T"``: ``w = a + b log2 T``; ``"power"``: ``w = a + b T^c``;
    ``"power_0"``: ``w = b T^c``; ``"T_d"``: ``w = b T d``. Each is a dict
    (see :func:`fit_growth_law` and :func:`fit_power_law`), or None with
    too few points.
    """
    laws = {}
    for model, widths in minimal.items():
        pairs = [(T, w) for T, w in zip(seq_lens, widths) if w is not None]
        Ts = [T for T, _ in pairs]
        ws = [w for _, w in pairs]
        laws[model] = {
            "log_T": fit_growth_law([math.log2(T) for T in Ts], ws),
            "power": fit_power_law(Ts, ws),
            "power_0": fit_power_law(Ts, ws, offset=False),
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


def search_bracket(
    estimator, task, widths, start, n_steps, n_val, target, seed, progress, desc, parallel=False
):
    """Search ``widths`` (sorted) from ``widths[start]`` outwards; ``{width: R^2}``.

    If ``widths[start]`` reaches ``target``, the smaller widths are tried in
    decreasing order until one does not; otherwise the larger ones in
    increasing order until one does. So the smallest width reaching the
    target is found with the fewest fits when it lies near ``start`` (the
    previous length's minimal width), assuming R^2 grows with the width.
    With ``parallel``, the widths of each direction go to joblib's active
    backend in batches of its worker count and those past the stopping one
    are dropped: the result is the sequential one.
    """
    X_val, y_val = task.sample(n_val, random_state=seed)
    found = {}
    batch = max(1, effective_n_jobs()) if parallel else 1

    def scores(chunk):
        if parallel:
            return Parallel()(
                delayed(_fit_score_online)(estimator, w, task, n_steps, X_val, y_val) for w in chunk
            )
        model = clone(estimator).set_params(width=chunk[0])
        train_online(model, task, n_steps, desc=f"{desc} width={chunk[0]}", progress=progress)
        return [float(model.score(X_val, y_val))]

    found[widths[start]] = scores([widths[start]])[0]
    reached = found[widths[start]] >= target
    order = widths[:start][::-1] if reached else widths[start + 1 :]
    for first in range(0, len(order), batch):
        chunk = order[first : first + batch]
        for w, score in zip(chunk, scores(chunk)):
            found[w] = score
            if (score >= target) != reached:
                return found
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
