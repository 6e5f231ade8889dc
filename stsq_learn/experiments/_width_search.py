"""The width searches of the separation experiment: per (T, model), which widths reach a target.

Two regimes (see :func:`~stsq_learn.experiments.width_separation`): online
training per width, in increasing order, stopping at the first that reaches
the target (optionally side by side on a dask cluster); or scikit-learn's
``GridSearchCV`` over ``width`` on finite rows. Then the least-squares
growth laws of the minimal widths.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, ShuffleSplit
from skorch.callbacks import Callback

from .._validation import check_positive_int
from ..engine.training import STOP_REASON
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


def joint_law(curves, widths_of):
    """Least squares ``w = a + b q log2 T`` over the curves' widths (``widths_of(curve)``)."""
    xs, ws = [], []
    for curve in curves:
        q = curve.config["n_selected"]
        for T, w in zip(curve.seq_lens, widths_of(curve)):
            if w is not None:
                xs.append(q * math.log2(T))
                ws.append(w)
    return fit_growth_law(xs, ws)


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


@functools.cache
def _seeded_floor(seq_len, n_selected, width, n_samples, random_state):
    """:func:`_floor_relative_mse` for an integer seed, computed once per process."""
    from ..encodings.floor import isotropic_floor

    return isotropic_floor(
        seq_len, n_selected, width, n_samples=n_samples, random_state=random_state
    ).relative_mse


def _floor_relative_mse(seq_len, n_selected, width, n_samples, random_state):
    """:func:`~stsq_learn.isotropic_floor`'s relative MSE, computed once per process.

    The floor is a function of its arguments (its seed included): the seeds
    of an experiment that a worker process runs one after another share it.
    A seed that is no integer (a generator, None) draws afresh every time.
    """
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        return _seeded_floor.__wrapped__(seq_len, n_selected, width, n_samples, random_state)
    return _seeded_floor(
        int(seq_len), int(n_selected), int(width), int(n_samples), int(random_state)
    )


def floor_widths(seq_lens, n_selected, widths, target, *, n_samples=4000, random_state=0):
    """Per T, the smallest of ``widths`` whose isotropic floor allows R^2 >= ``target``.

    Bisection over the sorted grid (the floor falls as the width grows),
    each width's floor from :func:`~stsq_learn.isotropic_floor` on
    ``n_samples`` simulated rows. None at a T where even the grid's largest
    width's floor is above ``1 - target``.
    """
    out = []
    for T in seq_lens:

        def allows(w, T=T):
            floor = _floor_relative_mse(T, n_selected, w, n_samples, random_state)
            return 1.0 - floor >= target

        lo, hi = -1, len(widths) - 1
        if not allows(widths[hi]):
            out.append(None)
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if allows(widths[mid]):
                hi = mid
            else:
                lo = mid
        out.append(widths[hi])
    return out


