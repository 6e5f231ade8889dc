"""Single-location regression, after Marion, Berthier, Biau and Boyer (ICLR 2025).

A row holds ``seq_len`` tokens in ``R^n_features``; one of them, at a
position ``J0`` the row does not mark, is *relevant*: it is drawn from
``N(sqrt(d / 2) k*, gamma^2 I)`` while the others are standard Gaussian. The
target reads the relevant token along a second direction,
``y = <x_J0, v*> + noise * N(0, 1)``, with ``k*`` and ``v*`` orthonormal.
The position is found only by the token's content: this is the task that
selects by content where the other tasks of the package select by position.
Rows are ``X`` of shape ``(n_samples, seq_len, n_features)`` (tokens only, no
marker channel) and ``y`` of shape ``(n_samples,)``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..._validation import check_random_state_param
from .._token_rows import TokenRowsTask, as_row_targets, as_tokens, check_law_seed, check_scale

__all__ = ["SingleLocationTask", "make_single_location"]

_GAMMA = float(np.sqrt(0.5))  # the paper's gamma^2 = 1/2


@dataclass(frozen=True)
class SingleLocationTask(TokenRowsTask):
    """The law of single-location regression with Gaussian tokens.

    The relevant position ``J0`` is uniform among the ``seq_len`` positions
    (or fixed by ``position``); the relevant token is
    ``x_J0 ~ N(sqrt(d / 2) k*, gamma^2 I)``, every other token ``N(0, I)``;
    the target is ``y = <x_J0, v*> + noise * eps`` with ``eps ~ N(0, 1)``.
    The directions ``k*`` (the key, which tells the relevant token) and
    ``v*`` (the value read from it) are orthonormal and fixed by
    ``random_state``: two tasks with the same fields are the same law.

    Parameters
    ----------
    seq_len : int
        Number of tokens L in a row.
    n_features : int
        Dimension d of a token, at least 2.
    gamma : float, default=sqrt(1/2)
        Standard deviation of the relevant token around its mean.
    noise : float, default=0.0
        Standard deviation of the noise on the target.
    position : int or None, default=None
        The relevant position, the same for every row; None draws it
        uniformly for each row.
    random_state : int, default=0
        Seed of the directions ``k*`` and ``v*``, in ``[0, 2**32 - 1]``.

    Attributes
    ----------
    key_direction : ndarray of shape (n_features,)
        ``k*``, a unit vector.
    value_direction : ndarray of shape (n_features,)
        ``v*``, a unit vector orthogonal to ``k*``.

    Examples
    --------
    >>> from stsq_learn import SingleLocationTask
    >>> task = SingleLocationTask(seq_len=10, n_features=20)
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape
    ((100, 10, 20), (100,))
    >>> round(task.trivial_mse, 3)            # gamma^2 + noise^2
    0.5
    """

    seq_len: int
    n_features: int
    gamma: float = _GAMMA
    noise: float = 0.0
    position: int | None = None
    random_state: int = 0

    name = "single_location"
    title = "single-location regression"
    unmarked = "single-location rows do not mark their relevant token"
    fitted_keys = ()
    targets_1d = True

    def __post_init__(self):
        if isinstance(self.seq_len, (tuple, list, np.ndarray)):
            raise TypeError(
                f"seq_len of single-location regression must be one int, got {self.seq_len!r}."
            )
        self.check_sizes()
        if self.n_features < 2:
            raise ValueError(
                f"n_features must be at least 2 (k* and v* are orthonormal), got {self.n_features}."
            )
        object.__setattr__(self, "gamma", check_scale(self.gamma, "gamma", positive=True))
        object.__setattr__(self, "noise", check_scale(self.noise, "noise", positive=False))
        if self.position is not None:
            if isinstance(self.position, (bool, np.bool_)) or not isinstance(
                self.position, numbers.Integral
            ):
                raise TypeError(f"position must be an int or None, got {self.position!r}.")
            if not 0 <= self.position < self.seq_len:
                raise ValueError(
                    f"position must be in [0, seq_len={self.seq_len}), got {self.position!r}."
                )
            object.__setattr__(self, "position", int(self.position))
        seed = check_law_seed(self.random_state, "random_state of a task", "k* and v*")
        object.__setattr__(self, "random_state", seed)

    # -- the law's constants ---------------------------------------------------------
    @property
    def directions(self):
        """``(k*, v*)``: two orthonormal vectors of ``R^n_features`` from ``random_state``."""
        g = np.random.RandomState(self.random_state).standard_normal((self.n_features, 2))
        q, r = np.linalg.qr(g)
        q = q * np.sign(np.diag(r))  # the QR's sign convention made unique
        return q[:, 0].copy(), q[:, 1].copy()

    @property
    def key_direction(self):
        """``k*``: the direction that tells the relevant token."""
        return self.directions[0]

    @property
    def value_direction(self):
        """``v*``: the direction the target reads from the relevant token."""
        return self.directions[1]

    @property
    def mean_norm(self):
        """``sqrt(d / 2)``: the norm of the relevant token's mean."""
        return float(np.sqrt(self.n_features / 2))

    @property
    def trivial_mse(self) -> float:
        """Mean squared error of the predictor 0: ``E[y^2] = gamma^2 + noise^2``."""
        return self.gamma**2 + self.noise**2

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        L, d = self.seq_len, self.n_features
        k_star, v_star = self.directions
        X = rng.standard_normal((n_samples, L, d))
        if self.position is None:
            j0 = rng.randint(L, size=n_samples)
        else:
            j0 = np.full(n_samples, self.position)
        rows = np.arange(n_samples)
        X[rows, j0] = self.mean_norm * k_star + self.gamma * X[rows, j0]
        y = X[rows, j0] @ v_star + self.noise * rng.standard_normal(n_samples)
        return X, y

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        """Check ``(X, y)`` of ``fit``; return the task they describe and the arrays.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,)
            Targets (a column ``(n_samples, 1)`` is read as 1-D).

        Returns
        -------
        task : SingleLocationTask
            The law's sizes (its other fields at their defaults).
        X, y : ndarray
            As floating arrays.
        """
        X = as_tokens(X, title=cls.title)
        n, L, d = X.shape
        y = as_row_targets(y, n)
        if d < 2:
            raise ValueError(f"X has {d} feature(s) per token; single-location needs >= 2.")
        return cls(L, d), X, y


