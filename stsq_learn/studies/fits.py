"""How a study fits and scores its runs: models, grid points, rows, seeds and workers.

Every study function (:mod:`.sweep`, :mod:`.search`) is built from these
pieces, in this order:

1. :func:`models_of` reads the estimators (one, or ``{label: estimator}``);
   :func:`points_of` expands the grid and splits each point into the task's
   fields (``seq_len``, ``n_selected``, a signal: they change the task) and
   the estimators' parameters (``width``, ``n_heads``: ``set_params``), and
   checks every value before any fit;
2. :func:`fit_and_measure` fits one model at one point for some seeds (one
   after another, or as one batched model) and scores each on its seed's
   held-out rows (:func:`test_rows`), at the training length or moved to
   other lengths by the task's own shift;
3. :func:`execute` runs such calls here or on joblib's active backend (loky
   processes by default, a Dask cluster inside ``joblib.parallel_backend
   ("dask")``), in order: the numbers do not depend on ``n_jobs``.

Seeds follow one rule (:mod:`.seeds`): a fit of seed ``s`` has
``random_state=s``; its rows come from :func:`~.seeds.stream_seed`.
"""

from __future__ import annotations

import dataclasses
import itertools
import numbers
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import get_scorer

from ..tasks import Task
from .seeds import stream_seed

__all__ = [
    "Point",
    "execute",
    "fit_and_measure",
    "models_of",
    "points_of",
    "scorers_of",
    "test_rows",
]


# -- models --------------------------------------------------------------------------------
def models_of(estimators):
    """``{label: estimator}`` from one estimator or a dict of them, checked.

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        One estimator (labelled by its class name) or several by label.

    Returns
    -------
    dict of str to estimator
    """
    if isinstance(estimators, dict):
        if not estimators:
            raise ValueError("estimators is an empty dict: give at least one estimator.")
        models = dict(estimators)
    else:
        models = {type(estimators).__name__: estimators}
    for label, est in models.items():
        if not isinstance(label, str) or not label:
            raise TypeError(f"estimator labels must be non-empty strings, got {label!r}.")
        if not (hasattr(est, "get_params") and hasattr(est, "fit")):
            raise TypeError(
                f"estimators[{label!r}] must be a scikit-learn estimator (get_params and "
                f"fit), got {type(est).__name__}: {est!r}."
            )
    return models


# -- grid points ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Point:
    """One point of a study's grid: its values, the task there and the estimators' changes.

    Attributes
    ----------
    values : tuple of (str, object)
        The grid's names and values at this point, in the grid's order.
    task : Task
        The task with the point's task fields replaced.
    changes : tuple of (str, object)
        The point's estimator parameters.
    settings : tuple of (str, object), default=()
        The point's settings of the study itself (:data:`STUDY_NAMES`:
        ``n_train``, the rows each fit is fitted on there).
    """

    values: tuple
    task: object
    changes: tuple
    settings: tuple = ()

    @property
    def params(self):
        """The point's values as a dict."""
        return dict(self.values)

    def n_train(self, default):
        """The rows each fit is fitted on at this point: its ``n_train``, or ``default``."""
        return dict(self.settings).get("n_train", default)


STUDY_NAMES = ("n_train",)
"""Grid names that are settings of the study, not of the task or the estimators:
``n_train``, the rows each fit draws from the task and is fitted on (``fit``)."""


