"""Helpers shared by the experiments: timing runs, estimator configs, seeds, JSON-ready values,
axes, and the seeds check of ``plot_bands``."""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import fields

import numpy as np


@contextlib.contextmanager
def timing_run():
    """Silence the end-of-run "worse than no model" warning of runs that only time steps.

    A run of a few steps is there to be timed, not to learn: the estimators'
    warning that it ended worse than predicting 0 is true and useless, and
    printed by every timing run it would teach readers to ignore it. Only
    that warning, only inside the block; a diverged run still raises.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*worse than no model", category=UserWarning)
        yield


def estimator_config(estimator):
    """The hyperparameters an experiment's result records (the non-default ones, JSON-ready)."""
    defaults = type(estimator)().get_params(deep=False)
    params = estimator.get_params(deep=False)
    keep = {
        k: v
        for k, v in params.items()
        if k not in ("callbacks", "random_state", "verbose") and v != defaults[k]
    }
    return {
        "class": type(estimator).__name__,
        **jsonable({k: str(v) if k == "device" else v for k, v in keep.items()}),
    }


def derived_seed(random_state, offset):
    """An int seed fixed by ``random_state`` (an int or None) and a stream ``offset``."""
    base = np.random.SeedSequence().entropy if random_state is None else int(random_state)
    return int(np.random.SeedSequence([base, offset]).generate_state(1)[0] % (2**31 - 1))


def jsonable(value):
    """Plain JSON types from NumPy scalars/arrays, tuples and non-finite floats."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dataclass_dict(obj, *, skip=()):
    """A JSON-ready dict of a result dataclass's fields."""
    return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj) if f.name not in skip}


def new_axes(axes, n, *, figsize=None, ncols=None, panel=(5.0, 4.0)):
    """Return ``(figure, axes)``: ``axes`` if given (n of them), else a new grid of n panels.

    The new grid has ``ncols`` columns (None: one row of n) of panels of
    ``panel`` inches (or the whole ``figsize``); the cells past ``n`` are
    left empty.
    """
    import matplotlib.pyplot as plt

    if axes is None:
        ncols = n if ncols is None else min(ncols, n)
        nrows = -(-n // ncols)
        if figsize is None:
            figsize = (panel[0] * ncols, panel[1] * nrows)
        fig, grid = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained")
        grid = list(np.atleast_1d(grid).ravel())
        for ax in grid[n:]:  # the cells past n: an empty space, not axes of the figure
            ax.remove()
        return fig, grid[:n]
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"axes must hold {n} matplotlib Axes, got {len(axes)}.")
    return axes[0].figure, axes


def seed_results(results, result_type, same):
    """``results`` as a list of ``result_type`` that agree on the attributes ``same``.

    The check of a ``plot_bands(results)``: one result per seed of the same
    experiment, so their curves share an x axis and their names.
    """
    if isinstance(results, result_type):
        raise TypeError(
            f"results must be a sequence of {result_type.__name__} (one per seed), got one "
            f"{result_type.__name__}: pass [result] or call its plot()."
        )
    results = list(results)
    if not results:
        raise ValueError(f"results must hold at least one {result_type.__name__}, got none.")
    for i, res in enumerate(results):
        if not isinstance(res, result_type):
            raise TypeError(
                f"results[{i}] must be a {result_type.__name__}, got {type(res).__name__}."
            )
        for name in same:
            if getattr(res, name) != getattr(results[0], name):
                raise ValueError(
                    f"results[{i}].{name} differs from results[0].{name} "
                    f"({getattr(res, name)!r} != {getattr(results[0], name)!r}): the seeds "
                    "of one experiment share it."
                )
    return results
