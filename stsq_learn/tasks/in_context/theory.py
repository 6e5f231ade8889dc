"""The theory of in-context linear regression with one linear self-attention layer.

Zhang, Frei and Bartlett (JMLR 25(49), 2024, Theorem 4.1) prove that the
layer trained by gradient flow on prompts of N examples with covariates
``N(0, Lambda)`` converges to the global minimum that predicts

``y_hat = x_q^T Gamma^{-1} (1/M) sum_i y_i x_i``, with
``Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I``:

one step of ``Gamma^{-1}``-preconditioned gradient descent from 0 on the
prompt's least-squares loss. Everything below follows from one computation:
for any preconditioner ``A`` (a prediction ``x_q^T A h``, ``h = (1/M) sum_i
y_i x_i``), prompts of M examples with covariance ``L``, a query of second
moment ``S``, label noise of variance ``sigma^2`` and ``w ~ N(0, I)``,

``E[h h^T] = (1 + 1/M) L^2 + ((tr L + sigma^2) / M) L`` and ``E[h w^T] = L``,

so the error against the clean target ``<w, x_q>`` is

``R = (1 + 1/M) tr(S A L^2 A^T) + ((tr L + sigma^2) / M) tr(S A L A^T) - 2 tr(S A L) + tr S``

(:func:`in_context_risk`). Its minimiser over ``A`` at ``M = N`` is
``Gamma_sigma^{-1}`` with ``Gamma_sigma = (1 + 1/N) L + ((tr L + sigma^2) / N) I``
(:func:`in_context_preconditioner`; ``sigma = 0`` is the theorem's); over
``A = eta I`` it is the best gradient step (:func:`in_context_gd_step`).
The prediction's slope on the target is ``tr(S A L) / tr S``
(:func:`in_context_slope`): ``c^2 / g`` when every covariate is scaled by
``c`` (identity ``Lambda``, ``g = 1 + (d + 1) / N``). The risk of per-prompt
least squares (:func:`in_context_least_squares_risk`) and the training
length that is best for a test length (:func:`in_context_best_train_length`)
complete what the comparisons need. Every function takes the number of
examples ``np.inf`` where it has a limit there.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import minimize_scalar

from ..._validation import as_real_array, finite_floats
from .._token_rows import check_scale
from .task import check_covariance

__all__ = [
    "in_context_best_train_length",
    "in_context_gd_step",
    "in_context_least_squares_risk",
    "in_context_preconditioner",
    "in_context_risk",
    "in_context_slope",
]


def _count(value, name):
    """A number of examples: an integer >= 1 or ``np.inf``; returns ``1 / value`` (0 for inf)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be an integer >= 1 or np.inf, got {value!r}.")
    if value == np.inf:
        return 0.0
    if value != int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 or np.inf, got {value!r}.")
    return 1.0 / int(value)


def _law(covariance, query_covariance=None, noise=0.0):
    """``(L, S, sigma^2)``: the prompts' covariance, the query's, the label noise's variance."""
    L = check_covariance(covariance)
    S = (
        L
        if query_covariance is None
        else check_covariance(query_covariance, "query_covariance", len(L))
    )
    return L, S, check_scale(noise, "noise", positive=False) ** 2


def _gamma(L, inv_n, sigma2=0.0):
    """``Gamma_sigma = (1 + 1/N) L + ((tr L + sigma^2) / N) I`` (``inv_n = 1/N``)."""
    return (1 + inv_n) * L + (np.trace(L) + sigma2) * inv_n * np.eye(len(L))


def _minimum(L, inv_n, sigma2=0.0):
    """``Gamma_sigma^{-1}``, or a ``ValueError`` when it is singular."""
    gamma = _gamma(L, inv_n, sigma2)
    if np.linalg.matrix_rank(gamma) < len(L):
        raise ValueError(
            "Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I is singular here (N = inf and a "
            "singular covariance): the global minimum Gamma^{-1} does not exist."
        )
    return np.linalg.inv(gamma)


