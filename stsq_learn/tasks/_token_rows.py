"""Laws whose rows are tokens only: no marker channel, one target per row.

Some tasks select by content: a row is ``seq_len`` tokens in
``R^n_features`` and nothing in it marks the tokens that matter, so ``X`` has
shape ``(n_samples, seq_len, n_features)`` (no indicator channel) and the
target is one number per row. :class:`TokenRowsTask` holds what such laws
share: reading the rows, the shape of the targets, and the length shift that
inserts noise tokens (a row cannot be shortened, since which tokens matter
is not written in it). A law subclasses it and names itself for the messages.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np
from sklearn.utils import check_random_state

from .._validation import as_real_array, check_positive_int, finite_floats, finite_targets
from .task import Task

SHAPE = "(n_samples, seq_len, n_features)"


def as_tokens(X, name="X", title="this task"):
    """``X`` as a 3-D non-empty array of finite floats (the input itself when it is one).

    ``name`` (the argument's) and ``title`` (the task's) are for the messages.
    """
    arr = as_real_array(X, name, f"{SHAPE} for {name}")
    if arr.ndim != 3:
        raise ValueError(
            f"{name} must be 3-D, {SHAPE}, for {title}, got an array of shape {arr.shape}."
        )
    if 0 in arr.shape:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need a row, a token, a feature.")
    return finite_floats(arr, name)


def as_row_targets(y, n):
    """``y`` as finite floats of shape ``(n,)``, one per row (a column ``(n, 1)`` reads as 1-D)."""
    arr = as_real_array(y, "y", f"({n},) for y")
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise ValueError(
            f"y must have shape (n_samples,) = ({n},) to match X (one number per row; a "
            f"column ({n}, 1) is read as one), got shape {arr.shape}."
        )
    return finite_targets(arr, "y")


def check_scale(value, name, *, positive):
    """A scale of a law (a noise level, a standard deviation): a finite real >= 0, or > 0.

    ``name`` names it in the messages; ``positive``: whether 0 is refused too. Returns a float.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    number = float(value) if abs(value) <= sys.float_info.max else math.inf  # a huge int too
    if not np.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}.")
    return number


def check_law_seed(value, name, of):
    """A seed that names a law: an int in ``[0, 2**32 - 1]``.

    ``name`` (the argument's) and ``of`` (what it draws, e.g. ``"xi"``) are for the messages.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an int (it names the law: the seed of {of}), got {value!r}."
        )
    if not 0 <= value <= 2**32 - 1:
        raise ValueError(
            f"{name} must be an int in [0, 2**32 - 1] (the seed of {of}), got {value!r}."
        )
    return int(value)


class TokenRowsTask(Task):
    """Base of the laws whose rows are tokens only, with one target per row.

    A subclass sets ``title`` (its name in messages) and ``unmarked`` (why
    its rows cannot be shortened, e.g. ``"these rows do not mark their
    relevant token"``), and implements the law itself (``_sample``,
    ``from_data``, ``check_targets``).
    """

    title = "this task"
    unmarked = "these rows do not mark the tokens that matter"

    def as_tokens(self, X, name="X"):
        """``X`` checked as rows of this law (see :func:`as_tokens`).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Rows of tokens.
        name : str, default="X"
            The argument's name, for the messages.

        Returns
        -------
        ndarray
            A real array.
        """
        return as_tokens(X, name, self.title)

    def check_rows(self, X, owner="the model"):
        """Check rows for ``predict``: 3-D, finite, of ``n_features`` features, any length.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        owner : str, default="the model"
            What was fitted, for the messages.

        Returns
        -------
        X : ndarray
            As a floating array.
        """
        X = self.as_tokens(X)
        if X.shape[2] != self.n_features:
            raise ValueError(
                f"X has {X.shape[2]} token features per token, but {owner} was fitted with "
                f"n_features={self.n_features}."
            )
        return X

    def check_targets(self, y, X):
        """``y`` as finite floats of shape ``(len(X),)``, as :meth:`from_data` reads it.

        Parameters
        ----------
        y : array-like of shape (n_samples,) or (n_samples, 1)
            Targets, one number per row.
        X : ndarray
            The checked rows.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            As floats.
        """
        return as_row_targets(y, len(X))

    def output_shape(self, n_samples, seq_len):
        """``(n_samples,)``: one target per row.

        Parameters
        ----------
        n_samples, seq_len : int
            Rows and their length.

        Returns
        -------
        tuple of int
            The shape of the targets.
        """
        return (n_samples,)

    def units(self, y, sample_weight=None):
        """One output unit per row (the 1-D targets as a column).

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            Targets or predictions.
        sample_weight : array-like of shape (n_samples,) or None
            Row weights.

        Returns
        -------
        units : ndarray of shape (n_samples, 1)
            The targets as a column.
        weights : ndarray of shape (n_samples,) or None
            The row weights.
        """
        return super().units(np.reshape(y, (-1, 1)), sample_weight)

    def shift(self, X, y, seq_len, random_state=None):
        """Lengthen rows with fresh noise tokens, keeping every target (the length shift).

        The new tokens are standard Gaussian (the law of a noise token),
        inserted at uniformly random places; the original tokens keep their
        order, so the tokens that matter, and the target, are unchanged. A
        row cannot be shortened: which tokens matter is not written in it.

        Parameters
        ----------
        X : ndarray of shape (n_samples, L, n_features)
            Rows of this task.
        y : ndarray of shape (n_samples,)
            Their targets.
        seq_len : int
            The new length, at least the rows' length.
        random_state : int, RandomState instance or None, default=None
            Seed of the new tokens and places.

        Returns
        -------
        X_shifted : ndarray of shape (n_samples, seq_len, n_features)
            The lengthened rows (a new array).
        y : ndarray of shape (n_samples,)
            ``y`` itself.
        """
        seq_len = check_positive_int(seq_len, "seq_len")
        X = self.as_tokens(X)
        n, L, d = X.shape
        if seq_len < L:
            raise ValueError(
                f"seq_len={seq_len} is shorter than the rows' length {L}: {self.unmarked}, "
                "so no token can be dropped."
            )
        rng = check_random_state(random_state)
        keep = np.sort(rng.random_sample((n, seq_len)).argsort(axis=1)[:, :L], axis=1)
        out = rng.standard_normal((n, seq_len, d)).astype(X.dtype, copy=False)
        out[np.arange(n)[:, None], keep] = X
        return out, y
