"""The axes of an experiment's figure: the ones given, or a new grid of panels."""

from __future__ import annotations

import numpy as np


def new_axes(axes, n, *, figsize=None, ncols=None):
    """Return ``(figure, axes)``: ``axes`` if given (n of them), else a new grid of n panels.

    The new grid has ``ncols`` columns (None: one row of n) of 5 x 4 inch
    panels (or the whole ``figsize``); the cells past ``n`` are left empty.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        ncols = n if ncols is None else min(ncols, n)
        nrows = -(-n // ncols)
        figsize = (5.0 * ncols, 4.0 * nrows) if figsize is None else figsize
        fig, grid = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained")
        grid = list(np.atleast_1d(grid).ravel())
        for ax in grid[n:]:  # the cells past n: an empty space, not axes of the figure
            ax.remove()
        return fig, grid[:n]
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"axes must hold {n} matplotlib Axes, got {len(axes)}.")
    return axes[0].figure, axes