def expand_grid(grid):
    """The points of ``grid``: a dict of name to values (its first name varying fastest),
    a list of such dicts (their points one after another), or None (one empty point)."""
    if grid is None:
        return [{}]
    grids = grid if isinstance(grid, list) else [grid]
    out = []
    for g in grids:
        if not isinstance(g, dict):
            raise TypeError(
                f"grid must be a dict of parameter name to values, or a list of such dicts, "
                f"got {type(g).__name__}: {g!r}."
            )
        names = list(g)
        for name in names:
            values = g[name]
            if not isinstance(name, str):
                raise TypeError(f"grid names must be strings, got {name!r}.")
            if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
                raise TypeError(
                    f"grid[{name!r}] must be a sequence of values, got {type(values).__name__}: "
                    f"{values!r}."
                )
            if len(list(values)) == 0:
                raise ValueError(f"grid[{name!r}] is empty: give at least one value.")
        lists = [list(g[n]) for n in reversed(names)]
        for combo in itertools.product(*lists):
            out.append(dict(zip(names, reversed(combo))))
    return out


def task_fields(task):
    """The names of ``task``'s fields (the law's sizes a grid may vary)."""
    return tuple(f.name for f in dataclasses.fields(task))


def points_of(task, grid, models, *, extra=None):
    """The grid's points on ``task`` for ``models``, every value checked before any fit.

    Parameters
    ----------
    task : Task
        The law at its defaults.
    grid : dict, list of dict or None
        See :func:`expand_grid`.
    models : dict of str to estimator
        The models (each must take every estimator parameter of the grid).
    extra : dict or None, default=None
        Values set at every point (a search's candidate), checked the same way.

    Returns
    -------
    list of Point
    """
    if not isinstance(task, Task):
        raise TypeError(
            f"task must be a Task (a task object), got {type(task).__name__}: {task!r}."
        )
    fields = task_fields(task)
    points = []
    for values in expand_grid(grid):
        settings = {k: v for k, v in values.items() if k in STUDY_NAMES and k not in fields}
        changes = {k: v for k, v in values.items() if k not in fields and k not in settings}
        task_changes = {k: v for k, v in values.items() if k in fields}
        try:
            at = dataclasses.replace(task, **task_changes) if task_changes else task
            for name, value in settings.items():
                check_count(value, f"grid[{name!r}] value")
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"grid point {values}: {exc}") from None
        settings = {k: int(v) for k, v in settings.items()}
        point = Point(tuple(values.items()), at, tuple(changes.items()), tuple(settings.items()))
        for label, est in models.items():
            prepare(est, point, None, label=label)
        points.append(point)
    return points


def prepare(estimator, point, seed, *, label="estimator", device=None, extra=None):
    """An unfitted clone of ``estimator`` with the point's parameters, the seed and device.

    The parameters are checked as ``fit`` would check them (a value out of
    range raises here, naming the grid point), and the estimator must train
    on the point's task.
    """
    params = dict(point.changes)
    params.update(extra or {})
    known = estimator.get_params(deep=False)
    unknown = [k for k in params if k not in known]
    if unknown:
        raise ValueError(
            f"grid point {point.params}: {unknown[0]!r} is neither a field of "
            f"{type(point.task).__name__} ({', '.join(task_fields(point.task))}), a "
            f"setting of the study ({', '.join(STUDY_NAMES)}) nor a parameter of {label} "
            f"({type(estimator).__name__})."
        )
    if seed is not None and "random_state" in known:
        params["random_state"] = seed
    if device is not None and "device" in known:
        params["device"] = device
    est = clone(estimator).set_params(**params)
    if hasattr(est, "_validate_params"):
        try:
            est._validate_params()
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"grid point {point.params}, {label}: {exc}") from None
    task_class = getattr(est, "_task_class", None)
    if task_class is not None and not isinstance(point.task, task_class()):
        raise TypeError(
            f"{label} ({type(est).__name__}) trains on {task_class().__name__}, and the "
            f"study's task is a {type(point.task).__name__}."
        )
    return est


def check_online(models, points, n_train):
    """Refuse a model without ``fit_online`` at a point that trains online (no ``n_train``)."""
    if all(point.n_train(n_train) is not None for point in points):
        return
    for label, est in models.items():
        if not hasattr(est, "fit_online"):
            raise TypeError(
                f"{label} ({type(est).__name__}) has no fit_online: give n_train (or n_train in "
                "the grid, at every point) to fit it on rows drawn from the task."
            )


