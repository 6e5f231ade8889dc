"""How a study fits and scores its runs: its options, models, grid points, seeds and workers
(:class:`Study`, checked before any work), and :func:`fit_and_measure`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import numbers
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import get_scorer
from tqdm.auto import tqdm

from ..tasks import Task
from .plan import StudyPlan, Work, active_plan, planned_steps
from .seeds import check_seeds, stream_seed
from .table import StudyTable


class Study:
    """A study's models, grid points and options (its keyword-only parameters, those of every
    study function: :func:`takes_options`), checked before any work. A study function may
    set what each fit measures besides: ``lengths`` (scored there too) and ``callbacks``
    (each ``callback(estimator, task) -> skorch callback``, made per seed)."""

    def __init__(
        self,
        kind,
        estimators,
        task,
        grid=None,
        *,
        seeds=3,
        n_steps="auto",
        n_train=None,
        n_test=2000,
        scoring=None,
        error_score=np.nan,
        n_jobs=None,
        device=None,
        batch_seeds=False,
        progress=False,
        dry_run=False,
    ):
        if not isinstance(batch_seeds, (bool, np.bool_)):
            raise TypeError(f"batch_seeds must be True or False, got {batch_seeds!r}.")
        self.kind, self.device, self.batch_seeds = kind, device, bool(batch_seeds)
        self.progress, self.dry_run, self.lengths, self.callbacks = progress, dry_run, None, []
        self.models = models_of(estimators)
        self.seeds = check_seeds(seeds)
        self.n_steps = check_count(n_steps, "n_steps", allow_auto=True)
        self.n_train = check_count(n_train, "n_train", allow_none=True)
        self.n_test = check_count(n_test, "n_test")
        self.scorers = scorers_of(scoring)
        self.error_score = check_error_score(error_score)
        self.n_jobs = check_n_jobs(n_jobs)
        self.points = points_of(task, grid, self.models)
        self.grid_names = [name for name, _ in self.points[0].values]
        online = any(point.n_train(self.n_train) is None for point in self.points)
        for label, est in self.models.items():
            if online and not hasattr(est, "fit_online"):
                raise TypeError(
                    f"{label} ({type(est).__name__}) has no fit_online: give n_train (or n_train "
                    "in the grid, at every point) to fit it on rows drawn from the task."
                )
        self.meta = {"study": kind, "seeds": list(self.seeds), "grid": self.grid_names}
        self.meta |= {k: getattr(self, k) for k in ("n_steps", "n_train", "n_test", "batch_seeds")}
        self.meta["models"] = {label: type(est).__name__ for label, est in self.models.items()}

    def work(self, label, point, *, title=None, extra=None, **parts):
        """The :class:`~.plan.Work` of fitting model ``label`` at ``point`` for every seed
        (``parts``: its other fields, the rows it predicts and the checks along its fits)."""
        model = prepare(
            self.models[label], point, self.seeds[0], label=label, device=self.device, extra=extra
        )
        n_train = point.n_train(self.n_train)
        steps = 0 if n_train is not None else planned_steps(model, self.n_steps)
        where = ", ".join(f"{k}={v}" for k, v in point.values)
        name = f"{title or self.kind}: {label}" + (f" {where}" if where else "")
        n = len(self.seeds)
        parts = {"fits": n, "members": n if self.batch_seeds else 1, "train_rows": n_train, **parts}
        return Work(name, steps=steps, estimator=model, task=point.task, **parts)

    def row(self, label, point, seed):
        """The first columns of a row: ``model``, ``seed`` and the point's ``param_*``."""
        return {"model": label, "seed": seed, **{f"param_{k}": v for k, v in point.values}}

    def run(self, work, columns, rows):
        """The study's table: with ``dry_run``, its plan; inside :func:`~.plan.planning`, no
        rows (its work added to the plan); else the rows ``rows()`` gives (dicts)."""
        if self.dry_run:
            return StudyPlan(work)
        plan = active_plan()
        if plan is not None:
            plan.extend(work)
        return self.table(columns, [] if plan is not None else rows())

    def table(self, columns, rows):
        """The :class:`~.table.StudyTable` of ``rows`` (dicts): ``model``, ``seed``, the
        grid's ``param_*``, then ``columns``."""
        columns = ["model", "seed", *(f"param_{n}" for n in self.grid_names), *columns]
        return StudyTable({c: [row[c] for row in rows] for c in columns}, meta=self.meta)

    def bar(self, what, **kwargs):
        """A progress bar over the study's fits (shown with ``progress``), saying its size."""
        n = f"{len(self.models)} models x {len(self.points)} points x {len(self.seeds)} seeds"
        return tqdm(desc=f"{what} ({n})", disable=not self.progress, dynamic_ncols=True, **kwargs)

    def measure(self, columns, rows_of, **parts):
        """:meth:`run` the fits of every (model, point) for every seed (their :meth:`work`
        of ``parts``), each record's rows ``rows_of(record)`` (``columns`` after the first)."""
        work = [self.work(label, point, **parts) for label in self.models for point in self.points]

        def rows():
            calls = [(label, point, self.seeds) for label in self.models for point in self.points]
            fits = len(calls) * len(self.seeds)
            with self.bar(f"{self.kind}: {fits} fits", total=fits) as bar:
                results = self.fit(calls, bar)
            warn_failures([r for rs in results for r in rs], self.kind)
            return [
                {**self.row(label, point, record["seed"]), **row}
                for (label, point, _), records in zip(calls, results)
                for record in records
                for row in rows_of(record)
            ]

        return self.run(work, columns, rows)

    def fit(self, calls, bar):
        """The records of :func:`fit_and_measure` for each ``(label, point, seeds[, extra])``,
        in order: run here, or on joblib's active backend with ``n_jobs``."""
        if self.n_jobs in (None, 1) or len(calls) <= 1:
            out = []
            for call in calls:
                out.append(fit_and_measure(self, *call))
                bar.update(len(out[-1]))
            return out
        from joblib import Parallel, delayed

        out = Parallel(n_jobs=self.n_jobs)(delayed(_one_thread)(self, *call) for call in calls)
        bar.update(sum(len(records) for records in out))
        return out


