"""The two tasks: sparse token selection (STS_q) and q-sparse averaging (qSA).

STS_q: a row is a sequence of ``seq_len`` tokens in ``R^n_features`` and a
subset S of its positions; the target is the mean of the selected tokens. Rows
are stored as one array ``X`` of shape ``(n_samples, seq_len, n_features + 1)``
whose last channel is the selection indicator (exactly 0.0 or 1.0), and ``y``
of shape ``(n_samples, n_features)``.

qSA (Sanford, Hsu and Telgarsky, 2023): every position i has its own subset
y_i of q positions, and the target has one row per position, the mean of the
tokens in y_i. Rows are stored as ``X`` of shape ``(n_samples, seq_len,
n_features + n_selected)``: the token, then the indices of its subset (as
floats); ``y`` has shape ``(n_samples, seq_len, n_features)``. Storing indices
keeps the data at O(n N (d + q)) numbers instead of an N x N indicator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state

from ._validation import check_n_selected, check_positive_int

__all__ = [
    "SparseAveragingTask",
    "SparseTokenSelectionTask",
    "make_sparse_averaging",
    "make_sparse_token_selection",
]


@dataclass(frozen=True)
class SparseTokenSelectionTask:
    """The law D_{T,q} of the sparse token selection task.

    Tokens are i.i.d. standard Gaussian vectors; the selected subset S is
    uniform among the subsets of ``n_selected`` positions out of ``seq_len``;
    the target is the mean of the selected tokens.

    Parameters
    ----------
    seq_len : int
        Number of tokens T in a row.
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

    seq_len: int
    n_features: int
    n_selected: int | tuple[int, int]

    def __post_init__(self):
        object.__setattr__(self, "seq_len", check_positive_int(self.seq_len, "seq_len"))
        object.__setattr__(self, "n_features", check_positive_int(self.n_features, "n_features"))
        lo, hi = check_n_selected(self.n_selected, self.seq_len)
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

    def sample(self, n_samples, random_state=None):
        """Draw ``n_samples`` rows as NumPy arrays.

        Parameters
        ----------
        n_samples : int
            Number of rows.
        random_state : int, RandomState instance or None, default=None
            Seed of the draw; an int gives the same rows every time.

        Returns
        -------
        X : ndarray of shape (n_samples, seq_len, n_features + 1)
            Tokens, then the selection indicator in the last channel.
        y : ndarray of shape (n_samples, n_features)
            Mean of the selected tokens of each row.
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = check_random_state(random_state)
        T, d = self.seq_len, self.n_features
        tokens = rng.standard_normal((n_samples, T, d))
        lo, hi = self.q_range
        q = rng.randint(lo, hi + 1, size=n_samples) if hi > lo else np.full(n_samples, lo)
        rank = rng.random_sample((n_samples, T)).argsort(axis=1).argsort(axis=1)
        mask = (rank < q[:, None]).astype(np.float64)
        y = np.einsum("nt,ntd->nd", mask, tokens) / q[:, None]
        X = np.concatenate([tokens, mask[:, :, None]], axis=2)
        return X, y

    def sample_torch(self, n_samples, *, generator, device="cpu", dtype=torch.float32):
        """Draw ``n_samples`` rows as tensors, on ``device``, from ``generator``.

        This is the sampler of online training: the batch is drawn where the
        model trains, with no host-device copy.

        Parameters
        ----------
        n_samples : int
            Number of rows.
        generator : torch.Generator
            Source of randomness, on ``device``.
        device : str or torch.device, default="cpu"
            Device the rows are drawn on.
        dtype : torch.dtype, default=torch.float32
            Floating dtype of the rows.

        Returns
        -------
        X : Tensor of shape (n_samples, seq_len, n_features + 1)
            Tokens, then the selection indicator in the last channel.
        y : Tensor of shape (n_samples, n_features)
            Mean of the selected tokens of each row.
        """
        T, d = self.seq_len, self.n_features
        lo, hi = self.q_range
        # Whole-batch tensor ops only. The tokens are drawn in place in X, one
        # Gaussian per channel (the last is then overwritten by the selection):
        # a 1/(d + 1) larger draw, but no copy of the tokens into X, which cost
        # more. One top-k (or sort) chooses the subsets.
        X = torch.randn(n_samples, T, d + 1, generator=generator, device=device, dtype=dtype)
        keys = torch.rand(n_samples, T, device=device, generator=generator)
        mask = torch.zeros(n_samples, T, device=device, dtype=dtype)
        if hi > lo:
            order = keys.argsort(1)
            q = torch.randint(lo, hi + 1, (n_samples, 1), device=device, generator=generator)
            # rank of each position in the random order; the q first are selected
            rank = torch.empty_like(order).scatter_(
                1, order, torch.arange(T, device=device).expand(n_samples, T)
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


# -- q-sparse averaging ------------------------------------------------------------------
def _subsets_numpy(rng, n, N, q):
    """Indices (n, N, q), sorted: a uniform q-subset of [N] for every (row, position).

    Floyd's algorithm, vectorised over rows and positions: q draws, no N x N
    array (for j = N - q, ..., N - 1 draw t in [0, j]; take j if t is taken).
    """
    out = np.empty((n, N, q), dtype=np.int64)
    for k, j in enumerate(range(N - q, N)):
        t = rng.randint(0, j + 1, size=(n, N))
        taken = (out[..., :k] == t[..., None]).any(axis=-1)
        out[..., k] = np.where(taken, j, t)
    out.sort(axis=-1)
    return out


def _subsets_torch(generator, n, N, q, device):
    """:func:`_subsets_numpy` in torch, drawn on ``device`` from ``generator``."""
    out = torch.empty(n, N, q, dtype=torch.int64, device=device)
    for k, j in enumerate(range(N - q, N)):
        t = torch.randint(0, j + 1, (n, N), generator=generator, device=device)
        taken = (out[..., :k] == t[..., None]).any(dim=-1)
        out[..., k] = torch.where(taken, j, t)
    return out.sort(dim=-1).values


def subset_means(tokens, index):
    """``y[r, i] = mean of tokens[r, j] over j in index[r, i]`` (NumPy or torch).

    Parameters
    ----------
    tokens : array or Tensor of shape (n, N, d)
        The tokens.
    index : integer array or Tensor of shape (n, N, q)
        Each position's subset.

    Returns
    -------
    array or Tensor of shape (n, N, d)
        The q-sparse averages; one gather per subset member, so no
        ``(n, N, q, d)`` array is formed.
    """
    rows = np.arange(len(tokens))[:, None]
    if isinstance(tokens, torch.Tensor):
        rows = torch.as_tensor(rows, device=tokens.device)
    q = index.shape[-1]
    y = tokens[rows, index[..., 0]]
    for k in range(1, q):
        y = y + tokens[rows, index[..., k]]
    return y / q


@dataclass(frozen=True)
class SparseAveragingTask:
    """The law of q-sparse averaging (qSA) with Gaussian tokens.

    Every position i of a row has a token ``z_i``, i.i.d. standard Gaussian,
    and its own subset ``y_i``, uniform among the subsets of ``n_selected``
    positions of the row (drawn independently for every position; ``i`` may
    belong to ``y_i``). The target of position i is the mean of the tokens
    in ``y_i``. Each position is thus a sparse token selection query over
    the same tokens (:class:`SparseTokenSelectionTask`).

    Parameters
    ----------
    seq_len : int
        Number of positions N in a row.
    n_features : int
        Dimension d of a token.
    n_selected : int
        Size q of every subset, at most ``seq_len``.

    Examples
    --------
    >>> from stsq_learn import SparseAveragingTask
    >>> task = SparseAveragingTask(seq_len=16, n_features=8, n_selected=3)
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape
    ((100, 16, 11), (100, 16, 8))
    >>> X[0, 0, 8:]          # the indices of position 0's subset
    array([1., 6., 9.])
    """

    seq_len: int
    n_features: int
    n_selected: int

    def __post_init__(self):
        object.__setattr__(self, "seq_len", check_positive_int(self.seq_len, "seq_len"))
        object.__setattr__(self, "n_features", check_positive_int(self.n_features, "n_features"))
        if isinstance(self.n_selected, (tuple, list, np.ndarray)):
            raise TypeError(
                "n_selected of q-sparse averaging must be one int (every subset has the same "
                f"size q), got {self.n_selected!r}."
            )
        q, _ = check_n_selected(self.n_selected, self.seq_len)
        object.__setattr__(self, "n_selected", q)

    @property
    def trivial_mse(self) -> float:
        """Mean squared error per position of the predictor 0: ``E||y_i||^2 = d / q``."""
        return self.n_features / self.n_selected

    def sample(self, n_samples, random_state=None):
        """Draw ``n_samples`` rows as NumPy arrays.

        Parameters
        ----------
        n_samples : int
            Number of rows.
        random_state : int, RandomState instance or None, default=None
            Seed of the draw; an int gives the same rows every time.

        Returns
        -------
        X : ndarray of shape (n_samples, seq_len, n_features + n_selected)
            Tokens, then each position's subset as indices (sorted, 0-based,
            stored as floats).
        y : ndarray of shape (n_samples, seq_len, n_features)
            The mean of the tokens of each position's subset.
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = check_random_state(random_state)
        N, d, q = self.seq_len, self.n_features, self.n_selected
        tokens = rng.standard_normal((n_samples, N, d))
        index = _subsets_numpy(rng, n_samples, N, q)
        X = np.concatenate([tokens, index.astype(np.float64)], axis=2)
        return X, subset_means(tokens, index)

    def sample_torch(self, n_samples, *, generator, device="cpu", dtype=torch.float32):
        """Draw ``n_samples`` rows as tensors, on ``device``, from ``generator``.

        The sampler of online training: the batch is drawn where the model
        trains. Work and memory O(n N (d + q)).

        Parameters
        ----------
        n_samples : int
            Number of rows.
        generator : torch.Generator
            Source of randomness, on ``device``.
        device : str or torch.device, default="cpu"
            Device the rows are drawn on.
        dtype : torch.dtype, default=torch.float32
            Floating dtype of the rows.

        Returns
        -------
        X : Tensor of shape (n_samples, seq_len, n_features + n_selected)
            Tokens, then each position's subset as indices.
        y : Tensor of shape (n_samples, seq_len, n_features)
            The mean of the tokens of each position's subset.
        """
        N, d, q = self.seq_len, self.n_features, self.n_selected
        X = torch.empty(n_samples, N, d + q, device=device, dtype=dtype)
        X[..., :d] = torch.randn(n_samples, N, d, generator=generator, device=device, dtype=dtype)
        index = _subsets_torch(generator, n_samples, N, q, device)
        X[..., d:] = index.to(dtype)
        return X, subset_means(X[..., :d], index)