# -- rows and scores ------------------------------------------------------------------------
def test_rows(task, seed, n_rows):
    """The held-out rows of a seed: ``task.sample(n_rows, stream_seed(seed, "test"))``.

    Every model of the seed is scored on them (a paired comparison).
    """
    return task.sample(n_rows, random_state=stream_seed(seed, "test"))


test_rows.__test__ = False  # not a pytest test


def scorers_of(scoring):
    """Column name to a scorer ``scorer(estimator, X, y)``.

    None is the estimator's own ``score`` (R^2 for the regressors, accuracy
    for the classifiers), in the column ``"score"``; a string is one of
    scikit-learn's scorers (``get_scorer``) and a callable a scorer, in
    ``"score"``; a dict gives several, each in its column.
    """
    if scoring is None:
        return {"score": _own_score}
    if isinstance(scoring, dict):
        if not scoring:
            raise ValueError("scoring is an empty dict: name at least one scorer.")
        return {str(name): _scorer(s, name) for name, s in scoring.items()}
    return {"score": _scorer(scoring, "scoring")}


def _own_score(estimator, X, y):
    return estimator.score(X, y)


def _scorer(scoring, name):
    if callable(scoring):
        return scoring
    if isinstance(scoring, str):
        try:
            return get_scorer(scoring)
        except ValueError as exc:
            raise ValueError(f"scoring {name!r}: {exc}") from None
    raise TypeError(
        f"scoring {name!r} must be None, a scorer name, a callable scorer(estimator, X, y) or "
        f"a dict of them, got {type(scoring).__name__}: {scoring!r}."
    )


def check_count(value, name, *, allow_auto=False, allow_none=False):
    """A positive int (or ``"auto"``, or None, where allowed), for the messages of a study."""
    if allow_auto and isinstance(value, str) and value == "auto":
        return value
    if allow_none and value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        extra = ' or "auto"' if allow_auto else ""
        extra += " or None" if allow_none else ""
        raise ValueError(f"{name} must be a positive int{extra}, got {value!r}.")
    return int(value)


# -- fitting and measuring -------------------------------------------------------------------
def _fit(est, task, seed, n_steps, n_train, callbacks):
    """Fit ``est`` online (``n_train`` None) or on ``n_train`` rows of its seed; seconds taken."""
    if callbacks:
        est.set_params(callbacks=[*(est.get_params().get("callbacks") or []), *callbacks])
    start = time.perf_counter()
    if n_train is None:
        est.fit_online(task, n_steps)
    else:
        X, y = task.sample(n_train, random_state=stream_seed(seed, "train"))
        est.fit(X, y)
    return time.perf_counter() - start


