"""The linear self-attention regressor of in-context linear regression, on the shared engine.

:class:`LinearAttentionRegressor` is the one-layer linear self-attention of
Zhang, Frei and Bartlett (JMLR 2024) trained by the package's engine
(:mod:`stsq_learn.engine`): ``fit`` on prompts, ``fit_online`` on fresh
prompts drawn on the device, minibatches, schedules, progress, divergence
checks, warm starts and model files, as every estimator of the package. Its
module is :class:`~.modules.LinearSelfAttention`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..._docstrings import ATTRIBUTES, SOLVER, TRAINING, Substitution, fit_returns, replace_once
from ..._docstrings import schedule as _schedule
from ...engine import training as tr
from ...engine.base import _BaseEstimator
from ...engine.regression import _Regressor
from .modules import INITS, PARAMETRIZATIONS, LinearSelfAttention
from .task import SHAPE, InContextRegressionTask
from .theory import _gamma

__all__ = ["LinearAttentionRegressor"]

DEFAULT_STEPS = 1000
"""Optimiser steps of ``max_iter="auto"`` and ``fit_online(n_steps="auto")``."""

_ROWS = f"""\
X : array-like of shape {SHAPE}
    Prompts: ``n_examples`` tokens ``[x_i; y_i]``, then the query ``[x_q; 0]``."""

_ATTRIBUTES = replace_once(
    replace_once(
        ATTRIBUTES,
        "Token dimension d seen in fit (the last axis of ``X`` minus the indicator).",
        "Dimension d of the covariates seen in fit (the last axis of ``X`` minus the label).",
    ),
    "Sequence length T seen in fit.",
    "Tokens per prompt seen in fit, ``n_examples + 1`` (the longest of a range).",
)

_TRAINING = replace_once(
    TRAINING,
    "Seeds initialisation, batch order, encodings and prediction draws.",
    'Seeds the initialisation (``T`` of ``init="random"``) and the batches.',
)


@Substitution(
    solver=SOLVER,
    schedule=_schedule("cooldown"),
    training=_TRAINING,
    attributes=_ATTRIBUTES,
)
class LinearAttentionRegressor(_Regressor):
    """One-layer linear self-attention that learns linear regression in context.

    The model of Zhang, Frei and Bartlett (JMLR 2024). A prompt ``E`` (its
    columns the tokens ``z_j = [x_j; y_j]``, the last the query ``[x_q;
    0]``) goes through ``f(E) = E + W^PV E (E^T W^KQ E) / M``; the
    prediction is the query's label slot of ``f(E)``. Normalised by the
    prompt's own number of examples M, one model serves every M. With the
    paper's initialisation only the value scalar ``u`` (the bottom-right
    entry of ``W^PV``) and the key-query block ``U`` (the top-left ``d x
    d`` of ``W^KQ``) move, and the prediction is

    ``y_hat = x_q^T (u U^T) (1/M) sum_i y_i x_i``:

    one step of preconditioned gradient descent from 0 on the prompt's
    least-squares loss. Gradient flow on prompts of N examples with
    covariates ``N(0, Lambda)`` converges to ``u U = Gamma^{-1}``,
    ``Gamma = (1 + 1/N) Lambda + (tr Lambda / N) I`` (their Theorem 4.1;
    :func:`~stsq_learn.in_context_preconditioner`): compare
    :attr:`preconditioner_` with it. The loss is the mean squared error
    against the query's label.

    Parameters
    ----------
    parametrization : {"reduced", "full"}, default="reduced"
        ``"reduced"``: train ``u`` and ``U`` (``d^2 + 1`` numbers), the
        blocks the paper's gradient flow moves. ``"full"``: train every
        entry of ``W^PV`` and ``W^KQ`` that reaches the prediction (the
        last row of ``W^PV``, the first d columns of ``W^KQ``; the others
        never do). From the paper's initialisation the off-diagonal blocks
        then stay at 0 in expectation (their Lemma; exactly, for a set of
        prompts closed under ``w -> -w``), and move only by minibatch noise.
    init_scale : float or "auto", default="auto"
        ``s`` of the paper's initialisation ``W^PV(0) = s [0 0; 0 1]``,
        ``W^KQ(0) = s [T T^T 0; 0 0]``, ``||T T^T||_F = 1``, which must
        satisfy ``s^2 ||Gamma||_op sqrt(d) < 2`` (checked; ``Gamma`` of the
        training law, or of the examples' covariance in :meth:`fit`).
        ``"auto"``: ``s^2 ||Gamma||_op sqrt(d) = 1``, half the bound.
    init : {"random", "identity"}, default="random"
        ``T``: standard Gaussian entries drawn from ``random_state``, or
        the identity; either way scaled to ``||T T^T||_F = 1``.
    {solver}
    learning_rate_init : float, default=0.01
        Step size. Measured at ``d = 5, N = 20`` with Adam, 256 prompts a
        step and the default schedule: within 5% of ``Gamma^{-1}`` after
        150 to 400 steps, and 3-4% after the default 1000 (three seeds),
        for ``Lambda = I`` and ``diag(2, 1.5, 1, 0.5, 0.25)``. Plain
        gradient descent (``solver="sgd"``) is stable there up to about 0.1
        (0.2 diverges for the anisotropic ``Lambda``) and slower along
        ``Lambda``'s small eigenvalues: at 0.1, 1000 steps end at 3.5% and
        4.4%. Larger d needs
        more prompts per step or a lower rate (the minibatch noise in
        ``U``'s ``d^2`` entries sets a floor): at ``d = 20, N = 40``, Adam at
        0.005 with 1000 prompts a step ends within 5% after 1000 steps.
    {schedule}
    max_iter : int or "auto", default="auto"
        Number of epochs over ``X`` in :meth:`fit`. ``"auto"`` plans 1000
        optimiser steps and runs as many epochs as they fill.
    tol : float, default=1e-4
        With ``n_iter_no_change`` set, training stops when the epoch loss has
        not improved by at least ``tol`` for that many consecutive epochs.
    n_iter_no_change : int or None, default=None
        Patience of that rule, in epochs. None: no early stopping.
    {training}

    Attributes
    ----------
    task_ : InContextRegressionTask
        The law the model was trained on: the task itself after
        :meth:`fit_online`; after :meth:`fit`, the prompts' sizes with the
        covariance of their examples' covariates (their second moment),
        which sets ``init_scale="auto"`` and the covariates of
        :meth:`~InContextRegressionTask.shift`'s new examples.
    {attributes}
    preconditioner_ : ndarray of shape (d, d)
        ``A = u U^T``, the matrix of ``y_hat = x_q^T A (1/M) sum_i y_i x_i``
        (the paper writes ``u U``; only the product is identified, and at
        the global minimum both are ``Gamma^{-1}``, symmetric).
    value_matrix_, key_query_matrix_ : ndarray of shape (d + 1, d + 1)
        ``W^PV`` and ``W^KQ``, with 0 where the prediction never reads.

    See Also
    --------
    PromptRidge : Least squares on each prompt.
    PromptGradientStep : One gradient step from 0 with a fixed or fitted step.
    in_context_preconditioner : The global minimum ``Gamma^{-1}``.
    in_context_risk : The risk of the layer at any number of examples.

    Notes
    -----
    What is the paper's and what is ours: the model, its initialisation
    and scale condition, the global minimum and the risk are the paper's
    (gradient flow on the population loss). The training is ours: Adam or
    minibatch gradient descent on fresh prompts (``fit_online``) or on a
    fixed set (``fit``), the step sizes and the schedule, and ``"auto"``
    for ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import (
    ...     InContextRegressionTask, LinearAttentionRegressor,
    ...     in_context_preconditioner)
    >>> task = InContextRegressionTask(seq_len=21, n_features=5)       # N = 20
    >>> model = LinearAttentionRegressor(random_state=0)
    >>> model = model.fit_online(task, n_steps=300)
    >>> target = in_context_preconditioner(20, np.ones(5))
    >>> error = np.linalg.norm(model.preconditioner_ - target)
    >>> bool(error < 0.05 * np.linalg.norm(target))
    True
    >>> X, y = task.at_examples(80).sample(1000, random_state=1)  # longer prompt
    >>> model.predict(X).shape
    (1000,)
    """

    _parameter_constraints: dict = {
        **{
            k: v
            for k, v in _BaseEstimator._parameter_constraints.items()
            if k not in ("width", "max_iter")
        },
        "parametrization": [StrOptions(set(PARAMETRIZATIONS))],
        "init_scale": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "init": [StrOptions(set(INITS))],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    }
    _task = InContextRegressionTask

    def __init__(
        self,
        parametrization="reduced",
        *,
        init_scale="auto",
        init="random",
        solver="adam",
        learning_rate_init=0.01,
        learning_rate="cooldown",
        power_t=0.5,
        batch_size="auto",
        max_iter="auto",
        tol=1e-4,
        n_iter_no_change=None,
        alpha=0.0,
        momentum=0.0,
        dtype="float32",
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
        on_divergence="raise",
        callbacks=None,
    ):
        self.parametrization = parametrization
        self.init_scale = init_scale
        self.init = init
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.alpha = alpha
        self.momentum = momentum
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.on_divergence = on_divergence
        self.callbacks = callbacks

    def _validate_params(self):
        super()._validate_params()
        if self.init_scale != "auto" and not math.isfinite(self.init_scale):
            raise ValueError(f"init_scale must be finite or 'auto', got {self.init_scale!r}.")

    # -- hooks of the engine -----------------------------------------------------------
    def _auto_steps(self):
        return DEFAULT_STEPS

    def _scale(self, task):
        """``s`` for ``task``: ``"auto"``, or ``init_scale`` checked against the condition."""
        gamma = _gamma(task.covariance_matrix, 1 / (task.reference_length - 1))
        bound = float(np.linalg.norm(gamma, 2)) * math.sqrt(task.n_features)
        if self.init_scale == "auto":
            return 1 / math.sqrt(bound)
        s = float(self.init_scale)
        if s * s * bound >= 2:
            raise ValueError(
                f"init_scale={s:.4g} breaks the paper's condition s^2 ||Gamma||_op sqrt(d) < 2: "
                f"here ||Gamma||_op sqrt(d) = {bound:.4g} (d={task.n_features}, "
                f"N={task.reference_length - 1}), so s must be below {math.sqrt(2 / bound):.4g}; "
                "'auto' takes s^2 = 1 / (||Gamma||_op sqrt(d))."
            )
        return s

    def _make_module(self, task, seed):
        return LinearSelfAttention(
            task.n_features, self.parametrization, self._scale(task), self.init
        )

    def _train(self, data, task, *args, **kwargs):
        if isinstance(data, tr.TensorData):  # fit: the law's covariance, read from the examples
            x = data.X[:, :-1, :-1].to(torch.float64)
            second = torch.einsum("nmd,nme->de", x, x).cpu().numpy() / (x.shape[0] * x.shape[1])
            if np.trace(second) > 0:
                task = InContextRegressionTask(task.seq_len, task.n_features, covariance=second)
        super()._train(data, task, *args, **kwargs)

    # -- public API, documented for prompts -------------------------------------------
    @Substitution(rows=_ROWS, returns=fit_returns())
    def fit(self, X, y):
        """Fit the layer to prompts with epochs of shuffled minibatches.

        Parameters
        ----------
        {rows}
        y : array-like of shape (n_prompts,)
            The queries' labels.

        {returns}
        """
        return super().fit(X, y)

    @Substitution(returns=fit_returns(online=True))
    def fit_online(self, task, n_steps="auto"):
        """Fit on a fresh batch of prompts drawn from ``task`` at every step.

        Batches of ``batch_size`` prompts (256 when ``"auto"``) are drawn on
        the training device; there are no epochs and no early stopping. A
        task whose ``seq_len`` is a range draws every batch at one length of
        it.

        Parameters
        ----------
        task : InContextRegressionTask
            The law of the prompts.
        n_steps : int or "auto", default="auto"
            Number of optimisation steps; ``"auto"`` is 1000.

        {returns}
        """
        return super().fit_online(task, n_steps)

    @Substitution(rows=_ROWS)
    def predict(self, X):
        """Predict the query's label of every prompt, at any number of examples.

        Parameters
        ----------
        {rows}

        Returns
        -------
        y_pred : ndarray of shape (n_prompts,)
            As float64, whatever the device.
        """
        return super().predict(X)

    @Substitution(rows=_ROWS)
    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the prediction.

        Parameters
        ----------
        {rows}
        y : array-like of shape (n_prompts,)
            The queries' labels.
        sample_weight : array-like of shape (n_prompts,), default=None
            Prompt weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` with respect to ``y``.
        """
        return super().score(X, y, sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.target_tags.single_output = True
        return tags

    # -- fitted weights ------------------------------------------------------------------
    def _weights(self, which):
        check_is_fitted(self)
        with torch.no_grad():
            value = getattr(self.net_.module_, which)()
        if isinstance(value, tuple):
            return tuple(v.cpu().double().numpy() for v in value)
        return value.cpu().double().numpy()

    @property
    def preconditioner_(self):
        """``u U^T``: the matrix of ``y_hat = x_q^T A (1/M) sum_i y_i x_i``."""
        return self._weights("preconditioner")

    @property
    def value_matrix_(self):
        """``W^PV`` (``(d + 1) x (d + 1)``), 0 where the prediction never reads."""
        return self._weights("matrices")[0]

    @property
    def key_query_matrix_(self):
        """``W^KQ`` (``(d + 1) x (d + 1)``), 0 where the prediction never reads."""
        return self._weights("matrices")[1]
