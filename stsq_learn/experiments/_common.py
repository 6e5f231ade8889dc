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


def n_workers(n_jobs, n_tasks):
    """Worker processes for ``n_tasks`` independent fits under ``n_jobs`` (joblib's meaning).

    ``None`` is 1 and ``-1`` every core; never more workers than fits.
    """
    from joblib import effective_n_jobs

    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int)):
        raise TypeError(f"n_jobs must be None or an int, got {type(n_jobs).__name__}: {n_jobs!r}.")
    if n_jobs == 0:
        raise ValueError(
            "n_jobs must be None, a positive int or a negative one (-1: every core), got 0."
        )
    return max(1, min(effective_n_jobs(n_jobs), n_tasks))


def _one_thread(function, args):
    """``function(*args)`` with one PyTorch thread: the worker side of :func:`run_jobs`."""
    import torch

    torch.set_num_threads(1)
    return function(*args)


def run_jobs(function, args_list, n_jobs):
    """``[function(*args) for args in args_list]``, on worker processes when ``n_jobs`` allows.

    The fits are independent and seeded by their arguments, so the results,
    in order, do not depend on ``n_jobs``. More than one worker runs them on
    joblib's process backend (loky), one PyTorch thread per process;
    ``function`` must be a module-level function.
    """
    args_list = list(args_list)
    workers = n_workers(n_jobs, len(args_list))
    if workers == 1:
        return [function(*args) for args in args_list]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=workers, backend="loky")(
        delayed(_one_thread)(function, args) for args in args_list
    )


class ShiftedRows:
    """Validation rows moved to each length once, then scored like ``LengthShiftScorer``.

    ``LengthShiftScorer(t, random_state=seed)(model, X, y)`` moves the rows
    to length t at every call; an experiment scoring many models on the
    same rows moves them once here and gets the same numbers.

    Parameters
    ----------
    task : Task
        The task of the rows (its ``shift`` and ``units`` are used).
    X, y : arrays
        The validation rows at the training length.
    lengths : sequence of int
        The lengths to move them to.
    random_state : int
        The shift's seed, as the scorer's.
    """

    def __init__(self, task, X, y, lengths, random_state):
        self.rows = {}
        for t in lengths:
            X_t, y_t = task.shift(X, y, t, random_state)
            self.rows[t] = (X_t, *task.units(y_t, None))

    def score(self, model, length):
        """R^2 of ``model`` on the rows moved to ``length``."""
        from sklearn.metrics import r2_score

        X_t, y_t, weights = self.rows[length]
        y_pred = np.asarray(model.predict(X_t)).reshape(y_t.shape)
        return float(r2_score(y_t, y_pred, sample_weight=weights))


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


def band_title(n_seeds):
    """The words a figure of several seeds carries: ``median over N seeds, band: min-max``."""
    return f"median over {n_seeds} seeds, band: min-max"
