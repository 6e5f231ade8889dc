"""The shared estimator: training, fit_online, the forward pass and fitted state, over any task.

The public estimators own a skorch net (composition, not inheritance) that
runs the epochs, keeps the history, early-stops and prints progress;
:mod:`.training` holds the machinery it is built from. This module decides
what a call does, whatever the targets: validation first (the task object's
data contract), then one training loop in named steps (seeds, module,
callbacks, net, losses, fitted state), and fitted state assigned only at the
end, so a failed call leaves a fitted model as it was. What depends on the
targets is a base of its own on this one: :class:`~.regression._Regressor`
(``fit`` on real targets, ``predict``, R^2) and
:class:`~.classification._Classifier` (labels, ``classes_``, probabilities,
accuracy); each gives the loss (``_criterion``), the skorch class
(``_net_class``) and the loss of predicting 0 (:meth:`_zero_loss`). The model
cores (:mod:`.cores`) say which module to build and how to pace its steps;
the task (:mod:`stsq_learn.tasks`) says what the data mean.
"""

from __future__ import annotations

import types
import warnings
from numbers import Integral, Real

import numpy as np
import sklearn
import torch
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._docstrings import FIT_RAISES, Substitution
from .._validation import check_callbacks, check_float_range, check_positive_int, resolve_device
from ..encodings.families import KeyedDraws, StreamedDraws
from ..tasks import get_task
from ..tasks.checks import check_task, check_task_class
from . import progress
from . import training as tr
from .memory import PREDICT_ELEMENTS, check_fit_memory
from .params import AtomicSetParams, refuse_booleans
from .state import SEED_MAX, FittedState

_SEED_MAX = SEED_MAX  # np.iinfo(np.int32).max: a saved seed is checked against it