def takes_options(*left_out):
    """Decorate a study function ``f(..., **options)``: its signature (what ``help``,
    ``inspect`` and the docs read) lists :class:`Study`'s options after its own parameters,
    less ``left_out``; a call with another keyword is refused as Python refuses it."""
    options = inspect.signature(Study).parameters.values()
    options = [p for p in options if p.kind == p.KEYWORD_ONLY and p.name not in left_out]

    def decorate(function):
        own = inspect.signature(function).parameters.values()
        signature = inspect.Signature([p for p in own if p.kind != p.VAR_KEYWORD] + options)

        @functools.wraps(function)
        def study_function(*args, **kwargs):
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{function.__name__}() {exc}") from None
            return function(*args, **kwargs)

        study_function.__signature__ = signature
        return study_function

    return decorate


# -- models and grid points -------------------------------------------------------------------
def models_of(estimators):
    """``{label: estimator}`` from one estimator (labelled by its class) or a dict, checked."""
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


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of a study's grid: its ``values`` (``(name, value)`` pairs in the grid's
    order), the ``task`` there, and the estimators' ``changes`` and the study's ``settings``
    (:data:`STUDY_NAMES`) as such pairs."""

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
"""Grid names that are settings of the study: ``n_train``, the rows each fit is fitted on."""


def expand_grid(grid):
    """The points of ``grid``: a dict of name to values (its first name varying fastest),
    a list of such dicts (their points one after another), or None (one empty point)."""
    if grid is None:
        return [{}]
    out = []
    for g in grid if isinstance(grid, list) else [grid]:
        if not isinstance(g, dict):
            raise TypeError(
                f"grid must be a dict of parameter name to values, or a list of such dicts, "
                f"got {type(g).__name__}: {g!r}."
            )
        for name, values in g.items():
            if not isinstance(name, str):
                raise TypeError(f"grid names must be strings, got {name!r}.")
            if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
                raise TypeError(
                    f"grid[{name!r}] must be a sequence of values, got {type(values).__name__}: "
                    f"{values!r}."
                )
            if len(list(values)) == 0:
                raise ValueError(f"grid[{name!r}] is empty: give at least one value.")
        names = list(g)
        for combo in itertools.product(*(list(g[n]) for n in reversed(names))):
            out.append(dict(zip(names, reversed(combo))))
    return out


def task_fields(task):
    """The names of ``task``'s fields (the law's sizes a grid may vary)."""
    return tuple(f.name for f in dataclasses.fields(task))


def points_of(task, grid, models):
    """The :class:`Point` list of ``grid`` on ``task``, every value checked for every model."""
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
            settings = {k: check_count(v, f"grid[{k!r}] value") for k, v in settings.items()}
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"grid point {values}: {exc}") from None
        point = Point(tuple(values.items()), at, tuple(changes.items()), tuple(settings.items()))
        for label, est in models.items():
            prepare(est, point, None, label=label)
        points.append(point)
    return points


def prepare(estimator, point, seed, *, label="estimator", device=None, extra=None):
    """An unfitted clone of ``estimator`` with the point's parameters (and ``extra``), the
    seed and device, checked as ``fit`` checks them (naming the grid point)."""
    params = {**dict(point.changes), **(extra or {})}
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


# -- rows, scores and the other options --------------------------------------------------------
def test_rows(task, seed, n_rows):
    """The held-out rows of a seed, on which every model of the seed is scored (paired)."""
    return task.sample(n_rows, random_state=stream_seed(seed, "test"))


test_rows.__test__ = False  # not a pytest test


def scorers_of(scoring):
    """Column name to ``scorer(estimator, X, y)``: None is the estimator's ``score`` and a
    string or callable one scorer (in ``"score"``), a dict one column each."""
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


def check_error_score(error_score):
    """``"raise"`` or a number (the score of a failed fit)."""
    if isinstance(error_score, str) and error_score == "raise":
        return error_score
    if isinstance(error_score, (bool, np.bool_)) or not isinstance(error_score, numbers.Real):
        raise ValueError(f'error_score must be "raise" or a number, got {error_score!r}.')
    return float(error_score)


def check_n_jobs(n_jobs):
    """None, -1 or a non-zero int (joblib's meaning)."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {type(n_jobs).__name__}: {n_jobs!r}.")
    if n_jobs == 0:
        raise ValueError("n_jobs must be None, a positive int or a negative one, got 0.")
    return int(n_jobs)


# -- fitting and measuring ----------------------------------------------------------------------
def fit_and_measure(study, label, point, seeds, extra=None):
    """Per seed, the record of ``study``'s model ``label`` fitted at ``point`` (with ``extra``
    parameters: a search's candidate) and scored: ``seed``, ``scores`` (column to score; with
    ``lengths``, length to that, and ``errors``), ``n_iter``, ``seconds``, ``error`` ("" or the
    message), ``loss_curve`` and ``callbacks`` (the seed's, after its fit)."""
    task, n_train, n_steps = point.task, point.n_train(study.n_train), study.n_steps
    kw = dict(label=label, device=study.device, extra=extra)
    ests = [prepare(study.models[label], point, s, **kw) for s in seeds]
    made = [[cb(est, task) for cb in study.callbacks] for est in ests]
    results = None
    if study.batch_seeds:
        results = batched_fits(ests, task, seeds, n_steps, n_train, made)
    if results is None:
        results = _fit_each(ests, task, seeds, n_steps, n_train, made)
    if study.error_score == "raise":
        for err, _ in results:
            if err is not None:
                raise err
    records = []
    for est, seed, (err, seconds), cbs in zip(ests, seeds, results, made):
        X, y = test_rows(task, seed, study.n_test)
        record = {
            "seed": seed,
            "n_iter": int(getattr(est, "n_iter_", 0)) if err is None else 0,
            "seconds": float(seconds),
            "error": "" if err is None else f"{type(err).__name__}: {err}",
            "callbacks": cbs,
            "loss_curve": list(getattr(est, "loss_curve_", [])) if err is None else [],
        }
        if study.lengths is None:
            record["scores"], failure = _score(est, err, study, X, y)
            record["error"] = record["error"] or failure or ""
        else:
            record["scores"], record["errors"], s = {}, {}, stream_seed(seed, "shift")
            for L in study.lengths:
                X_L, y_L = (X, y) if L == task.seq_len else task.shift(X, y, L, random_state=s)
                record["scores"][L], failure = _score(est, err, study, X_L, y_L)
                record["errors"][L] = record["error"] or failure or ""
        records.append(record)
    return records


FIT_COLUMNS = ("n_iter", "seconds", "fit_failure")
"""The columns of a fit in a study's rows: :func:`fit_columns`."""


def fit_columns(record):
    """A record's steps or epochs run, seconds and error message (empty when it went well)."""
    return dict(zip(FIT_COLUMNS, (record["n_iter"], record["seconds"], record["error"])))


def _fit_each(ests, task, seeds, n_steps, n_train, made):
    """Per seed ``(error or None, seconds)``: the seeds fitted one after another."""
    out = []
    for est, seed, cbs in zip(ests, seeds, made):
        start = time.perf_counter()
        try:
            if cbs:
                est.set_params(callbacks=[*(est.get_params().get("callbacks") or []), *cbs])
            if n_train is None:
                est.fit_online(task, n_steps)
            else:
                est.fit(*task.sample(n_train, random_state=stream_seed(seed, "train")))
            out.append((None, time.perf_counter() - start))
        except Exception as exc:  # the study records it, as cross_validate does
            out.append((exc, time.perf_counter() - start))
    return out


def batched_fits(ests, task, seeds, n_steps, n_train, made):
    """Per seed ``(error or None, seconds)``: the seeds trained as one batched model
    (:mod:`~stsq_learn.engine.members`: each seed's numbers those of its own fit, its
    callbacks ``made`` acting on its member alone), the seconds shared in proportion to
    the steps each ran; None, nothing fitted, where the seeds cannot train together."""
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


def _score(est, err, study, X, y):
    """Column to score of a fitted ``est`` on ``(X, y)`` (``error_score`` where it failed),
    and the first scoring's error message."""
    if err is not None:
        return dict.fromkeys(study.scorers, float(study.error_score)), None
    out, failure = {}, None
    for name, scorer in study.scorers.items():
        try:
            out[name] = float(scorer(est, X, y))
        except Exception as exc:
            if study.error_score == "raise":
                raise
            out[name] = float(study.error_score)
            failure = failure or f"{type(exc).__name__}: {exc}"
    return out, failure


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


def _one_thread(study, *call):
    """:func:`fit_and_measure` with one torch thread (a worker process's side)."""
    import torch

    torch.set_num_threads(1)
    return fit_and_measure(study, *call)
