"""The regressors' base: ``fit`` on real targets, ``predict``, R^2, and the squared error.

:class:`_Regressor` is the engine (:class:`~.base._BaseEstimator`) with
what real-valued targets add: the task's contract reads ``(X, y)``, the
loss is the squared error (:class:`~stsq_learn.nn.SquaredError`), the owned
net a :class:`skorch.NeuralNetRegressor`, predictions are the module's
outputs (1-D where ``y`` was), and ``score`` is the task's R^2.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNetRegressor

from .._docstrings import FIT_RAISES, Substitution
from .._validation import check_callbacks
from ..nn import SquaredError
from .base import _BaseEstimator


class _Regressor(RegressorMixin, _BaseEstimator):
    """``fit``, ``predict`` and ``score`` of the estimators whose targets are real numbers."""

    _criterion = SquaredError
    _net_class = NeuralNetRegressor

    def _zero_loss(self, task, y=None):
        """The loss of predicting 0: the mean squared norm of ``y``'s output rows, or the law's."""
        return task.trivial_mse if y is None else float(np.square(y).sum(axis=-1).mean())

    @Substitution(fit_raises=FIT_RAISES)
    def fit(self, X, y):
        """Fit the model to data with epochs of shuffled minibatches.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Tokens, then the selection indicator (0.0 or 1.0) in the last channel.
        y : array-like of shape (n_samples, n_features)
            Mean of the selected tokens of each row.

        Returns
        -------
        self : object
            The fitted estimator.

        {fit_raises}

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_`` and ``n_iter_`` describe the completed epochs (``t_``
        also counts the batches of an epoch cut short).
        """
        self._train(**self._fit_inputs(X, y))
        return self

    def _fit_inputs(self, X, y):
        """:meth:`fit`'s checks (hyperparameters, the data contract), then what it trains on.

        Returns the keyword arguments of ``_train``; nothing is trained or
        assigned.
        """
        self._validate_params()
        check_callbacks(self.callbacks)
        task, X, y_checked = self._task_class().from_data(X, y)
        y_1d = (y.ndim if hasattr(y, "ndim") else np.asarray(y).ndim) == 1
        return self._rows_inputs(task, X, y_checked, y_1d=y_1d)

    def predict(self, X):
        """Predict the mean of the selected tokens.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Sequences with the selection indicator in the last channel.

        Returns
        -------
        y_pred : ndarray of shape (n_samples, n_features)
            Predicted means, as float64 NumPy arrays whatever the device.
        """
        check_is_fitted(self)
        return self._predict_validated(self.task_.check_rows(X, type(self).__name__))

    def _predict_validated(self, X):
        """:meth:`predict` on an ``X`` that already passed the task's ``check_rows``."""
        y_pred = self._forward(X)
        return y_pred.ravel() if self._y_1d else y_pred

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the prediction, averaged over features.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features + 1)
            Sequences with the selection indicator in the last channel.
        y : array-like of shape (n_samples, n_features)
            True means of the selected tokens.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` with respect to ``y``; equals
            1 - relative MSE on this task.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        y = self.task_.check_targets(y, X)
        return self.task_.score(y, self._predict_validated(X), sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags
