"""Drawing a study: medians over the seeds with their min-max band, beside a law or a theory.

:class:`BandDisplay` follows scikit-learn's displays
(:class:`~sklearn.model_selection.ValidationCurveDisplay`): the numbers are
computed apart from the drawing (:meth:`BandDisplay.from_table` takes a
:class:`~stsq_learn.studies.StudyTable`, saved or fresh), :meth:`BandDisplay.plot`
draws on any axes, and the display keeps what it drew (``figure_``,
``ax_``, ``lines_``). Styles go in as scikit-learn's displays take them
(``line_kw``, ``fill_between_kw``, ``errorbar_kw``, and ``theory_kw`` and
``law_kw`` for the curves beside), each a dict for every curve or hue value
to a dict. A fitted :class:`~stsq_learn.studies.Law` is drawn only over the
range it was fitted on, its legend naming its variable (``law_variable``);
a theory curve over the range of the data. An axis of integers (widths,
lengths, heads) gets integer ticks, a log axis of them plain numbers
(4, 8, 16).
"""

from __future__ import annotations

import numpy as np

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


def _check_kw(name, kw):
    if kw is not None and not isinstance(kw, dict):
        raise TypeError(
            f"{name} must be a dict of matplotlib properties (or hue value to such a dict) "
            f"or None, got {type(kw).__name__}: {kw!r}."
        )


def _integers(values):
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return values.size > 0 and bool(np.all(values == np.round(values)))