def make_sparse_averaging(
    n_samples=1000, seq_len=16, n_features=8, n_selected=3, *, random_state=None
):
    """Generate a q-sparse averaging (qSA) regression problem.

    Each row holds ``seq_len`` i.i.d. standard Gaussian tokens of dimension
    ``n_features``; every position has its own uniformly random subset of
    ``n_selected`` positions, and its target is the average of the tokens in
    that subset (Sanford, Hsu and Telgarsky, NeurIPS 2023).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    seq_len : int, default=16
        Number of positions N per row.
    n_features : int, default=8
        Token dimension d.
    n_selected : int, default=3
        Subset size q (the same for every position).
    random_state : int, RandomState instance or None, default=None
        Seed of the draw; an int gives the same data every time.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, n_features + n_selected)
        ``X[..., :n_features]`` are the tokens and ``X[..., n_features:]``
        the indices of each position's subset: distinct integers in
        ``[0, seq_len)``, sorted, stored as floats.
    y : ndarray of shape (n_samples, seq_len, n_features)
        ``y[r, i] = mean of X[r, j, :n_features] over j in position i's subset``.

    See Also
    --------
    SparseAveragingTask : The same law as an object, with a torch sampler.
    make_sparse_token_selection : The one-query task, STS_q.

    Examples
    --------
    >>> from stsq_learn import make_sparse_averaging
    >>> X, y = make_sparse_averaging(200, seq_len=16, n_features=4,
    ...                              n_selected=2, random_state=0)
    >>> X.shape, y.shape
    ((200, 16, 6), (200, 16, 4))
    """
    task = SparseAveragingTask(seq_len, n_features, n_selected)
    return task.sample(n_samples, random_state=random_state)
