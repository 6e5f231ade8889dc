"""The numbers of sparse-token classification's theory: thresholds, two-step alignment, errors.

Barnfield, Cui and Lu (ICLR 2026) state that single-layer attention reaches
vanishing test error with a signal ``theta`` growing like ``log L`` while
linear classifiers need ``sqrt(L)``; that two gradient steps align the
query with ``xi``; and they give an exact asymptotic test error. Their
formulas were out of reach (see the user guide); what this module gives is
derived here, each checked against Monte Carlo in the tests:

- :func:`pooled_error`: the exact (Bayes) error of the best classifier of
  the mean token, ``xi . mean(x)`` being ``N(R theta / L, 1 / L)`` on a
  positive row and ``N(0, 1 / L)`` on a negative one;
- :func:`pooled_threshold`: the signal at which that error reaches a
  target, ``2 z sqrt(L) / R`` with ``z = Phi^{-1}(1 - error)`` at
  ``pi = 1/2``: the ``c sqrt(L)`` law, with its constant;
- :func:`attention_signal_share` and :func:`attention_threshold`: for the
  attention classifier with query ``beta xi`` and readout ``xi``, the
  informative tokens' share ``m = R e^{beta theta} / (R e^{beta theta} + L - R)``
  of the softmax's normaliser (a ratio of expectations, exact as the sums
  concentrate), the limiting logits ``beta`` (negative rows) and
  ``beta + m theta`` (positive rows), hence the signal at which the share
  reaches ``s``: ``(log((L - R) / R) + log(s / (1 - s))) / beta``, the
  ``a + b log L`` law with ``b = 1 / beta``;
- :func:`two_step_alignment`: the cosines of the readout with ``xi`` after
  the first step and of the query after the second, in the proportional
  limit ``d, n -> infinity`` with ``n / d`` fixed and a small first step
  (the logits near 0 at the second step);
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

__all__ = [
    "attention_logit_limits",
    "attention_signal_share",
    "attention_threshold",
    "pooled_error",
    "pooled_threshold",
    "two_step_alignment",
]


def _check(value, name, low=0.0, *, strict=False, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    ok = math.isfinite(value) and (value > low if strict else value >= low)
    if high is not None:
        ok = ok and value < high
    if not ok:
        bound = f"> {low}" if strict else f">= {low}"
        extra = f" and < {high}" if high is not None else ""
        raise ValueError(f"{name} must be a finite number {bound}{extra}, got {value!r}.")
    return value


def _sizes(seq_len, n_informative):
    L = _check(seq_len, "seq_len", 1.0)
    R = _check(n_informative, "n_informative", 0.0, strict=True)
    if R > L:
        raise ValueError(f"n_informative={n_informative} is more than seq_len={seq_len}.")
    return L, R


def pooled_error(signal, seq_len, n_informative=1, positive_fraction=0.5):
    """Bayes error of the best classifier of the mean token (the pooled oracle).

    On the mean token ``mean(x)``, a positive row is ``N(mu xi, I / L)`` with
    ``mu = R theta / L`` and a negative one ``N(0, I / L)``: the best rule
    thresholds ``xi . mean(x)`` at ``t = mu / 2 + log((1 - pi) / pi) / (L mu)``.

    Parameters
    ----------
    signal : float or array-like
        theta, >= 0.
    seq_len : float
        L.
    n_informative : float, default=1
        R.
    positive_fraction : float, default=0.5
        pi.

    Returns
    -------
    float or ndarray
        ``pi Phi((t - mu) sqrt(L)) + (1 - pi) Phi(-t sqrt(L))``; ``min(pi, 1 - pi)``
        at ``theta = 0``.

    Examples
    --------
    >>> from stsq_learn import pooled_error
    >>> round(float(pooled_error(4.0, seq_len=16)), 4)   # Phi(-1/2)
    0.3085
    """
    L, R = _sizes(seq_len, n_informative)
    pi = _check(positive_fraction, "positive_fraction", 0.0, strict=True, high=1.0)
    theta = np.asarray(signal, dtype=np.float64)
    if not np.all(np.isfinite(theta) & (theta >= 0)):
        raise ValueError(f"signal must hold finite numbers >= 0, got {signal!r}.")
    mu = R * theta / L
    sd = 1.0 / math.sqrt(L)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mu / 2 + sd**2 * math.log((1 - pi) / pi) / mu
        err = pi * norm.cdf((t - mu) / sd) + (1 - pi) * norm.cdf(-t / sd)
    err = np.where(mu > 0, err, min(pi, 1 - pi))
    return float(err) if err.ndim == 0 else err


def pooled_threshold(seq_len, n_informative=1, target_error=0.1):
    """Signal at which the pooled oracle's error (``pi = 1/2``) is ``target_error``.

    Parameters
    ----------
    seq_len : float or array-like
        L.
    n_informative : float, default=1
        R.
    target_error : float, default=0.1
        In ``(0, 1/2)``.

    Returns
    -------
    float or ndarray
        ``2 Phi^{-1}(1 - target_error) sqrt(L) / R``: the ``c sqrt(L)`` law.

    Examples
    --------
    >>> from stsq_learn import pooled_threshold
    >>> theta = pooled_threshold(16, target_error=0.5 - 0.19146)  # z = 1/2
    >>> round(float(theta), 3)
    4.0
    """
    eps = _check(target_error, "target_error", 0.0, strict=True, high=0.5)
    R = _check(n_informative, "n_informative", 0.0, strict=True)
    L = np.asarray(seq_len, dtype=np.float64)
    out = 2 * norm.ppf(1 - eps) * np.sqrt(L) / R
    return float(out) if out.ndim == 0 else out


def attention_signal_share(signal, seq_len, n_informative=1, query_norm=1.0):
    """Expected share of the informative tokens in the softmax's normaliser, query ``beta xi``.

    ``E[e^{beta u}] = e^{beta mu + beta^2 / 2}`` for ``u ~ N(mu, 1)``, so the
    informative tokens (``mu = theta``) hold
    ``m = R e^{beta theta} / (R e^{beta theta} + L - R)`` of the expected
    normaliser (the ``e^{beta^2 / 2}`` cancels).

    Parameters
    ----------
    signal : float or array-like
        theta.
    seq_len, n_informative : float
        L and R.
    query_norm : float, default=1.0
        beta, the query's norm (its inverse temperature), > 0.

    Returns
    -------
    float or ndarray
        m, in ``(0, 1]``.
    """
    L, R = _sizes(seq_len, n_informative)
    beta = _check(query_norm, "query_norm", 0.0, strict=True)
    theta = np.asarray(signal, dtype=np.float64)
    # m = 1 / (1 + (L - R) / R e^{-beta theta}), computed without overflow
    out = 1.0 / (1.0 + (L - R) / R * np.exp(-beta * theta))
    return float(out) if out.ndim == 0 else out


def attention_logit_limits(signal, seq_len, n_informative=1, query_norm=1.0):
    """Logits ``xi^T sum_l softmax(beta u)_l x_l`` of negative and positive rows, to leading order.

    The tilted mean of ``u ~ N(mu, 1)`` under ``e^{beta u}`` is ``mu + beta``:
    a negative row's logit tends to ``beta``; a positive row's, with share
    ``m`` (:func:`attention_signal_share`), to ``beta + m theta``. The
    ratio of expectations: exact when the sums over the tokens concentrate
    (many informative tokens, or long rows with ``m`` near 0 or 1).

    Parameters
    ----------
    signal : float
        theta.
    seq_len, n_informative : float
        L and R.
    query_norm : float, default=1.0
        beta.

    Returns
    -------
    negative, positive : float
        The two limiting logits; their gap ``m theta`` is the margin.
    """
    m = attention_signal_share(signal, seq_len, n_informative, query_norm)
    beta = float(query_norm)
    return beta, beta + m * float(signal)


def attention_threshold(seq_len, n_informative=1, query_norm=1.0, share=0.5):
    """Signal at which the informative tokens hold ``share`` of the normaliser: the log law.

    Parameters
    ----------
    seq_len : float or array-like
        L (> R).
    n_informative : float, default=1
        R.
    query_norm : float, default=1.0
        beta.
    share : float, default=0.5
        The share s, in ``(0, 1)``.

    Returns
    -------
    float or ndarray
        ``(log((L - R) / R) + log(s / (1 - s))) / beta``: ``a + b log L`` with
        ``b = 1 / beta`` for ``L >> R``.

    Examples
    --------
    >>> from stsq_learn import attention_threshold
    >>> theta = attention_threshold(101, n_informative=1, query_norm=2.0)
    >>> round(float(theta), 4)
    2.3026
    """
    R = _check(n_informative, "n_informative", 0.0, strict=True)
    beta = _check(query_norm, "query_norm", 0.0, strict=True)
    s = _check(share, "share", 0.0, strict=True, high=1.0)
    L = np.asarray(seq_len, dtype=np.float64)
    if np.any(L <= R):
        raise ValueError(f"seq_len must exceed n_informative={n_informative}, got {seq_len!r}.")
    out = (np.log((L - R) / R) + math.log(s / (1 - s))) / beta
    return float(out) if out.ndim == 0 else out


def two_step_alignment(signal, seq_len, samples_per_dim, n_informative=1, positive_fraction=0.5):
    """Cosines with ``xi`` of the readout after step 1 and of the query after step 2.

    The protocol of ``SparseTokenClassifier(solver="two_step")`` from
    ``q = w = b = 0`` on the logistic loss, in the limit ``d, n -> infinity``
    with ``n / d = alpha`` and a small first step. Step 1:
    ``w_1 ~ (1/n) sum_i y_i mean(x_i)`` (``y = +-1``), whose mean is
    ``pi (R theta / L) xi`` and whose noise is ``N(0, I / (n L))``, so
    ``rho_1^2 = pi^2 mu^2 / (pi^2 mu^2 + 1 / (alpha L))``. Step 2:
    ``q_2 ~ (1/n) sum_i y_i S_i w_1`` with ``S_i`` the covariance of row
    ``i``'s tokens; ``E[y S] = (2 pi - 1)(L - 1)/L I + pi theta^2 c xi xi^T``,
    ``c = (R/L)(1 - R/L)``, and its noise has variance
    ``((L - 1)/L^2 + pi theta^2 rho_1^2 c / L) / alpha`` in all, so

    ``rho_2 = (a + k) rho_1 / sqrt((a + k)^2 rho_1^2 + a^2 (1 - rho_1^2) + v)``

    with ``a = (2 pi - 1)(L - 1)/L``, ``k = pi theta^2 c`` and ``v`` that
    variance. Derived here (not the paper's formula, which was out of reach).

    Parameters
    ----------
    signal : float
        theta.
    seq_len : float
        L.
    samples_per_dim : float or array-like
        alpha = n / d, > 0.
    n_informative : float, default=1
        R.
    positive_fraction : float, default=0.5
        pi.

    Returns
    -------
    readout, query : float or ndarray
        rho_1 and rho_2, in ``[0, 1)``.

    Examples
    --------
    >>> from stsq_learn import two_step_alignment
    >>> r1, r2 = two_step_alignment(3.0, seq_len=8, samples_per_dim=2.0)
    >>> round(float(r1), 3), round(float(r2), 3)
    (0.6, 0.755)
    """
    L, R = _sizes(seq_len, n_informative)
    theta = _check(signal, "signal", 0.0)
    pi = _check(positive_fraction, "positive_fraction", 0.0, strict=True, high=1.0)
    alpha = np.asarray(samples_per_dim, dtype=np.float64)
    if not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError(f"samples_per_dim must hold finite numbers > 0, got {samples_per_dim!r}.")
    mu = R * theta / L
    rho1 = np.sqrt((pi * mu) ** 2 / ((pi * mu) ** 2 + 1 / (alpha * L)))
    c = (R / L) * (1 - R / L)
    a, k = (2 * pi - 1) * (L - 1) / L, pi * theta**2 * c
    v = ((L - 1) / L**2 + pi * theta**2 * rho1**2 * c / L) / alpha
    rho2 = (a + k) * rho1 / np.sqrt((a + k) ** 2 * rho1**2 + a**2 * (1 - rho1**2) + v)
    if rho1.ndim == 0:
        return float(rho1), float(rho2)
    return rho1, rho2


PUBLIC = (
    pooled_error,
    pooled_threshold,
    attention_signal_share,
    attention_logit_limits,
    attention_threshold,
    two_step_alignment,
)
"""The functions the registry exports from ``stsq_learn``."""
