"""Helpers shared by the experiments: progress, estimators, seeds, JSON-ready values, axes."""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import fields

import numpy as np
from sklearn.base import clone
from skorch.callbacks import Callback
from tqdm.auto import tqdm


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


class StepProgress(Callback):
    """A skorch callback showing one fit's training steps as a tqdm bar (on stderr).

    Passed through the estimators' ``callbacks`` hook; the bar is closed when
    training ends, so a fitted estimator stays picklable.

    Parameters
    ----------
    total : int
        Planned steps.
    desc : str
        Label of the bar.
    enabled : bool, default=True
        False shows nothing.
    """

    def __init__(self, total, desc, enabled=True):
        self.total = total
        self.desc = desc
        self.enabled = enabled

    def initialize(self):
        self.bar_ = None
        self.steps_ = 0
        return self

    def on_train_begin(self, net, **kwargs):
        self.bar_ = progress_bar(self.total, self.desc, enabled=self.enabled, leave=False)

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.steps_ += 1
            if self.bar_ is not None:
                self.bar_.update()

    def on_train_end(self, net, **kwargs):
        if self.bar_ is not None:
            self.bar_.close()
        self.bar_ = None


def with_callbacks(estimator, *callbacks):
    """``estimator`` with ``callbacks`` appended to its own (a set_params call)."""
    return estimator.set_params(callbacks=[*(estimator.callbacks or []), *callbacks])


def planned_steps(estimator, n_steps):
    """``n_steps``, or the steps ``fit_online(n_steps="auto")`` plans for ``estimator``."""
    if isinstance(n_steps, str) and n_steps == "auto":
        return estimator._auto_steps()
    return n_steps


def train_online(estimator, task, n_steps, *, desc, progress, callbacks=()):
    """``estimator.fit_online(task, n_steps)`` with a progress bar and extra ``callbacks``.

    ``n_steps="auto"`` trains the estimator's own planned steps (for
    :class:`~stsq_learn.SparseTokenSelector`, they follow its width).
    """
    n_steps = planned_steps(estimator, n_steps)
    bar = StepProgress(n_steps, desc, enabled=progress)
    return with_callbacks(estimator, *callbacks, bar).fit_online(task, n_steps=n_steps)


def prepared(estimator, default, expected_type, name, *, device, random_state):
    """A clone of ``estimator`` (``default`` when None) with the run's device and seed.

    Raises ``TypeError`` when ``estimator`` is not an ``expected_type``.
    ``device=None`` keeps the estimator's own.
    """
    estimator = default if estimator is None else estimator
    if not isinstance(estimator, expected_type):
        raise TypeError(
            f"{name} must be a {expected_type.__name__}, got {type(estimator).__name__}: "
            f"{estimator!r}."
        )
    params = {"random_state": random_state}
    if device is not None:
        params["device"] = device
    return clone(estimator).set_params(**params)


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
