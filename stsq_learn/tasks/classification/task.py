"""Sparse-token classification, after Barnfield, Cui and Lu (ICLR 2026, arXiv 2509.25153).

A row holds ``seq_len`` tokens (L) in ``R^n_features`` (d). A positive row
carries a weak signal: ``X = theta v xi^T + Z``, where ``xi`` is a unit
vector fixed by the law, ``v`` in ``{0, 1}^L`` marks ``n_informative`` (R)
tokens at uniformly random positions and ``Z`` has i.i.d. standard Gaussian
entries; a negative row is pure noise, ``X = Z``. Rows are positive with
probability ``positive_fraction`` (pi). The signal's norm ``theta sqrt(R)``
is small beside the noise's ``sqrt(L d)``, and its place moves from row to
row: the row does not mark it.

Data contract: ``X`` of shape ``(n_samples, seq_len, n_features)``, tokens
only (no marker channel: nothing in a row says which tokens are
informative), and labels ``y`` of shape ``(n_samples,)`` in ``{0, 1}``,
1 for a row that carries the signal. The generator draws them as integers
(int64, as scikit-learn's ``make_classification``); the paper writes them
``+1``/``-1``. The classifier (:class:`~stsq_learn.SparseTokenClassifier`)
takes any labels (-1/+1, strings, ...) and keeps them in ``classes_``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ..._validation import as_real_array, check_positive_int, check_random_state_param
from .._token_rows import TokenRowsTask, check_law_seed
from .._token_rows import as_tokens as _as_tokens

__all__ = ["SparseTokenClassificationTask", "make_sparse_token_classification"]

_TITLE = "sparse-token classification"


def as_tokens(X, name="X"):
    """``X`` as rows of sparse-token classification: 3-D, non-empty, finite floats."""
    return _as_tokens(X, name, _TITLE)


def _as_labels(y, n):
    """``y`` as float 0.0/1.0 of shape ``(n,)``; a column ``(n, 1)`` is read as 1-D."""
    arr = as_real_array(y, "y", f"({n},) for y")
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise ValueError(
            f"y must have shape (n_samples,) = ({n},) to match X (one label per row; a "
            f"column ({n}, 1) is read as one), got shape {arr.shape}."
        )
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"y of sparse-token classification holds 0 (noise) and 1 (signal present), got "
            f"{arr[i].item()!r} at row {i}. (The paper writes -1/+1; SparseTokenClassifier "
            "takes any two labels.)"
        )
    return arr.astype(np.float64)


def _check_real(value, name, low, high, *, closed):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    lo_ok = value >= low if closed[0] else value > low
    hi_ok = value <= high if closed[1] else value < high
    if not (np.isfinite(value) and lo_ok and hi_ok):
        left, right = "[" if closed[0] else "(", "]" if closed[1] else ")"
        raise ValueError(
            f"{name} must be a finite number in {left}{low}, {high}{right}, got {value!r}."
        )
    return value


@dataclass(frozen=True)
class SparseTokenClassificationTask(TokenRowsTask):
    """The law of sparse-token classification with Gaussian tokens.

    A positive row (label 1, probability ``positive_fraction``) is
    ``X = signal * v xi^T + Z`` with ``n_informative`` informative tokens at
    uniformly random distinct positions; a negative row (label 0) is ``Z``;
    ``Z`` has i.i.d. ``N(0, 1)`` entries. ``xi`` (:attr:`signal_direction`)
    is a unit vector fixed by ``random_state``: two tasks with the same
    fields are the same law. The paper (Barnfield, Cui, Lu, ICLR 2026)
    writes the labels -1/+1; here they are the integers 0 and 1.

    Parameters
    ----------
    seq_len : int
        Number of tokens L in a row.
    n_features : int
        Dimension d of a token.
    n_informative : int, default=1
        Informative tokens R of a positive row, in ``[1, seq_len]``.
    signal : float, default=2.0
        The signal strength theta (>= 0) added along ``xi`` to each
        informative token.
    positive_fraction : float, default=0.5
        Probability pi that a row is positive, in ``(0, 1)``.
    random_state : int, default=0
        Seed of ``xi``, in ``[0, 2**32 - 1]``.

    Attributes
    ----------
    signal_direction : ndarray of shape (n_features,)
        ``xi``, a unit vector.

    Notes
    -----
    The contract: ``X`` of shape ``(n_samples, seq_len, n_features)`` (tokens
    only: the task selects by content, so there is no marker channel and
    ``structure`` is None, as for single-location regression) and ``y`` of
    shape ``(n_samples,)`` in ``{0, 1}`` (:meth:`sample` draws them as
    int64; :meth:`sample_torch`, the batches of ``fit_online``, as floats
    of the training dtype, drawn on the device). :meth:`shift` lengthens
    rows with fresh noise tokens, the label unchanged. :attr:`trivial_mse`
    is the mean squared error of predicting 0, ``pi``; :meth:`score` is
    accuracy.

    Examples
    --------
    >>> from stsq_learn import SparseTokenClassificationTask
    >>> task = SparseTokenClassificationTask(
    ...     seq_len=16, n_features=8, signal=3.0)
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape, y.dtype, sorted(set(y.tolist()))
    ((100, 16, 8), (100,), dtype('int64'), [0, 1])
    >>> task.trivial_mse
    0.5
    """

    seq_len: int
    n_features: int
    n_informative: int = 1
    signal: float = 2.0
    positive_fraction: float = 0.5
    random_state: int = 0

    name = "classification"
    title = _TITLE
    unmarked = "sparse-token rows do not mark their informative tokens"
    fitted_keys = ()
    targets_1d = True
    labels = (0, 1)
    """The labels the law draws: 0 (noise), 1 (signal); a classifier trained on the law has them."""

    def __post_init__(self):
        if isinstance(self.seq_len, (tuple, list, np.ndarray)):
            raise TypeError(
                f"seq_len of sparse-token classification must be one int, got {self.seq_len!r}."
            )
        self._check_sizes()
        R = check_positive_int(self.n_informative, "n_informative")
        if R > self.seq_len:
            raise ValueError(
                f"n_informative={R} is more than seq_len={self.seq_len}: a row cannot hold "
                "more informative tokens than tokens."
            )
        object.__setattr__(self, "n_informative", R)
        object.__setattr__(
            self, "signal", _check_real(self.signal, "signal", 0, np.inf, closed=(True, False))
        )
        object.__setattr__(
            self,
            "positive_fraction",
            _check_real(self.positive_fraction, "positive_fraction", 0, 1, closed=(False, False)),
        )
        object.__setattr__(
            self, "random_state", check_law_seed(self.random_state, "random_state of a task", "xi")
        )

    # -- the law's constants ---------------------------------------------------------
    @property
    def signal_direction(self):
        """``xi``: the unit signal vector of ``R^n_features``, from ``random_state``."""
        g = np.random.RandomState(self.random_state).standard_normal(self.n_features)
        return g / np.linalg.norm(g)

    @property
    def trivial_mse(self) -> float:
        """Mean squared error of the predictor 0 on the 0/1 labels: ``E[y^2] = pi``."""
        return self.positive_fraction

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        L, d, R = self.seq_len, self.n_features, self.n_informative
        X = rng.standard_normal((n_samples, L, d))
        y = (rng.random_sample(n_samples) < self.positive_fraction).astype(np.int64)
        places = np.argpartition(rng.random_sample((n_samples, L)), R - 1, axis=1)[:, :R]
        v = np.zeros((n_samples, L))
        np.put_along_axis(v, places, 1.0, axis=1)
        v *= y[:, None]
        X += self.signal * v[:, :, None] * self.signal_direction
        return X, y

    def _sample_torch(self, n_samples, generator, device, dtype):
        """The law's rows drawn on ``device`` from ``generator`` (the batches of ``fit_online``)."""
        L, d, R = self.seq_len, self.n_features, self.n_informative
        draw = {"generator": generator, "device": device}
        X = torch.randn(n_samples, L, d, dtype=dtype, **draw)
        y = (torch.rand(n_samples, **draw) < self.positive_fraction).to(dtype)
        places = torch.rand(n_samples, L, **draw).argsort(dim=1)[:, :R]  # R distinct places
        rows = torch.arange(n_samples, device=device)[:, None].expand(-1, R)
        xi = torch.as_tensor(self.signal_direction, dtype=dtype, device=device)
        signal = (self.signal * y)[:, None, None] * xi  # (n, 1, d): 0 on a negative row
        X.index_put_((rows, places), signal.expand(-1, R, -1), accumulate=True)
        return X, y

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_rows(cls, X):
        """Check rows ``X``; return the task they describe and the array (labels apart).

        What a classifier reads of its training data, the labels being its
        own to encode (``classes_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.

        Returns
        -------
        task : SparseTokenClassificationTask
            The law's sizes (its other fields at their defaults).
        X : ndarray
            ``X`` as a real array.
        """
        X = as_tokens(X)
        return cls(X.shape[1], X.shape[2]), X

    @classmethod
    def from_data(cls, X, y):
        """Check ``(X, y)`` of ``fit``; return the task they describe and the arrays.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,)
            Labels in ``{0, 1}`` (a column ``(n_samples, 1)`` is read as 1-D).

        Returns
        -------
        task : SparseTokenClassificationTask
            The law's sizes (its other fields at their defaults).
        X : ndarray
            ``X`` as a real array.
        y : ndarray of shape (n_samples,)
            The labels as floats 0.0 and 1.0.
        """
        task, X = cls.from_rows(X)
        return task, X, _as_labels(y, len(X))

    def check_targets(self, y, X):
        """``y`` as floats 0.0/1.0 of shape ``(len(X),)``, as :meth:`from_data` reads it.

        Parameters
        ----------
        y : array-like of shape (n_samples,) or (n_samples, 1)
            Labels in ``{0, 1}``.
        X : ndarray
            The checked rows.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            As floats.
        """
        return _as_labels(y, len(X))

    def score(self, y, y_pred, sample_weight=None):
        """Accuracy of ``y_pred`` (a prediction above 1/2 reads as label 1).

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            Labels 0/1.
        y_pred : ndarray of shape (n_samples,)
            Predicted labels, or scores in [0, 1] (thresholded at 1/2).
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights.

        Returns
        -------
        float
            The (weighted) fraction of rows predicted right.
        """
        from sklearn.metrics import accuracy_score

        y_units, w = self.units(y, sample_weight)
        pred = (np.reshape(y_pred, y_units.shape) > 0.5).astype(np.float64)
        return float(accuracy_score(y_units[:, 0], pred[:, 0], sample_weight=w))

    # -- the length shift -----------------------------------------------------------


