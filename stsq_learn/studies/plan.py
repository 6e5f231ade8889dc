"""A study's work before it runs (:class:`Work`, :class:`StudyPlan`), and its time here."""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
import warnings
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from sklearn.base import clone

__all__ = ["StudyPlan", "Work", "planning"]


@dataclass(frozen=True)
class Work:
    """Part of a study's work: ``fits`` models trained ``steps`` online steps each
    (``dry_run=True`` returns a study's as a :class:`StudyPlan`).

    Attributes
    ----------
    label : str
        What the part is, for the plan's table.
    fits : int
        Models trained (an expected number where a search decides it).
    steps : int
        Online steps per model (0 for a model fitted on rows).
    estimator : BaseEstimator
        A model of the part as it trains (the estimate times it).
    task : Task
        The task it trains on.
    predict_rows : int, default=0
        Rows each model predicts afterwards (all lengths together).
    predict_len : int or None, default=None
        Length of the predicted rows (None: the task's).
    train_rows : int or None, default=None
        Rows a model fitted on data is fitted on (None: online).
    members : int, default=1
        Fits trained together as one batched model (``batch_seeds=True``).
    check_every : int, default=0
        Steps between two checks along a fit (stopping rule, measures); 0: none.
    check_rows : int, default=0
        Rows a check scores.
    measures : dict or None, default=None
        A training curve's measures, called at every check and at step 0.
    stops : bool, default=False
        Whether a fit stops at its target (then :data:`STOP_SHARE` of its steps).
    """

    label: str
    fits: int
    steps: int
    estimator: object
    task: object
    predict_rows: int = 0
    predict_len: int | None = None
    train_rows: int | None = None
    members: int = 1
    check_every: int = 0
    check_rows: int = 0
    measures: object = field(default=None, compare=False)
    stops: bool = False

    @property
    def expected_steps(self):
        """Steps a fit of the part is expected to run (fewer where fits stop at a target)."""
        return self.steps * STOP_SHARE if self.stops else self.steps


STOP_SHARE = 0.75
"""The share of its planned steps a fit that stops at its target is expected to run: a width
search over 8 seeds at T = 8 and 16 (the ``studies`` benchmark) ran 0.77 of its fits' steps."""


