"""What the estimators of single-location regression share, on the shared estimator engine.

:class:`_SingleLocationModel` is a :class:`~stsq_learn.engine.regression._Regressor`
whose gradient steps are its own (projected gradient descent on the sphere,
or torch's optimiser on two free vectors, in float64 on the CPU) while every
guarantee goes through the pieces the other estimators use:

- hyperparameters: scikit-learn's ``_parameter_constraints`` through the
  base's ``_validate_params`` (booleans refused where a number is meant);
- data: the task's contract (:meth:`SingleLocationTask.from_data`,
  ``check_rows``, ``check_targets``, built on :mod:`stsq_learn._validation`);
- memory: :func:`stsq_learn.engine.memory.check_training_memory`, before anything is allocated;
- divergence: a non-finite loss stops the run with
  :func:`stsq_learn.engine.training.raise_diverged`, and
  :func:`stsq_learn.engine.progress.check_progress`
  judges the final loss against the starting model's (``on_divergence``);
- progress: a ``tqdm`` bar over the steps when ``verbose``;
- fitted state: assigned only at the end of a run (a failed call leaves a
  fitted model as it was), and ``get_fitted_state`` / ``set_fitted_state``
  for :func:`~stsq_learn.save_model` and :func:`~stsq_learn.load_model`.

A subclass gives its ``_parameter_constraints``, ``_train`` (the steps),
``_loss`` (the mean squared error of given parameters on given rows),
``_forward``, and the names of its fitted vectors and curves.
"""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ..._validation import as_tensor, check_positive_int, resolve_device
from ...engine import progress
from ...engine import training as tr
from ...engine.memory import check_training_memory
from ...engine.regression import _Regressor
from ...engine.state import (
    _is_int,
    _is_number_list,
    check_fitted_state,
    check_sizes,
    check_weights,
    rebuild_task,
    size_check,
)

_PROBE_ROWS = 4096  # rows the starting model's loss is measured on (as the other estimators)
_CPU = torch.device("cpu")


def _unit(x):
    return x / np.linalg.norm(x)


def _steps(n_steps, owner, verbose):
    """The step indices, behind a progress bar when ``verbose``."""
    if not verbose:
        return range(n_steps)
    from tqdm.auto import tqdm

    return tqdm(range(n_steps), desc=owner, unit="step")


