"""The estimators of q-sparse token retrieval: multi-head attention and the fully-connected net.

q-sparse token retrieval (Mousavi-Hosseini, Sanford, Wu and Erdogdu, NeurIPS
2025) names q positions in a given order and asks for the named tokens side
by side (:class:`~stsq_learn.SparseRetrievalTask`). One attention head
averages tokens; retrieving q of them needs q heads, whose outputs a learned
linear readout puts in place. :class:`SparseTokenRetriever` is the attention
core of :class:`~stsq_learn.SparseTokenSelector` on this task (its query
holds the named positions' encodings in role order, one slot per role);
:class:`FCNRetriever` is the fully-connected core on it.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import ATTRIBUTES, Substitution, fit_returns, online_fit, replace_once, section
from ..._validation import check_positive_int
from ...engine.cores import _AttentionCore, _FCNCore
from ...metrics import _metric_values
from ..selection.estimators import FCNSelector, SparseTokenSelector
from .task import SparseRetrievalTask

__all__ = ["FCNRetriever", "SparseTokenRetriever", "relative_mse_per_role"]

_ROWS = """\
X : array-like of shape (n_samples, seq_len, n_features + 1)
    Tokens, then the role channel: 0.0 for a position no role names, j
    for the position of role j (each of roles 1..q exactly once a row)."""

_TARGETS = """\
y : array-like of shape (n_samples, n_selected * n_features)
    The named tokens side by side, in role order."""

_RETRIEVAL_ATTRIBUTES = replace_once(
    replace_once(ATTRIBUTES, "minus the indicator", "minus the role channel"),
    "    loss_curve_ :",
    "    n_selected_ : int\n"
    "        Number q of roles seen in fit (the outputs are q tokens).\n"
    "    task_ : SparseRetrievalTask\n"
    "        The data contract the model was fitted under, at its training length.\n"
    "    loss_curve_ :",
)


class _Retrieval:
    """The q-sparse token retrieval task and its docstrings, for either core."""

    _task = SparseRetrievalTask
    _first_format_version = 4  # model files hold it since format 4 (0.5)

    @property
    def n_selected_(self):
        """Number q of roles seen in fit."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        return self.task_.n_selected

    @Substitution(rows=_ROWS, targets=_TARGETS, returns=fit_returns())
    def fit(self, X, y):
        """Fit the model to q-sparse token retrieval data with epochs of shuffled minibatches.

        Parameters
        ----------
        {rows}
        {targets}

        {returns}
        """
        return super().fit(X, y)

    def fit_online(self, task, n_steps="auto"):
        return super().fit_online(task, n_steps)

    fit_online.__doc__ = online_fit("SparseRetrievalTask")

    @Substitution(rows=_ROWS)
    def predict(self, X):
        """Predict the named tokens, side by side in role order.

        Parameters
        ----------
        {rows}

        Returns
        -------
        y_pred : ndarray of shape (n_samples, n_selected * n_features)
            As float64 NumPy arrays.
        """
        return super().predict(X)

    @Substitution(rows=_ROWS, targets=_TARGETS)
    def score(self, X, y, sample_weight=None):
        """R^2 of the prediction, averaged over the ``n_selected * n_features`` outputs.

        Parameters
        ----------
        {rows}
        {targets}
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)``; 1 - relative MSE on this task's law.
        """
        return super().score(X, y, sample_weight)


@Substitution(
    parameters=section(SparseTokenSelector, "Parameters"), attributes=_RETRIEVAL_ATTRIBUTES
)
class SparseTokenRetriever(_Retrieval, _AttentionCore):
    """Multi-head softmax attention for q-sparse token retrieval.

    Head h has its own key-query matrix ``W_h`` of shape
    ``(d + m, q m)``; the query of a row holds the encodings of the named
    positions in role order, ``z = [p_{t_1} ; ... ; p_{t_q}]``; head h
    outputs ``o_h = sum_t softmax(p_t^T W_h z)_t x_t`` (plus a token part,
    as in :class:`~stsq_learn.SparseTokenSelector`), and a learned linear
    readout maps ``[o_1 ; ... ; o_H]`` to the ``q d`` outputs. A head that
    sets ``W_h = gamma [0 .. I .. 0]`` (the identity in role j's slot)
    retrieves role j, so ``n_heads >= q`` solves the task; with fewer heads
    the error stays at least ``1 - n_heads / q`` of the trivial one.

    The hyperparameters are those of
    :class:`~stsq_learn.SparseTokenSelector`. With ``solver="sgd"`` and
    ``learning_rate_init="auto"`` each head moves at the rate a one-token
    selection would (the loss of predicting 0 shared among the heads), and
    the readout at a fixed rate of its own.

    Parameters
    ----------
    {parameters}

    Attributes
    ----------
    {attributes}
    key_query_ : ndarray of shape (`n_features_in_` + width, n_selected * width)
        The learned W at one head; of shape (n_heads, ...) with several.
    key_queries_ : ndarray of shape (n_heads, `n_features_in_` + width, n_selected * width)
        Every head's W.
    readout_ : ndarray of shape (n_selected * `n_features_in_`, n_heads * `n_features_in_`)
        The learned linear output map of the heads.
    solver_ : str
        The solver the last fit ran.
    learning_rate_init_ : float
        The initial step size the last fit ran.
    token_block_rate_ : float or None
        The token rows' step as a multiple of ``learning_rate_init_``.
    planned_steps_ : int
        Optimiser steps the last fit was planned for.
    max_positions_ : int or None
        The codebook size of ``positional_encoding="randomized"``.

    See Also
    --------
    FCNRetriever : The fully-connected baseline.
    make_sparse_retrieval : The data.

    Examples
    --------
    >>> from stsq_learn import SparseTokenRetriever, make_sparse_retrieval
    >>> X, y = make_sparse_retrieval(1000, seq_len=6, n_features=2,
    ...                              n_selected=2, random_state=0)
    >>> model = SparseTokenRetriever(width=12, n_heads=2, batch_size=100,
    ...                              max_iter=20, random_state=0).fit(X, y)
    >>> model.predict(X[:3]).shape
    (3, 4)
    >>> model.score(X, y) > 0.8
    True
    """


