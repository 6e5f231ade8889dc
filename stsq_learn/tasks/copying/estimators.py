"""The trained copiers: a causal transformer and an LSTM, on the sequence models' engine.

Both read ``BOS x SEP`` and write the answer then the end (teacher forcing
in training, greedy decoding in ``predict``), on the package's engine
(:mod:`stsq_learn.engine.sequences`): ``fit`` on rows or ``fit_online`` on
fresh strings, any device, minibatches, schedules, the memory check,
divergence, warm starts and model files. Their modules are in
:mod:`.modules`.
"""

from __future__ import annotations

from numbers import Integral

from sklearn.utils._param_validation import Interval, StrOptions

from ..._docstrings import Substitution
from ...engine.base import _BaseEstimator
from ...engine.sequences import _SequenceModel
from .modules import ENCODINGS, CausalTransformer, RecurrentCopier

__all__ = ["LSTMCopier", "TransformerCopier"]

DEFAULT_STEPS = 8000
"""Optimiser steps of ``max_iter="auto"`` and ``fit_online(n_steps="auto")``."""

_COMMON = """\
solver : {"adam", "sgd"}, default="adam"
    Optimiser; every step's gradient is clipped to norm 1.
learning_rate_init : float, default=0.005
    Step size: its peak, reached after a linear warmup over the first 5% of
    the planned steps, then following ``learning_rate``.
learning_rate : {"constant", "invscaling", "adaptive", "cosine", "cooldown"}, \
default="cosine"
    Schedule of the step size (as for :class:`~stsq_learn.FCNRegressor`):
    ``"cosine"`` goes from ``learning_rate_init`` to 0 along a half cosine
    over the planned steps.
power_t : float, default=0.5
    Exponent of ``"invscaling"``.
batch_size : int or "auto", default="auto"
    Strings per step; ``"auto"`` is 16 (at most ``n_samples`` in :meth:`fit`).
max_iter : int or "auto", default="auto"
    Epochs over ``X`` in :meth:`fit`; ``"auto"`` plans 8000 optimiser
    steps and runs as many epochs as they fill (``fit_online(n_steps="auto")``
    takes 8000 steps).
tol : float, default=1e-4
    With ``n_iter_no_change``, the least improvement of the epoch loss.
n_iter_no_change : int or None, default=None
    Patience of early stopping, in epochs; None: the planned run.
alpha : float, default=0.0
    L2 penalty (weight decay) of the optimiser.
momentum : float, default=0.0
    Momentum of ``solver="sgd"``.
dtype : {"float32", "float64"}, default="float32"
    Precision of the computation.
device : str or torch.device, default="auto"
    ``"auto"`` trains on CUDA when available, else on the CPU.
random_state : int, RandomState instance or None, default=None
    Seeds the initialisation and the batches (order, or fresh strings).
verbose : int, default=0
    1 prints the epoch losses (a progress bar of the steps in
    :meth:`fit_online`).
warm_start : bool, default=False
    Continue from the previous fit's weights (same architecture).
on_divergence : {"raise", "warn"}, default="raise"
    A fit whose final loss is more than 1.5 times its start's: a
    ``ValueError`` (the estimator left as it was) or a ``UserWarning``.
callbacks : list of skorch callbacks or None, default=None
    Callbacks the owned skorch net runs in every fit, after the package's."""

_ATTRIBUTES = """\
n_features_in_ : int
    D, the alphabet's size (the largest token of ``fit`` plus 1, or the task's).
seq_len_ : int
    The width of the training rows.
task_ : CopyingTask
    The law (``fit_online``) or the data's sizes (``fit``).
loss_curve_ : list of float
    Training loss (the mean cross-entropy per written token) per epoch or step.
n_iter_ : int
    Epochs (:meth:`fit`) or steps (:meth:`fit_online`) run.
t_ : int
    Strings seen by the optimiser.
device_ : torch.device
    Device the model was trained on and predicts on.
net_ : skorch.NeuralNet
    The net that ran the training (``net_.module_``: the torch module)."""

_TRAINING = {
    k: v for k, v in _BaseEstimator._parameter_constraints.items() if k not in ("width", "max_iter")
}
_TRAINING["max_iter"] = [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})]
_COUNT = [Interval(Integral, 1, None, closed="left")]


class _Copier(_SequenceModel):
    """What the two copiers share: the task, the planned steps, the batch size."""

    _task = "copying"
    _layers_in_weights = ("n_layers",)  # a forged count is refused before a module is built

    def _auto_steps(self):
        return DEFAULT_STEPS

    def _auto_batch_size(self, seq_len, *, online):
        return 16


