"""The attention classifier of sparse-token classification, on the estimators' engine.

:class:`SparseTokenClassifier` is the single-layer attention classifier of
Barnfield, Cui and Lu (ICLR 2026, arXiv 2509.25153): a trainable query
vector scores every token, a softmax over the tokens weighs them, and a
linear readout of the weighted token gives the logit
(:class:`~.modules.AttentionClassifier`). It is a classifier of the engine
(:class:`~stsq_learn.engine.classification._Classifier`): mini-batches or
the full batch, ``fit_online`` on the law, any device and dtype, the memory
check, divergence, warm starts, persistence. The paper's two-step protocol
(``solver="two_step"``) is a pace of the same training loop
(:class:`TwoSteps`). It reads ``X`` of shape ``(n_samples, seq_len,
n_features)`` at any length.

The linear baselines it is compared with live in :mod:`.baselines`.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..._docstrings import replace_once
from ...engine import training as tr
from ...engine.base import _BaseEstimator
from ...engine.classification import _Classifier
from ...engine.members import member_nets
from ...engine.rates import _StepPace
from ...engine.state import _is_number_list, check_fitted_state
from .modules import AttentionClassifier, initial_query_std

__all__ = ["SparseTokenClassifier"]


class TwoSteps(_StepPace):
    """The two-step protocol as a pace of the training loop: which parts each step moves.

    Step 1 moves the readout only (the intercept and the query are put
    back; at ``q = 0`` and ``w = 0`` the query's gradient vanishes anyway),
    step 2 the query only; the query after step 2 is recorded
    (``query_``), then rescaled to norm ``query_norm`` if given, and kept:
    every later step moves the readout and the intercept alone. A run that
    continues a two-step fit (a warm start) starts at step 3. In the
    stacked run of a batched fit it paces every member (the query's norm is
    each member's own) and gives each member's own pace its query
    (:func:`~stsq_learn.engine.members.member_nets`). ``query_norm``: the
    query's norm after the two steps (None: the step's); ``steps_done``:
    steps of the protocol already taken (2: a continuation).
    """

    _FROZEN = {1: ("query", "intercept"), 2: ("readout", "intercept")}

    def __init__(self, query_norm, steps_done=0):
        super().__init__(rate=0.0)
        self.query_norm = query_norm
        self.steps_done = steps_done

    def initialize(self):
        super().initialize()
        self.step_ = self.steps_done
        self.query_ = None
        return self

    def _before(self, module):
        return {name: p.detach().clone() for name, p in module.named_parameters()}

    def _pace(self, module, before):
        self.step_ += 1
        for name in self._FROZEN.get(self.step_, ("query",)):
            module.get_parameter(name).copy_(before[name])
        if self.step_ == 2:
            query = module.query
            self.query_ = query.detach().cpu().numpy().astype(np.float64)
            for row in query.unsqueeze(0) if query.dim() == 1 else query:  # each member's
                norm = float(row.norm())
                if self.query_norm is not None and norm > 0:
                    row.mul_(float(self.query_norm) / norm)

    def on_batch_end(self, net, training=False, **kwargs):
        super().on_batch_end(net, training=training, **kwargs)
        nets = member_nets(net) if training and self.step_ == 2 else None
        if nets is not None and self.query_.ndim == 2:  # a stacked run: each member's query
            for own, query in zip(nets, self.query_):
                pace = next(cb for _, cb in own.callbacks_ if isinstance(cb, TwoSteps))
                pace.step_, pace.query_ = self.step_, query


class SparseTokenClassifier(_Classifier):
    """Single-layer attention classifier with a trainable query vector.

    The model of Barnfield, Cui and Lu (ICLR 2026): for a row ``X`` of
    ``L`` tokens ``x_l`` in ``R^d``,

    ``f(X) = <w, sum_l softmax_l(<x_l, q>) x_l> + b``,

    the softmax over the ``L`` tokens; ``P(y = classes_[1] | X) =
    sigmoid(f(X))``. With more than two classes, one readout and intercept
    per class over the same query, and a softmax over the classes. The
    query ``q``, the readout ``w`` and the intercept ``b`` minimise the mean
    logistic loss (the softmax cross-entropy for more classes), with weight
    decay ``alpha``:

    - ``solver="adam"`` (default) or ``"sgd"``: Adam or plain gradient steps
      on ``(q, w, b)`` jointly, from ``w = 0, b = 0`` and a small random
      ``q`` (standard deviation ``1e-2 / sqrt(d)``), on minibatches of
      ``batch_size`` rows (``"full"``: every row at every step, the
      paper's full-batch gradient descent);
    - ``solver="two_step"``: the two-step protocol, plain full-batch
      gradient steps of size ``learning_rate_init`` from ``q = 0, w = 0,
      b = 0`` (uniform attention): one on ``w``, then one on ``q`` at that
      ``w``. The query's alignment with the signal ``xi`` after these two
      steps is what the paper analyses (:attr:`two_step_query_` keeps it).
      The query is then kept (rescaled to norm ``query_norm`` if given) and
      ``(w, b)`` take ``max_iter`` more gradient steps. :meth:`fit` steps
      on all rows (``batch_size`` is not used); :meth:`fit_online` on one
      fresh batch a step.

    Parameters
    ----------
    solver : {"adam", "sgd", "two_step"}, default="adam"
        The optimiser, or the two-step protocol (above). (``"gd"``, 0.6's
        name of full-batch ``"sgd"``, is deprecated.)
    learning_rate_init : float, default=0.05
        Step size (of both steps of ``"two_step"``, and of the readout's after).
    max_iter : int, default=300
        Epochs over ``X`` in :meth:`fit` (one step each with
        ``batch_size="full"``), and the steps of ``fit_online(n_steps="auto")``;
        with ``"two_step"``, the readout's steps after the two steps.
    alpha : float, default=1e-4
        L2 penalty (weight decay) of the optimiser.
    query_norm : float or None, default=None
        ``"two_step"`` only: the norm the query is rescaled to after the
        second step (the attention's inverse temperature); None keeps the
        step's norm. Ignored by the other solvers.
    random_state : int, RandomState instance or None, default=None
        Seeds the query's initialisation, the batch order and the batches
        of :meth:`fit_online`. An int makes :meth:`fit` reproducible.
    verbose : int, default=0
        1 prints a table of the epoch losses (with a progress bar of the
        steps in :meth:`fit_online`); 2 adds a progress bar to every epoch.
    learning_rate : {"constant", "invscaling", "adaptive", "cosine", "cooldown"}, \
            default="constant"
        Schedule of the step size, as for the regressors (e.g.
        :class:`~stsq_learn.FCNRegressor`): ``"constant"`` keeps
        ``learning_rate_init``.
    power_t : float, default=0.5
        Exponent of ``"invscaling"``.
    batch_size : int, "auto" or "full", default="auto"
        Rows per step. ``"auto"``: ``min(200, n_samples)`` in :meth:`fit`
        (as :class:`~sklearn.neural_network.MLPClassifier`), 256 in
        :meth:`fit_online`. ``"full"``: every row at every step of
        :meth:`fit` (256 fresh rows in :meth:`fit_online`: a stream has no
        full batch).
    tol : float, default=1e-4
        With ``n_iter_no_change`` set, training stops when the epoch loss
        has not improved by at least ``tol`` for that many epochs.
    n_iter_no_change : int or None, default=None
        Patience of that rule, in epochs; None: no early stopping.
    momentum : float, default=0.0
        Momentum of ``solver="sgd"``.
    dtype : {"float32", "float64"}, default="float32"
        Precision of the computation; float64 input is cast to it.
    device : str or torch.device, default="auto"
        ``"auto"`` trains on CUDA when available, else on the CPU.
        Predictions always come back as NumPy arrays.
    warm_start : bool, default=False
        When True, :meth:`fit` and :meth:`fit_online` continue from the
        weights of the previous call (a fresh optimiser state), and
        ``loss_curve_``, ``n_iter_`` and ``t_`` count on; the classes must
        be the same (a continued ``"two_step"`` fit steps the readout only).
    on_divergence : {"raise", "warn"}, default="raise"
        What a fit that diverges does (its final loss more than 1.5 times
        that of the model it started from): a ``ValueError`` naming the step
        size, the estimator left as it was; or, ``"warn"``, keep it with a
        ``UserWarning``.
    callbacks : list of skorch callbacks or None, default=None
        Callbacks the owned skorch net runs in every fit, after the
        package's own.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels, sorted; for two, ``classes_[1]`` is the positive class
        (the signal, label 1 of :func:`make_sparse_token_classification`).
    query_ : ndarray of shape (n_features,)
        The fitted query ``q``.
    readout_ : ndarray of shape (n_features,) or (n_classes, n_features)
        The fitted readout ``w`` (one row per class for more than two).
    intercept_ : float or ndarray of shape (n_classes,)
        The fitted intercept ``b``.
    two_step_query_ : ndarray of shape (n_features,) or None
        The query after the two steps (before any rescaling), with
        ``solver="two_step"``; None otherwise.
    loss_curve_ : list of float
        Training loss per epoch (:meth:`fit`) or per step (:meth:`fit_online`).
    n_iter_ : int
        Epochs or steps run (with ``"two_step"``, the two steps included).
    t_ : int
        Training rows seen by the optimiser.
    task_ : SparseTokenClassificationTask
        The data contract (sizes of the training rows).
    n_features_in_, seq_len_ : int
        Token dimension and length seen in fit.
    device_ : torch.device
        Device the model was trained on and predicts on.
    net_ : skorch.NeuralNetClassifier
        The skorch net that ran the training (``net_.module_``: the
        :class:`~stsq_learn.nn.AttentionClassifier`; ``net_.history``).

    See Also
    --------
    make_flat_logistic : The vectorized linear baseline.
    make_pooled_logistic : The mean-pooled linear baseline.

    Notes
    -----
    What the paper's public text confirms and what is ours: the data law,
    the two linear baselines, the query vector, the softmax over tokens, the
    logistic-type classification and "two gradient updates" aligning the
    query with ``xi`` are confirmed from public summaries of the paper. Not
    confirmed (the paper's full text was out of reach): whether the readout
    is a learned vector (ours) or tied to the query, whether the attention
    has a temperature or a key/value matrix, the exact loss (ours: the
    logistic loss, with weight decay), the initialisation, the step sizes,
    whether the two steps reuse the same rows (ours: the same rows in
    :meth:`fit`) and how the readout is trained after them (ours: plain
    gradient steps with the query kept). The multiclass readout is ours.

    Examples
    --------
    >>> from stsq_learn import SparseTokenClassifier
    >>> from stsq_learn import make_sparse_token_classification
    >>> X, y = make_sparse_token_classification(400, seq_len=16, n_features=8,
    ...                                         signal=4.0, random_state=0)
    >>> clf = SparseTokenClassifier(random_state=0).fit(X, y)
    >>> clf.classes_
    array([0, 1])
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **_BaseEstimator._parameter_constraints,
        "solver": [StrOptions({"adam", "sgd", "two_step"}), Hidden(StrOptions({"gd"}))],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto", "full"})],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "query_norm": [Interval(Real, 0, None, closed="left"), None],
    }
    _parameter_constraints.pop("width")
    _task = "classification"
    _first_format_version = 4  # model files hold it since format 4 (0.6)
    _fitted_extra_keys = ("classes_", "two_step_query_")

    def __init__(
        self,
        solver="adam",
        learning_rate_init=0.05,
        max_iter=300,
        alpha=1e-4,
        query_norm=None,
        random_state=None,
        verbose=0,
        *,
        learning_rate="constant",
        power_t=0.5,
        batch_size="auto",
        tol=1e-4,
        n_iter_no_change=None,
        momentum=0.0,
        dtype="float32",
        device="auto",
        warm_start=False,
        on_divergence="raise",
        callbacks=None,
    ):
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.alpha = alpha
        self.query_norm = query_norm
        self.random_state = random_state
        self.verbose = verbose
        self.learning_rate = learning_rate
        self.power_t = power_t
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.momentum = momentum
        self.dtype = dtype
        self.device = device
        self.warm_start = warm_start
        self.on_divergence = on_divergence
        self.callbacks = callbacks

    def _validate_params(self):
        super()._validate_params()
        if self.solver == "gd":
            warnings.warn(
                "solver='gd' is deprecated since stsq-learn 0.7 and will be removed in 0.9: "
                "it is plain gradient descent on all rows, solver='sgd' with "
                "batch_size='full'.",
                FutureWarning,
                stacklevel=3,
            )

    # -- the engine's hooks ------------------------------------------------------------
    def _continues(self):
        """Whether the next fit continues a fitted model (a warm start)."""
        return self.warm_start and hasattr(self, "net_")

    def _make_module(self, task, seed):
        d = task.n_features
        std = 0.0 if self.solver == "two_step" else initial_query_std(d)
        return AttentionClassifier(d, self._n_classes(), query_std=std)

    def _rows_per_step(self, seq_len, n_rows=None):
        if n_rows is not None and self.solver in ("two_step", "gd"):
            return n_rows  # full-batch gradient steps
        return super()._rows_per_step(seq_len, n_rows)

    def _leading_steps(self):
        return 2 if self.solver == "two_step" and not self._continues() else 0

    def _resolve_optimiser(self, zero_loss, planned_steps, module, online):
        solver, rate = self.solver, float(self.learning_rate_init)
        if solver != "two_step":
            return ("adam" if solver == "adam" else "sgd"), rate, None, []
        steps_done = 2 if self._continues() else 0
        return "sgd", rate, None, [TwoSteps(self.query_norm, steps_done)]

    # -- fitting ---------------------------------------------------------------------
    def fit_online(self, task, n_steps="auto"):
        return super().fit_online(task, n_steps)

    fit_online.__doc__ = replace_once(
        replace_once(
            _Classifier.fit_online.__doc__,
            "task : Task",
            "task : SparseTokenClassificationTask",
        ),
        "``classes_[k]``).",
        "``classes_[k]``). With ``solver='two_step'``, the two steps are taken\n"
        "        on the first two batches, then ``n_steps`` steps of the readout.",
    )

    def _assign_fitted(self, run, net, losses):
        super()._assign_fitted(run, net, losses)
        self._record_two_steps()

    def _record_two_steps(self):
        """``two_step_query_`` of the run just finished (a continuation keeps the first's)."""
        if self.solver != "two_step":
            self.two_step_query_ = None
            return
        pace = next(cb for _, cb in self.net_.callbacks_ if isinstance(cb, TwoSteps))
        if pace.steps_done == 0:
            self.two_step_query_ = pace.query_

    # -- the fitted model --------------------------------------------------------------
    def _parameter(self, name):
        check_is_fitted(self)
        return self.net_.module_.get_parameter(name).detach().cpu().numpy().astype(np.float64)

    @property
    def query_(self):
        """The fitted query ``q``: an ndarray of shape (`n_features_in_`,)."""
        return self._parameter("query")

    @property
    def readout_(self):
        """The fitted readout ``w``: (`n_features_in_`,), or one row per class for more than two."""
        return self._parameter("readout")

    @property
    def intercept_(self):
        """The fitted intercept ``b``: a float, or one per class for more than two."""
        b = self._parameter("intercept")
        return float(b[0]) if len(self.classes_) == 2 else b

    def attention(self, X):
        """The attention weights ``softmax_l(<x_l, q>)`` of each row over its tokens.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, seq_len)
            Each row sums to 1.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        module = self.net_.module_
        param = module.query
        with torch.inference_mode():
            weights = module.attention(tr.as_tensor(X, param.dtype, param.device))
        return weights.cpu().numpy().astype(np.float64)

    # -- fitted state ------------------------------------------------------------------
    def _extra_fitted(self):
        two = self.two_step_query_
        return {
            **super()._extra_fitted(),
            "two_step_query_": None if two is None else [float(v) for v in two],
        }

    def _read_extra_fitted(self, state):
        extra = super()._read_extra_fitted(state)
        schema = {
            "two_step_query_": (
                lambda v: v is None or _is_number_list(v),
                "None or a list of numbers",
            )
        }
        check_fitted_state(state, schema)
        two, d = state["fitted"]["two_step_query_"], state["fitted"].get("n_features_in_")
        if two is not None:
            two = np.array(two, dtype=np.float64)
            if not np.isfinite(two).all() or (isinstance(d, int) and two.shape != (d,)):
                raise ValueError(
                    f"fitted two_step_query_ must be None or {d} finite numbers "
                    f"(n_features_in_={d})."
                )
        return {**extra, "two_step_query_": two}
