"""q-sparse averaging (qSA) of Sanford, Hsu and Telgarsky (NeurIPS 2023).

Every position i of a row has its own subset y_i of q positions, and the
target has one row per position, the mean of the tokens in y_i. Rows are
stored as ``X`` of shape ``(n_samples, seq_len, n_features + n_selected)``:
the token, then the indices of its subset (as floats); ``y`` has shape
``(n_samples, seq_len, n_features)``. Storing indices keeps the data at
O(n N (d + q)) numbers instead of an N x N indicator. The attention model
asks one query per position (:class:`~stsq_learn.queries.Subsets`); the
fully-connected baseline reads each subset as an N-long 0/1 indicator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..._validation import (
    as_real_array,
    check_n_selected,
    check_positive_int,
    finite_floats,
    finite_targets,
)
from ...nn.queries import Subsets
from ..task import Task

__all__ = [
    "SparseAveragingTask",
    "make_sparse_averaging",
    "shift_averaging",
    "subset_means",
]

_QSA_SHAPE = "(n_samples, seq_len, n_features + n_selected)"


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
        if k == 0:  # nothing is taken yet
            out[..., 0] = t
            continue
        taken = out[..., 0] == t if k == 1 else (out[..., :k] == t[..., None]).any(dim=-1)
        out[..., k] = torch.where(taken, j, t)
    if q == 2:  # a sort of two: their minimum and maximum (the same numbers, faster)
        a, b = out[..., 0], out[..., 1]
        return torch.stack((torch.minimum(a, b), torch.maximum(a, b)), dim=-1)
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
    q = index.shape[-1]
    if isinstance(tokens, torch.Tensor):
        # A gather along the positions (3-5x faster than indexing, the same numbers).
        d = tokens.shape[-1]

        def member(k):
            return torch.gather(tokens, 1, index[..., k].unsqueeze(-1).expand(-1, -1, d))

    else:
        rows = np.arange(len(tokens))[:, None]

        def member(k):
            return tokens[rows, index[..., k]]

    y = member(0)
    for k in range(1, q):
        y = y + member(k)
    return y / q


# -- the contract's checks -----------------------------------------------------------
def _averaging_3d(value, name, shape, why=""):
    """``value`` as a 3-D non-empty real array, or raise naming ``shape`` and its own."""
    arr = as_real_array(value, name, f"{shape} for {name}")
    if arr.ndim != 3 or 0 in arr.shape:
        raise ValueError(
            f"{name} of q-sparse averaging must be 3-D and non-empty, {shape}{why}, got an "
            f"array of shape {arr.shape}."
        )
    return arr


def _check_subset_channels(X, n_features, *, name="X"):
    """Raise unless rows (3-D, real) of ``n_features`` token features leave 1..N index channels."""
    _, N, c = X.shape
    q = c - n_features
    if q < 1:
        raise ValueError(
            f"{name} has {c} channels on its last axis, but the tokens have n_features="
            f"{n_features}: no channel is left for the subsets' indices (need "
            f"n_features + n_selected with n_selected >= 1)."
        )
    if q > N:
        raise ValueError(
            f"{name} gives every position a subset of n_selected={q} indices (its last axis "
            f"{c} minus n_features={n_features}), more than the seq_len={N} positions."
        )


def _check_subsets(X, n_features, *, name="X"):
    """Validate the values of rows that passed :func:`_check_subset_channels`; return floats."""
    N, c = X.shape[1:]
    q = c - n_features
    arr = finite_floats(X, name)
    index = arr[..., n_features:]
    problems = (
        (index != np.round(index), "is not an integer"),
        ((index < 0) | (index >= N), f"is outside [0, {N})"),
    )
    for bad, what in problems:
        if bad.any():
            i, t, k = np.argwhere(bad)[0]
            raise ValueError(
                f"Subset indices must be integers in [0, seq_len={N}): "
                f"{name}[{i}, {t}, {n_features + k}] = {float(index[i, t, k])!r} {what}."
            )
    ordered = np.sort(index, axis=-1)
    repeated = (ordered[..., 1:] == ordered[..., :-1]).any(axis=-1)
    if repeated.any():
        i, t = np.argwhere(repeated)[0]
        raise ValueError(
            f"The subset of position {t} of row {i} repeats an index: "
            f"{name}[{i}, {t}, {n_features}:] = {index[i, t].tolist()}; a subset holds "
            f"n_selected={q} distinct positions."
        )
    return arr


def check_averaging_data(X, y):
    """``(X, y)`` of q-sparse averaging checked together: y gives n_features, X the subsets."""
    X = _averaging_3d(X, "X", _QSA_SHAPE)  # X's type and shape first, as for the selectors
    y = _averaging_3d(y, "y", "(n_samples, seq_len, n_features)", " (a row per position)")
    y = finite_targets(y, "y")
    _check_subset_channels(X, y.shape[2])
    X = _check_subsets(X, y.shape[2])
    if X.shape[:2] != y.shape[:2]:
        raise ValueError(
            f"y has shape {y.shape}, which does not match X of shape {X.shape}: y needs "
            "one row of n_features numbers per row and position of X."
        )
    return X, y


@dataclass(frozen=True)
class SparseAveragingTask(Task):
    """The law of q-sparse averaging (qSA) with Gaussian tokens.

    Every position i of a row has a token ``z_i``, i.i.d. standard Gaussian,
    and its own subset ``y_i``, uniform among the subsets of ``n_selected``
    positions of the row (drawn independently for every position; ``i`` may
    belong to ``y_i``). The target of position i is the mean of the tokens
    in ``y_i``. Each position is thus a sparse token selection query over
    the same tokens (:class:`SparseTokenSelectionTask`). :meth:`sample`
    returns ``X`` of shape ``(n_samples, seq_len, n_features + n_selected)``
    (tokens, then each position's subset as sorted 0-based indices stored as
    floats) and ``y`` of shape ``(n_samples, seq_len, n_features)``.

    Parameters
    ----------
    seq_len : int or tuple of (int, int)
        Number of positions N in a row; a pair ``(N_min, N_max)`` is a range
        of lengths, one drawn per call of :meth:`sample` (per online batch).
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

    seq_len: int | tuple[int, int]
    n_features: int
    n_selected: int

    name = "averaging"
    fitted_keys = ("n_selected",)
    structure = Subsets
    isotropic_floor_applies = True

    def __post_init__(self):
        self.check_sizes()
        if isinstance(self.n_selected, (tuple, list, np.ndarray)):
            raise TypeError(
                "n_selected of q-sparse averaging must be one int (every subset has the same "
                f"size q), got {self.n_selected!r}."
            )
        q, _ = check_n_selected(self.n_selected, self.length_range[0])
        object.__setattr__(self, "n_selected", q)

    @property
    def trivial_mse(self) -> float:
        """Mean squared error per position of the predictor 0: ``E||y_i||^2 = d / q``."""
        return self.n_features / self.n_selected

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        N, d, q = self.seq_len, self.n_features, self.n_selected
        tokens = rng.standard_normal((n_samples, N, d))
        index = _subsets_numpy(rng, n_samples, N, q)
        X = np.concatenate([tokens, index.astype(np.float64)], axis=2)
        return X, subset_means(tokens, index)

    def _sample_torch(self, n_samples, generator, device, dtype):
        # Work and memory O(n N (d + q)).
        N, d, q = self.seq_len, self.n_features, self.n_selected
        X = torch.empty(n_samples, N, d + q, device=device, dtype=dtype)
        X[..., :d] = torch.randn(n_samples, N, d, generator=generator, device=device, dtype=dtype)
        index = _subsets_torch(generator, n_samples, N, q, device)
        X[..., d:] = index.to(dtype)
        return X, subset_means(X[..., :d], index)

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        X, y = check_averaging_data(X, y)
        d = y.shape[2]
        return cls(X.shape[1], d, X.shape[2] - d), X, y

    @classmethod
    def from_fitted(cls, seq_len, n_features, state):
        if state.get("n_selected") is None:
            raise ValueError("the fitted state of an averager must record n_selected.")
        return cls(seq_len, n_features, state["n_selected"])

    def check_rows(self, X, owner="the model"):
        X = _averaging_3d(X, "X", _QSA_SHAPE)
        _check_subset_channels(X, self.n_features)
        expected = self.n_features + self.n_selected
        if X.shape[2] != expected:  # before the values: their meaning depends on the channels
            raise ValueError(
                f"X has {X.shape[2]} channels per position, but {owner} was "
                f"fitted on tokens of n_features={self.n_features} with subsets of "
                f"n_selected={self.n_selected}: {expected} channels."
            )
        return _check_subsets(X, self.n_features)

    def output_shape(self, n_samples, seq_len):
        return (n_samples, seq_len, self.n_features)

    def check_targets(self, y, X):
        y = _averaging_3d(y, "y", "(n_samples, seq_len, n_features)", " (a row per position)")
        y = finite_targets(y, "y")
        shape = self.output_shape(*X.shape[:2])
        if y.shape != shape:
            raise ValueError(
                f"y must have shape (n_samples, seq_len, n_features) = {shape} to match X, "
                f"got shape {y.shape}."
            )
        return y

    # -- the length shift -----------------------------------------------------------
    def shift(self, X, y, seq_len, random_state=None):
        # Rows can only be lengthened: see shift_averaging (the docstring is the protocol's).
        seq_len = check_positive_int(seq_len, "seq_len")
        n, N, c = X.shape
        d = y.shape[2]
        if seq_len < N:
            raise ValueError(
                f"q-sparse averaging rows can only be lengthened: seq_len={seq_len} < N={N} "
                "would delete tokens that some positions average."
            )
        rng = check_random_state(random_state)
        rows = np.arange(n)[:, None]
        keys = rng.random_sample((n, seq_len))
        slots = np.sort(np.argpartition(keys, N - 1, axis=1)[:, :N], axis=1)  # new place of t
        index = np.empty((n, seq_len, c - d), dtype=np.int64)
        index[:] = _subsets_numpy(rng, n, seq_len, c - d)
        old = X[..., d:].astype(np.int64)
        flat = np.take_along_axis(slots, old.reshape(n, -1), axis=1)
        index[rows, slots] = flat.reshape(old.shape)
        tokens = rng.standard_normal((n, seq_len, d)).astype(X.dtype, copy=False)
        tokens[rows, slots] = X[..., :d]
        y_out = subset_means(tokens, index).astype(y.dtype, copy=False)
        y_out[rows, slots] = y
        return np.concatenate([tokens, index.astype(X.dtype)], axis=2), y_out

    # -- what the models read --------------------------------------------------------
    @classmethod
    def queries_per_row(cls, seq_len):
        return seq_len

    @property
    def largest_query_of_law(self):
        return self.n_selected

    def largest_query(self, X):
        return self.n_selected

    def query_sizes(self, X):
        return torch.full((len(X),), float(X.shape[2] - self.n_features), device=X.device)

    def fcn_inputs(self, X):
        # Each subset as an N-long 0/1 indicator (the form of the selection channel;
        # raw indices would make the net decode integers).
        n, N, _ = X.shape
        d = self.n_features
        indicator = torch.zeros(n, N, N, device=X.device, dtype=X.dtype)
        indicator.scatter_(2, X[..., d:].long(), 1.0)
        return torch.cat([X[..., :d], indicator], dim=2).flatten(1)

    def fcn_input_size(self):
        return self.seq_len * (self.n_features + self.seq_len)

    def fcn_elements_per_row(self, width):
        # The input with its indicators, and the first layer.
        return self.seq_len * (self.n_features + 2 * self.seq_len) + width


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


