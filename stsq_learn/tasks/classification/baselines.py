"""The linear baselines of sparse-token classification: logistic regression after a transformer.

The baselines are scikit-learn's :class:`~sklearn.linear_model.LogisticRegression`
after a transformer of this module: :class:`FlattenTokens` (the vectorized
classifier, :func:`make_flat_logistic`) or :class:`MeanPoolTokens` (the
pooled one, :func:`make_pooled_logistic`).
"""

from __future__ import annotations

from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from .task import as_tokens

__all__ = ["FlattenTokens", "MeanPoolTokens", "make_flat_logistic", "make_pooled_logistic"]


# -- the linear baselines: scikit-learn's logistic regression after a transformer --------
class _TokenTransformer(TransformerMixin, BaseEstimator):
    """A stateless transformer of 3-D rows of tokens (validation and tags)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        tags.requires_fit = False
        return tags

    def set_output(self, *, transform=None):
        """Choose the container :meth:`transform` returns (scikit-learn's set_output API).

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default=None
            ``"default"``: a NumPy array; ``"pandas"`` or ``"polars"``: a
            data frame of the same numbers; None leaves the choice unchanged.

        Returns
        -------
        self : object
            The transformer.
        """
        return super().set_output(transform=transform)

    def fit(self, X, y=None):
        """Record the token dimension (no parameters are learned).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The transformer, with ``n_features_in_`` and ``seq_len_`` set.
        """
        X = as_tokens(X)
        self.n_features_in_ = X.shape[2]
        self.seq_len_ = X.shape[1]
        return self

    def _checked(self, X):
        X = as_tokens(X)
        d = getattr(self, "n_features_in_", None)
        if d is not None and X.shape[2] != d:
            raise ValueError(
                f"X has {X.shape[2]} token features per token, but {type(self).__name__} was "
                f"fitted with n_features={d}."
            )
        return X


class FlattenTokens(_TokenTransformer):
    """Flatten each row of ``L`` tokens to one vector of ``L d`` numbers.

    Before :class:`~sklearn.linear_model.LogisticRegression` it gives the
    vectorized linear classifier of sparse-token classification. The
    flattened length depends on ``L``: the pipeline predicts at the fitted
    length only.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import FlattenTokens
    >>> FlattenTokens().fit_transform(np.zeros((3, 4, 2))).shape
    (3, 8)
    """

    def transform(self, X):
        """Flatten the rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.

        Returns
        -------
        ndarray of shape (n_samples, seq_len * n_features)
            Each row's tokens one after another.
        """
        X = self._checked(X)
        L = getattr(self, "seq_len_", None)
        if L is not None and X.shape[1] != L:
            raise ValueError(
                f"X has rows of {X.shape[1]} tokens, but FlattenTokens was fitted on rows of "
                f"seq_len={L}: a flattened row has a fixed length. Use MeanPoolTokens (or "
                "SparseTokenClassifier) for rows of other lengths."
            )
        return X.reshape(len(X), -1)


class MeanPoolTokens(_TokenTransformer):
    """Average each row's tokens: ``(1 / L) sum_l x_l``, one vector of ``d`` numbers.

    Before :class:`~sklearn.linear_model.LogisticRegression` it gives the
    pooled linear classifier (signal ``R theta / L`` against noise
    ``sqrt(d / L)``); it reads rows of any length.

    Examples
    --------
    >>> import numpy as np
    >>> from stsq_learn import MeanPoolTokens
    >>> MeanPoolTokens().fit_transform(np.ones((3, 4, 2))).tolist()
    [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    """

    def transform(self, X):
        """Average the tokens of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Each row's mean token.
        """
        return self._checked(X).mean(axis=1)


def make_flat_logistic(**logistic_params):
    """The vectorized linear baseline: :class:`FlattenTokens` then ``LogisticRegression``.

    Parameters
    ----------
    **logistic_params
        Passed to :class:`~sklearn.linear_model.LogisticRegression`
        (e.g. ``C``, ``max_iter``).

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``flattentokens`` and ``logisticregression``.

    Examples
    --------
    >>> from stsq_learn import make_flat_logistic
    >>> from stsq_learn import make_sparse_token_classification
    >>> X, y = make_sparse_token_classification(
    ...     200, 8, 4, signal=4.0, random_state=0)
    >>> make_flat_logistic(C=1.0).fit(X, y).predict(X[:3]).shape
    (3,)
    """
    return make_pipeline(FlattenTokens(), LogisticRegression(**logistic_params))


def make_pooled_logistic(**logistic_params):
    """The pooled linear baseline: :class:`MeanPoolTokens` then ``LogisticRegression``.

    Parameters
    ----------
    **logistic_params
        Passed to :class:`~sklearn.linear_model.LogisticRegression`.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``meanpooltokens`` and ``logisticregression``.

    Examples
    --------
    >>> from stsq_learn import make_pooled_logistic
    >>> from stsq_learn import make_sparse_token_classification
    >>> X, y = make_sparse_token_classification(
    ...     200, 8, 4, signal=4.0, random_state=0)
    >>> make_pooled_logistic().fit(X, y).predict_proba(X[:3]).shape
    (3, 2)
    """
    return make_pipeline(MeanPoolTokens(), LogisticRegression(**logistic_params))