@Substitution(common=_COMMON, attributes=_ATTRIBUTES)
class TransformerCopier(_Copier):
    """A causal transformer that learns to copy (or any map of strings to strings).

    It reads ``BOS x SEP`` and writes the answer, then the end: a pre-norm
    transformer of ``n_layers`` blocks (causal multi-head self-attention,
    then a ReLU MLP of 4x the width) with logits over the D symbols and the
    end. Trained by teacher forcing (the cross-entropy of every answer token
    and the end); :meth:`predict` writes greedily, keeping the keys and
    values of the tokens read. Jelassi, Brandfonbrener, Kakade and Malach
    (ICML 2024) prove that a depth-2 transformer copies every string without
    a repeated n-gram (an n-gram induction head, :class:`NGramCopier`).

    Parameters
    ----------
    width : int, default=64
        Width of the residual stream (a multiple of ``n_heads``).
    n_heads : int, default=8
        Heads of each layer.
    n_layers : int, default=2
        Transformer blocks.
    positional_encoding : {"hard_alibi", "alibi", "nope", "learned"}, default="hard_alibi"
        ``"hard_alibi"`` (the paper's): head ``h`` of the first ``n_heads //
        2`` sees only the last ``h + 2`` tokens (itself and ``h + 1`` before
        it), the others all of them, with no positional term; ``"alibi"``:
        a bias ``-m_h (i - j)`` on every head (ALiBi's slopes); ``"nope"``:
        causal masking only;
        ``"learned"``: a learned embedding per position (it cannot predict
        past ``max_positions``).
    max_positions : int or None, default=None
        Positions of ``"learned"``; None: ``2 seq_len + 2`` of the training
        rows (a stream ``BOS x SEP y``). Ignored by the other encodings.
    {common}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    LSTMCopier : The fixed-state model.
    CopyingTask : The law it is trained on.

    Notes
    -----
    The paper's: the format ``BOS x SEP y`` and Hard-ALiBi (its code: 8 of
    16 heads with windows 1 .. 8). Ours: the windows 2 .. 5 (a head that
    sees only its own token repeats the residual stream), about 100k
    parameters (the paper's 160M), the blocks, the initialisation, the recipe.

    Examples
    --------
    >>> from stsq_learn import CopyingTask, TransformerCopier, make_copying
    >>> task = CopyingTask(seq_len=4, vocab_size=3, min_len=2)
    >>> model = TransformerCopier(random_state=0).fit_online(task, n_steps=400)
    >>> X, y = make_copying(200, 4, vocab_size=3, min_len=2, random_state=1)
    >>> X[:2]
    array([[ 1,  0,  0,  1],
           [ 1,  0,  0, -1]])
    >>> model.predict(X[:2])
    array([[ 1,  0,  0,  1],
           [ 1,  0,  0, -1]])
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **_TRAINING,
        "width": _COUNT,
        "n_heads": _COUNT,
        "n_layers": _COUNT,
        "positional_encoding": [StrOptions(set(ENCODINGS))],
        "max_positions": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        width=64,
        n_heads=8,
        n_layers=2,
        positional_encoding="hard_alibi",
        max_positions=None,
        *,
        solver="adam",
        learning_rate_init=0.005,
        learning_rate="cosine",
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
        self.n_layers = n_layers
        self.positional_encoding = positional_encoding
        self.max_positions = max_positions
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
        if self.width % self.n_heads:
            raise ValueError(
                f"width={self.width} must be a multiple of n_heads={self.n_heads} (each head "
                "reads width // n_heads dimensions)."
            )

    def _positions(self, task):
        return self.max_positions or 2 * task.reference_length + 2

    def _check_positions(self, T, positions, what):
        if self.positional_encoding == "learned" and 2 * T + 2 > positions:
            raise ValueError(
                f"positional_encoding='learned' has {positions} positions, and strings of length "
                f"{T} need 2 * {T} + 2 = {2 * T + 2} to {what}: raise max_positions, or use an "
                "encoding without positions ('hard_alibi')."
            )

    def _check_train_length(self, task):
        self._check_positions(task.reference_length, self._positions(task), "train")

    def _check_predict_seq_len(self, seq_len):
        self._check_positions(seq_len, self.net_.module_.max_positions or 0, "predict")

    def _make_module(self, task, seed):
        return CausalTransformer(
            task.n_features,
            self.width,
            self.n_heads,
            self.n_layers,
            self.positional_encoding,
            self._positions(task) if self.positional_encoding == "learned" else None,
        )

    def _size_hyperparameters(self):
        return [f"width={self.width}", f"n_heads={self.n_heads}", f"n_layers={self.n_layers}"]


@Substitution(common=_COMMON, attributes=_ATTRIBUTES)
class LSTMCopier(_Copier):
    """An LSTM that learns to copy: the fixed-state model of the copying task.

    It reads ``BOS x SEP`` and writes the answer, then the end, as
    :class:`TransformerCopier` does, through ``n_layers`` LSTM layers of
    ``hidden_size`` units: all it knows of x when it starts writing is its
    state, ``2 * n_layers * hidden_size`` floats. Initialised as PyTorch does
    not (orthogonal recurrent weights, Xavier input weights, forget-gate
    bias 1). A state of b bits errs with probability at least ``1 - 2^b /
    D^L`` (Jelassi et al., Theorem 2.7; :func:`fixed_state_error_bound`); a
    float32 state holds thousands of bits, so the bound says nothing at the
    lengths a CPU trains: what this model does there is measured, not proved.

    Parameters
    ----------
    hidden_size : int, default=80
        Units of each layer (80 and 2 layers: about as many parameters as
        the default :class:`TransformerCopier`).
    n_layers : int, default=2
        Stacked layers.
    {common}

    Attributes
    ----------
    {attributes}

    See Also
    --------
    TransformerCopier : The attention model.
    FixedStateCopier : The best copier of a b-bit state.

    Examples
    --------
    >>> from stsq_learn import CopyingTask, LSTMCopier, make_copying
    >>> task = CopyingTask(seq_len=4, vocab_size=3, min_len=2)
    >>> model = LSTMCopier(random_state=0).fit_online(task, n_steps=400)
    >>> X, y = make_copying(200, 4, vocab_size=3, min_len=2, random_state=1)
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {**_TRAINING, "hidden_size": _COUNT, "n_layers": _COUNT}

    def __init__(
        self,
        hidden_size=80,
        n_layers=2,
        *,
        solver="adam",
        learning_rate_init=0.005,
        learning_rate="cosine",
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
        self.hidden_size = hidden_size
        self.n_layers = n_layers
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

    def _make_module(self, task, seed):
        return RecurrentCopier(task.n_features, self.hidden_size, self.n_layers)

    def _size_hyperparameters(self):
        return [f"hidden_size={self.hidden_size}", f"n_layers={self.n_layers}"]
