"""Several erf-predictor runs in one batched computation: seeds (and settings) side by side.

:func:`fit_online_seeds` fits one :class:`ErfAttentionRegressor` from many
seeds, :func:`fit_online_batch` any list of them (each its own start,
temperature schedule and step size), on the population risk of one law
(``solver="pgd"``, the theorem's setting). The runs advance together: every
step is one set of NumPy calls on arrays with a leading run axis (the
risk's quadrature over ``runs x 160`` nodes), where fitting them one after
another makes the same ~100 small calls once per run. Each run steps in
the coordinates of the orthonormal basis of ``k*``, ``v*`` and its start
(every gradient lies in the span of ``k*``, ``v*``, ``k`` and ``v``, so
projected gradient descent never leaves that 4-dimensional span): a step
costs the same at any d, and ``k_`` and ``v_`` are mapped back to ``R^d``
at the end. Each fitted estimator is the one ``est.fit_online(task, n_steps)``
gives, up to float rounding (the sums run in another order: the vectors
agree to about 1e-12, the curves to the same relative precision), with
the same checks: hyperparameters, divergence, memory, and a failed call
leaves every estimator as it was.

Examples
--------
>>> from stsq_learn import ErfAttentionRegressor, SingleLocationTask
>>> from stsq_learn.tasks.single_location.batch import fit_online_seeds
>>> task = SingleLocationTask(seq_len=5, n_features=20)
>>> est = ErfAttentionRegressor(learning_rate_init=0.02, lambda_decay=3e-3, max_iter=500)
>>> models = fit_online_seeds(est, task, random_states=range(4))
>>> [m.random_state for m in models]
[0, 1, 2, 3]
>>> one = ErfAttentionRegressor(learning_rate_init=0.02, lambda_decay=3e-3, max_iter=500,
...                             random_state=2).fit_online(task)
>>> bool(abs(one.k_ - models[2].k_).max() < 1e-10)
True
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

from ..._validation import check_positive_int
from ...engine.memory import check_training_memory
from .base import _CPU, _Footprint, _Guard, _report, _steps
from .estimators import ErfAttentionRegressor
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


def fit_online_batch(estimators, task, n_steps="auto"):
    """Fit several :class:`ErfAttentionRegressor` on one law's population risk, all at once.

    The same as ``[est.fit_online(task, n_steps) for est in estimators]``
    up to float rounding, in one batched computation: each estimator keeps
    its own start (``init``, ``random_state``), temperature schedule and
    step size; the runs share the law and the number of steps.

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
        a run that diverged (as ``fit_online`` judges it, its
        ``on_divergence`` deciding), after the steps. A failed call leaves
        every estimator as it was.
    """
    if isinstance(estimators, (str, bytes)) or not hasattr(estimators, "__iter__"):
        raise TypeError(
            f"estimators must be a list of ErfAttentionRegressor, got {type(estimators).__name__}."
        )
    estimators = list(estimators)
    if not estimators:
        raise ValueError("estimators is empty: give at least one ErfAttentionRegressor.")
    for i, est in enumerate(estimators):
        if not isinstance(est, ErfAttentionRegressor):
            raise TypeError(
                f"estimators[{i}] must be an ErfAttentionRegressor, got {type(est).__name__}: "
                f"{est!r}."
            )
        est._validate_params()
        if est.solver != "pgd":
            raise ValueError(
                f"estimators[{i}] has solver={est.solver!r}: the batched fit steps on the "
                "population risk, solver='pgd'; fit it with fit_online."
            )
    if len({id(e) for e in estimators}) < len(estimators):
        raise ValueError("estimators holds the same object twice; clone it for each run.")
    _check_task(task)
    n_steps = _check_n_steps(n_steps, estimators)
    if len(estimators) == 1:  # nothing to batch: fit_online's own loop, its exact numbers
        estimators[0].fit_online(task, n_steps)
        return estimators
    runs, d = len(estimators), task.n_features
    curves = ErfAttentionRegressor._curves_per_step * n_steps + 2 * (n_steps + 1)
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
    states = _train(estimators, task, n_steps)
    for est, state in zip(estimators, states):  # judged all before any is set
        est._judge(state, zero_loss=task.trivial_mse, noisy=False, owner=type(est).__name__)
    fitted_task = task.at_length(task.seq_len)
    for est, state in zip(estimators, states):
        est._set_fitted(fitted_task, state)
    return estimators


def fit_online_seeds(estimator, task, random_states, n_steps="auto"):
    """Fit clones of ``estimator``, one per seed, on the population risk of ``task``, at once.

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
        As :func:`fit_online_batch`, and for a seed that is not an int.
    """
    if not isinstance(estimator, ErfAttentionRegressor):
        raise TypeError(
            f"estimator must be an ErfAttentionRegressor, got {type(estimator).__name__}."
        )
    if isinstance(random_states, (str, bytes)) or not hasattr(random_states, "__iter__"):
        raise TypeError(f"random_states must be an iterable of int seeds, got {random_states!r}.")
    seeds = list(random_states)
    for i, seed in enumerate(seeds):
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"random_states[{i}] must be an int seed, got {seed!r}.")
    models = [clone(estimator).set_params(random_state=int(s)) for s in seeds]
    if not models:
        raise ValueError("random_states is empty: give at least one seed.")
    return fit_online_batch(models, task, n_steps)


def _lambdas(est, n_steps):
    """The temperatures of the steps ``0..n_steps`` (the last: after the last step)."""
    t = np.arange(n_steps + 1, dtype=np.float64)
    lam0 = float(est.lambda_init)
    if est.lambda_schedule == "constant":
        return np.full(n_steps + 1, lam0)
    return lam0 / (1 + float(est.lambda_decay) * t)  # as est._lambda(t), elementwise


def _train(estimators, task, n_steps):
    """The steps of every run together; one state per run as ``_train`` returns it."""
    runs = len(estimators)
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
    steps = _steps(n_steps, f"fit_online_batch ({runs} runs)", verbose)
    scale = f"the rows of {task!r} are too large. Draw from a law of smaller scale."
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            for t in steps:
                risk, grad, kk, vv = _risk_gradient_coords(W, lam_steps[t], stars, constants)
                aligned[t, 0], aligned[t, 1] = kk, vv
                losses[t] = risk
                if not np.isfinite(risk).all():
                    bad = int(np.flatnonzero(~np.isfinite(risk))[0])
                    _Guard(float(lr[bad]), scale)(float(risk[bad]), t)
                W = W - lr2 * grad
                W /= np.sqrt(np.einsum("ij,ij->i", W, W))[:, None]
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
    return states