def fit_and_measure(
    estimator,
    point,
    seeds,
    *,
    n_steps,
    n_train,
    n_test,
    scorers,
    lengths=None,
    callbacks=(),
    error_score=np.nan,
    device=None,
    label="estimator",
    extra=None,
    keep=False,
    batch_seeds=False,
):
    """Fit a model at a point for each seed and score it: one record per seed (and length).

    Parameters
    ----------
    estimator : estimator
        The model's settings (cloned per seed).
    point : Point
        Where: the task and the estimator parameters.
    seeds : sequence of int
        The seeds (``random_state`` of each fit).
    n_steps : int or "auto"
        Online steps (``n_train`` None).
    n_train : int or None
        Training rows of each seed (``fit``), or None to train online (the
        point's own ``n_train``, where the grid sets it, comes first).
    n_test : int
        Held-out rows of each seed.
    scorers : dict of str to callable
        :func:`scorers_of`.
    lengths : sequence of int or None, default=None
        Score the rows moved to each length by the task's shift (None: at
        the training length only).
    callbacks : sequence of callable, default=()
        Each called as ``callback(estimator, task)`` with a seed's estimator
        before its fit, returning a skorch callback for it (a study's
        stopping rule or trace).
    error_score : "raise" or float, default=np.nan
        The score of a failed fit or scoring ("raise": raise its error).
    device : str or None, default=None
        The fits' device (None: the estimator's).
    label : str, default="estimator"
        The model's label, for messages.
    extra : dict or None, default=None
        More estimator parameters (a search's candidate).
    keep : bool, default=False
        Return the fitted estimators too.
    batch_seeds : bool, default=False
        Train the seeds as one batched model (:func:`batched_fits`), each
        seed's callbacks acting on its own member.

    Returns
    -------
    list of dict
        Per seed: ``seed``, ``scores`` (column to value, or length to column
        to value), ``n_iter``, ``seconds``, ``error`` ("" or the message;
        with ``lengths``, ``errors``: length to the message there),
        ``loss_curve``, and ``estimator`` (when ``keep``) and ``callbacks``
        (the seed's callback objects, after the fit).
    """
    task = point.task
    n_train = point.n_train(n_train)
    ests = [prepare(estimator, point, s, label=label, device=device, extra=extra) for s in seeds]
    made = [[cb(est, task) for cb in callbacks] for est in ests]
    records = []
    results = None
    if batch_seeds:
        results = batched_fits(ests, task, seeds, n_steps, n_train, made)
    if results is None:
        results = _fit_each(ests, task, seeds, n_steps, n_train, made)
    if error_score == "raise":
        for err, _ in results:
            if err is not None:
                raise err
    for est, seed, (err, seconds), cbs in zip(ests, seeds, results, made):
        X, y = test_rows(task, seed, n_test)
        record = {
            "seed": seed,
            "n_iter": int(getattr(est, "n_iter_", 0)) if err is None else 0,
            "seconds": float(seconds),
            "error": "" if err is None else f"{type(err).__name__}: {err}",
            "callbacks": cbs,
            "loss_curve": list(getattr(est, "loss_curve_", [])) if err is None else [],
        }
        if lengths is None:
            record["scores"], failure = _score(est, err, scorers, X, y, error_score)
            record["error"] = record["error"] or failure or ""
        else:
            record["scores"], record["errors"] = {}, {}
            for L in lengths:
                X_L, y_L = (
                    (X, y)
                    if L == task.seq_len
                    else task.shift(X, y, L, random_state=stream_seed(seed, "shift"))
                )
                record["scores"][L], failure = _score(est, err, scorers, X_L, y_L, error_score)
                record["errors"][L] = record["error"] or failure or ""
        if keep:
            record["estimator"] = est if err is None else None
        records.append(record)
    return records


def _fit_each(ests, task, seeds, n_steps, n_train, made):
    """Per seed ``(error or None, seconds)``: the seeds fitted one after another."""
    out = []
    for est, seed, cbs in zip(ests, seeds, made):
        start = time.perf_counter()
        try:
            out.append((None, _fit(est, task, seed, n_steps, n_train, cbs)))
        except Exception as exc:  # the study records it, as cross_validate does
            out.append((exc, time.perf_counter() - start))
    return out


