"""The public estimators: thin classes over the shared training loop."""

from __future__ import annotations

from numbers import Integral

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import _BaseSelector
from ._validation import check_positive_int
from .nn import AttentionSelector, FullyConnected

__all__ = ["FCNSelector", "SparseTokenSelector"]

_COMMON_PARAMS = """\
    solver : {{"adam", "sgd"}}, default="adam"
        Optimiser: Adam, or plain (full-step) gradient descent on minibatches
        as in the paper's theory (``momentum`` adds momentum).
    learning_rate_init : float, default={lr}
        Initial step size of the optimiser.
    learning_rate : {{"constant", "invscaling", "adaptive", "cosine"}}, default="constant"
        Schedule of the step size, set before every optimiser step (for
        every solver; :class:`~sklearn.neural_network.MLPRegressor` applies
        it to SGD only):

        - ``"constant"``: ``learning_rate_init`` throughout.
        - ``"invscaling"``: ``learning_rate_init / (t + 1) ** power_t``,
          with ``t`` the rows seen so far (``t_``, which a warm start
          continues).
        - ``"adaptive"``: ``learning_rate_init`` while the epoch loss keeps
          improving; each time it fails to improve by ``tol`` for
          ``n_iter_no_change`` epochs the rate is divided by 5, and training
          stops once the rate is at most 1e-6. :meth:`fit` only (it replaces
          early stopping); :meth:`fit_online` has no epochs and raises
          ``ValueError``.
        - ``"cosine"``: from ``learning_rate_init`` down to 0 along a half
          cosine over the planned steps (``max_iter`` epochs in :meth:`fit`,
          ``n_steps`` in :meth:`fit_online`); early stopping may end it
          sooner. Long runs reach a lower loss than at a constant rate.
    power_t : float, default=0.5
        Exponent of ``"invscaling"``.
    batch_size : int or "auto", default="auto"
        Rows per step. ``"auto"`` is ``min(200, n_samples)`` in :meth:`fit`
        (as in :class:`~sklearn.neural_network.MLPRegressor`) and 256 in
        :meth:`fit_online` (as in the paper).
    max_iter : int, default=200
        Maximum number of epochs over ``X`` in :meth:`fit`.
    tol : float, default=1e-4
        Training stops when the epoch loss has not improved by at least
        ``tol`` for ``n_iter_no_change`` consecutive epochs.
    n_iter_no_change : int, default=10
        Patience of that rule, in epochs.
    alpha : float, default=0.0
        L2 penalty (weight decay) of the optimiser.
    momentum : float, default=0.0
        Momentum of ``solver="sgd"``; 0 is plain gradient descent.
    dtype : {{"float32", "float64"}}, default="float32"
        Precision of the computation; float64 input is cast to it.
    device : str or torch.device, default="auto"
        ``"auto"`` trains on CUDA when available, else on the CPU;
        ``"cuda"`` on a machine without CUDA raises ``ValueError``.
        Predictions always come back as NumPy arrays.
    random_state : int, RandomState instance or None, default=None
        Seeds initialisation, batch order, encodings and prediction draws.
        An int makes :meth:`fit` and :meth:`predict` reproducible.
    verbose : int, default=0
        1 prints a table of the epoch losses, 2 adds a progress bar.
    warm_start : bool, default=False
        When True, :meth:`fit` and :meth:`fit_online` continue from the
        weights of the previous call (with a fresh optimiser state, as in
        :class:`~sklearn.neural_network.MLPRegressor`), and ``loss_curve_``,
        ``n_iter_`` and ``t_`` count on from it. The data must keep
        ``n_features`` and the architecture must stay the same; anything
        else raises ``ValueError``. The other hyperparameters (rate,
        schedule, solver, batch size) may change between calls."""

_COMMON_ATTRIBUTES = """\
    n_features_in_ : int
        Token dimension d seen in fit (the last axis of ``X`` minus the indicator).
    seq_len_ : int
        Sequence length T seen in fit.
    loss_curve_ : list of float
        Training loss per epoch (:meth:`fit`) or per step (:meth:`fit_online`),
        across warm-started calls.
    n_iter_ : int
        Number of epochs (:meth:`fit`) or steps (:meth:`fit_online`) run,
        across warm-started calls.
    t_ : int
        Number of training rows seen by the optimiser.
    device_ : torch.device
        Device the model was trained on and predicts on.
    net_ : skorch.NeuralNetRegressor
        The skorch net that ran the training; ``net_.history`` holds the
        per-epoch and per-batch records and ``net_.module_`` the torch module."""


