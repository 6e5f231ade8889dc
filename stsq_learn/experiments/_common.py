"""The axes of an experiment's figure: the ones given, or a new grid of panels."""

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
