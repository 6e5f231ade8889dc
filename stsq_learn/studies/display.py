"""Drawing a study: medians over the seeds with their min-max band, beside a law or a theory.

:class:`BandDisplay` follows scikit-learn's displays
(:class:`~sklearn.model_selection.ValidationCurveDisplay`): the numbers are
computed apart from the drawing (:meth:`BandDisplay.from_table` takes a
:class:`~stsq_learn.studies.StudyTable`, saved or fresh), :meth:`BandDisplay.plot`
draws on any axes, and the display keeps what it drew (``figure_``,
``ax_``, ``lines_``) for the user to restyle. A fitted
:class:`~stsq_learn.studies.Law` is drawn only over the range it was fitted
on; a theory curve over the range of the data.
"""

from __future__ import annotations

import numpy as np

from .table import StudyTable

__all__ = ["BandDisplay"]

_STYLES = ("fill_between", "errorbar", None)


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
    >>> display = BandDisplay.from_table(table, x="seq_len", y="value", laws={"attention": law},
    ...                                  logx=True)
    >>> sorted(display.lines_), display.ax_.get_xscale()
    (['attention'], 'log')
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
        )
        return display.plot(
            ax, style=style, logx=logx, logy=logy, labels=labels, colors=colors, bound=bound
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
            Log-scaled axes (base 2 for x).
        labels, colors : dict, default=None
            Hue value to its legend label, to its colour.
        legend : bool, default=True
            Draw a legend.
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
        if ax is None:
            _, ax = plt.subplots(layout="constrained")
        labels, colors = dict(labels or {}), dict(colors or {})
        self.lines_, self.bands_, self.law_lines_, self.theory_lines_ = {}, {}, {}, {}
        self.bound_lines_ = {}
        x_seen = []
        for i, (key, part) in enumerate(self._curves()):
            xs, med = part.xy(self.x, "median")
            _, lo = part.xy(self.x, "min")
            _, hi = part.xy(self.x, "max")
            x_seen += list(xs)
            color = colors.get(key, f"C{i}")
            label = labels.get(key, key if key is not None else self.ylabel)
            if len(xs) == 0:  # no seed reached a value: keep the legend entry
                (line,) = ax.plot([], [], "o-", color=color, label=f"{label} (none reached)")
                self.lines_[key] = line
            else:
                (line,) = ax.plot(xs, med, "o-", color=color, label=label, ms=4)
                self.lines_[key] = line
                several = int(np.max(part["n"])) > 1
                if several and style == "fill_between":
                    self.bands_[key] = ax.fill_between(xs, lo, hi, color=color, alpha=0.2, lw=0)
                elif several and style == "errorbar":
                    self.bands_[key] = ax.errorbar(
                        xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor=color, capsize=3
                    )
            self._law(ax, key, color, logx)
            self._bounds(ax, key, color, label, bound)
        self._theory(ax, x_seen, logx)
        if logx:
            ax.set_xscale("log", base=2)
            ticks = sorted(set(x_seen))
            if ticks:
                ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
                ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(self.xlabel or self.x)
        ax.set_ylabel(self.ylabel or "")
        if self.title:
            ax.set_title(self.title)
        if legend:
            ax.legend(fontsize="small")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _law(self, ax, key, color, logx):
        laws = self.laws
        law = laws.get(key) if isinstance(laws, dict) else laws if key is None else None
        if law is None:
            return
        lo, hi = law.x_range
        xs = np.geomspace(lo, hi, 50) if logx and lo > 0 else np.linspace(lo, hi, 50)
        name = self.xlabel or self.x
        (line,) = ax.plot(xs, law(xs), ":", color=color, lw=1.5, label=law.label(name))
        self.law_lines_[key] = line

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

    def _theory(self, ax, x_seen, logx):
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
            (line,) = ax.plot(xs, ys, "--", color=color, lw=1.2, label=label)
            self.theory_lines_[name] = line