class SparseTokenSelector(_BaseSelector):
    __doc__ = f"""One-layer softmax-attention regressor for sparse token selection.

    The model of Wang, Wei, Hsu and Lee (ICML 2024): token t is embedded as
    ``[x_t ; p_t]`` with a positional encoding ``p_t`` of dimension
    ``width``, the query is ``[0 ; sum of p_t over the selected t]``, the
    scores are ``[x_t ; p_t]^T W query`` with one trainable matrix W
    (initialised to 0), and the prediction is the softmax-weighted average
    of the tokens. With stochastic encodings it learns to average the
    selected tokens with width O(d + q log T) and generalizes to longer
    sequences; :class:`FCNSelector` needs width of order T d.

    Parameters
    ----------
    width : int, default=64
        Dimension m of the positional encodings.
    positional_encoding : {{"stochastic", "fixed"}}, default="stochastic"
        ``"stochastic"`` draws fresh encodings, uniform on the unit sphere,
        for every row at every training step (the paper's SPE); ``"fixed"``
        uses one vector per position, which fits in distribution but does
        not generalize to longer sequences.
    n_pe_samples : int, default=1
        Number of encoding draws the attention is averaged over at predict
        time (stochastic encodings only). 1 is the paper; more cuts the
        error at fixed width. Can be changed after fitting.
    n_pe_samples_fit : int, default=1
        Number of encoding draws the attention is averaged over in every
        training forward pass (stochastic encodings only; each step costs
        about that many times more). A W trained on one draw settles at the
        sharpness that is best for one draw; to get the most out of
        ``n_pe_samples=K`` at predict time, train (or fine-tune with
        ``warm_start``) with ``n_pe_samples_fit=K``.
    learn_token_block : bool, default=True
        Whether W's token rows (``n_features`` x ``width``) are trained.
        True is the paper's full W. Their expected gradient is 0 and the
        theory sends them to 0, but Adam moves every entry by about the step
        size, which adds noise to the scores; False keeps them at exactly 0
        (the model a plain hand-written training loop usually has) and
        reaches a lower error after short Adam runs.
{_COMMON_PARAMS.format(lr="0.01")}

    Attributes
    ----------
{_COMMON_ATTRIBUTES}
    key_query_ : ndarray of shape (`n_features_in_` + width, width)
        The learned W: token rows, then positional rows.

    See Also
    --------
    FCNSelector : The fully-connected baseline.
    LengthShiftScorer : Score at another sequence length.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelector, make_sparse_token_selection
    >>> X, y = make_sparse_token_selection(1000, seq_len=16, n_features=8,
    ...                                    n_selected=3, random_state=0)
    >>> model = SparseTokenSelector(width=64, random_state=0).fit(X, y)
    >>> X_long, y_long = make_sparse_token_selection(200, seq_len=32, n_features=8,
    ...                                              n_selected=3, random_state=1)
    >>> model.score(X_long, y_long) > 0.5
    True
    """

    _parameter_constraints: dict = {
        **_BaseSelector._parameter_constraints,
        "positional_encoding": [StrOptions({"stochastic", "fixed"})],
        "n_pe_samples": [Interval(Integral, 1, None, closed="left")],
        "n_pe_samples_fit": [Interval(Integral, 1, None, closed="left")],
        "learn_token_block": ["boolean"],
    }

    def __init__(
        self,
        width=64,
        *,
        positional_encoding="stochastic",
        n_pe_samples=1,
        n_pe_samples_fit=1,
        learn_token_block=True,
        solver="adam",
        learning_rate_init=0.01,
        learning_rate="constant",
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
    ):
        self.width = width
        self.positional_encoding = positional_encoding
        self.n_pe_samples = n_pe_samples
        self.n_pe_samples_fit = n_pe_samples_fit
        self.learn_token_block = learn_token_block
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

    def _make_module(self, seq_len, n_features, seed):
        return AttentionSelector(
            n_features,
            self.width,
            self.positional_encoding,
            seq_len,
            encoding_seed=seed,
            learn_token_block=self.learn_token_block,
        )

    def _forward_kwargs(self):
        return {"n_pe_samples": check_positive_int(self.n_pe_samples, "n_pe_samples")}

    def _fit_forward_kwargs(self):
        return {"n_pe_samples": self.n_pe_samples_fit}

    @property
    def key_query_(self):
        """The learned W as an ndarray of shape (`n_features_in_` + width, width)."""
        check_is_fitted(self)
        return self.net_.module_.key_query.detach().cpu().numpy().copy()


class FCNSelector(_BaseSelector):
    __doc__ = f"""Fully-connected baseline for sparse token selection.

    The flattened row (``seq_len * (n_features + 1)`` numbers: tokens and
    indicator) goes through a ReLU layer of ``width`` units, optional
    further hidden layers, and a linear output in ``R^n_features``. The
    paper proves such a net needs first-layer width of order ``T d`` for a
    good average-case error. It only accepts its training ``seq_len``.

    Parameters
    ----------
    width : int, default=256
        Units of the first hidden layer.
    extra_hidden_layers : tuple of int, default=()
        Sizes of further ReLU hidden layers after the first.
{_COMMON_PARAMS.format(lr="0.001")}

    Attributes
    ----------
{_COMMON_ATTRIBUTES}

    See Also
    --------
    SparseTokenSelector : The one-layer transformer.

    Examples
    --------
    >>> from stsq_learn import FCNSelector, make_sparse_token_selection
    >>> X, y = make_sparse_token_selection(500, seq_len=8, n_features=2,
    ...                                    n_selected=2, random_state=0)
    >>> model = FCNSelector(width=128, max_iter=50, random_state=0).fit(X, y)
    >>> model.predict(X[:3]).shape
    (3, 2)
    """

    _parameter_constraints: dict = {
        **_BaseSelector._parameter_constraints,
        "extra_hidden_layers": [tuple, list],
    }

    def __init__(
        self,
        width=256,
        *,
        extra_hidden_layers=(),
        solver="adam",
        learning_rate_init=0.001,
        learning_rate="constant",
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

    def _validate_params(self):
        super()._validate_params()
        for i, size in enumerate(self.extra_hidden_layers):
            check_positive_int(size, f"extra_hidden_layers[{i}]")

    def _make_module(self, seq_len, n_features, seed):
        return FullyConnected(seq_len, n_features, self.width, tuple(self.extra_hidden_layers))

    def _check_predict_seq_len(self, seq_len):
        if seq_len != self.seq_len_:
            raise ValueError(
                f"FCNSelector was fitted on seq_len={self.seq_len_} and cannot predict "
                f"at seq_len={seq_len}: its input layer has a fixed size. Only "
                "SparseTokenSelector accepts other lengths."
            )
