"""The isotropic floor: the lowest error an attention matrix ``W = gamma I`` reaches.

With stochastic positional encodings, training drives the positional block of
W towards ``gamma I``. The error of that W at its best
gamma is the floor a width allows: the point SPE training converges to.
:func:`isotropic_floor` computes it by Monte Carlo, in time independent of
the width.

The computation
---------------
With ``W = gamma I`` the score of position t is ``gamma p_t^T s`` with
``s = sum_{j in S} p_j`` and every ``p`` i.i.d. uniform on the unit sphere
``S^(m-1)``. Two facts make it cheap:

* For a selected t the score is ``gamma`` times row t of the Gram matrix of
  the q selected encodings summed. That Gram matrix has the law of the
  normalised Gram matrix of q standard Gaussian vectors in ``R^m``, which the
  Bartlett decomposition draws from ``O(q^2)`` numbers (chi and normal
  variates), whatever m.
* For an unselected t, ``p_t`` is independent of s, so ``p_t^T s`` has
  exactly the law ``||s|| c_t``, with ``c_t`` one coordinate of a uniform
  unit vector: ``c = 2B - 1``, ``B ~ Beta((m-1)/2, (m-1)/2)`` (``c = +-1``
  at m = 1).

Tokens are i.i.d. standard Gaussian and independent of the attention weights
``a``, so given ``a`` the expected relative MSE is exactly
``q sum_t (a_t - [t in S] / q)^2``: no token is drawn, and the floor does
not depend on the token dimension d. All gammas are scored on the same draws
(common random numbers), first on a logarithmic grid, then refined by a
golden-section search around the best grid point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_n_selected, check_positive_int

__all__ = ["IsotropicFloor", "isotropic_floor"]

_GRID = np.geomspace(0.25, 256.0, 21)  # gammas of the coarse search (factor sqrt(2) apart)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_CHUNK_ELEMENTS = 2**21  # draws x rows x positions scored at once (8 MiB of float32 scores)


@dataclass(frozen=True)
class IsotropicFloor:
    """The result of :func:`isotropic_floor`.

    Attributes
    ----------
    relative_mse : float
        The lowest relative MSE (``1 - R^2``) of ``W = gamma I`` at this width.
    gamma : float
        The gamma that reaches it (the smallest, where several reach it to
        float precision): ``0.0`` when uniform attention is best (every
        position selected), ``math.inf`` when only the limit of a growing
        gamma does, hard attention spread evenly over the top-scoring
        positions (this happens for q = 1 at small widths).
    std_error : float
        Monte-Carlo standard error of ``relative_mse`` (over the rows drawn).
    seq_len, n_selected, width, n_pe_samples, n_samples : int
        The arguments it was computed for.
    gammas : ndarray of shape (n_gammas,)
        The coarse grid of gammas (0 first, ``inf`` last).
    relative_mse_curve : ndarray of shape (n_gammas,)
        The relative MSE at each of ``gammas``, on the same draws.
    """

    relative_mse: float
    gamma: float
    std_error: float
    seq_len: int
    n_selected: int
    width: int
    n_pe_samples: int
    n_samples: int
    gammas: np.ndarray = field(repr=False, compare=False)
    relative_mse_curve: np.ndarray = field(repr=False, compare=False)

    def __str__(self):
        return (
            f"isotropic floor at T={self.seq_len}, q={self.n_selected}, width={self.width}"
            + (f", {self.n_pe_samples} draws" if self.n_pe_samples > 1 else "")
            + f": relative MSE {self.relative_mse:.4f} +- {self.std_error:.4f}"
            f" at gamma={self.gamma:.3g}"
        )


def _selected_scores(rng, n, q, m):
    """``p_t^T s`` for the q selected positions of n rows, and ``||s||``.

    The Gram matrix of q uniform unit vectors is the normalised Gram matrix
    ``R^T R`` of q Gaussian vectors, with R their (upper-trapezoidal,
    ``min(q, m) x q``) Gram-Schmidt coefficients: chi(m - i) on the diagonal,
    standard normal above it (Bartlett).
    """
    r = min(q, m)
    R = np.triu(rng.standard_normal((n, r, q)))
    diag = np.sqrt(rng.chisquare(m - np.arange(r), size=(n, r)))
    R[:, np.arange(r), np.arange(r)] = diag
    G = R.transpose(0, 2, 1) @ R
    norms = np.sqrt(np.einsum("nii->ni", G))
    G /= norms[:, :, None] * norms[:, None, :]
    G = 0.5 * (G + G.transpose(0, 2, 1))  # exactly symmetric: tied scores stay tied
    selected = G.sum(axis=2)  # (n, q): p_t^T s for t in S
    s_norm = np.sqrt(np.maximum(selected.sum(axis=1), 0.0))  # ||s||^2 = sum of the Gram
    return selected, s_norm


def _unit_coordinates(rng, shape, m):
    """Draws of one coordinate of a uniform unit vector in ``R^m``."""
    if m == 1:
        return rng.choice(np.array([-1.0, 1.0]), size=shape)
    return 2.0 * rng.beta((m - 1) / 2.0, (m - 1) / 2.0, size=shape) - 1.0


def _draw_scores(rng, n, T, q, m, K):
    """Scores of n rows under K encoding draws, selected positions first.

    Returned as ``p_t^T s`` minus the row's largest score, in float32: every
    gamma's softmax then needs only ``exp(gamma * scores)``, never overflows,
    and the top-scoring positions are exactly 0 (tied ones too).
    """
    scores = np.empty((K, n, T), dtype=np.float32)
    for k in range(K):
        selected, s_norm = _selected_scores(rng, n, q, m)
        row = np.empty((n, T))
        row[:, :q] = selected
        row[:, q:] = s_norm[:, None] * _unit_coordinates(rng, (n, T - q), m)
        scores[k] = row - row.max(axis=1, keepdims=True)
    return scores


def _row_errors(scores, gamma, q):
    """Expected relative MSE given the attention, ``q sum_t (a_t - [t in S]/q)^2``, per row.

    ``sum_t (a_t - [t in S]/q)^2 = sum_t a_t^2 - (2/q) sum_{t in S} a_t + 1/q``.
    """
    K = scores.shape[0]
    if math.isinf(gamma):  # the limit: even weight on the tied maxima
        weights = (scores == 0.0).astype(np.float32)
    else:
        weights = np.exp(np.float32(gamma) * scores)
    weights /= weights.sum(axis=2, keepdims=True, dtype=np.float64).astype(np.float32)
    attn = weights[0] if K == 1 else weights.mean(axis=0)
    sq = np.einsum("nt,nt->n", attn, attn, dtype=np.float64)
    sel = attn[:, :q].sum(axis=1, dtype=np.float64)
    return q * sq - 2.0 * sel + 1.0


def simulation_bytes(seq_len, n_samples=100_000, n_pe_samples=1):
    """Bytes :func:`isotropic_floor` holds at its peak for these sizes (an upper estimate).

    The scores of every simulated row are kept (float32, all gammas are
    scored on the same draws), ``4 * n_samples * n_pe_samples * seq_len``
    bytes, plus the temporaries of one chunk of rows (its float64 draws and
    each gamma's weights), about 40 bytes per score of the chunk. The
    arguments are :func:`isotropic_floor`'s.
    """
    per_row = seq_len * n_pe_samples
    chunk_rows = min(n_samples, max(1, _CHUNK_ELEMENTS // per_row))
    return 4 * n_samples * per_row + 40 * chunk_rows * per_row


class _Objective:
    """Mean relative MSE as a function of gamma, on fixed draws, computed in chunks."""

    def __init__(self, chunks, q):
        self.chunks, self.q = chunks, q

    def rows(self, gamma):
        return np.concatenate([_row_errors(c, gamma, self.q) for c in self.chunks])

    def __call__(self, gamma):
        return float(self.rows(gamma).mean())


def _check_width_etc(seq_len, n_selected, width, n_samples, n_pe_samples):
    seq_len = check_positive_int(seq_len, "seq_len")
    n_selected = check_positive_int(n_selected, "n_selected")
    check_n_selected(n_selected, seq_len)
    width = check_positive_int(width, "width")
    n_samples = check_positive_int(n_samples, "n_samples")
    n_pe_samples = check_positive_int(n_pe_samples, "n_pe_samples")
    return seq_len, n_selected, width, n_samples, n_pe_samples


def isotropic_floor(
    seq_len, n_selected, width, *, n_samples=100_000, n_pe_samples=1, random_state=None
):
    """Lowest relative MSE that an isotropic attention matrix ``W = gamma I`` reaches.

    Training a :class:`~stsq_learn.SparseTokenSelector` with stochastic
    positional encodings drives the positional block of W towards
    ``gamma I``; the error of that W at the best gamma is the best a width
    allows, so the ratio of a trained model's relative MSE to this floor says
    how far training still is from it. The floor does not depend on the token
    dimension ``n_features`` (nor on the tokens' scale): given the attention
    weights, the expected error of Gaussian tokens is a function of the
    weights alone.

    The rows are simulated, not sampled as tokens: only the Gram matrix of
    the q selected encodings (``O(q^2)`` numbers, whatever the width) and one
    coordinate of a unit vector per unselected position are drawn, so the
    cost is ``O(n_samples * n_pe_samples * (seq_len + n_selected^2))`` per
    gamma and does not grow with the width. The best gamma is found on a
    logarithmic grid from 0.25 to 256 (plus 0 and infinity), then refined by
    a golden-section search, every gamma scored on the same draws.

    Parameters
    ----------
    seq_len : int
        Sequence length T.
    n_selected : int
        Number q of selected tokens per row, ``1 <= n_selected <= seq_len``.
    width : int
        Width m of the positional encodings.
    n_samples : int, default=100_000
        Rows simulated. The standard error of the result falls like
        ``1 / sqrt(n_samples)`` (about 0.0004 at the default for T=64, q=4,
        width 256).
    n_pe_samples : int, default=1
        Encoding draws the attention is averaged over, as
        ``SparseTokenSelector(n_pe_samples=K)`` at predict time. The best
        gamma grows with K.
    random_state : int, RandomState instance or None, default=None
        Seed of the simulation; an int gives the same result every time.

    Returns
    -------
    floor : IsotropicFloor
        ``floor.relative_mse`` (the floor, ``1 - R^2``), ``floor.gamma`` (the
        gamma reaching it), ``floor.std_error``, and the coarse curve
        ``floor.gammas`` / ``floor.relative_mse_curve``. For q = 1, and for
        q = 2 (whose two selected scores tie exactly, so hard attention on
        both is exact), the error keeps falling as gamma grows and the floor
        is about 0 once the width is a few dozen: ``gamma`` is then the
        first gamma where it is reached to float precision, or ``math.inf``
        for the limit of a growing gamma. ``gamma`` is 0.0 when every
        position is selected (uniform attention is exact).

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If an argument is below 1 or ``n_selected > seq_len``.

    See Also
    --------
    SparseTokenSelector : The model whose training converges to this floor.
    stsq_learn.nn.positional_alignment : gamma and cos(W_pp, I) of a learned W.

    Examples
    --------
    >>> from stsq_learn import isotropic_floor
    >>> floor = isotropic_floor(64, 4, 256, n_samples=20_000, random_state=0)
    >>> round(floor.relative_mse, 2), round(floor.gamma)
    (0.11, 4)
    >>> floor.relative_mse < isotropic_floor(64, 4, 64, n_samples=20_000,
    ...                                      random_state=0).relative_mse
    True

    A trained model's relative MSE (``1 - model.score(X, y)``) divided by
    ``floor.relative_mse`` is how many times above the best of its width it is.
    """
    T, q, m, n, K = _check_width_etc(seq_len, n_selected, width, n_samples, n_pe_samples)
    rng = check_random_state(random_state)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // (T * K))
    chunks = [
        _draw_scores(rng, min(rows_per_chunk, n - start), T, q, m, K)
        for start in range(0, n, rows_per_chunk)
    ]
    objective = _Objective(chunks, q)
    gammas = np.concatenate([[0.0], _GRID, [math.inf]])
    curve = np.array([objective(g) for g in gammas])
    i = int(np.argmin(curve))
    best_gamma, best = float(gammas[i]), float(curve[i])
    if 1 <= i <= len(_GRID):
        # Golden-section search in log(gamma) between the neighbours of the best grid point.
        lo = math.log(gammas[i - 1]) if i > 1 else math.log(_GRID[0]) - math.log(2.0)
        hi = math.log(gammas[i + 1]) if i < len(_GRID) else math.log(_GRID[-1]) + math.log(2.0)
        a, b = lo + (1 - _GOLDEN) * (hi - lo), lo + _GOLDEN * (hi - lo)
        fa, fb = objective(math.exp(a)), objective(math.exp(b))
        for _ in range(30):
            if fa <= fb:
                hi, b, fb = b, a, fa
                a = lo + (1 - _GOLDEN) * (hi - lo)
                fa = objective(math.exp(a))
            else:
                lo, a, fa = a, b, fb
                b = lo + _GOLDEN * (hi - lo)
                fb = objective(math.exp(b))
            if hi - lo < 1e-3:
                break
        g, f = (a, fa) if fa <= fb else (b, fb)
        if f < best:
            best_gamma, best = math.exp(g), f
    row_errors = objective.rows(best_gamma)
    return IsotropicFloor(
        relative_mse=best,
        gamma=best_gamma,
        std_error=float(row_errors.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
        seq_len=T,
        n_selected=q,
        width=m,
        n_pe_samples=K,
        n_samples=n,
        gammas=gammas,
        relative_mse_curve=curve,
    )
