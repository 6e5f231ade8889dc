"""q-sparse token retrieval, after Mousavi-Hosseini, Sanford, Wu and Erdogdu (NeurIPS 2025).

A row names q distinct positions in a given order (role j points at
position ``t_j``); the target is the ordered concatenation of the named
tokens, ``[x_{t_1} ; ... ; x_{t_q}]`` in ``R^(q d)``. Their class of tasks
takes any function of the q retrieved tokens; this instance takes the
concatenation itself, which scores every retrieval and which a linear
readout of the heads computes. Rows are stored as ``X`` of shape
``(n_samples, seq_len, n_features + 1)`` whose last channel is the role
channel (0.0: not named; j: the position of role j; sparse token selection is
the case where every named position has role 1), and ``y`` of shape
``(n_samples, n_selected * n_features)``. The attention model asks one query
per row whose slots hold the named positions' encodings in role order
(:class:`~stsq_learn.queries.Slots`); the fully-connected baseline reads the
tokens and each position's role as a one-hot vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..._validation import (
    as_real_array,
    check_marker_channel,
    check_n_selected,
    check_target_shape,
    finite_floats,
    finite_targets,
    missing_marker_hint,
)
from ...nn.queries import Slots
from .._shift import move_marked_rows
from ..task import Task

__all__ = ["SparseRetrievalTask", "make_sparse_retrieval"]

_SHAPE = "(n_samples, seq_len, n_features + 1)"


def _check_roles(X, n_selected, *, name="X"):
    """Rows (3-D, real) whose role channel names each of roles 1..q exactly once; as floats."""
    arr = finite_floats(X, name)
    roles = arr[..., -1]
    bad = (roles != np.round(roles)) | (roles < 0) | (roles > n_selected)
    if bad.any():
        i, t = np.argwhere(bad)[0]
        hint = missing_marker_hint((roles == np.round(roles)).any(), name, "role channel")
        raise ValueError(
            f"The role channel {name}[..., -1] must hold integers in [0, n_selected="
            f"{n_selected}] (0: not named, j: the position of role j); "
            f"{name}[{i}, {t}, -1] = {float(roles[i, t])!r}.{hint}"
        )
    counts = np.stack([(roles == j).sum(axis=1) for j in range(1, n_selected + 1)], axis=1)
    wrong = counts != 1
    if wrong.any():
        i, j = np.argwhere(wrong)[0]
        raise ValueError(
            f"Every row of {name} must name each role 1..{n_selected} exactly once; row {i} "
            f"names role {j + 1} {counts[i, j]} times."
        )
    return arr


def _are_roles(values):
    return bool(((values >= 0) & (values == np.round(values))).all())


def _as_rows(X):
    """``X`` as a 3-D non-empty real array with a role channel and at least one feature."""
    arr = as_real_array(X, "X", f"{_SHAPE} for X")
    if arr.ndim != 3 or 0 in arr.shape:
        raise ValueError(
            f"X of q-sparse token retrieval must be 3-D and non-empty, {_SHAPE}, got an "
            f"array of shape {arr.shape}."
        )
    if arr.shape[2] < 2:
        raise ValueError(
            f"X has {arr.shape[2]} channel(s) on its last axis; need the token features "
            "and the role channel (n_features + 1 >= 2)."
        )
    return arr


@dataclass(frozen=True)
class SparseRetrievalTask(Task):
    """The law of q-sparse token retrieval with Gaussian tokens.

    Tokens are i.i.d. standard Gaussian vectors; the named positions
    ``t_1 .. t_q`` are a uniformly random ordered tuple of distinct
    positions; the target is ``[x_{t_1} ; ... ; x_{t_q}]``. :meth:`sample`
    returns ``X`` of shape ``(n_samples, seq_len, n_features + 1)`` (tokens,
    then the role channel: 0.0, or j at position ``t_j``) and ``y`` of shape
    ``(n_samples, n_selected * n_features)``.

    A one-layer attention model learns it with a sample size almost
    independent of the length if and only if it has at least q heads
    (Mousavi-Hosseini, Sanford, Wu and Erdogdu, 2025): each head retrieves
    one role. With H < q heads, the best linear readout of H averages leaves
    a relative error of at least ``1 - H / q``.

    Parameters
    ----------
    seq_len : int or tuple of (int, int)
        Number of tokens T in a row; a pair ``(T_min, T_max)`` is a range of
        lengths, one drawn per call of :meth:`sample` (per online batch).
    n_features : int
        Dimension d of a token.
    n_selected : int
        Number q of named positions (roles), at most ``seq_len``.

    Examples
    --------
    >>> from stsq_learn import SparseRetrievalTask
    >>> task = SparseRetrievalTask(seq_len=16, n_features=4, n_selected=3)
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape
    ((100, 16, 5), (100, 12))
    >>> roles = X[0, :, -1]
    >>> sorted(roles[roles > 0].tolist())   # roles 1, 2, 3, once each
    [1.0, 2.0, 3.0]
    """

    seq_len: int | tuple[int, int]
    n_features: int
    n_selected: int

    name = "retrieval"
    fitted_keys = ("n_selected",)
    structure = Slots
    readout_required = True

    def __post_init__(self):
        self.check_sizes()
        if isinstance(self.n_selected, (tuple, list, np.ndarray)):
            raise TypeError(
                "n_selected of q-sparse token retrieval must be one int (the number of "
                f"roles), got {self.n_selected!r}."
            )
        q, _ = check_n_selected(self.n_selected, self.length_range[0])
        object.__setattr__(self, "n_selected", q)

    @property
    def trivial_mse(self) -> float:
        """Mean squared error of the predictor 0: ``E||y||^2 = q d``."""
        return float(self.n_selected * self.n_features)

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        T, d, q = self.seq_len, self.n_features, self.n_selected
        tokens = rng.standard_normal((n_samples, T, d))
        named = rng.random_sample((n_samples, T)).argsort(axis=1)[:, :q]  # t_1 .. t_q
        rows = np.arange(n_samples)[:, None]
        roles = np.zeros((n_samples, T))
        roles[rows, named] = np.arange(1, q + 1)
        y = tokens[rows, named].reshape(n_samples, q * d)
        return np.concatenate([tokens, roles[:, :, None]], axis=2), y

    def _sample_torch(self, n_samples, generator, device, dtype):
        T, d, q = self.seq_len, self.n_features, self.n_selected
        X = torch.randn(n_samples, T, d + 1, generator=generator, device=device, dtype=dtype)
        keys = torch.rand(n_samples, T, device=device, generator=generator)
        named = keys.topk(q, dim=1, largest=False).indices  # a uniform ordered q-tuple
        roles = torch.arange(1, q + 1, device=device, dtype=dtype).expand(n_samples, q)
        X[..., d] = 0.0
        X[..., d].scatter_(1, named, roles)
        y = X[..., :d].gather(1, named.unsqueeze(-1).expand(n_samples, q, d))
        return X, y.reshape(n_samples, q * d)

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        X = _as_rows(X)
        n, T, c = X.shape
        d = c - 1
        y_arr = as_real_array(y, "y", f"(n_samples, n_selected * {d}) for y")
        if y_arr.ndim == 1 and d == 1:  # one role of one feature: a 1-D y, as scikit-learn's
            y_arr = y_arr[:, None]
        if y_arr.ndim != 2 or y_arr.shape[0] != n or y_arr.shape[1] % d or not y_arr.shape[1]:
            raise ValueError(
                f"y must have shape (n_samples, n_selected * n_features) = ({n}, q * {d}) "
                f"to match X (the named tokens side by side), got shape {y_arr.shape}."
            )
        task = cls(T, d, y_arr.shape[1] // d)
        return task, _check_roles(X, task.n_selected), finite_targets(y_arr, "y")

    def check_rows(self, X, owner="the model"):
        X = _as_rows(X)
        check_marker_channel(X, self.n_features, owner, "role channel", _are_roles)
        return _check_roles(X, self.n_selected)

    def output_shape(self, n_samples, seq_len):
        return (n_samples, self.n_selected * self.n_features)

    def check_targets(self, y, X):
        return check_target_shape(y, self.output_shape(*X.shape[:2]))

    # -- the length shift -----------------------------------------------------------
    def shift(self, X, y, seq_len, random_state=None):
        marked = X[..., -1] != 0.0
        return move_marked_rows(X, marked, seq_len, random_state, "names", "named"), y

    # -- what the models read --------------------------------------------------------
    @property
    def n_slots(self):
        return self.n_selected

    @property
    def n_outputs(self):
        return self.n_selected * self.n_features

    @property
    def largest_query_of_law(self):
        return self.n_selected

    def largest_query(self, X):
        return self.n_selected

    def queries(self, X):
        n, T = X.shape[:2]
        roles = X[..., -1].long()
        where = torch.zeros(n, self.n_selected + 1, dtype=torch.long, device=X.device)
        where.scatter_(1, roles, torch.arange(T, device=X.device).expand(n, T))
        return Slots(X, self.n_features, where[:, 1:])  # column 0 (unnamed) is dropped

    def fcn_inputs(self, X):
        # Each position's role as a one-hot vector of q (raw role numbers would make the
        # net decode integers).
        n, T, _ = X.shape
        d, q = self.n_features, self.n_selected
        onehot = torch.zeros(n, T, q + 1, device=X.device, dtype=X.dtype)
        onehot.scatter_(2, X[..., d:].long(), 1.0)
        return torch.cat([X[..., :d], onehot[..., 1:]], dim=2).flatten(1)

    def fcn_input_size(self):
        return self.seq_len * (self.n_features + self.n_selected)


def make_sparse_retrieval(
    n_samples=1000, seq_len=16, n_features=4, n_selected=2, *, random_state=None
):
    """Generate a q-sparse token retrieval regression problem.

    Each row holds ``seq_len`` i.i.d. standard Gaussian tokens of dimension
    ``n_features`` and names ``n_selected`` distinct positions in a random
    order (roles 1..q); the target is the named tokens side by side, in
    role order (after Mousavi-Hosseini, Sanford, Wu and Erdogdu, 2025).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    seq_len : int, default=16
        Number of tokens T per row.
    n_features : int, default=4
        Token dimension d.
    n_selected : int, default=2
        Number q of named positions (roles).
    random_state : int, RandomState instance or None, default=None
        Seed of the draw; an int gives the same data every time.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, n_features + 1)
        ``X[..., :-1]`` are the tokens and ``X[..., -1]`` the role channel:
        0.0 for a position no role names, j for the position of role j.
    y : ndarray of shape (n_samples, n_selected * n_features)
        ``y[i, (j - 1) d : j d]`` is the token at the position of role j.

    See Also
    --------
    SparseRetrievalTask : The same law as an object, with a torch sampler.

    Examples
    --------
    >>> from stsq_learn import make_sparse_retrieval
    >>> X, y = make_sparse_retrieval(200, seq_len=16, n_features=4,
    ...                              n_selected=2, random_state=0)
    >>> X.shape, y.shape
    ((200, 16, 5), (200, 8))
    """
    task = SparseRetrievalTask(seq_len, n_features, n_selected)
    return task.sample(n_samples, random_state=random_state)
