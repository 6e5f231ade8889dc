"""The estimators of q-sparse averaging (qSA): the two models with one query per position.

q-sparse averaging (Sanford, Hsu and Telgarsky, NeurIPS 2023) gives every
position i its own subset y_i and asks for the mean of the tokens in y_i at
every position. Its data contract differs from sparse token selection's (the
subsets as indices, one target row per position: see
:func:`~stsq_learn.make_sparse_averaging`), so it has sibling estimators
rather than a mode of the existing ones: a predict call on an STS row and on a
qSA row with q = 1 would otherwise look alike. Everything else is shared:
:class:`SparseTokenAverager` is the attention core of
:class:`~stsq_learn.SparseTokenSelector` (same hyperparameters, same W, the
same width-following training) on the task
:class:`~stsq_learn.SparseAveragingTask`, whose queries are one per position;
:class:`FCNAverager` the fully-connected core on it, with N outputs. A W fitted on either task
serves the other: :meth:`SparseTokenAverager.from_selector`.
"""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

from ..._docstrings import ATTRIBUTES, Substitution, fit_returns, online_fit, replace_once, section
from ..._validation import check_positive_int
from ...engine.cores import _AttentionCore, _FCNCore
from .. import SparseAveragingTask
from ..selection.estimators import FCNSelector, SparseTokenSelector

__all__ = ["FCNAverager", "SparseTokenAverager"]

_ROWS = """\
X : array-like of shape (n_samples, seq_len, n_features + n_selected)
    Tokens, then each position's subset as ``n_selected`` distinct integer
    indices in ``[0, seq_len)`` (stored as floats)."""

_TARGETS = """\
y : array-like of shape (n_samples, seq_len, n_features)
    The mean of the tokens of each position's subset."""

_QSA_ATTRIBUTES = replace_once(
    replace_once(
        replace_once(
            ATTRIBUTES,
            "(the last axis of ``X`` minus the indicator)",
            "(the last axis of ``y``)",
        ),
        "Sequence length T seen in fit.",
        "Number of positions N seen in fit.",
    ),
    "    loss_curve_ :",
    "    n_selected_ : int\n"
    "        Size q of the subsets seen in fit; :meth:`predict` reads rows of\n"
    "        ``n_features_in_ + n_selected_`` channels (another q could not be\n"
    "        told apart from another number of token features).\n"
    "    loss_curve_ :",
)


class _Averaging:
    """The q-sparse averaging task and its docstrings, for either core (mixed in left of it)."""

    _task = SparseAveragingTask

    @property
    def n_selected_(self):
        """Size q of the subsets seen in fit (the rows' channels beyond the tokens)."""
        check_is_fitted(self)
        return self.task_.n_selected

    @Substitution(rows=_ROWS, targets=_TARGETS, returns=fit_returns())
    def fit(self, X, y):
        """Fit the model to q-sparse averaging data with epochs of shuffled minibatches.

        The loss is the mean over rows and positions of ``||y_hat_i - y_i||^2``.

        Parameters
        ----------
        {rows}
        {targets}

        {returns}
        """
        return super().fit(X, y)

    def fit_online(self, task, n_steps="auto"):
        return super().fit_online(task, n_steps)

    fit_online.__doc__ = online_fit("SparseAveragingTask")

    @Substitution(rows=_ROWS)
    def predict(self, X):
        """Predict the mean of every position's subset.

        Parameters
        ----------
        {rows}

        Returns
        -------
        y_pred : ndarray of shape (n_samples, seq_len, n_features)
            One prediction per position, as float64 NumPy arrays.
        """
        return super().predict(X)

    @Substitution(rows=_ROWS, targets=_TARGETS)
    def score(self, X, y, sample_weight=None):
        """R^2 over every position's output, averaged over features.

        Every (row, position) pair counts as one sample of
        :func:`sklearn.metrics.r2_score`; on this task's law it equals
        1 - relative MSE.

        Parameters
        ----------
        {rows}
        {targets}
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights, given to each of a row's positions.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` with respect to ``y``.
        """
        return super().score(X, y, sample_weight)


