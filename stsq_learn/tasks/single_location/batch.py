"""Several erf-predictor runs in one batched computation: seeds (and settings) side by side.

:func:`fit_online_seeds` fits the seeds of one :class:`ErfAttentionRegressor`
(``solver="pgd"``, the theorem's setting), :func:`fit_online_batch` any list
of them (each its own start, temperature schedule and step size), and
:func:`fit_members` (the estimators' ``_fit_members``) takes the steps of the
engine's batched fits (:mod:`stsq_learn.engine.members`, a study's
``batch_seeds=True``), which check the members, draw each member's
randomness as its fit does, and judge and assign (or return) each failure.

Why the steps are this module's and not the engine's training loop: a
projected step on the closed-form population risk has no rows, no module
output and no criterion for the engine's loss to be the mean of, its
gradient is the closed form's (not autograd's of a loss), and every step
ends on the sphere; and the engine's fixed cost of a step (the skorch step,
the optimiser, each member's bookkeeping) is several times this module's
whole batched step (the performance page gives the measures). The runs
advance together: every step is one set of NumPy calls on arrays with a
leading run axis (the risk's quadrature over ``runs x 160`` nodes), where
fitting them one after another makes the same ~100 small calls once per
run. Each run steps in the coordinates of the orthonormal basis of ``k*``,
``v*`` and its start (every gradient lies in the span of ``k*``, ``v*``,
``k`` and ``v``, so projected gradient descent never leaves that
4-dimensional span): a step costs the same at any d, and ``k_`` and ``v_``
are mapped back to ``R^d`` at the end (the sums run in another order than
``fit_online``'s: the vectors agree to about 1e-12, the curves to the same
relative precision).
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils import check_random_state

from ..._validation import check_positive_int
from ...engine.members import fit_one_by_one, fit_online_members, raise_failures
from ...engine.memory import check_training_memory
from .base import _CPU, _Footprint, _Guard, _report, _SingleLocationModel, _steps
from .task import SingleLocationTask
from .theory import _risk_gradient_coords, _task_constants

__all__ = ["fit_online_batch", "fit_online_seeds"]


def _check_task(task):
    if not isinstance(task, SingleLocationTask):
        raise TypeError(f"task must be a SingleLocationTask, got {type(task).__name__}: {task!r}.")


def _check_n_steps(n_steps, estimators):
    if n_steps is None or (isinstance(n_steps, str) and n_steps == "auto"):
        steps = {e.max_iter for e in estimators}
        if len(steps) > 1:
            raise ValueError(
                "n_steps='auto' takes each estimator's max_iter, and these differ "
                f"({sorted(steps)}): the runs advance together, so give n_steps."
            )
        return check_positive_int(steps.pop(), "max_iter")
    return check_positive_int(n_steps, "n_steps")


def _check_pgd(est, name):
    if est.solver != "pgd":
        raise ValueError(
            f"{name} has solver={est.solver!r}: the batched fit steps on the "
            "population risk, solver='pgd'; fit it with fit_online."
        )


def fit_online_batch(estimators, task, n_steps="auto"):
    """Fit several :class:`ErfAttentionRegressor` on one law's population risk, all at once.

    The same as ``[est.fit_online(task, n_steps) for est in estimators]``
    up to float rounding, in one batched computation: each estimator keeps
    its own start (``init``, ``random_state``), temperature schedule and
    step size; the runs share the law and the number of steps. The steps,
    verdicts and failures are those of the engine's batched fit of seeds
    (:func:`fit_online_seeds`), for runs whose settings differ.

    Parameters
    ----------
    estimators : list of ErfAttentionRegressor
        The models, each with ``solver="pgd"`` (steps on the population risk
        in closed form). An estimator's ``random_state`` is drawn from as in
        ``fit_online``, in list order (a ``RandomState`` shared by several is
        consumed as by fitting them one after another).
    task : SingleLocationTask
        The law.
    n_steps : int or "auto", default="auto"
        Steps of every run; ``"auto"``: the estimators' ``max_iter``, which
        must then be the same for all.

    Returns
    -------
    estimators : list of ErfAttentionRegressor
        The same objects, fitted (``k_``, ``v_``, ``lambda_``, the curves,
        ``task_``, as ``fit_online`` sets them).

    Raises
    ------
    TypeError, ValueError
        For an estimator that is not an ``ErfAttentionRegressor`` or whose
        solver is not ``"pgd"``, a bad hyperparameter, ``task`` or
        ``n_steps``, or runs too large for the memory, before any work; for
        runs that diverged (as ``fit_online`` judges each, its
        ``on_divergence`` deciding), after the steps: one ``ValueError``
        naming them (``estimators[i]``), chained to the first one's. A
        failed call leaves every estimator as it was.
    """
    if isinstance(estimators, (str, bytes)) or not hasattr(estimators, "__iter__"):
        raise TypeError(
            f"estimators must be a list of ErfAttentionRegressor, got {type(estimators).__name__}."
        )
    estimators = list(estimators)
    if not estimators:
        raise ValueError("estimators is empty: give at least one ErfAttentionRegressor.")
    for i, est in enumerate(estimators):
        if not (isinstance(est, _SingleLocationModel) and est._temperature):
            raise TypeError(
                f"estimators[{i}] must be an ErfAttentionRegressor, got {type(est).__name__}: "
                f"{est!r}."
            )
        est._validate_params()
        _check_pgd(est, f"estimators[{i}]")
    if len({id(e) for e in estimators}) < len(estimators):
        raise ValueError("estimators holds the same object twice; clone it for each run.")
    _check_task(task)
    n_steps = _check_n_steps(n_steps, estimators)
    if len(estimators) == 1:  # nothing to batch: fit_online's own loop, its exact numbers
        return fit_one_by_one(estimators, "fit_online", [(task, n_steps)], "raise")
    runs, d = len(estimators), task.n_features
    curves = type(estimators[0])._curves_per_step * n_steps + 2 * (n_steps + 1)
    check_training_memory(
        _Footprint(runs * d, runs * curves),
        0,
        0,
        8,
        _CPU,
        "fit_online_batch",
        f"{runs} runs, n_steps={n_steps}, seq_len={task.seq_len}, n_features={d}",
        advice="Fit fewer runs at a time, or lower n_steps (a loss is kept for every step).",
    )
    names = [f"estimators[{i}]" for i in range(runs)]
    _fit_population(estimators, task, n_steps, "raise", names=names, label="fit_online_batch")
    return estimators


def fit_online_seeds(estimator, task, random_states, n_steps="auto"):
    """Fit clones of ``estimator``, one per seed, on the population risk of ``task``, at once.

    The engine's batched fit of the seeds
    (:func:`~stsq_learn.engine.members.fit_online_members`), whose steps for
    this estimator are one batched computation (see the module).

    Parameters
    ----------
    estimator : ErfAttentionRegressor
        The settings (``solver="pgd"``); it is not fitted itself.
    task : SingleLocationTask
        The law.
    random_states : iterable of int
        One seed per run (the ``random_state`` of each clone).
    n_steps : int or "auto", default="auto"
        Steps of every run; ``"auto"``: ``max_iter``.

    Returns
    -------
    list of ErfAttentionRegressor
        The fitted clones, in the order of ``random_states``: clone ``i`` is
        ``clone(estimator).set_params(random_state=random_states[i])
        .fit_online(task, n_steps)`` up to float rounding.

    Raises
    ------
    TypeError, ValueError
        As :func:`fit_online_batch` (a failed run is named by its
        ``random_state``), and for a seed that is not an int.

    Examples
    --------
    >>> from sklearn.base import clone
    >>> from stsq_learn import ErfAttentionRegressor, SingleLocationTask
    >>> from stsq_learn.tasks.single_location.batch import fit_online_seeds
    >>> task = SingleLocationTask(seq_len=5, n_features=20)
    >>> est = ErfAttentionRegressor(learning_rate_init=0.02, lambda_decay=3e-3,
    ...                             max_iter=500)
    >>> models = fit_online_seeds(est, task, random_states=range(4))
    >>> [m.random_state for m in models]
    [0, 1, 2, 3]
    >>> one = clone(est).set_params(random_state=2).fit_online(task)
    >>> bool(abs(one.k_ - models[2].k_).max() < 1e-10)
    True
    """
    if not (isinstance(estimator, _SingleLocationModel) and estimator._temperature):
        raise TypeError(
            f"estimator must be an ErfAttentionRegressor, got {type(estimator).__name__}."
        )
    if isinstance(random_states, (str, bytes)) or not hasattr(random_states, "__iter__"):
        raise TypeError(f"random_states must be an iterable of int seeds, got {random_states!r}.")
    seeds = list(random_states)
    for i, seed in enumerate(seeds):
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"random_states[{i}] must be an int seed, got {seed!r}.")
    if not seeds:
        raise ValueError("random_states is empty: give at least one seed.")
    estimator._validate_params()
    _check_pgd(estimator, "estimator")
    models = [clone(estimator).set_params(random_state=int(s)) for s in seeds]
    return fit_online_members(models, task, n_steps)


def _lambdas(est, n_steps):
    """The temperatures of the steps ``0..n_steps`` (the last: after the last step)."""
    t = np.arange(n_steps + 1, dtype=np.float64)
    lam0 = float(est.lambda_init)
    if est.lambda_schedule == "constant":
        return np.full(n_steps + 1, lam0)
    return lam0 / (1 + float(est.lambda_decay) * t)  # as est._lambda(t), elementwise


def _fit_population(estimators, task, n_steps, errors, *, names=None, label=None):
    """Projected GD on ``task``'s population risk, every run together, judged and assigned.

    Returns each estimator, fitted, or (``errors="return"``) its
    ``ValueError`` in its place (:func:`_finish`).
    """
    states, failed = _train(estimators, task, n_steps, label)
    fitted_task = task.at_length(task.seq_len)
    return _finish(estimators, states, failed, errors, task.trivial_mse, False, fitted_task, names)


def _finish(estimators, states, failed, errors, zero_loss, noisy, fitted_task, names=None):
    """Judge every run as its fit would, then assign them all (or none, with ``"raise"``).

    ``failed`` maps a run that failed during the steps to ``(step, error)``;
    the others are judged (non-finite weights, divergence, ``on_divergence``).
    With ``errors="raise"`` any failure raises one ``ValueError`` naming the
    runs (:func:`~stsq_learn.engine.members.raise_failures`) and no estimator
    changes; with ``"return"`` a failed run is left as it was and its error
    takes its place in the returned list.
    """
    results = []
    for i, (est, state) in enumerate(zip(estimators, states)):
        if i in failed:
            results.append(failed[i][1])
            continue
        try:
            est._judge(state, zero_loss=zero_loss, noisy=noisy, owner=type(est).__name__)
        except ValueError as exc:
            results.append(exc)
        else:
            results.append(est)
    raise_failures(estimators, results, errors, names)
    for est, state, result in zip(estimators, states, results):
        if result is est:
            est._set_fitted(fitted_task, state)
    return results


def _train(estimators, task, n_steps, label=None):
    """The steps of every run together: ``(states, failed)``.

    ``states`` holds one state per run as the estimator's ``_train`` returns
    it; ``failed`` maps a run whose risk stopped being finite to ``(step,
    its fit's ValueError)`` (the run is frozen from that step on). ``label``
    names the progress bar (shown where any estimator is ``verbose``).
    """
    runs = len(estimators)
    failed = {}
    k_star, v_star = task.directions
    constants = _task_constants(task)
    d = task.n_features
    starts = [e._initial(d, check_random_state(e.random_state), task) for e in estimators]
    # Each run in the orthonormal basis of span(k*, v*, k_0, v_0), where it stays:
    # m <= 4 coordinates a step instead of d.
    Q, R = np.linalg.qr(np.stack([np.stack([k_star, v_star, k, v], axis=1) for k, v in starts]))
    W = np.concatenate([R[:, :, 2], R[:, :, 3]])  # keys, then values, in coordinates
    stars = np.concatenate([R[:, :, :2], R[:, :, :2]])
    lams = np.stack([_lambdas(e, n_steps) for e in estimators])  # (runs, n_steps + 1)
    lam_steps = np.ascontiguousarray(lams[:, :n_steps].T)  # (n_steps, runs)
    lr = np.array([float(e.learning_rate_init) for e in estimators])
    lr2 = np.concatenate([lr, lr])[:, None]
    losses = np.empty((n_steps, runs))
    aligned = np.empty((n_steps + 1, 2, runs))
    verbose = any(e.verbose for e in estimators)
    label = label or f"{type(estimators[0]).__name__}.fit_online"
    steps = _steps(n_steps, f"{label} ({runs} runs)", verbose)
    scale = f"the rows of {task!r} are too large. Draw from a law of smaller scale."
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            for t in steps:
                risk, grad, kk, vv = _risk_gradient_coords(W, lam_steps[t], stars, constants)
                aligned[t, 0], aligned[t, 1] = kk, vv
                losses[t] = risk
                for bad in np.flatnonzero(~np.isfinite(risk)).tolist():
                    if bad not in failed:  # its fit stops here: the run is frozen
                        try:
                            _Guard(float(lr[bad]), scale)(float(risk[bad]), t)
                        except ValueError as exc:
                            failed[bad] = (t, exc)
                stepped = W - lr2 * grad
                stepped /= np.sqrt(np.einsum("ij,ij->i", stepped, stepped))[:, None]
                if failed:
                    frozen = [*failed, *(runs + i for i in failed)]
                    stepped[frozen] = W[frozen]
                W = stepped
                _report(steps, t, n_steps, loss=float(np.median(risk)))
    finally:
        if hasattr(steps, "close"):
            steps.close()
    K = np.einsum("sdi,si->sd", Q, W[:runs])  # back to R^d
    V = np.einsum("sdi,si->sd", Q, W[runs:])
    aligned[n_steps, 0], aligned[n_steps, 1] = K @ k_star, V @ v_star
    states = []
    for i in range(runs):
        curve = np.ascontiguousarray(losses[:, i])
        states.append(
            {
                "k_": K[i].copy(),
                "v_": V[i].copy(),
                "lambda_": float(lams[i, n_steps]),
                "n_iter_": n_steps,
                "loss_curve_": curve,
                "lambda_curve_": np.ascontiguousarray(lams[i, :n_steps]),
                "alignment_curve_": np.ascontiguousarray(aligned[:, :, i]),
                "start_loss": curve[0],
            }
        )
    return states, failed


# -- every solver: the batched fits of engine.members ----------------------------------
def fit_members(estimators, method, calls, errors):
    """Seeds of one single-location estimator fitted together (their ``_fit_members``).

    What :func:`stsq_learn.engine.members.fit_members` and
    :func:`~stsq_learn.engine.members.fit_online_members` run for
    :class:`ErfAttentionRegressor` and :class:`SoftmaxAttentionRegressor`,
    after the engine's checks (one class, equal parameters but
    ``random_state``): ``solver="pgd"`` online steps on the population risk
    (:func:`_fit_population`); every other run (minibatches, or all rows of
    ``fit``) steps on the members' own batches, drawn from each member's
    ``random_state`` as its fit draws them, with one batched gradient a
    step (and, for softmax attention, one optimiser over the stacked
    vectors). Each member is judged as its fit (non-finite losses,
    divergence, ``on_divergence``), and failures go as the engine's
    (:func:`~stsq_learn.engine.members.raise_failures`). Runs whose
    randomness is shared (a ``random_state`` of None, or one
    ``RandomState`` in several estimators, drawn from all along a run) and a
    single estimator fall back to the fits one after another, as do
    minibatch runs with ``verbose`` (each fit shows its own progress; the
    population runs show one bar for all).

    ``method`` is ``"fit"`` or ``"fit_online"``, ``calls`` each member's
    arguments (one tuple object for all where shared; members with rows of
    their own are fitted one after another), ``errors`` as in the engine's.
    Returns the fitted estimators (with ``"return"``, a failed member's
    ``ValueError`` in its place).
    """
    for est in estimators:
        est._validate_params()
    first, S = estimators[0], len(estimators)
    if any(call is not calls[0] for call in calls):
        return fit_one_by_one(estimators, method, calls, errors)
    parts = first._fit_run if method == "fit" else first._online_run
    run = parts(*calls[0], members=S)
    population = run.law is not None and first._population_steps()
    if S == 1 or (not population and (first.verbose or _shared_randomness(estimators))):
        return fit_one_by_one(estimators, method, calls, errors)
    if population:
        return _fit_population(estimators, run.task, run.n_steps, errors)
    states, failed = _train_batches(estimators, run)
    return _finish(estimators, states, failed, errors, run.zero_loss(), run.noisy, run.fitted_task)


def _shared_randomness(estimators):
    """Whether the runs draw from one source of randomness (their batches would interleave)."""
    sources = [e.random_state for e in estimators]
    if any(r is None for r in sources):
        return True  # numpy's global RandomState
    instances = [id(r) for r in sources if isinstance(r, np.random.RandomState)]
    return len(set(instances)) < len(instances)


def _train_batches(estimators, run):
    """Every member's minibatch (or all-rows) steps together: ``(states, failed)``."""
    first, S = estimators[0], len(estimators)
    d = run.task.n_features
    rngs = [check_random_state(e.random_state) for e in estimators]
    erf = first._temperature
    if erf:
        starts = [np.stack(e._initial(d, rng, run.law)) for e, rng in zip(estimators, rngs)]
    else:
        starts = [rng.standard_normal((2, d)) / np.sqrt(d) for rng in rngs]
    starts = np.stack(starts)  # (S, 2, d): each member's start, as its fit draws it
    batches = [run.batches(rng) for rng in rngs]  # each drawn from its rng after the start
    directions = run.law.directions if run.law is not None else None
    n_steps, lr = run.n_steps, float(first.learning_rate_init)
    guard = _Guard(lr, run.scale)
    losses = np.empty((S, n_steps))
    lambdas = np.array([first._lambda(t) for t in range(n_steps + 1)]) if erf else None
    aligned = np.empty((S, n_steps + 1, 2)) if directions is not None else None
    starts_loss = np.empty(S)
    failed = {}
    if run.probe is not None:  # minibatches: each starting model's loss, as its fit measures it
        for i, start in enumerate(starts):
            params = tuple(start) if erf else tuple(torch.as_tensor(p) for p in start)
            lam0 = lambdas[0] if erf else None
            with torch.no_grad():
                starts_loss[i] = first._loss(params, lam0, *run.probe)
            try:
                guard(starts_loss[i], None)
            except ValueError as exc:
                failed[i] = (-1, exc)
    step = _ErfSteps(starts, lr) if erf else _SoftmaxSteps(starts, first.solver, lr)
    for t in range(n_steps):
        if directions is not None:
            aligned[:, t] = step.alignment(directions)
        Xs, ys = zip(*(next(b) for b in batches))
        lam = lambdas[t] if erf else None
        losses[:, t] = step.losses(Xs, ys, lam)
        for i in np.flatnonzero(~np.isfinite(losses[:, t])).tolist():
            if i not in failed:  # its fit stops here with this error; the run is frozen
                try:
                    guard(float(losses[i, t]), t)
                except ValueError as exc:
                    failed[i] = (t, exc)
        step.step(frozen=list(failed))
    if directions is not None:
        aligned[:, n_steps] = step.alignment(directions)
    states = []
    for i in range(S):
        state = step.fitted(i)
        state.update(
            n_iter_=n_steps,
            loss_curve_=np.ascontiguousarray(losses[i]),
            alignment_curve_=None if aligned is None else np.ascontiguousarray(aligned[i]),
            start_loss=losses[i, 0] if run.probe is None else starts_loss[i],
        )
        if erf:
            state.update(
                lambda_=float(lambdas[n_steps]),
                lambda_curve_=np.ascontiguousarray(lambdas[:n_steps]),
            )
        states.append(state)
    return states, failed


