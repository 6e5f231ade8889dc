"""Seeds of one estimator trained together as one model, then split back into fitted estimators.

:func:`fit_members` and :func:`fit_online_members` fit S estimators that
differ only in ``random_state`` at once; each ends as its own ``fit`` /
``fit_online`` would leave it, with the same checks, warnings and errors,
to the bit on a CPU in float32 and float64 (every product with a member's
parameters is its fit's own expression on its rows, each member's loss its
own mean). A task with a range of lengths sends the members through the
model in groups of one length (float64 weights then agree to about 1e-15);
several heads that start identical, read out at their average, with the
marginal sampler agree in law only (its triangular factor turns rounding
into a gradient's direction).

How the engine batches them: every member draws its fit's four seeds
(weights, batch order or stream, training encodings, prediction draws) in
list order (a shared ``RandomState`` is consumed as by sequential fits) and
builds its module as its fit does; the modules are stacked into one with a
leading member axis (:mod:`stsq_learn.nn.members`). A step joins the
members' own batches member-major (:func:`~.batch_reuse.reuse_batches`
replays each member's stream) and draws member s's encodings from its own
generator (:class:`~stsq_learn.encodings.StreamedDraws` of a list). The
loss is the sum of the members' mean losses, the optimisers (SGD with
momentum and weight decay, Adam) act elementwise and the paces
(:mod:`.rates`) pace each member's blocks, so each member steps as its fit
does under the one rate schedule. Each member keeps its own history and is
judged alone: a non-finite loss fails it, early stopping stops it, and its
callbacks of the call (given its own net, whose tensors view its slice of
the stacked module) may stop it (``KeyboardInterrupt``) or fail it
(``ValueError``); a callback class may answer for all members at once (a
classmethod ``members_batch_end(pairs)`` with each member's ``(callback,
net)``, called once a step after the other callbacks, returning per member
whether it stops: the studies' stopping rule scores the members due in one
forward, :func:`predict_members`). A member that stops or fails keeps its
weights and optimiser state of that step and leaves the run: its slices and
its generators are cut, so the others' steps are those of a run without it.
After the run each member's own net holds its weights and is judged as its
fit would be (non-finite weights, divergence, ``on_divergence``) before any
fitted state is assigned.

Settings that do not move in lockstep fall back to the sequential fits
(:func:`fit_members`' Notes), decided before any seed is drawn.

Supporting members in a new model (developer note): the module class gives
a classmethod ``stacked(modules)`` (one module with a leading member axis S
on every parameter and buffer and ``n_members = S``;
:func:`stsq_learn.nn.members.stack` does it for plain tensors and
``nn.Linear`` layers), and a ``forward`` that serves both: every product
with a parameter through :func:`stsq_learn.nn.members.linear` or a grouped
layer, row-wise operations unchanged (rows come member-major), encoding
draws only through its ``generator`` (told padding by ``read=`` of
``sphere`` where a shape follows the batch), a list ``X`` (batches of other
shapes) through :func:`stsq_learn.nn.members.forward_groups`, and the
parameters the paces read (``key_query``, ``readout``) in their single
layout after the member axis. The estimator works through the engine's
named steps (``_fit_inputs`` / ``_online_inputs``, ``_plan``,
``_judge_run``, ``_assign_fitted``); a module shaped by the data beyond the
task (a classifier's classes) is told them by ``_member_inputs(inputs)``,
with ``module_sizes`` in its inputs (members of other sizes fit one after
another), as :mod:`.classification` does. An estimator with loops of its
own overrides the classmethod ``_fit_members(estimators, method, calls,
errors)``; one not on the engine is fitted one estimator after another.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

import numpy as np
import torch
from skorch.callbacks import Callback, LRScheduler

from .._validation import check_callbacks
from ..encodings.draws import StreamedDraws
from . import progress
from . import training as tr
from .memory import PREDICT_ELEMENTS, check_fit_memory

__all__ = ["fit_members", "fit_online_members", "member_nets", "predict_members"]

ERRORS = ("raise", "return")


def fit_members(estimators, X, y, *, errors="raise", callbacks=None):
    """Fit several seeds of one estimator on ``(X, y)`` together, as one model.

    The same as ``[est.fit(X, y) for est in estimators]`` (to the bit on
    a CPU, but for a range of lengths: see the module), in one batched
    training run: every estimator keeps its own initialisation, batch order
    and encoding draws (those of its own fit), its own early stopping and
    its own verdict.

    Parameters
    ----------
    estimators : list of estimator
        Estimators of one class whose parameters are equal except
        ``random_state`` (e.g. ``[clone(est).set_params(random_state=s) for s
        in seeds]``), fitted or not.
    X : array-like of shape (n_samples, seq_len, n_channels), or list of them
        Rows of the estimators' task; a list of ``len(estimators)`` arrays
        gives each member its own rows (of one size), each shuffled by its
        member as its fit would.
    y : array-like, or list of them
        Targets (a list: each member's own, with its rows).
    errors : {"raise", "return"}, default="raise"
        What a member whose fit fails (a training loss that is not finite, a
        run that diverged with ``on_divergence="raise"``) does to the call:
        ``"raise"``: a ``ValueError`` naming the failed members'
        ``random_state`` (chained to the first one's error), and no
        estimator is changed; ``"return"``: the other members are fitted,
        the failed one is left as it was and its ``ValueError`` takes its
        place in the returned list.
    callbacks : list of list of skorch callbacks, or None, default=None
        Each member's own callbacks (one list per estimator), which act on
        that member as its fit's ``callbacks`` would, without being set on
        the estimator: they are given its net at every step, holding the
        member's weights of that moment, so they can score or measure it; a
        callback that raises ``KeyboardInterrupt`` (as skorch's early
        stopping does) stops that member alone, which keeps its weights and
        optimiser state of that step and leaves the run (the others go on,
        and it costs nothing more); one that raises ``ValueError`` fails it.

    Returns
    -------
    list
        The same estimator objects, fitted, in order (with
        ``errors="return"``, a failed member's exception in its place).

    Raises
    ------
    TypeError, ValueError
        For estimators that are not of one class, that differ in a
        parameter other than ``random_state`` (named), that hold one object
        twice, for ``callbacks`` that are not one list of skorch callbacks
        per estimator, or an invalid hyperparameter, input or size (as
        ``fit`` checks them, and the memory of all members together),
        before any work; for failed members, with ``errors="raise"``.

    Notes
    -----
    Where the settings cannot move in lockstep the estimators are fitted one
    after another, with the same guarantees (a single estimator,
    ``warm_start=True`` on a fitted one, ``learning_rate="adaptive"``, user
    ``callbacks``, ``verbose > 0``, an estimator without a batched path or
    a module without ``stacked``; with rows of their own, members of other
    sizes or other step sizes: ``learning_rate_init="auto"`` follows each
    member's loss of predicting 0).

    Examples
    --------
    >>> from sklearn.base import clone
    >>> from stsq_learn import FCNSelector, make_sparse_token_selection
    >>> from stsq_learn.engine.members import fit_members
    >>> X, y = make_sparse_token_selection(
    ...     200, seq_len=8, n_features=2, random_state=0)
    >>> est = FCNSelector(16, max_iter=20, dtype="float64")
    >>> members = [clone(est).set_params(random_state=s) for s in range(3)]
    >>> fitted = fit_members(members, X, y)
    >>> one = clone(est).set_params(random_state=2).fit(X, y)
    >>> bool(abs(one.predict(X) - fitted[2].predict(X)).max() < 1e-9)
    True
    """
    if _per_member(X, estimators):
        if not isinstance(y, (list, tuple)) or len(y) != len(X):
            raise ValueError(
                f"X is a list of {len(X)} arrays, one per estimator: y must be a list of as "
                f"many target arrays, got {type(y).__name__}"
                + (f" of {len(y)}." if isinstance(y, (list, tuple)) else ".")
            )
        return _fit(estimators, "fit", list(zip(X, y)), errors, callbacks)
    return _fit(estimators, "fit", (X, y), errors, callbacks)


def _per_member(X, estimators):
    """Whether ``X`` is the members' own rows: a list of one whole array per estimator."""
    return (
        isinstance(X, (list, tuple))
        and isinstance(estimators, (list, tuple))
        and len(X) == len(estimators)
        and all(isinstance(x, (np.ndarray, torch.Tensor)) and x.ndim >= 3 for x in X)
    )


def fit_online_members(estimators, task, n_steps="auto", *, errors="raise", callbacks=None):
    """Fit several seeds of one estimator online on ``task`` together, as one model.

    The same as ``[est.fit_online(task, n_steps) for est in estimators]``
    (to the bit on a CPU, but for a range of lengths), in one batched
    training run: every estimator draws its own batches and encodings
    (those of its own fit).

    Parameters
    ----------
    estimators : list of estimator
        Estimators of one class whose parameters are equal except
        ``random_state``, fitted or not.
    task : Task
        The law to draw batches from.
    n_steps : int or "auto", default="auto"
        Steps of every member (``"auto"``: the estimators' own).
    errors : {"raise", "return"}, default="raise"
        What a failed member does to the call (as in :func:`fit_members`).
    callbacks : list of list of skorch callbacks, or None, default=None
        Each member's own callbacks (as in :func:`fit_members`): a member
        whose callback stops it (``KeyboardInterrupt``) keeps its weights of
        that step and leaves the run.

    Returns
    -------
    list
        The same estimator objects, fitted, in order (with
        ``errors="return"``, a failed member's exception in its place).

    Raises
    ------
    TypeError, ValueError
        As :func:`fit_members`.

    Examples
    --------
    >>> from sklearn.base import clone
    >>> from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
    >>> from stsq_learn.engine.members import fit_online_members
    >>> task = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=2)
    >>> est = SparseTokenSelector(16, dtype="float64")
    >>> models = [clone(est).set_params(random_state=s) for s in range(3)]
    >>> models = fit_online_members(models, task, n_steps=50)
    >>> one = clone(est).set_params(random_state=1).fit_online(task, n_steps=50)
    >>> bool(abs(one.key_query_ - models[1].key_query_).max() < 1e-9)
    True
    """
    return _fit(estimators, "fit_online", (task, n_steps), errors, callbacks)


def _fit(estimators, method, args, errors, callbacks=None):
    """Check, then fit: ``args`` the call's arguments, or a list of each member's."""
    if errors not in ERRORS:
        raise ValueError(f"errors must be 'raise' or 'return', got {errors!r}.")
    estimators = check_members(estimators)
    callbacks = check_member_callbacks(callbacks, len(estimators))
    calls = args if isinstance(args, list) else [args] * len(estimators)
    hook = getattr(type(estimators[0]), "_fit_members", None)
    if hook is None or (any(callbacks) and not getattr(hook, "takes_callbacks", False)):
        return fit_one_by_one(estimators, method, calls, errors, callbacks)
    if getattr(hook, "takes_callbacks", False):
        return hook(estimators, method, calls, errors, callbacks=callbacks)
    return hook(estimators, method, calls, errors)


def check_member_callbacks(callbacks, n_members):
    """``callbacks`` as one list of skorch callbacks per member (None: none), or an error."""
    if callbacks is None:
        return [[] for _ in range(n_members)]
    if not isinstance(callbacks, (list, tuple)) or len(callbacks) != n_members:
        raise ValueError(
            f"callbacks must be a list of {n_members} lists of skorch callbacks, one per "
            f"estimator, got {callbacks!r}."
        )
    out = []
    for i, own in enumerate(callbacks):
        if not isinstance(own, (list, tuple)) or not all(isinstance(c, Callback) for c in own):
            raise TypeError(
                f"callbacks[{i}] must be a list of skorch callbacks (instances of "
                f"skorch.callbacks.Callback), got {own!r}."
            )
        out.append(list(own))
    seen = [id(c) for own in out for c in own]
    if len(set(seen)) < len(seen):
        raise ValueError("callbacks holds one callback object twice; give each member its own.")
    return out


def check_members(estimators):
    """``estimators`` as a list, checked to be seeds of one estimator, or an error naming what.

    Seeds: distinct objects of one class whose parameters differ only in ``random_state``.
    """
    if isinstance(estimators, (str, bytes)) or not isinstance(estimators, Iterable):
        raise TypeError(
            f"estimators must be a list of estimators, got {type(estimators).__name__}."
        )
    estimators = list(estimators)
    if not estimators:
        raise ValueError("estimators is empty: give at least one estimator.")
    first = estimators[0]
    for i, est in enumerate(estimators):
        if not hasattr(est, "get_params") or not hasattr(est, "fit"):
            raise TypeError(f"estimators[{i}] is not an estimator: {est!r}.")
        if type(est) is not type(first):
            raise TypeError(
                f"estimators[{i}] is a {type(est).__name__} and estimators[0] a "
                f"{type(first).__name__}: the members are seeds of one estimator."
            )
    if len({id(e) for e in estimators}) < len(estimators):
        raise ValueError("estimators holds the same object twice; clone it for each seed.")
    reference = first.get_params(deep=False)
    for i, est in enumerate(estimators[1:], start=1):
        for key, value in est.get_params(deep=False).items():
            if key != "random_state" and not _same(value, reference[key]):
                raise ValueError(
                    f"estimators[{i}] has {key}={value!r} and estimators[0] {key}="
                    f"{reference[key]!r}: the members of a batched fit differ only in "
                    "random_state."
                )
    return estimators


def _same(a, b):
    if a is b:
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):  # arrays and the like: only the same object
        return False


def fit_one_by_one(estimators, method, calls, errors, callbacks=None):
    """``getattr(est, method)(*call)`` for each estimator in turn: the exact sequential fits.

    ``calls`` holds each member's arguments, ``errors`` and the result are as in
    :func:`fit_members`: with ``"raise"`` a failure restores every estimator fitted before it;
    with ``"return"`` a member whose fit raises ``ValueError`` is left as it was, its exception
    in its place. A member's ``callbacks`` are added to its ``callbacks`` parameter for its fit
    only.
    """
    saved = [dict(est.__dict__) for est in estimators]
    callbacks = callbacks or [[] for _ in estimators]
    results = []
    for est, state, args, own in zip(estimators, saved, calls, callbacks):
        try:
            if own:
                given = est.get_params().get("callbacks")
                est.set_params(callbacks=[*(given or []), *own])
                try:
                    getattr(est, method)(*args)
                finally:
                    est.set_params(callbacks=given)
            else:
                getattr(est, method)(*args)
        except ValueError as exc:
            _restore(est, state)
            if errors == "raise":
                for other, other_state in zip(estimators, saved):
                    _restore(other, other_state)
                raise
            results.append(exc)
        except BaseException:
            for other, other_state in zip(estimators, saved):
                _restore(other, other_state)
            raise
        else:
            results.append(est)
    return results


def _restore(est, state):
    est.__dict__.clear()
    est.__dict__.update(state)


def fallback_reason(estimators, online=True):
    """Why the engine's checked members fit one after another (a str), or None: as one model.

    ``online``: whether they fit online (the schedule a setting resolves to may depend on it).
    """
    first = estimators[0]
    if len(estimators) == 1:
        return "a single estimator"
    if any(e.warm_start and hasattr(e, "net_") for e in estimators):
        return "warm_start=True on a fitted estimator continues its own run"
    if first._schedule(online) == "adaptive":
        return "learning_rate='adaptive' lowers each member's rate on its own"
    if first.callbacks:
        return "callbacks act on one net"
    if first.verbose:
        return "verbose > 0 shows each fit's own progress"
    return None


def fit_stacked(estimators, method, calls, errors, callbacks=None):
    """The engine's batched fit (``_BaseEstimator._fit_members``): one stacked module.

    Arguments as :func:`fit_one_by_one` (``calls``: one tuple object for all where the rows are
    shared); returns as :func:`fit_members`.
    """
    callbacks = callbacks or [[] for _ in estimators]
    for est in estimators:  # every member's hyperparameters, before any work
        est._validate_params()
        check_callbacks(est.callbacks)
    first, S = estimators[0], len(estimators)
    shared = all(call is calls[0] for call in calls)
    parts = [e._fit_inputs if method == "fit" else e._online_inputs for e in estimators]
    inputs = [parts[0](*calls[0])] * S if shared else [p(*c) for p, c in zip(parts, calls)]
    for est, i in zip(estimators, inputs):  # what a member's module is built for (classes)
        if hasattr(est, "_member_inputs"):
            est._member_inputs(i)
    fitted_task = first._fitted_task(inputs[0]["task"])
    online = method == "fit_online"
    with torch.device("meta"):
        meta = first._make_module(fitted_task, 0)
    stackable = hasattr(meta, "stacked")
    if fallback_reason(estimators, online) is not None or not stackable or not _lockstep(inputs):
        return fit_one_by_one(estimators, method, calls, errors, callbacks)
    device, batch_size, epochs = (inputs[0][k] for k in ("device", "batch_size", "epochs"))
    n_steps = first._planned_steps(inputs[0]["data"], epochs, batch_size)[1]
    steps = [
        _steps(e._resolve_optimiser(i["zero_loss"], n_steps, meta, online))
        for e, i in zip(estimators, inputs)
    ]
    if any(s != steps[0] for s in steps):  # a step size following each member's own rows
        return fit_one_by_one(estimators, method, calls, errors, callbacks)
    n_read = max((i["n_read"] for i in inputs), key=lambda q: -1 if q is None else q)
    check_fit_memory(first, fitted_task, batch_size, device, n_read, members=S)
    runs = [  # each member's seeds, drawn in list order as its fit draws them, and module
        est._plan(i["data"], fitted_task, device, batch_size, epochs, *_own(i))
        for est, i in zip(estimators, inputs)
    ]
    data = inputs[0]["data"] if shared else tr.MemberRows([i["data"] for i in inputs])
    run0 = runs[0]
    stacked = type(run0.module).stacked([run.module for run in runs])
    nets = [tr.initialize_net(est._run_net(run)) for est, run in zip(estimators, runs)]
    # Each member's callbacks on its own net, after its fit's own (as its fit orders them).
    for net, own in zip(nets, callbacks):
        for i, cb in enumerate(own):
            cb.initialize()
            net.callbacks_.append((f"member_callback_{i}", cb))
    # The members' batch and draw generators: the lists are read at every step, and a
    # member that stops leaves them (and the stacked module, and its optimiser state).
    order = [torch.Generator(device=device).manual_seed(int(run.order_seed)) for run in runs]
    draws = StreamedDraws(
        [torch.Generator(device=device).manual_seed(run.pe_seed) for run in runs], reuse=True
    )
    # The stacked net: the members' paces and rate schedule (the same for all), then the
    # members' own bookkeeping, last (after the optimiser, the paces and the schedule).
    paces = first._resolve_optimiser(inputs[0]["zero_loss"], run0.n_steps, meta, online)[3]
    schedule = [c for c in run0.callbacks if isinstance(c, LRScheduler)]
    schedule = copy.deepcopy(schedule)  # a fresh instance: run0's belongs to member 0's net
    members = _Members(nets, data, callbacks, order, draws)
    stacked_net = first._build_net(
        stacked,
        device,
        solver=run0.solver,
        learning_rate_init=run0.rate,
        callbacks=[*paces, *schedule, members],
        max_epochs=epochs,
        batch_size=batch_size,
        order_seed=order,
        step_progress=False,
    )
    stacked_net.set_params(criterion__n_members=S)
    probes = [torch.Generator(device=device).manual_seed(run.pe_seed + 1) for run in runs]
    starts = progress.start_loss(stacked, data, probes, run0.kwargs, run0.chunk, first._criterion())
    for s, net in enumerate(nets):  # each member's module reads its slice of the stacked one
        _bind(stacked, net.module_, s)
    try:
        for net in nets:
            net.notify("on_train_begin", X=data, y=None)
        first._run(stacked_net, data, draws)
    finally:
        members.release(stacked_net)
    for s, net in enumerate(nets):
        if s not in members.failed:
            net.notify("on_train_end", X=data, y=None)
    results, losses = _judge(estimators, runs, nets, starts, members)
    raise_failures(estimators, results, errors)
    for est, run, net, result, curve in zip(estimators, runs, nets, results, losses):
        if not isinstance(result, BaseException):
            est._assign_fitted(run, net, curve)
    return results


def raise_failures(estimators, results, errors, names=None):
    """With ``errors="raise"``, one ``ValueError`` for the failed members (before any is set).

    ``results``: each member's estimator or ``ValueError``; ``names``: what the message calls
    each member (None: ``random_state=<its seed>``).
    """
    failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
    if failed and errors == "raise":
        if names is None:
            names = [f"random_state={est.random_state!r}" for est in estimators]
        states = ", ".join(names[i] for i in failed)
        raise ValueError(
            f"{len(failed)} of the {len(estimators)} members failed ({states}); no estimator "
            f"was changed. The first: {results[failed[0]]}"
        ) from results[failed[0]]


def _own(inputs):
    """What a member's plan takes from its own inputs: its loss of predicting 0, queries, y."""
    return inputs["zero_loss"], inputs["n_read"], inputs["y_1d"]


def _lockstep(inputs):
    """Whether the members' fits have one task, batch size, epochs and number of rows.

    And one ``module_sizes`` where their inputs give it (what a module's
    shape takes from the data besides the task: a classifier's classes).
    """
    keys = ("batch_size", "epochs", "y_1d", "device")
    first = inputs[0]
    return all(
        all(i[k] == first[k] for k in keys)
        and i.get("module_sizes") == first.get("module_sizes")
        and i["task"].fitted_state() == first["task"].fitted_state()
        and (i["task"].reference_length, i["task"].n_features)
        == (first["task"].reference_length, first["task"].n_features)
        and len(i["data"]) == len(first["data"])
        for i in inputs
    )


def _steps(optimiser):
    """A resolved ``(solver, rate, token_rate, paces)`` as comparable values."""
    solver, rate, token_rate, paces = optimiser
    return solver, rate, token_rate, [(type(p).__name__, p.rate) for p in paces]


def _judge(estimators, runs, nets, starts, members):
    """Judge every member on its own net (its weights and optimiser state in it).

    Returns ``(results, loss curves)``.
    """
    results, curves = [], []
    for s, (est, run, net, start) in enumerate(zip(estimators, runs, nets, starts)):
        if s in members.failed:
            results.append(members.failed[s])
            curves.append(None)
            continue
        _load_optimizer_state(net, members.optimizer_states[s])
        try:
            curves.append(est._judge_run(run, net, start))
        except ValueError as exc:
            results.append(exc)
            curves.append(None)
        else:
            results.append(est)
    return results, curves


def _bind(stacked, module, slot):
    """Make ``module``'s parameters and buffers views of ``stacked``'s at member ``slot``.

    The member's own module then holds its weights of the moment at no cost:
    what its callbacks score, or measure, is the member as it stands.
    """
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            source = _stacked_tensor(stacked, name)
            tensor.data = source.data[slot]


def _unbind(module):
    """Give ``module`` its own copies of the tensors it views (its weights at this moment)."""
    with torch.no_grad():
        for _, tensor in [*module.named_parameters(), *module.named_buffers()]:
            tensor.data = tensor.data.clone()


def _stacked_tensor(stacked, name):
    parent, _, leaf = name.rpartition(".")
    return getattr(stacked.get_submodule(parent), leaf)


def _optimizer_state(net, slot):
    """Member ``slot``'s optimiser state in the stacked ``net``: ``(per parameter name, groups)``.

    Copies of its slices of every moment (tensors with the parameter's
    shape), the shared step counts, and the rates of the moment.
    """
    optimizer = net.optimizer_
    state = {}
    for name, param in net.module_.named_parameters():
        own = optimizer.state.get(param)
        if not own:
            continue
        state[name] = {
            k: (v[slot] if v.dim() and v.shape == param.shape else v).detach().clone()
            if torch.is_tensor(v)
            else copy.deepcopy(v)
            for k, v in own.items()
        }
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    return state, copy.deepcopy(groups)


def _load_optimizer_state(net, kept):
    """A member's optimiser state (:func:`_optimizer_state`) into its own net's optimiser."""
    state, groups = kept
    mine = dict(net.module_.named_parameters())
    for name, values in state.items():
        net.optimizer_.state[mine[name]] = values
    for group, own_group in zip(groups, net.optimizer_.param_groups):
        own_group.update(group)


class _Members(Callback):
    """The members' own bookkeeping in the stacked run: history, guard, stopping, leaving.

    Each member's net keeps the history its fit would and runs its own callbacks (epoch ends,
    early stopping; its callbacks of the call at every step); a member that fails or stops
    leaves the run as the module's docstring says.
    """

    def __init__(self, nets, data, callbacks, order, draws):
        self.nets = nets
        self.data = data
        self.callbacks = callbacks
        self.order = order
        self.draws = draws

    def initialize(self):
        self.slots_ = list(range(len(self.nets)))  # the members still in the run, in order
        self.failed = {}  # member -> its ValueError
        self.optimizer_states = {}  # member -> its optimiser state when it left
        return self

    @property
    def active_(self):
        """The members still training."""
        return list(self.slots_)

    def on_epoch_begin(self, net, **kwargs):
        self.epochs_ = {}
        for s in self.slots_:
            member = self.nets[s]
            member.notify("on_epoch_begin", dataset_train=self.data, dataset_valid=None)
            self.epochs_[s] = list.__getitem__(member.history, -1)  # its epoch's record

    def on_batch_end(self, net, batch=None, training=False, **kwargs):
        if not training:
            return
        losses = net.criterion_.member_losses_.tolist()
        record = net.history[-1]["batches"][-1]  # the step's: its rate, with the batch's size
        X = batch[0]
        rows = len(X[0]) if isinstance(X, list) else len(X) // len(self.slots_)
        leaving = []
        for slot, s in enumerate(self.slots_):
            # The record its fit makes (keys in the same order), with its own loss.
            batch_record = {**record, "train_loss": losses[slot], "train_batch_size": rows}
            self.epochs_[s]["batches"].append(batch_record)
            member = self.nets[s]
            if not math.isfinite(losses[slot]):
                try:
                    tr.TrainingGuard().on_batch_end(member, training=True)
                except ValueError as exc:  # its fit would stop here with this error
                    self.failed[s] = exc
                    leaving.append(s)
                    continue
            try:
                for cb in self.callbacks[s]:
                    if not hasattr(type(cb), "members_batch_end"):
                        cb.on_batch_end(member, batch=None, training=True)
            except KeyboardInterrupt:  # its callback stops it, as its fit would stop
                leaving.append(s)
            except ValueError as exc:  # its fit would fail with this error
                self.failed[s] = exc
                leaving.append(s)
        self._together(leaving)
        self._leave(net, leaving)

    def _together(self, leaving):
        """The callbacks whose class answers for all members at once (``members_batch_end``).

        Called after the members' other callbacks of the step, once per class
        with every member still going on (``[(callback, its member's net)]``),
        it returns per member whether it stops (as a ``KeyboardInterrupt`` of
        its ``on_batch_end`` would): a stopping rule scores the members due
        for a check in one forward.
        """
        groups = {}
        for s in self.slots_:
            if s in leaving:
                continue
            for cb in self.callbacks[s]:
                if hasattr(type(cb), "members_batch_end"):
                    groups.setdefault(type(cb), []).append((s, cb))
        for kind, members in groups.items():
            try:
                stops = kind.members_batch_end([(cb, self.nets[s]) for s, cb in members])
            except ValueError as exc:  # each member's fit would fail with this error
                stops = [exc] * len(members)
            for (s, _), stop in zip(members, stops):
                if s in leaving:
                    continue
                if isinstance(stop, BaseException):
                    self.failed[s] = stop
                if stop:
                    leaving.append(s)

    def on_epoch_end(self, net, **kwargs):
        count = net.history[-1].get("train_batch_count")
        leaving = []
        for s in self.slots_:
            member = self.nets[s]
            member.history.record("train_batch_count", count)
            try:
                member.notify("on_epoch_end", dataset_train=self.data, dataset_valid=None)
            except KeyboardInterrupt:  # its early stopping, which recorded why
                leaving.append(s)
        self._leave(net, leaving)

    def _leave(self, net, members):
        """Members ``members`` leave the run, kept as they stand (or failed)."""
        if not members:
            return
        for s in members:
            slot = self.slots_.index(s)
            if s not in self.failed:
                self.optimizer_states[s] = _optimizer_state(net, slot)
            _unbind(self.nets[s].module_)
        keep = [i for i, s in enumerate(self.slots_) if s not in members]
        self.slots_ = [self.slots_[i] for i in keep]
        if not self.slots_:
            raise KeyboardInterrupt  # no member left: skorch ends the run
        self._cut(net, keep)

    def _cut(self, net, keep):
        """Keep only the stacked positions ``keep`` in the module, optimiser and draws."""
        module, optimizer = net.module_, net.optimizer_
        index = torch.tensor(keep, device=next(module.parameters()).device)
        renamed = {}
        with torch.no_grad():
            # New parameters (a leaf's autograd keeps its shape): their state moves with them.
            for name, param in list(module.named_parameters()):
                new = torch.nn.Parameter(param.detach().index_select(0, index))
                state = optimizer.state.pop(param, None)
                if state:
                    optimizer.state[new] = {
                        k: v.index_select(0, index)
                        if torch.is_tensor(v) and v.dim() and v.shape == param.shape
                        else v
                        for k, v in state.items()
                    }
                parent, _, leaf = name.rpartition(".")
                setattr(module.get_submodule(parent), leaf, new)
                renamed[param] = new
            for group in optimizer.param_groups:
                group["params"] = [renamed.get(p, p) for p in group["params"]]
            for name, buffer in list(module.named_buffers()):
                parent, _, leaf = name.rpartition(".")
                setattr(module.get_submodule(parent), leaf, buffer.index_select(0, index))
        module.n_members = len(keep)
        net.criterion_.n_members = len(keep)
        self.order[:] = [self.order[i] for i in keep]
        self.draws.keep(keep)
        if isinstance(self.data, tr.MemberRows):
            self.data.keep(keep)
        for slot, s in enumerate(self.slots_):
            _bind(module, self.nets[s].module_, slot)

    def release(self, net):
        """After the run: every member still in it keeps its weights and optimiser state."""
        for slot, s in enumerate(self.slots_):
            if s not in self.failed:
                self.optimizer_states[s] = _optimizer_state(net, slot)
            _unbind(self.nets[s].module_)
        self.slots_ = []


def member_nets(net):
    """The nets of the members still training in a stacked ``net``, in its order; else None.

    Member s's net (built as its single fit builds it) holds its own
    callbacks, and its module views its slice of the stacked one: a pace of
    the stacked run (a callback acting on the stacked module, such as the
    classifier's two-step protocol) gives each member's own callback what
    it records of that member.

    Parameters
    ----------
    net : skorch.NeuralNet
        The net of a run: the stacked net of a batched fit, or a single fit's.

    Returns
    -------
    list of skorch.NeuralNet or None
        Member ``k``'s net at position ``k`` of the stacked module's member
        axis now; None for a single fit's net.
    """
    for _, cb in getattr(net, "callbacks_", ()):
        if isinstance(cb, _Members):
            return [cb.nets[s] for s in cb.slots_]
    return None


def predict_members(estimators, Xs):
    """Each estimator's prediction of its own rows, in one forward of their stacked modules.

    ``estimators`` are fitted estimators of one class and settings (the
    members of a batched fit, or views of them as they train), ``Xs`` their
    rows, checked by the task's ``check_rows``. Member s's prediction is
    what ``estimators[s]._predict_validated(Xs[s])`` gives (a classifier's:
    its ``decision_function``), to the bit on a CPU: its rows go through its
    own slice of a stacked copy of the modules with the keyed draws of its
    own prediction seed (keyed by row, they do not depend on the other
    rows), every product with its weights computed on its rows alone, in one
    chunk as its own prediction takes them. A
    prediction's fixed cost (the draws' and the module's calls) is paid once
    for all.

    Parameters
    ----------
    estimators : list of estimator
        Fitted estimators on the engine, of one class and parameters.
    Xs : list of ndarray
        Each one's rows, of one shape.

    Returns
    -------
    list of ndarray or None
        Each member's prediction; None, having predicted nothing, where they
        cannot be predicted together (fewer than two, rows of other shapes
        or largest queries, a module without ``stacked``, more rows than
        one chunk of a prediction, an output that overflows): then predict
        them one by one.
    """
    from ..encodings.families import KeyedDraws
    from ..encodings.keyed import row_keys

    first = estimators[0]
    modules = [est.net_.module_ for est in estimators]
    if len(estimators) < 2 or not hasattr(type(modules[0]), "stacked"):
        return None
    if any(X.shape != Xs[0].shape for X in Xs) or not len(Xs[0]):
        return None
    n, T = Xs[0].shape[:2]
    queries = {first.task_.largest_query(X) for X in Xs}
    kwargs = first._forward_kwargs()
    if len(queries) > 1:
        return None
    per_row = modules[0].elements_per_row(T, kwargs.get("pe_sampling"), n_selected=queries.pop())
    if n > max(1, PREDICT_ELEMENTS // per_row):
        return None
    for est in estimators:
        est._check_predict_seq_len(T)
    param = next(modules[0].parameters())
    rows = [tr.as_tensor(X, param.dtype, param.device) for X in Xs]
    keys = torch.cat([row_keys(X, est._predict_seed) for X, est in zip(rows, estimators)])
    draws = KeyedDraws(first._predict_seed, keys, dtype=param.dtype)
    with torch.no_grad():
        stacked = type(modules[0]).stacked(modules)
    stacked.eval()
    with torch.inference_mode():
        out = stacked(torch.cat(rows), generator=draws, **kwargs)
    if not torch.isfinite(out).all():
        return None
    parts = out.cpu().numpy().astype(np.float64).reshape(len(estimators), n, *out.shape[1:])
    # 1-D where the fitted targets were (a classifier's logits keep their shape)
    return [p.reshape(n) if est._y_1d and p.size == n else p for p, est in zip(parts, estimators)]
