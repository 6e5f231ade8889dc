"""Growth laws: least-squares fits of a measured quantity against a size.

The theory of attention states its results as growth laws: the width the
attention model needs grows like ``log T``, the fully-connected net's like
``T``; a signal threshold like ``log L`` against ``sqrt L``.
:func:`fit_law` fits one such law to a study's points (every seed's value
at every size, so the fit sees the spread); :func:`compare_laws` fits
several and orders them by how well they describe the points. A
:class:`Law` knows the range of sizes it was fitted on, and the displays
(:class:`~stsq_learn.studies.BandDisplay`) draw it only there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LAWS", "Law", "compare_laws", "fit_law"]

LAWS = {
    "log": ("a + b ln(x)", np.log),
    "log2": ("a + b log2(x)", np.log2),
    "sqrt": ("a + b sqrt(x)", np.sqrt),
    "linear": ("a + b x", lambda x: x),
    "power": ("b x^c", None),
}
"""Law name to its formula and the transform of x it is linear in (None: fitted in logs)."""


@dataclass(frozen=True)
class Law:
    """A growth law fitted by least squares: its parameters, its quality, its range.

    Attributes
    ----------
    name : str
        One of :data:`LAWS`.
    params : dict of str to float
        ``a`` and ``b`` (``"power"``: ``b`` and ``c``).
    r2 : float
        Coefficient of determination of the fit on its points.
    rms : float
        Root mean square of the residuals ``y - law(x)``.
    residuals : tuple of float
        One per point, in the order given.
    x_range : tuple of float
        The smallest and largest x fitted: the law describes the data there.
    n_points : int
        Points fitted.

    Examples
    --------
    >>> from stsq_learn.studies import fit_law
    >>> law = fit_law([8, 16, 32, 64], [10, 14, 18, 22], "log2")
    >>> round(law.params["b"], 6), round(law.r2, 6)
    (4.0, 1.0)
    >>> round(float(law(128)), 6)
    26.0
    """

    name: str
    params: dict
    r2: float
    rms: float
    residuals: tuple
    x_range: tuple
    n_points: int

    def __call__(self, x):
        """The law's value at ``x`` (a number or an array)."""
        x = np.asarray(x, dtype=np.float64)
        if self.name == "power":
            return self.params["b"] * x ** self.params["c"]
        return self.params["a"] + self.params["b"] * LAWS[self.name][1](x)

    @property
    def formula(self):
        """The law with its fitted numbers, e.g. ``"2.1 + 4.03 log2(x)"``."""
        p = self.params
        if self.name == "power":
            return f"{p['b']:.3g} x^{p['c']:.3g}"
        term = LAWS[self.name][0].split("b ", 1)[1]
        sign = "-" if p["b"] < 0 else "+"
        return f"{p['a']:.3g} {sign} {abs(p['b']):.3g} {term}"

    def label(self, x="x"):
        """A legend label: the formula in the variable ``x``, and the fit's R^2.

        Parameters
        ----------
        x : str, default="x"
            The name of the variable (``"T"``, ``"L"``).

        Returns
        -------
        str
            For example ``"0.6 + 8.5 log2(T) (fit R^2 0.99)"``.
        """
        return f"{self.formula.replace('x', x)} (fit R^2 {self.r2:.2f})"

    def to_dict(self):
        """JSON-ready dict of the fields (``formula`` added)."""
        return {
            "name": self.name,
            "params": dict(self.params),
            "formula": self.formula,
            "r2": self.r2,
            "rms": self.rms,
            "residuals": list(self.residuals),
            "x_range": list(self.x_range),
            "n_points": self.n_points,
        }


def _points(x, y, name):
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must hold as many values, got {x.size} and {y.size}.")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if name not in LAWS:
        raise ValueError(f"law must be one of {sorted(LAWS)}, got {name!r}.")
    positive = y > 0 if name == "power" else np.ones_like(y, bool)
    if name in ("log", "log2", "sqrt", "power") and (x <= 0).any():
        raise ValueError(f"the law {name!r} needs x > 0, got x = {x[x <= 0][0]!r}.")
    if not positive.all():
        raise ValueError(f"the law 'power' needs y > 0, got y = {y[~positive][0]!r}.")
    return x, y


def fit_law(x, y, law="log2"):
    """Fit one growth law to points ``(x, y)`` by least squares.

    Linear laws (``log``, ``log2``, ``sqrt``, ``linear``) are fitted as
    ``y = a + b f(x)``; ``power`` as ``log y = log b + c log x``. Points
    whose x or y is not a finite number (a threshold not reached) are left
    out. A fit needs one point more than its two parameters: a line through
    two points says nothing of a law.

    Parameters
    ----------
    x, y : array-like of shape (n,)
        The sizes and the measured values (every seed's, side by side).
    law : {"log", "log2", "sqrt", "linear", "power"}, default="log2"
        The law.

    Returns
    -------
    Law
        The fitted law.

    Raises
    ------
    ValueError
        For an unknown law, too few finite points or distinct x, or
        values outside the law's domain.
    """
    x, y = _points(x, y, law)
    if len(x) < 3 or np.ptp(x) == 0:
        raise ValueError(
            f"fit_law needs at least 3 finite points at 2 distinct x for the law {law!r} "
            f"(two parameters and a residual), got {len(x)} at {len(set(x.tolist()))}."
        )
    if law == "power":
        c, log_b = np.polyfit(np.log(x), np.log(y), 1)
        params = {"b": float(np.exp(log_b)), "c": float(c)}
        fitted = params["b"] * x ** params["c"]
    else:
        b, a = np.polyfit(LAWS[law][1](x), y, 1)
        params = {"a": float(a), "b": float(b)}
        fitted = a + b * LAWS[law][1](x)
    resid = y - fitted
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else float(np.allclose(resid, 0))
    return Law(
        name=law,
        params=params,
        r2=float(r2),
        rms=float(math.sqrt(np.mean(resid**2))),
        residuals=tuple(float(r) for r in resid),
        x_range=(float(x.min()), float(x.max())),
        n_points=len(x),
    )


def compare_laws(x, y, laws=("log2", "sqrt", "linear", "power")):
    """Fit several laws to the same points; best first (least rms residual).

    Parameters
    ----------
    x, y : array-like of shape (n,)
        The points, as for :func:`fit_law`.
    laws : sequence of str, default=("log2", "sqrt", "linear", "power")
        The laws to try; one whose domain excludes the points is left out.

    Returns
    -------
    list of Law
        The fitted laws, ordered by rms residual.

    Examples
    --------
    >>> from stsq_learn.studies import compare_laws
    >>> [law.name for law in compare_laws([4, 8, 16, 32], [9, 12, 15, 18])][0]
    'log2'
    """
    if isinstance(laws, str):
        laws = (laws,)
    for name in laws:
        if name not in LAWS:
            raise ValueError(f"laws must name laws of {sorted(LAWS)}, got {name!r}.")
    fitted = []
    for name in laws:
        try:
            fitted.append(fit_law(x, y, name))
        except ValueError:
            continue  # outside the law's domain, or too few points
    if not fitted:
        fit_law(x, y, laws[0])  # raises the reason
    return sorted(fitted, key=lambda law: law.rms)