def make_single_location(
    n_samples=1000,
    seq_len=10,
    n_features=20,
    *,
    gamma=_GAMMA,
    noise=0.0,
    position=None,
    task_seed=0,
    random_state=None,
):
    """Generate a single-location regression problem.

    One token of each row, at a uniformly random position, is drawn from
    ``N(sqrt(d / 2) k*, gamma^2 I)``, the others from ``N(0, I)``; the
    target is ``<x_J0, v*> + noise * N(0, 1)`` (after Marion, Berthier,
    Biau and Boyer, 2025).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of rows.
    seq_len : int, default=10
        Number of tokens L per row.
    n_features : int, default=20
        Token dimension d.
    gamma : float, default=sqrt(1/2)
        Standard deviation of the relevant token.
    noise : float, default=0.0
        Standard deviation of the target's noise.
    position : int or None, default=None
        A fixed relevant position, or None for a uniform one per row.
    task_seed : int, default=0
        Seed of the directions ``k*`` and ``v*`` (the task's ``random_state``),
        in ``[0, 2**32 - 1]``.
    random_state : int, RandomState instance or None, default=None
        Seed of the rows.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, n_features)
        The tokens.
    y : ndarray of shape (n_samples,)
        The targets.

    See Also
    --------
    SingleLocationTask : The same law as an object, with ``k*`` and ``v*``.

    Examples
    --------
    >>> from stsq_learn import make_single_location
    >>> X, y = make_single_location(
    ...     200, seq_len=10, n_features=20, random_state=0)
    >>> X.shape, y.shape
    ((200, 10, 20), (200,))
    """
    task_seed = check_law_seed(task_seed, "task_seed", "k* and v*")
    check_random_state_param(random_state, "make_single_location")
    task = SingleLocationTask(
        seq_len, n_features, gamma=gamma, noise=noise, position=position, random_state=task_seed
    )
    return task.sample(n_samples, random_state=random_state)
