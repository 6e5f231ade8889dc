"""Estimators of single-location regression: the erf predictor and softmax attention.

Single-location regression (:class:`~stsq_learn.SingleLocationTask`) hides
one relevant token among noise tokens, found only by its content.
:class:`ErfAttentionRegressor` is the predictor that Marion, Berthier, Biau
and Boyer (ICLR 2025) analyse, ``T(X) = sum_l erf(lambda <x_l, k>) <x_l, v>``
with ``k`` and ``v`` on the unit sphere, trained by projected gradient
descent; :class:`SoftmaxAttentionRegressor` is one-layer softmax attention
with one learned query vector on the same rows. Both read ``X`` of shape
``(n_samples, seq_len, n_features)`` (tokens only) and predict one number
per row; both train on data (:meth:`fit`) or on the law itself
(``fit_online``), where they also record their alignment with ``k*`` and
``v*`` along training.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils._param_validation import StrOptions

from ...engine.state import _is_number_list, _is_positive_number
from .base import (
    _report,
    _SingleLocationModel,
    _unit,
    positive_int,
    positive_real,
)
from .batch import fit_members
from .theory import _risk_gradient, _task_constants

__all__ = ["ErfAttentionRegressor", "SoftmaxAttentionRegressor"]


class ErfAttentionRegressor(_SingleLocationModel):
    """The erf predictor ``T(X) = sum_l erf(lambda <x_l, k>) <x_l, v>``, k and v on the sphere.

    Trained by projected gradient descent: a gradient step on ``k`` and on
    ``v``, then each divided by its norm. The temperature follows
    ``lambda_t = lambda_init / (1 + lambda_decay t)`` (``"decay"``) or stays
    at ``lambda_init`` (``"constant"``). Marion, Berthier, Biau and Boyer
    (ICLR 2025) prove that, from initialisations on a manifold
    (``init="manifold"``: ``k`` orthogonal to ``v*`` and ``v``, ``v``
    orthogonal to ``k*``), projected gradient descent on the population
    risk reaches ``(k*, v*)`` (or ``(-k*, -v*)``, the same predictor).

    Parameters
    ----------
    solver : {"pgd", "sgd"}, default="pgd"
        ``"pgd"``: full-batch steps (in :meth:`fit_online`, on the
        population risk in closed form,
        :func:`~stsq_learn.single_location_theory.erf_risk_gradient`);
        ``"sgd"``: steps on minibatches of ``batch_size`` rows (fresh ones
        from the law in :meth:`fit_online`).
    lambda_init : float, default=1.0
        The temperature lambda_0.
    lambda_schedule : {"decay", "constant"}, default="decay"
        ``lambda_t = lambda_init / (1 + lambda_decay t)``, or a constant one.
    lambda_decay : float, default=1e-4
        The rate c of the decay.
    init : {"sphere", "manifold"}, default="sphere"
        ``k`` and ``v`` uniform on the sphere, or on the manifold above
        (which :meth:`fit` on data, not knowing ``k*`` and ``v*``, reads as
        ``k`` orthogonal to ``v``).
    learning_rate_init : float, default=0.004
        Step size (the largest of a few that is stable at the paper's sizes,
        d = 400, L = 10; smaller tasks take larger ones).
    max_iter : int, default=1000
        Gradient steps.
    batch_size : int, default=200
        Rows per step with ``solver="sgd"``.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation and of the batches.
    verbose : int, default=0
        Shows a progress bar over the steps (with the loss and the
        temperature) when positive.
    on_divergence : {"raise", "warn"}, default="raise"
        What to do with a run whose final loss is clearly above the starting
        model's (1.5 times it and 0.1 times the loss of predicting 0 above
        it, as the other estimators judge it): ``"raise"`` a ``ValueError``
        naming ``learning_rate_init`` and keep the previous fit, or
        ``"warn"`` and keep the diverged model. A loss or weight that is not
        finite always raises.

    Attributes
    ----------
    k_, v_ : ndarray of shape (n_features,)
        The fitted key and value, unit vectors.
    lambda_ : float
        The temperature after the last step (the one :meth:`predict` uses).
    n_iter_ : int
        Steps taken (``n_steps`` below).
    loss_curve_ : ndarray of shape (n_steps,)
        Loss before each step (the population risk with ``"pgd"`` in
        :meth:`fit_online`, the batch loss otherwise).
    lambda_curve_ : ndarray of shape (n_steps,)
        Temperature of each step.
    alignment_curve_ : ndarray of shape (n_steps + 1, 2) or None
        ``(<k, k*>, <v, v*>)`` before each step and after the last
        (:meth:`fit_online`); None after :meth:`fit`.
    task_ : SingleLocationTask
        The data contract (the law itself after :meth:`fit_online`).
    n_features_in_, seq_len_ : int
        Token dimension and length seen in fit.

    Examples
    --------
    >>> from stsq_learn import ErfAttentionRegressor, SingleLocationTask
    >>> task = SingleLocationTask(seq_len=5, n_features=50)
    >>> model = ErfAttentionRegressor(learning_rate_init=0.02, lambda_decay=3e-3,
    ...                               max_iter=3000, random_state=0)
    >>> model = model.fit_online(task)
    >>> alignment = abs(model.alignment_curve_[-1])   # (k*, v*) or (-k*, -v*)
    >>> bool(alignment.min() > 0.999)
    True
    """

    def __init__(
        self,
        solver="pgd",
        lambda_init=1.0,
        lambda_schedule="decay",
        lambda_decay=1e-4,
        init="sphere",
        learning_rate_init=0.004,
        max_iter=1000,
        batch_size=200,
        random_state=None,
        verbose=0,
        on_divergence="raise",
    ):
        self.solver = solver
        self.lambda_init = lambda_init
        self.lambda_schedule = lambda_schedule
        self.lambda_decay = lambda_decay
        self.init = init
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.on_divergence = on_divergence

    _parameter_constraints: dict = {
        "solver": [StrOptions({"pgd", "sgd"})],
        "lambda_init": [positive_real()],
        "lambda_schedule": [StrOptions({"decay", "constant"})],
        "lambda_decay": [positive_real("left")],
        "init": [StrOptions({"sphere", "manifold"})],
        "learning_rate_init": [positive_real()],
        "max_iter": [positive_int()],
        "batch_size": [positive_int()],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "on_divergence": [StrOptions({"raise", "warn"})],
    }
    _vectors = ("k_", "v_")
    _curves_per_step = 2  # the loss and the temperature
    _temperature = True
    _fit_members = staticmethod(fit_members)  # seeds fitted together, by loops of their own

    def _population_steps(self):
        return self.solver == "pgd"

    def _lambda(self, t):
        if self.lambda_schedule == "constant":
            return float(self.lambda_init)
        return float(self.lambda_init) / (1 + float(self.lambda_decay) * t)

    def _initial(self, d, rng, law):
        k, v = rng.standard_normal((2, d))
        if self.init == "manifold":
            # k orthogonal to v*; v orthogonal to k* and to k (to k alone after fit on data).
            span = [k]
            if law is not None:
                k_star, v_star = law.directions
                k = k - (k @ v_star) * v_star
                span = [k_star, k]
            basis, _ = np.linalg.qr(np.stack(span, axis=1))
            v = v - basis @ (basis.T @ v)
        return _unit(k), _unit(v)

    def _train(self, task, batches, law, n_steps, rng, steps, probe, guard):
        k, v = self._initial(task.n_features, rng, law)
        directions = law.directions if law is not None else None
        population = law is not None and self.solver == "pgd"
        constants = _task_constants(law) if law is not None else None
        lr = float(self.learning_rate_init)
        losses, lambdas = np.empty(n_steps), np.empty(n_steps)
        aligned = np.empty((n_steps + 1, 2)) if directions is not None else None
        start = None
        if probe is not None:  # minibatches: the starting model's loss on rows of its own
            start = self._loss((k, v), self._lambda(0), *probe)
            guard(start, None)
        for t in steps:
            lam = self._lambda(t)
            if directions is not None:
                aligned[t] = (k @ directions[0], v @ directions[1])
            if population:  # a law too large for float64 is the guard's to report
                with np.errstate(over="ignore", invalid="ignore"):
                    loss, gk, gv = _risk_gradient(k, v, lam, *directions, constants)
            else:
                loss, gk, gv = self._batch_gradient(k, v, lam, *next(batches))
            losses[t], lambdas[t] = loss, lam
            guard(loss, t)
            k, v = _unit(k - lr * gk), _unit(v - lr * gv)
            _report(steps, t, n_steps, loss=loss, temperature=lam)
        if directions is not None:
            aligned[n_steps] = (k @ directions[0], v @ directions[1])
        return {
            "k_": k,
            "v_": v,
            "lambda_": self._lambda(n_steps),
            "n_iter_": n_steps,
            "loss_curve_": losses,
            "lambda_curve_": lambdas,
            "alignment_curve_": aligned,
            "start_loss": losses[0] if start is None else start,
        }

    def _extra_fitted(self):
        return {"lambda_": float(self.lambda_), "lambda_curve_": self.lambda_curve_.tolist()}

    def _set_extra_fitted(self, fitted, n_iter):
        # The temperature is not a free number: the schedule of lambda_init, lambda_schedule
        # and lambda_decay gives each step's (lambda_curve_) and the one predict uses
        # (lambda_, after the last step). Any other lambda_ would be another model.
        lam, curve = fitted.get("lambda_"), fitted.get("lambda_curve_")
        if not _is_positive_number(lam):
            raise ValueError(f"fitted lambda_ must be a number > 0, got {lam!r}.")
        if not _is_number_list(curve) or len(curve) != n_iter:
            raise ValueError(f"fitted lambda_curve_ must be a list of n_iter_={n_iter} numbers.")
        schedule = (
            f"lambda_init={self.lambda_init!r}, lambda_schedule={self.lambda_schedule!r} and "
            f"lambda_decay={self.lambda_decay!r}"
        )
        after = self._lambda(n_iter)
        if lam != after:
            raise ValueError(
                f"fitted lambda_={lam!r} is not the temperature of this model: {schedule} "
                f"give lambda_={after!r} after n_iter_={n_iter} steps. (A model whose "
                "temperature hyperparameters were set after fitting: restore them.)"
            )
        for t, value in enumerate(curve):
            if value != self._lambda(t):
                raise ValueError(
                    f"fitted lambda_curve_ holds {value!r} at step {t}, but {schedule} give "
                    f"{self._lambda(t)!r} there."
                )
        return {"lambda_": float(lam), "lambda_curve_": np.array(curve, dtype=np.float64)}

    @staticmethod
    def _loss(params, lam, X, y):
        k, v = (torch.as_tensor(p) for p in params)
        pred = torch.sum(torch.erf(lam * (X @ k)) * (X @ v), dim=1)
        return float(torch.mean((y - pred) ** 2))

    @staticmethod
    def _batch_gradient(k, v, lam, X, y):
        kt = torch.tensor(k, requires_grad=True)
        vt = torch.tensor(v, requires_grad=True)
        X, y = X.to(torch.float64), y.to(torch.float64)
        pred = torch.sum(torch.erf(lam * (X @ kt)) * (X @ vt), dim=1)
        loss = torch.mean((y - pred) ** 2)
        gk, gv = torch.autograd.grad(loss, (kt, vt))
        return float(loss.detach()), gk.numpy(), gv.numpy()

    def _forward(self, X):
        k, v = torch.as_tensor(self.k_), torch.as_tensor(self.v_)
        return torch.sum(torch.erf(self.lambda_ * (X @ k)) * (X @ v), dim=1)


class SoftmaxAttentionRegressor(_SingleLocationModel):
    """One-layer softmax attention with one learned query: ``sum_l softmax(X q)_l <x_l, v>``.

    The attention weights are a softmax over the positions of each token's
    score ``<x_l, q>``, so the model selects by content; with
    ``q = beta k*`` and ``v = v*`` it reads the relevant token as
    ``beta`` grows. ``q`` and ``v`` are free vectors (no sphere), trained on
    the mean squared error by Adam or plain SGD from a small random start.

    Parameters
    ----------
    solver : {"adam", "sgd"}, default="adam"
        The optimiser.
    learning_rate_init : float, default=0.01
        Step size.
    max_iter : int, default=1000
        Gradient steps.
    batch_size : int, default=200
        Rows per step (fresh ones from the law in :meth:`fit_online`).
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation and of the batches.
    verbose : int, default=0
        Shows a progress bar over the steps (with the loss) when positive.
    on_divergence : {"raise", "warn"}, default="raise"
        What to do with a run whose final loss is clearly above the starting
        model's (1.5 times it and 0.1 times the loss of predicting 0 above
        it, as the other estimators judge it): ``"raise"`` a ``ValueError``
        naming ``learning_rate_init`` and keep the previous fit, or
        ``"warn"`` and keep the diverged model. A loss or weight that is not
        finite always raises.

    Attributes
    ----------
    query_, v_ : ndarray of shape (n_features,)
        The fitted query and value.
    n_iter_ : int
        Steps taken (``n_steps`` below).
    loss_curve_ : ndarray of shape (n_steps,)
        Batch loss before each step.
    alignment_curve_ : ndarray of shape (n_steps + 1, 2) or None
        ``(cos(q, k*), cos(v, v*))`` before each step and after the last
        (:meth:`fit_online`); None after :meth:`fit`.
    task_ : SingleLocationTask
        The data contract (the law itself after :meth:`fit_online`).
    n_features_in_, seq_len_ : int
        Token dimension and length seen in fit.

    Examples
    --------
    >>> from stsq_learn import SingleLocationTask, SoftmaxAttentionRegressor
    >>> task = SingleLocationTask(seq_len=5, n_features=20)
    >>> model = SoftmaxAttentionRegressor(learning_rate_init=0.05, max_iter=300,
    ...                                   random_state=0).fit_online(task)
    >>> X, y = task.sample(2000, random_state=1)
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    def __init__(
        self,
        solver="adam",
        learning_rate_init=0.01,
        max_iter=1000,
        batch_size=200,
        random_state=None,
        verbose=0,
        on_divergence="raise",
    ):
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.random_state = random_state
        self.verbose = verbose
        self.on_divergence = on_divergence

    _parameter_constraints: dict = {
        "solver": [StrOptions({"adam", "sgd"})],
        "learning_rate_init": [positive_real()],
        "max_iter": [positive_int()],
        "batch_size": [positive_int()],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "on_divergence": [StrOptions({"raise", "warn"})],
    }
    _vectors = ("query_", "v_")
    _fit_members = staticmethod(fit_members)

    def _train(self, task, batches, law, n_steps, rng, steps, probe, guard):
        d = task.n_features
        start = rng.standard_normal((2, d)) / np.sqrt(d)
        q = torch.tensor(start[0], requires_grad=True)
        v = torch.tensor(start[1], requires_grad=True)
        opt_class = torch.optim.Adam if self.solver == "adam" else torch.optim.SGD
        opt = opt_class([q, v], lr=float(self.learning_rate_init))
        directions = law.directions if law is not None else None
        losses = np.empty(n_steps)
        aligned = np.empty((n_steps + 1, 2)) if directions is not None else None
        start_loss = None
        if probe is not None:  # minibatches: the starting model's loss on rows of its own
            with torch.no_grad():
                start_loss = self._loss((q, v), None, *probe)
            guard(start_loss, None)

        def cosines():
            qn, vn = q.detach().numpy(), v.detach().numpy()
            return (_unit(qn) @ directions[0], _unit(vn) @ directions[1])

        for t in steps:
            if directions is not None:
                aligned[t] = cosines()
            X, y = next(batches)
            X, y = X.to(torch.float64), y.to(torch.float64)
            loss = torch.mean((y - self._scores(X, q, v)) ** 2)
            losses[t] = float(loss.detach())
            guard(losses[t], t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            _report(steps, t, n_steps, loss=losses[t])
        if directions is not None:
            aligned[n_steps] = cosines()
        return {
            "query_": q.detach().numpy().copy(),
            "v_": v.detach().numpy().copy(),
            "n_iter_": n_steps,
            "loss_curve_": losses,
            "alignment_curve_": aligned,
            "start_loss": losses[0] if start_loss is None else start_loss,
        }

    @classmethod
    def _loss(cls, params, lam, X, y):
        q, v = (torch.as_tensor(p) for p in params)
        return float(torch.mean((y - cls._scores(X, q, v)) ** 2))

    @staticmethod
    def _scores(X, q, v):
        weights = torch.softmax(X @ q, dim=1)
        return torch.sum(weights * (X @ v), dim=1)

    def _forward(self, X):
        return self._scores(X, torch.as_tensor(self.query_), torch.as_tensor(self.v_))
