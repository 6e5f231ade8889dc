"""In-context linear regression, after Zhang, Frei and Bartlett (JMLR 25(49), 2024).

A *prompt* holds ``n_examples`` (M) labelled examples of a linear function
and a query: ``M + 1`` tokens ``[x_i; y_i]`` in ``R^(d+1)``, the last one
``[x_q; 0]``. Each prompt has its own weights ``w ~ N(0, I_d)``; the
covariates ``x_i, x_q`` are i.i.d. ``N(0, Lambda)`` and the labels
``y_i = <w, x_i> + noise * eps_i``. The target is the query's clean label
``<w, x_q>``: what the theory's error is measured against. A model must read
``w`` from the examples of each prompt: nothing is shared between prompts
but the law.

Rows are ``X`` of shape ``(n_prompts, n_examples + 1, n_features + 1)`` and
``y`` of shape ``(n_prompts,)``. The length of a row is ``M + 1``: the
length shift changes the number of examples.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..._validation import (
    as_real_array,
    check_positive_int,
    check_random_state_param,
    finite_floats,
)
from .._token_rows import TokenRowsTask, as_row_targets, check_scale

__all__ = [
    "InContextRegressionTask",
    "check_covariance",
    "least_squares",
    "make_in_context_regression",
]

SHAPE = "(n_prompts, n_examples + 1, n_features + 1)"
_TITLE = "in-context regression"


def check_covariance(covariance, name="covariance", n_features=None):
    """A covariance of the covariates: a symmetric positive semi-definite matrix, or variances.

    Parameters
    ----------
    covariance : array-like of shape (d, d) or (d,)
        A matrix, or a vector of variances (a diagonal matrix).
    name : str, default="covariance"
        The argument's name, for the messages.
    n_features : int or None, default=None
        The dimension d it must have; None: any.

    Returns
    -------
    matrix : ndarray of shape (d, d)
        The covariance as a float64 matrix (symmetrised exactly).

    Raises
    ------
    ValueError, TypeError
        If it is not real, finite, 1-D or square 2-D, of dimension
        ``n_features``, symmetric, positive semi-definite, or if it is 0.
    """
    arr = finite_floats(as_real_array(covariance, name, f"(d, d) or (d,) for {name}"), name)
    arr = arr.astype(np.float64)
    if arr.ndim == 1:
        bad = np.flatnonzero(arr < 0)
        if bad.size:
            raise ValueError(
                f"{name} as a vector holds variances, which are >= 0; got "
                f"{name}[{bad[0]}] = {float(arr[bad[0]])!r}."
            )
        arr = np.diag(arr)
    elif arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(
            f"{name} must be a square matrix (d, d) or a vector of d variances, got an array "
            f"of shape {arr.shape}."
        )
    d = len(arr)
    if d == 0:
        raise ValueError(f"{name} is empty; it needs at least one dimension.")
    if n_features is not None and d != n_features:
        raise ValueError(
            f"{name} is for {d} features, but n_features={n_features}: it must be "
            f"({n_features}, {n_features}) or hold {n_features} variances."
        )
    scale = float(np.abs(arr).max())
    asym = np.abs(arr - arr.T)
    if asym.max() > 1e-10 * scale:
        i, j = np.unravel_index(int(np.argmax(asym)), asym.shape)
        raise ValueError(
            f"{name} must be symmetric: {name}[{i}, {j}] = {float(arr[i, j])!r} but "
            f"{name}[{j}, {i}] = {float(arr[j, i])!r}."
        )
    arr = (arr + arr.T) / 2
    lowest = float(np.linalg.eigvalsh(arr)[0])
    if lowest < -1e-10 * scale:
        raise ValueError(
            f"{name} must be positive semi-definite (a covariance), but its smallest "
            f"eigenvalue is {lowest:.6g}."
        )
    if scale == 0:
        raise ValueError(f"{name} is 0: the covariates would all be 0.")
    return arr


def _as_field(covariance, name, n_features):
    """``covariance`` as a task field: None, a tuple of variances or a tuple of rows."""
    if covariance is None:
        return None
    matrix = check_covariance(covariance, name, n_features)
    if np.ndim(covariance) == 1:
        return tuple(float(v) for v in np.diag(matrix))
    return tuple(tuple(float(v) for v in row) for row in matrix)


def _factor(matrix):
    """``F`` with ``F F^T = matrix``: None for the identity, a vector for a diagonal matrix,
    else V diag(sqrt(eigenvalues)) of its eigendecomposition."""
    diagonal = np.diag(matrix)
    if np.count_nonzero(matrix - np.diag(diagonal)) == 0:
        return None if np.all(diagonal == 1) else np.sqrt(diagonal)
    values, vectors = np.linalg.eigh(matrix)
    return vectors * np.sqrt(np.clip(values, 0, None))


def _apply(factor, z, xp, where):
    """Covariates ``F z`` from standard normal ``z`` (rows on the last axis)."""
    if factor is None:
        return z
    factor = xp.asarray(factor, **where) if xp is torch else factor
    return z * factor if factor.ndim == 1 else z @ factor.T


def least_squares(x, labels, alpha=0.0):
    """Each prompt's ``argmin_w ||labels - x w||^2 + alpha ||w||^2``, batched over prompts.

    One SVD of every prompt's examples: the minimum-norm solution at
    ``alpha=0`` (singular values below NumPy's ``pinv`` cutoff,
    ``1e-15 * max(M, d)`` times the largest, count as 0), ridge otherwise.

    Parameters
    ----------
    x : ndarray of shape (n, M, d)
        The examples' covariates.
    labels : ndarray of shape (n, M)
        Their labels.
    alpha : float, default=0.0
        The ridge penalty.

    Returns
    -------
    w : ndarray of shape (n, d)
        The weights.
    singular_values : ndarray of shape (n, min(M, d))
        Of each prompt's ``x``, largest first.
    """
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    if alpha > 0:  # a float: an int past float64's range would make an object array
        inverse = s / (s * s + float(min(alpha, np.finfo(np.float64).max)))
    else:
        cutoff = 1e-15 * max(x.shape[1:]) * s[:, :1]
        inverse = np.divide(1.0, s, out=np.zeros_like(s), where=s > cutoff)
    return np.einsum("nkd,nk->nd", vt, inverse * np.einsum("nmk,nm->nk", u, labels)), s


def as_prompts(X, name="X"):
    """``X`` as prompts: 3-D finite reals ``(n, M + 1, d + 1)``, M >= 1, the query's label 0.

    A prompt is ``M`` tokens ``[x_i; y_i]``, then the query ``[x_q; 0]``;
    ``name`` names ``X`` in the messages. Returns the input itself where it is
    already a real array.
    """
    arr = as_real_array(X, name, f"{SHAPE} for {name}")
    if arr.ndim != 3:
        raise ValueError(
            f"{name} must be 3-D, {SHAPE}, for {_TITLE}, got an array of shape {arr.shape}."
        )
    n, T, c = arr.shape
    if n == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need at least one prompt.")
    if T < 2:
        raise ValueError(
            f"{name} has {T} token(s) per prompt, so n_examples = {T - 1}: a prompt is "
            "n_examples >= 1 labelled examples [x_i; y_i] then the query [x_q; 0], at least "
            "2 tokens."
        )
    if c < 2:
        raise ValueError(
            f"{name} has {c} channel(s) per token; a token is [x; y], n_features + 1 >= 2 "
            "channels (the covariates, then the label)."
        )
    arr = finite_floats(arr, name)
    query_labels = arr[:, -1, -1]
    if np.any(query_labels != 0):
        i = int(np.flatnonzero(query_labels)[0])
        raise ValueError(
            f"{name}[{i}, -1, -1] = {float(query_labels[i])!r}: the last token of a prompt is the "
            "query [x_q; 0], and its label slot must be 0 (a label there gives the answer away)."
        )
    return arr


@dataclass(frozen=True)
class InContextRegressionTask(TokenRowsTask):
    """The law of in-context linear regression: prompts of labelled examples, then a query.

    Each prompt draws its own weights ``w ~ N(0, I_d)``; its ``M`` examples
    have covariates ``x_i ~ N(0, Lambda)`` and labels ``y_i = <w, x_i> +
    noise * eps_i`` (``eps_i ~ N(0, 1)``); its query has ``x_q ~ N(0,
    Lambda_q)`` (``Lambda_q = Lambda`` unless ``query_covariance`` is given).
    A prompt is the ``M + 1`` tokens ``[x_1; y_1], ..., [x_M; y_M], [x_q;
    0]``; its target is the query's clean label ``<w, x_q>`` (no noise: the
    error the theory measures; a noisy label's error adds ``noise**2``).

    Parameters
    ----------
    seq_len : int or (int, int)
        Tokens per prompt, ``M + 1`` (at least 2); a range draws every batch
        of online training at one length of it.
    n_features : int
        Dimension d of the covariates.
    covariance : array-like of shape (d, d) or (d,), default=None
        ``Lambda``: a symmetric positive semi-definite matrix, or a vector
        of variances (a diagonal one); None is the identity.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        ``Lambda_q``, the query's covariance (a query shift); None:
        ``Lambda``.
    noise : float, default=0.0
        Standard deviation of the noise on the examples' labels.

    Attributes
    ----------
    n_examples : int or (int, int)
        ``M = seq_len - 1``.
    covariance_matrix, query_covariance_matrix : ndarray of shape (d, d)
        ``Lambda`` and ``Lambda_q`` as matrices.

    See Also
    --------
    make_in_context_regression : Draw prompts from this law.
    LinearAttentionRegressor : The linear self-attention layer the theory is about.

    Notes
    -----
    The data contract: ``X`` of shape ``(n_prompts, n_examples + 1,
    n_features + 1)``, finite, with ``n_examples >= 1`` and the query's label
    slot ``X[:, -1, -1]`` equal to 0; ``y`` of shape ``(n_prompts,)``,
    finite. Models fitted on it predict at any ``n_examples``.

    The covariate shift of the theory (every covariate scaled by ``c``,
    which the trained layer does not tolerate) is :meth:`scaled`; a query
    shift is ``query_covariance``; both are laws to draw prompts from.
    :meth:`shift` moves prompts to another number of examples.

    Examples
    --------
    >>> from stsq_learn import InContextRegressionTask
    >>> task = InContextRegressionTask(seq_len=21, n_features=5)   # M = 20
    >>> X, y = task.sample(100, random_state=0)
    >>> X.shape, y.shape, task.n_examples
    ((100, 21, 6), (100,), 20)
    >>> task.trivial_mse                    # E <w, x_q>^2 = tr(Lambda_q)
    5.0
    >>> task.scaled(2.0).trivial_mse       # covariates scaled by 2
    20.0
    """

    seq_len: int
    n_features: int
    covariance: tuple | None = None
    query_covariance: tuple | None = None
    noise: float = 0.0

    name = "in_context"
    title = _TITLE
    unmarked = "a prompt's examples are all alike"
    fitted_keys = ("covariance", "query_covariance", "noise")
    targets_1d = True

    def __post_init__(self):
        self._check_sizes()
        lo, _ = self.length_range
        if lo < 2:
            raise ValueError(
                f"seq_len must be at least 2 (n_examples >= 1 examples, then the query), got "
                f"{self.seq_len!r}."
            )
        d = self.n_features
        for name in ("covariance", "query_covariance"):
            object.__setattr__(self, name, _as_field(getattr(self, name), name, d))
        object.__setattr__(self, "noise", check_scale(self.noise, "noise", positive=False))

    # -- the law's constants ---------------------------------------------------------
    @property
    def n_examples(self):
        """``M = seq_len - 1``: the labelled examples of a prompt (a range's, for a range)."""
        lo, hi = self.length_range
        return lo - 1 if lo == hi else (lo - 1, hi - 1)

    def at_examples(self, n_examples):
        """This law with prompts of ``n_examples`` examples (``seq_len = n_examples + 1``).

        Parameters
        ----------
        n_examples : int
            The new M, at least 1.

        Returns
        -------
        task : InContextRegressionTask
            The law at ``seq_len = n_examples + 1``, every other field kept.
        """
        return self.at_length(check_positive_int(n_examples, "n_examples") + 1)

    @property
    def covariance_matrix(self):
        """``Lambda`` as a ``(d, d)`` matrix."""
        if self.covariance is None:
            return np.eye(self.n_features)
        return check_covariance(self.covariance, "covariance", self.n_features)

    @property
    def query_covariance_matrix(self):
        """``Lambda_q`` as a ``(d, d)`` matrix (``Lambda`` when ``query_covariance`` is None)."""
        if self.query_covariance is None:
            return self.covariance_matrix
        return check_covariance(self.query_covariance, "query_covariance", self.n_features)

    def scaled(self, scale):
        """This law with every covariate (examples, query) scaled by ``scale``: a covariate shift.

        The covariances become ``scale**2 Lambda`` and ``scale**2 Lambda_q``;
        the weights and the noise stay. The trained layer's prediction then
        has slope ``scale**2 / g`` on the target (identity ``Lambda``;
        :func:`in_context_slope`), while least squares is unaffected.

        Parameters
        ----------
        scale : float
            ``c > 0``.

        Returns
        -------
        task : InContextRegressionTask
            The shifted law.
        """
        c2 = check_scale(scale, "scale", positive=True) ** 2
        fields = {"covariance": c2 * self.covariance_matrix}
        if self.query_covariance is not None:
            fields["query_covariance"] = c2 * self.query_covariance_matrix
        return dataclasses.replace(self, **fields)

    @property
    def trivial_mse(self):
        """Mean squared error of the predictor 0: ``E <w, x_q>^2 = tr(Lambda_q)``."""
        return float(np.trace(self.query_covariance_matrix))

    @functools.cached_property
    def _factors(self):
        """Factors ``F`` (``F F^T = Lambda``) of the examples' and the query's covariates."""
        return _factor(self.covariance_matrix), _factor(self.query_covariance_matrix)

    # -- the law ---------------------------------------------------------------------
    def _sample(self, n_samples, rng):
        return _draw(self, n_samples, rng.standard_normal, np)

    def _sample_torch(self, n_samples, generator, device, dtype):
        def normal(shape):
            return torch.randn(shape, generator=generator, device=device, dtype=dtype)

        return _draw(self, n_samples, normal, torch, device=device, dtype=dtype)

    # -- the contract ----------------------------------------------------------------
    @classmethod
    def from_data(cls, X, y):
        """Check ``(X, y)`` of ``fit``; return the task they describe and the arrays.

        Parameters
        ----------
        X : array-like of shape (n_prompts, n_examples + 1, n_features + 1)
            Prompts, the query last with its label slot 0.
        y : array-like of shape (n_prompts,)
            The queries' labels (a column ``(n_prompts, 1)`` is read as 1-D).

        Returns
        -------
        task : InContextRegressionTask
            The prompts' sizes (identity covariance, no noise: the law is not
            read from the data).
        X, y : ndarray
            As floating arrays.
        """
        X = as_prompts(X)
        n, T, c = X.shape
        return cls(T, c - 1), X, as_row_targets(y, n)

    def check_rows(self, X, owner="the model"):
        """Check prompts for ``predict``: as :meth:`from_data`, ``n_features + 1`` channels, any M.

        Parameters
        ----------
        X : array-like of shape (n_prompts, n_examples + 1, n_features + 1)
            Prompts.
        owner : str, default="the model"
            What was fitted, for the messages.

        Returns
        -------
        X : ndarray
            As a floating array.
        """
        X = as_prompts(X)
        if X.shape[2] != self.n_features + 1:
            raise ValueError(
                f"X has {X.shape[2]} channels per token, but {owner} was fitted with "
                f"n_features={self.n_features}: a token is [x; y], n_features + 1 = "
                f"{self.n_features + 1} channels."
            )
        return X

    # -- the length shift -----------------------------------------------------------
    def shift(self, X, y, seq_len, random_state=None):
        """Move prompts to ``seq_len - 1`` examples, keeping every query and target.

        Shortening keeps a uniformly random subset of each prompt's examples,
        in their order. Lengthening inserts fresh examples at random places:
        covariates from this law's ``Lambda``, labelled with the prompt's own
        weights, which the prompt determines when its labels are noiseless
        and its examples span ``R^d`` (then least squares recovers ``w``
        exactly). A prompt that does not determine its ``w`` (fewer than d
        independent examples, or labels no linear function fits exactly) and
        a law with label noise cannot be lengthened: ``ValueError``, naming
        the prompt. The query stays last and the target unchanged.

        Parameters
        ----------
        X : ndarray of shape (n_prompts, M + 1, n_features + 1)
            Prompts of this task.
        y : ndarray of shape (n_prompts,)
            Their targets.
        seq_len : int
            The new number of tokens, ``M' + 1 >= 2``.
        random_state : int, RandomState instance or None, default=None
            Seed of the kept examples, or of the new ones and their places.

        Returns
        -------
        X_shifted : ndarray of shape (n_prompts, seq_len, n_features + 1)
            A new array.
        y : ndarray of shape (n_prompts,)
            ``y`` itself.
        """
        seq_len = check_positive_int(seq_len, "seq_len")
        if seq_len < 2:
            raise ValueError(
                f"seq_len={seq_len} leaves no example: a prompt needs n_examples >= 1, "
                "seq_len >= 2."
            )
        X = self.check_rows(X, "this task")
        n, T, c = X.shape
        M, new_M = T - 1, seq_len - 1
        rng = check_random_state(random_state)
        rows = np.arange(n)[:, None]
        if new_M <= M:
            keep = np.sort(np.argsort(rng.random_sample((n, M)), axis=1)[:, :new_M], axis=1)
            return np.concatenate([X[rows, keep], X[:, -1:]], axis=1), y
        w = self._prompt_weights(X)
        covariates = _apply(self._factors[0], rng.standard_normal((n, new_M - M, c - 1)), np, {})
        added = np.concatenate([covariates, np.einsum("nkd,nd->nk", covariates, w)[..., None]], 2)
        slots = np.sort(np.argsort(rng.random_sample((n, new_M)), axis=1)[:, :M], axis=1)
        examples = np.empty((n, new_M, c), dtype=X.dtype)
        is_old = np.zeros((n, new_M), dtype=bool)
        is_old[rows, slots] = True
        examples[is_old] = X[:, :-1].reshape(-1, c)
        examples[~is_old] = added.reshape(-1, c)
        return np.concatenate([examples, X[:, -1:]], axis=1), y

    def _prompt_weights(self, X):
        """Each prompt's ``w``, where its examples determine it (see :meth:`shift`)."""
        if self.noise > 0:
            raise ValueError(
                f"prompts of a law with label noise (noise={self.noise}) cannot be "
                "lengthened: their labels do not determine w, so new examples cannot be "
                "labelled. Draw longer prompts from the law instead (task.at_examples)."
            )
        x, labels = X[:, :-1, :-1].astype(np.float64), X[:, :-1, -1].astype(np.float64)
        M, d = x.shape[1:]
        if M < d:
            raise ValueError(
                f"prompts of {M} examples in d={d} dimensions cannot be lengthened: fewer "
                "than d examples do not determine w. Draw longer prompts from the law instead."
            )
        w, s = least_squares(x, labels)
        low = np.flatnonzero((s <= np.finfo(X.dtype).eps * max(M, d) * s[:, :1]).any(axis=1))
        if low.size:
            raise ValueError(
                f"prompt {low[0]} of X does not determine its w: its examples span fewer than "
                f"d={d} dimensions, so it cannot be lengthened."
            )
        residual = np.linalg.norm(np.einsum("nmd,nd->nm", x, w) - labels, axis=1)
        scale = np.linalg.norm(labels, axis=1) + np.finfo(np.float64).tiny
        bad = np.flatnonzero(residual > np.sqrt(np.finfo(X.dtype).eps) * scale)
        if bad.size:
            raise ValueError(
                f"prompt {bad[0]} of X does not determine its w: no linear function fits its "
                f"labels exactly (relative residual {residual[bad[0]] / scale[bad[0]]:.3g}; "
                "noisy labels?), so it cannot be lengthened."
            )
        return w


def _draw(task, n, normal, xp, **where):
    """``n`` prompts of ``task`` from ``normal(shape)``, in NumPy or torch (``xp``).

    Every token's covariates are drawn at once and the prompt is one
    concatenation: on the CPU this costs what drawing the numbers costs.
    """
    M, d = task.seq_len - 1, task.n_features
    examples, query = task._factors
    w = normal((n, d))
    z = normal((n, M + 1, d))
    if task.query_covariance is None:
        x = _apply(examples, z, xp, where)
    else:
        x = xp.concatenate(
            [_apply(examples, z[:, :M], xp, where), _apply(query, z[:, M:], xp, where)], axis=1
        )
    labels = (x[:, :M] * w[:, None, :]).sum(-1)
    if task.noise > 0:
        labels = labels + task.noise * normal((n, M))
    zero = xp.zeros((n, 1), **where) if xp is torch else np.zeros((n, 1))
    labels = xp.concatenate([labels, zero], axis=1)  # the query's label slot
    return xp.concatenate([x, labels[..., None]], axis=-1), (x[:, M] * w).sum(-1)


def make_in_context_regression(
    n_prompts=1000,
    n_examples=20,
    n_features=5,
    *,
    covariance=None,
    noise=0.0,
    random_state=None,
):
    """Generate prompts of in-context linear regression.

    Each prompt draws ``w ~ N(0, I)`` and ``n_examples`` covariates
    ``x_i ~ N(0, covariance)`` labelled ``y_i = <w, x_i> + noise * N(0, 1)``,
    then a query ``x_q`` from the same covariance (after Zhang, Frei and
    Bartlett, JMLR 2024). The target is the query's clean label
    ``<w, x_q>``.

    Parameters
    ----------
    n_prompts : int, default=1000
        Number of prompts.
    n_examples : int, default=20
        Labelled examples M per prompt (at least 1).
    n_features : int, default=5
        Dimension d of the covariates.
    covariance : array-like of shape (d, d) or (d,), default=None
        The covariates' covariance: a symmetric positive semi-definite
        matrix, or a vector of variances; None is the identity.
    noise : float, default=0.0
        Standard deviation of the noise on the examples' labels.
    random_state : int, RandomState instance or None, default=None
        Seed of the prompts.

    Returns
    -------
    X : ndarray of shape (n_prompts, n_examples + 1, n_features + 1)
        The prompts: tokens ``[x_i; y_i]``, the last one the query ``[x_q; 0]``.
    y : ndarray of shape (n_prompts,)
        The queries' clean labels ``<w, x_q>``.

    See Also
    --------
    InContextRegressionTask : The same law as an object (query and covariate shifts).

    Examples
    --------
    >>> from stsq_learn import make_in_context_regression
    >>> X, y = make_in_context_regression(
    ...     200, n_examples=20, n_features=5, random_state=0)
    >>> X.shape, y.shape
    ((200, 21, 6), (200,))
    >>> float(X[0, -1, -1])                  # the query's label slot
    0.0
    """
    n_examples = check_positive_int(n_examples, "n_examples")
    check_random_state_param(random_state, "make_in_context_regression")
    task = InContextRegressionTask(n_examples + 1, n_features, covariance=covariance, noise=noise)
    return task.sample(n_prompts, random_state=random_state)
