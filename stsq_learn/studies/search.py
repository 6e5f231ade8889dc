"""Threshold searches: the least value of a monotone parameter that reaches a target score.

The theory's separations are thresholds: the smallest width with which a
model reaches an R^2 (against the length), the fewest heads that retrieve
every token, the weakest signal a classifier detects. :func:`search_threshold`
finds one per model, grid point and seed, following it along the grid's first
name; :func:`minimal_width` is the search over ``width``. Every seed's search
is its own; with ``n_jobs``, the fits the searches ask for at the same time
run at once, and the numbers do not depend on it.
"""

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
from .sweep import fitted_view

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

    Every ``every`` steps the model being trained is scored on ``X, y`` by
    ``scorer`` through the estimator's own prediction path (the draws the
    fitted model's would use), so the score at the stop is what the fitted
    model scores. It stops the fit as the package's early stopping does
    (the reason ``"target_reached"`` in the net's history). A fit that never
    reaches the target runs all its steps, as without the callback.

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
        self.template = template
        self.task = task
        self.X = X
        self.y = y
        self.target = target
        self.scorer = scorer
        self.greater_is_better = greater_is_better
        self.every = every

    def initialize(self):
        if not isinstance(self.template.random_state, (int, np.integer)):
            raise ValueError(
                "StopAtTarget needs an estimator with an integer random_state (its prediction "
                f"draws follow from it), got random_state={self.template.random_state!r}."
            )
        self.every = check_count(self.every, "every")
        self.checks_ = []
        self.stopped_at_ = None
        self._checked = None
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
            The estimator's score (or the scorer's) on the held-out rows.
        """
        view = fitted_view(self.template, net, self.task)
        was_training = net.module_.training
        try:
            if not self._fast(view):
                if self.scorer is None:
                    return float(view.score(self.X, self.y))
                return float(self.scorer(view, self.X, self.y))
            X, y = self._rows(view)
            return self._r2(view, y, view._predict_validated(X))
        finally:
            net.module_.train(was_training)

    def _fast(self, view):
        """Whether the score is a regressor's own (then computed in parts: :meth:`_r2`)."""
        return self.scorer is None and type(view).score is _Regressor.score

    def _rows(self, view):
        """The held-out rows and targets, checked by the task once per fit (they do not change)."""
        if self._checked is None:
            X = view.task_.check_rows(self.X, type(view).__name__)
            self._checked = X, view.task_.check_targets(self.y, X)
        return self._checked

    @staticmethod
    def _r2(view, y, y_pred):
        """The regressors' ``score``, given its prediction: scikit-learn's R^2 without its
        argument checks (the same number, without a fixed cost that is most of a check on a
        few thousand rows)."""
        with sklearn.config_context(skip_parameter_validation=True):
            return float(view.task_.score(y, y_pred))

    def _due(self, net):
        """The step, where this one is a check's (else None)."""
        step = len(net.history[-1]["batches"])
        return None if step % self.every else step

    def _reached(self, net, step, score):
        """Record a check; whether it reached the target (the stop recorded in the history)."""
        self.checks_.append((step, score))
        if not _passes(score, self.target, self.greater_is_better):
            return False
        self.stopped_at_ = step
        net.history.record(STOP_REASON, "target_reached")
        return True

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        step = self._due(net)
        if step is not None and self._reached(net, step, self.score_module(net)):
            raise KeyboardInterrupt  # how skorch stops a fit (as its EarlyStopping does)

    @classmethod
    def members_batch_end(cls, pairs):
        """The checks of the members of a batched fit at one step, scored together.

        What each member's :meth:`on_batch_end` does, for all of them at once
        (:func:`~stsq_learn.engine.members.fit_members` calls it with every
        member's ``(callback, net)``): the members due for a check are scored
        on their own held-out rows in one forward of their stacked modules
        (:func:`~stsq_learn.engine.members.predict_members`: each member's
        prediction to the bit, the prediction's fixed cost paid once), or
        one by one where that cannot be.

        Parameters
        ----------
        pairs : list of (StopAtTarget, skorch.NeuralNet)
            Each member's callback and its net (its weights of the moment).

        Returns
        -------
        list of bool
            Per pair, whether the member reached the target (and stops).
        """
        from ..engine.members import predict_members

        due = [(cb, net, cb._due(net)) for cb, net in pairs]
        due = [(cb, net, step) for cb, net, step in due if step is not None]
        scores = {}
        views = [fitted_view(cb.template, net, cb.task) for cb, net, _ in due]
        if len(due) > 1 and all(cb._fast(v) for (cb, _, _), v in zip(due, views)):
            rows = [cb._rows(v) for (cb, _, _), v in zip(due, views)]
            predictions = predict_members(views, [X for X, _ in rows])
            if predictions is not None:
                for (cb, _, _), view, (_, y), pred in zip(due, views, rows, predictions):
                    scores[id(cb)] = cb._r2(view, y, pred)
        stops = {}
        for cb, net, step in due:
            score = scores[id(cb)] if id(cb) in scores else cb.score_module(net)
            stops[id(cb)] = cb._reached(net, step, score)
        return [stops.get(id(cb), False) for cb, _ in pairs]