def _members_rows(Xs):
    """The members' rows (S, n, ...) as one tensor, or one shared (n, ...) if they are one."""
    if all(X is Xs[0] for X in Xs):
        return Xs[0], "n"
    return torch.stack([X.to(torch.float64) for X in Xs]), "sn"


class _ErfSteps:
    """Projected gradient steps of the erf predictor, every member's ``(k, v)`` at once."""

    def __init__(self, starts, lr):
        self.K, self.V = starts[:, 0].copy(), starts[:, 1].copy()
        self.lr = lr

    def alignment(self, directions):
        return np.stack([self.K @ directions[0], self.V @ directions[1]], axis=1)

    def losses(self, Xs, ys, lam):
        X, rows = _members_rows(Xs)
        y = torch.stack([y_.to(torch.float64) for y_ in ys])
        K = torch.tensor(self.K, requires_grad=True)
        V = torch.tensor(self.V, requires_grad=True)
        keys = torch.einsum(f"{rows}ld,sd->snl", X, K)
        values = torch.einsum(f"{rows}ld,sd->snl", X, V)
        pred = torch.sum(torch.erf(lam * keys) * values, dim=-1)
        losses = torch.mean((y - pred) ** 2, dim=-1)  # each member's mean: its own gradient
        gK, gV = torch.autograd.grad(losses.sum(), (K, V))
        self.gK, self.gV = gK.numpy(), gV.numpy()
        return losses.detach().numpy()

    def step(self, frozen):
        K, V = self.K - self.lr * self.gK, self.V - self.lr * self.gV
        K /= np.linalg.norm(K, axis=1, keepdims=True)
        V /= np.linalg.norm(V, axis=1, keepdims=True)
        if frozen:
            K[frozen], V[frozen] = self.K[frozen], self.V[frozen]
        self.K, self.V = K, V

    def fitted(self, i):
        return {"k_": self.K[i].copy(), "v_": self.V[i].copy()}


