"""The shared estimator: fit, fit_online, predict, score and fitted state, for both models.

The public estimators own a :class:`skorch.NeuralNetRegressor` (composition,
not inheritance) that runs the epochs, keeps the history, early-stops and
prints progress; :mod:`._training` holds the machinery it is built from.
This module decides what a call does: validation first, then one training
loop in named steps (seeds, module, callbacks, net, losses, fitted state),
and fitted state assigned only at the end, so a failed call leaves a fitted
model as it was.
"""

from __future__ import annotations

import copy
import warnings
from numbers import Integral, Real

import numpy as np
import sklearn
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _training as tr
from ._docstrings import FIT_RAISES, Substitution
from ._rates import BlockRate, IdentityRate
from ._state import FittedState, architecture_changes
from ._validation import (
    check_callbacks,
    check_float_range,
    check_positive_int,
    check_sequences,
    check_targets,
    resolve_device,
)
from .datasets import SparseTokenSelectionTask
from .encodings import KeyedDraws, StreamedDraws

_PREDICT_ELEMENTS = 2**24  # floats of encodings per predict chunk (64 MiB in float32)
_SEED_MAX = np.iinfo(np.int32).max


class _BaseSelector(FittedState, RegressorMixin, BaseEstimator):
    """Shared fit / fit_online / predict / fitted state for the two selectors."""

    _parameter_constraints: dict = {
        "width": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"sgd", "adam"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "learning_rate": [StrOptions({"constant", "invscaling", "adaptive", "cosine", "cooldown"})],
        "power_t": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "dtype": [StrOptions(set(tr.DTYPES))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "callbacks": [list, tuple, None],
    }

    # -- hooks for the subclasses -------------------------------------------
    _task_class = SparseTokenSelectionTask
    """The task law :meth:`fit_online` draws from."""

    def _check_fit_data(self, X, y):
        """``(X, y, n_features, y_was_1d)`` checked against the data contract."""
        X = check_sequences(X)
        y, y_1d = check_targets(y, X.shape[0], X.shape[2] - 1)
        return X, y, X.shape[2] - 1, y_1d

    def _auto_batch_size(self, seq_len, *, online):
        """Rows per step of ``batch_size="auto"``: 200 in fit (as ``MLPRegressor``), 256 online."""
        return 256 if online else 200

    def _largest_subset(self, X):
        """The most selected tokens of any row of ``X`` (sizes predict's chunks)."""
        return int(X[..., -1].sum(axis=1).max())

    def _check_rows(self, X):
        """``X`` checked for :meth:`predict` (the fitted ``n_features_in_`` included)."""
        X = check_sequences(X)
        if X.shape[2] - 1 != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[2] - 1} token features per token, but {type(self).__name__} "
                f"was fitted with n_features={self.n_features_in_}."
            )
        return X

    def _make_module(self, seq_len, n_features, seed):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_train_seq_len(self, seq_len):
        """Raise if the hyperparameters cannot train at ``seq_len``."""

    def _check_predict_seq_len(self, seq_len):
        """Raise if the fitted model cannot predict at ``seq_len``."""

    def _forward_kwargs(self):
        """Keyword arguments of the module's forward at predict time."""
        return {}

    def _fit_forward_kwargs(self):
        """Keyword arguments of the module's forward during training."""
        return {}

    def _auto_steps(self):
        """Optimiser steps of ``max_iter="auto"`` and ``fit_online(n_steps="auto")``."""
        return 1000

    def _resolve_optimiser(self, zero_loss, planned_steps):
        """``(solver, learning_rate_init, token_block_rate, identity_rate)`` of this run.

        ``zero_loss`` is the training loss of predicting 0 and ``planned_steps``
        the optimiser steps the run is planned for; ``token_block_rate`` is
        None where the model has no separately paced block; ``identity_rate``
        paces the step of W's positional block along the identity (1.0: as the
        rest).
        """
        return self.solver, float(self.learning_rate_init), None, 1.0

    # -- public API ---------------------------------------------------------
    @Substitution(fit_raises=FIT_RAISES)
    def fit(self, X, y):
        """Fit the model to data with epochs of shuffled minibatches.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Tokens, then the selection indicator (0.0 or 1.0) in the last channel.
        y : array-like of shape (n_samples, n_features)
            Mean of the selected tokens of each row.

        Returns
        -------
        self : object
            The fitted estimator.

        {fit_raises}

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_`` and ``n_iter_`` describe the completed epochs (``t_``
        also counts the batches of an epoch cut short).
        """
        self._validate_params()
        check_callbacks(self.callbacks)
        X, y, n_features, y_1d = self._check_fit_data(X, y)
        n, T = X.shape[:2]
        self._check_train_seq_len(T)
        device = resolve_device(self.device)
        dtype = tr.DTYPES[self.dtype]
        check_float_range(X, dtype)
        check_float_range(y, dtype, name="y")
        batch_size = self._auto_batch_size(T, online=False) if self.batch_size == "auto" else None
        batch_size = min(batch_size or self.batch_size, n)
        steps_per_epoch = -(-n // batch_size)
        epochs = self.max_iter
        if epochs == "auto":
            epochs = -(-self._auto_steps() // steps_per_epoch)
        zero_loss = float(np.square(y).sum(axis=-1).mean())  # the loss of predicting 0
        data = tr.TensorData(tr.as_tensor(X, dtype, device), tr.as_tensor(y, dtype, device))
        self._train(
            data,
            T,
            n_features,
            device,
            batch_size,
            epochs=epochs,
            online=False,
            zero_loss=zero_loss,
        )
        self._y_1d = y_1d
        return self

    @Substitution(fit_raises=FIT_RAISES)
    def fit_online(self, task, n_steps="auto"):
        """Fit on a fresh batch drawn from ``task`` at every step (the paper's regime).

        Batches of ``batch_size`` rows (256 when ``"auto"``) are drawn on the
        training device; there are no epochs and no early stopping.

        Parameters
        ----------
        task : SparseTokenSelectionTask
            The law D_{T,q} to draw training batches from.
        n_steps : int or "auto", default="auto"
            Number of optimisation steps. ``"auto"``: the planned steps of
            the model's default recipe (960 for :class:`SparseTokenSelector`:
            see ``learning_rate_init``; 1000 for :class:`FCNSelector`).

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the loss of every step.

        {fit_raises}

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_``, ``n_iter_`` and ``t_`` describe the completed steps.
        """
        self._validate_params()
        check_callbacks(self.callbacks)
        if not isinstance(task, self._task_class):
            raise TypeError(
                f"task must be a {self._task_class.__name__}, got {type(task).__name__}: {task!r}."
            )
        auto = self.batch_size == "auto"
        batch_size = self._auto_batch_size(task.seq_len, online=True) if auto else self.batch_size
        if isinstance(n_steps, str) and n_steps == "auto":
            n_steps = self._auto_steps()
        n_steps = check_positive_int(n_steps, "n_steps")
        self._check_train_seq_len(task.seq_len)
        if self.learning_rate == "adaptive":
            raise ValueError(
                "learning_rate='adaptive' lowers the rate when the epoch loss stops "
                "improving, and fit_online has no epochs; use 'constant', 'invscaling' "
                "or 'cosine'."
            )
        device = resolve_device(self.device)
        data = tr.OnlineData(task, n_steps, batch_size, device, tr.DTYPES[self.dtype])
        self._train(
            data,
            task.seq_len,
            task.n_features,
            device,
            batch_size,
            epochs=1,
            online=True,
            zero_loss=task.trivial_mse,
        )
        self._y_1d = False
        return self

    def predict(self, X):
        """Predict the mean of the selected tokens.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Sequences with the selection indicator in the last channel.

        Returns
        -------
        y_pred : ndarray of shape (n_samples, n_features)
            Predicted means, as float64 NumPy arrays whatever the device.
        """
        check_is_fitted(self)
        return self._predict_validated(self._check_rows(X))

    def _predict_validated(self, X):
        """:meth:`predict` on an ``X`` that already passed :meth:`_check_rows`."""
        n, T = X.shape[:2]
        self._check_predict_seq_len(T)
        kwargs = self._forward_kwargs()
        module = self.net_.module_
        # Sized by the fitted module, not the hyperparameters (settable after fit).
        q_max = self._largest_subset(X) if n else None
        per_row = module.elements_per_row(T, kwargs.get("pe_sampling"), n_selected=q_max)
        chunk = max(1, _PREDICT_ELEMENTS // per_row)
        module.eval()
        # Keyed draws: every draw from (prediction seed, the row's bytes in the model's
        # dtype, draw, position), so a row's prediction does not depend on the other rows.
        draws = KeyedDraws(self._predict_seed, dtype=next(module.parameters()).dtype)
        out = []
        with torch.inference_mode():
            for start in range(0, n, chunk):
                out.append(tr.finite_forward(module, X[start : start + chunk], draws, kwargs))
        y_pred = torch.cat(out).numpy().astype(np.float64)
        return y_pred.ravel() if self._y_1d else y_pred

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the prediction, averaged over features.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Sequences with the selection indicator in the last channel.
        y : array-like of shape (n_samples, n_features)
            True means of the selected tokens.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` with respect to ``y``; equals
            1 - relative MSE on this task.
        """
        check_is_fitted(self)
        X = self._check_rows(X)
        y, _ = check_targets(y, X.shape[0], X.shape[2] - 1)
        y_pred = self._predict_validated(X)
        return float(r2_score(y, y_pred.reshape(y.shape), sample_weight=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags

    # -- the training loop, in named steps ----------------------------------
    def _train(self, data, seq_len, n_features, device, batch_size, *, epochs, online, zero_loss):
        warm = self.warm_start and hasattr(self, "net_")
        init_seed, order_seed, pe_seed, predict_seed = self._seeds(warm)
        module = self._initial_module(seq_len, n_features, init_seed, warm)
        module = module.to(device=device, dtype=tr.DTYPES[self.dtype])
        rows_before = self.t_ if warm else 0
        planned = data.n_steps if online else epochs
        n_steps = data.n_steps if online else epochs * -(-len(data) // batch_size)
        solver, rate, token_rate, identity_rate = self._resolve_optimiser(zero_loss, n_steps)
        callbacks = self._training_callbacks(online, n_steps, batch_size, len(data), rows_before)
        if token_rate is not None and token_rate != 1.0:
            callbacks.insert(1, BlockRate(token_rate))
        if identity_rate != 1.0:
            callbacks.insert(1, IdentityRate(identity_rate))
        net = self._build_net(
            module,
            device,
            solver=solver,
            learning_rate_init=rate,
            callbacks=callbacks,
            max_epochs=epochs,
            batch_size=batch_size,
            order_seed=order_seed,
        )
        self._run(net, data, torch.Generator(device=device).manual_seed(pe_seed))
        tr.check_finite_weights(net)
        losses = tr.completed_losses(
            net, online, planned, type(self).__name__, early_stopping=self._watched(online)
        )
        tr.check_against_zero(net, losses, zero_loss, online, type(self).__name__)
        rows = int(sum(b.get("train_batch_size", 0) for e in net.history for b in e["batches"]))
        # Fitted state is assigned only now: a failed fit leaves a fitted model as it was.
        self.n_iter_ = len(losses) + (self.n_iter_ if warm else 0)
        self.loss_curve_ = [*self.loss_curve_, *losses] if warm else losses
        self.net_ = net
        self.device_ = device
        self.n_features_in_ = n_features
        self.seq_len_ = seq_len
        self.t_ = rows_before + rows
        self.solver_, self.learning_rate_init_ = solver, rate
        self.planned_steps_ = n_steps
        self._token_block_rate = token_rate
        self._predict_seed = predict_seed

    def _seeds(self, warm):
        """Seeds of initialisation, batch order, training encodings and prediction draws."""
        seeds = check_random_state(self.random_state).randint(_SEED_MAX, size=4)
        if warm:
            # A continuation draws other batches and encodings than the first fit.
            seeds = np.random.default_rng([*seeds.tolist(), self.t_]).integers(_SEED_MAX, size=4)
        return tuple(int(v) for v in seeds)

    def _initial_module(self, seq_len, n_features, seed, warm):
        """A new module (W = 0 for the selector), or a copy of the fitted one to continue."""
        if not warm:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                return self._make_module(seq_len, n_features, seed)
        old = self.net_.module_
        if n_features != self.n_features_in_:
            raise ValueError(
                f"warm_start=True continues the previous fit, which had n_features="
                f"{self.n_features_in_}; this data has n_features={n_features}. "
                "Set warm_start=False to start afresh."
            )
        with torch.random.fork_rng(devices=[]):
            fresh = self._make_module(seq_len, n_features, seed)
        changed = architecture_changes(old, fresh)
        if changed:
            raise ValueError(
                "warm_start=True continues the previous fit, but the model it would "
                f"continue has another architecture ({'; '.join(changed)}). Restore "
                "those hyperparameters (or the training seq_len) or set warm_start=False."
            )
        return copy.deepcopy(old)

    def _training_callbacks(self, online, n_steps, batch_size, n_rows, rows_before):
        """The package's callbacks (guard, rate schedule, early stopping), then the user's."""
        callbacks = [tr.TrainingGuard()]
        schedule = tr.rate_schedule(
            self.learning_rate,
            power_t=self.power_t,
            n_steps=n_steps,
            batch_size=batch_size,
            n_rows=n_rows,
            rows_before=rows_before,
            patience=10 if self.n_iter_no_change is None else self.n_iter_no_change,
            tol=self.tol,
        )
        if schedule is not None:
            callbacks.append(schedule)
        if self._watched(online) and self.learning_rate != "adaptive":
            callbacks.append(tr.EarlyStop(self.n_iter_no_change, self.tol))
        return [*callbacks, *check_callbacks(self.callbacks)]

    def _watched(self, online):
        """Whether a convergence rule (early stopping, or the adaptive rate's) may end the run.

        Without one, a run is a plan (``max_iter`` epochs along its schedule)
        and running all of it is no ``ConvergenceWarning``.
        """
        watched = self.learning_rate == "adaptive" or self.n_iter_no_change is not None
        return not online and watched

    def _build_net(self, module, device, *, solver, learning_rate_init, **training):
        """The owned skorch net, with the resolved solver and rate and this estimator's settings."""
        return tr.build_net(
            module,
            solver=solver,
            learning_rate_init=learning_rate_init,
            momentum=self.momentum,
            alpha=self.alpha,
            device=device,
            verbose=self.verbose,
            **training,
        )

    def _run(self, net, data, generator):
        """Train ``net`` on ``data``; encodings are drawn from ``generator``."""
        # The owned net's fit parameter (the draws) is ours, not the
        # user's metadata: keep scikit-learn's metadata routing out of it.
        with warnings.catch_warnings(), sklearn.config_context(enable_metadata_routing=False):
            # skorch warns that the module is an instance it will re-use: intended.
            warnings.filterwarnings("ignore", message=".*already initialized.*")
            # Streamed draws, with one encodings buffer for the whole fit: every step
            # overwrites the previous step's encodings after its backward.
            draws = StreamedDraws(generator, reuse=True)
            net.fit(data, None, generator=draws, **self._fit_forward_kwargs())
