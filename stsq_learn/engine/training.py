"""Training machinery of the estimators: data iterators, callbacks and the skorch net.

Kept apart from the estimators, as scikit-learn keeps its stochastic
optimisers apart from the MLP: everything here serves one training step or
one forward pass and knows nothing of hyperparameter validation or fitted
state.

- Data: :class:`TensorData` (fixed rows as tensors on the training device) and
  :class:`OnlineData` (a stream of fresh batches drawn on the device), read by
  :class:`BatchIterator`, skorch's ``iterator_train``. skorch's row-by-row
  ``DataLoader`` would collate rows in Python; these slice whole tensors.
- Callbacks: :class:`TrainingGuard` (a loss that is not finite), :class:`EarlyStop` and
  :class:`AdaptiveRate` (each records in the history why it stopped), and
  :func:`rate_schedule`, which maps ``learning_rate`` to skorch's
  ``LRScheduler`` over torch's schedulers.
- :func:`build_net`, the one place a skorch net is made (a
  :class:`skorch.NeuralNetRegressor` or :class:`skorch.NeuralNetClassifier`),
  for training and for loading a saved model.
- Forward-pass safety: :func:`finite_forward` (overflow), :func:`check_finite_weights`.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping, LRScheduler, ProgressBar
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR

from .._validation import as_tensor
from .batch_reuse import active_reuse
from .rates import Cooldown

DTYPES = {"float32": torch.float32, "float64": torch.float64}
STOP_REASON = "stop_reason"  # history key a stopping callback records before it stops


_PROBE_ROWS = 4096
_PROBE_ELEMENTS = 2**25
"""Floats a forward pass of the start-loss probe may hold at once (128 MiB in float32).

