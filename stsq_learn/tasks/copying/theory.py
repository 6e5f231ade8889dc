"""The theory of copying (Jelassi et al., ICML 2024): its two bounds and its two constructions.

- :func:`fixed_state_error_bound`: a model with a b-bit state (an LSTM, a
  state space model) errs on uniform strings with probability at least
  ``1 - 2^b / D^L`` (Theorem 2.7); :class:`FixedStateCopier` meets it.
- :func:`ngram_error_bound`: a depth-2 transformer copies every string
  without a repeated n-gram (Theorem 2.3), which a uniform string holds with
  probability below ``L^2 D^-n`` (Lemma 2.4); :class:`NGramCopier` is that
  transformer's algorithm (an n-gram induction head).

Neither copier trains: ``fit`` checks the strings and reads the alphabet.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from ...engine.sequences import _UntrainedSequenceModel

__all__ = ["FixedStateCopier", "NGramCopier", "fixed_state_error_bound", "ngram_error_bound"]


def _positive(value, name, low=1, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r}.")
    if value < low or (high is not None and value > high):
        where = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an int {where}, got {value!r}.")
    return int(value)


def fixed_state_error_bound(seq_len, vocab_size, n_bits):
    """The least error of a model with a b-bit state on uniform strings: ``max(0, 1 - 2^b / D^L)``.

    Parameters
    ----------
    seq_len : int
        L.
    vocab_size : int
        D (at least 2).
    n_bits : int
        b, the bits of the state.

    Returns
    -------
    float
        ``max(0, 1 - 2^b / D^L)``.

    Examples
    --------
    >>> from stsq_learn import fixed_state_error_bound
    >>> round(fixed_state_error_bound(5, 10, 16), 4)       # 1 - 65536 / 100000
    0.3446
    """
    L, D = _positive(seq_len, "seq_len"), _positive(vocab_size, "vocab_size", 2)
    b = _positive(n_bits, "n_bits")
    return max(0.0, 1.0 - 2**b / D**L)  # int / int: correctly rounded at any size


def ngram_error_bound(seq_len, vocab_size, n):
    """The n-gram copier's error bound on uniform strings: ``min(1, L^2 D^-n)``.

    Above the chance that a string of length L repeats an n-gram (Lemma
    2.4), which bounds the error of the transformer of Theorem 2.3 (and of
    :class:`NGramCopier`).

    Parameters
    ----------
    seq_len : int
        L.
    vocab_size : int
        D (at least 2).
    n : int
        The n-gram's length.

    Returns
    -------
    float
        ``min(1, L^2 D^-n)``.

    Examples
    --------
    >>> from stsq_learn import ngram_error_bound
    >>> ngram_error_bound(32, 10, 4)
    0.1024
    """
    L, D = _positive(seq_len, "seq_len"), _positive(vocab_size, "vocab_size", 2)
    n = _positive(n, "n")
    return float(min(1.0, L * L * float(D) ** -n))


class NGramCopier(_UntrainedSequenceModel):
    """The n-gram induction head of Jelassi et al.'s Theorem 2.3, as an algorithm.

    It copies the first n tokens of x by position, then writes, again and
    again, the token after the first occurrence in x of the last n tokens
    it wrote (the end when that occurrence ends x, or when there is none).
    It errs only on strings that repeat an n-gram, so its error is below
    :func:`ngram_error_bound` (``L^2 D^-n``); the depth-2 transformer of
    the theorem computes the same with O(n log D) dimensions.

    Parameters
    ----------
    n : int, default=4
        The n-gram's length.

    Attributes
    ----------
    task_ : CopyingTask
        The sizes of the strings seen in fit.
    n_features_in_ : int
        D.
    seq_len_ : int
        Width of the rows seen in fit.

    See Also
    --------
    ngram_error_bound : Its error bound.
    TransformerCopier : A trained transformer.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import NGramCopier
    >>> X = np.array([[1, 2, 3, 1, 2, 4, -1], [5, 6, 7, 8, -1, -1, -1]])
    >>> NGramCopier(n=2).fit(X, X).predict(X)   # "1 2" repeats in the first row
    array([[ 1,  2,  3,  1,  2,  3,  1],
           [ 5,  6,  7,  8, -1, -1, -1]])
    """

    _parameter_constraints: dict = {"n": [Interval(Integral, 1, None, closed="left")]}
    _task = "copying"

    def __init__(self, n=4):
        self.n = n

    def _write(self, X):
        rows, T = X.shape
        n = min(self.n, T)
        lengths = (X >= 0).sum(1)
        out = np.full((rows, T), -1, dtype=np.int64)
        out[:, :n] = X[:, :n]
        if T <= n:
            return out
        windows = np.lib.stride_tricks.sliding_window_view(X, n, axis=1)  # (rows, T - n + 1, n)
        D = self.task_.vocab_size
        if D**n < 2**62:  # each n-gram as one number in base D: one comparison per window
            powers = D ** np.arange(n - 1, -1, -1, dtype=np.int64)
            windows = windows @ powers
        valid = np.arange(T - n + 1)[None, :] + n <= lengths[:, None]  # n-grams inside x
        alive = lengths > n
        for j in range(n, T):
            last = out[:, j - n : j]
            if windows.ndim == 2:
                match = windows == (last @ powers)[:, None]
            else:
                match = (windows == last[:, None, :]).all(-1)
            match &= valid
            after = match.argmax(1) + n
            alive &= match.any(1) & (after < lengths)
            out[alive, j] = X[alive, after[alive]]
        return out


class FixedStateCopier(_UntrainedSequenceModel):
    """The best copier with a state of ``n_bits`` bits: it meets :func:`fixed_state_error_bound`.

    Its state takes ``2^b`` values: ``2^b - 1`` of them store a string
    exactly, the last says "another one". It stores the most likely
    strings of the fitted law (lengths from the shortest of ``fit``, the
    shorter first, each length in order of its value in base D) and, for
    every other string, writes one fixed string: the next in that order.
    On uniform strings of length L it is right with probability exactly
    ``min(1, 2^b / D^L)``, the most any b-bit model can be right (Jelassi
    et al., Theorem 2.7). Storing the first ``floor(b / log2 D)`` symbols
    and guessing the rest is far worse (0.90 error at ``D = 10, b = 16,
    L = 5``, against the bound's 0.34).

    Parameters
    ----------
    n_bits : int, default=16
        b, the bits of the state (1 to 62).

    Attributes
    ----------
    task_ : CopyingTask
        The sizes of the strings seen in fit (``min_len``: the shortest).
    n_features_in_ : int
        D.
    seq_len_ : int
        Width of the rows seen in fit.

    See Also
    --------
    fixed_state_error_bound : The bound it meets.
    LSTMCopier : A trained fixed-state model.

    Examples
    --------
    >>> from stsq_learn import (
    ...     FixedStateCopier, fixed_state_error_bound, make_copying)
    >>> X, y = make_copying(20000, 5, random_state=0)
    >>> error = 1 - FixedStateCopier(n_bits=16).fit(X, y).score(X, y)
    >>> bound = fixed_state_error_bound(5, 10, 16)               # 0.3446
    >>> bool(abs(error - bound) < 0.01)
    True
    """

    _parameter_constraints: dict = {"n_bits": [Interval(Integral, 1, 62, closed="both")]}
    _task = "copying"

    def __init__(self, n_bits=16):
        self.n_bits = n_bits

    def _order(self, lengths, values):
        """Each string's place in the storing order (capped at ``2^b``)."""
        cap = 2**self.n_bits
        D, low = self.task_.vocab_size, self.task_.min_len or self.task_.seq_len
        before, total = {}, 0
        for length in range(low, int(lengths.max(initial=low)) + 1):
            before[length] = total
            total = min(cap, total + min(cap, D**length))
        shorter = np.array([before.get(int(k), cap) for k in lengths], dtype=np.int64)
        return np.minimum(cap, shorter + values)

    def _write(self, X):
        D, cap = self.task_.vocab_size, 2**self.n_bits
        lengths = (X >= 0).sum(1)
        values = np.zeros(len(X), dtype=np.int64)
        for j in range(X.shape[1]):  # the string in base D, capped at 2^b
            on = j < lengths
            big = values > (cap - 1) // D
            values = np.where(on, np.where(big, cap, values * D + np.maximum(X[:, j], 0)), values)
            values = np.minimum(values, cap)
        stored = self._order(lengths, values) < cap - 1
        out = np.where(stored[:, None], X, -1)
        guess = self._guess(X.shape[1])
        out[~stored] = guess
        return out

    def _guess(self, width):
        """The string written for every string not stored: the ``2^b - 1``-th of the order."""
        D, low = self.task_.vocab_size, self.task_.min_len or self.task_.seq_len
        index, length = 2**self.n_bits - 1, low
        while index >= D**length:
            index -= D**length
            length += 1
        digits = [(index // D**k) % D for k in reversed(range(length))]
        out = np.full(width, -1, dtype=np.int64)
        out[: min(width, length)] = digits[:width]
        return out


PUBLIC = (fixed_state_error_bound, ngram_error_bound)
"""The public functions of the theory (exported by the registration)."""