class StopAtTarget(Callback):
    """A skorch callback that ends an online fit once it reaches ``target`` R^2 on ``X``, ``y``.

    Every ``every`` steps (and never before), the model being trained is
    scored on the held-out rows by the estimator's own prediction path
    (the same draws :meth:`score` of the fitted model uses), so the
    score at the stop is exactly what ``model.score(X, y)`` returns after
    the fit. It stops the fit the way the package's early stopping does
    (the reason, ``"target_reached"``, is recorded in the net's history),
    so no interruption warning is raised. A fit that never reaches the
    target runs all its steps, exactly as without the callback: scoring
    draws its encodings from its own keyed generator, not the training
    stream.

    Parameters
    ----------
    template : estimator
        An unfitted clone of the estimator being trained (the same
        parameters, an integer ``random_state``), used to predict.
    task : Task
        The task the estimator is trained on (its fitted contract is taken
        from it).
    X, y : ndarray
        The held-out rows and their targets.
    target : float
        The R^2 that ends the fit.
    every : int, default=25
        Steps between two checks.

    Attributes
    ----------
    checks_ : list of tuple of (int, float)
        ``(step, R^2)`` of every check of the last fit.
    stopped_at_ : int or None
        The step at which the last fit reached the target (None if it did not).
    """

    def __init__(self, template, task, X, y, target, every=25):
        self.template = template
        self.task = task
        self.X = X
        self.y = y
        self.target = target
        self.every = every

    def initialize(self):
        if not isinstance(self.template.random_state, (int, np.integer)):
            raise ValueError(
                "StopAtTarget needs an estimator with an integer random_state (its prediction "
                f"draws follow from it), got random_state={self.template.random_state!r}."
            )
        self.every = check_positive_int(self.every, "every")
        self.checks_ = []
        self.stopped_at_ = None
        return self

    def score_module(self, net):
        """R^2 on the held-out rows of the model ``net`` holds now."""
        view = copy.copy(self.template)
        task = self.task
        view.task_ = type(task).from_fitted(
            task.reference_length, task.n_features, task.fitted_state()
        )
        view.net_ = net
        view.seq_len_ = view.task_.seq_len
        view.n_features_in_ = view.task_.n_features
        view._y_1d = task.targets_1d
        view._predict_seed = self.template._seeds(False)[3]
        module = net.module_
        was_training = module.training
        try:
            return float(view.score(self.X, self.y))
        finally:
            module.train(was_training)

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        step = len(net.history[-1]["batches"])
        if step % self.every:
            return
        score = self.score_module(net)
        self.checks_.append((step, score))
        if score >= self.target:
            self.stopped_at_ = step
            net.history.record(STOP_REASON, "target_reached")
            raise KeyboardInterrupt  # how skorch stops a fit (as its EarlyStopping does)


def fit_and_score(
    estimator, width, task, n_steps, X_val, y_val, target=None, *, desc="", progress=False
):
    """Train ``estimator`` at ``width`` online and score it on the held-out rows.

    With ``target``, the fit stops once it reaches ``target`` R^2 on those
    rows (:class:`StopAtTarget`, checked every 25 steps). Returns
    ``(R^2, steps run)``.
    """
    model = clone(estimator).set_params(width=width)
    callbacks = []
    if target is not None:
        callbacks.append(StopAtTarget(clone(model), task, X_val, y_val, target))
    train_online(
        model, task, n_steps, desc=f"{desc} width={width}", progress=progress, callbacks=callbacks
    )
    return float(model.score(X_val, y_val)), int(model.n_iter_)


def widths_fitter(estimator, task, n_steps, X_val, y_val, goal, parallel, desc, progress):
    """A function fitting a list of widths: :func:`fit_and_score` at each, ``[(R^2, steps)]``.

    With ``parallel``, the fits of a list go to joblib's active backend at
    once (no progress bars there); otherwise they run here, one after
    another.
    """

    def fit(widths):
        if parallel:
            return Parallel()(
                delayed(fit_and_score)(estimator, w, task, n_steps, X_val, y_val, goal)
                for w in widths
            )
        return [
            fit_and_score(
                estimator, w, task, n_steps, X_val, y_val, goal, desc=desc, progress=progress
            )
            for w in widths
        ]

    return fit


def search_online(
    estimator,
    task,
    widths,
    n_steps,
    n_val,
    target,
    stop,
    seed,
    progress,
    desc,
    parallel=False,
    *,
    stop_fits=False,
):
    """Train each width online and score it on fresh rows; ``{width: R^2}``.

    With ``stop``, the widths past the first that reaches the target are not
    trained. With ``parallel``, the widths go to joblib's active backend in
    batches of its worker count; widths past the first that reaches the
    target are dropped, so the result is the sequential one. With
    ``stop_fits``, every fit stops once it reaches ``target`` on the
    held-out rows that score it (:class:`StopAtTarget`), as in
    :func:`search_bracket`.
    """
    X_val, y_val = task.sample(n_val, random_state=seed)
    goal = target if stop_fits else None
    fit = widths_fitter(estimator, task, n_steps, X_val, y_val, goal, parallel, desc, progress)
    found = {}
    batch = max(1, effective_n_jobs()) if parallel else 1
    for start in range(0, len(widths), batch):
        chunk = widths[start : start + batch]
        for w, (score, _) in zip(chunk, fit(chunk)):
            found[w] = score
            if stop and score >= target:
                return found
    return found