def in_context_preconditioner(n_examples, covariance, *, noise=0.0):
    """The global minimum of the trained layer: ``Gamma^{-1}`` (Zhang, Frei, Bartlett, Thm 4.1).

    ``Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I`` for prompts of ``N``
    noiseless examples with covariates ``N(0, Lambda)``; the layer at its
    minimum predicts ``x_q^T Gamma^{-1} (1/M) sum_i y_i x_i``. With label
    noise of standard deviation ``sigma`` in training, the minimum of the
    population loss is ``Gamma_sigma^{-1}``, ``Gamma_sigma = (1 + 1/N)
    Lambda + ((tr Lambda + sigma^2) / N) I`` (ours: the same computation).

    Parameters
    ----------
    n_examples : int or np.inf
        The training prompts' number of examples N.
    covariance : array-like of shape (d, d) or (d,)
        ``Lambda``, a matrix or a vector of variances.
    noise : float, default=0.0
        Standard deviation of the training labels' noise.

    Returns
    -------
    ndarray of shape (d, d)
        ``Gamma^{-1}``, the matrix :attr:`LinearAttentionRegressor.preconditioner_`
        converges to. For ``Lambda = I`` it is ``I / (1 + (d + 1) / N)``.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_preconditioner
    >>> A = in_context_preconditioner(20, np.ones(5))
    >>> float(A[0, 0]), 1 / (1 + 6 / 20)
    (0.7692307692307692, 0.7692307692307692)
    """
    inv_n = _count(n_examples, "n_examples")
    L, _, sigma2 = _law(covariance, noise=noise)
    return _minimum(L, inv_n, sigma2)


def in_context_risk(
    n_test, n_train, covariance, *, noise=0.0, query_covariance=None, preconditioner=None
):
    """The expected squared error of ``x_q^T A (1/M) sum_i y_i x_i`` at M examples.

    Averaged over the prompt's ``w ~ N(0, I)``, its covariates and its
    label noise, against the clean target ``<w, x_q>``:

    ``R = (1 + 1/M) tr(S A L^2 A^T) + ((tr L + sigma^2) / M) tr(S A L A^T) - 2 tr(S A L) + tr S``

    with ``L`` the prompts' covariance, ``S`` the query's, ``sigma`` the
    noise. With ``A = Gamma^{-1}`` trained at N on ``L`` (the default) and
    ``S = L``, noiseless, it is the paper's
    ``tr(L (I - Gamma^{-1} L)^2) + (1/M) [tr(Gamma^{-2} L^3) + tr L tr(Gamma^{-2} L^2)]``;
    for ``L = I``, ``g = 1 + (d + 1) / N``:
    ``d [(1 + (d + 1) / M) / g^2 - 2 / g + 1]``. Noise adds
    ``(sigma^2 / M) tr(S A L A^T)``.

    Parameters
    ----------
    n_test : int or np.inf
        The examples M of the prompts the error is measured on.
    n_train : int or np.inf
        The examples N of the training prompts, which set the default ``A``
        (unused when ``preconditioner`` is given).
    covariance : array-like of shape (d, d) or (d,)
        ``L``, the covariance of the test prompts' covariates (the training
        ones' too, for the default ``A``).
    noise : float, default=0.0
        Standard deviation of the test labels' noise.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        ``S``, the query's covariance (a query shift); None: ``L``.
    preconditioner : array-like of shape (d, d), default=None
        ``A``: a fitted ``preconditioner_``, a step ``eta * I``, the minimum
        at another law (a covariate shift); None:
        ``in_context_preconditioner(n_train, covariance)``.

    Returns
    -------
    float
        The risk; ``tr S`` is that of predicting 0.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_preconditioner, in_context_risk
    >>> round(in_context_risk(20, 20, np.ones(5)), 4)       # d = 5, M = N = 20
    1.1538
    >>> round(in_context_risk(np.inf, 20, np.ones(5)), 4)   # the limit M -> inf
    0.2663

    Covariates scaled by 2 at test, the layer trained at ``Lambda = I``:

    >>> A = in_context_preconditioner(20, np.ones(5))
    >>> risk = in_context_risk(np.inf, 20, 4 * np.ones(5), preconditioner=A)
    >>> round(risk / 4, 1)
    21.6
    """
    inv_m = _count(n_test, "n_test")
    L, S, sigma2 = _law(covariance, query_covariance, noise)
    if preconditioner is None:
        A = _minimum(L, _count(n_train, "n_train"))
    else:
        A = _as_preconditioner(preconditioner, len(L))
    return _risk(A, L, S, inv_m, sigma2)


def _risk(A, L, S, inv_m, sigma2):
    """The risk of :func:`in_context_risk` from checked matrices (``inv_m = 1/M``)."""
    SA = S @ A
    return float(
        (1 + inv_m) * np.trace(SA @ L @ L @ A.T)
        + (np.trace(L) + sigma2) * inv_m * np.trace(SA @ L @ A.T)
        - 2 * np.trace(SA @ L)
        + np.trace(S)
    )


