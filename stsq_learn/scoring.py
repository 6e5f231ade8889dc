"""Length generalization as a score for scikit-learn's model selection.

:class:`LengthShiftScorer` scores a fitted estimator on its validation rows
moved to another sequence length ``T'`` by the task's length shift
(:meth:`stsq_learn.Task.shift`: every target stays as it was, so the score
measures only how the model copes with the new length), and
:func:`length_shift_scoring` is a ready ``scoring=`` dict that makes
``GridSearchCV`` report a length-generalization curve for every candidate.
The tasks' shifts (:func:`shift_length`, :func:`shift_averaging`) and
:func:`averaging_accuracy`, :func:`worst_position_error` and
:func:`relative_mse` (of :mod:`stsq_learn.metrics`) stay importable from here.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.utils.validation import check_is_fitted

from ._live_names import live_names
from ._validation import check_positive_int
from .metrics import averaging_accuracy as averaging_accuracy
from .metrics import relative_mse as relative_mse
from .metrics import string_accuracy, token_accuracy
from .metrics import worst_position_error as worst_position_error
from .tasks import TASKS, Task, get_task

__all__ = [
    "METRICS",
    "LengthShiftScorer",
    "averaging_accuracy",
    "length_shift_scoring",
    "relative_mse",
    "worst_position_error",
]


def _task_shifts():
    """The registered tasks' exports (their shifts: ``shift_length``, ``shift_averaging``),
    importable from here as in 0.5."""
    from . import registry

    return {obj.__name__: obj for reg in registry.registrations() for obj in reg.exports}


__getattr__, __dir__ = live_names(__name__, _task_shifts)

#: Metrics a :class:`LengthShiftScorer` computes (all greater-is-better).
METRICS = ("r2", "neg_mean_squared_error", "neg_relative_mse", "string_accuracy", "token_accuracy")


def _check_factor(factor):
    if isinstance(factor, (bool, np.bool_)) or not isinstance(factor, numbers.Real):
        raise TypeError(
            f"factor must be a positive real number, got {factor!r} of type "
            f"{type(factor).__name__}."
        )
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a positive finite number, got {factor!r}.")
    return float(factor)


def _check_metric(metric):
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}; got {metric!r}.")
    return metric


def _target_length(seq_len, factor, T):
    """Resolve ``T'`` from exactly one of ``seq_len`` and ``factor``."""
    if (seq_len is None) == (factor is None):
        raise ValueError(
            "Give exactly one of seq_len (the new length) and factor (T' = round(factor * T)); "
            f"got seq_len={seq_len!r} and factor={factor!r}."
        )
    if seq_len is not None:
        return check_positive_int(seq_len, "seq_len")
    factor = _check_factor(factor)
    new_len = math.floor(factor * T + 0.5)
    if new_len < 1:
        raise ValueError(
            f"factor={factor!r} moves rows of length T={T} to length {new_len}; "
            "need a length of at least 1."
        )
    return new_len


