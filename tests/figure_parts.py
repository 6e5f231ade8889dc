"""Reading a drawn figure back in the tests: titles, lines, bands and error bars by label."""

import numpy as np
import pytest
from matplotlib.collections import PolyCollection


def suptitle(fig):
    """The figure's title ("" without one); ``Figure.get_suptitle`` is matplotlib >= 3.8."""
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


def line(ax, label):
    """The one line of ``ax`` labelled ``label``."""
    (found,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return found


def fills(ax):
    """The fill_between bands of ``ax``, in the order drawn."""
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def band(fill, xs):
    """The low and high edges at ``xs`` of a fill_between band."""
    vertices = fill.get_paths()[0].vertices
    at = [vertices[np.isclose(vertices[:, 0], x)][:, 1] for x in xs]
    return np.array([v.min() for v in at]), np.array([v.max() for v in at])


def bars(ax, label):
    """``{x: (median, low, high)}`` of the errorbar labelled ``label`` on ``ax``."""
    (bar,) = [c for c in ax.containers if c.get_label() == label]
    data, _, (cols,) = bar.lines
    return {
        float(x): (float(y), float(seg[0][1]), float(seg[1][1]))
        for x, y, seg in zip(data.get_xdata(), data.get_ydata(), cols.get_segments())
    }


def check_plot_bands_names_bad_results(cls, result):
    """``cls.plot_bands`` refuses no result, a bare result and a stranger, naming each."""
    with pytest.raises(
        ValueError, match=f"results must hold at least one {cls.__name__}, got none"
    ):
        cls.plot_bands([])
    with pytest.raises(TypeError, match=rf"got one {cls.__name__}: pass \[result\]"):
        cls.plot_bands(result)
    with pytest.raises(TypeError, match=rf"results\[1\] must be a {cls.__name__}, got dict"):
        cls.plot_bands([result, {}])
