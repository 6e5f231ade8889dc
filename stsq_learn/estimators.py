"""The public estimators: thin classes over the shared training loop."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _rates
from ._base import _BaseSelector
from ._docstrings import (
    ATTRIBUTES,
    SOLVER,
    STOPPING,
    STOPPING_PLANNED,
    TRAINING,
    Substitution,
    schedule,
)
from ._validation import check_positive_int
from .encodings import POSITIONAL_ENCODINGS, encoding_family
from .nn import AttentionSelector, FullyConnected

__all__ = ["FCNSelector", "SparseTokenSelector"]


@Substitution(
    schedule=schedule("cooldown"),
    stopping=STOPPING_PLANNED,
    training=TRAINING,
    attributes=ATTRIBUTES,
)
class SparseTokenSelector(_BaseSelector):
    """One-layer softmax-attention regressor for sparse token selection.

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
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}, \
            default="stochastic"
        Where the positional encodings come from (see the user guide's
        section on choosing an encoding):

        - ``"stochastic"``: fresh encodings, uniform on the unit sphere, for
          every row at every training step (the paper's stochastic
          positional encodings); they generalize to longer sequences.
        - ``"fixed"``: one random vector per position, the same for every
          row; fits in distribution but does not generalize to longer
          sequences.
        - ``"randomized"``: a codebook of ``max_positions`` fixed random
          vectors; each row takes the vectors of a sorted random subset of
          the codebook's positions, redrawn at every step and at predict
          time (Ruoss et al., ACL 2023). ``max_positions`` equal to the
          training length is ``"fixed"``; a growing codebook approaches
          ``"stochastic"``.
        - ``"sinusoidal"``: the deterministic sine/cosine encodings of
          Vaswani et al. (2017), scaled to unit norm.
    max_positions : int or None, default=None
        Codebook size of ``positional_encoding="randomized"`` (ignored by
        the other families); None is 4 times the training ``seq_len``.
        Training or predicting at a length above it raises ``ValueError``.
    pe_sampling : {"marginal", "full"}, default="marginal"
        How stochastic encodings are drawn (ignored by the other families).
        ``"full"`` draws all ``seq_len`` vectors of every row;
        ``"marginal"`` draws only the selected positions' vectors and, for
        every other position, the one number its score needs, which has
        exactly the same law. Predictions have the same distribution; the
        training gradient is unbiased with lower variance; a step costs no
        ``seq_len * width`` term (many times faster at long lengths).
        Choose ``"full"`` to study the exact per-draw gradient noise. Can be
        changed after fitting, and then applies to predictions.
    n_pe_samples : int, default=1
        Number of encoding draws the attention is averaged over at predict
        time (the drawn families, stochastic and randomized; ignored by
        fixed and sinusoidal encodings). 1 is the paper; more cuts the error
        at fixed width. Can be changed after fitting.
    n_pe_samples_fit : int, default=1
        Number of encoding draws the attention is averaged over in every
        training forward pass (stochastic and randomized encodings; each
        step costs about that many times more). A W trained on one draw settles at the
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
    solver : {"auto", "sgd", "adam"}, default="auto"
        Optimiser. ``"auto"`` is ``"sgd"``: plain gradient descent on
        minibatches, as in the paper's theory, with step sizes that follow
        the width (``learning_rate_init="auto"``); ``momentum`` adds
        momentum. ``"adam"``: Adam, whose per-entry steps move all
        ``width**2`` entries of W alike, so that at large widths the error
        stays well above the width's floor (the user guide's "Step sizes
        that follow the width"). Resolved in :meth:`fit`: ``solver_``.
    learning_rate_init : float or "auto", default="auto"
        Initial step size. A number is used as it is (plain steps of W in
        every direction). ``"auto"``, resolved in :meth:`fit` as
        ``learning_rate_init_``: with SGD, ``c * width / L0``, where ``L0``
        is the training loss of predicting 0 (``n_features / q`` on this
        task's law) and ``c = min(c_gamma, 0.8 / sqrt(width))``, so that the
        noise of the ``width**2 - 1`` directions of W other than the
        identity, which decides how close to the floor a run ends at large
        widths, stays in bounds; the step's component along the identity
        moves gamma, the sharpness of the attention, at its own
        ``c_gamma = min(1/8, 120 / planned steps)`` (``c_gamma / c`` times
        as far), alike at every width. With Adam, 0.01. The planned steps
        (``max_iter="auto"``, ``fit_online(n_steps="auto")``) are 960, the
        gamma-distance 120 at ``c_gamma = 1/8``, at every width.
    token_block_rate : float or "auto", default="auto"
        Step of W's token rows as a multiple of the step of its positional
        rows (``learning_rate_init``). ``"auto"`` is ``1 / width`` with
        SGD (a token row moves the scores ``width`` times more per unit of
        step than a positional row) and 1 with Adam. Ignored when
        ``learn_token_block=False``. Resolved in :meth:`fit`:
        ``token_block_rate_``.
    {schedule}
    {stopping}
    {training}

    Attributes
    ----------
    {attributes}
    key_query_ : ndarray of shape (`n_features_in_` + width, width)
        The learned W: token rows, then positional rows.
    solver_ : str
        The solver the last fit ran (``"sgd"`` or ``"adam"``).
    learning_rate_init_ : float
        The initial step size the last fit ran (``"auto"`` resolved).
    token_block_rate_ : float or None
        The token rows' step as a multiple of ``learning_rate_init_``
        (None when ``learn_token_block=False``).
    planned_steps_ : int or None
        Optimiser steps the last fit was planned for (the length of its
        schedule); None for models loaded from files of stsq-learn 0.3 or
        earlier, which did not record it.
    max_positions_ : int or None
        The codebook size of ``positional_encoding="randomized"``, None for
        the other families.

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
        callbacks=None,
    ):
        self.width = width
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
        self.callbacks = callbacks

    def _codebook_size(self, seq_len):
        return 4 * seq_len if self.max_positions is None else self.max_positions

    def _family(self, seq_len, seed=0):
        """The encoding family these hyperparameters give at training length ``seq_len``."""
        family = encoding_family(self.positional_encoding)
        return family(self.width, seed, max_positions=self._codebook_size(seq_len))

    def _make_module(self, seq_len, n_features, seed):
        return AttentionSelector(
            n_features,
            self.width,
            self.positional_encoding,
            seq_len,
            encoding_seed=seed,
            learn_token_block=self.learn_token_block,
            max_positions=self._family(seq_len).max_length,
        )

    def _check_train_seq_len(self, seq_len):
        self._family(seq_len).check_length(seq_len)

    def _check_predict_seq_len(self, seq_len):
        self.net_.module_.encoding.check_length(seq_len)

    def _auto_steps(self):
        return _rates.auto_steps()

    def _resolve_optimiser(self, zero_loss, planned_steps):
        solver = "sgd" if self.solver == "auto" else self.solver
        rate, identity_rate = self.learning_rate_init, 1.0
        if rate == "auto":
            if solver == "sgd":
                rate, identity_rate = _rates.sgd_rates(self.width, zero_loss, planned_steps)
            else:
                rate = _rates.ADAM_RATE
        token_rate = self.token_block_rate
        if token_rate == "auto":
            token_rate = 1.0 / self.width if solver == "sgd" else 1.0
        token_rate = float(token_rate) if self.learn_token_block else None
        return solver, float(rate), token_rate, identity_rate

    @property
    def token_block_rate_(self):
        """Step of W's token rows as a multiple of ``learning_rate_init_`` (None if frozen)."""
        check_is_fitted(self)
        return self._token_block_rate

    def _forward_kwargs(self):
        return {
            "n_pe_samples": check_positive_int(self.n_pe_samples, "n_pe_samples"),
            "pe_sampling": self._checked_pe_sampling(),
        }

    def _fit_forward_kwargs(self):
        return {"n_pe_samples": self.n_pe_samples_fit, "pe_sampling": self.pe_sampling}

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
        """The learned W as an ndarray of shape (`n_features_in_` + width, width)."""
        check_is_fitted(self)
        return self.net_.module_.key_query.detach().cpu().numpy().copy()


@Substitution(
    solver=SOLVER,
    schedule=schedule("constant"),
    stopping=STOPPING,
    training=TRAINING,
    attributes=ATTRIBUTES,
)
class FCNSelector(_BaseSelector):
    """Fully-connected baseline for sparse token selection.

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
    {solver}
    learning_rate_init : float, default=0.001
        Initial step size of the optimiser.
    {schedule}
    {stopping}
    {training}

    Attributes
    ----------
    {attributes}
    solver_ : str
        The solver the last fit ran.
    learning_rate_init_ : float
        The initial step size the last fit ran.
    planned_steps_ : int or None
        Optimiser steps the last fit was planned for; None for models loaded
        from files of stsq-learn 0.3 or earlier.

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
        self.callbacks = callbacks

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
