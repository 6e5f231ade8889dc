"""A study's work before it runs: its fits, steps and predicted rows, and their time here.

Every study function knows what it will fit before it fits anything: each
part of it is a :class:`Work` (so many fits of a model on a task, so many
steps each, so many rows scored). ``dry_run=True`` returns that list as a
:class:`StudyPlan` instead of running; inside :func:`planning`, every study
called records its work and returns an empty table, so that a composition
of studies (an experiment) gives its whole plan by running it once in that
context. :meth:`StudyPlan.estimate` times a few steps of each part on this
machine and scales them (what ``stsq-learn reproduce --plan`` prints).
Where a search decides how many fits run, the plan counts the fits a search
is expected to take.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

__all__ = ["StudyPlan", "Work", "planning"]


@dataclass(frozen=True)
class Work:
    """Part of a study's work: ``fits`` models trained ``steps`` online steps each.

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
        Length of the predicted rows (the task's when None).
    train_rows : int or None, default=None
        Rows a model fitted on data is fitted on (None: online).
    """

    label: str
    fits: int
    steps: int
    estimator: object
    task: object
    predict_rows: int = 0
    predict_len: int | None = None
    train_rows: int | None = None


class StudyPlan(list):
    """The :class:`Work` of a study (or of several), in the order they run.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import sweep
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

        Each distinct model and task is timed once: two short ``fit_online``
        runs (a step's time and a fit's fixed cost; one fit on its rows for a
        model fitted on data), and a prediction on up to 256 rows.

        Parameters
        ----------
        device : str, default="cpu"
            Device the steps are timed on.

        Returns
        -------
        list of dict
            ``label``, ``fits``, ``steps`` and ``seconds`` per part.
        """
        out = []
        cache = {}
        for part in self:
            key = (repr(part.estimator), part.task, part.train_rows)
            if key not in cache:
                cache[key] = _time_fit(part, device)
            per_step, per_fit, model = cache[key]
            seconds = part.fits * (per_fit + part.steps * per_step)
            if part.predict_rows and part.fits and model is not None:
                seconds += part.fits * _time_predict(
                    model, part.task, part.predict_rows, part.predict_len
                )
            out.append(
                {
                    "label": part.label,
                    "fits": part.fits,
                    "steps": part.fits * part.steps,
                    "seconds": float(np.round(seconds, 1)),
                }
            )
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

    Inside the block every study function returns an empty table (its
    columns, no rows) and adds its :class:`Work` to the plan the block
    yields; code that composes studies (an experiment) runs through once
    and its plan is complete.

    Yields
    ------
    StudyPlan
        The work recorded so far.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import planning, length_curve
    >>> with planning() as plan:
    ...     table = length_curve(SparseTokenSelector(width=8), SparseTokenSelectionTask(8, 2, 2),
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


def active_plan():
    """The plan of the innermost :func:`planning` block, or None."""
    return _ACTIVE.get()


def planned_steps(estimator, n_steps):
    """``n_steps``, or the steps ``fit_online(n_steps="auto")`` plans for ``estimator``."""
    if isinstance(n_steps, str) and n_steps == "auto":
        auto = getattr(estimator, "_auto_steps", None)
        return int(auto()) if auto is not None else 1000
    return int(n_steps)


@contextlib.contextmanager
def _quiet():
    """Silence the warnings of runs that only time steps (a few steps learn nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _time_fit(part, device, probe_steps=(4, 12)):
    """``(seconds per step, seconds per fit, a fitted model)`` of a part, timed here."""
    settings = {"device": device, "random_state": 0, "callbacks": None, "on_divergence": "warn"}
    own = part.estimator.get_params()
    params = {p: v for p, v in settings.items() if p in own}
    if part.train_rows is not None:
        X, y = part.task.sample(part.train_rows, random_state=0)
        model = clone(part.estimator).set_params(**params)
        with _quiet():
            start = time.perf_counter()
            model.fit(X, y)
        return 0.0, time.perf_counter() - start, model
    times = {}
    model = None
    for k in (probe_steps[0], *probe_steps):
        model = clone(part.estimator).set_params(**params)
        with _quiet():
            start = time.perf_counter()
            model.fit_online(part.task, n_steps=k)
            times[k] = min(times.get(k, math.inf), time.perf_counter() - start)
    short, long = (times[k] for k in probe_steps)
    per_step = max((long - short) / (probe_steps[1] - probe_steps[0]), long / probe_steps[1] / 2)
    return per_step, max(short - probe_steps[0] * per_step, 0.0), model


def _time_predict(model, task, rows, length):
    """Seconds to predict ``rows`` rows of length ``length`` (timed on up to 256)."""
    n = int(min(rows, 256))
    X, y = task.sample(n, random_state=0)
    if length is not None and length != task.seq_len:
        X, _ = task.shift(X, y, length, random_state=0)
    start = time.perf_counter()
    with _quiet():
        model.predict(X)
    return (time.perf_counter() - start) * rows / n
