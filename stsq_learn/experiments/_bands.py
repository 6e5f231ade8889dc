"""Drawing an experiment's numbers over seeds: medians with min-max bands or error bars.

The pieces the figures over seeds share (the convergence and length curves,
the separation's panels, and the ``plot_bands`` of q-sparse averaging,
retrieval and sparse-token classification): a curve's median over the seeds
with its min-max band, discrete points' median with min-max error bars,
every seed's lower bounds, and a legend in the order drawn. A value that is
None, NaN or infinite (a width no grid width reached, a threshold not found)
is no number to spread: each point is drawn from the seeds that have one,
and left out where none has.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
from matplotlib.container import ErrorbarContainer

from ._common import band_title


def bars_title(name, n_seeds):
    """A figure's title over seeds: its name, :func:`band_title`, ``error bars: min-max``."""
    return f"{name}, {band_title(n_seeds)}, error bars: min-max"


def finite(value):
    """``value`` as a float, or None where it is None, NaN, infinite or no number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def check_same(results, parts):
    """Raise unless every result agrees with the first on each part (``{name: getter}``).

    The check of a ``plot_bands(results)`` whose seeds must share nested
    parts (the lengths searched, the q tried): the message names the result
    and the part.
    """
    for name, get in parts.items():
        want = get(results[0])
        for i, res in enumerate(results[1:], start=1):
            got = get(res)
            if got != want:
                raise ValueError(
                    f"results[{i}].{name} differs from results[0].{name} ({got!r} != "
                    f"{want!r}): the seeds of one experiment share it."
                )


def spread(xs, columns):
    """``(xs, median, min, max)`` over the seeds' values at each x, where any seed has one.

    ``columns[s][i]`` is seed s's value at ``xs[i]``; values that are not
    finite numbers (:func:`finite`) are left out, and an x where no seed has
    one is left out.
    """
    rows = []
    for i, x in enumerate(xs):
        found = [v for v in (finite(col[i]) for col in columns if i < len(col)) if v is not None]
        if found:
            rows.append((float(x), float(np.median(found)), min(found), max(found)))
    if not rows:
        return tuple(np.array([], float) for _ in range(4))
    return tuple(np.array(column, float) for column in zip(*rows))


def band(ax, xs, columns, *fmt, **style):
    """Several seeds' curves: their median at each x and the min-max shaded in its colour.

    Each x from the seeds that have a value there (:func:`spread`); the
    band is unlabelled (the legend names the line). Returns the median's
    line.
    """
    x, med, lo, hi = spread(xs, columns)
    (line,) = ax.plot(x, med, *fmt, **style)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    return line


def plot_band(ax, xs, curves, *fmt, **style):
    """One curve as it is, or several seeds' curves as their :func:`band`.

    ``ax.plot(xs, curves[0], *fmt, **style)`` for one curve (a one-seed
    figure is drawn as it always was); for several, their median with the
    min-max shaded. Returns the lines drawn.
    """
    if len(curves) == 1:
        return ax.plot(xs, curves[0], *fmt, **style)
    return [band(ax, xs, curves, *fmt, **style)]


def bars(ax, xs, columns, fmt, *, always=False, **style):
    """Several seeds' points: their median at each x with min-max error bars.

    Where no seed has a value nothing is drawn, unless ``always`` (then an
    empty line keeps the legend entry).
    """
    x, med, lo, hi = spread(xs, columns)
    if len(x):
        return ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt=fmt, capsize=3, **style)
    if always:
        return ax.plot([], [], fmt, **style)
    return None


def every_bound(ax, xs, columns, label, **style):
    """Every seed's lower bounds at ``xs`` as open triangles, named once in the legend."""
    named = False
    for col in columns:
        have = [(x, b) for x, b in zip(xs, (finite(v) for v in col)) if b is not None]
        if have:
            ax.plot(
                *zip(*have),
                "^",
                mfc="none",
                ms=9,
                label="_nolegend_" if named else label,
                **style,
            )
            named = True


def legend_in_order(ax, *, wrap=None, **kwargs):
    """``ax.legend`` with its entries in the order drawn (matplotlib lists error bars last).

    With ``wrap``, each label is wrapped to lines of at most ``wrap``
    characters, so that a legend of long labels (a lower bound's meaning, a
    law with its fit) stays within a narrow panel.
    """
    handles, labels = ax.get_legend_handles_labels()
    children = ax.get_children()

    def drawn_at(k):
        handle = handles[k]
        return children.index(handle[0] if isinstance(handle, ErrorbarContainer) else handle)

    order = sorted(range(len(labels)), key=drawn_at)
    labels = [labels[k] if wrap is None else textwrap.fill(labels[k], wrap) for k in order]
    return ax.legend([handles[k] for k in order], labels, **kwargs)


def nan_extreme(values, pick):
    """``pick`` (np.nanmin, np.nanmax) of every finite value, or NaN where none is."""
    found = [v for v in (finite(x) for x in values) if v is not None]
    return float(pick(found)) if found else float("nan")


def empty_log_range(ax, grid):
    """Give a y axis that nothing finite was drawn on the range of ``grid`` (a width grid).

    A log axis autoscaled with no data cannot place its ticks; where no
    seed found a width or a bound, the axis spans the widths searched
    (1 to 64 without a grid).
    """
    if np.isfinite(ax.dataLim.y0) and np.isfinite(ax.dataLim.y1):
        return
    widths = [w for w in map(finite, grid or []) if w is not None and w > 0]
    ax.set_ylim(min(widths) / 1.5, max(widths) * 1.5) if widths else ax.set_ylim(1, 64)