def _as_preconditioner(value, d):
    """A preconditioner given by the user: a finite real ``(d, d)`` matrix, as float64."""
    A = finite_floats(as_real_array(value, "preconditioner", f"({d}, {d})"), "preconditioner")
    if A.shape != (d, d):
        raise ValueError(
            f"preconditioner must be a ({d}, {d}) matrix for covariates of dimension {d}, got "
            f"shape {A.shape}."
        )
    return A.astype(np.float64)


def in_context_gd_step(n_examples, covariance, *, noise=0.0, query_covariance=None):
    """The best step ``eta`` of one gradient step from 0: ``y_hat = eta x_q^T (1/M) sum_i y_i x_i``.

    The minimiser of :func:`in_context_risk` over ``A = eta I``:
    ``eta = tr(S L) / [(1 + 1/M) tr(S L^2) + ((tr L + sigma^2) / M) tr(S L)]``;
    ``M / (M + d + 1)`` for ``L = S = I`` without noise, whose risk is
    ``d (d + 1) / (M + d + 1)``, the trained layer's at ``M = N``. Step 1
    is averaging, ``y_hat = x_q^T (1/M) sum_i y_i x_i``.

    Parameters
    ----------
    n_examples : int or np.inf
        The examples M of the prompts the step is for.
    covariance : array-like of shape (d, d) or (d,)
        ``L``, the covariates' covariance.
    noise : float, default=0.0
        Standard deviation of the labels' noise.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        ``S``, the query's covariance; None: ``L``.

    Returns
    -------
    float
        The step; its risk is ``in_context_risk(M, M, covariance,
        preconditioner=eta * np.eye(d))``.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_gd_step, in_context_risk
    >>> eta = in_context_gd_step(10, np.ones(5))             # M / (M + d + 1)
    >>> A = eta * np.eye(5)
    >>> risk = in_context_risk(10, 10, np.ones(5), preconditioner=A)
    >>> round(eta, 4), round(risk, 4)
    (0.625, 1.875)
    """
    inv_m = _count(n_examples, "n_examples")
    L, S, sigma2 = _law(covariance, query_covariance, noise)
    SL = S @ L
    curvature = (1 + inv_m) * np.trace(SL @ L) + (np.trace(L) + sigma2) * inv_m * np.trace(SL)
    return float(np.trace(SL) / curvature)


def in_context_least_squares_risk(n_test, covariance, *, noise=0.0, query_covariance=None):
    """The expected squared error of per-prompt least squares (min-norm), as :class:`PromptRidge`.

    Against the clean target, with ``w ~ N(0, I)``:

    - ``M >= d``: ``sigma^2 tr(S L^{-1}) / (M - d - 1)`` (0 without noise;
      infinite with noise at ``M = d, d + 1``), ``L`` positive definite;
    - ``M < d`` (``L = lambda I`` only): ``tr S [(1 - M/d) + sigma^2 M /
      (lambda d (d - M - 1))]``: the part of ``w`` the examples do not
      reach, and the noise (infinite at ``M = d - 1`` with noise).

    Parameters
    ----------
    n_test : int or np.inf
        The examples M of a prompt.
    covariance : array-like of shape (d, d) or (d,)
        ``L``, the covariates' covariance.
    noise : float, default=0.0
        Standard deviation of the labels' noise.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        ``S``, the query's covariance; None: ``L``.

    Returns
    -------
    float
        The risk (``np.inf`` where it diverges).

    Raises
    ------
    ValueError
        For ``M < d`` with a covariance that is not a multiple of the
        identity (the risk has no closed form there: measure
        :class:`PromptRidge` on drawn prompts), or ``M >= d`` with a
        singular one.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_least_squares_risk
    >>> (in_context_least_squares_risk(3, np.ones(5)),
    ...  in_context_least_squares_risk(10, np.ones(5)))
    (2.0, 0.0)
    """
    inv_m = _count(n_test, "n_test")
    L, S, sigma2 = _law(covariance, query_covariance, noise)
    d = len(L)
    if inv_m == 0:
        return 0.0
    M = round(1 / inv_m)
    if M >= d:
        if np.linalg.matrix_rank(L) < d:
            raise ValueError(
                "covariance is singular: least squares' risk with M >= d is given here for a "
                "positive definite covariance only."
            )
        if sigma2 == 0:
            return 0.0
        if M <= d + 1:
            return float(np.inf)
        return float(sigma2 * np.trace(S @ np.linalg.inv(L)) / (M - d - 1))
    lam = L[0, 0]
    if not np.allclose(L, lam * np.eye(d), rtol=1e-12, atol=0):
        raise ValueError(
            f"least squares' risk at M={M} < d={d} has a closed form for an isotropic "
            "covariance (a multiple of the identity) only; measure PromptRidge on prompts "
            "drawn from this law instead."
        )
    missed = 1 - M / d
    if sigma2 == 0:
        return float(np.trace(S) * missed)
    if M >= d - 1:
        return float(np.inf)
    return float(np.trace(S) * (missed + sigma2 * M / (lam * d * (d - M - 1))))


