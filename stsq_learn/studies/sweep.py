"""Studies over every point of a grid: :func:`sweep`, :func:`length_curve`, :func:`training_curve`,
and the callbacks that measure a model as it trains."""

from __future__ import annotations

import copy
import functools

import numpy as np
from sklearn.base import clone
from skorch.callbacks import Callback

from .fits import FIT_COLUMNS, Study, check_count, fit_columns, takes_options, test_rows

__all__ = ["length_curve", "sweep", "training_curve"]


@takes_options()
def sweep(estimators, task, grid=None, **options):
    """Fit every model at every point of a grid for every seed, and score it.

    The grid's names that are fields of the task (``seq_len``,
    ``n_selected``, a signal, ...) change the task; the others are the
    estimators' parameters (``width``, ``n_heads``, ...). Each fit of seed
    ``s`` has ``random_state=s`` and is scored on held-out rows of that
    seed (:mod:`stsq_learn.studies.seeds`): the models of a seed are
    compared on the same rows.

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        The models: one (labelled by its class name) or several by label.
    task : Task
        The task (its fields at the grid's points replaced).
    grid : dict of str to sequence, list of dict, or None, default=None
        The points: every combination of the values (the first name varies
        fastest), or the points of several such dicts. None is one point.
    seeds : int or sequence of int, default=3
        ``n`` (the seeds ``0 .. n-1``) or the seeds.
    n_steps : int or "auto", default="auto"
        Online steps of each fit (``"auto"``: the estimator's planned steps).
    n_train : int or None, default=None
        Fit on this many rows drawn from the task per seed (``fit``), for
        models without ``fit_online``; None trains online (``fit_online``).
    n_test : int, default=2000
        Held-out rows each fit is scored on.
    scoring : None, str, callable or dict, default=None
        None: the estimator's ``score`` (R^2 for the regressors) in the
        column ``score``; a scorer name of scikit-learn or a callable
        ``scorer(estimator, X, y)``; a dict of them, one column each.
    error_score : "raise" or float, default=np.nan
        The score recorded for a fit that fails (its error in the column
        ``fit_failure``, and a ``FitFailedWarning``); ``"raise"`` raises it.
    n_jobs : int or None, default=None
        Fits at once on joblib's active backend (loky processes, or a Dask
        cluster inside ``joblib.parallel_backend("dask")``). The numbers do
        not depend on it.
    device : str or None, default=None
        The fits' device (None: each estimator's own).
    batch_seeds : bool, default=False
        Train the seeds of each model and point as one batched model
        (:func:`~stsq_learn.engine.members.fit_online_members`, or
        :func:`~stsq_learn.engine.members.fit_members` with ``n_train``):
        each seed's numbers are those of its own fit (to the bit on a CPU),
        at a fraction of the time for small models. Off by default, so that
        numbers do not depend on the machine's kernels. Settings that do
        not move in lockstep (an adaptive rate, warm starts, the
        estimator's own ``callbacks``) fit one after another.
    progress : bool, default=False
        A progress bar over the fits, which says the study's size first.
    dry_run : bool, default=False
        Return the study's :class:`~stsq_learn.studies.StudyPlan` instead of
        running it.

    Returns
    -------
    StudyTable or StudyPlan
        One row per (model, point, seed): ``model``, ``seed``, ``param_*``,
        the score columns, ``n_iter`` (steps or epochs run), ``seconds``
        and ``fit_failure`` (the fit's error message; empty when it went well).

    Raises
    ------
    TypeError, ValueError
        For a bad argument or grid value (naming it), before any fit.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import sweep
    >>> task = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=2)
    >>> table = sweep(SparseTokenSelector(), task, {"width": [4, 16]}, seeds=2,
    ...               n_steps=40, n_test=200)
    >>> table.columns
    ('model', 'seed', 'param_width', 'score', 'n_iter', 'seconds', 'fit_failure')
    >>> len(table), table.unique("param_width")
    (4, [4, 16])
    """
    study = Study("sweep", estimators, task, grid, **options)
    return study.measure(
        [*study.scorers, *FIT_COLUMNS],
        lambda r: [{**r["scores"], **fit_columns(r)}],
        predict_rows=study.n_test,
    )


