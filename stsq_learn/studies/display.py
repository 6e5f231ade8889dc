"""Drawing a study: medians over the seeds with their min-max band, beside a law or a theory,
as scikit-learn's displays draw (:class:`~sklearn.model_selection.ValidationCurveDisplay`)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import numpy as np

from .laws import Law
from .table import StudyTable

__all__ = ["BandDisplay"]

_STYLES = ("fill_between", "errorbar", None)
_KW = ("line_kw", "fill_between_kw", "errorbar_kw", "theory_kw", "law_kw")


def _kw_for(kw, key):
    """The style of curve ``key``: ``kw`` itself, or ``kw[key]`` where ``kw`` maps curves."""
    if not kw:
        return {}
    if all(isinstance(v, dict) for v in kw.values()):
        return dict(kw.get(key, {}))
    return dict(kw)


def _integers(values):
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return values.size > 0 and bool(np.all(values == np.round(values)))


def _span(lo, hi, n, logx):
    return np.geomspace(lo, hi, n) if logx and lo > 0 else np.linspace(lo, hi, n)


@dataclass(eq=False, repr=False)
class BandDisplay:
    """Medians over the seeds with their min-max band, one curve per hue, beside laws and theory.

    Build it with :meth:`from_table`. A law is drawn over the range it was fitted
    on, a theory curve over the data's; an axis of integers gets integer ticks.

    Parameters
    ----------
    bands : StudyTable
        :meth:`StudyTable.bands` of the measured column.
    x : str
        The bands' x column.
    hue : str or None, default=None
        The column telling curves apart (None: one curve).
    laws : Law or dict, default=None
        A law for the one curve, or hue value to its law.
    law_variable : str or None, default=None
        The variable a law's legend names (None: the x column's name).
    theory : callable, tuple or dict, default=None
        A theory curve, dashed: ``f(x)`` or ``(xs, ys)``; or hue value (or a label) to one.
    bounds : StudyTable or None, default=None
        Lower bounds (thresholds not reached), drawn as open triangles.
    xlabel, ylabel, title : str or None, default=None
        Axis labels and title (None: the column names).

    Attributes
    ----------
    figure_, ax_ : matplotlib Figure and Axes
        Where it drew.
    lines_, bands_ : dict
        Hue value to the median's line, to its band (shaded or error bars).
    law_lines_, theory_lines_, bound_lines_ : dict
        Hue value (or label) to the law's, theory's or bounds' line.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from stsq_learn.studies import BandDisplay, StudyTable, fit_law
    >>> table = StudyTable({"model": ["attention"] * 6, "seed": [0, 1] * 3,
    ...                     "param_seq_len": [8, 8, 16, 16, 32, 32],
    ...                     "value": [8, 10, 12, 12, 16, 18]})
    >>> law = fit_law(*table.xy("seq_len", "value"), "log2")
    >>> display = BandDisplay.from_table(table, x="seq_len", y="value", laws=law,
    ...                                  logx=True, law_variable="T",
    ...                                  line_kw={"marker": "s"})
    >>> sorted(display.lines_), display.ax_.get_xscale()
    (['attention'], 'log')
    >>> display.lines_["attention"].get_marker()
    's'
    >>> display.law_lines_["attention"].get_label()
    '-3.33 + 4 log2(T) (fit R^2 0.92)'
    """

    bands: StudyTable
    _: KW_ONLY
    x: str
    hue: str | None = None
    laws: Law | dict | None = None
    law_variable: str | None = None
    theory: object = None
    bounds: StudyTable | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    title: str | None = None

    @classmethod
    def from_table(
        cls,
        table,
        *,
        x,
        y,
        hue="model",
        bound=None,
        ax=None,
        laws=None,
        law_variable=None,
        theory=None,
        xlabel=None,
        ylabel=None,
        title=None,
        logx=False,
        logy=False,
        labels=None,
        colors=None,
        legend=True,
        line_kw=None,
        fill_between_kw=None,
        errorbar_kw=None,
        theory_kw=None,
        law_kw=None,
        style="fill_between",
    ):
        """Compute the bands of ``y`` along ``x`` from a study's table and draw them.

        Parameters
        ----------
        table : StudyTable
            A study's rows (every seed's).
        x, y : str
            The columns along which and of which the bands are drawn.
        hue : str or None, default="model"
            The column telling curves apart (None or absent: one curve).
        bound : str or None, default=None
            A column of lower bounds, drawn where the threshold was not reached.
        ax : matplotlib Axes, default=None
            Where to draw (None: a new figure).
        laws, law_variable, theory, xlabel, ylabel, title : see the class
            The laws and theory curves drawn beside, the axes' labels and the title.
        logx, logy, labels, colors, legend, line_kw, fill_between_kw, \