def shift_averaging(X, y, seq_len, random_state=None):
    """Move q-sparse averaging rows to a longer length ``seq_len``, keeping every target.

    The ``seq_len - N`` new positions are inserted at uniformly random places
    (the original positions keep their order), each with a fresh standard
    Gaussian token and its own uniform random subset of the ``seq_len``
    positions; the original subsets are renumbered to where their tokens now
    stand, so the original targets stay exact. Every subset of the result is
    then a uniform subset of the longer row, as in data drawn at
    ``seq_len``. Rows cannot be shortened: every token may belong to some
    subset.

    Parameters
    ----------
    X : array-like of shape (n_samples, N, n_features + n_selected)
        Tokens, then each position's subset as indices.
    y : array-like of shape (n_samples, N, n_features)
        Their targets.
    seq_len : int
        The new length ``N' >= N``.
    random_state : int, RandomState instance or None, default=None
        Seed of the new positions, tokens and subsets.

    Returns
    -------
    X_shifted : ndarray of shape (n_samples, seq_len, n_features + n_selected)
        The longer rows (new arrays; the inputs are never modified).
    y_shifted : ndarray of shape (n_samples, seq_len, n_features)
        The original targets at their new positions, the exact averages at
        the new ones.

    Raises
    ------
    ValueError
        If the data break the contract of
        :func:`~stsq_learn.make_sparse_averaging`, or ``seq_len < N``.

    Examples
    --------
    >>> from stsq_learn import make_sparse_averaging, shift_averaging
    >>> X, y = make_sparse_averaging(5, seq_len=8, n_features=2, n_selected=3,
    ...                              random_state=0)
    >>> X_long, y_long = shift_averaging(X, y, 32, random_state=0)
    >>> X_long.shape, y_long.shape
    ((5, 32, 5), (5, 32, 2))
    """
    task, X, y = SparseAveragingTask.from_data(X, y)
    return task.shift(X, y, seq_len, random_state)