def search_bracket(
    estimator,
    task,
    widths,
    start,
    n_steps,
    n_val,
    target,
    seed,
    progress,
    desc,
    parallel=False,
    *,
    stop_fits=False,
):
    """Search ``widths`` (sorted) from ``widths[start]`` outwards; ``{width: R^2}``.

    If ``widths[start]`` reaches ``target``, the smaller widths are tried in
    decreasing order until one does not; otherwise the larger ones in
    increasing order until one does. So the smallest width reaching the
    target is found with the fewest fits when it lies near ``start`` (the
    previous length's minimal width), assuming R^2 grows with the width.
    With ``parallel``, the widths of each direction go to joblib's active
    backend in batches of its worker count and those past the stopping one
    are dropped: the result is the sequential one. With ``stop_fits``, every
    fit stops once it reaches ``target`` on the held-out rows that score it
    (:class:`StopAtTarget`), as in :func:`search_bisect`.
    """
    X_val, y_val = task.sample(n_val, random_state=seed)
    found = {}
    batch = max(1, effective_n_jobs()) if parallel else 1
    goal = target if stop_fits else None
    fit = widths_fitter(estimator, task, n_steps, X_val, y_val, goal, parallel, desc, progress)

    def scores(chunk):
        return [score for score, _ in fit(chunk)]

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


def search_bisect(
    estimator,
    task,
    widths,
    start,
    n_steps,
    n_val,
    target,
    seed,
    progress,
    desc,
    *,
    stop_fits=True,
    parallel=False,
):
    """The smallest width of ``widths`` reaching ``target``, by bisection from ``widths[start]``.

    ``widths[start]`` (a prediction: the floor's minimal width, or the
    previous length's scaled) is trained first. If it reaches the target,
    the widths below are tried 1, 2, 4, ... grid steps down until one does
    not; otherwise 1, 2, 4, ... steps up until one does (or the grid's top
    fails). The bracket found is then bisected until a width that reaches
    the target has its grid neighbour below trained and failing (or is the
    grid's smallest): the minimal width is confirmed by two fits, not
    inferred. Assumes R^2 grows with the width, as the scan does.

    With ``stop_fits``, every fit stops once it reaches ``target`` on the
    ``n_val`` held-out rows that score it (:class:`StopAtTarget`); a fit
    that does not reach it runs all ``n_steps``. With ``parallel``, each fit
    runs on joblib's active backend (one at a time: each depends on the last).

    Returns
    -------
    scores : dict of int to float
        R^2 of every width trained.
    steps : dict of int to int
        Steps each of them ran.
    """
    X_val, y_val = task.sample(n_val, random_state=seed)
    scores, steps = {}, {}
    goal = target if stop_fits else None
    fit = widths_fitter(estimator, task, n_steps, X_val, y_val, goal, parallel, desc, progress)

    def passes(i):
        w = widths[i]
        (got,) = fit([w])
        scores[w], steps[w] = got
        return got[0] >= target

    start = int(np.clip(start, 0, len(widths) - 1))
    lo, hi = -1, len(widths)  # widths[lo] fails, widths[hi] passes (-1, len: not known)
    gap = 1
    if passes(start):
        hi = start
        while hi > 0 and lo < 0:
            i = max(hi - gap, 0)
            if passes(i):
                hi = i
            else:
                lo = i
            gap *= 2
    else:
        lo = start
        while lo < len(widths) - 1 and hi == len(widths):
            i = min(lo + gap, len(widths) - 1)
            if passes(i):
                hi = i
            else:
                lo = i
            gap *= 2
    while hi < len(widths) and hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return scores, steps


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