def _stopper(target, scorer, greater_is_better, n_test, est, task):
    """The :class:`StopAtTarget` of a seed's estimator (a study's callback, as a partial)."""
    X, y = test_rows(task, est.random_state, n_test)
    return StopAtTarget(clone(est), task, X, y, target, scorer, greater_is_better)


def _passes(score, target, greater_is_better):
    if not math.isfinite(score):
        return False
    return score >= target if greater_is_better else score <= target


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
@dataclasses.dataclass
class _Search:
    """The search of :func:`search_threshold`: its arguments, checked, and its moves."""

    param: str
    values: tuple
    method: str
    target: float
    greater_is_better: bool
    start: object
    skip_after_miss: bool
    n_iter: int
    in_task: bool = False

    def __post_init__(self):
        param, values, method, target = self.param, self.values, self.method, self.target
        if not isinstance(param, str) or not param:
            raise TypeError(f"param must be the name of a parameter or task field, got {param!r}.")
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}.")
        if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, float, np.number)):
            raise TypeError(f"target must be a number, got {target!r}.")
        if not math.isfinite(float(target)):
            raise ValueError(f"target must be a finite number, got {target!r}.")
        start = self.start
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
        self.target, self.greater_is_better = float(target), bool(self.greater_is_better)
        self.skip_after_miss = bool(self.skip_after_miss)

    def check(self, task, study):
        """Check, before any fit, the grid's ends as candidates, and the grid's names."""
        self.in_task = self.param in task_fields(task)
        for v in (self.values[0], self.values[-1]):
            if self.in_task:
                try:
                    dataclasses.replace(task, **{self.param: v})
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"{self.param}={v!r}: {exc}") from None
            else:
                for label, est in study.models.items():
                    prepare(est, Point((), task, ()), None, label=label, extra={self.param: v})
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
        results = []
        previous = None
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
            gen = _geometric(self.values[0], self.values[1], self.n_iter)
            to_value = float
        else:
            gen = _GRID_METHODS[self.method](
                len(self.values), _start_index(self.values, start, self.method)
            )
            to_value = self.values.__getitem__
        found = None
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
    """The searches that fit in this round: all of them, or, where seeds train together,
    those of each (model, line) at its earliest point (the others wait for them there,
    so that the seeds of a point that try one value train as one model)."""
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


# The range of a score: the estimators' own (R^2 at most 1; a classifier's accuracy in
# [0, 1]) and scikit-learn's scorers by name (the "neg_" ones at most 0).
_SCORER_RANGES = {
    "r2": ("R^2", -math.inf, 1.0),
    "explained_variance": ("the explained variance", -math.inf, 1.0),
    "accuracy": ("accuracy", 0.0, 1.0),
    "balanced_accuracy": ("balanced accuracy", 0.0, 1.0),
    "roc_auc": ("ROC AUC", 0.0, 1.0),
    "average_precision": ("average precision", 0.0, 1.0),
    "f1": ("F1", 0.0, 1.0),
    "precision": ("precision", 0.0, 1.0),
    "recall": ("recall", 0.0, 1.0),
    "jaccard": ("the Jaccard index", 0.0, 1.0),
}