class _BaseEstimator(AtomicSetParams, FittedState, BaseEstimator):
    """Shared training, fit_online, forward pass and fitted state of every estimator."""

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
        "on_divergence": [StrOptions({"raise", "warn"})],
        "callbacks": [list, tuple, None],
    }

    _task = None
    """The task (a name or a class) of an estimator made for one; None: the ``task`` parameter."""

    _first_format_version = None
    """The first model-file format version that could hold this class (None: the current)."""

    _criterion = None
    """The training loss (:mod:`stsq_learn.nn.losses`), given by the base of the targets."""

    _net_class = None
    """The skorch class of the owned net, given by the base of the targets."""

    def _validate_params(self):
        super()._validate_params()
        refuse_booleans(self)

    def _task_class(self):
        """The task class this estimator trains on, checked against the protocol."""
        return check_task_class(get_task(self.task if self._task is None else self._task))

    # -- hooks of the model cores -------------------------------------------
    def _auto_batch_size(self, seq_len, *, online):
        """Rows per step of ``batch_size="auto"``: 200 in fit (as ``MLPRegressor``), 256 online."""
        return 256 if online else 200

    def _rows_per_step(self, seq_len, n_rows=None):
        """Rows a step trains on: ``batch_size``, or what ``"auto"`` or ``"full"`` resolve to.

        ``n_rows`` is the number of rows of :meth:`fit` (a step takes at most
        all of them), None online. ``"full"`` (where an estimator offers it)
        is every row of ``fit``; a stream has no full batch, so online it is
        ``"auto"``'s size.
        """
        online = n_rows is None
        if self.batch_size == "full" and not online:
            return n_rows
        size = self.batch_size
        if size in ("auto", "full"):
            size = self._auto_batch_size(seq_len, online=online)
        return size if online else min(size, n_rows)

    def _leading_steps(self):
        """Optimiser steps a training protocol takes before the planned run (none).

        They are added to the planned steps (online) or epochs (:meth:`fit`:
        a protocol with leading steps steps on all rows, so each is an epoch).
        """
        return 0

    def _zero_loss(self, task, y=None):  # pragma: no cover - given by the base of the targets
        """The training loss of predicting 0: of targets ``y`` (``fit``), or on ``task``'s law."""
        raise NotImplementedError

    def _make_module(self, task, seed):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_train_length(self, task):
        """Raise if the hyperparameters cannot train on ``task``'s lengths."""

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

    def _resolve_optimiser(self, zero_loss, planned_steps, module, online):
        """``(solver, learning_rate_init, token_block_rate, paces)`` of this run.

        From the loss of predicting 0, the planned optimiser steps, the module and whether the
        run is online; ``token_block_rate`` is None without a separately paced block, ``paces``
        the callbacks giving parts of the model steps of their own.
        """
        return self.solver, float(self.learning_rate_init), None, []

    def _schedule(self, online):
        """The schedule of a run: ``learning_rate``, for a core that resolves none."""
        return self.learning_rate

    # -- training -----------------------------------------------------------
    def _rows_inputs(self, task, X, y, *, y_1d):
        """:meth:`_train`'s keyword arguments for rows and targets the task's contract checked.

        ``y``: the training targets (a classifier's class indices); ``y_1d``: whether
        predictions come back 1-D. The memory (model, step, the rows' copy) is checked before
        the rows are copied; nothing is trained or assigned.
        """
        check_task(task)
        n = X.shape[0]
        self._check_train_length(task)
        device = resolve_device(self.device)
        dtype = tr.DTYPES[self.dtype]
        check_float_range(X, dtype)
        check_float_range(y, dtype, name="y")
        batch_size = self._rows_per_step(task.seq_len, n)
        steps_per_epoch = -(-n // batch_size)
        epochs = self.max_iter
        if epochs == "auto":
            epochs = -(-self._auto_steps() // steps_per_epoch)
        epochs += self._leading_steps()
        n_read = task.largest_query(X)
        check_fit_memory(self, task, batch_size, device, n_read, rows=(X, y))
        data = tr.TensorData(tr.as_tensor(X, dtype, device), tr.as_tensor(y, dtype, device))
        return {
            "data": data,
            "task": task,
            "device": device,
            "batch_size": batch_size,
            "epochs": epochs,
            "zero_loss": self._zero_loss(task, y),
            "n_read": n_read,
            "y_1d": y_1d,
        }

    @Substitution(fit_raises=FIT_RAISES)
    def fit_online(self, task, n_steps="auto"):
        """Fit on a fresh batch drawn from ``task`` at every step (the paper's regime).

        Batches of ``batch_size`` rows (256 when ``"auto"``) are drawn on the
        training device; there are no epochs and no early stopping. A task
        whose ``seq_len`` is a range draws every batch at one length of it.

        Parameters
        ----------
        task : SparseTokenSelectionTask
            The law D_{T,q} to draw training batches from. Its ``seq_len``
            may be a range ``(T_min, T_max)``: every batch is drawn at one
            length of it, and the fitted ``seq_len_`` is ``T_max`` (the
            reference length of ``length_scale``).
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
        self._train(**self._online_inputs(task, n_steps))
        return self

    def _online_inputs(self, task, n_steps):
        """:meth:`fit_online`'s checks, then what it trains on (:meth:`_train`'s arguments)."""
        self._validate_params()
        check_callbacks(self.callbacks)
        task_class = self._task_class()
        if not isinstance(task, task_class):
            raise TypeError(
                f"task must be a {task_class.__name__}, got {type(task).__name__}: {task!r}."
            )
        check_task(task)
        batch_size = self._rows_per_step(task.reference_length)
        if isinstance(n_steps, str) and n_steps == "auto":
            n_steps = self._auto_steps()
        n_steps = check_positive_int(n_steps, "n_steps") + self._leading_steps()
        self._check_train_length(task)
        if self.learning_rate == "adaptive":
            raise ValueError(
                "learning_rate='adaptive' lowers the rate when the epoch loss stops "
                "improving, and fit_online has no epochs; use 'constant', 'invscaling' "
                "or 'cosine'."
            )
        device = resolve_device(self.device)
        return {
            "data": tr.OnlineData(task, n_steps, batch_size, device, tr.DTYPES[self.dtype]),
            "task": task,
            "device": device,
            "batch_size": batch_size,
            "epochs": 1,
            "zero_loss": self._zero_loss(task),
            "n_read": task.largest_query_of_law,
            "y_1d": task.targets_1d,
        }

    def _forward(self, X):
        """The fitted module's outputs on rows ``X`` (checked by the task's ``check_rows``).

        In chunks of at most :data:`~stsq_learn.engine.memory.PREDICT_ELEMENTS` floats, with keyed
        draws; a float64 NumPy array of the module's output shape.
        """
        n, T = X.shape[:2]
        self._check_predict_seq_len(T)
        kwargs = self._forward_kwargs()
        module = self.net_.module_
        # Sized by the fitted module, not the hyperparameters (settable after fit).
        q_max = self.task_.largest_query(X) if n else None
        per_row = module.elements_per_row(T, kwargs.get("pe_sampling"), n_selected=q_max)
        chunk = max(1, PREDICT_ELEMENTS // per_row)
        module.eval()
        # Keyed draws: every draw from (prediction seed, the row's bytes in the model's
        # dtype, draw, position), so a row's draws do not depend on the other rows (its
        # prediction only through the batch's float rounding: docs, "keyed-draws").
        draws = KeyedDraws(self._predict_seed, dtype=next(module.parameters()).dtype)
        out = []
        starts = range(0, n, chunk)
        if self.verbose and len(starts) > 1:  # long predictions report their chunks
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=f"{type(self).__name__}.predict", unit="chunk")
        with torch.inference_mode():
            for start in starts:
                out.append(tr.finite_forward(module, X[start : start + chunk], draws, kwargs))
        return torch.cat(out).numpy().astype(np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    # -- the training loop, in named steps ----------------------------------
    def _train(self, data, task, device, batch_size, *, epochs, zero_loss, n_read, y_1d):
        fitted_task = self._fitted_task(task)
        check_fit_memory(self, fitted_task, batch_size, device, n_read)
        run = self._plan(data, fitted_task, device, batch_size, epochs, zero_loss, n_read, y_1d)
        net = self._run_net(run)
        probe = torch.Generator(device=device).manual_seed(run.pe_seed + 1)
        start = progress.start_loss(
            run.module, data, probe, run.kwargs, run.chunk, self._criterion()
        )
        generator = torch.Generator(device=device).manual_seed(run.pe_seed)
        # Streamed draws, with one encodings buffer for the whole fit: every step
        # overwrites the previous step's encodings after its backward.
        self._run(net, data, StreamedDraws(generator, reuse=True))
        losses = self._judge_run(run, net, start)
        self._assign_fitted(run, net, losses)

    @staticmethod
    def _fitted_task(task):
        """The contract the fitted model keeps: the task at its (longest) training length."""
        return type(task).from_fitted(task.reference_length, task.n_features, task.fitted_state())

    def _plan(self, data, task, device, batch_size, epochs, zero_loss, n_read, y_1d):
        """Everything a run is made of, before any step: seeds, module, optimiser, callbacks.

        ``task`` is the fitted task (:meth:`_fitted_task`). Draws the four
        seeds from ``random_state`` and builds the module (of a warm start:
        the fitted one's weights); nothing is assigned.
        """
        online = isinstance(data, tr.OnlineData)
        warm = self.warm_start and hasattr(self, "net_")
        init_seed, order_seed, pe_seed, predict_seed = self._seeds(warm)
        module = self._initial_module(task, init_seed, warm)
        module = module.to(device=device, dtype=tr.DTYPES[self.dtype])
        rows_before = self.t_ if warm else 0
        planned, n_steps = self._planned_steps(data, epochs, batch_size)
        solver, rate, token_rate, paces = self._resolve_optimiser(
            zero_loss, n_steps, module, online
        )
        callbacks = self._training_callbacks(online, n_steps, batch_size, len(data), rows_before)
        callbacks[1:1] = paces
        kwargs = self._fit_forward_kwargs()
        chunk = tr.probe_chunk(
            module, task.reference_length, kwargs.get("pe_sampling"), n_read, batch_size
        )
        return types.SimpleNamespace(
            online=online,
            warm=warm,
            epochs=epochs,
            batch_size=batch_size,
            task=task,
            module=module,
            order_seed=order_seed,
            pe_seed=pe_seed,
            predict_seed=predict_seed,
            rows_before=rows_before,
            planned=planned,
            n_steps=n_steps,
            solver=solver,
            rate=rate,
            token_rate=token_rate,
            paces=paces,
            callbacks=callbacks,
            kwargs=kwargs,
            chunk=chunk,
            zero_loss=zero_loss,
            device=device,
            y_1d=y_1d,
        )

    def _run_net(self, run):
        """The skorch net that trains a planned run's module (and holds it after)."""
        return self._build_net(
            run.module,
            run.device,
            solver=run.solver,
            learning_rate_init=run.rate,
            callbacks=run.callbacks,
            max_epochs=run.epochs,
            batch_size=run.batch_size,
            order_seed=run.order_seed,
            step_progress=run.online,
        )

    @staticmethod
    def _planned_steps(data, epochs, batch_size):
        """``(planned, n_steps)``: the run's planned steps (online) or epochs, and its steps."""
        if isinstance(data, tr.OnlineData):
            return data.n_steps, data.n_steps
        return epochs, epochs * -(-len(data) // batch_size)

    def _judge_run(self, run, net, start):
        """The completed losses of a finished run, after refusing one that diverged.

        Raises ``ValueError`` for non-finite weights or (``on_divergence``
        deciding) a final loss clearly above ``start``, the starting model's.
        """
        tr.check_finite_weights(net)
        owner = type(self).__name__
        losses = progress.completed_losses(
            net, run.online, run.planned, owner, early_stopping=self._watched(run.online)
        )
        progress.check_progress(
            net,
            losses,
            zero_loss=run.zero_loss,
            start_loss=start,
            online=run.online,
            owner=owner,
            keep=self.on_divergence == "warn",
        )
        return losses

    def _assign_fitted(self, run, net, losses):
        """Assign the fitted state of a judged run (only now: a failed fit leaves the model)."""
        rows = int(sum(b.get("train_batch_size", 0) for e in net.history for b in e["batches"]))
        self.n_iter_ = len(losses) + (self.n_iter_ if run.warm else 0)
        self.loss_curve_ = [*self.loss_curve_, *losses] if run.warm else losses
        self.net_ = net
        self.device_ = run.device
        self.task_ = run.task
        self.n_features_in_ = run.task.n_features
        self.seq_len_ = run.task.seq_len
        self.t_ = run.rows_before + rows
        self.solver_, self.learning_rate_init_ = run.solver, run.rate
        self.planned_steps_ = run.n_steps
        self._token_block_rate = run.token_rate
        self._predict_seed = run.predict_seed
        self._y_1d = run.y_1d

    @classmethod
    def _fit_members(cls, estimators, method, calls, errors, callbacks=None):
        """Fit ``estimators``, checked seeds of one estimator, together (:mod:`.members`).

        A model class with loops of its own overrides it (without ``callbacks``: a call with
        member callbacks then fits its members one after another).
        """
        from .members import fit_stacked

        return fit_stacked(estimators, method, calls, errors, callbacks)

    _fit_members.__func__.takes_callbacks = True

    def _seeds(self, warm):
        """Seeds of initialisation, batch order, training encodings and prediction draws."""
        seeds = check_random_state(self.random_state).randint(_SEED_MAX, size=4)
        if warm:
            # A continuation draws other batches and encodings than the first fit.
            seeds = np.random.default_rng([*seeds.tolist(), self.t_]).integers(_SEED_MAX, size=4)
        return tuple(int(v) for v in seeds)

    def _training_callbacks(self, online, n_steps, batch_size, n_rows, rows_before):
        """The package's callbacks (guard, rate schedule, early stopping), then the user's."""
        callbacks = [tr.TrainingGuard()]
        schedule = tr.rate_schedule(
            self._schedule(online),
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
        if self._watched(online) and self._schedule(online) != "adaptive":
            callbacks.append(tr.EarlyStop(self.n_iter_no_change, self.tol))
        return [*callbacks, *check_callbacks(self.callbacks)]

    def _watched(self, online):
        """Whether a convergence rule (early stopping, or the adaptive rate's) may end the run.

        Without one, a run is a plan (``max_iter`` epochs along its schedule)
        and running all of it is no ``ConvergenceWarning``.
        """
        watched = self._schedule(online) == "adaptive" or self.n_iter_no_change is not None
        return not online and watched

    def _build_net(self, module, device, *, solver, learning_rate_init, **training):
        """The owned skorch net, with the resolved solver and rate and this estimator's settings."""
        return tr.build_net(
            module,
            net=self._net_class,
            criterion=self._criterion,
            solver=solver,
            learning_rate_init=learning_rate_init,
            momentum=self.momentum,
            alpha=self.alpha,
            device=device,
            verbose=self.verbose,
            **training,
        )

    def _run(self, net, data, draws):
        """Train ``net`` on ``data``; encodings are drawn from ``draws``."""
        # The owned net's fit parameter (the draws) is ours, not the
        # user's metadata: keep scikit-learn's metadata routing out of it.
        with warnings.catch_warnings(), sklearn.config_context(enable_metadata_routing=False):
            # skorch warns that the module is an instance it will re-use: intended.
            warnings.filterwarnings("ignore", message=".*already initialized.*")
            net.fit(data, None, generator=draws, **self._fit_forward_kwargs())