@takes_options()
def length_curve(estimators, task, lengths, *, grid=None, **options):
    """Fit once per (model, point, seed), score at every evaluation length.

    The held-out rows of each seed are moved to each of ``lengths`` by the
    task's own length shift (:meth:`~stsq_learn.Task.shift`), as
    :class:`~stsq_learn.LengthShiftScorer` does. A model that cannot predict
    at a length scores ``error_score`` there, its error in ``fit_failure``.
    A length the shift refuses (shorter than the tokens a row must keep) is
    refused before the first fit.

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        The models.
    task : Task
        The task the models train on.
    lengths : sequence of int
        The evaluation lengths (the task's ``seq_len`` at each).
    grid : dict, list of dict or None, default=None
        Points to fit at, as in :func:`sweep`.
    seeds, n_steps, n_train, n_test, scoring, error_score, n_jobs, device, batch_seeds, \
progress, dry_run
        As in :func:`sweep`.

    Returns
    -------
    StudyTable or StudyPlan
        One row per (model, point, seed, length): ``model``, ``seed``,
        ``param_*``, ``eval_seq_len``, the score columns, ``n_iter``,
        ``seconds`` (of the fit) and ``fit_failure``.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.studies import length_curve
    >>> model = SparseTokenSelector(width=16)
    >>> task = SparseTokenSelectionTask(8, 2, 2)
    >>> table = length_curve(model, task, [8, 16, 32], seeds=2, n_steps=40,
    ...                      n_test=200)
    >>> len(table), table.unique("eval_seq_len")
    (6, [8, 16, 32])
    """
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise TypeError(f"lengths must be a sequence of ints, got {lengths!r}.")
    lengths = [check_count(v, f"lengths[{i}]") for i, v in enumerate(lengths)]
    if not lengths:
        raise ValueError("lengths is empty: give at least one evaluation length.")
    study = Study("length_curve", estimators, task, grid, **options)
    _check_shifts(study, lengths)
    study.lengths = lengths

    def rows_of(record):
        return [
            {**fit_columns(record), "eval_seq_len": L, **record["scores"][L]}
            | {"fit_failure": record["errors"][L]}
            for L in lengths
        ]

    rows = {"predict_rows": study.n_test * len(lengths), "predict_len": max(lengths)}
    return study.measure(["eval_seq_len", *study.scorers, *FIT_COLUMNS], rows_of, **rows)


def _check_shifts(study, lengths):
    """Refuse, before any fit, an evaluation length the task's shift cannot move rows to:
    the first seed's first held-out rows at every point are moved to every length."""
    seen = []
    for point in study.points:
        task = point.task
        if task in seen:
            continue
        seen.append(task)
        X, y = test_rows(task, study.seeds[0], min(study.n_test, 16))
        for i, L in enumerate(lengths):
            if L == task.seq_len:
                continue
            try:
                task.shift(X, y, L, random_state=0)
            except (TypeError, ValueError) as exc:
                where = f" at grid point {point.params}" if point.values else ""
                raise ValueError(
                    f"lengths[{i}]={L}: the task's length shift cannot move its rows "
                    f"(length {task.seq_len}) there{where}: {exc}"
                ) from None


class Trace(Callback):
    """A skorch callback measuring the model as it trains: at the start and every ``every`` steps.

    Each measure is called with a view of the estimator as if its fit had
    ended at that step (its fitted attributes read the weights of the
    moment), so measures read public attributes (``key_query_``, ...).

    Parameters
    ----------
    template : estimator
        An unfitted copy of the estimator being trained (same parameters).
    task : Task
        The task it trains on.
    measures : dict of str to callable
        Name to ``measure(estimator) -> float``.
    every : int
        Steps between two measurements.

    Attributes
    ----------
    records_ : list of dict
        ``{"step": k, name: value, ...}`` of every measurement.
    """

    def __init__(self, template, task, measures, every):
        self.template, self.task, self.measures, self.every = template, task, measures, every

    def on_train_begin(self, net, **kwargs):
        self._measure(net, 0)

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            step = sum(len(h["batches"]) for h in net.history)
            if step % self.every == 0:
                self._measure(net, step)

    def initialize(self):
        self.records_ = []
        return self

    def _measure(self, net, step):
        measures = self.measures.items()
        values = measure_now(
            self.template, net, self.task, lambda view: {k: float(f(view)) for k, f in measures}
        )
        self.records_.append({"step": step, **values})


