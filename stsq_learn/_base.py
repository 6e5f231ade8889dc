"""One training loop for both estimators: data on the device, seeds, skorch.

The public estimators own a :class:`skorch.NeuralNetRegressor` (composition,
not inheritance) that runs the epochs, keeps the history, early-stops and
prints progress. skorch's row-by-row ``DataLoader`` is replaced by
:class:`_BatchIterator`, which slices whole tensors already on the training
device (or, online, draws each batch there), so the loop never collates rows
in Python nor copies data between host and device.
"""

from __future__ import annotations

import copy
import math
import warnings
from numbers import Integral, Real

import numpy as np
import sklearn
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNetRegressor
from skorch.callbacks import Callback, EarlyStopping, ProgressBar

from ._validation import (
    check_float_range,
    check_positive_int,
    check_sequences,
    check_targets,
    resolve_device,
)
from .datasets import SparseTokenSelectionTask
from .nn import SquaredError

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_PREDICT_ELEMENTS = 2**24  # floats of encodings per predict chunk (64 MiB in float32)


def _silent(*args, **kwargs):
    """A picklable sink for skorch messages we do not print."""


def _as_tensor(array, dtype, device):
    """A tensor view of (or copy from) a NumPy array; the array is never written."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(array, dtype=dtype, device=device)


class _TensorData(torch.utils.data.Dataset):
    """Fixed training data as two tensors on the training device."""

    def __init__(self, X, y):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.y[i]

    def batches(self, batch_size, generator):
        perm = torch.randperm(len(self.X), generator=generator, device=self.X.device)
        for start in range(0, len(perm), batch_size):
            idx = perm[start : start + batch_size]
            yield self.X[idx], self.y[idx]


class _OnlineData(torch.utils.data.Dataset):
    """A stream of ``n_steps`` fresh batches drawn from a task on the device."""

    def __init__(self, task, n_steps, batch_size, device, dtype):
        self.task, self.n_steps, self.batch_size = task, n_steps, batch_size
        self.device, self.dtype = device, dtype

    def __len__(self):
        return self.n_steps * self.batch_size

    def __getitem__(self, i):
        raise TypeError("an online stream is read in batches, not rows")

    def batches(self, batch_size, generator):
        for _ in range(self.n_steps):
            yield self.task.sample_torch(
                batch_size, generator=generator, device=self.device, dtype=self.dtype
            )


class _BatchIterator:
    """skorch ``iterator_train``: whole-tensor batches from a ``batches`` dataset."""

    def __init__(self, dataset, batch_size, shuffle=True, seed=0, device="cpu"):
        self.dataset, self.batch_size = dataset, batch_size
        self.generator = torch.Generator(device=device).manual_seed(int(seed))

    def __iter__(self):
        return self.dataset.batches(self.batch_size, self.generator)

    def __len__(self):
        return -(-len(self.dataset) // self.batch_size)


# -- robustness helpers: overflow, divergence, interruption, unpickling ---------
def _finite_forward(module, X_chunk, generator, kwargs):
    """Forward a NumPy chunk; if the result overflows, redo it in float64.

    Huge but finite tokens (or float64 values beyond the float32 range) can
    overflow a float32 forward pass (scores, softmax, hidden layers). Normal
    inputs take the first path only, so their results are unchanged; an
    overflowing chunk is recomputed with a float64 copy of the module from the
    same generator state. Returns a CPU tensor.
    """
    param = next(module.parameters())
    state = generator.get_state()
    out = module(_as_tensor(X_chunk, param.dtype, param.device), generator=generator, **kwargs)
    if not torch.isfinite(out).all() and param.dtype != torch.float64:
        generator.set_state(state)
        wide = copy.deepcopy(module).to(torch.float64)
        xb = _as_tensor(X_chunk, torch.float64, param.device)
        out = wide(xb, generator=generator, **kwargs)
    if not torch.isfinite(out).all():
        peak = float(np.abs(X_chunk).max())
        raise ValueError(
            f"The prediction overflowed even in float64: X holds values up to {peak:.3g} "
            "in absolute value. Rescale X."
        )
    return out.cpu()


class _TrainingGuard(Callback):
    """Stop training with a clear error as soon as a batch loss is not finite."""

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        loss = net.history[-1]["batches"][-1].get("train_loss")
        if loss is not None and not math.isfinite(loss):
            n_batches = len(net.history[-1]["batches"])
            _raise_diverged(
                net,
                f"the training loss became {loss} at epoch {len(net.history)}, batch {n_batches}",
            )


class _LearningRateSchedule(Callback):
    """Set the optimiser's step size before every training step (``learning_rate``).

    ``"invscaling"`` and ``"cosine"`` are functions of the rows seen and of the
    step; ``"adaptive"`` replaces early stopping in :meth:`_BaseSelector.fit`:
    when the epoch loss has not improved by ``tol`` for ``patience`` epochs the
    rate is divided by 5, and training stops once the rate is at most 1e-6.
    """

    def __init__(self, schedule, lr_init, power_t, total_steps, rows_before, patience, tol):
        self.schedule = schedule
        self.lr_init = lr_init
        self.power_t = power_t
        self.total_steps = total_steps
        self.rows_before = rows_before
        self.patience = patience
        self.tol = tol

    def initialize(self):
        self.step_ = 0
        self.rows_ = self.rows_before
        self.lr_ = self.lr_init
        self.best_loss_ = math.inf
        self.misses_ = 0
        self.stopped_ = False
        return self

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if not training:
            return
        if self.schedule == "invscaling":
            self.lr_ = self.lr_init / (self.rows_ + 1) ** self.power_t
        elif self.schedule == "cosine":
            progress = min(self.step_, self.total_steps) / self.total_steps
            self.lr_ = 0.5 * self.lr_init * (1.0 + math.cos(math.pi * progress))
        for group in net.optimizer_.param_groups:
            group["lr"] = self.lr_

    def on_batch_end(self, net, batch=None, training=False, **kwargs):
        if training:
            self.step_ += 1
            self.rows_ += len(batch[0])

    def on_epoch_end(self, net, **kwargs):
        if self.schedule != "adaptive":
            return
        loss = net.history[-1].get("train_loss", math.inf)
        if loss < self.best_loss_ - self.tol:
            self.best_loss_, self.misses_ = loss, 0
            return
        self.misses_ += 1
        if self.misses_ < self.patience:
            return
        if self.lr_ <= 1e-6:
            self.stopped_ = True
            raise KeyboardInterrupt  # skorch's way to end training, as EarlyStopping does
        self.lr_ /= 5.0
        self.misses_ = 0


def _raise_diverged(net, what):
    raise ValueError(
        f"Training diverged: {what}. Lower learning_rate_init (it was {net.lr}), "
        "use solver='adam', or rescale X and y. The estimator was left as it was "
        "before this call."
    )


def _check_finite_weights(net):
    """Refuse to return a model whose weights are NaN or infinite."""
    for name, param in net.module_.named_parameters():
        if not torch.isfinite(param).all():
            _raise_diverged(net, f"the weights ({name}) became NaN or infinite")


def _warn_if_interrupted(estimator, net, n_done, n_planned, unit):
    """Warn when skorch swallowed a KeyboardInterrupt (Ctrl-C) and stopped early.

    skorch's ``fit`` catches ``KeyboardInterrupt`` and returns, and its
    ``EarlyStopping`` stops by raising one, so an interruption is a run that
    did fewer epochs (steps) than planned without early stopping firing.
    Returns whether the run was interrupted.
    """
    if n_done >= n_planned:
        return False
    for _, callback in net.callbacks_:
        if isinstance(callback, EarlyStopping) and callback.misses_ >= callback.patience:
            return False
        if isinstance(callback, _LearningRateSchedule) and callback.stopped_:
            return False
    warnings.warn(
        f"{type(estimator).__name__}: training was interrupted (KeyboardInterrupt) after "
        f"{n_done} of {n_planned} {unit}s; the model keeps the weights reached so far "
        "and loss_curve_, n_iter_ and t_ describe the completed part.",
        UserWarning,
        stacklevel=4,
    )
    return True


def _map_missing_cuda_to_cpu(estimator):
    """After unpickling on a machine without CUDA, predict on the CPU instead."""
    device = estimator.__dict__.get("device_")
    if device is None or device.type != "cuda" or torch.cuda.is_available():
        return
    warnings.warn(
        f"{type(estimator).__name__} was fitted on {device}, which this machine does not "
        "have; it now predicts on the CPU. Stochastic-encoding predictions use the CPU "
        "random stream, so they differ from those drawn on the GPU.",
        UserWarning,
        stacklevel=3,
    )
    estimator.device_ = torch.device("cpu")
    net = estimator.__dict__.get("net_")
    if net is not None:
        net.device = "cpu"
        if hasattr(net, "iterator_train__device"):
            net.iterator_train__device = torch.device("cpu")


def _architecture(module):
    """What a warm start must keep: the module's class, settings and weight shapes."""
    arch = {"class": type(module).__name__}
    for key in ("positional_encoding", "learn_token_block"):
        if hasattr(module, key):
            arch[key] = getattr(module, key)
    for name, param in module.named_parameters():
        arch[f"{name} shape"] = tuple(param.shape)
    return arch


