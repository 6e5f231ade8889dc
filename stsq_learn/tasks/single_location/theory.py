"""The numbers the theory of single-location regression gives: risks in closed form.

For the law of :class:`~stsq_learn.SingleLocationTask` (relevant token
``x ~ N(a k*, gamma^2 I)`` with ``a = sqrt(d / 2)``, noise tokens ``N(0, I)``,
``y = <x_J0, v*> + noise * eps``), the predictor
``T(X) = sum_l erf(lambda <x_l, k>) <x_l, v>`` has the population risk

``R = gamma^2 + noise^2 - 2 E[y s_0] + E[s_0^2] + (L - 1) E[s^2]``,

plus, when ``<k, v> != 0``, the cross terms
``2 (L - 1) E[s_0] mu + (L - 1)(L - 2) mu^2`` with ``mu = E[s]``, where
``s_0`` is the relevant token's term and ``s`` a noise token's (the noise
tokens' terms are independent of each other, of ``s_0`` and of ``y``, and
have mean ``mu = <k, v> lambda (2 / sqrt(pi)) / sqrt(1 + 2 lambda^2 |k|^2)``
by Stein's lemma, zero when ``k`` is orthogonal to ``v``). It depends on
``k`` and ``v`` only through five inner products with ``k*`` and ``v*``
and with each other (and the norms ``|k|``, ``|v|``, 1 on the sphere):

- the noise term is closed form: with ``b = lambda |k|``, ``c = <k, v>``,
  ``E[s^2] = (|v|^2 - c^2/|k|^2) A(b) + (c^2/|k|^2) B(b)``, where
  ``A(b) = E[erf(b z)^2] = (2/pi) arcsin(2 b^2 / (1 + 2 b^2))`` and
  ``B(b) = E[z^2 erf(b z)^2] = A(b) + 8 b^2 / (pi (1 + 2 b^2) sqrt(1 + 4 b^2))``
  (Stein's lemma twice);
- the relevant token's terms are one-dimensional Gaussian integrals over
  ``u = <x_0, k>`` (given ``u``, ``<x_0, v>`` and ``y`` are Gaussian with
  linear means), computed by Gauss-Hermite quadrature with 160 nodes, exact
  to machine precision for these smooth integrands.

The gradient in ``(k, v)`` is the derivative of the same expression, by the
chain rule through the seven products (derived by hand, differentiating under
the quadrature; the tests check it against automatic differentiation and
finite differences); it is what projected gradient descent on the population
risk follows.
:func:`bayes_risk` is a Monte Carlo estimate: the Bayes predictor is the
posterior-weighted sum ``sum_l P(J0 = l | X) <x_l, v*>``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import erf
from sklearn.utils import check_random_state

__all__ = [
    "bayes_risk",
    "erf_attention",
    "erf_risk",
    "erf_risk_gradient",
    "linear_risk",
    "oracle_risk",
    "swapped_point",
]

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(160)
_WEIGHTS = _WEIGHTS / math.sqrt(2 * math.pi)


def _task_constants(task):
    return (task.mean_norm, task.gamma, task.noise, task.seq_len)


def _noise_parts(b):
    """``A(b) = E[erf(b z)^2]``, ``B(b) = E[z^2 erf(b z)^2]`` and their derivatives in ``b``."""
    b2 = b * b
    q, r = 1 + 2 * b2, np.sqrt(1 + 4 * b2)
    A = (2 / np.pi) * np.arcsin(2 * b2 / q)
    B = A + 8 * b2 / (np.pi * q * r)
    dA = (8 / np.pi) * b / (q * r)
    dB = dA + (16 / np.pi) * b * (1 + 2 * b2 - 4 * b2 * b2) / (q * q * r**3)
    return A, B, dA, dB


def _risk_and_partials(p, lam, constants):
    """The population risk and its partial derivatives in the seven products ``p``.

    ``p = [<k,k*>, <k,v*>, <v,k*>, <v,v*>, <k,v>, |k|^2, |v|^2]``: seven
    numbers (one pair ``(k, v)``), or seven columns of shape ``(n, 1)`` with
    ``lam`` of shape ``(n, 1)`` (``n`` pairs at once, the nodes along the
    last axis; the risk is then ``(n, 1)`` and the partials ``(7, n, 1)``).
    The reductions over the nodes are ``integrand @ w``: for one pair the
    same dot products as ever, for ``n`` pairs one matrix product each.
    """
    a, g, eps, L = constants
    kk, kv, vk, vv, c, nk, nv = p
    z = _NODES
    w = _WEIGHTS if np.ndim(kk) == 0 else _WEIGHTS[:, None]
    rk = np.sqrt(nk)
    u = a * kk + g * rk * z  # <x_0, k> at the nodes
    f = erf(lam * u)
    de = lam * (2 / np.sqrt(np.pi)) * np.exp(-((lam * u) ** 2))  # d erf(lam u) / du
    M = a * vk + c * g * z / rk  # E[<x_0, v> | u]
    Y = kv * g * z / rk  # E[<x_0, v*> | u]  (<k*, v*> = 0)
    C = g * g * (vv - c * kv / nk)  # Cov(<x_0, v>, <x_0, v*> | u)
    V = g * g * (nv - c * c / nk)  # Var(<x_0, v> | u)
    ys = (f * (C + Y * M)) @ w
    ss = (f * f * (V + M * M)) @ w
    s0 = (f * M) @ w
    # The noise tokens: E[s^2] in closed form, E[s] = mu by Stein's lemma.
    b = lam * rk
    A, B, dA, dB = _noise_parts(b)
    noise = (nv - c * c / nk) * A + (c * c / nk) * B
    root = np.sqrt(1 + 2 * lam * lam * nk)
    mu = c * lam * (2 / np.sqrt(np.pi)) / root
    risk = g * g + eps * eps - 2 * ys + ss + (L - 1) * noise
    risk += 2 * (L - 1) * s0 * mu + (L - 1) * (L - 2) * mu * mu
    # Derivatives through the integrands (u, M, Y at each node; C and V).
    Du = de * (-2 * (C + Y * M) + 2 * f * (V + M * M) + 2 * (L - 1) * mu * M)
    DM = -2 * f * Y + 2 * f * f * M + 2 * (L - 1) * mu * f
    DY = -2 * f * M
    DC, DV = -2 * (f @ w), (f * f) @ w
    dmu = 2 * (L - 1) * s0 + 2 * (L - 1) * (L - 2) * mu  # d risk / d mu
    kappa = 2 / np.sqrt(np.pi)
    gz = g * z / rk
    d_kk = a * (Du @ w)
    d_vk = a * (DM @ w)
    d_kv = (DY * gz) @ w - DC * g * g * c / nk
    d_vv = DC * g * g
    d_c = (DM * gz) @ w - DC * g * g * kv / nk - DV * 2 * g * g * c / nk
    d_c += (L - 1) * 2 * c / nk * (B - A) + dmu * lam * kappa / root
    d_nk = (Du * gz / 2 - DM * c * gz / (2 * nk) - DY * kv * gz / (2 * nk)) @ w
    d_nk += DC * g * g * c * kv / nk**2 + DV * g * g * c * c / nk**2
    d_noise = (nv - c * c / nk) * dA + c * c / nk * dB
    d_nk += (L - 1) * (c * c / nk**2 * (A - B) + d_noise * lam / (2 * rk))
    d_nk -= dmu * c * lam**3 * kappa / root**3
    d_nv = DV * g * g + (L - 1) * A
    return risk, np.array([d_kk, d_kv, d_vk, d_vv, d_c, d_nk, d_nv])


def _products(k, v, k_star, v_star):
    return np.array([k @ k_star, k @ v_star, v @ k_star, v @ v_star, k @ v, k @ k, v @ v])


def _unit_vector(x):
    return x / np.linalg.norm(x)


def _check_kv(k, v, task):
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    d = task.n_features
    if k.shape != (d,) or v.shape != (d,):
        raise ValueError(f"k and v must have shape ({d},), got {k.shape} and {v.shape}.")
    if not (k @ k > 0):
        raise ValueError("k must be a nonzero vector.")
    return k, v


def erf_risk(k, v, lam, task):
    """Population risk ``E[(y - T(X))^2]`` of ``T(X) = sum_l erf(lam <x_l, k>) <x_l, v>``.

    Parameters
    ----------
    k, v : array-like of shape (n_features,)
        Key and value vectors (any norm; ``k`` nonzero).
    lam : float
        The temperature lambda.
    task : SingleLocationTask
        The law.

    Returns
    -------
    float
        The risk.

    Examples
    --------
    >>> from stsq_learn import SingleLocationTask
    >>> from stsq_learn.single_location_theory import erf_risk
    >>> task = SingleLocationTask(10, 400)
    >>> k_star, v_star = task.directions
    >>> round(erf_risk(k_star, v_star, 0.1, task), 4)
    0.1135
    """
    return erf_risk_gradient(k, v, lam, task, gradient=False)


def erf_risk_gradient(k, v, lam, task, gradient=True):
    """The population risk and its gradient in ``k`` and ``v``.

    Parameters
    ----------
    k, v : array-like of shape (n_features,)
        Key and value vectors.
    lam : float
        The temperature lambda.
    task : SingleLocationTask
        The law.
    gradient : bool, default=True
        False returns the risk alone.

    Returns
    -------
    risk : float
        The risk.
    grad_k, grad_v : ndarray of shape (n_features,)
        The Euclidean gradient (only when ``gradient``).
    """
    k, v = _check_kv(k, v, task)
    k_star, v_star = task.directions
    return _risk_gradient(k, v, float(lam), k_star, v_star, _task_constants(task), gradient)


def _risk_gradient(k, v, lam, k_star, v_star, constants, gradient=True):
    """:func:`erf_risk_gradient` with the directions and constants given (the training loop's)."""
    risk, g = _risk_and_partials(_products(k, v, k_star, v_star), lam, constants)
    if not gradient:
        return float(risk)
    grad_k = g[0] * k_star + g[1] * v_star + g[4] * v + 2 * g[5] * k
    grad_v = g[2] * k_star + g[3] * v_star + g[4] * k + 2 * g[6] * v
    return float(risk), grad_k, grad_v


def _risk_and_partials_batch(p, lam, constants):
    """:func:`_risk_and_partials` for ``n`` pairs at once, with its shared terms computed once.

    ``p``: the seven products as arrays of shape ``(n,)``; ``lam``: ``(n,)``.
    The integrands over the nodes are ``(n, 160)`` arrays (one row per
    pair), the ten reductions one matrix product; the algebra is
    :func:`_risk_and_partials`'s, regrouped so that each node-sized product
    is formed once (the tests hold the two to 1e-12).
    Returns the risks ``(n,)`` and the partials ``(7, n)``.
    """
    a, g, eps, L = constants
    kk, kv, vk, vv, c, nk, nv = p
    g2, kappa = g * g, 2 / np.sqrt(np.pi)
    rk = np.sqrt(nk)
    inv_nk = 1 / nk
    col = lambda x: x[:, None]  # noqa: E731  a per-pair number against the nodes
    gz = col(g / rk) * _NODES  # g z / |k|
    lu = col(lam) * (col(g * rk) * _NODES + col(a * kk))  # lambda <x_0, k> at the nodes
    f = torch.erf(torch.from_numpy(lu)).numpy()  # scipy's erf to 1 ulp, faster on arrays
    de2 = col(2 * kappa * lam) * np.exp(-(lu * lu))  # 2 d erf(lam u) / du
    M = col(c) * gz + col(a * vk)
    Y = col(kv) * gz
    C = g2 * (vv - c * kv * inv_nk)
    V = g2 * (nv - c * c * inv_nk)
    fM = f * M
    ff = f * f
    CYM = Y * M + col(C)
    VMM = M * M + col(V)
    # The noise tokens, closed form (as _risk_and_partials).
    b = lam * rk
    A, B, dA, dB = _noise_parts(b)
    root = np.sqrt(1 + 2 * lam * lam * nk)
    mu = c * lam * kappa / root
    Lmu = col((L - 1) * mu)
    Du = de2 * (f * VMM - CYM + Lmu * M)
    DM = (2 * f) * (fM - Y + Lmu)
    DYgz = (-2 * fM) * gz
    DMgz = DM * gz
    nk_part = 0.5 * (Du * gz) - col(0.5 * inv_nk) * (col(c) * DMgz + col(kv) * DYgz)
    R = np.stack([f * CYM, ff * VMM, fM, f, ff, Du, DM, DYgz, DMgz, nk_part]) @ _WEIGHTS
    ys, ss, s0, Rf, Rff, RDu, RDM, RDYgz, RDMgz, Rnk = R
    noise = (nv - c * c * inv_nk) * A + (c * c * inv_nk) * B
    risk = g2 + eps * eps - 2 * ys + ss + (L - 1) * noise
    risk += 2 * (L - 1) * s0 * mu + (L - 1) * (L - 2) * mu * mu
    DC, DV = -2 * Rf, Rff
    dmu = 2 * (L - 1) * s0 + 2 * (L - 1) * (L - 2) * mu
    d_kk = a * RDu
    d_vk = a * RDM
    d_kv = RDYgz - DC * g2 * c * inv_nk
    d_vv = DC * g2
    d_c = RDMgz - DC * g2 * kv * inv_nk - DV * 2 * g2 * c * inv_nk
    d_c += (L - 1) * 2 * c * inv_nk * (B - A) + dmu * lam * kappa / root
    inv_nk2 = inv_nk * inv_nk
    d_nk = Rnk + DC * g2 * c * kv * inv_nk2 + DV * g2 * c * c * inv_nk2
    d_noise = (nv - c * c * inv_nk) * dA + c * c * inv_nk * dB
    d_nk += (L - 1) * (c * c * inv_nk2 * (A - B) + d_noise * lam / (2 * rk))
    d_nk -= dmu * c * lam**3 * kappa / root**3
    d_nv = DV * g2 + (L - 1) * A
    return risk, np.stack([d_kk, d_kv, d_vk, d_vv, d_c, d_nk, d_nv])


def _risk_gradient_batch(K, V, lam, k_star, v_star, constants):
    """The risk and gradient of ``n`` pairs ``(k, v)`` at once (the rows of ``K`` and ``V``).

    ``lam`` has shape ``(n,)``. Returns the risks ``(n,)``, the gradients in
    ``k`` and ``v`` ``(n, d)``, and ``<k, k*>`` and ``<v, v*>`` ``(n,)``: for
    each row, :func:`_risk_gradient`'s numbers up to rounding.
    """
    n, d = K.shape
    stars = np.broadcast_to(np.stack([k_star, v_star], axis=1), (2 * n, d, 2))
    risk, grad, kk, vv = _risk_gradient_coords(np.concatenate([K, V]), lam, stars, constants)
    return risk, grad[:n], grad[n:], kk, vv


def _risk_gradient_coords(W, lam, stars, constants):
    """:func:`_risk_gradient_batch` on ``W = [K; V]``, each row in its own coordinates.

    ``W`` holds ``2n`` rows of ``m`` coordinates, ``stars``
    ``(2n, m, 2)`` the coordinates of ``k*`` and ``v*`` in each row's
    orthonormal basis (rows ``i`` and ``n + i`` share one). Projected
    gradient descent never leaves the span of ``k*``, ``v*`` and the start
    (every gradient lies in the span of ``k*``, ``v*``, ``k`` and ``v``), so
    ``m = 4`` coordinates carry a run exactly, whatever d.
    """
    n = len(W) // 2
    WS = np.einsum("si,sij->sj", W, stars)
    sq = np.einsum("ij,ij->i", W, W)
    c = np.einsum("ij,ij->i", W[:n], W[n:])
    p = [WS[:n, 0], WS[:n, 1], WS[n:, 0], WS[n:, 1], c, sq[:n], sq[n:]]
    risk, g = _risk_and_partials_batch(p, lam, constants)
    coef = np.concatenate([g[:2].T, g[2:4].T])
    swapped = np.concatenate([W[n:], W[:n]])
    cross = np.concatenate([g[4], g[4]])[:, None]
    twice = 2 * np.concatenate([g[5], g[6]])[:, None]
    grad = np.einsum("sij,sj->si", stars, coef) + cross * swapped + twice * W
    return risk, grad, WS[:n, 0], WS[n:, 1]


def oracle_risk(task, lam):
    """Population risk of the erf predictor at ``(k*, v*)`` and temperature ``lam``.

    Parameters
    ----------
    task : SingleLocationTask
        The law.
    lam : float
        The temperature lambda.

    Returns
    -------
    float
        The oracle's risk.
    """
    k_star, v_star = task.directions
    return erf_risk(k_star, v_star, lam, task)


def swapped_point(task, lam, learning_rate="auto", max_steps=200_000, tol=1e-9):
    """The stationary point near the swapped pair ``(k, v) = (v*, k*)``, and its risk.

    Projected gradient descent on the sphere at the fixed temperature
    ``lam``, started at ``k = v*``, ``v = k*``: the gradients stay in the
    span of ``k*`` and ``v*``, so the run stays in that plane and ends at
    the stationary point where runs that put the key on the *value*
    direction end (``k = +-v*``, ``v`` mostly along ``+-k*``; signs aside,
    the same predictor). At small d its risk is *below* the oracle's at the
    same temperature; as d grows it rises above it.

    Parameters
    ----------
    task : SingleLocationTask
        The law.
    lam : float
        The temperature lambda.
    learning_rate : float or "auto", default="auto"
        Step size; ``"auto"``: ``0.5 / d`` (stable at every size tried,
        d = 20 to 400).
    max_steps : int, default=200_000
        Steps at most.
    tol : float, default=1e-9
        Stops once the gradient along the sphere is below this (max norm).

    Returns
    -------
    dict
        ``risk``, ``oracle`` (the risk at ``(k*, v*)``, same ``lam``),
        ``relative_gap`` (``risk / oracle - 1``), the products ``k.k*``,
        ``k.v*``, ``v.k*``, ``v.v*``, and ``steps`` taken.

    Examples
    --------
    >>> from stsq_learn import SingleLocationTask
    >>> from stsq_learn.single_location_theory import swapped_point
    >>> point = swapped_point(SingleLocationTask(5, 50), 0.1)
    >>> round(point["relative_gap"], 3)   # 11% below the oracle at d = 50, L = 5
    -0.111
    """
    k_star, v_star = task.directions
    # v = k* tilted by 1e-3 towards a third direction w: in the plane of k* and v* the
    # run could not leave v = k*, yet where lambda sqrt(d / 2) > 1 the stationary point
    # has a part of v along such a w (any unit vector orthogonal to both: the risk
    # depends on the products alone).
    w = np.zeros_like(k_star)
    w[int(np.argmin(np.abs(k_star) + np.abs(v_star)))] = 1.0
    w -= (w @ k_star) * k_star + (w @ v_star) * v_star
    w /= np.linalg.norm(w)
    k, v = v_star.copy(), _unit_vector(k_star + 1e-3 * w)
    lam = float(lam)
    if isinstance(learning_rate, str) and learning_rate == "auto":
        learning_rate = 0.5 / task.n_features
    constants = _task_constants(task)
    step = 0
    while True:
        _, gk, gv = _risk_gradient(k, v, lam, k_star, v_star, constants)
        tangent = max(np.abs(gk - (gk @ k) * k).max(), np.abs(gv - (gv @ v) * v).max())
        if tangent < tol or step == max_steps:
            break
        k = _unit_vector(k - learning_rate * gk)
        v = _unit_vector(v - learning_rate * gv)
        step += 1
    risk = _risk_gradient(k, v, lam, k_star, v_star, constants, gradient=False)
    oracle = oracle_risk(task, lam)
    return {
        "risk": risk,
        "oracle": oracle,
        "relative_gap": risk / oracle - 1,
        "k.k*": float(k @ k_star),
        "k.v*": float(k @ v_star),
        "v.k*": float(v @ k_star),
        "v.v*": float(v @ v_star),
        "steps": step,
        "converged": bool(tangent < tol),
    }


def linear_risk(task):
    """Risk of the best linear predictor of ``y`` from the flattened row (closed form).

    With a uniform position it is ``gamma^2 + noise^2 - gamma^4 / (gamma^2 + L - 1)``:
    along ``v*`` each token is uncorrelated with the others and has variance
    ``(gamma^2 + L - 1) / L``, and covaries with ``y`` by ``gamma^2 / L``;
    nothing else covaries with ``y``. With a fixed position it is
    ``noise^2`` (the relevant token is read directly).

    Parameters
    ----------
    task : SingleLocationTask
        The law.

    Returns
    -------
    float
        The risk of the best linear predictor (with an intercept).
    """
    g2, e2 = task.gamma**2, task.noise**2
    if task.position is not None:
        return e2
    return g2 + e2 - g2 * g2 / (g2 + task.seq_len - 1)


def _posterior_mean(X, task):
    """``E[y | X] = sum_l P(J0 = l | X) <x_l, v*>`` (uniform prior on the position)."""
    k_star, v_star = task.directions
    a, g = task.mean_norm, task.gamma
    sq = np.einsum("nld,nld->nl", X, X)
    along_k = X @ k_star
    # log N(x; a k*, g^2 I) - log N(x; 0, I), up to a constant shared by the positions
    log_ratio = -(sq - 2 * a * along_k) / (2 * g * g) + sq / 2
    log_ratio -= log_ratio.max(axis=1, keepdims=True)
    post = np.exp(log_ratio)
    post /= post.sum(axis=1, keepdims=True)
    return np.sum(post * (X @ v_star), axis=1)


def bayes_risk(task, n_samples=200_000, random_state=0, chunk=20_000):
    """Monte Carlo estimate of the Bayes risk ``E[(y - E[y | X])^2]``, with its standard error.

    The Bayes predictor weighs each token's ``<x_l, v*>`` by the posterior
    probability that it is the relevant one; with a fixed position the
    Bayes risk is ``noise^2`` exactly.

    Parameters
    ----------
    task : SingleLocationTask
        The law.
    n_samples : int, default=200_000
        Rows drawn.
    random_state : int, RandomState instance or None, default=0
        Seed of the rows.
    chunk : int, default=20_000
        Rows drawn at a time.

    Returns
    -------
    risk, standard_error : float
        The estimate and its standard error.
    """
    if task.position is not None:
        return task.noise**2, 0.0
    rng = check_random_state(random_state)
    losses = []
    for start in range(0, n_samples, chunk):
        X, y = task.sample(min(chunk, n_samples - start), random_state=rng)
        losses.append((y - _posterior_mean(X, task)) ** 2)
    losses = np.concatenate(losses)
    return float(losses.mean()), float(losses.std(ddof=1) / np.sqrt(len(losses)))


def erf_attention(X, k, v, lam):
    """The erf predictor ``T(X) = sum_l erf(lam <x_l, k>) <x_l, v>`` on rows ``X``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, seq_len, n_features)
        Rows.
    k, v : ndarray of shape (n_features,)
        Key and value.
    lam : float
        The temperature lambda.

    Returns
    -------
    ndarray of shape (n_samples,)
        One prediction per row.
    """
    X = np.asarray(X, dtype=np.float64)
    return np.sum(erf(lam * (X @ k)) * (X @ v), axis=1)