class StudyPlan(list):
    """The :class:`Work` of a study (or of several), in the order they run.

    Examples
    --------
    >>> from stsq_learn.studies import sweep
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> plan = sweep(SparseTokenSelector(), SparseTokenSelectionTask(8, 2, 2),
    ...              {"width": [8, 16]}, seeds=3, n_steps=50, dry_run=True)
    >>> plan.fits, plan.steps
    (6, 300)
    """

    @property
    def fits(self):
        """Models trained in all."""
        return sum(w.fits for w in self)

    @property
    def steps(self):
        """Online steps in all."""
        return sum(w.fits * w.steps for w in self)

    def estimate(self, *, device="cpu"):
        """Per part, its fits, steps and estimated seconds on this machine.

        Each distinct model, task and number of members is timed once: two short
        trainings (a step's time and a fit's fixed cost), one scoring (up to 2048
        rows, then scaled) and one call of the measures where the part has them.

        Parameters
        ----------
        device : str, default="cpu"
            Where the steps are timed.

        Returns
        -------
        list of dict
            Per part, its ``label``, ``fits``, ``steps`` and ``seconds``.
        """
        out, cache, scores = [], {}, {}
        for part in self:
            members = max(1, min(part.members, part.fits))
            if members > 1 and not _batchable(part.estimator):
                members = 1  # the run fits them one after another
            key = (repr(part.estimator), part.task, part.train_rows, members)
            if key not in cache:
                cache[key] = _time_fit(part, device, members)
            per_step, per_fit, model = cache[key]
            score = partial(_time_score, model, part.task, cache=scores, key=key)
            steps = part.expected_steps
            seconds = math.ceil(part.fits / members) * (per_fit + steps * per_step)
            if part.fits and model is not None:
                checks = int(steps // part.check_every) if part.check_every else 0
                per_check = score(part.check_rows, None) if part.check_rows else 0.0
                if part.measures:
                    checks += 1  # the measure at step 0
                    per_check += _seconds(_call_all, part.measures, model)
                seconds += part.fits * checks * per_check
                if part.predict_rows:
                    seconds += part.fits * score(part.predict_rows, part.predict_len)
            row = {"label": part.label, "fits": part.fits, "steps": part.fits * part.steps}
            out.append({**row, "seconds": float(np.round(seconds, 1))})
        return out

    def __str__(self):
        rows = ["| part | fits | steps |", "|---|---|---|"]
        rows += [f"| {w.label} | {w.fits} | {w.fits * w.steps} |" for w in self]
        rows.append(f"| total | {self.fits} | {self.steps} |")
        return "\n".join(rows)


_ACTIVE = contextvars.ContextVar("stsq_learn_study_plan", default=None)


@contextlib.contextmanager
def planning():
    """Record the work of every study called inside, instead of running it.

    Each study returns an empty table and adds its :class:`Work` to the plan:
    an experiment run once inside gives its whole plan.

    Yields
    ------
    StudyPlan
        The work recorded so far.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import planning, length_curve
    >>> with planning() as plan:
    ...     table = length_curve(SparseTokenSelector(width=8),
    ...                          SparseTokenSelectionTask(8, 2, 2),
    ...                          lengths=[8, 16], seeds=2, n_steps=40)
    >>> len(table), plan.fits, plan.steps
    (0, 2, 80)
    """
    plan = StudyPlan()
    token = _ACTIVE.set(plan)
    try:
        yield plan
    finally:
        _ACTIVE.reset(token)


active_plan = _ACTIVE.get  # the plan of the innermost planning() block, or None


def planned_steps(estimator, n_steps):
    """``n_steps``, or the steps ``fit_online(n_steps="auto")`` plans for ``estimator``."""
    if isinstance(n_steps, str) and n_steps == "auto":
        auto = getattr(estimator, "_auto_steps", None)
        return int(auto()) if auto is not None else 1000
    return int(n_steps)


def _seconds(call, *args, **kwargs):
    """Seconds ``call(*args, **kwargs)`` takes, warnings silenced (a few steps learn nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        call(*args, **kwargs)
        return time.perf_counter() - start


def _batchable(estimator):
    """Whether seeds of ``estimator`` train as members of one model, as the run finds it
    (a pipeline's clones, or an estimator off the engine, fit one after another)."""
    from ..engine.members import check_members

    seeds = [
        {"random_state": s} if "random_state" in estimator.get_params() else {} for s in (0, 1)
    ]
    try:
        check_members([clone(estimator).set_params(**seed) for seed in seeds])
    except (TypeError, ValueError):
        return False
    return getattr(type(estimator), "_fit_members", None) is not None


def _time_fit(part, device, members=1, probe_steps=(4, 12)):
    """``(seconds per step, seconds per fit, a fitted model)`` of a part, timed here
    (with ``members > 1``, of a batched fit of as many seeds, and its first model)."""
    from ..engine.members import fit_members, fit_online_members

    settings = {"device": device, "callbacks": None, "on_divergence": "warn"}
    own = part.estimator.get_params()
    params = {p: v for p, v in settings.items() if p in own}
    seeds = [{"random_state": s} if "random_state" in own else {} for s in range(members)]
    if part.train_rows is not None:
        ests = [clone(part.estimator).set_params(**params, **seed) for seed in seeds]
        rows = [part.task.sample(part.train_rows, random_state=s) for s in range(members)]
        if members > 1:
            seconds = _seconds(fit_members, ests, [X for X, _ in rows], [y for _, y in rows])
        else:
            seconds = _seconds(ests[0].fit, *rows[0])
        return 0.0, seconds, ests[0]
    times = {}
    for k in (probe_steps[0], *probe_steps):
        ests = [clone(part.estimator).set_params(**params, **seed) for seed in seeds]
        if members > 1:
            seconds = _seconds(fit_online_members, ests, part.task, n_steps=k)
        else:
            seconds = _seconds(ests[0].fit_online, part.task, n_steps=k)
        times[k] = min(times.get(k, math.inf), seconds)
    short, long = (times[k] for k in probe_steps)
    per_step = max((long - short) / (probe_steps[1] - probe_steps[0]), long / probe_steps[1] / 2)
    return per_step, max(short - probe_steps[0] * per_step, 0.0), ests[0]


def _time_score(model, task, rows, length, *, cache, key):
    """Seconds to score ``rows`` rows of length ``length`` (``score``, else ``predict``), timed
    on up to 2048 of them (a fixed cost counts) and scaled; once per ``(key, rows, length)``."""
    if (key, rows, length) not in cache:
        n = int(min(rows, 2048))
        X, y = task.sample(n, random_state=0)
        if length is not None and length != task.seq_len:
            X, y = task.shift(X, y, length, random_state=0)
        call = partial(model.score, X, y) if hasattr(model, "score") else partial(model.predict, X)
        try:
            _seconds(call)  # a first call sets up what later ones reuse
        except (TypeError, ValueError):  # a timing model's score may not exist: its prediction
            call = partial(model.predict, X)
            _seconds(call)
        cache[key, rows, length] = _seconds(call) * rows / n
    return cache[key, rows, length]


def _call_all(measures, model):
    for fn in measures.values():
        fn(model)
