"""Threshold searches: the least value of a monotone parameter that reaches a target score (the
smallest width reaching an R^2, the fewest heads, the weakest signal detected), per seed."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import sklearn
from sklearn.base import clone, is_classifier, is_regressor
from skorch.callbacks import Callback

from ..engine.regression import _Regressor
from ..engine.training import STOP_REASON
from .fits import (
    FIT_COLUMNS,
    Point,
    Study,
    check_count,
    fit_columns,
    prepare,
    takes_options,
    task_fields,
    test_rows,
    warn_failures,
)
from .sweep import fitted_view, measure_now

__all__ = ["METHODS", "StopAtTarget", "minimal_width", "search_threshold"]


# -- the methods: generators that yield a candidate and receive whether it passed -------------
def _scan(n, start):
    for i in range(start, n):
        if (yield i):
            return


def _bracket(n, start):
    reached = yield start
    order = range(start - 1, -1, -1) if reached else range(start + 1, n)
    for i in order:
        if (yield i) != reached:
            return


def _bisect(n, start):
    lo, hi = -1, n  # values[lo] fails, values[hi] passes (-1, n: not known)
    down = yield start
    lo, hi = (lo, start) if down else (start, hi)
    gap = 1
    while (lo < 0 < hi) if down else (hi == n and lo < n - 1):
        i = max(hi - gap, 0) if down else min(lo + gap, n - 1)
        lo, hi = (lo, i) if (yield i) else (i, hi)
        gap *= 2
    while hi < n and hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if (yield mid) else (mid, hi)


def _geometric(low, high, n_iter):
    """Yields values; returns the threshold (the final bracket's geometric mean) or None."""
    reached = False
    for _ in range(n_iter):
        mid = float(np.sqrt(low * high))
        if (yield mid):
            high, reached = mid, True
        else:
            low = mid
    if not reached and not (yield high):
        return None
    return float(np.sqrt(low * high))


METHODS = ("scan", "bracket", "bisect", "geometric")
"""The search methods, by name."""

_GRID_METHODS = {"scan": _scan, "bracket": _bracket, "bisect": _bisect}


# -- stopping a fit at the target ------------------------------------------------------------
class StopAtTarget(Callback):
    """A skorch callback that ends an online fit once it reaches ``target`` on held-out rows.

    Every ``every`` steps the model is scored on ``X, y`` as the fitted model
    would be (its own prediction draws), so the score at the stop is the
    fitted model's. It stops as the package's early stopping does (the
    reason ``"target_reached"`` in the net's history).

    Parameters
    ----------
    template : estimator
        An unfitted copy of the estimator being trained (an int ``random_state``).
    task : Task
        The task it trains on.
    X, y : ndarray
        The held-out rows and their targets.
    target : float
        The score that ends the fit.
    scorer : callable, default=None
        ``scorer(estimator, X, y)``; None is the estimator's ``score``.
    greater_is_better : bool, default=True
        Whether the target is reached from below.
    every : int, default=25
        Steps between two checks.

    Attributes
    ----------
    checks_ : list of (int, float)
        ``(step, score)`` of every check of the last fit.
    stopped_at_ : int or None
        The step at which the last fit reached the target.
    """

    EVERY = 25
    """The default steps between two checks."""

    def __init__(self, template, task, X, y, target, scorer=None, greater_is_better=True, every=25):
        self.template, self.task, self.X, self.y, self.target = template, task, X, y, target
        self.scorer, self.greater_is_better, self.every = scorer, greater_is_better, every

    def initialize(self):
        if not isinstance(self.template.random_state, (int, np.integer)):
            raise ValueError(
                "StopAtTarget needs an estimator with an integer random_state (its prediction "
                f"draws follow from it), got random_state={self.template.random_state!r}."
            )
        self.every = check_count(self.every, "every")
        self.checks_, self.stopped_at_, self._checked = [], None, None
        return self

    def score_module(self, net):
        """The score of the model ``net`` holds now on the held-out rows.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained.

        Returns
        -------
        float
            The estimator's score, or the scorer's.
        """
        return measure_now(self.template, net, self.task, self._score)

    def _score(self, view):
        if not self._fast(view):
            scorer = type(view).score if self.scorer is None else self.scorer
            return float(scorer(view, self.X, self.y))
        X, y = self._rows(view)
        return self._r2(view, y, view._predict_validated(X))

    def _fast(self, view):
        """Whether the score is a regressor's own (then computed in parts: :meth:`_r2`)."""
        return self.scorer is None and type(view).score is _Regressor.score

    def _rows(self, view):
        """The held-out rows and targets, checked by the task once per fit."""
        if self._checked is None:
            X = view.task_.check_rows(self.X, type(view).__name__)
            self._checked = X, view.task_.check_targets(self.y, X)
        return self._checked

    @staticmethod
    def _r2(view, y, y_pred):
        """The regressors' ``score`` of a prediction, without scikit-learn's argument checks
        (the same number, less a fixed cost that is most of a check on a few thousand rows)."""
        with sklearn.config_context(skip_parameter_validation=True):
            return float(view.task_.score(y, y_pred))

    def _due(self, net):
        step = len(net.history[-1]["batches"])
        return None if step % self.every else step

    def _reached(self, net, step, score):
        """Record a check; whether it reached the target (then the stop is in the history)."""
        self.checks_.append((step, score))
        if not _passes(score, self.target, self.greater_is_better):
            return False
        self.stopped_at_ = step
        net.history.record(STOP_REASON, "target_reached")
        return True

    def on_batch_end(self, net, training=False, **kwargs):
        step = self._due(net) if training else None
        if step is not None and self._reached(net, step, self.score_module(net)):
            raise KeyboardInterrupt  # how skorch stops a fit (as its EarlyStopping does)

    @classmethod
    def members_batch_end(cls, pairs):
        """What :meth:`on_batch_end` does, for the members of a batched fit at one step.

        The members due for a check are scored in one forward of their stacked
        modules (:func:`~stsq_learn.engine.members.predict_members`: each
        prediction to the bit), or one by one where that cannot be.

        Parameters
        ----------
        pairs : list of (StopAtTarget, skorch.NeuralNet)
            Each member's callback and net.

        Returns
        -------
        list of bool
            Per pair, whether it reached the target (and stops).
        """
        from ..engine.members import predict_members

        due = [(cb, net, cb._due(net)) for cb, net in pairs]
        due = [(cb, net, step) for cb, net, step in due if step is not None]
        views = [fitted_view(cb.template, net, cb.task) for cb, net, _ in due]
        scores = [None] * len(due)
        if len(due) > 1 and all(cb._fast(v) for (cb, _, _), v in zip(due, views)):
            rows = [cb._rows(v) for (cb, _, _), v in zip(due, views)]
            predictions = predict_members(views, [X for X, _ in rows])
            if predictions is not None:
                scores = [
                    cb._r2(v, y, p) for (cb, *_), v, (_, y), p in zip(due, views, rows, predictions)
                ]
        stops = {
            id(cb): cb._reached(net, step, cb.score_module(net) if score is None else score)
            for (cb, net, step), score in zip(due, scores)
        }
        return [stops.get(id(cb), False) for cb, _ in pairs]


def _stopper(target, scorer, greater_is_better, n_test, est, task):
    """The :class:`StopAtTarget` of a seed's estimator (a study's callback, as a partial)."""
    X, y = test_rows(task, est.random_state, n_test)
    return StopAtTarget(clone(est), task, X, y, target, scorer, greater_is_better)


def _passes(score, target, greater_is_better):
    return math.isfinite(score) and (score >= target if greater_is_better else score <= target)


# -- start policies --------------------------------------------------------------------------
def _start_value(start, params, previous):
    """The value a point's search starts from (None: the method's default)."""
    if start is None:
        return None
    if isinstance(start, str):  # "previous"
        return previous["value"] if previous is not None and previous["reached"] else None
    if callable(start):
        return start(params, previous)
    return float(start)


def _start_index(values, value, method):
    if value is None or not math.isfinite(value):
        return len(values) // 2 if method == "bisect" else 0
    return next((i for i, v in enumerate(values) if v >= value), len(values) - 1)


# -- the search ------------------------------------------------------------------------------
class _Search:
    """The search of :func:`search_threshold`: its arguments, checked, and its moves."""

    def __init__(
        self, param, values, method, target, greater_is_better, start, skip_after_miss, n_iter
    ):
        self.param, self.method, self.start, self.n_iter = param, method, start, n_iter
        self.greater_is_better = bool(greater_is_better)
        self.skip_after_miss = bool(skip_after_miss)
        if not isinstance(param, str) or not param:
            raise TypeError(f"param must be the name of a parameter or task field, got {param!r}.")
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}.")
        if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, float, np.number)):
            raise TypeError(f"target must be a number, got {target!r}.")
        if not math.isfinite(float(target)):
            raise ValueError(f"target must be a finite number, got {target!r}.")
        if not (start is None or start == "previous" or callable(start)):
            if isinstance(start, str) or not isinstance(start, (int, float, np.number)):
                raise ValueError(
                    f'start must be "previous", None, a number or a callable, got {start!r}.'
                )
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"values must be a sequence of values of {param!r}, got {values!r}.")
        values = list(values)
        if method == "geometric":
            if len(values) != 2 or not all(isinstance(v, (int, float, np.number)) for v in values):
                raise ValueError(
                    f"the geometric search takes values=(low, high), two numbers, got {values!r}."
                )
            if not 0 < float(values[0]) < float(values[1]) < math.inf:
                raise ValueError(f"values=(low, high) must satisfy 0 < low < high, got {values!r}.")
            self.values = (float(values[0]), float(values[1]))
        else:
            if not values:
                raise ValueError(f"values is empty: give the grid of {param!r} to search.")
            if sorted(values) != values or len(set(values)) != len(values):
                raise ValueError(f"values must be increasing, each once, got {values!r}.")
            self.values = tuple(values)
        self.target = float(target)

    def check(self, task, study):
        """Check, before any fit, the grid's ends as candidates, and the grid's names."""
        self.in_task = self.param in task_fields(task)
        for v in (self.values[0], self.values[-1]):
            try:
                at, extra = self.candidate(Point((), task, ()), v)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{self.param}={v!r}: {exc}") from None
            for label, est in study.models.items():
                prepare(est, at, None, label=label, extra=extra)
        self.n_iter = check_count(self.n_iter, "n_iter")
        if self.param in study.grid_names:
            raise ValueError(f"{self.param!r} is both searched and a name of the grid.")

    def candidate(self, point, value):
        """The point with the searched parameter at ``value`` (and its estimator changes)."""
        if self.in_task:
            task = dataclasses.replace(point.task, **{self.param: value})
            return Point(point.values, task, point.changes, point.settings), None
        return point, {self.param: value}

    def chain(self, points):
        """A generator over one (model, seed) line: yields ``(point, value)`` to fit, receives
        the score; returns the result of each point."""
        results, previous = [], None
        for point in points:
            if self.skip_after_miss and previous is not None and not previous["reached"]:
                result = {"value": None, "bound": previous["bound"], "tried": {}, "skipped": True}
            else:
                result = yield from self._one(point, previous)
            result["reached"] = result["value"] is not None
            results.append((point, result))
            previous = {**result, "params": point.params}
        return results

    def _one(self, point, previous):
        tried = {}
        start = _start_value(self.start, point.params, previous)
        if self.method == "geometric":
            gen, to_value = _geometric(*self.values, self.n_iter), float
        else:
            index = _start_index(self.values, start, self.method)
            gen = _GRID_METHODS[self.method](len(self.values), index)
            to_value = self.values.__getitem__
        try:
            cand = to_value(next(gen))
            while True:
                score = yield point, cand
                tried[cand] = score
                cand = to_value(gen.send(_passes(score, self.target, self.greater_is_better)))
        except StopIteration as stop:
            found = stop.value
        passing = [v for v, s in tried.items() if _passes(s, self.target, self.greater_is_better)]
        failing = [v for v, s in tried.items() if v not in passing]
        if self.method != "geometric":
            found = min(passing) if passing else None
        bound = None if found is not None else max(failing, default=None)
        return {"value": found, "bound": bound, "tried": tried, "skipped": False}

    def typical_value(self):
        """A candidate the plan times a search's fits at: the middle of the grid (or range)."""
        if self.method == "geometric":
            return float(np.sqrt(self.values[0] * self.values[1]))
        return self.values[(len(self.values) - 1) // 2]

    def expected_fits(self, first):
        if self.method == "geometric":
            return self.n_iter
        if self.method == "bisect":
            return math.ceil(math.log2(max(len(self.values), 2))) + 2
        return 3 if first else 2


def _ready(pending, position, batch_seeds):
    """The searches that fit in this round: all, or, where seeds train together, those of
    each (model, line) at its earliest point (the others wait there, to train with them)."""
    if not batch_seeds:
        return list(pending)
    earliest = {}
    for (label, li, _), (point, _) in pending.items():
        at = position[id(point)]
        earliest[(label, li)] = min(earliest.get((label, li), at), at)
    return [key for key, (point, _) in pending.items() if position[id(point)] == earliest[key[:2]]]


def _lines(points, grid_names):
    """The points grouped into lines along the grid's first name, each in grid order."""
    lines = {}
    for point in points:
        key = tuple((k, repr(v)) for k, v in point.values if k != grid_names[0])
        lines.setdefault(key, []).append(point)
    return list(lines.values())


# The lowest score of scikit-learn's scorers at most 1, by name (or a kind: f1_macro, ...).
_LOWEST = {"r2": -math.inf, "explained_variance": -math.inf}
_LOWEST |= dict.fromkeys(("accuracy", "balanced_accuracy", "roc_auc", "average_precision"), 0.0)
_LOWEST |= dict.fromkeys(("f1", "precision", "recall", "jaccard"), 0.0)


def _score_range(scoring, label, est):
    """``(name, lowest, highest)`` of the score a search compares, or None where not known."""
    if scoring is None and is_classifier(est):
        return f"{label}'s score (accuracy)", 0.0, 1.0
    if scoring is None:
        return (f"{label}'s score (R^2)", -math.inf, 1.0) if is_regressor(est) else None
    if not isinstance(scoring, str):
        return None
    if scoring.startswith("neg_"):
        return f"the scorer {scoring!r}", -math.inf, 0.0
    low = next((v for k, v in _LOWEST.items() if scoring == k or scoring.startswith(k + "_")), None)
    return None if low is None else (f"the scorer {scoring!r}", low, 1.0)


def _check_reachable(target, greater_is_better, scoring, models):
    """Refuse a target no fit can reach: above the score's highest (below its lowest)."""
    for label, est in models.items():
        name, low, high = _score_range(scoring, label, est) or ("", -math.inf, math.inf)
        if greater_is_better and target > high:
            raise ValueError(
                f"target={target!r} cannot be reached: {name} is at most {high:g}. Give a "
                f"target of at most {high:g} (e.g. 0.9)."
            )
        if not greater_is_better and target < low:
            raise ValueError(
                f"target={target!r} cannot be reached with greater_is_better=False: {name} "
                f"is at least {low:g}."
            )


@takes_options()
def search_threshold(
    estimators,
    task,
    param,
    values,
    *,
    target,
    grid=None,
    method="bracket",
    start="previous",
    skip_after_miss=True,
    greater_is_better=True,
    n_iter=5,
    stop_at_target=False,
    return_trials=False,
    **options,
):
    """The least value of ``param`` with which each model reaches ``target``, per point and seed.

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        The models, as in :func:`~stsq_learn.studies.sweep`.
    task : Task
        The task (its fields at the grid's points replaced).
    param : str
        The searched parameter: an estimator's (``width``, ``n_heads``) or
        a field of the task (a signal strength).
    values : sequence
        The increasing grid of candidates; for ``method="geometric"``, the
        range ``(low, high)``.
    target : float
        The score a value must reach (see ``greater_is_better``).
    grid : dict, list of dict or None, default=None
        The points, as in :func:`~stsq_learn.studies.sweep`; the threshold
        is followed along the first name (the length, usually).
    method : {"scan", "bracket", "bisect", "geometric"}, default="bracket"
        How the candidates are visited, the score assumed to grow with the
        value. ``"scan"``: upwards from the start until one passes.
        ``"bracket"``: the start, then downwards until one fails if it
        passed, else upwards until one passes (few fits when the threshold
        moves little). ``"bisect"``: 1, 2, 4, ... steps from the start until
        the threshold is bracketed, then bisection, until a passing value's
        neighbour below has failed. ``"geometric"``: for a continuous value,
        ``n_iter`` fits of bisection in log scale between ``(low, high)``;
        the threshold is the final bracket's geometric mean.
    start : "previous", None, number or callable, default="previous"
        Where a point's search starts (at the first candidate at or above
        it): the previous point's threshold (``"previous"``), the method's
        default (None: the first value, the middle for ``"bisect"``), a
        value, or ``start(params, previous)`` of the point's grid values and
        the previous point's result (``value``, ``bound``, ``reached``,
        ``params``; None at the first).
    skip_after_miss : bool, default=True
        After a point whose search reached no value, do not search the
        next points of its line; their lower bound is carried over.
    greater_is_better : bool, default=True
        A value passes when its score is at least ``target`` (False: at most).
    n_iter : int, default=5
        Fits of the geometric search.
    stop_at_target : bool, default=False
        End each online fit once it reaches the target on its held-out rows
        (checked every 25 steps, :class:`StopAtTarget`): the score at the
        stop is the fit's score.
    return_trials : bool, default=False
        Also return the table of every fit the searches made.
    seeds, n_steps, n_train, n_test, error_score, n_jobs, device, progress, dry_run
        As in :func:`~stsq_learn.studies.sweep`. A failed fit does not pass.
    scoring : None, str or callable, default=None
        The score compared with ``target`` (None: the estimator's ``score``).
    batch_seeds : bool, default=False
        As in :func:`~stsq_learn.studies.sweep`: the seeds whose searches
        try one value at one point train as one batched model (the searches
        of a line wait for each other at each point). With
        ``stop_at_target``, a seed's member stops at the target (its score
        the one it stopped at) while the others go on.

    Returns
    -------
    table : StudyTable or StudyPlan
        One row per (model, point, seed): ``model``, ``seed``, ``param_*``
        (the grid), ``value`` (the threshold; NaN where not reached),
        ``bound`` (where not reached, the largest value tried that failed,
        or carried over from a skipped point: the threshold lies above it),
        ``reached``, ``skipped``, ``n_fits``, ``n_iter`` (steps or epochs
        of all its fits) and ``seconds``.
    trials : StudyTable
        With ``return_trials``: one row per fit, ``model``, ``seed``,
        ``param_*`` (the grid's, then the searched one's), ``score``,
        ``n_iter``, ``seconds`` and ``fit_failure``.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import search_threshold
    >>> model, task = SparseTokenSelector(), SparseTokenSelectionTask(8, 2, 2)
    >>> table = search_threshold(model, task, "width", [2, 4, 8, 16], target=0.5,
    ...                          grid={"seq_len": [4, 8]}, seeds=2, n_steps=60,
    ...                          n_test=300)
    >>> table.columns[:4], len(table)
    (('model', 'seed', 'param_seq_len', 'value'), 4)
    """
    if isinstance(options.get("scoring"), dict):
        raise TypeError("scoring of a search is one scorer (the score compared with target).")
    study = Study("search_threshold", estimators, task, grid, **options)
    search = _Search(
        param, values, method, target, greater_is_better, start, skip_after_miss, n_iter
    )
    search.check(task, study)
    _check_reachable(search.target, search.greater_is_better, options.get("scoring"), study.models)
    if stop_at_target and any(p.n_train(study.n_train) is not None for p in study.points):
        raise ValueError("stop_at_target stops online fits; it does not apply with n_train.")
    keys = ("param", "method", "target", "greater_is_better", "skip_after_miss")
    study.meta |= {k: getattr(search, k) for k in keys} | {"values": list(search.values)}
    named = start is None or isinstance(start, (str, float, int))
    study.meta |= {"start": start if named else "callable", "stop_at_target": bool(stop_at_target)}
    lines = _lines(study.points, study.grid_names) if study.grid_names else [study.points]
    parts = {"title": f"search {param}", "predict_rows": study.n_test}
    if stop_at_target:
        scorer = None if options.get("scoring") is None else study.scorers["score"]
        stopper = (search.target, scorer, greater_is_better, study.n_test)
        study.callbacks = [functools.partial(_stopper, *stopper)]
        parts.update(check_every=StopAtTarget.EVERY, check_rows=study.n_test, stops=True)
    work = []
    for label in study.models:
        for line in lines:
            for k, point in enumerate(line):
                at, extra = search.candidate(point, search.typical_value())  # timed there
                fits = len(study.seeds) * search.expected_fits(k == 0)
                work.append(study.work(label, at, fits=fits, extra=extra, **parts))
    done = []
    table = study.run(work, _COLUMNS, lambda: _searches(study, search, lines, done))
    if return_trials and not study.dry_run:
        trials = [
            {**study.row(key[0], point, key[2]), f"param_{param}": value}
            | {"score": record["scores"]["score"], **fit_columns(record)}
            for key, point, value, record in done
        ]
        return table, study.table([f"param_{param}", "score", *FIT_COLUMNS], trials)
    return table


_COLUMNS = ("value", "bound", "reached", "skipped", "n_fits", "n_iter", "seconds")


def _searches(study, search, lines, done):
    """The result rows of every (model, line, seed)'s search; ``(key, point, value, record)``
    of each fit, in order, to ``done``."""
    chains = {
        (label, li, seed): search.chain(line)
        for label in study.models
        for li, line in enumerate(lines)
        for seed in study.seeds
    }
    pending = {key: next(gen) for key, gen in chains.items()}
    position = {id(point): k for line in lines for k, point in enumerate(line)}
    outcomes = {}
    with study.bar(f"search {search.param}", unit="fit") as bar:
        while pending:
            groups = {}  # the searches that fit one value at one point, together
            for key in _ready(pending, position, study.batch_seeds):
                point, value = pending[key]
                groups.setdefault((key[0], id(point), value), (point, value, []))[2].append(key)
            calls = []
            for point, value, keys in groups.values():
                at, extra = search.candidate(point, value)
                calls.append((keys[0][0], at, [key[2] for key in keys], extra))
            for (point, value, keys), records in zip(groups.values(), study.fit(calls, bar)):
                for key, record in zip(keys, records):
                    done.append((key, point, value, record))
                    try:
                        pending[key] = chains[key].send(record["scores"]["score"])
                    except StopIteration as stop:
                        outcomes[key] = stop.value
                        del pending[key]
    warn_failures([fit[3] for fit in done], f"search_threshold over {search.param}")
    rows = []
    for key in chains:
        for point, result in outcomes[key]:
            spent = [fit[3] for fit in done if fit[0] == key and fit[1] is point]
            row = {k: np.nan if result[k] is None else float(result[k]) for k in ("value", "bound")}
            row |= {k: result[k] for k in ("reached", "skipped")} | {"n_fits": len(spent)}
            row |= {"n_iter": sum(r["n_iter"] for r in spent)}
            row |= {"seconds": sum((r["seconds"] for r in spent), 0.0)}
            rows.append({**study.row(key[0], point, key[2]), **row})
    return rows


def minimal_width(
    estimators, task, widths, *, target=0.9, grid=None, method="bracket", start="previous", **kwargs
):
    """The smallest width with which each model reaches ``target`` R^2, per point and seed.

    :func:`search_threshold` over ``width`` (see it for every option).

    Parameters
    ----------
    estimators, task
        As in :func:`search_threshold` (each model with a ``width``).
    widths : sequence of int
        The increasing grid of widths.
    target : float, default=0.9
        The score (R^2 by default) a width must reach.
    grid, method, start, **kwargs
        As in :func:`search_threshold` (``method`` not ``"geometric"``).

    Returns
    -------
    StudyTable or StudyPlan
        As :func:`search_threshold`, the minimal width in ``value``.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import minimal_width
    >>> widths, task = [2, 4, 8, 16], SparseTokenSelectionTask(8, 2, 2)
    >>> table = minimal_width(SparseTokenSelector(), task, widths, target=0.5,
    ...                       seeds=1, n_steps=60, n_test=300)
    >>> bool(table["reached"][0]), int(table["value"][0]) in widths
    (True, True)
    """
    kwargs.update(target=target, grid=grid, method=method, start=start)
    return search_threshold(estimators, task, "width", widths, **kwargs)