The probe's rows go through the model this many floats' worth of rows at a
time (at least a training batch), so measuring the starting model never
holds more than a step would: 1,024 rows of length 16,384 at once took
1.4 GiB where the two training steps took 0.5.
"""


def probe_chunk(module, seq_len, pe_sampling, n_read, batch_size):
    """Rows of the start-loss probe a forward pass takes at once.

    ``module.elements_per_row`` (floats a forward pass holds per row, at the
    longest training length ``seq_len``) sizes it to :data:`_PROBE_ELEMENTS`,
    never under ``batch_size`` (a training step holds that many rows).
    """
    per_row = module.elements_per_row(seq_len, pe_sampling, n_selected=n_read)
    return max(batch_size, _PROBE_ELEMENTS // max(per_row, 1))


# -- data ------------------------------------------------------------------------------
class TensorData(torch.utils.data.Dataset):
    """Fixed training data as two tensors on the training device."""

    def __init__(self, X, y):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.y[i]

    def probe(self, generator, chunk):
        """Rows to measure the starting model's loss on: the first 4096, ``chunk`` at a time.

        A list of generators (the members of a batched fit) gets them once
        per member, in turn.
        """
        X, y = self.X[:_PROBE_ROWS], self.y[:_PROBE_ROWS]
        copies = len(generator) if isinstance(generator, list) else 1
        for start in range(0, len(X), chunk):
            X_chunk, y_chunk = X[start : start + chunk], y[start : start + chunk]
            yield member_batch([(X_chunk, y_chunk)] * copies)

    def batches(self, batch_size, generator):
        """Shuffled batches: each epoch a permutation drawn from ``generator``.

        A list of generators gives the members of a batched fit their own
        permutations, and a batch is the rows of every member still in the
        list at that step (:func:`live_members`), in turn.
        """
        generators = generator if isinstance(generator, list) else [generator]
        n = len(self.X)
        perms = {id(g): torch.randperm(n, generator=g, device=self.X.device) for g in generators}
        for start in range(0, n, batch_size):
            idx = torch.cat([perms[id(g)][start : start + batch_size] for g in generators])
            # index_select: the rows X[idx] gives, five times faster on a CPU
            yield self.X.index_select(0, idx), self.y.index_select(0, idx)


class MemberRows(torch.utils.data.Dataset):
    """The fixed rows of the members of a batched fit, one :class:`TensorData` each, one size.

    Member s reads only its own rows, shuffled by its own generator (its
    fit's batches); a batch is every member's in turn.
    """

    def __init__(self, members):
        self.members = list(members)

    def keep(self, index):
        """Keep only the members at positions ``index`` (the others have stopped)."""
        self.members[:] = [self.members[i] for i in index]

    def __len__(self):
        return len(self.members[0])

    def __getitem__(self, i):
        raise TypeError("the members' rows are read in batches, not rows")

    def probe(self, generator, chunk):
        """Every member's probe rows (:meth:`TensorData.probe`), joined chunk by chunk."""
        probes = [m.probe(g, chunk) for m, g in zip(self.members, generator)]
        return (member_batch(parts) for parts in zip(*probes))

    def batches(self, batch_size, generator):
        """Every live member's batches from its own generator, joined step by step."""
        streams = [m.batches(batch_size, g) for m, g in zip(self.members, generator)]
        return live_members(streams, generator)


class OnlineData(torch.utils.data.Dataset):
    """A stream of ``n_steps`` fresh batches drawn from a task on the device."""

    def __init__(self, task, n_steps, batch_size, device, dtype):
        self.task, self.n_steps, self.batch_size = task, n_steps, batch_size
        self.device, self.dtype = device, dtype

    def __len__(self):
        return self.n_steps * self.batch_size

    def __getitem__(self, i):
        raise TypeError("an online stream is read in batches, not rows")

    def probe(self, generator, chunk):
        """Rows, from their own generator, to measure the starting model's loss on.

        ``max(batch_size, 1024)`` rows (at most 4096), drawn ``chunk`` at a
        time: one draw of them all when they fit in one chunk. A list of
        generators (the members of a batched fit) draws each member's,
        joined chunk by chunk.
        """
        if isinstance(generator, list):
            probes = [self.probe(g, chunk) for g in generator]
            return (member_batch(parts) for parts in zip(*probes))
        return self._probe(generator, chunk)

    def _probe(self, generator, chunk):
        n = min(max(self.batch_size, 1024), _PROBE_ROWS)
        for start in range(0, n, chunk):
            yield self.task.sample_torch(
                min(chunk, n - start), generator=generator, device=self.device, dtype=self.dtype
            )

    def batches(self, batch_size, generator):
        """The ``n_steps`` batches drawn from ``generator``.

        Inside :func:`~.batch_reuse.reuse_batches`, a stream an earlier fit
        drew (same task, batch size, generator state, device and dtype) is
        replayed. A list of generators gives the members of a batched fit
        their own streams (each replayed as its fit's would be), a batch
        being every member's rows in turn (:func:`member_batch`).
        """
        reuse = active_reuse()
        if reuse is None:
            return (self.draw(batch_size, generator) for _ in range(self.n_steps))
        if isinstance(generator, list):
            return live_members([self.batches(batch_size, g) for g in generator], generator)
        start = generator.get_state().numpy().tobytes()  # the seed, and anything drawn since
        key = (self.task, batch_size, start, str(self.device), self.dtype)
        return reuse.stream(key, self.n_steps, generator, lambda g: self.draw(batch_size, g))

    def draw(self, batch_size, generator):
        """One batch of ``batch_size`` fresh rows (of each generator of a list, in turn)."""
        if not isinstance(generator, list):
            return self.task.sample_torch(
                batch_size, generator=generator, device=self.device, dtype=self.dtype
            )
        lo, hi = self.task.length_range
        if hi > lo:  # each member draws its own length: its own batch
            return member_batch([self.draw(batch_size, g) for g in generator])
        return self.task._sample_torch_members(batch_size, generator, self.device, self.dtype)


class BatchIterator:
    """skorch ``iterator_train``: whole-tensor batches from a ``batches`` dataset.

    ``seed`` is the batch seed of one fit, or a list of the members' batch
    generators (``torch.Generator``, one per member of a batched fit, each
    seeded with its fit's batch seed): the list itself is read, so a member
    removed from it (it stopped) draws no more batches, from the next step.
    """

    def __init__(self, dataset, batch_size, shuffle=True, seed=0, device="cpu"):
        self.dataset, self.batch_size = dataset, batch_size
        if isinstance(seed, list):
            self.generators, self.generator = seed, None
        else:
            self.generator = torch.Generator(device=device).manual_seed(int(seed))
            self.generators = [self.generator]

    def __iter__(self):
        generator = self.generators if self.generator is None else self.generator
        return self.dataset.batches(self.batch_size, generator)

    def __len__(self):
        return -(-len(self.dataset) // self.batch_size)


def live_members(streams, generators):
    """The members' streams joined step by step, each step of the members still in ``generators``.

    ``streams[s]`` is the batches of the member whose generator is
    ``generators[s]``; ``generators`` is read at every step, so a member
    removed from it (in place: it stopped) is no longer drawn from.
    """
    by_member = {id(g): stream for g, stream in zip(generators, streams)}
    while True:
        try:
            parts = [next(by_member[id(g)]) for g in generators]
        except StopIteration:
            return
        yield member_batch(parts)


def member_batch(batches):
    """The members' batches ``[(X, y), ...]`` as one: rows member-major, or lists.

    Batches of one shape are concatenated (member s's rows are the s-th
    block); where the shapes differ (a range of lengths), ``X`` and ``y``
    are the lists of the members' own (:func:`stsq_learn.nn.members.forward_groups`).
    """
    if len(batches) == 1:
        return batches[0]
    Xs, ys = zip(*batches)
    if len({X.shape for X in Xs}) == 1 and len({y.shape for y in ys}) == 1:
        return torch.cat(Xs), torch.cat(ys)
    return list(Xs), list(ys)


# -- callbacks ---------------------------------------------------------------------------
def _silent(*args, **kwargs):
    """A picklable sink for skorch messages we do not print."""


def _stop(net, reason):
    """Record why training stops, then stop it the way skorch expects (as EarlyStopping)."""
    net.history.record(STOP_REASON, reason)
    raise KeyboardInterrupt


def raise_diverged(net, what):
    """Raise the ``ValueError`` of a diverged run: ``what`` happened, the step is the cause.

    ``net.lr`` is the step size; ``net.lr_offers_auto`` (True when absent) says
    whether the estimator has a ``learning_rate_init="auto"`` to suggest.
    """
    auto = " or leave it at 'auto'" if getattr(net, "lr_offers_auto", True) else ""
    raise ValueError(
        f"Training diverged: {what}. The step size is the likely cause: lower "
        f"learning_rate_init (it was {net.lr:.4g}){auto}, or rescale "
        "X and y. The estimator was left as it was before this call (on_divergence='warn' "
        "keeps a diverged model whose weights are finite)."
    )


class TrainingGuard(Callback):
    """Stop training with a clear error as soon as a batch loss is not finite."""

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        loss = net.history[-1]["batches"][-1].get("train_loss")
        if loss is not None and not math.isfinite(loss):
            n_batches = len(net.history[-1]["batches"])
            if len(net.history) == 1 and n_batches == 1:  # before any step: not the step's
                raise ValueError(
                    f"The loss of the starting model is {loss} on the first batch, before any "
                    "training step, so the step size is not the cause: the values of X or y "
                    "overflow the training dtype's arithmetic. Rescale X and y. The estimator "
                    "was left as it was before this call."
                )
            raise_diverged(
                net,
                f"the training loss became {loss} at epoch {len(net.history)}, batch {n_batches}",
            )


class EarlyStop(EarlyStopping):
    """skorch's ``EarlyStopping`` on the training loss, recording that it fired."""

    def __init__(self, patience, threshold):
        super().__init__(
            monitor="train_loss",
            patience=patience,
            threshold=threshold,
            threshold_mode="abs",
            sink=_silent,
        )

    def on_epoch_end(self, net, **kwargs):
        try:
            super().on_epoch_end(net, **kwargs)
        except KeyboardInterrupt:
            _stop(net, "no_improvement")


class AdaptiveRate(Callback):
    """``learning_rate="adaptive"``, which torch's schedulers do not express.

    While the epoch loss improves by at least ``tol`` the rate stays; after
    ``patience`` epochs without that, it is divided by 5; once it is at most
    1e-6, training stops. It replaces early stopping. The rate of every batch
    is recorded in the history as ``event_lr``, as skorch's ``LRScheduler`` does.
    """

    def __init__(self, patience, tol):
        self.patience = patience
        self.tol = tol

    def initialize(self):
        self.best_loss_ = math.inf
        self.misses_ = 0
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            net.history.record_batch("event_lr", net.optimizer_.param_groups[0]["lr"])

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1].get("train_loss", math.inf)
        if loss < self.best_loss_ - self.tol:
            self.best_loss_, self.misses_ = loss, 0
            return
        self.misses_ += 1
        if self.misses_ < self.patience:
            return
        groups = net.optimizer_.param_groups
        if groups[0]["lr"] <= 1e-6:
            _stop(net, "learning_rate_too_small")
        for group in groups:
            group["lr"] /= 5.0
        self.misses_ = 0


class InverseScaling:
    """Factor of ``"invscaling"`` at step k: ``1 / (rows seen before it + 1) ** power_t``.

    Rows are counted as scikit-learn's MLP counts them: ``rows_before`` (a
    warm start's ``t_``), plus ``rows_per_epoch`` per completed epoch of
    ``steps_per_epoch`` batches, plus ``batch_size`` per batch of the
    current epoch (online training is one epoch of ``n_steps`` batches).
    """

    def __init__(self, power_t, rows_before, batch_size, steps_per_epoch, rows_per_epoch):
        self.power_t = power_t
        self.rows_before = rows_before
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.rows_per_epoch = rows_per_epoch

    def __call__(self, step):
        epoch, batch = divmod(step, self.steps_per_epoch)
        rows = self.rows_before + epoch * self.rows_per_epoch + batch * self.batch_size
        return 1.0 / (rows + 1) ** self.power_t


def rate_schedule(schedule, *, power_t, n_steps, batch_size, n_rows, rows_before, patience, tol):
    """The callback that applies ``learning_rate`` (None for ``"constant"``).

    ``n_rows`` is the number of rows of one epoch (``n_steps * batch_size``
    online); ``n_steps`` the planned optimiser steps.
    """
    if schedule == "cosine":
        return LRScheduler(policy=CosineAnnealingLR, step_every="batch", T_max=n_steps)
    if schedule == "cooldown":
        return LRScheduler(policy=LambdaLR, step_every="batch", lr_lambda=Cooldown(n_steps))
    if schedule == "invscaling":
        steps_per_epoch = -(-n_rows // batch_size)
        factor = InverseScaling(power_t, rows_before, batch_size, steps_per_epoch, n_rows)
        return LRScheduler(policy=LambdaLR, step_every="batch", lr_lambda=factor)
    if schedule == "adaptive":
        return AdaptiveRate(patience, tol)
    return None


# -- the net -----------------------------------------------------------------------------
def build_net(
    module,
    *,
    net,
    criterion,
    solver,
    learning_rate_init,
    momentum,
    alpha,
    device,
    callbacks=(),
    max_epochs=1,
    batch_size=1,
    order_seed=0,
    verbose=0,
    step_progress=False,
):
    """The skorch class ``net`` (not initialised) that trains (or, loaded, holds) ``module``.

    ``module`` is already on ``device``, where batches are sliced or drawn; ``criterion`` the loss
    (:mod:`stsq_learn.nn.losses`); ``alpha`` the weight decay; ``callbacks`` come after skorch's
    defaults; ``order_seed`` seeds the batch order or draws; ``verbose`` 1 prints the epoch
    table, 2 adds a progress bar, which ``step_progress`` shows at 1 too (online training).
    """
    if solver == "sgd":
        optimizer, opt_kwargs = torch.optim.SGD, {"optimizer__momentum": momentum}
    else:
        optimizer, opt_kwargs = torch.optim.Adam, {}
    callbacks = list(callbacks)
    if verbose >= 2 or (verbose >= 1 and step_progress):
        callbacks.append(ProgressBar())
    if not verbose:  # skorch's epoch table, formatted at every epoch even when not printed
        opt_kwargs["callbacks__print_log"] = None
    return net(
        module=module,
        criterion=criterion,
        optimizer=optimizer,
        lr=learning_rate_init,
        optimizer__weight_decay=alpha,
        max_epochs=max_epochs,
        batch_size=batch_size,
        iterator_train=BatchIterator,
        iterator_train__seed=order_seed,
        iterator_train__device=device,
        train_split=None,
        callbacks=callbacks,
        device=device,
        verbose=int(verbose),
        **opt_kwargs,
    )


def initialize_net(net):
    """``net.initialize()`` without skorch's note that the module instance is re-used."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*already initialized.*")
        return net.initialize()


# -- forward-pass safety -------------------------------------------------------------------
def finite_forward(module, X_chunk, generator, kwargs):
    """Forward a NumPy chunk; if the result overflows, redo it in float64.

    Huge but finite tokens (or float64 values beyond the float32 range) can
    overflow a float32 forward pass (scores, softmax, hidden layers). Normal
    inputs take the first path only, so their results are unchanged; an
    overflowing chunk is recomputed with a float64 copy of the module from the
    same generator state. Returns a CPU tensor.
    """
    param = next(module.parameters())
    state = generator.get_state()
    out = module(as_tensor(X_chunk, param.dtype, param.device), generator=generator, **kwargs)
    if not torch.isfinite(out).all() and param.dtype != torch.float64:
        generator.set_state(state)
        wide = copy.deepcopy(module).to(torch.float64)
        xb = as_tensor(X_chunk, torch.float64, param.device)
        out = wide(xb, generator=generator, **kwargs)
    if not torch.isfinite(out).all():
        peak = float(np.abs(X_chunk).max())
        raise ValueError(
            f"The prediction overflowed even in float64: X holds values up to {peak:.3g} "
            "in absolute value. Rescale X."
        )
    return out.cpu()


def check_finite_weights(net):
    """Refuse to return a model whose weights are NaN or infinite."""
    for name, param in net.module_.named_parameters():
        if not torch.isfinite(param).all():
            raise_diverged(net, f"the weights ({name}) became NaN or infinite")


def available_device(device, owner):
    """``device``, or the CPU (with a warning) when it is a CUDA device this machine lacks."""
    device = torch.device(device)
    if device.type != "cuda" or torch.cuda.is_available():
        return device
    warnings.warn(
        f"{owner} was fitted on {device}, which this machine does not have; it is "
        "loaded on the CPU and predicts on the CPU. Its prediction draws are keyed by "
        "row, so they are those of the GPU; only float rounding differs.",
        UserWarning,
        stacklevel=4,
    )
    return torch.device("cpu")