class _SoftmaxSteps:
    """Optimiser steps of softmax attention, every member's ``(q, v)`` stacked in one optimiser."""

    def __init__(self, starts, solver, lr):
        self.Q = torch.tensor(starts[:, 0], requires_grad=True)
        self.V = torch.tensor(starts[:, 1], requires_grad=True)
        opt_class = torch.optim.Adam if solver == "adam" else torch.optim.SGD
        self.opt = opt_class([self.Q, self.V], lr=lr)  # elementwise: each member's own steps
        self.kept = {}

    def alignment(self, directions):
        Q, V = self.Q.detach().numpy(), self.V.detach().numpy()
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        V = V / np.linalg.norm(V, axis=1, keepdims=True)
        return np.stack([Q @ directions[0], V @ directions[1]], axis=1)

    def losses(self, Xs, ys, lam):
        X, rows = _members_rows(Xs)
        y = torch.stack([y_.to(torch.float64) for y_ in ys])
        weights = torch.softmax(torch.einsum(f"{rows}ld,sd->snl", X, self.Q), dim=-1)
        pred = torch.sum(weights * torch.einsum(f"{rows}ld,sd->snl", X, self.V), dim=-1)
        self.loss = torch.mean((y - pred) ** 2, dim=-1)
        return self.loss.detach().numpy()

    def step(self, frozen):
        with torch.no_grad():
            for i in frozen:  # a failed member is kept as it was before the step it failed at
                if i not in self.kept:
                    self.kept[i] = {
                        p: (p[i].clone(), {k: v[i].clone() for k, v in self._moments(p)})
                        for p in (self.Q, self.V)
                    }
        self.opt.zero_grad()
        self.loss.sum().backward()
        self.opt.step()
        with torch.no_grad():
            for i, kept in self.kept.items():
                for p, (value, moments) in kept.items():
                    p[i] = value
                    state = self.opt.state[p]
                    for k, v in moments.items():
                        state[k][i] = v

    def _moments(self, p):
        state = self.opt.state.get(p, {})
        return [(k, v) for k, v in state.items() if torch.is_tensor(v) and v.shape == p.shape]

    def fitted(self, i):
        query, value = self.Q[i].detach().numpy(), self.V[i].detach().numpy()
        return {"query_": query.copy(), "v_": value.copy()}
