"""The two model cores every estimator is built on: attention, and the fully-connected net.

:class:`_AttentionCore` holds the hyperparameters of the one-layer attention
model (width, encodings, heads, step sizes that follow the width) and builds
:class:`~stsq_learn.nn.Attention` for its task; :class:`_FCNCore` those of
the baseline, which builds :class:`~stsq_learn.nn.FullyConnected`. A public
estimator is a core plus a task (its ``_task``) and its docstrings; the
generic ones (:mod:`stsq_learn.regressors`) take the task as a parameter.
"""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._validation import check_positive_int
from ..encodings.families import POSITIONAL_ENCODINGS, encoding_family
from ..encodings.length_scale import LENGTH_SCALES, length_scale_rule
from ..nn import Attention, FullyConnected
from . import rates as _rates
from .base import _BaseEstimator
from .regression import _Regressor


class _AttentionCore(_Regressor):
    """Hyperparameters, module and step sizes of the attention estimators."""

    _parameter_constraints: dict = {
        **_BaseEstimator._parameter_constraints,
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "length_scale": [StrOptions(set(LENGTH_SCALES)), None],
        "positional_encoding": [StrOptions(set(POSITIONAL_ENCODINGS))],
        "max_positions": [Interval(Integral, 1, None, closed="left"), None],
        "pe_sampling": [StrOptions({"marginal", "full"})],
        "n_pe_samples": [Interval(Integral, 1, None, closed="left")],
        "n_pe_samples_fit": [Interval(Integral, 1, None, closed="left")],
        "learn_token_block": ["boolean"],
        "solver": [StrOptions({"auto", "sgd", "adam"})],
        "learning_rate_init": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "token_block_rate": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    }

    def __init__(
        self,
        width=64,
        *,
        n_heads=1,
        length_scale=None,
        positional_encoding="stochastic",
        max_positions=None,
        pe_sampling="marginal",
        n_pe_samples=1,
        n_pe_samples_fit=1,
        learn_token_block=True,
        solver="auto",
        learning_rate_init="auto",
        token_block_rate="auto",
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
        self.width = width
        self.n_heads = n_heads
        self.length_scale = length_scale
        self.positional_encoding = positional_encoding
        self.max_positions = max_positions
        self.pe_sampling = pe_sampling
        self.n_pe_samples = n_pe_samples
        self.n_pe_samples_fit = n_pe_samples_fit
        self.learn_token_block = learn_token_block
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.token_block_rate = token_block_rate
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
        task_class = self._task_class()
        if task_class.structure is None:
            raise ValueError(
                f"{type(self).__name__} reads a task through its query structure of "
                f"positional encodings, and the task {task_class.name!r} has none "
                f"({task_class.__name__}.structure is None: it selects by content, not by "
                "position); train it with an estimator of its own, or the FCNRegressor."
            )

    def _codebook_size(self, seq_len):
        return 4 * seq_len if self.max_positions is None else self.max_positions

    def _family(self, seq_len, seed=0):
        """The encoding family these hyperparameters give at training length ``seq_len``."""
        family = encoding_family(self.positional_encoding)
        return family(self.width, seed, max_positions=self._codebook_size(seq_len))

    def _auto_batch_size(self, seq_len, *, online):
        # As many queries per step as a one-query task's batch (qSA: a query per position).
        rows = super()._auto_batch_size(seq_len, online=online)
        return -(-rows // self._task_class().queries_per_row(seq_len))

    def _make_module(self, task, seed):
        return Attention(
            task,
            self.width,
            self.positional_encoding,
            encoding_seed=seed,
            learn_token_block=self.learn_token_block,
            max_positions=self._family(task.reference_length).max_length,
            n_heads=self.n_heads,
        )

    def _check_train_length(self, task):
        self._family(task.reference_length).check_length(task.reference_length)
        rule = length_scale_rule(self.length_scale)
        if rule is not None:
            rule.check(task)

    def _check_predict_seq_len(self, seq_len):
        self.net_.module_.encoding.check_length(seq_len)

    def _auto_steps(self):
        return _rates.auto_steps()

    def _resolve_optimiser(self, zero_loss, planned_steps, module, online):
        solver = "sgd" if self.solver == "auto" else self.solver
        rate, identity_rate = self.learning_rate_init, 1.0
        if rate == "auto":
            if solver == "sgd":
                # Each head answers for its share of the loss (the derivation in _rates).
                per_head = zero_loss / self.n_heads
                rate, identity_rate = _rates.sgd_rates(self.width, per_head, planned_steps)
            else:
                rate = _rates.ADAM_RATE
        token_rate = self.token_block_rate
        if token_rate == "auto":
            token_rate = 1.0 / self.width if solver == "sgd" else 1.0
        token_rate = float(token_rate) if self.learn_token_block else None
        paces = []
        if identity_rate != 1.0:
            paces.append(_rates.IdentityRate(identity_rate))
        if token_rate is not None and token_rate != 1.0:
            paces.append(_rates.BlockRate(token_rate))
        readout = self.n_heads > 1 or self._task_class().readout_required
        if solver == "sgd" and self.learning_rate_init == "auto" and readout:
            paces.append(_rates.ReadoutRate(_rates.READOUT_RATE / float(rate)))
        return solver, float(rate), token_rate, paces

    @property
    def token_block_rate_(self):
        """Step of W's token rows as a multiple of ``learning_rate_init_`` (None if frozen)."""
        check_is_fitted(self)
        return self._token_block_rate

    def _forward_kwargs(self):
        # length_scale may be set after fitting: checked here, for the fitted task.
        rule = length_scale_rule(self.length_scale)
        if rule is not None:
            rule.check(self.task_)
        return {
            "n_pe_samples": check_positive_int(self.n_pe_samples, "n_pe_samples"),
            "pe_sampling": self._checked_pe_sampling(),
            "length_scale": self.length_scale,
        }

    def _fit_forward_kwargs(self):
        return {
            "n_pe_samples": self.n_pe_samples_fit,
            "pe_sampling": self.pe_sampling,
            "length_scale": self.length_scale,
        }

    def _checked_pe_sampling(self):
        """``pe_sampling``, which may have been set after fitting, checked at predict."""
        if self.pe_sampling not in ("marginal", "full"):
            raise ValueError(f"pe_sampling must be 'marginal' or 'full', got {self.pe_sampling!r}.")
        return self.pe_sampling

    @property
    def max_positions_(self):
        """Codebook size of a fitted randomized-encoding model (None for the other families)."""
        check_is_fitted(self)
        return self.net_.module_.max_positions

    @property
    def key_query_(self):
        """The learned W: (`n_features_in_` + width, width) at one head, else one per head."""
        check_is_fitted(self)
        return self.net_.module_.key_query.detach().cpu().numpy().copy()

    @property
    def key_queries_(self):
        """Every head's W: an ndarray (n_heads, `n_features_in_` + width, slots * width)."""
        check_is_fitted(self)
        return self.net_.module_.heads().detach().cpu().numpy().copy()

    @property
    def readout_(self):
        """The learned linear output map of the heads, or None (one head, no readout)."""
        check_is_fitted(self)
        readout = self.net_.module_.readout
        return None if readout is None else readout.detach().cpu().numpy().copy()


class _FCNCore(_Regressor):
    """Hyperparameters and module of the fully-connected baselines."""

    _parameter_constraints: dict = {
        **_BaseEstimator._parameter_constraints,
        "extra_hidden_layers": [tuple, list],
        "learning_rate_init": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "learning_rate": [
            StrOptions({"auto", "constant", "invscaling", "adaptive", "cosine", "cooldown"})
        ],
    }

    def __init__(
        self,
        width=256,
        *,
        extra_hidden_layers=(),
        solver="adam",
        learning_rate_init="auto",
        learning_rate="auto",
        power_t=0.5,
        batch_size="auto",
        max_iter=200,
        tol=1e-4,
        n_iter_no_change=10,
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
        self.width = width
        self.extra_hidden_layers = extra_hidden_layers
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

    _sizes_in_weights = ("n_features_in_", "seq_len_")  # the input layer: seq_len * (d + 1)
    _attention_sibling = "an attention estimator"
    """What accepts other lengths, for the message of :meth:`_check_predict_seq_len`."""
    _fixed_layers = "input layer has a fixed size"
    """Which layers fix the length, for the same message."""

    def _validate_params(self):
        super()._validate_params()
        for i, size in enumerate(self.extra_hidden_layers):
            check_positive_int(size, f"extra_hidden_layers[{i}]")

    def _make_module(self, task, seed):
        return FullyConnected(
            task.seq_len, task.n_features, self.width, tuple(self.extra_hidden_layers), task=task
        )

    def _auto_rate(self):
        """Whether the step is Adam's ``"auto"`` step (:func:`~.rates.fcn_adam_rate`)."""
        return self.learning_rate_init == "auto" and self.solver == "adam"

    def _resolve_optimiser(self, zero_loss, planned_steps, module, online):
        if self._auto_rate():
            # fit's epochs end when the loss stalls, not at a plan: the step of the reference
            # plan, lowered by the adaptive schedule (_schedule).
            steps = planned_steps if online else _rates.FCN_REFERENCE_STEPS
            layers = module.layers
            rate = _rates.fcn_adam_rate(
                self.width, layers[0].in_features, layers[-1].out_features, steps
            )
        elif self.learning_rate_init == "auto":  # plain SGD: 0.6's step, for every solver then
            rate = _rates.FCN_SGD_RATE
        else:
            rate = self.learning_rate_init
        return self.solver, float(rate), None, []

    def _schedule(self, online):
        # "auto": with Adam's "auto" step, the cooldown of a planned online run, and in fit the
        # adaptive rate (divided by 5 where the epoch loss stalls); an explicit step (and
        # SGD's) keeps 0.6's constant rate.
        if self.learning_rate != "auto":
            return self.learning_rate
        if not self._auto_rate():
            return "constant"
        return "cooldown" if online else "adaptive"

    def _check_train_length(self, task):
        lo, hi = task.length_range
        if lo != hi:
            raise ValueError(
                f"{type(self).__name__} trains at one length (its input layer has a fixed "
                f"size), got a task whose seq_len is the range {task.seq_len}."
            )

    def _check_predict_seq_len(self, seq_len):
        if seq_len != self.seq_len_:
            raise ValueError(
                f"{type(self).__name__} was fitted on seq_len={self.seq_len_} and cannot "
                f"predict at seq_len={seq_len}: its {self._fixed_layers}. Only "
                f"{self._attention_sibling} accepts other lengths."
            )
