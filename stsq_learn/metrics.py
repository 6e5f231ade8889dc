"""Error measures of the tasks, usable through ``sklearn.metrics.make_scorer``.

:func:`relative_mse` is the package's error measure (``1 - R^2`` on sparse
token selection; the choice is ours, not the paper's);
:func:`averaging_accuracy` and :func:`worst_position_error` are the accuracy
notions of Sanford, Hsu and Telgarsky (2023) for q-sparse averaging (and, with
one position per row, for sparse token selection); :func:`string_accuracy`
and :func:`token_accuracy` those of written strings (copying). Every input is checked
first: real, finite, non-empty, of matching shapes, each error naming the
argument and the offending index or value.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ._validation import as_real_array, finite_floats

__all__ = [
    "averaging_accuracy",
    "relative_mse",
    "string_accuracy",
    "token_accuracy",
    "worst_position_error",
]


def _metric_values(values, name, expected, *, rows=True):
    """``values`` as float64 after the checks of a metric's input.

    Real numbers only (a boolean, complex, string or object array is a
    ``TypeError``), finite (a NaN or infinity is a ``ValueError`` naming its
    index), and, with ``rows``, at least one dimension and one value.
    """
    try:
        arr = as_real_array(values, name, expected)
    except TypeError:
        if np.asarray(values).dtype.kind == "b":  # the message of X speaks of an indicator
            raise TypeError(
                f"{name} has boolean dtype; a metric takes real numbers. Cast it explicitly, "
                f"e.g. {name}.astype(float), if that is intended."
            ) from None
        raise
    if rows and (arr.ndim == 0 or arr.size == 0):
        raise ValueError(
            f"{name} must be a non-empty array of shape {expected}, got shape {arr.shape}."
        )
    return finite_floats(arr, name).astype(np.float64, copy=False)


def _check_sample_weight(sample_weight, n):
    """Row weights: a finite, non-negative float64 array of shape ``(n,)``."""
    w = _metric_values(sample_weight, "sample_weight", f"({n},)", rows=False)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), one weight a row; got {w.shape}.")
    negative = np.flatnonzero(w < 0)
    if negative.size:
        i = int(negative[0])
        raise ValueError(f"sample_weight must be >= 0; sample_weight[{i}] = {float(w[i])!r}.")
    return w


def relative_mse(y_true, y_pred, *, sample_weight=None):
    """Relative mean squared error, ``sum_i ||y_hat_i - y_i||^2 / sum_i ||y_i||^2``.

    The package's error measure (a choice of ours, not the paper's): 0 is
    perfect and 1 is the trivial predictor 0. On the sparse token selection task, whose targets
    have mean 0, it is close to ``1 - R^2``, and it is what
    :func:`~stsq_learn.isotropic_floor` reports.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_features) or (n_samples,)
        True targets.
    y_pred : array-like of the same number of rows as ``y_true``
        Predicted targets (reshaped to rows of ``y_true``'s width).
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights of both sums.

    Returns
    -------
    error : float
        The weighted sum of squared errors over the weighted sum of ``||y||^2``.

    Raises
    ------
    ValueError
        If an array is empty or holds a NaN or infinity, the two arrays have a
        different number of values, ``sample_weight`` is not of shape
        ``(n_samples,)`` or has a negative weight, or the weighted sum of
        ``||y||^2`` is zero (the ratio is undefined).
    TypeError
        If an array does not hold real numbers (booleans included).

    See Also
    --------
    LengthShiftScorer : ``metric="neg_relative_mse"`` is minus this, at another length.

    Examples
    --------
    >>> from stsq_learn import relative_mse
    >>> relative_mse([[1.0, 0.0], [0.0, 2.0]], [[0.0, 0.0], [0.0, 2.0]])
    0.2
    """
    y_true = _metric_values(y_true, "y_true", "(n_samples, n_features) or (n_samples,)")
    y_true = y_true.reshape(len(y_true), -1)
    y_pred = _metric_values(y_pred, "y_pred", "of y_true's number of values", rows=False)
    if y_pred.size != y_true.size:
        raise ValueError(
            f"y_pred has {y_pred.size} values (shape {y_pred.shape}) but y_true has "
            f"{y_true.size} (shape {y_true.shape}); they must match."
        )
    y_pred = y_pred.reshape(y_true.shape)
    err = ((y_pred - y_true) ** 2).sum(axis=1)
    norm = (y_true**2).sum(axis=1)
    if sample_weight is None:
        w = np.ones(len(y_true))
    else:
        w = _check_sample_weight(sample_weight, len(y_true))
    denom = float(w @ norm)
    if denom == 0.0:
        if not norm.any():
            raise ValueError("The relative MSE is undefined: every target in y_true is zero.")
        raise ValueError(
            "The relative MSE is undefined: sample_weight is 0 on every row whose target "
            "is not zero."
        )
    return float(w @ err) / denom


def _position_errors(y_true, y_pred):
    """``||y_pred_i - y_true_i||_2`` for every row and position: shape (n, N)."""
    expected = "(n_samples, seq_len, n_features) or (n_samples, n_features)"
    y_true = _metric_values(y_true, "y_true", expected)
    y_pred = _metric_values(y_pred, "y_pred", "of y_true's number of values", rows=False)
    if y_true.ndim in (2, 3):  # rows of one output (n, d), or of one per position (n, N, d)
        y_true = y_true.reshape(len(y_true), -1, y_true.shape[-1])
    if y_true.ndim != 3 or y_pred.size != y_true.size:
        raise ValueError(
            "y_true must have shape (n_samples, seq_len, n_features) or (n_samples, "
            f"n_features) and y_pred as many values; got {y_true.shape} and {y_pred.shape}."
        )
    return np.linalg.norm(y_pred.reshape(y_true.shape) - y_true, axis=-1)


def averaging_accuracy(y_true, y_pred, *, epsilon, per="position"):
    """The fraction of outputs within ``epsilon`` of their target (Sanford et al.'s accuracy).

    Sanford, Hsu and Telgarsky call f an epsilon-approximation of q-sparse
    averaging on input X when every position's output is within epsilon of
    its target in the Euclidean norm. With ``per="row"`` this is the
    fraction of rows that f epsilon-approximates; with ``per="position"``
    the fraction of positions within epsilon. Their tokens lie in the unit
    ball and their bounds use ``epsilon = 1 / (2 q)``; standard Gaussian
    tokens have norm about ``sqrt(d)``, so ``sqrt(d) / (2 q)`` is the same
    tolerance on this package's data.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, seq_len, n_features) or (n_samples, n_features)
        True averages (2-D: sparse token selection, one position per row).
    y_pred : array-like with as many values
        Predictions.
    epsilon : float
        Tolerance on the Euclidean error of an output, finite and > 0.
    per : {"position", "row"}, default="position"
        Count positions, or rows whose every position is within ``epsilon``.

    Returns
    -------
    accuracy : float
        In [0, 1], greater is better.

    Raises
    ------
    TypeError
        If ``epsilon`` is not a real number (a boolean included), ``per`` is
        not a string, or an array does not hold real numbers.
    ValueError
        If ``epsilon`` is not finite and > 0, ``per`` is unknown, an array is
        empty or holds a NaN or infinity, or the shapes do not match.

    See Also
    --------
    worst_position_error : The error of a row's worst position.

    Examples
    --------
    >>> from sklearn.metrics import make_scorer
    >>> from stsq_learn import averaging_accuracy
    >>> y_true = [[[1.0, 0.0], [0.0, 1.0]]]
    >>> averaging_accuracy(y_true, [[[1.0, 0.1], [0.0, 0.0]]], epsilon=0.5)
    0.5
    >>> # for GridSearchCV(scoring=...):
    >>> scorer = make_scorer(averaging_accuracy, epsilon=0.5)
    """
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise TypeError(
            f"epsilon must be a real number, got {epsilon!r} of type {type(epsilon).__name__}."
        )
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a number > 0 and finite, got {epsilon!r}.")
    if not isinstance(per, str):
        raise TypeError(f"per must be the string 'position' or 'row', got {per!r}.")
    if per not in ("position", "row"):
        raise ValueError(f"per must be 'position' or 'row', got {per!r}.")
    within = _position_errors(y_true, y_pred) <= epsilon
    return float(within.mean() if per == "position" else within.all(axis=1).mean())


def worst_position_error(y_true, y_pred):
    """The Euclidean error of each row's worst position, averaged over rows.

    ``mean over rows of max_i ||y_pred_i - y_true_i||_2``: the epsilon a row
    needs to be epsilon-approximated in the sense of Sanford, Hsu and
    Telgarsky. Lower is better (``make_scorer(worst_position_error,
    greater_is_better=False)`` makes it a scorer).

    Parameters
    ----------
    y_true : array-like of shape (n_samples, seq_len, n_features) or (n_samples, n_features)
        True averages.
    y_pred : array-like with as many values
        Predictions.

    Returns
    -------
    error : float
        The mean over rows of the largest position error.

    Raises
    ------
    TypeError
        If an array does not hold real numbers (booleans included).
    ValueError
        If an array is empty or holds a NaN or infinity, or the shapes do not
        match.

    Examples
    --------
    >>> from stsq_learn import worst_position_error
    >>> y_true = [[[1.0, 0.0], [0.0, 1.0]]]
    >>> worst_position_error(y_true, [[[1.0, 0.0], [0.0, 0.0]]])
    1.0
    """
    return float(_position_errors(y_true, y_pred).max(axis=1).mean())


def _strings(y_true, y_pred, sample_weight):
    """``(y_true, y_pred, weights)`` of two arrays of written strings, checked."""
    expected = "(n_samples, seq_len): strings of tokens, -1 after each one's end"
    y_true = _metric_values(y_true, "y_true", expected)
    y_pred = _metric_values(y_pred, "y_pred", expected)
    if y_true.ndim != 2 or y_pred.shape != y_true.shape:
        raise ValueError(
            f"y_true and y_pred must be strings of one shape {expected}; got {y_true.shape} "
            f"and {y_pred.shape}."
        )
    n = len(y_true)
    w = np.ones(n) if sample_weight is None else _check_sample_weight(sample_weight, n)
    if not w.sum() > 0:
        raise ValueError("sample_weight is 0 on every row: no string to score.")
    return y_true, y_pred, w


def string_accuracy(y_true, y_pred, *, sample_weight=None):
    """The fraction of strings written exactly: every token, and the end in its place.

    The error of copying is a string's (Jelassi et al., 2024): a row counts
    only when ``y_pred`` equals ``y_true`` at every position, the padding
    ``-1`` after the end included (a string written too long or too short
    is wrong). The score of the sequence-to-sequence models; with greedy
    decoding it equals the teacher-forced exact match.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, seq_len)
        The strings to write: tokens, then ``-1``.
    y_pred : array-like of shape (n_samples, seq_len)
        The strings written.
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights.

    Returns
    -------
    accuracy : float
        In [0, 1], greater is better.

    Raises
    ------
    TypeError, ValueError
        For arrays that are not real, finite, 2-D and of one shape, or bad weights.

    See Also
    --------
    token_accuracy : The fraction of tokens written right.

    Examples
    --------
    >>> from sklearn.metrics import make_scorer
    >>> from stsq_learn import string_accuracy
    >>> string_accuracy([[1, 2, -1], [3, 3, 3]], [[1, 2, -1], [3, 0, 3]])
    0.5
    >>> scorer = make_scorer(string_accuracy)  # for GridSearchCV(scoring=...)
    """
    y_true, y_pred, w = _strings(y_true, y_pred, sample_weight)
    return float(w @ (y_true == y_pred).all(axis=1) / w.sum())


def token_accuracy(y_true, y_pred, *, sample_weight=None):
    """The fraction of the tokens to write (each string's end included) written right.

    Position by position over each row's string and the end after it (the
    first ``-1`` of ``y_true``, where the row has one): per-character
    accuracy, always at least :func:`string_accuracy` and far above it on
    long strings (a string of L tokens each right with probability p is
    right with probability about ``p^L``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples, seq_len)
        The strings to write: tokens, then ``-1``.
    y_pred : array-like of shape (n_samples, seq_len)
        The strings written.
    sample_weight : array-like of shape (n_samples,), default=None
        Row weights (each row's tokens share its weight).

    Returns
    -------
    accuracy : float
        In [0, 1], greater is better.

    Raises
    ------
    TypeError, ValueError
        As :func:`string_accuracy`.

    Examples
    --------
    >>> from stsq_learn import token_accuracy
    >>> token_accuracy([[1, 2, -1], [3, 3, 3]], [[1, 2, 5], [3, 0, 3]])  # 4 of 6
    0.6666666666666666
    """
    y_true, y_pred, w = _strings(y_true, y_pred, sample_weight)
    lengths = (y_true >= 0).sum(axis=1)
    counted = np.arange(y_true.shape[1])[None, :] <= lengths[:, None]
    right = ((y_true == y_pred) & counted).sum(axis=1)
    return float(w @ right / (w @ counted.sum(axis=1)))