def _report(steps, t, n_steps, **values):
    """Show the loss (and the like) on the progress bar at every tenth of the steps."""
    if hasattr(steps, "set_postfix") and (t % max(1, n_steps // 10) == 0 or t == n_steps - 1):
        steps.set_postfix({k: f"{v:.6g}" for k, v in values.items()}, refresh=False)


class _Curve(Sequence):
    """A loss curve as :func:`._progress.check_progress` reads it, without a list copy."""

    def __init__(self, values):
        self._values = values

    def __len__(self):
        return len(self._values)

    def __getitem__(self, index):
        return self._values[index]


class _Footprint(torch.nn.Module):
    """What a run holds, on the meta device: the two fitted vectors and the recorded curves."""

    def __init__(self, n_features, n_curve_values):
        super().__init__()
        self.vectors = torch.nn.Parameter(torch.empty(2, n_features, device="meta"))
        self.register_buffer("curves", torch.empty(n_curve_values, device="meta"))


class _SingleLocationModel(_Regressor):
    """The data contract, fit, fit_online, predict and fitted state of both estimators."""

    _task = "single_location"
    _first_format_version = 4  # model files hold it since format 4 (0.6)
    _vectors: tuple = ()  # names of the fitted vectors, e.g. ("k_", "v_")
    _curves_per_step = 1  # values a step records besides the alignment (loss, temperature)
    _temperature = False  # whether the model has a temperature (the erf model's lambda)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.target_tags.single_output = True
        return tags

    def _auto_steps(self):
        """Steps of ``fit_online(n_steps="auto")``: ``max_iter``, the steps of :meth:`fit`."""
        return self.max_iter

    # -- fitting ---------------------------------------------------------------------
    def fit(self, X, y):
        """Fit on rows ``X`` and targets ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,) or (n_samples, 1)
            Targets, one number per row.

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the training loss
            before each step and ``alignment_curve_`` is None (``k*`` and
            ``v*`` are not known from data).

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or input, or a run too large for the
            memory, before any work; for a run that diverged (see
            ``on_divergence``). A failed call leaves the model as it was.
        """
        self._train_run(self._fit_run(X, y))
        return self

    def _fit_run(self, X, y, members=1):
        """:meth:`fit`'s checks (``members`` runs' memory), then what it trains on.

        Returns a namespace: ``task``, ``batches(rng)`` (the batch stream of
        a run drawing from ``rng`` after its initialisation), ``law``,
        ``n_steps``, ``probe``, ``scale``, ``zero_loss()`` (the loss of
        predicting 0), ``noisy`` and ``fitted_task``. Nothing is drawn or
        assigned.
        """
        self._validate_params()
        task, X, y = self._task_class().from_data(X, y)
        n = len(X)
        full = self.solver == "pgd"
        size = n if full else min(self.batch_size, n)
        self._check_memory(
            task, self.max_iter, size, online=False, copies_rows=not full, members=members
        )
        zero_loss = self._zero_loss(y)
        Xt, yt = tr.as_tensor(X, torch.float64, _CPU), tr.as_tensor(y, torch.float64, _CPU)

        def batches(rng):
            if full:
                while True:
                    yield Xt, yt
            while True:
                order = rng.permutation(n)
                for start in range(0, n - size + 1, size):
                    idx = torch.as_tensor(order[start : start + size])
                    yield Xt[idx], yt[idx]

        noisy = size < n  # minibatch losses: judged on the mean of the last steps
        return types.SimpleNamespace(
            task=task,
            batches=batches,
            law=None,
            n_steps=self.max_iter,
            probe=(Xt[:_PROBE_ROWS], yt[:_PROBE_ROWS]) if noisy else None,
            scale=(
                f"X holds values up to {_peak(X):.3g} and y up to {_peak(y):.3g} in absolute "
                "value. Rescale X and y."
            ),
            zero_loss=lambda: zero_loss,
            noisy=noisy,
            fitted_task=task,
        )

    def _train_run(self, run):
        """One run of :meth:`_fit_run` or :meth:`_online_run`: train, judge, then assign."""
        rng = check_random_state(self.random_state)
        batches = run.batches(rng)
        state = self._run(run.task, batches, run.law, run.n_steps, rng, run.probe, run.scale)
        self._judge(state, zero_loss=run.zero_loss(), noisy=run.noisy, owner=type(self).__name__)
        self._set_fitted(run.fitted_task, state)

    def fit_online(self, task, n_steps="auto"):
        """Fit on the law ``task``: its population risk or fresh batches from it.

        Parameters
        ----------
        task : SingleLocationTask
            The law.
        n_steps : int or "auto", default="auto"
            Steps; ``"auto"``: ``max_iter``, the steps of :meth:`fit`
            (None, its former spelling, is deprecated and means ``"auto"``).

        Returns
        -------
        self : object
            The fitted estimator, with ``alignment_curve_`` recorded.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or argument, or a run too large for the
            memory, before any work; for a run that diverged (see
            ``on_divergence``). A failed call leaves the model as it was.
        """
        self._train_run(self._online_run(task, n_steps))
        return self

    def _online_run(self, task, n_steps, members=1):
        """:meth:`fit_online`'s checks, then what it trains on (as :meth:`_fit_run`)."""
        self._validate_params()
        task_class = self._task_class()
        if not isinstance(task, task_class):
            raise TypeError(
                f"task must be a {task_class.__name__}, got {type(task).__name__}: {task!r}."
            )
        if n_steps is None:
            warnings.warn(
                "fit_online(n_steps=None) is deprecated and will be removed in a future "
                "release; use n_steps='auto' (the default), which means max_iter as None did.",
                FutureWarning,
                stacklevel=3,
            )
            n_steps = "auto"
        if isinstance(n_steps, str) and n_steps == "auto":
            n_steps = self._auto_steps()
        n_steps = check_positive_int(n_steps, "n_steps")
        population = self._population_steps()
        size = 0 if population else self.batch_size
        self._check_memory(task, n_steps, size, online=True, copies_rows=True, members=members)

        def batches(rng):  # drawn from after the initialisation: fit's start is fit_online's
            draws = np.random.RandomState(rng.randint(2**31 - 1))
            while True:
                X, y = task.sample(self.batch_size, random_state=draws)
                yield as_tensor(X, torch.float64), as_tensor(y, torch.float64)

        probe = None
        if not population:  # rows of the law, of their own seed: the run's draws are unchanged
            n_probe = min(max(self.batch_size, 1024), _PROBE_ROWS)
            Xp, yp = task.sample(n_probe, random_state=0)
            probe = (torch.as_tensor(Xp), torch.as_tensor(yp))
        return types.SimpleNamespace(
            task=task,
            batches=batches,
            law=task,
            n_steps=n_steps,
            probe=probe,
            scale=f"the rows of {task!r} are too large. Draw from a law of smaller scale.",
            zero_loss=lambda: task.trivial_mse,  # after the run: it may overflow
            noisy=not population,
            fitted_task=task.at_length(task.seq_len),
        )

    def _population_steps(self):
        """Whether ``fit_online`` steps on the population risk (no batches)."""
        return False

    def _zero_loss(self, y):
        """The loss of predicting 0, ``mean(y^2)``; refused if it overflows float64."""
        with np.errstate(over="ignore"):
            zero_loss = float(np.mean(np.square(y)))
        if not math.isfinite(zero_loss):
            raise ValueError(
                f"y holds values up to {_peak(y):.3g} in absolute value: their squares, and "
                "the training loss, overflow float64 (the loss of predicting 0 is "
                f"{zero_loss}). Rescale X and y."
            )
        return zero_loss

    def _check_memory(self, task, n_steps, rows_per_step, *, online, copies_rows, members=1):
        """Refuse, before any allocation, a run (``members`` runs) exceeding the memory."""
        L, d = task.seq_len, task.n_features
        n_curve_values = self._curves_per_step * n_steps + (2 * (n_steps + 1) if online else 0)
        per_row = (L * d if copies_rows else 0) + 6 * L  # a step's rows and activations
        steps = "n_steps" if online else "max_iter"
        params = [f"{steps}={n_steps}", f"batch_size={rows_per_step}", f"seq_len={L}"]
        if rows_per_step and self.solver == "pgd":
            params[1] = f"n_samples={rows_per_step} (solver='pgd' steps on all of them)"
        elif not rows_per_step:
            params.pop(1)
        if members > 1:
            params.insert(0, f"{members} runs trained together")
        check_training_memory(
            _Footprint(d, n_curve_values),
            per_row,
            rows_per_step,
            8,  # float64
            _CPU,
            type(self).__name__,
            ", ".join([*params, f"n_features={d}"]),
            advice="Lower max_iter (n_steps: a loss is kept for every step) or the batch size.",
            members=members,
        )

    def _run(self, task, batches, law, n_steps, rng, probe, scale):
        """``_train`` behind a progress bar, every loss checked by a :class:`_Guard`."""
        method = "fit_online" if law is not None else "fit"
        steps = _steps(n_steps, f"{type(self).__name__}.{method}", self.verbose)
        guard = _Guard(float(self.learning_rate_init), scale)
        try:
            return self._train(task, batches, law, n_steps, rng, steps, probe, guard)
        finally:
            if hasattr(steps, "close"):
                steps.close()

    def _judge(self, state, *, zero_loss, noisy, owner):
        """Refuse non-finite weights and, as the other estimators, a run that diverged."""
        net = types.SimpleNamespace(lr=float(self.learning_rate_init), lr_offers_auto=False)
        for name in self._vectors:
            if not np.isfinite(state[name]).all():
                tr.raise_diverged(net, f"the weights ({name}) became NaN or infinite")
        progress.check_progress(
            net,
            _Curve(state["loss_curve_"]),
            zero_loss=zero_loss,
            start_loss=state.pop("start_loss"),
            online=noisy,
            owner=owner,
            keep=self.on_divergence == "warn",
        )

    def _set_fitted(self, task, state):
        # Fitted state is assigned only now: a failed call leaves a fitted model as it was.
        for key, value in state.items():
            setattr(self, key, value)
        self.task_ = task
        self.n_features_in_ = task.n_features
        self.seq_len_ = task.seq_len

    # -- prediction --------------------------------------------------------------------
    def predict(self, X):
        """Predict one number per row.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predictions, as float64 (whatever the shape of the fitted ``y``).
        """
        check_is_fitted(self)
        return self._predict_validated(self.task_.check_rows(X, type(self).__name__))

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the prediction.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.
        y : array-like of shape (n_samples,) or (n_samples, 1)
            True targets, one number per row.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` with respect to ``y``.
        """
        return super().score(X, y, sample_weight)

    def _predict_validated(self, X):
        with torch.no_grad():
            out = self._forward(tr.as_tensor(X, torch.float64, _CPU))
        return out.numpy().astype(np.float64)

    # -- fitted state --------------------------------------------------------------------
    def get_fitted_state(self):
        """The fitted state as plain values and CPU tensors (what :func:`save_model` writes).

        Returns
        -------
        state : dict
            ``"fitted"``: the sizes, the law (``task_``), the step count,
            ``lambda_`` where the model has one, and the recorded curves
            (JSON types); ``"history"``: an empty list (the curves are the
            history); ``"weights"``: the fitted vectors as float64 tensors.
        """
        check_is_fitted(self)
        task = self.task_
        fitted = {
            "n_features_in_": int(self.n_features_in_),
            "seq_len_": int(self.seq_len_),
            "n_iter_": int(self.n_iter_),
            "task": {
                "gamma": task.gamma,
                "noise": task.noise,
                "position": task.position,
                "random_state": task.random_state,
            },
            "loss_curve_": [float(v) for v in self.loss_curve_],
            "alignment_curve_": (
                None if self.alignment_curve_ is None else self.alignment_curve_.tolist()
            ),
            **self._extra_fitted(),
        }
        weights = {name: torch.as_tensor(getattr(self, name)).clone() for name in self._vectors}
        return {"fitted": fitted, "history": [], "weights": weights}

    def _extra_fitted(self):
        return {}

    def _set_extra_fitted(self, fitted, n_iter):
        return {}

    def set_fitted_state(self, state, *, device=None):
        """Make this estimator the fitted model described by ``state``.

        The inverse of :meth:`get_fitted_state`, used by :func:`load_model`.
        The hyperparameters are validated and every value is checked before
        anything is assigned.

        Parameters
        ----------
        state : dict
            As returned by :meth:`get_fitted_state`.
        device : str, torch.device or None, default=None
            None, ``"auto"`` or ``"cpu"``: these models compute on the CPU.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If a hyperparameter is invalid, ``device`` is not the CPU, or
            ``state`` is incomplete, ill-typed or inconsistent.
        """
        try:
            self._validate_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid hyperparameter: {exc}") from None
        if device is not None and not (isinstance(device, str) and device == "auto"):
            if resolve_device(device).type != "cpu":
                raise ValueError(
                    f"{type(self).__name__} computes in float64 on the CPU; device={device!r} "
                    "cannot hold it. Load it with device=None or 'cpu'."
                )
        check_fitted_state(state, _FITTED_SCHEMA)
        fitted = state["fitted"]
        check_sizes(fitted, self._sizes_in_weights, state["weights"])
        n_iter = fitted["n_iter_"]
        L, d = fitted["seq_len_"], fitted["n_features_in_"]
        losses = np.array(fitted["loss_curve_"], dtype=np.float64)
        if losses.shape != (n_iter,) or not np.isfinite(losses).all():
            raise ValueError(f"fitted loss_curve_ must hold n_iter_={n_iter} finite numbers.")
        aligned = fitted["alignment_curve_"]
        if aligned is not None:
            try:
                aligned = np.array(aligned, dtype=np.float64)
            except (TypeError, ValueError):
                aligned = None
            if aligned is None or aligned.shape != (n_iter + 1, 2):
                raise ValueError(
                    f"fitted alignment_curve_ must be None or {n_iter + 1} pairs of numbers."
                )
        extra = self._set_extra_fitted(fitted, n_iter)
        task = rebuild_task(
            lambda: self._task_class()(L, d, **fitted["task"]),
            {"seq_len_": L, "n_features_in_": d, "task": fitted["task"]},
        )
        expected = {name: torch.empty(d, device="meta") for name in self._vectors}
        check_weights(state["weights"], expected, f"n_features_in_={d}")
        vectors = {
            name: state["weights"][name].detach().to(torch.float64).numpy().copy()
            for name in self._vectors
        }
        self._set_fitted(
            task,
            {
                **vectors,
                **extra,
                "n_iter_": n_iter,
                "loss_curve_": losses,
                "alignment_curve_": aligned,
            },
        )
        return self


def _peak(arr):
    return float(np.abs(arr).max()) if np.size(arr) else 0.0


class _Guard:
    """The check of every step's loss: a loss that is not finite stops the run.

    Before any step the step size cannot be the cause: a non-finite loss
    there is the data's (``scale`` says what they hold); after a step, it is
    :func:`stsq_learn.engine.training.raise_diverged`'s message, as the other estimators'.
    """

    def __init__(self, lr, scale):
        self.net = types.SimpleNamespace(lr=lr, lr_offers_auto=False)
        self.scale = scale

    def __call__(self, loss, step):
        if math.isfinite(loss):
            return
        if step is None or step == 0:
            raise ValueError(
                f"The loss of the starting model is {loss} before any training step, so the "
                f"step size is not the cause: the data overflow float64 arithmetic: {self.scale}"
            )
        tr.raise_diverged(self.net, f"the training loss became {loss} at step {step + 1}")


def _is_alignment(value):
    """None, or a list of lists of numbers a float64 holds (their shape is checked on loading)."""
    return value is None or (
        isinstance(value, list) and all(_is_number_list(pair) for pair in value)
    )


_FITTED_SCHEMA = {
    "n_features_in_": size_check(2),
    "seq_len_": size_check(1),
    "n_iter_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "task": (lambda v: isinstance(v, dict), "a dict of the law's fields"),
    "loss_curve_": (_is_number_list, "a list of numbers"),
    "alignment_curve_": (_is_alignment, "None or a list of pairs of numbers"),
}
"""What ``get_fitted_state`` returns under ``"fitted"``: name -> (check, description)."""


def positive_real(closed="neither"):
    """A finite real number, > 0 (``closed="neither"``) or >= 0 (``"left"``)."""
    return Interval(Real, 0, np.inf, closed=closed)


def positive_int():
    """An integer >= 1."""
    return Interval(Integral, 1, None, closed="left")