class _BaseSelector(RegressorMixin, BaseEstimator):
    """Shared fit / fit_online / predict for the two selectors."""

    _parameter_constraints: dict = {
        "width": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"sgd", "adam"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "learning_rate": [StrOptions({"constant", "invscaling", "adaptive", "cosine"})],
        "power_t": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "dtype": [StrOptions(set(_DTYPES))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    # -- hooks for the subclasses -------------------------------------------
    def _make_module(self, seq_len, n_features, seed):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_predict_seq_len(self, seq_len):
        """Raise if the fitted model cannot predict at ``seq_len``."""

    def _forward_kwargs(self):
        return {}

    # -- public API ---------------------------------------------------------
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

        Raises
        ------
        ValueError
            If an input or hyperparameter is invalid (before any training), or
            if training diverges (the loss or the weights become NaN or
            infinite). The estimator is then left exactly as it was.

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_`` and ``n_iter_`` describe the completed epochs (``t_``
        also counts the batches of an epoch cut short).
        """
        self._validate_params()
        X = check_sequences(X)
        n, T, c = X.shape
        y, y_1d = check_targets(y, n, c - 1)
        device = resolve_device(self.device)
        dtype = _DTYPES[self.dtype]
        check_float_range(X, dtype)
        check_float_range(y, dtype, name="y")
        batch_size = min(200, n) if self.batch_size == "auto" else min(self.batch_size, n)
        data = _TensorData(_as_tensor(X, dtype, device), _as_tensor(y, dtype, device))
        self._train(data, T, c - 1, device, batch_size, epochs=self.max_iter, online=False)
        self._y_1d = y_1d
        return self

    def fit_online(self, task, n_steps=1000):
        """Fit on a fresh batch drawn from ``task`` at every step (the paper's regime).

        Batches of ``batch_size`` rows (256 when ``"auto"``) are drawn on the
        training device; there are no epochs and no early stopping.

        Parameters
        ----------
        task : SparseTokenSelectionTask
            The law D_{T,q} to draw training batches from.
        n_steps : int, default=1000
            Number of optimisation steps.

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the loss of every step.

        Raises
        ------
        ValueError
            If an input or hyperparameter is invalid (before any training), or
            if training diverges (the loss or the weights become NaN or
            infinite). The estimator is then left exactly as it was.

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_``, ``n_iter_`` and ``t_`` describe the completed steps.
        """
        self._validate_params()
        if not isinstance(task, SparseTokenSelectionTask):
            raise TypeError(
                f"task must be a SparseTokenSelectionTask, got {type(task).__name__}: {task!r}."
            )
        n_steps = check_positive_int(n_steps, "n_steps")
        if self.learning_rate == "adaptive":
            raise ValueError(
                "learning_rate='adaptive' lowers the rate when the epoch loss stops "
                "improving, and fit_online has no epochs; use 'constant', 'invscaling' "
                "or 'cosine'."
            )
        device = resolve_device(self.device)
        batch_size = 256 if self.batch_size == "auto" else self.batch_size
        data = _OnlineData(task, n_steps, batch_size, device, _DTYPES[self.dtype])
        self._train(data, task.seq_len, task.n_features, device, batch_size, epochs=1, online=True)
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
        return self._predict_validated(check_sequences(X))

    def _predict_validated(self, X):
        """:meth:`predict` on an ``X`` that already passed ``check_sequences``."""
        n, T, c = X.shape
        if c - 1 != self.n_features_in_:
            raise ValueError(
                f"X has {c - 1} token features per token, but {type(self).__name__} was "
                f"fitted with n_features={self.n_features_in_}."
            )
        self._check_predict_seq_len(T)
        kwargs = self._forward_kwargs()
        module = self.net_.module_
        generator = torch.Generator(device=self.device_).manual_seed(self._predict_seed)
        # Sized by the fitted module's width, not the hyperparameter (settable after fit).
        chunk = max(1, _PREDICT_ELEMENTS // (T * (module.width + c)))
        module.eval()
        # One encodings buffer reused by every chunk and draw of this call.
        kwargs["workspace"] = {}
        out = []
        with torch.inference_mode():
            for start in range(0, n, chunk):
                out.append(_finite_forward(module, X[start : start + chunk], generator, kwargs))
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
        X = check_sequences(X)
        y, _ = check_targets(y, X.shape[0], X.shape[2] - 1)
        y_pred = self._predict_validated(X)
        return float(r2_score(y, y_pred.reshape(y.shape), sample_weight=sample_weight))

    # -- the training loop --------------------------------------------------
    def _fit_forward_kwargs(self):
        """Keyword arguments of the module's forward during training."""
        return {}

    def _warm_module(self, seq_len, n_features, seed):
        """A copy of the fitted module for a warm start to continue from.

        Raises ``ValueError`` when the data or the hyperparameters now call
        for a different architecture.
        """
        old = self.net_.module_
        if n_features != self.n_features_in_:
            raise ValueError(
                f"warm_start=True continues the previous fit, which had n_features="
                f"{self.n_features_in_}; this data has n_features={n_features}. "
                "Set warm_start=False to start afresh."
            )
        with torch.random.fork_rng(devices=[]):
            fresh = self._make_module(seq_len, n_features, seed)
        before = _architecture(old)
        after = _architecture(fresh)
        changed = [
            f"{k}: {before.get(k)} -> {after.get(k)}"
            for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)
        ]
        if changed:
            raise ValueError(
                "warm_start=True continues the previous fit, but the model it would "
                f"continue has another architecture ({'; '.join(changed)}). Restore "
                "those hyperparameters (or the training seq_len) or set warm_start=False."
            )
        return copy.deepcopy(old)

    def _train(self, data, seq_len, n_features, device, batch_size, *, epochs, online):
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=4)
        warm = self.warm_start and hasattr(self, "net_")
        if warm:
            # A continuation draws other batches and encodings than the first fit.
            seeds = np.random.default_rng([*seeds.tolist(), self.t_]).integers(
                np.iinfo(np.int32).max, size=4
            )
        init_seed, order_seed, pe_seed, predict_seed = (int(v) for v in seeds)
        if warm:
            module = self._warm_module(seq_len, n_features, init_seed)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(init_seed)
                module = self._make_module(seq_len, n_features, init_seed)
        module = module.to(device=device, dtype=_DTYPES[self.dtype])
        rows_before = self.t_ if warm else 0

        n_batches = data.n_steps if online else epochs * -(-len(data) // batch_size)
        schedule = _LearningRateSchedule(
            self.learning_rate,
            self.learning_rate_init,
            self.power_t,
            total_steps=n_batches,
            rows_before=rows_before,
            patience=self.n_iter_no_change,
            tol=self.tol,
        )
        callbacks = [_TrainingGuard(), schedule]
        if not online and self.learning_rate != "adaptive":
            callbacks.append(
                EarlyStopping(
                    monitor="train_loss",
                    patience=self.n_iter_no_change,
                    threshold=self.tol,
                    threshold_mode="abs",
                    sink=_silent,
                )
            )
        if self.verbose >= 2:
            callbacks.append(ProgressBar())
        if self.solver == "sgd":
            optimizer, opt_kwargs = torch.optim.SGD, {"optimizer__momentum": self.momentum}
        else:
            optimizer, opt_kwargs = torch.optim.Adam, {}
        net = NeuralNetRegressor(
            module=module,
            criterion=SquaredError,
            optimizer=optimizer,
            lr=self.learning_rate_init,
            optimizer__weight_decay=self.alpha,
            max_epochs=epochs,
            batch_size=batch_size,
            iterator_train=_BatchIterator,
            iterator_train__seed=order_seed,
            iterator_train__device=device,
            train_split=None,
            callbacks=callbacks,
            device=device,
            verbose=int(self.verbose),
            **opt_kwargs,
        )
        generator = torch.Generator(device=device).manual_seed(pe_seed)
        # The owned net's fit parameters (generator, workspace) are ours, not the
        # user's metadata: keep scikit-learn's metadata routing out of it.
        with warnings.catch_warnings(), sklearn.config_context(enable_metadata_routing=False):
            # skorch warns that the module is an instance it will re-use: intended.
            warnings.filterwarnings("ignore", message=".*already initialized.*")
            # One encodings buffer for the whole fit: every step overwrites the
            # previous step's encodings after its backward, instead of allocating.
            net.fit(data, None, generator=generator, workspace={}, **self._fit_forward_kwargs())

        # A batch or epoch cut short by Ctrl-C has no loss: keep the completed ones.
        if online:
            losses = [b["train_loss"] for b in net.history[-1]["batches"] if "train_loss" in b]
        else:
            losses = [e["train_loss"] for e in net.history if "train_loss" in e]
        n_iter = len(losses)
        _check_finite_weights(net)
        planned, unit = (data.n_steps, "step") if online else (epochs, "epoch")
        interrupted = _warn_if_interrupted(self, net, n_iter, planned, unit)
        if not online and n_iter == epochs and not interrupted:
            warnings.warn(
                f"{type(self).__name__}: maximum iterations ({epochs}) reached and the "
                "optimization hasn't converged yet.",
                ConvergenceWarning,
                stacklevel=3,
            )
        rows = int(sum(b.get("train_batch_size", 0) for e in net.history for b in e["batches"]))
        # Fitted state is assigned only now: a failed fit leaves a fitted model as it was.
        if warm:
            losses = [*self.loss_curve_, *losses]
            n_iter += self.n_iter_
        self.net_ = net
        self.device_ = device
        self.n_features_in_ = n_features
        self.seq_len_ = seq_len
        self.loss_curve_ = losses
        self.n_iter_ = n_iter
        self.t_ = rows_before + rows
        self._predict_seed = predict_seed

    def __setstate__(self, state):
        super().__setstate__(state)
        _map_missing_cuda_to_cpu(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags
