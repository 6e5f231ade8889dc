"""Growth laws fitted by least squares to a study's points (the width attention needs grows like
``log T``, a fully-connected net's like ``T``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["LAWS", "Law", "compare_laws", "fit_law", "fit_laws"]

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
    r2, rms : float
        The fit's R^2 on its points, and the root mean square of its residuals.
    residuals : tuple of float
        ``y - law(x)``, one per point, in the order given.
    x_range : tuple of float
        The smallest and largest x fitted (a display draws the law there).
    n_points : int
        Points fitted.
    origin : bool, default=False
        Whether the law goes through the origin (``a`` fixed at 0).
    n_fits : int, default=1
        Fits it summarises (more than one for :meth:`median`).

    Examples
    --------
    >>> from stsq_learn.studies import fit_law
    >>> law = fit_law([8, 16, 32, 64], [10, 14, 18, 22], "log2")
    >>> round(law.params["b"], 6), round(law.r2, 6)
    (4.0, 1.0)
    >>> round(float(law(128)), 6)
    26.0
    >>> law.label("T")
    '-2 + 4 log2(T) (fit R^2 1.00)'
    """

    name: str
    params: dict
    r2: float
    rms: float
    residuals: tuple
    x_range: tuple
    n_points: int
    origin: bool = False
    n_fits: int = 1

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
        if self.origin:
            return f"{p['b']:.3g} {term}"
        sign = "-" if p["b"] < 0 else "+"
        a = p["a"] if abs(p["a"]) > 1e-9 * max(1.0, abs(p["b"])) else 0.0  # rounding, not a
        return f"{a:.3g} {sign} {abs(p['b']):.3g} {term}"

    def label(self, x="x"):
        """A legend label: the formula in the variable ``x``, and the fit's R^2.

        Parameters
        ----------
        x : str, default="x"
            The name of the variable (``"T"``, ``"L"``).

        Returns
        -------
        str
            ``"0.6 + 8.5 log2(T) (fit R^2 0.99)"``, or for a median of several
            fits ``"... (median of 3 fits, R^2 0.99)"``.
        """
        fits = f"median of {self.n_fits} fits," if self.n_fits > 1 else "fit"
        return f"{self.formula.replace('x', x)} ({fits} R^2 {self.r2:.2f})"

    def to_dict(self):
        """JSON-ready dict of the fields.

        Returns
        -------
        dict
            The fields and the ``formula``, as :meth:`from_dict` reads them.
        """
        out = {"name": self.name, "params": dict(self.params), "formula": self.formula}
        for name in ("r2", "rms", "residuals", "x_range", "n_points", "origin", "n_fits"):
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data):
        """The law :meth:`to_dict` wrote (its ``formula`` is recomputed, not read).

        ``data`` may have been read back from JSON: its lists are read as tuples.

        Parameters
        ----------
        data : dict
            A :meth:`to_dict`.

        Returns
        -------
        Law

        Examples
        --------
        >>> from stsq_learn.studies import Law, fit_law
        >>> law = fit_law([4, 8, 16], [1.0, 2.1, 2.9], "log2")
        >>> Law.from_dict(law.to_dict()) == law
        True
        """
        if not isinstance(data, dict) or data.get("name") not in LAWS:
            raise ValueError(
                f"data must be a Law.to_dict() with a 'name' of {sorted(LAWS)}, got {data!r}."
            )
        return cls(
            name=data["name"],
            params={k: float(v) for k, v in data["params"].items()},
            r2=float(data["r2"]),
            rms=float(data["rms"]),
            residuals=tuple(float(r) for r in data.get("residuals", ())),
            x_range=tuple(float(v) for v in data["x_range"]),
            n_points=int(data["n_points"]),
            origin=bool(data.get("origin", False)),
            n_fits=int(data.get("n_fits", 1)),
        )

    @classmethod
    def median(cls, laws):
        """One law summarising several fits of one law: each parameter's median.

        Parameters
        ----------
        laws : sequence or dict of Law
            Fits of one law (one ``name`` and ``origin``); a dict's values,
            None entries (too few points) left out.

        Returns
        -------
        Law or None
            The medians (``r2`` and ``rms`` too) over the fits' range, no
            residuals; None when no law is given.

        Examples
        --------
        >>> from stsq_learn.studies import Law, fit_law
        >>> laws = [fit_law([4, 8, 16], [b, 2 * b, 3 * b], "log2")
        ...         for b in (1.0, 2.0, 4.0)]
        >>> round(Law.median(laws).params["b"], 9), Law.median(laws).n_fits
        (2.0, 3)
        """
        laws = [law for law in (laws.values() if isinstance(laws, dict) else laws) if law]
        if not laws:
            return None
        kinds = {(law.name, law.origin) for law in laws}
        if len(kinds) > 1:
            raise ValueError(f"the median of laws needs one kind of law, got {sorted(kinds)}.")
        if len(laws) == 1:
            return laws[0]
        return replace(
            laws[0],
            params={k: float(np.median([law.params[k] for law in laws])) for k in laws[0].params},
            r2=float(np.median([law.r2 for law in laws])),
            rms=float(np.median([law.rms for law in laws])),
            residuals=(),
            x_range=(min(law.x_range[0] for law in laws), max(law.x_range[1] for law in laws)),
            n_points=sum(law.n_points for law in laws),
            n_fits=sum(law.n_fits for law in laws),
        )


