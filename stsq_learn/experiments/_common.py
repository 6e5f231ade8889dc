"""The axes of an experiment's figure: the ones given, or a new grid of panels; the axes of an
R^2 against T' panel."""

from __future__ import annotations

import numpy as np

COLUMNS = 2
"""Panels in a row of a new figure: two 4.5-inch panels keep every label at least 9 px tall
where a page shows the figure at the documentation's column width (718 px)."""
PANEL = (4.5, 3.6)
"""A panel's width and height, in inches."""


def new_axes(axes, n):
    """Return ``(figure, axes)``: ``axes`` if given (n of them), else a new grid of n panels
    (:data:`COLUMNS` a row, or n if fewer, of :data:`PANEL` inches; the cells past n empty)."""
    import matplotlib.pyplot as plt

    if axes is None:
        ncols = min(COLUMNS, n)
        nrows = -(-n // ncols)
        figsize = (PANEL[0] * ncols, PANEL[1] * nrows)
        fig, grid = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained")
        grid = list(np.atleast_1d(grid).ravel())
        for ax in grid[n:]:  # the cells past n: an empty space, not axes of the figure
            ax.remove()
        return fig, grid[:n]
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"axes must hold {n} matplotlib Axes, got {len(axes)}.")
    return axes[0].figure, axes


def length_axes(ax, T, values, training="training length"):
    """An R^2 against T' panel: T (``"<training> T=<T>"``) and R^2 = 0 marked, R^2 from below
    the least of values to 1."""
    ax.set_ylim(min(-0.1, np.nanmin(values, initial=0.0) - 0.05), 1.02)
    ax.axvline(T, color="gray", ls=":", lw=1, label=f"{training} T={T}")
    ax.axhline(0.0, color="k", lw=0.5)
