"""Sparse token selection (STS_q), the task of Wang, Wei, Hsu and Lee (ICML 2024).

A row is a sequence of ``seq_len`` tokens in ``R^n_features`` and a subset S
of its positions; the target is the mean of the selected tokens. Rows are
stored as one array ``X`` of shape ``(n_samples, seq_len, n_features + 1)``
whose last channel is the selection indicator (exactly 0.0 or 1.0), and
``y`` of shape ``(n_samples, n_features)``. The attention model asks one
query per row, the sum of the selected positions' encodings
(:class:`~stsq_learn.queries.Selection`); the fully-connected baseline reads
the flattened row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..._validation import check_n_selected, check_sequences, check_targets
from ...encodings.sampling import draws_of_each
from ...nn.queries import Selection
from .._shift import move_marked_rows
from ..task import Task

__all__ = ["SparseTokenSelectionTask", "make_sparse_token_selection", "shift_length"]


@dataclass(frozen=True)
class SparseTokenSelectionTask(Task):
    """The law D_{T,q} of the sparse token selection task.

    Tokens are i.i.d. standard Gaussian vectors; the selected subset S is
    uniform among the subsets of ``n_selected`` positions out of ``seq_len``;
    the target is the mean of the selected tokens. :meth:`sample` returns
    ``X`` of shape ``(n_samples, seq_len, n_features + 1)`` (tokens, then
    the selection indicator in the last channel) and ``y`` of shape
    ``(n_samples, n_features)``.

    Parameters
    ----------
    seq_len : int or tuple of (int, int)
        Number of tokens T in a row. A pair ``(T_min, T_max)`` is a range of
        lengths: every call of :meth:`sample` (every online batch) draws one
        length uniformly from it.
    n_features : int
        Dimension d of a token.
    n_selected : int or tuple of (int, int)
        Size q of the selected subset. A pair ``(q_min, q_max)`` draws q
        uniformly from that inclusive range, independently for every row.

    Attributes
    ----------
    q_range : tuple of (int, int)
        The inclusive range of subset sizes, ``(q, q)`` for a fixed q.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelectionTask
    >>> task = SparseTokenSelectionTask(seq_len=16, n_features=8, n_selected=3)
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape
    ((100, 16, 9), (100, 8))
    >>> int(X[0, :, -1].sum())
    3
    """

    seq_len: int | tuple[int, int]
    n_features: int
    n_selected: int | tuple[int, int]

    name = "selection"
    structure = Selection
    isotropic_floor_applies = True

    def __post_init__(self):
        self.check_sizes()
        lo, hi = check_n_selected(self.n_selected, self.length_range[0])
        if not isinstance(self.n_selected, int) or isinstance(self.n_selected, bool):
            object.__setattr__(
                self, "n_selected", lo if np.ndim(self.n_selected) == 0 else (lo, hi)
            )

    @property
    def q_range(self) -> tuple[int, int]:
        q = self.n_selected
        return (int(q), int(q)) if np.ndim(q) == 0 else (int(q[0]), int(q[1]))

    @property
    def trivial_mse(self) -> float:
        """Mean squared error of the predictor 0, ``E||y||^2 = d * E[1/q]``."""
        lo, hi = self.q_range
        return self.n_features * float(np.mean(1.0 / np.arange(lo, hi + 1)))

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        T, d = self.seq_len, self.n_features
        tokens = rng.standard_normal((n_samples, T, d))
        lo, hi = self.q_range
        q = rng.randint(lo, hi + 1, size=n_samples) if hi > lo else np.full(n_samples, lo)
        rank = rng.random_sample((n_samples, T)).argsort(axis=1).argsort(axis=1)
        mask = (rank < q[:, None]).astype(np.float64)
        y = np.einsum("nt,ntd->nd", mask, tokens) / q[:, None]
        X = np.concatenate([tokens, mask[:, :, None]], axis=2)
        return X, y

    def _sample_torch(self, n_samples, generator, device, dtype):
        return self._sample_torch_members(n_samples, [generator], device, dtype)

    def _sample_torch_members(self, n_samples, generators, device, dtype):
        T, d = self.seq_len, self.n_features
        lo, hi = self.q_range
        n = n_samples * len(generators)
        # Whole-batch tensor ops only. The tokens are drawn in place in X, one
        # Gaussian per channel (the last is then overwritten by the selection):
        # a 1/(d + 1) larger draw, but no copy of the tokens into X, which cost
        # more. One top-k (or sort) chooses the subsets. Several generators (the
        # members of a batched fit) draw their blocks in turn, as alone.
        X = draws_of_each("normal", generators, (n_samples, T, d + 1), device, dtype)
        keys = draws_of_each("uniform", generators, (n_samples, T), device, None)
        mask = torch.zeros(n, T, device=device, dtype=dtype)
        if hi > lo:
            order = keys.argsort(1)
            q = torch.cat(
                [
                    torch.randint(lo, hi + 1, (n_samples, 1), device=device, generator=g)
                    for g in generators
                ]
            )
            # rank of each position in the random order; the q first are selected
            rank = torch.empty_like(order).scatter_(
                1, order, torch.arange(T, device=device).expand(n, T)
            )
            mask.masked_fill_(rank < q, 1.0)
            q = q.to(dtype)
        else:
            # The q smallest keys: the q first of the random order, without sorting it all.
            mask.scatter_(1, keys.topk(lo, dim=1, largest=False).indices, 1.0)
            q = lo
        X[..., d] = mask
        y = torch.bmm(mask.unsqueeze(1), X).squeeze(1)[:, :d] / q
        return X, y

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        X = check_sequences(X)
        y, _ = check_targets(y, X.shape[0], X.shape[2] - 1)
        return cls.from_fitted(X.shape[1], X.shape[2] - 1, {}), X, y

    @classmethod
    def from_fitted(cls, seq_len, n_features, state):
        # Predictions accept any subset size: the contract's q is every size up to T.
        return cls(seq_len, n_features, (1, seq_len))

    def check_rows(self, X, owner="the model"):
        return check_sequences(X, n_features=self.n_features, owner=owner)

    def check_targets(self, y, X):
        y, _ = check_targets(y, X.shape[0], X.shape[2] - 1)
        return y

    # -- the length shift -----------------------------------------------------------
    def shift(self, X, y, seq_len, random_state=None):
        return move_marked_rows(X, X[..., -1] == 1.0, seq_len, random_state), y

    # -- what the models read --------------------------------------------------------
    @property
    def largest_query_of_law(self):
        return self.q_range[1]

    def largest_query(self, X):
        return int(X[..., -1].sum(axis=1).max())

    def fcn_input_size(self):
        return self.seq_len * (self.n_features + 1)

    def query_sizes(self, X):
        return X[..., -1].sum(dim=1)


def make_sparse_token_selection(
    n_samples=1000, seq_len=16, n_features=8, n_selected=3, *, random_state=None
):
    """Generate a sparse token selection (STS_q) regression problem.

    Each row holds ``seq_len`` i.i.d. standard Gaussian tokens of dimension
    ``n_features`` and a uniformly random subset of ``n_selected`` positions;
    the target is the average of the selected tokens.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    seq_len : int, default=16
        Number of tokens T per row.
    n_features : int, default=8
        Token dimension d.
    n_selected : int or tuple of (int, int), default=3
        Subset size q, or an inclusive range ``(q_min, q_max)`` from which q
        is drawn uniformly for every row.
    random_state : int, RandomState instance or None, default=None
        Seed of the draw; an int gives the same data every time.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, n_features + 1)
        ``X[..., :-1]`` are the tokens and ``X[..., -1]`` the selection
        indicator (exactly 0.0 or 1.0; every row selects at least one token).
    y : ndarray of shape (n_samples, n_features)
        ``y[i] = mean of X[i, t, :-1] over the selected t``.

    See Also
    --------
    SparseTokenSelectionTask : The same law as an object, with a torch sampler.

    Examples
    --------
    >>> from stsq_learn import make_sparse_token_selection
    >>> X, y = make_sparse_token_selection(200, seq_len=16, n_features=4,
    ...                                    n_selected=2, random_state=0)
    >>> X.shape, y.shape
    ((200, 16, 5), (200, 4))
    """
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    return task.sample(n_samples, random_state=random_state)


def shift_length(X, seq_len, random_state=None):
    """Move every row of ``X`` to length ``seq_len`` without changing its target.

    For ``seq_len > T`` the function inserts ``seq_len - T`` fresh unselected
    tokens, i.i.d. standard Gaussian (the token law of the task), at uniformly
    random positions: the positions the original tokens occupy form a uniform
    random ``T``-subset of the ``seq_len`` slots, and the original tokens keep
    their order. For ``seq_len < T`` it deletes ``T - seq_len`` unselected
    tokens, chosen uniformly among each row's unselected ones. The selected
    tokens and their order are untouched, so ``y`` stays valid. The work is
    vectorised over rows (``argpartition`` on random keys, no per-row loop).

    Parameters
    ----------
    X : array-like of shape (n_samples, T, n_features + 1)
        Sequences with the selection indicator in the last channel (the data
        contract of :func:`~stsq_learn.make_sparse_token_selection`).
    seq_len : int
        The new length ``T'``. It must be at least the largest number of
        selected tokens in any row.
    random_state : int, RandomState instance or None, default=None
        Seed of the insertion/deletion positions and of the inserted tokens;
        an int gives the same result every time.

    Returns
    -------
    X_shifted : ndarray of shape (n_samples, seq_len, n_features + 1)
        The moved rows, a new array of the same floating dtype as ``X``
        (``X`` is never modified). Inserted tokens have indicator 0.0. For
        ``seq_len == T`` it is a copy of ``X``.

    Raises
    ------
    ValueError
        If ``X`` breaks the data contract or ``seq_len`` is smaller than the
        number of selected tokens of some row.

    See Also
    --------
    LengthShiftScorer : Scores an estimator on shifted rows.

    Examples
    --------
    >>> from stsq_learn import make_sparse_token_selection, shift_length
    >>> X, y = make_sparse_token_selection(5, seq_len=8, n_features=2,
    ...                                    n_selected=3, random_state=0)
    >>> X_long = shift_length(X, 32, random_state=0)
    >>> X_long.shape
    (5, 32, 3)
    >>> bool((X_long[X_long[..., -1] == 1] == X[X[..., -1] == 1]).all())
    True
    """
    X = check_sequences(X)
    return move_marked_rows(X, X[..., -1] == 1.0, seq_len, random_state)