class LengthShiftScorer(BaseEstimator):
    """Score a fitted estimator on rows moved to another sequence length.

    ``scorer(estimator, X, y)`` moves every row of ``X`` to length ``T'``
    with the length shift of the task (:meth:`~stsq_learn.Task.shift`; for
    sparse token selection :func:`shift_length`: inserting fresh unselected
    Gaussian tokens at random positions, or deleting unselected tokens),
    leaves ``y`` as it is, and returns
    ``metric(y, estimator.predict(X_shifted))``, greater is better. It plugs
    straight into ``GridSearchCV(scoring=...)``, ``cross_validate`` and
    ``check_scoring``.

    The task is found, in this order:

    1. the ``task_`` of the fitted model of this package that ``estimator``
       is or wraps: the wrapped fitted model is looked up recursively through
       ``best_estimator_`` (a fitted ``GridSearchCV`` or
       ``RandomizedSearchCV``), a ``Pipeline``'s last step, ``regressor_``
       (``TransformedTargetRegressor``) and ``estimator_``. A ``task``
       given as well must be that task's class, else ``ValueError``;
    2. ``task``, when given;
    3. the data: the one task of :data:`stsq_learn.tasks.TASKS` whose
       contract (:meth:`~stsq_learn.Task.from_data`) accepts ``(X, y)``.
       When none does, or several do (sparse token selection with one
       selected token is also valid retrieval data, for instance), a
       ``ValueError`` names them and asks for ``task=``.

    An estimator (or wrapper) that is not fitted raises scikit-learn's
    ``NotFittedError`` before anything else.

    An estimator that cannot predict at ``T'`` (a
    :class:`~stsq_learn.FCNSelector` fitted at another length) raises its
    ``ValueError`` through the scorer, so scikit-learn's ``error_score``
    applies: by default the score is NaN with a warning naming the lengths,
    and ``error_score="raise"`` re-raises the error. No silently wrong number
    is ever returned.

    Parameters
    ----------
    seq_len : int, default=None
        The new length ``T'``. Give exactly one of ``seq_len`` and ``factor``.
    factor : float, default=None
        Relative length: ``T' = round(factor * T)`` (halves round up), with
        ``T`` the length of the scored rows. ``factor=1`` scores the rows as
        they are.
    metric : {"r2", "neg_mean_squared_error", "neg_relative_mse", "string_accuracy", \
            "token_accuracy"}, default="r2"
        ``"r2"`` is ``sklearn.metrics.r2_score`` (uniform average over the
        ``n_features`` outputs, as ``estimator.score``);
        ``"neg_mean_squared_error"`` is minus scikit-learn's
        ``mean_squared_error`` (averaged over rows and outputs);
        ``"neg_relative_mse"`` is ``-sum_i ||y_hat_i - y_i||^2 / sum_i ||y_i||^2``,
        minus the package's relative MSE (close to ``1 - R^2`` on this task,
        0 is perfect, -1 is the trivial predictor 0). For models that write
        strings (copying): ``"string_accuracy"`` and ``"token_accuracy"``
        (:func:`~stsq_learn.string_accuracy`, :func:`~stsq_learn.token_accuracy`).
    random_state : int, RandomState instance or None, default=None
        Seed of the shift. With an int every call on the same rows builds the
        same shifted rows, so all candidates of a grid search are scored on
        the same shifted fold. A ``RandomState`` instance is consumed call
        after call (and copied into each worker under ``n_jobs > 1``).
    task : str, type, Task or None, default=None
        The task of the scored data, for an estimator that does not carry
        one (a model of another package): a name of
        :data:`stsq_learn.tasks.TASKS`, a :class:`~stsq_learn.Task` class or
        object (an object stands for its class), resolved by
        :func:`stsq_learn.tasks.get_task` at call time. None reads it from
        the fitted model, else from the data (see above).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        At call time, first: ``estimator`` is not fitted.
    ValueError
        At call time: both or neither of ``seq_len`` and ``factor``, a
        non-positive ``factor``, an unknown ``metric`` or ``task`` name, a
        ``task`` other than the fitted model's, data that no task or several
        tasks accept (with ``task=None`` and no fitted task), data that the
        task's contract refuses, or a ``T'`` smaller than the number of
        selected tokens of some row.
    TypeError
        At call time: a ``factor`` that is not a real number, or a ``task``
        that is not a task name, class or object.

    See Also
    --------
    shift_length : The data transform.
    length_shift_scoring : A ``scoring=`` dict for several lengths at once.

    Examples
    --------
    >>> from stsq_learn import (LengthShiftScorer, SparseTokenSelector,
    ...                         make_sparse_token_selection)
    >>> X, y = make_sparse_token_selection(300, seq_len=8, n_features=4,
    ...                                    n_selected=2, random_state=0)
    >>> model = SparseTokenSelector(width=16, max_iter=20, random_state=0)
    >>> model = model.fit(X, y)
    >>> x4 = LengthShiftScorer(factor=4, random_state=0)
    >>> score = x4(model, X, y)          # R^2 with every row 4x longer (T' = 32)
    >>> bool(-1 < score <= 1)
    True
    """

    def __init__(self, seq_len=None, *, factor=None, metric="r2", random_state=None, task=None):
        self.seq_len = seq_len
        self.factor = factor
        self.metric = metric
        self.random_state = random_state
        self.task = task

    def target_length(self, T):
        """Return the length ``T'`` this scorer moves rows of length ``T`` to.

        Parameters
        ----------
        T : int
            Length of the rows to score.

        Returns
        -------
        new_len : int
            ``seq_len``, or ``round(factor * T)``.
        """
        return _target_length(self.seq_len, self.factor, check_positive_int(T, "T"))

    def __call__(self, estimator, X, y, sample_weight=None):
        """Score ``estimator`` on ``X`` moved to the new length.

        Parameters
        ----------
        estimator : fitted estimator
            Any fitted object with ``predict`` taking 3-D sequences (a
            :class:`~stsq_learn.SparseTokenSelector`, a search or
            ``Pipeline`` around one, or a model of another package).
        X : array-like of shape (n_samples, T, n_channels)
            Validation rows of the task (for sparse token selection, the
            tokens and the selection indicator last).
        y : array-like
            Their targets; they stay valid after the shift (the task's
            :meth:`~stsq_learn.Task.shift`: q-sparse averaging rows
            only lengthen, and are scored over every position of the longer
            rows).
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights passed to the metric (a row's outputs share its
            weight).

        Returns
        -------
        score : float
            The metric at length ``T'``, greater is better.
        """
        _check_fitted(estimator)
        metric = _check_metric(self.metric)
        task, X, y = _resolve_task(estimator, self.task, X, y)
        new_len = self.target_length(X.shape[1])
        X_shifted, y = task.shift(X, y, new_len, self.random_state)
        y, weights = task.units(y, sample_weight)
        y_pred = np.asarray(estimator.predict(X_shifted)).reshape(y.shape)
        if metric == "r2":
            return float(r2_score(y, y_pred, sample_weight=weights))
        if metric == "neg_mean_squared_error":
            return -float(mean_squared_error(y, y_pred, sample_weight=weights))
        if metric in ("string_accuracy", "token_accuracy"):
            accuracy = string_accuracy if metric == "string_accuracy" else token_accuracy
            return accuracy(y, y_pred, sample_weight=weights)
        return -relative_mse(y, y_pred, sample_weight=weights)


