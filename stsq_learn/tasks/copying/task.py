"""Copying, after Jelassi, Brandfonbrener, Kakade and Malach (ICML 2024).

A row is a string x uniform in ``D^L``, as token ids ``(n, seq_len)``
(padded with ``-1`` after its end where lengths vary); a model reads ``BOS x
SEP`` and writes x, then the end. The target ``y`` is the string to write:
for copying ``X`` itself, and any ``y`` of ``X``'s shape in the contract (a
reversal, a sort, a lookup), so that a task of one's own fits the same models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import validate_parameter_constraints

from ..._validation import check_positive_int
from ...engine.sequences import check_token_rows
from ..task import Task

__all__ = ["CopyingTask", "make_copying"]


@dataclass(frozen=True)
class CopyingTask(Task):
    """The law of copying: uniform strings of ``seq_len`` symbols (or of lengths from ``min_len``).

    Parameters
    ----------
    seq_len : int
        L, the length of the strings (the longest, with ``min_len``).
    vocab_size : int, default=10
        D, the symbols of the alphabet (at least 2).
    min_len : int or None, default=None
        With an int, each string's length is uniform on ``[min_len,
        seq_len]`` (inclusive) and its row is padded with ``-1`` after its
        end; None: every string has ``seq_len`` symbols.

    Attributes
    ----------
    n_features : int
        ``vocab_size`` (a symbol read as a one-hot vector of D features).

    See Also
    --------
    make_copying : Draw rows from this law.
    TransformerCopier, LSTMCopier : The models trained on it.

    Notes
    -----
    The contract: ``X`` of integer tokens in ``[0, D)``, each row its tokens
    then ``-1`` (at least one token); ``y`` of its shape, each row the tokens
    to write then ``-1``. ``fit`` reads D (the largest token plus 1);
    ``predict`` refuses a token outside ``[0, D)``.

    Examples
    --------
    >>> from stsq_learn import CopyingTask
    >>> task = CopyingTask(seq_len=6, vocab_size=4, min_len=3)
    >>> X, y = task.sample(3, random_state=0)
    >>> X
    array([[ 0,  3,  1,  0,  3, -1],
           [ 3,  3,  1,  3, -1, -1],
           [ 0,  3,  2,  0,  0, -1]])
    >>> bool((X == y).all())
    True
    """

    seq_len: int
    vocab_size: int = 10
    min_len: int | None = None

    name = "copying"
    fitted_keys = ("min_len",)

    def __post_init__(self):
        object.__setattr__(self, "seq_len", check_positive_int(self.seq_len, "seq_len"))
        D = check_positive_int(self.vocab_size, "vocab_size", minimum=2)
        object.__setattr__(self, "vocab_size", D)
        if self.min_len is not None:
            low = check_positive_int(self.min_len, "min_len")
            if low > self.seq_len:
                raise ValueError(
                    f"min_len={low} exceeds seq_len={self.seq_len}: the lengths are uniform on "
                    "[min_len, seq_len]."
                )
            object.__setattr__(self, "min_len", None if low == self.seq_len else low)

    @property
    def n_features(self):
        """``vocab_size``: D (what the package's fitted ``n_features_in_`` holds)."""
        return self.vocab_size

    @property
    def trivial_mse(self):
        """``E ||y||^2`` (the padding counting -1): the squared error of predicting 0."""
        D, T = self.vocab_size, self.seq_len
        low = T if self.min_len is None else self.min_len
        mean_len = (low + T) / 2
        return float(mean_len * (D - 1) * (2 * D - 1) / 6 + (T - mean_len))

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        T, D = self.seq_len, self.vocab_size
        X = rng.randint(D, size=(n_samples, T)).astype(np.int64)
        if self.min_len is not None:
            lengths = rng.randint(self.min_len, T + 1, size=n_samples)
            X[np.arange(T)[None, :] >= lengths[:, None]] = -1
        return X, X.copy()

    def _sample_torch(self, n_samples, generator, device, dtype):
        T, D = self.seq_len, self.vocab_size
        X = torch.randint(D, (n_samples, T), generator=generator, device=device)
        if self.min_len is not None:
            lengths = torch.randint(
                self.min_len, T + 1, (n_samples, 1), generator=generator, device=device
            )
            X = X.masked_fill(torch.arange(T, device=device) >= lengths, -1)
        X = X.to(dtype)
        return X, X.clone()

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        """Check ``(X, y)`` of ``fit``; return the task they describe and the arrays.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Integer tokens, each row its tokens then ``-1``.
        y : array-like of shape (n_samples, seq_len)
            The strings to write, as ``X``.

        Returns
        -------
        task : CopyingTask
            ``seq_len`` the width of ``X``, D the largest token plus 1 (at
            least 2), ``min_len`` the shortest source.
        X, y : ndarray of int64
        """
        X, y = check_token_rows(X, "X"), check_token_rows(y, "y", empty_rows=True)
        if y.shape != X.shape:
            raise ValueError(
                f"y must have the shape of X, {X.shape} (each row the tokens to write, then -1), "
                f"got shape {y.shape}."
            )
        D = max(int(X.max()), int(y.max()), 1) + 1
        shortest = int((X >= 0).sum(1).min())
        return cls(X.shape[1], D, min_len=shortest), X, y

    def check_rows(self, X, owner="the model"):
        # Integer tokens in [0, D) then -1, any length.
        return check_token_rows(X, "X", vocab_size=self.vocab_size, owner=owner)

    def check_targets(self, y, X):
        # ``y`` of the sources' shape, tokens in [0, D) then -1.
        y = check_token_rows(y, "y", vocab_size=self.vocab_size, empty_rows=True)
        if y.shape != X.shape:
            raise ValueError(f"y must have the shape of X, {X.shape}, got shape {y.shape}.")
        return y

    def output_shape(self, n_samples, seq_len):
        return (n_samples, seq_len)  # one string per row, as wide as the source

    # -- the length shift ------------------------------------------------------------
    def shift(self, X, y, seq_len, random_state=None):
        """Lengthen (or cut) every string by ``seq_len / T``, with fresh symbols; y its copy.

        A string of ``l`` symbols in rows of width ``T`` becomes one of
        ``max(1, round(l * seq_len / T))``: its own symbols first, then
        fresh uniform ones (or its first ones, when it shrinks). ``y`` is
        the new strings (copying's target); at ``seq_len = T`` the rows
        are returned as they are.

        Parameters
        ----------
        X : ndarray of shape (n_samples, T)
            Sources of this law.
        y : ndarray of shape (n_samples, T)
            Their copies (not read: the shifted target is the shifted source).
        seq_len : int
            The new width.
        random_state : int, RandomState instance or None, default=None
            Seed of the fresh symbols.

        Returns
        -------
        X_shifted, y_shifted : ndarray of shape (n_samples, seq_len)
            The rows at the new length.
        """
        seq_len = check_positive_int(seq_len, "seq_len")
        X = self.check_rows(X, "this task")
        n, T = X.shape
        if seq_len == T:
            return X, self.check_targets(y, X)
        rng = check_random_state(random_state)
        lengths = np.maximum(1, np.floor((X >= 0).sum(1) * seq_len / T + 0.5)).astype(int)
        out = rng.randint(self.vocab_size, size=(n, seq_len)).astype(np.int64)
        keep = min(T, seq_len)
        out[:, :keep] = np.where(X[:, :keep] >= 0, X[:, :keep], out[:, :keep])
        out[np.arange(seq_len)[None, :] >= lengths[:, None]] = -1
        return out, out.copy()


def make_copying(n_samples, seq_len, *, vocab_size=10, min_len=None, random_state=None):
    """Generate strings to copy: uniform symbols, optionally of uniform lengths, padded with -1.

    Parameters
    ----------
    n_samples : int
        Number of strings.
    seq_len : int
        L, their length (the longest, with ``min_len``).
    vocab_size : int, default=10
        D, the symbols ``0 .. D-1``.
    min_len : int or None, default=None
        With an int, lengths uniform on ``[min_len, seq_len]``, rows padded
        with ``-1`` after their end.
    random_state : int, RandomState instance or None, default=None
        Seed of the draw.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len), int64
        The strings.
    y : ndarray of shape (n_samples, seq_len), int64
        The strings to write: ``X`` (a copy).

    Examples
    --------
    >>> from stsq_learn import make_copying
    >>> X, y = make_copying(500, 20, min_len=5, random_state=0)
    >>> X.shape, X.dtype, int(X.max()), int((X >= 0).sum(1).min())
    ((500, 20), dtype('int64'), 9, 5)
    """
    validate_parameter_constraints(
        {"random_state": ["random_state"]},
        {"random_state": random_state},
        caller_name="make_copying",
    )
    task = CopyingTask(seq_len, vocab_size, min_len)
    return task.sample(n_samples, random_state=random_state)