def _score_range(scoring, label, est):
    """``(name, lowest, highest)`` of the score a search compares, or None where not known."""
    if scoring is None:
        if is_classifier(est):
            return f"{label}'s score (accuracy)", 0.0, 1.0
        if is_regressor(est):
            return f"{label}'s score (R^2)", -math.inf, 1.0
        return None
    if isinstance(scoring, str):
        if scoring.startswith("neg_"):
            return f"the scorer {scoring!r}", -math.inf, 0.0
        for key, (what, low, high) in _SCORER_RANGES.items():
            if scoring == key or scoring.startswith(key + "_"):  # f1_macro, roc_auc_ovr, ...
                return f"the scorer {scoring!r} ({what})", low, high
    return None


def _check_reachable(target, greater_is_better, scoring, models):
    """Refuse a target no fit can reach: above the score's highest (below its lowest)."""
    for label, est in models.items():
        known = _score_range(scoring, label, est)
        if known is None:
            continue
        name, low, high = known
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
        The models.
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
        The points to search at, as in :func:`~stsq_learn.studies.sweep`;
        the first name is the axis a threshold is followed along.
    method : {"scan", "bracket", "bisect", "geometric"}, default="bracket"
        How the candidates are visited, all assuming the score grows with
        the value. ``"scan"``: upwards from the start until one passes.
        ``"bracket"``: the start, then downwards until one fails if it
        passed, else upwards until one passes (the fewest fits when the
        threshold moves little from the start). ``"bisect"``: from the
        start 1, 2, 4, ... steps until the threshold is bracketed, then
        bisection, until a passing value's neighbour below has failed.
        ``"geometric"``: for a continuous value (a signal), bisection in
        log scale between ``(low, high)`` for ``n_iter`` fits; the
        threshold is the final bracket's geometric mean.
    start : "previous", None, number or callable, default="previous"
        Where a point's search starts: the previous point's threshold
        (``"previous"``; the grid's first value where there is none), the
        method's default (None: the first value, the middle for
        ``"bisect"``), a value, or ``start(params, previous) -> value``
        where ``params`` are the point's grid values and ``previous`` the
        previous point's result (``value``, ``bound``, ``reached``,
        ``params``) or None. The search starts at the first candidate at
        or above the value.
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
    seeds, n_steps, n_train, n_test, error_score, n_jobs, device, progress, dry_run
        As in :func:`~stsq_learn.studies.sweep`. A failed fit does not pass.
    batch_seeds : bool, default=False
        As in :func:`~stsq_learn.studies.sweep`: the seeds whose searches
        try the same value at the same point train together, as one
        batched model (the searches of a line wait for each other at each
        point, so that they meet there; seeds that want different values
        next train in one batched model per value). With
        ``stop_at_target``, each seed's member stops when it reaches the
        target, keeps its weights of that step (its score is the score it
        stopped at) and costs nothing more, while the others go on.
    scoring : None, str or callable, default=None
        The score compared with ``target`` (None: the estimator's ``score``).
    return_trials : bool, default=False
        Also return the table of every fit the searches made.

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
    >>> table = search_threshold(SparseTokenSelector(), SparseTokenSelectionTask(8, 2, 2),
    ...                          "width", [2, 4, 8, 16], target=0.5, grid={"seq_len": [4, 8]},
    ...                          seeds=2, n_steps=60, n_test=300)
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
    study.meta.update(
        param=param,
        values=list(search.values),
        method=method,
        target=search.target,
        greater_is_better=search.greater_is_better,
        start=start if start is None or isinstance(start, (str, float, int)) else "callable",
        skip_after_miss=search.skip_after_miss,
        stop_at_target=bool(stop_at_target),
    )
    if stop_at_target:
        scorer = None if options.get("scoring") is None else study.scorers["score"]
        stopper = (search.target, scorer, greater_is_better, study.n_test)
        study.callbacks = [functools.partial(_stopper, *stopper)]
    lines = _lines(study.points, study.grid_names) if study.grid_names else [study.points]
    checks = {"check_every": StopAtTarget.EVERY, "check_rows": study.n_test, "stops": True}
    work = []
    for label in study.models:
        for line in lines:
            for k, point in enumerate(line):
                at, extra = search.candidate(point, search.typical_value())  # timed there
                fits = len(study.seeds) * search.expected_fits(k == 0)
                work.append(
                    study.work(
                        label,
                        at,
                        title=f"search {param}",
                        fits=fits,
                        extra=extra,
                        predict_rows=study.n_test,
                        **(checks if stop_at_target else {}),
                    )
                )
    trials = []
    table = study.run(work, _RESULT_COLUMNS, lambda: _searches(study, search, lines, trials))
    if return_trials and not study.dry_run:
        return table, study.table([f"param_{param}", "score", *FIT_COLUMNS], trials)
    return table


_RESULT_COLUMNS = ("value", "bound", "reached", "skipped", "n_fits", "n_iter", "seconds")


def _searches(study, search, lines, trials):
    """Run every (model, line, seed)'s search; the result rows (each fit's row to ``trials``)."""
    chains = {
        (label, li, seed): search.chain(line)
        for label in study.models
        for li, line in enumerate(lines)
        for seed in study.seeds
    }
    pending = {key: next(gen) for key, gen in chains.items()}
    position = {id(point): k for line in lines for k, point in enumerate(line)}
    outcomes, spent, records_in_order = {}, {}, []
    with study.bar(f"search {search.param}: {study.sizes}", unit="fit") as bar:
        while pending:
            groups = {}
            for key in _ready(pending, position, study.batch_seeds):
                point, value = pending[key]
                groups.setdefault((key[0], id(point), value), (point, value, []))[2].append(key)
            calls = []
            for point, value, keys in groups.values():
                at, extra = search.candidate(point, value)
                calls.append((keys[0][0], at, [key[2] for key in keys], extra))
            for (point, value, keys), records in zip(groups.values(), study.fit(calls, bar)):
                for key, record in zip(keys, records):
                    spent.setdefault((key, id(point)), []).append(record)
                    records_in_order.append(record)
                    score = record["scores"]["score"]
                    trials.append(
                        {
                            **study.row(key[0], point, key[2]),
                            f"param_{search.param}": value,
                            "score": score,
                            **fit_columns(record),
                        }
                    )
                    try:
                        pending[key] = chains[key].send(score)
                    except StopIteration as stop:
                        outcomes[key] = stop.value
                        del pending[key]
    warn_failures(records_in_order, f"search_threshold over {search.param}")
    rows = []
    for key in chains:
        for point, result in outcomes[key]:
            records = spent.get((key, id(point)), [])
            value, bound = (
                np.nan if v is None else float(v) for v in (result["value"], result["bound"])
            )
            rows.append(
                {
                    **study.row(key[0], point, key[2]),
                    "value": value,
                    "bound": bound,
                    "reached": result["reached"],
                    "skipped": result["skipped"],
                    "n_fits": len(records),
                    "n_iter": sum(r["n_iter"] for r in records),
                    "seconds": sum((r["seconds"] for r in records), 0.0),
                }
            )
    return rows


def minimal_width(
    estimators, task, widths, *, target=0.9, grid=None, method="bracket", start="previous", **kwargs
):
    """The smallest width with which each model reaches ``target`` R^2, per point and seed.

    :func:`search_threshold` over ``width`` (see it for every option).

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        The models (each with a ``width``).
    task : Task
        The task.
    widths : sequence of int
        The increasing grid of widths.
    target : float, default=0.9
        The score (R^2 by default) a width must reach.
    grid : dict, list of dict or None, default=None
        The points, e.g. ``{"seq_len": [8, 16, 32]}``.
    method : {"scan", "bracket", "bisect"}, default="bracket"
        How the widths are visited.
    start : "previous", None, number or callable, default="previous"
        Where each point's search starts.
    **kwargs
        Any other option of :func:`search_threshold`.

    Returns
    -------
    StudyTable or StudyPlan
        As :func:`search_threshold`, the minimal width in ``value``.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import minimal_width
    >>> table = minimal_width(SparseTokenSelector(), SparseTokenSelectionTask(8, 2, 2),
    ...                       [2, 4, 8, 16], target=0.5, seeds=1, n_steps=60, n_test=300)
    >>> bool(table["reached"][0]), float(table["value"][0]) in (2.0, 4.0, 8.0, 16.0)
    (True, True)
    """
    return search_threshold(
        estimators,
        task,
        "width",
        widths,
        target=target,
        grid=grid,
        method=method,
        start=start,
        **kwargs,
    )