#: Attributes through which a fitted wrapper exposes the fitted estimator it predicts
#: with: a search's refitted best model, a TransformedTargetRegressor's regressor, a
#: meta-estimator's fitted estimator, and a Pipeline's last step.
_INNER_ESTIMATORS = ("best_estimator_", "regressor_", "estimator_", "_final_estimator")


def _check_fitted(estimator):
    """Raise scikit-learn's ``NotFittedError`` for an estimator (or wrapper) not fitted.

    An object without ``fit`` (a bare predictor) cannot be unfitted and is
    not checked.
    """
    if hasattr(estimator, "fit"):
        check_is_fitted(estimator)


def _fitted_task(estimator):
    """The task a fitted model of this package carries as ``task_``, found through wrappers.

    Looks at ``estimator`` itself, then, recursively, at the fitted estimator
    each wrapper exposes (:data:`_INNER_ESTIMATORS`). Returns None when there
    is none (an estimator of another package, or a search with
    ``refit=False``). Only a :class:`~stsq_learn.Task` object counts as a
    ``task_``.
    """
    seen = set()
    stack = [estimator]
    while stack:
        est = stack.pop()
        if est is None or isinstance(est, str) or id(est) in seen:
            continue  # a Pipeline's "passthrough" step, or a loop
        seen.add(id(est))
        task = getattr(est, "task_", None)
        if isinstance(task, Task):
            return task
        # Pushed in reverse so that the first attribute is searched first.
        stack.extend(getattr(est, name, None) for name in reversed(_INNER_ESTIMATORS))
    return None


def _task_name(task_class):
    return task_class.name or task_class.__name__