def _trace(measures, every, est, task):
    """The :class:`Trace` of a seed's estimator (a study's callback, picklable as a partial)."""
    return Trace(clone(est), task, measures, every)


def measure_now(template, net, task, measure):
    """``measure(view)`` of the model ``net`` holds now (its :func:`fitted_view`); the net's
    module is left in the training mode it was in."""
    was_training = net.module_.training
    try:
        return measure(fitted_view(template, net, task))
    finally:
        net.module_.train(was_training)


def fitted_view(template, net, task):
    """``template`` as if its fit had ended now: its fitted attributes read ``net``'s weights
    (a shallow copy sharing the net, so that it follows the training)."""
    view = copy.copy(template)
    view.task_ = type(task).from_fitted(task.reference_length, task.n_features, task.fitted_state())
    view.net_ = net
    view.seq_len_ = view.task_.seq_len
    view.n_features_in_ = view.task_.n_features
    view._y_1d = task.targets_1d
    view._predict_seed = template._seeds(False)[3]
    return view


@takes_options("n_train", "n_test", "scoring")
def training_curve(estimators, task, measures, *, every=10, grid=None, **options):
    """Measure each model along its online training: at the start and every ``every`` steps.

    Parameters
    ----------
    estimators : estimator or dict of str to estimator
        The models (trained online).
    task : Task
        The task they train on.
    measures : dict of str to callable
        Name to ``measure(estimator) -> float``, called with the estimator
        as it stands at the step (its fitted attributes, ``predict`` and
        ``score`` read the weights of the moment).
    every : int, default=10
        Steps between two measurements.
    grid, seeds, n_steps, error_score, n_jobs, device, progress, dry_run
        As in :func:`sweep`.
    batch_seeds : bool, default=False
        Train the seeds of each model and point as one batched model (as
        in :func:`sweep`); every seed's member is measured as it stands at
        each step, as in its own fit.

    Returns
    -------
    StudyTable or StudyPlan
        One row per (model, point, seed, step): ``model``, ``seed``,
        ``param_*``, ``step``, one column per measure, ``loss`` (the
        training loss of that step; NaN at step 0), ``fit_failure``.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, SparseTokenSelectionTask
    >>> from stsq_learn.nn import positional_alignment
    >>> from stsq_learn.studies import training_curve
    >>> def gamma(est):
    ...     alignment = positional_alignment(est.key_query_, est.n_features_in_)
    ...     return alignment["gamma"]
    >>> model = SparseTokenSelector(width=16)
    >>> table = training_curve(model, SparseTokenSelectionTask(8, 2, 2),
    ...                        {"gamma": gamma}, every=20, seeds=1, n_steps=40)
    >>> table["step"].tolist(), bool(table["gamma"][0] == 0.0)
    ([0, 20, 40], True)
    """
    if not isinstance(measures, dict) or not measures:
        raise TypeError(
            f"measures must be a non-empty dict of name to measure(estimator), got {measures!r}."
        )
    for name, fn in measures.items():
        if not callable(fn):
            raise TypeError(f"measures[{name!r}] must be callable, got {fn!r}.")
    every = check_count(every, "every")
    study = Study("training_curve", estimators, task, grid, n_test=1, **options)
    if any(point.settings for point in study.points):
        raise ValueError("training_curve trains online: n_train is not a grid name of it.")
    study.scorers, study.callbacks = {}, [functools.partial(_trace, measures, every)]

    def rows_of(record):
        (trace,) = record["callbacks"]
        curve, failure = record["loss_curve"], record["error"]
        loss = [
            curve[r["step"] - 1] if 0 < r["step"] <= len(curve) else np.nan for r in trace.records_
        ]
        return [{**r, "loss": x, "fit_failure": failure} for r, x in zip(trace.records_, loss)]

    columns = ["step", *measures, "loss", "fit_failure"]
    return study.measure(columns, rows_of, check_every=every, measures=measures)