class BandDisplay:
    """Medians over the seeds with their min-max band, one curve per hue, beside laws and theory.

    Build it with :meth:`from_table`; the constructor takes the bands
    already computed (:meth:`StudyTable.bands`).

    Parameters
    ----------
    bands : StudyTable
        :meth:`StudyTable.bands` of the measured column: ``x``, ``median``,
        ``min``, ``max``, ``n`` and the ``hue`` column.
    x : str
        The bands' x column.
    hue : str or None, default=None
        The column telling curves apart (None: one curve).
    laws : Law or dict, default=None
        A law for the one curve, or hue value to its law.
    theory : callable, tuple or dict, default=None
        A theory curve: ``f(x)``, or ``(xs, ys)``; or hue value (or a label
        of its own) to one. Drawn dashed.
    bounds : StudyTable or None, default=None
        Lower bounds to draw as open triangles (a threshold not reached:
        it lies above them): rows with ``x``, ``bound`` and the hue.
    xlabel, ylabel, title : str or None, default=None
        Axis labels and title (None: the column names).
    law_variable : str or None, default=None
        The variable a law's legend names (``"T"``: ``a + b log2(T)``);
        None: the x column's name without ``param_``.

    Attributes
    ----------
    figure_ : matplotlib Figure
        The figure drawn on.
    ax_ : matplotlib Axes
        The axes drawn on.
    lines_ : dict
        Hue value to the median's line.
    bands_ : dict
        Hue value to its band (a ``PolyCollection`` or error bars).
    law_lines_, theory_lines_ : dict
        Hue value (or label) to the law's or theory's line.

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
    >>> sorted(display.lines_), display.ax_.get_xscale(), display.lines_["attention"].get_marker()
    (['attention'], 'log', 's')
    >>> display.law_lines_["attention"].get_label()
    '-3.33 + 4 log2(T) (fit R^2 0.92)'
    """

    def __init__(
        self,
        bands,
        *,
        x,
        hue=None,
        laws=None,
        theory=None,
        bounds=None,
        xlabel=None,
        ylabel=None,
        title=None,
        law_variable=None,
    ):
        self.bands = bands
        self.x = x
        self.hue = hue
        self.laws = laws
        self.theory = theory
        self.bounds = bounds
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.title = title
        self.law_variable = law_variable

    @classmethod
    def from_table(
        cls,
        table,
        *,
        x,
        y,
        hue="model",
        laws=None,
        theory=None,
        bound=None,
        ax=None,
        style="fill_between",
        logx=False,
        logy=False,
        labels=None,
        colors=None,
        xlabel=None,
        ylabel=None,
        title=None,
        law_variable=None,
        legend=True,
        line_kw=None,
        fill_between_kw=None,
        errorbar_kw=None,
        theory_kw=None,
        law_kw=None,
    ):
        """Compute the bands of ``y`` along ``x`` from a study's table and draw them.

        Parameters
        ----------
        table : StudyTable
            A study's rows (every seed's).
        x, y : str
            The columns along which and of which the bands are drawn (a
            grid column may leave out its ``param_``).
        hue : str or None, default="model"
            The column telling curves apart (None, or a column the table
            lacks: one curve).
        laws, theory : see the class
            Laws and theory curves to draw beside.
        bound : str or None, default=None
            A column of lower bounds (a search's ``bound``): drawn as open
            triangles where the threshold was not reached.
        ax : matplotlib Axes, default=None
            Where to draw (None: a new figure).
        style : {"fill_between", "errorbar", None}, default="fill_between"
            The band: shaded, as error bars at the points, or not drawn.
        logx, logy : bool, default=False
            Log-scaled axes (base 2 for x).
        labels : dict, default=None
            Hue value to its legend label.
        colors : dict, default=None
            Hue value to its colour.
        xlabel, ylabel, title : str or None, default=None
            Labels (None: the column names).
        law_variable : str or None, default=None
            The variable the laws' legends name (None: the x column's name).
        legend : bool, default=True
            Draw a legend.
        line_kw, fill_between_kw, errorbar_kw, theory_kw, law_kw : dict, default=None
            Styles, see :meth:`plot`.

        Returns
        -------
        BandDisplay
            The display, drawn.
        """
        if not isinstance(table, StudyTable):
            raise TypeError(f"table must be a StudyTable, got {type(table).__name__}.")
        if hue is not None and hue not in table.columns and f"param_{hue}" not in table.columns:
            hue = None
        by = () if hue is None else (hue,)
        bands = table.bands(x, y, by=by)
        x_name = bands.meta["along"]
        hue_name = None if hue is None else bands.columns[0]
        bounds = None
        if bound is not None:
            keep = [c for c in (hue_name, x_name, bound) if c is not None]
            rows = table[~np.isfinite(table.xy(x_name, y, finite=False)[1])]
            bounds = StudyTable({c: rows[c] for c in keep})
        display = cls(
            bands,
            x=x_name,
            hue=hue_name,
            laws=laws,
            theory=theory,
            bounds=bounds,
            xlabel=xlabel or x_name.removeprefix("param_"),
            ylabel=ylabel or y,
            title=title,
            law_variable=law_variable,
        )
        return display.plot(
            ax,
            style=style,
            logx=logx,
            logy=logy,
            labels=labels,
            colors=colors,
            legend=legend,
            bound=bound,
            line_kw=line_kw,
            fill_between_kw=fill_between_kw,
            errorbar_kw=errorbar_kw,
            theory_kw=theory_kw,
            law_kw=law_kw,
        )

    def _curves(self):
        if self.hue is None:
            return [(None, self.bands)]
        return [(key[0], part) for key, part in self.bands.groups(self.hue)]

    def plot(
        self,
        ax=None,
        *,
        style="fill_between",
        logx=False,
        logy=False,
        labels=None,
        colors=None,
        legend=True,
        bound="bound",
        line_kw=None,
        fill_between_kw=None,
        errorbar_kw=None,
        theory_kw=None,
        law_kw=None,
    ):
        """Draw the bands (and the laws, theory and bounds) on ``ax``.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw (None: a new figure).
        style : {"fill_between", "errorbar", None}, default="fill_between"
            The band: shaded, as error bars at the points, or not drawn
            (one seed draws its curve alone whatever the style).
        logx, logy : bool, default=False
            Log-scaled axes (base 2 for x, and for y where it holds integers).
        labels, colors : dict, default=None
            Hue value to its legend label, to its colour.
        legend : bool, default=True
            Draw a legend.
        bound : str, default="bound"
            The column of :attr:`bounds` holding the lower bounds.
        line_kw : dict, default=None
            Properties of the medians' lines (``ax.plot``), over the
            defaults ``marker="o"``, ``ms=4`` and the hue's colour: one
            dict for every curve, or hue value to a dict.
        fill_between_kw : dict, default=None
            Properties of the shaded bands (``ax.fill_between``; default
            ``alpha=0.2``), likewise.
        errorbar_kw : dict, default=None
            Properties of the error bars (``ax.errorbar``; default
            ``capsize=3``), likewise.
        theory_kw : dict, default=None
            Properties of the theory curves (default dashed), one dict or
            theory label to a dict.
        law_kw : dict, default=None
            Properties of the laws' lines (default dotted), one dict or hue
            value to a dict.

        Returns
        -------
        BandDisplay
            ``self``, with ``figure_``, ``ax_`` and the lines drawn.
        """
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

        if style not in _STYLES:
            raise ValueError(f"style must be one of {_STYLES}, got {style!r}.")
        styles = dict(zip(_KW, (line_kw, fill_between_kw, errorbar_kw, theory_kw, law_kw)))
        for name, kw in styles.items():
            _check_kw(name, kw)
        curves = self._curves()
        self._check_laws(curves)
        if ax is None:
            _, ax = plt.subplots(layout="constrained")
        labels, colors = dict(labels or {}), dict(colors or {})
        self.lines_, self.bands_, self.law_lines_, self.theory_lines_ = {}, {}, {}, {}
        self.bound_lines_ = {}
        x_seen, y_seen = [], []
        for i, (key, part) in enumerate(curves):
            xs, med = part.xy(self.x, "median")
            _, lo = part.xy(self.x, "min")
            _, hi = part.xy(self.x, "max")
            x_seen += list(xs)
            y_seen += list(med)
            color = colors.get(key, f"C{i}")
            label = labels.get(key, key if key is not None else self.ylabel)
            kw = {"marker": "o", "ms": 4, "color": color, **_kw_for(line_kw, key)}
            if len(xs) == 0:  # no seed reached a value: keep the legend entry
                (line,) = ax.plot([], [], label=f"{label} (none reached)", **kw)
                self.lines_[key] = line
            else:
                (line,) = ax.plot(xs, med, label=label, **kw)
                self.lines_[key] = line
                color = line.get_color()
                several = int(np.max(part["n"])) > 1
                if several and style == "fill_between":
                    fkw = {"color": color, "alpha": 0.2, "lw": 0}
                    fkw.update(_kw_for(fill_between_kw, key))
                    self.bands_[key] = ax.fill_between(xs, lo, hi, **fkw)
                elif several and style == "errorbar":
                    ekw = {"fmt": "none", "ecolor": color, "capsize": 3}
                    ekw.update(_kw_for(errorbar_kw, key))
                    self.bands_[key] = ax.errorbar(xs, med, yerr=[med - lo, hi - med], **ekw)
            self._law(ax, key, color, logx, law_kw)
            self._bounds(ax, key, color, label, bound)
            bound_x, bound_y = self._bound_values(key, bound)
            x_seen += bound_x  # a curve of bounds alone still gets its ticks
            y_seen += bound_y
        self._theory(ax, x_seen, logx, theory_kw)
        self._axes(ax, x_seen, y_seen, logx, logy, FuncFormatter, LogLocator, MaxNLocator)
        ax.set_xlabel(self.xlabel or self.x)
        ax.set_ylabel(self.ylabel or "")
        if self.title:
            ax.set_title(self.title)
        if legend:
            ax.legend(fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _check_laws(self, curves):
        """A single law belongs to a single curve: refuse it for several (never drop it)."""
        from .laws import Law

        if isinstance(self.laws, Law) and len(curves) > 1:
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

    @staticmethod
    def _axes(ax, x_seen, y_seen, logx, logy, FuncFormatter, LogLocator, MaxNLocator):
        """Log scales, and ticks an integer axis reads as integers (4, 8, 16)."""
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        if logx:
            ax.set_xscale("log", base=2)
            ticks = sorted(set(x_seen))
            if ticks:
                ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
                ax.minorticks_off()
        elif _integers(x_seen):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if logy:
            if _integers(y_seen) and min(y_seen, default=0) >= 1:
                ax.set_yscale("log", base=2)
                values = sorted({int(v) for v in y_seen if np.isfinite(v)})
                if len(values) <= 10:  # a few widths or lengths: ticks at them
                    ax.set_yticks(values, [str(v) for v in values])
                    ax.minorticks_off()
                else:
                    ax.yaxis.set_major_locator(LogLocator(base=2))
                    ax.yaxis.set_major_formatter(plain)
                    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
            else:
                ax.set_yscale("log")
        elif _integers(y_seen):
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))

    def _law(self, ax, key, color, logx, law_kw):
        from .laws import Law

        laws = self.laws
        law = laws.get(key) if isinstance(laws, dict) else laws if isinstance(laws, Law) else None
        if law is None:
            return
        lo, hi = law.x_range
        xs = np.geomspace(lo, hi, 50) if logx and lo > 0 else np.linspace(lo, hi, 50)
        name = self.law_variable or self.x.removeprefix("param_")
        kw = {"ls": ":", "color": color, "lw": 1.5, **_kw_for(law_kw, key)}
        (line,) = ax.plot(xs, law(xs), label=law.label(name), **kw)
        self.law_lines_[key] = line

    def _bound_values(self, key, bound):
        if self.bounds is None or not len(self.bounds):
            return [], []
        rows = self.bounds if self.hue is None else self.bounds.where(**{self.hue: key})
        xs, ys = rows.xy(self.x, bound)
        return list(xs), list(ys)

    def _bounds(self, ax, key, color, label, bound):
        if self.bounds is None or not len(self.bounds):
            return
        rows = self.bounds if self.hue is None else self.bounds.where(**{self.hue: key})
        xs, bs = rows.xy(self.x, bound)
        if len(xs):
            (line,) = ax.plot(
                xs, bs, "^", mfc="none", color=color, ms=8, label=f"{label}: not reached, > bound"
            )
            self.bound_lines_[key] = line

    def _theory(self, ax, x_seen, logx, theory_kw):
        theory = self.theory
        if theory is None:
            return
        items = theory.items() if isinstance(theory, dict) else [("theory", theory)]
        keys = list(self.lines_)
        for name, curve in items:
            color = self.lines_[name].get_color() if name in self.lines_ else "k"
            label = f"{name}: theory" if name in keys and name is not None else str(name)
            if callable(curve):
                if not x_seen:
                    continue
                lo, hi = min(x_seen), max(x_seen)
                xs = np.geomspace(lo, hi, 100) if logx and lo > 0 else np.linspace(lo, hi, 100)
                ys = np.asarray(curve(xs), dtype=float)
            else:
                xs, ys = (np.asarray(a, dtype=float) for a in curve)
            kw = {"ls": "--", "color": color, "lw": 1.2, **_kw_for(theory_kw, name)}
            (line,) = ax.plot(xs, ys, label=label, **kw)
            self.theory_lines_[name] = line
