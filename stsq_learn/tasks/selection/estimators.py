"""The public estimators: thin classes over the shared training loop."""

from __future__ import annotations

from ..._docstrings import (
    ATTRIBUTES,
    SOLVER,
    STOPPING,
    STOPPING_PLANNED,
    TRAINING,
    Substitution,
    schedule,
)
from ...engine.cores import _AttentionCore, _FCNCore
from .. import SparseTokenSelectionTask

__all__ = ["FCNSelector", "SparseTokenSelector"]


@Substitution(
    schedule=schedule("cooldown"),
    stopping=STOPPING_PLANNED,
    training=TRAINING,
    attributes=ATTRIBUTES,
)
class SparseTokenSelector(_AttentionCore):
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
    n_heads : int, default=1
        Number of attention heads, each with its own key-query matrix over
        the same encodings. 1 is the paper's model; with more, a learned
        linear readout (initialised to the heads' average) combines their
        outputs. Q-sparse token retrieval
        (:class:`~stsq_learn.SparseTokenRetriever`) needs one head per
        role; a task whose output is one average gains nothing from more.
    length_scale : {"log", "floor"} or None, default=None
        Multiply every score of a row of length T' by a factor of T'
        relative to the training length T (for a model trained over a
        range of lengths, the longest), so that the sharpness W learned at
        T is the one T' asks for (:mod:`stsq_learn.length_scale`). None is
        the paper's model. ``"log"``: ``log T' / log T`` (Chiang and
        Cholak, 2022; Nakanishi's Scalable-Softmax, 2025). ``"floor"``:
        ``gamma*(T') / gamma*(T)``, the isotropic floor's best gammas for
        the row's q and the width, computed once per length and cached
        (about a second per new length; sparse token selection and q-sparse
        averaging only). Trained at one length and scaled at predict time,
        a model with stochastic encodings stays within 1.04 (``"floor"``)
        and 1.11 (``"log"``) times the floor up to 32 times its training
        length (the user guide's "Length shift"). Can be changed after
        fitting, and then applies to predictions.
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
        The learned W: token rows, then positional rows. With several heads,
        of shape (n_heads, `n_features_in_` + width, width).
    key_queries_ : ndarray of shape (n_heads, `n_features_in_` + width, width)
        Every head's W.
    readout_ : ndarray of shape (`n_features_in_`, n_heads * `n_features_in_`) or None
        The learned linear map from the heads' outputs to the prediction;
        None with one head (the paper's model, whose output is the average).
    task_ : SparseTokenSelectionTask
        The data contract the model was fitted under, at its training length
        (any subset size, ``n_selected=(1, seq_len_)``).
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
    >>> X_long, y_long = make_sparse_token_selection(
    ...     200, seq_len=32, n_features=8, n_selected=3, random_state=1)
    >>> model.score(X_long, y_long) > 0.5
    True
    """

    _first_format_version = 1  # model files hold it since format 1

    _task = SparseTokenSelectionTask


@Substitution(
    solver=SOLVER,
    schedule=schedule("auto"),
    stopping=STOPPING,
    training=TRAINING,
    attributes=ATTRIBUTES,
)
class FCNSelector(_FCNCore):
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
    learning_rate_init : float or "auto", default="auto"
        Initial step size of the optimiser. A number is used as it is (at a
        constant rate unless ``learning_rate`` says otherwise, as in 0.6).
        ``"auto"``, resolved in :meth:`fit` as ``learning_rate_init_``: with
        Adam, ``1.2 / n_inputs * sqrt(256 / width) * sqrt(min(1, 8 /
        n_outputs)) * (planned_steps / 600) ** 0.3``, at most 0.05, where
        ``n_inputs`` and ``n_outputs`` are the sizes of the net's input and
        output layers and ``planned_steps`` the ``n_steps`` of
        :meth:`fit_online` (run with the ``"cooldown"`` schedule) and 600 in
        :meth:`fit` (whose epochs end where the loss stalls; run with the
        ``"adaptive"`` schedule): a sweep of step sizes chose it, for every
        fully-connected estimator at several lengths and budgets (the user
        guide's "The baselines' defaults"). With ``solver="sgd"``, 0.001.
    {schedule}
    {stopping}
    {training}

    Attributes
    ----------
    {attributes}
    solver_ : str
        The solver the last fit ran.
    learning_rate_init_ : float
        The initial step size the last fit ran (``"auto"`` resolved).
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

    _first_format_version = 1  # model files hold it since format 1

    _task = SparseTokenSelectionTask
    _attention_sibling = "SparseTokenSelector"