def in_context_slope(n_train, covariance, *, query_covariance=None, preconditioner=None):
    """The slope of the prediction on the target ``<w, x_q>``: ``tr(S A L) / tr S``.

    The regression slope ``E[y_hat t] / E[t^2]`` of ``y_hat = x_q^T A h`` on
    ``t = <w, x_q>``, at any number of examples (``h`` is unbiased for
    ``L w``). A model that is right on average has slope 1 (least
    squares); the trained layer has ``tr(S Gamma^{-1} L) / tr S``, ``1 / g``
    for ``L = I``. Under a covariate shift (every covariate scaled by ``c``
    at test, ``L = S = c^2 Lambda``, ``A`` trained on ``Lambda``) the slope
    is ``c^2 / g`` for ``Lambda = I``: the shift the layer does not tolerate.

    Parameters
    ----------
    n_train : int or np.inf
        The training examples N that set the default ``A``.
    covariance : array-like of shape (d, d) or (d,)
        ``L``, the covariance of the covariates the prediction is made on.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        ``S``, the query's covariance; None: ``L``.
    preconditioner : array-like of shape (d, d), default=None
        ``A``; None: ``in_context_preconditioner(n_train, covariance)``.

    Returns
    -------
    float
        The slope (1 for a prediction right on average).

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_preconditioner, in_context_slope
    >>> A = in_context_preconditioner(20, np.ones(5))       # g = 1.3
    >>> slope = in_context_slope(20, 9 * np.ones(5), preconditioner=A)  # c = 3
    >>> round(slope, 4)                                                 # 9 / g
    6.9231
    """
    L, S, _ = _law(covariance, query_covariance)
    if preconditioner is None:
        A = _minimum(L, _count(n_train, "n_train"))
    else:
        A = _as_preconditioner(preconditioner, len(L))
    return float(np.trace(S @ A @ L) / np.trace(S))


def in_context_best_train_length(n_test, covariance, *, noise=0.0, query_covariance=None):
    """The training length N whose trained layer has the least risk at test length M.

    Minimises ``in_context_risk(M, N, covariance, noise=noise,
    query_covariance=query_covariance)`` over real ``N >= 1`` (the layer
    trained noiselessly at N, tested at M). Without noise (or at ``M =
    inf``) it is ``N = M`` exactly: the minimiser over every ``A`` of the
    risk at M is ``Gamma(M)^{-1}``, whatever the query's law. Test noise
    makes shorter training prompts better (``N = M (d + 1) / (d + 1 +
    sigma^2)`` for ``Lambda = I``); that N is found numerically (to about
    1e-7, relative: the risk is flat at its minimum).

    Parameters
    ----------
    n_test : int or np.inf
        The test prompts' examples M.
    covariance : array-like of shape (d, d) or (d,)
        ``Lambda``, the covariates' covariance (training and test).
    noise : float, default=0.0
        Standard deviation of the test labels' noise.
    query_covariance : array-like of shape (d, d) or (d,), default=None
        The test query's covariance; None: ``Lambda``.

    Returns
    -------
    float
        The best N (``np.inf`` for ``M = inf``).

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import in_context_best_train_length
    >>> round(in_context_best_train_length(40, np.ones(5)), 3)
    40.0
    >>> length = in_context_best_train_length(40, np.ones(5), noise=1.0)
    >>> round(length, 3)                                    # 40 * 6 / 7
    34.286
    """
    inv_m = _count(n_test, "n_test")
    L, S, sigma2 = _law(covariance, query_covariance, noise)

    if sigma2 == 0 or inv_m == 0:  # Gamma(M)^{-1} minimises the risk at M over every A
        return float(np.inf) if inv_m == 0 else 1 / inv_m

    def risk(inv_n):  # the layer trained at N = 1 / inv_n, at test
        return _risk(np.linalg.inv(_gamma(L, inv_n)), L, S, inv_m, sigma2)

    found = minimize_scalar(risk, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-12})
    best = min((found.x, 1.0), key=risk)  # N = 1 is the boundary; N = inf is never best here
    return float(1 / best)


PUBLIC = (
    in_context_preconditioner,
    in_context_risk,
    in_context_gd_step,
    in_context_least_squares_risk,
    in_context_slope,
    in_context_best_train_length,
)
"""The public functions of the theory, in the order the user guide gives them."""