errorbar_kw, theory_kw, law_kw, style : see :meth:`plot`
            How it is drawn.

        Returns
        -------
        BandDisplay
            The display, drawn.
        """
        if not isinstance(table, StudyTable):
            raise TypeError(f"table must be a StudyTable, got {type(table).__name__}.")
        if hue is not None and hue not in table.columns and f"param_{hue}" not in table.columns:
            hue = None
        bands = table.bands(x, y, by=() if hue is None else (hue,))
        x_name = bands.meta["along"]
        hue_name = None if hue is None else bands.columns[0]
        bounds = None
        if bound is not None:
            rows = table[~np.isfinite(table.xy(x_name, y, finite=False)[1])]
            bounds = StudyTable({c: rows[c] for c in (hue_name, x_name, bound) if c is not None})
        kw = dict(x=x_name, hue=hue_name, laws=laws, law_variable=law_variable, theory=theory)
        kw.update(xlabel=xlabel or x_name.removeprefix("param_"), ylabel=ylabel or y, title=title)
        display = cls(bands, bounds=bounds, **kw)
        kw = dict(line_kw=line_kw, fill_between_kw=fill_between_kw, errorbar_kw=errorbar_kw)
        kw.update(theory_kw=theory_kw, law_kw=law_kw, style=style, bound=bound)
        return display.plot(
            ax, logx=logx, logy=logy, labels=labels, colors=colors, legend=legend, **kw
        )

    def plot(
        self,
        ax=None,
        *,
        logx=False,
        logy=False,
        labels=None,
        colors=None,
        legend=True,
        line_kw=None,
        fill_between_kw=None,
        errorbar_kw=None,
        theory_kw=None,
        law_kw=None,
        style="fill_between",
        bound="bound",
    ):
        """Draw the bands (and the laws, theory and bounds) on ``ax``.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw (None: a new figure).
        logx, logy : bool, default=False
            Log-scaled axes (base 2 for x, and for y where it holds integers).
        labels, colors : dict, default=None
            Hue value to its legend label, to its colour.
        legend : bool, default=True
            Draw a legend.
        line_kw, fill_between_kw, errorbar_kw : dict, default=None
            Properties of the medians' lines (``ax.plot``, over ``marker="o"``, ``ms=4`` and the
            hue's colour), of the shaded bands (``ax.fill_between``, over ``alpha=0.2``), of the
            error bars (``ax.errorbar``, over ``capsize=3``): one dict for every curve, or hue
            value to a dict.
        theory_kw, law_kw : dict, default=None
            Properties of the theory curves (dashed) and the laws' lines
            (dotted), likewise (a theory's label for a theory curve).
        style : {"fill_between", "errorbar", None}, default="fill_between"
            The band: shaded, as error bars at the points, or not drawn
            (one seed draws its curve alone whatever the style).
        bound : str, default="bound"
            The column of :attr:`bounds` holding the lower bounds.

        Returns
        -------
        BandDisplay
            ``self``, with ``figure_``, ``ax_`` and the lines drawn.
        """
        import matplotlib.pyplot as plt

        if style not in _STYLES:
            raise ValueError(f"style must be one of {_STYLES}, got {style!r}.")
        for name, kw in zip(_KW, (line_kw, fill_between_kw, errorbar_kw, theory_kw, law_kw)):
            if kw is not None and not isinstance(kw, dict):
                raise TypeError(
                    f"{name} must be a dict of matplotlib properties (or hue value to such a "
                    f"dict) or None, got {type(kw).__name__}: {kw!r}."
                )
        groups = [((None,), self.bands)] if self.hue is None else self.bands.groups(self.hue)
        curves = [(key[0], part) for key, part in groups]
        if isinstance(self.laws, Law) and len(curves) > 1:  # never drop a law: refuse it
            keys = [key for key, _ in curves]
            raise ValueError(
                f"laws is one Law and the display draws {len(curves)} curves ({keys}): give "
                "hue value to its law, e.g. laws={" + repr(keys[0]) + ": law}."
            )
        if self.laws is not None and not isinstance(self.laws, (Law, dict)):
            raise TypeError(
                f"laws must be a Law, a dict of hue value to Law or None, got "
                f"{type(self.laws).__name__}."
            )
        if ax is None:
            _, ax = plt.subplots(layout="constrained")
        labels, colors = dict(labels or {}), dict(colors or {})
        self.lines_, self.bands_, self.law_lines_, self.theory_lines_ = {}, {}, {}, {}
        self.bound_lines_ = {}
        x_seen, y_seen = [], []
        for i, (key, part) in enumerate(curves):
            (xs, med), (_, lo), (_, hi) = (part.xy(self.x, c) for c in ("median", "min", "max"))
            color = colors.get(key, f"C{i}")
            label = labels.get(key, key if key is not None else self.ylabel)
            kw = {"marker": "o", "ms": 4, "color": color, **_kw_for(line_kw, key)}
            if len(xs) == 0:  # no seed reached a value: keep the legend entry
                (self.lines_[key],) = ax.plot([], [], label=f"{label} (none reached)", **kw)
            else:
                (self.lines_[key],) = ax.plot(xs, med, label=label, **kw)
                color = self.lines_[key].get_color()
                several = int(np.max(part["n"])) > 1
                if several and style == "fill_between":
                    fkw = {"color": color, "alpha": 0.2, "lw": 0, **_kw_for(fill_between_kw, key)}
                    self.bands_[key] = ax.fill_between(xs, lo, hi, **fkw)
                elif several and style == "errorbar":
                    ekw = {"fmt": "none", "ecolor": color, "capsize": 3}
                    ekw.update(_kw_for(errorbar_kw, key))
                    self.bands_[key] = ax.errorbar(xs, med, yerr=[med - lo, hi - med], **ekw)
            self._law(ax, key, color, logx, law_kw)
            bound_x, bound_y = self._bounds(ax, key, color, label, bound)
            x_seen += [*xs, *bound_x]  # a curve of bounds alone still gets its ticks
            y_seen += [*med, *bound_y]
        self._theory(ax, x_seen, logx, theory_kw)
        _axes(ax, x_seen, y_seen, logx, logy)
        ax.set_xlabel(self.xlabel or self.x)
        ax.set_ylabel(self.ylabel or "")
        if self.title:
            ax.set_title(self.title)
        if legend:
            ax.legend(fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _law(self, ax, key, color, logx, law_kw):
        law = self.laws.get(key) if isinstance(self.laws, dict) else self.laws
        if law is not None:
            xs = _span(*law.x_range, 50, logx)
            name = self.law_variable or self.x.removeprefix("param_")
            kw = {"ls": ":", "color": color, "lw": 1.5, **_kw_for(law_kw, key)}
            (self.law_lines_[key],) = ax.plot(xs, law(xs), label=law.label(name), **kw)

    def _bounds(self, ax, key, color, label, bound):
        """Draw the bounds of curve ``key``; their x and y."""
        if self.bounds is None or not len(self.bounds):
            return [], []
        rows = self.bounds if self.hue is None else self.bounds.where(**{self.hue: key})
        xs, bs = rows.xy(self.x, bound)
        if len(xs):
            (self.bound_lines_[key],) = ax.plot(
                xs, bs, "^", mfc="none", color=color, ms=8, label=f"{label}: not reached, > bound"
            )
        return list(xs), list(bs)

    def _theory(self, ax, x_seen, logx, theory_kw):
        if self.theory is None:
            return
        items = self.theory.items() if isinstance(self.theory, dict) else [("theory", self.theory)]
        for name, curve in items:
            color = self.lines_[name].get_color() if name in self.lines_ else "k"
            label = f"{name}: theory" if name in self.lines_ and name is not None else str(name)
            if callable(curve):
                if not x_seen:
                    continue
                xs = _span(min(x_seen), max(x_seen), 100, logx)
                ys = np.asarray(curve(xs), dtype=float)
            else:
                xs, ys = (np.asarray(a, dtype=float) for a in curve)
            kw = {"ls": "--", "color": color, "lw": 1.2, **_kw_for(theory_kw, name)}
            (self.theory_lines_[name],) = ax.plot(xs, ys, label=label, **kw)


def _axes(ax, x_seen, y_seen, logx, logy):
    """Log scales, and ticks an integer axis reads as integers (4, 8, 16)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

    if logx:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(x_seen))
        if ticks:
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
    elif _integers(x_seen):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if logy and _integers(y_seen) and min(y_seen, default=0) >= 1:
        ax.set_yscale("log", base=2)
        values = sorted({int(v) for v in y_seen if np.isfinite(v)})
        if len(values) <= 10:  # a few widths or lengths: ticks at them
            ax.set_yticks(values, [str(v) for v in values])
            ax.minorticks_off()
        else:
            ax.yaxis.set_major_locator(LogLocator(base=2))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    elif logy:
        ax.set_yscale("log")
    elif _integers(y_seen):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