def _resolve_task(estimator, task, X, y):
    """The task whose contract and length shift apply, with ``(X, y)`` checked by it.

    In order: the task the (possibly wrapped) fitted model carries as
    ``task_``, which an explicit ``task`` must equal; else the explicit
    ``task``; else the one registered task whose contract accepts ``(X, y)``.
    Returns ``(task, X, y)`` as :meth:`Task.from_data` does.
    """
    explicit = None if task is None else get_task(task)
    fitted = _fitted_task(estimator)
    if fitted is not None:
        if explicit is not None and explicit is not type(fitted):
            raise ValueError(
                f"task={task!r} ({explicit.__name__}) conflicts with the task the model was "
                f"fitted on, {type(fitted).__name__} (task_={fitted!r}); pass task=None, or "
                f"task={_task_name(type(fitted))!r}."
            )
        return type(fitted).from_data(X, y)
    if explicit is not None:
        return explicit.from_data(X, y)
    accepted, refusals = [], []
    for name, task_class in TASKS.items():
        try:
            result = task_class.from_data(X, y)
        except (ValueError, TypeError) as exc:
            refusals.append(f"{name!r}: {exc}")
        else:
            accepted.append((name, result))
    if len(accepted) == 1:
        return accepted[0][1]
    what = f"{type(estimator).__name__} carries no fitted task (no task_, nor a wrapped model's)"
    if not accepted:
        raise ValueError(
            f"{what}, and no registered task accepts (X, y) under its contract ("
            + "; ".join(refusals)
            + "). Pass the task with task= (a name of stsq_learn.tasks.TASKS, a Task class "
            "or object), or fix the data."
        )
    names = [name for name, _ in accepted]
    raise ValueError(
        f"{what}, and (X, y) fit the contracts of several tasks: {', '.join(map(repr, names))}. "
        f"Pass the task with task=, e.g. task={names[0]!r}."
    )


def _factor_key(factor):
    return f"x{float(factor):g}"


def length_shift_scoring(
    factors=(1, 2, 4, 8), *, seq_lens=None, metric="r2", random_state=None, task=None
):
    """Build a ``scoring=`` dict that scores several sequence lengths at once.

    Passed to ``GridSearchCV``, ``RandomizedSearchCV`` or ``cross_validate``,
    it makes ``cv_results_`` hold one column per length, a length-
    generalization curve for every candidate. Factor 1 is keyed by the metric
    name itself (e.g. ``"r2"``), so ``refit="r2"`` selects on in-distribution
    accuracy; any other factor ``f`` is keyed ``"x<f>"`` (``"x2"``,
    ``"x0.5"``) and an absolute length ``L`` is keyed ``"T<L>"``.

    Parameters
    ----------
    factors : sequence of float, default=(1, 2, 4, 8)
        Relative lengths, each a :class:`LengthShiftScorer` ``factor``.
    seq_lens : sequence of int, default=None
        Absolute lengths to score as well, each a ``seq_len``.
    metric : str, default="r2"
        The metric of every scorer (one of :data:`METRICS`).
    random_state : int, RandomState instance or None, default=None
        Seed of every scorer's shift (see :class:`LengthShiftScorer`).
    task : str, type, Task or None, default=None
        The task of every scorer (see :class:`LengthShiftScorer`): needed
        only for an estimator that carries no fitted task, on data that
        several tasks accept.

    Returns
    -------
    scoring : dict of str to callable
        Name to :class:`LengthShiftScorer`, in the order given.

    Raises
    ------
    ValueError
        For an unknown metric or task name, a non-positive factor or length,
        no lengths at all, or two entries with the same name.
    TypeError
        For a ``task`` that is not a task name, class or object.

    Examples
    --------
    >>> from stsq_learn import length_shift_scoring
    >>> sorted(length_shift_scoring((1, 2, 4), random_state=0))
    ['r2', 'x2', 'x4']
    """
    _check_metric(metric)
    if task is not None:
        get_task(task)
    factors = () if factors is None else tuple(factors)
    seq_lens = () if seq_lens is None else tuple(seq_lens)
    if not factors and not seq_lens:
        raise ValueError("length_shift_scoring needs at least one factor or seq_len; got none.")
    scoring = {}
    for factor in factors:
        factor = _check_factor(factor)
        key = metric if factor == 1.0 else _factor_key(factor)
        if key in scoring:
            raise ValueError(f"factors holds {factor!r} twice (key {key!r}).")
        scoring[key] = LengthShiftScorer(
            factor=factor, metric=metric, random_state=random_state, task=task
        )
    for length in seq_lens:
        length = check_positive_int(length, "seq_lens[i]")
        key = f"T{length}"
        if key in scoring:
            raise ValueError(f"seq_lens holds {length!r} twice (key {key!r}).")
        scoring[key] = LengthShiftScorer(
            length, metric=metric, random_state=random_state, task=task
        )
    return scoring