def fit_law(x, y, law="log2", *, origin=False):
    """Fit one growth law to points ``(x, y)`` by least squares.

    Linear laws are fitted as ``y = a + b f(x)`` (``origin=True``: ``y = b f(x)``), ``power`` as
    ``log y = log b + c log x``. Points not finite (a threshold not reached) are left out; a fit
    needs one point more than its parameters.

    Parameters
    ----------
    x, y : array-like of shape (n,)
        The sizes and the measured values (every seed's, side by side).
    law : {"log", "log2", "sqrt", "linear", "power"}, default="log2"
        The law.
    origin : bool, default=False
        Fit through the origin, ``a = 0`` (not for ``"power"``); ``r2`` is
        still measured against the points' mean.

    Returns
    -------
    Law
        The fitted law.

    Examples
    --------
    >>> from stsq_learn.studies import fit_law
    >>> fit_law([4, 16, 64], [4.0, 8.0, 16.0], "sqrt", origin=True).formula
    '2 sqrt(x)'
    """
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must hold as many values, got {x.size} and {y.size}.")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if law not in LAWS:
        raise ValueError(f"law must be one of {sorted(LAWS)}, got {law!r}.")
    if law in ("log", "log2", "sqrt", "power") and (x <= 0).any():
        raise ValueError(f"the law {law!r} needs x > 0, got x = {x[x <= 0][0]!r}.")
    if law == "power" and (y <= 0).any():
        raise ValueError(f"the law 'power' needs y > 0, got y = {y[y <= 0][0]!r}.")
    if origin and law == "power":
        raise ValueError("the law 'power' (b x^c) has no intercept: origin=True does not apply.")
    need = 2 if origin else 3
    if len(x) < need or (not origin and np.ptp(x) == 0):
        raise ValueError(
            f"fit_law needs at least {need} finite points"
            f"{'' if origin else ' at 2 distinct x'} for the law {law!r} "
            f"(its parameters and a residual), got {len(x)} at {len(set(x.tolist()))}."
        )
    if law == "power":
        c, log_b = np.polyfit(np.log(x), np.log(y), 1)
        params = {"b": float(np.exp(log_b)), "c": float(c)}
        fitted = params["b"] * x ** params["c"]
    elif origin:
        f = LAWS[law][1](x)
        params = {"a": 0.0, "b": float(f @ y / (f @ f)) if f @ f > 0 else 0.0}
        fitted = params["b"] * f
    else:
        b, a = np.polyfit(LAWS[law][1](x), y, 1)
        params = {"a": float(a), "b": float(b)}
        fitted = a + b * LAWS[law][1](x)
    resid = y - fitted
    # Equal values have no variance to explain: a law that meets them is exact (R^2 1),
    # else it explains nothing (0); the mean's rounding is not divided by itself.
    total = 0.0 if np.ptp(y) == 0 else float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else float(np.allclose(resid, 0))
    rms, residuals = float(math.sqrt(np.mean(resid**2))), tuple(float(r) for r in resid)
    x_range = (float(x.min()), float(x.max()))
    return Law(law, params, float(r2), rms, residuals, x_range, len(x), bool(origin))


def fit_laws(table, x, y, law="log2", *, origin=False, by="seed"):
    """One law per seed (or per value of ``by``): how a law is fitted over seeds.

    Parameters
    ----------
    table : StudyTable
        The rows (select one curve first: ``table.where(model=...)``).
    x, y : str
        The columns.
    law, origin
        As for :func:`fit_law`.
    by : str, default="seed"
        The column whose values get a law each.

    Returns
    -------
    dict
        Value of ``by`` (in order of first appearance) to its :class:`Law`, or
        None where its points cannot carry the law.

    Examples
    --------
    >>> from stsq_learn.studies import StudyTable, fit_laws
    >>> table = StudyTable({"seed": [0, 0, 0, 1, 1, 1],
    ...                     "param_seq_len": [4, 8, 16] * 2,
    ...                     "value": [2, 3, 4, 2, 4, 6]})
    >>> laws = fit_laws(table, "seq_len", "value")
    >>> {s: round(law.params["b"], 9) for s, law in laws.items()}
    {0: 1.0, 1: 2.0}
    """
    out = {}
    for key, part in table.groups(by):
        try:
            out[key[0]] = fit_law(*part.xy(x, y), law, origin=origin)
        except ValueError:
            out[key[0]] = None
    return out


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
    laws = (laws,) if isinstance(laws, str) else laws
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