def batched_fits(ests, task, seeds, n_steps, n_train, made):
    """Per seed ``(error or None, seconds)``: the seeds trained as one batched model.

    :func:`~stsq_learn.engine.members.fit_online_members` (online) or
    :func:`~stsq_learn.engine.members.fit_members` on each seed's own rows
    (``n_train``): each seed its own initialisation and draws, the numbers
    of its own fit (to the bit on a CPU). Each seed's callbacks of the study
    (``made``: a stopping rule, a trace) act on that seed's member alone: a
    member that reaches its target stops there and leaves the run, the
    others go on. The seconds of the batched run are shared among the seeds
    in proportion to the steps each ran. Returns None, having fitted
    nothing, where the seeds cannot train together: a single seed, or
    estimators the members engine does not take (their error says why);
    the engine itself falls back to one fit after another for settings that
    do not move in lockstep.
    """
    from ..engine.members import fit_members, fit_online_members

    if len(ests) < 2:
        return None
    start = time.perf_counter()
    try:
        if n_train is None:
            fitted = fit_online_members(ests, task, n_steps, errors="return", callbacks=made)
        else:
            rows = [task.sample(n_train, random_state=stream_seed(s, "train")) for s in seeds]
            fitted = fit_members(
                ests, [X for X, _ in rows], [y for _, y in rows], errors="return", callbacks=made
            )
    except (TypeError, ValueError):  # not members of one estimator: nothing was changed
        return None
    seconds = time.perf_counter() - start
    steps = [
        max(int(getattr(est, "n_iter_", 0)), 1) if not isinstance(res, BaseException) else 1
        for est, res in zip(ests, fitted)
    ]
    return [
        (res if isinstance(res, BaseException) else None, seconds * k / sum(steps))
        for res, k in zip(fitted, steps)
    ]


def _score(est, err, scorers, X, y, error_score):
    """Column to score of a fitted ``est`` on ``(X, y)``; ``error_score`` where it failed."""
    if err is not None:
        return dict.fromkeys(scorers, float(error_score)), None
    out, failure = {}, None
    for name, scorer in scorers.items():
        try:
            out[name] = float(scorer(est, X, y))
        except Exception as exc:
            if error_score == "raise":
                raise
            out[name] = float(error_score)
            failure = failure or f"{type(exc).__name__}: {exc}"
    return out, failure


def check_error_score(error_score):
    """``"raise"`` or a number (the score of a failed fit)."""
    if isinstance(error_score, str) and error_score == "raise":
        return error_score
    if isinstance(error_score, (bool, np.bool_)) or not isinstance(error_score, numbers.Real):
        raise ValueError(f'error_score must be "raise" or a number, got {error_score!r}.')
    return float(error_score)


def warn_failures(records, study):
    """One ``FitFailedWarning`` for the failed fits of a study (as ``cross_validate`` warns)."""
    failed = [r for r in records if r.get("error") or any(r.get("errors", {}).values())]
    if failed:
        warnings.warn(
            f"{study}: {len(failed)} of {len(records)} fits or scorings failed; their scores "
            f"are error_score. The first: "
            f"{failed[0]['error'] or next(e for e in failed[0]['errors'].values() if e)}",
            FitFailedWarning,
            stacklevel=3,
        )


# -- workers --------------------------------------------------------------------------------
def _one_thread(function, kwargs):
    """``function(**kwargs)`` with one torch thread (a worker process's side)."""
    import torch

    torch.set_num_threads(1)
    return function(**kwargs)


def execute(calls, *, n_jobs=None, bar=None):
    """Run ``calls`` (``(function, kwargs)`` pairs); their results, in order.

    ``n_jobs`` None or 1 runs them here; otherwise on joblib's active
    backend (loky processes by default, each with one torch thread).
    """
    calls = list(calls)
    if n_jobs in (None, 1) or len(calls) <= 1:
        out = []
        for function, kwargs in calls:
            out.append(function(**kwargs))
            if bar is not None:
                bar.update(_count(out[-1]))
        return out
    from joblib import Parallel, delayed

    out = Parallel(n_jobs=n_jobs)(delayed(_one_thread)(f, kw) for f, kw in calls)
    if bar is not None:
        bar.update(sum(_count(r) for r in out))
    return out


def _count(result):
    return len(result) if isinstance(result, list) else 1


def check_n_jobs(n_jobs):
    """None, -1 or a non-zero int (joblib's meaning)."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {type(n_jobs).__name__}: {n_jobs!r}.")
    if n_jobs == 0:
        raise ValueError("n_jobs must be None, a positive int or a negative one, got 0.")
    return int(n_jobs)
