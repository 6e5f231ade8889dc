"""Helpers shared by the experiments: progress bars, JSON-ready values, tasks that tick."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
from tqdm.auto import tqdm

from ..datasets import SparseTokenSelectionTask


def progress_bar(total, desc, *, enabled, leave=True, position=None):
    """A tqdm bar on stderr, or a silent one when ``enabled`` is false."""
    return tqdm(
        total=total,
        desc=desc,
        disable=not enabled,
        leave=leave,
        position=position,
        dynamic_ncols=True,
        mininterval=0.5,
    )


class _SteppingTask(SparseTokenSelectionTask):
    """The same law as ``task``, calling ``on_step()`` before drawing each batch.

    ``fit_online`` draws one batch per optimisation step, so ``on_step`` runs
    once per step, after the previous update: it drives progress bars and the
    per-step records of the training-dynamics experiment.
    """

    def __init__(self, task, on_step):
        super().__init__(task.seq_len, task.n_features, task.n_selected)
        object.__setattr__(self, "_on_step", on_step)

    def sample_torch(self, n_samples, **kwargs):
        self._on_step()
        return super().sample_torch(n_samples, **kwargs)


def fit_online_with_progress(estimator, task, n_steps, *, desc, enabled, on_step=None):
    """``estimator.fit_online(task, n_steps)`` with a progress bar over the steps."""
    with progress_bar(n_steps, desc, enabled=enabled, leave=False) as bar:

        def tick():
            if on_step is not None:
                on_step()
            bar.update()

        return estimator.fit_online(_SteppingTask(task, tick), n_steps=n_steps)


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


def new_axes(axes, n, *, figsize):
    """Return ``(figure, axes)``: ``axes`` if given (n of them), else a new row of n."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, n, figsize=figsize, layout="constrained")
        axes = np.atleast_1d(axes)
        return fig, list(axes)
    axes = list(np.atleast_1d(axes))
    if len(axes) != n:
        raise ValueError(f"axes must hold {n} matplotlib Axes, got {len(axes)}.")
    return axes[0].figure, axes