@Substitution(parameters=section(SparseTokenSelector, "Parameters"), attributes=_QSA_ATTRIBUTES)
class SparseTokenAverager(_Averaging, _AttentionCore):
    """One-layer softmax attention for q-sparse averaging, one query per position.

    The model of :class:`SparseTokenSelector`, asked N questions at once:
    query i is ``[0 ; sum of p_j over position i's subset]`` and output i is
    the softmax-weighted average of the tokens for it. Each query is a
    sparse token selection over the same tokens and encodings, so the width
    the theory asks for is the same, O(d + q log N) (Sanford, Hsu and
    Telgarsky, 2023), the per-position error floor of an isotropic W is
    :func:`~stsq_learn.isotropic_floor` ``(N, q, width)``, and a W fitted on
    either task serves the other (:meth:`from_selector`).

    The hyperparameters are those of :class:`SparseTokenSelector`, with two
    differences: every encoding is drawn in every forward pass (each
    position is in some subset), so ``pe_sampling`` has no effect; and a
    step handles N queries per row, so a step costs about N times a
    selector's step at the same batch size; ``batch_size="auto"`` takes
    ``ceil(200 / seq_len)`` rows per step in :meth:`fit` (``ceil(256 /
    seq_len)`` in :meth:`fit_online`), as many queries as the selector's
    batch (4 rows at N = 64: 1.02x the floor at width 256, against 1.00x at
    16 rows in 1.6 times the time).

    Parameters
    ----------
    {parameters}

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
    planned_steps_ : int
        Optimiser steps the last fit was planned for.
    max_positions_ : int or None
        The codebook size of ``positional_encoding="randomized"``.

    See Also
    --------
    SparseTokenSelector : The one-query task's estimator.
    FCNAverager : The fully-connected baseline.
    make_sparse_averaging : The data.

    Examples
    --------
    >>> from stsq_learn import SparseTokenAverager, make_sparse_averaging
    >>> X, y = make_sparse_averaging(300, seq_len=16, n_features=4,
    ...                              n_selected=2, random_state=0)
    >>> model = SparseTokenAverager(width=32, random_state=0).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2, 16, 4)
    >>> model.score(X, y) > 0.9
    True
    """

    _first_format_version = 3  # model files hold it since format 3

    @classmethod
    def from_selector(cls, selector, n_selected):
        """A fitted averager with the W of a fitted :class:`SparseTokenSelector`.

        No training: each query of q-sparse averaging is a sparse token
        selection query, so the selector's W, encodings and prediction seed
        carry over as they are.

        Parameters
        ----------
        selector : SparseTokenSelector
            A fitted selector (not an averager).
        n_selected : int
            Size q of the subsets the averager will read (its ``n_selected_``).

        Returns
        -------
        averager : SparseTokenAverager
            With the selector's hyperparameters and fitted state.

        Examples
        --------
        >>> from stsq_learn import (
        ...     SparseTokenAverager, SparseTokenSelector,
        ...     make_sparse_averaging, make_sparse_token_selection)
        >>> X, y = make_sparse_token_selection(500, 16, 4, 2, random_state=0)
        >>> selector = SparseTokenSelector(width=32, random_state=0).fit(X, y)
        >>> X_avg, y_avg = make_sparse_averaging(100, 16, 4, 2, random_state=1)
        >>> SparseTokenAverager.from_selector(selector, 2).score(X_avg, y_avg) > 0.9
        True
        """
        if not isinstance(selector, SparseTokenSelector):
            raise TypeError(
                f"from_selector takes a fitted SparseTokenSelector, got {type(selector).__name__}."
            )
        check_is_fitted(selector)
        n_selected = check_positive_int(n_selected, "n_selected")
        averager = cls(**selector.get_params())
        state = selector.get_fitted_state()
        state["fitted"].update(n_selected=n_selected, y_1d=False)
        return averager.set_fitted_state(state, device=selector.device_)


@Substitution(parameters=section(FCNSelector, "Parameters"), attributes=_QSA_ATTRIBUTES)
class FCNAverager(_Averaging, _FCNCore):
    """Fully-connected baseline for q-sparse averaging.

    Each position contributes its token and its subset as an N-long 0/1
    indicator, so the flattened row has ``N (n_features + N)`` numbers; a
    ReLU layer of ``width`` units, optional further layers and a linear
    output give all ``N * n_features`` outputs. Sanford, Hsu and Telgarsky
    prove such a net needs first-layer width of about ``N d / 2``. It only
    accepts its training ``seq_len``.

    Parameters
    ----------
    {parameters}

    Attributes
    ----------
    {attributes}
    solver_ : str
        The solver the last fit ran.
    learning_rate_init_ : float
        The initial step size the last fit ran.
    planned_steps_ : int
        Optimiser steps the last fit was planned for.

    See Also
    --------
    SparseTokenAverager : The attention model.

    Examples
    --------
    >>> from stsq_learn import FCNAverager, make_sparse_averaging
    >>> X, y = make_sparse_averaging(300, seq_len=8, n_features=2,
    ...                              n_selected=2, random_state=0)
    >>> model = FCNAverager(width=64, max_iter=20, random_state=0).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2, 8, 2)
    """

    _first_format_version = 3  # model files hold it since format 3

    _attention_sibling = "SparseTokenAverager"
    _fixed_layers = "input and output layers have fixed sizes"
