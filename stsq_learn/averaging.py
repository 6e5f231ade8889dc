"""The estimators of q-sparse averaging (qSA): the two models with one query per position.

q-sparse averaging (Sanford, Hsu and Telgarsky, NeurIPS 2023) gives every
position i its own subset y_i and asks for the mean of the tokens in y_i at
every position. Its data contract differs from sparse token selection's (the
subsets as indices, one target row per position: see
:func:`~stsq_learn.make_sparse_averaging`), so it has sibling estimators
rather than a mode of the existing ones: a predict call on an STS row and on a
qSA row with q = 1 would otherwise look alike. Everything else is shared:
:class:`SparseTokenAverager` is a :class:`~stsq_learn.SparseTokenSelector`
(same hyperparameters, same W, the same width-following training) whose
module asks N queries; :class:`FCNAverager` is an
:class:`~stsq_learn.FCNSelector` with N outputs. A W fitted on either task
serves the other: :meth:`SparseTokenAverager.from_selector`.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_is_fitted

from ._docstrings import ATTRIBUTES, FIT_RAISES, Substitution, section
from ._validation import (
    check_averaging_data,
    check_averaging_rows,
    check_averaging_targets,
    check_positive_int,
    position_weights,
)
from .datasets import SparseAveragingTask
from .estimators import FCNSelector, SparseTokenSelector
from .nn import AttentionAverager, FullyConnectedAverager

__all__ = ["FCNAverager", "SparseTokenAverager"]

_ROWS = """\
X : array-like of shape (n_samples, seq_len, n_features + n_selected)
    Tokens, then each position's subset as ``n_selected`` distinct integer
    indices in ``[0, seq_len)`` (stored as floats)."""

_TARGETS = """\
y : array-like of shape (n_samples, seq_len, n_features)
    The mean of the tokens of each position's subset."""

_QSA_ATTRIBUTES = (
    ATTRIBUTES.replace("(the last axis of ``X`` minus the indicator)", "(the last axis of ``y``)")
    .replace("Sequence length T seen in fit.", "Number of positions N seen in fit.")
    .replace(
        "    loss_curve_ :",
        "    n_selected_ : int\n"
        "        Size q of the subsets seen in fit; :meth:`predict` reads rows of\n"
        "        ``n_features_in_ + n_selected_`` channels (another q could not be\n"
        "        told apart from another number of token features).\n"
        "    loss_curve_ :",
    )
)


class _Averaging:
    """The qSA data contract, for either model (mixed in left of the STS estimator)."""

    _task_class = SparseAveragingTask

    def _check_fit_data(self, X, y):
        X, y = check_averaging_data(X, y)
        return X, y, y.shape[2], False

    def _check_rows(self, X):
        X = check_averaging_rows(X, self.n_features_in_)
        expected = self.n_features_in_ + self.n_selected_
        if X.shape[2] != expected:
            raise ValueError(
                f"X has {X.shape[2]} channels per position, but {type(self).__name__} was "
                f"fitted on tokens of n_features={self.n_features_in_} with subsets of "
                f"n_selected={self.n_selected_}: {expected} channels."
            )
        return X

    def _largest_subset(self, X):
        return self.n_selected_

    def _set_task_state(self, n_selected):
        if n_selected is None:
            raise ValueError("the fitted state of an averager must record n_selected.")
        self.n_selected_ = n_selected

    @Substitution(rows=_ROWS, targets=_TARGETS, fit_raises=FIT_RAISES)
    def fit(self, X, y):
        """Fit the model to q-sparse averaging data with epochs of shuffled minibatches.

        The loss is the mean over rows and positions of ``||y_hat_i - y_i||^2``.

        Parameters
        ----------
        {rows}
        {targets}

        Returns
        -------
        self : object
            The fitted estimator.

        {fit_raises}
        """
        super().fit(X, y)
        self.n_selected_ = np.shape(X)[2] - self.n_features_in_  # X passed the checks
        return self

    @Substitution(fit_raises=FIT_RAISES)
    def fit_online(self, task, n_steps="auto"):
        """Fit on a fresh batch drawn from ``task`` at every step.

        Batches of ``batch_size`` rows are drawn on the training device;
        there are no epochs and no early stopping.

        Parameters
        ----------
        task : SparseAveragingTask
            The law to draw training batches from.
        n_steps : int or "auto", default="auto"
            Number of optimisation steps; ``"auto"``: the planned steps of
            the model's default recipe.

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the loss of every step.

        {fit_raises}
        """
        super().fit_online(task, n_steps)
        self.n_selected_ = task.n_selected
        return self

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
        check_is_fitted(self)
        X = self._check_rows(X)
        y = check_averaging_targets(y)
        if y.shape != (*X.shape[:2], self.n_features_in_):
            raise ValueError(
                f"y must have shape (n_samples, seq_len, n_features) = "
                f"{(*X.shape[:2], self.n_features_in_)} to match X, got shape {y.shape}."
            )
        y_pred = self._predict_validated(X)
        n, N, d = y.shape
        weights = position_weights(sample_weight, n, N)
        return float(r2_score(y.reshape(n * N, d), y_pred.reshape(n * N, d), sample_weight=weights))


@Substitution(parameters=section(SparseTokenSelector, "Parameters"), attributes=_QSA_ATTRIBUTES)
class SparseTokenAverager(_Averaging, SparseTokenSelector):
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

    def _make_module(self, seq_len, n_features, seed):
        return AttentionAverager(
            n_features,
            self.width,
            self.positional_encoding,
            seq_len,
            encoding_seed=seed,
            learn_token_block=self.learn_token_block,
            max_positions=self._family(seq_len).max_length,
        )

    def _auto_batch_size(self, seq_len, *, online):
        # A row holds seq_len queries: as many queries per step as the selector's batch.
        return -(-super()._auto_batch_size(seq_len, online=online) // seq_len)

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
        >>> from stsq_learn import (SparseTokenAverager, SparseTokenSelector,
        ...                         make_sparse_averaging, make_sparse_token_selection)
        >>> X, y = make_sparse_token_selection(500, 16, 4, 2, random_state=0)
        >>> selector = SparseTokenSelector(width=32, random_state=0).fit(X, y)
        >>> X_avg, y_avg = make_sparse_averaging(100, 16, 4, 2, random_state=1)
        >>> SparseTokenAverager.from_selector(selector, 2).score(X_avg, y_avg) > 0.9
        True
        """
        if not isinstance(selector, SparseTokenSelector) or isinstance(selector, _Averaging):
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
class FCNAverager(_Averaging, FCNSelector):
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

    def _make_module(self, seq_len, n_features, seed):
        return FullyConnectedAverager(
            seq_len, n_features, self.width, tuple(self.extra_hidden_layers)
        )

    def _check_predict_seq_len(self, seq_len):
        if seq_len != self.seq_len_:
            raise ValueError(
                f"FCNAverager was fitted on seq_len={self.seq_len_} and cannot predict at "
                f"seq_len={seq_len}: its input and output layers have fixed sizes. Only "
                "SparseTokenAverager accepts other lengths."
            )