def make_sparse_token_classification(
    n_samples=1000,
    seq_len=16,
    n_features=8,
    n_informative=1,
    *,
    signal=2.0,
    positive_fraction=0.5,
    task_seed=0,
    random_state=None,
):
    """Generate a sparse-token classification problem.

    A positive row (label 1, probability ``positive_fraction``) carries the
    unit signal vector ``xi``, times ``signal``, on ``n_informative`` tokens
    at random positions; every entry of every row also has i.i.d. ``N(0, 1)``
    noise; a negative row (label 0) is noise alone (after Barnfield, Cui and
    Lu, ICLR 2026, who write the labels -1/+1; here they are integers, as
    scikit-learn's ``make_classification`` gives them).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    seq_len : int, default=16
        Number of tokens L per row.
    n_features : int, default=8
        Token dimension d.
    n_informative : int, default=1
        Informative tokens R of a positive row.
    signal : float, default=2.0
        The signal strength theta.
    positive_fraction : float, default=0.5
        Probability pi of a positive row.
    task_seed : int, default=0
        Seed of ``xi`` (the task's ``random_state``), in ``[0, 2**32 - 1]``.
    random_state : int, RandomState instance or None, default=None
        Seed of the rows.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, n_features)
        The tokens.
    y : ndarray of shape (n_samples,)
        The labels, 0 or 1 (int64).

    See Also
    --------
    SparseTokenClassificationTask : The same law as an object, with ``xi``.

    Examples
    --------
    >>> from stsq_learn import make_sparse_token_classification
    >>> X, y = make_sparse_token_classification(
    ...     200, seq_len=16, n_features=8, random_state=0)
    >>> X.shape, y.shape, y.dtype
    ((200, 16, 8), (200,), dtype('int64'))
    """
    task_seed = check_law_seed(task_seed, "task_seed", "xi")
    check_random_state_param(random_state, "make_sparse_token_classification")
    task = SparseTokenClassificationTask(
        seq_len,
        n_features,
        n_informative=n_informative,
        signal=signal,
        positive_fraction=positive_fraction,
        random_state=task_seed,
    )
    return task.sample(n_samples, random_state=random_state)