@Substitution(parameters=section(FCNSelector, "Parameters"), attributes=_RETRIEVAL_ATTRIBUTES)
class FCNRetriever(_Retrieval, _FCNCore):
    """Fully-connected baseline for q-sparse token retrieval.

    Each position contributes its token and its role as a one-hot vector of
    q, so the flattened row has ``T (n_features + q)`` numbers; ReLU layers
    and a linear output give the ``q * n_features`` outputs. It only
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
    SparseTokenRetriever : The attention model.

    Examples
    --------
    >>> from stsq_learn import FCNRetriever, make_sparse_retrieval
    >>> X, y = make_sparse_retrieval(300, seq_len=8, n_features=2,
    ...                              n_selected=2, random_state=0)
    >>> model = FCNRetriever(width=64, max_iter=20, random_state=0).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2, 4)
    """

    _attention_sibling = "SparseTokenRetriever"


def relative_mse_per_role(y_true, y_pred, *, n_selected):
    """The relative MSE of each role's retrieved token: where the heads went.

    With H < q heads the theory's bound, ``1 - H / q`` of the trivial
    error, is met when H roles are retrieved (error near 0) and the others
    are not (error near 1).

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_selected * n_features)
        The named tokens side by side.
    y_pred : array-like with as many values
        Predictions.
    n_selected : int
        Number q of roles, >= 1.

    Returns
    -------
    errors : ndarray of shape (n_selected,)
        ``sum_i ||y_hat_ij - y_ij||^2 / sum_i ||y_ij||^2`` for each role j.

    Raises
    ------
    TypeError
        If ``n_selected`` is not an integer (a boolean or a float such as
        2.0 included), or an array does not hold real numbers.
    ValueError
        If ``n_selected < 1``; an array is empty or holds a NaN or infinity;
        ``y_true`` is not 2-D with ``n_selected`` blocks of features, or
        ``y_pred`` has another number of values; or every target of a role is
        zero (its ratio is undefined).

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn.retrieval import relative_mse_per_role
    >>> y = np.array([[1.0, 2.0], [3.0, -1.0]])
    >>> y_pred = np.array([[1.0, 0.0], [3.0, 0.0]])
    >>> relative_mse_per_role(y, y_pred, n_selected=2)
    array([0., 1.])
    """
    n_selected = check_positive_int(n_selected, "n_selected")
    y_true = _metric_values(y_true, "y_true", "(n_samples, n_selected * n_features)")
    y_pred = _metric_values(y_pred, "y_pred", "of y_true's number of values", rows=False)
    n = len(y_true)
    if y_pred.size != y_true.size or y_true.ndim != 2 or y_true.shape[1] % n_selected:
        raise ValueError(
            f"y_true must have shape (n_samples, n_selected * n_features) with n_selected="
            f"{n_selected}, and y_pred as many values; got {y_true.shape} and {y_pred.shape}."
        )
    y_true = y_true.reshape(n, n_selected, -1)
    err = np.square(y_pred.reshape(y_true.shape) - y_true).sum(axis=(0, 2))
    norm = np.square(y_true).sum(axis=(0, 2))
    zero = np.flatnonzero(norm == 0)
    if zero.size:
        raise ValueError(
            f"The relative MSE of role {int(zero[0]) + 1} is undefined: every target of that "
            f"role (y_true[:, {zero[0] * y_true.shape[2]}:{(zero[0] + 1) * y_true.shape[2]}]) "
            "is zero."
        )
    return err / norm
