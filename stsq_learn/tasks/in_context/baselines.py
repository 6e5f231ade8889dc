"""The baselines of in-context regression: estimators that solve each prompt on its own.

A user compares the trained layer (:class:`~stsq_learn.LinearAttentionRegressor`)
with what reads each prompt directly, on the same ``X``:

- :class:`PromptRidge`: least squares on the prompt's examples (the
  minimum-norm solution at ``alpha=0``, ridge otherwise), evaluated at the
  query. Nothing is learned across prompts: ``fit`` only checks the data.
- :class:`PromptGradientStep`: one gradient step from 0 on the prompt's
  least-squares loss, ``y_hat = eta x_q^T (1/M) sum_i y_i x_i``, with a
  given step or the step that fits the training prompts best (step 1 is
  averaging).

Both are batched NumPy over the prompts (a few million numbers at a time),
with no loop over prompts. The package's other models: the fully-connected
:class:`~stsq_learn.FCNRegressor` reads the flattened prompt at its
training length (``FCNRegressor(task="in_context")``); the softmax
:class:`~stsq_learn.AttentionRegressor` does not apply (its queries are
positions marked in a row, and a prompt marks none).
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..._docstrings import Substitution
from ...engine.params import AtomicSetParams, refuse_booleans
from ...engine.state import _is_number, check_fitted_state, rebuild_task, size_check
from .task import InContextRegressionTask, least_squares

__all__ = ["PromptGradientStep", "PromptRidge"]

_CHUNK = 1 << 22  # numbers of X a batched solve holds at once (32 MiB in float64)

_ATTRIBUTES = """\
task_ : InContextRegressionTask
    The data contract (the sizes of the prompts seen in fit).
n_features_in_ : int
    Dimension d of the covariates.
seq_len_ : int
    Tokens per prompt seen in fit, ``n_examples + 1``."""


class _PromptBaseline(AtomicSetParams, RegressorMixin, BaseEstimator):
    """``fit`` / ``predict`` / ``score`` / fitted state of the per-prompt baselines.

    A subclass gives ``_fit_prompts(X, y)`` (its fitted values, a dict),
    ``_predict_prompts(X)`` and ``_FITTED`` (the schema of those values in a
    model file).
    """

    _FITTED: dict = {}

    def _validate_params(self):
        super()._validate_params()
        refuse_booleans(self)
        for name, value in self.get_params(deep=False).items():
            if isinstance(value, Real) and not math.isfinite(value):
                raise ValueError(
                    f"The {name!r} parameter of {type(self).__name__} must be finite, "
                    f"got {value!r}."
                )

    def fit(self, X, y):
        """Check the prompts (and, where the model has one, fit its step).

        Parameters
        ----------
        X : array-like of shape (n_prompts, n_examples + 1, n_features + 1)
            Prompts: ``n_examples`` tokens ``[x_i; y_i]``, then the query ``[x_q; 0]``.
        y : array-like of shape (n_prompts,)
            The queries' labels.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or prompts the data contract refuses,
            before any work. A failed call leaves the model as it was.
        """
        self._validate_params()
        task, X, y = InContextRegressionTask.from_data(X, y)
        fitted = self._fit_prompts(_contiguous(X), y)
        for key, value in fitted.items():
            setattr(self, key, value)
        self.task_ = task
        self.n_features_in_ = task.n_features
        self.seq_len_ = task.seq_len
        return self

    def predict(self, X):
        """Predict the query's label of every prompt, at any number of examples.

        Parameters
        ----------
        X : array-like of shape (n_prompts, n_examples + 1, n_features + 1)
            Prompts of ``n_features_in_`` covariates.

        Returns
        -------
        y_pred : ndarray of shape (n_prompts,)
            The predicted labels, as float64.
        """
        check_is_fitted(self)
        return self._predict_prompts(_contiguous(self.task_.check_rows(X, type(self).__name__)))

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of the prediction.

        Parameters
        ----------
        X : array-like of shape (n_prompts, n_examples + 1, n_features + 1)
            Prompts.
        y : array-like of shape (n_prompts,)
            The queries' labels.
        sample_weight : array-like of shape (n_prompts,), default=None
            Prompt weights.

        Returns
        -------
        float
            R^2 of ``self.predict(X)`` with respect to ``y``.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        y = self.task_.check_targets(y, X)
        return self.task_.score(y, self._predict_prompts(_contiguous(X)), sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        tags.requires_fit = True
        return tags

    @staticmethod
    def _chunks(X):
        """Slices of ``X``'s prompts, a few million numbers each."""
        rows = max(1, _CHUNK // max(1, X[0].size))
        return (slice(i, i + rows) for i in range(0, len(X), rows))

    # -- fitted state --------------------------------------------------------------------
    def get_fitted_state(self):
        """The fitted state as plain values (what :func:`~stsq_learn.save_model` writes).

        Returns
        -------
        state : dict
            ``"fitted"``: the sizes and fitted values (JSON types);
            ``"history"``: an empty list; ``"weights"``: an empty dict.
        """
        check_is_fitted(self)
        fitted = {"n_features_in_": int(self.n_features_in_), "seq_len_": int(self.seq_len_)}
        fitted.update({key: float(getattr(self, key)) for key in self._FITTED})
        return {"fitted": fitted, "history": [], "weights": {}}

    def set_fitted_state(self, state, *, device=None):
        """Make this estimator the fitted model described by ``state`` (:func:`load_model`).

        Parameters
        ----------
        state : dict
            As returned by :meth:`get_fitted_state`.
        device : str, torch.device or None, default=None
            Unused: the baselines compute with NumPy.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If a hyperparameter is invalid or ``state`` is incomplete,
            ill-typed or holds weights; nothing is assigned then.
        """
        try:
            self._validate_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid hyperparameter: {exc}") from None
        schema = {"n_features_in_": size_check(1), "seq_len_": size_check(1), **self._FITTED}
        check_fitted_state(state, schema, known=())
        if state["weights"] or state["history"]:
            raise ValueError(f"a {type(self).__name__} holds no weights and no history.")
        fitted = state["fitted"]
        sizes = {k: fitted[k] for k in ("seq_len_", "n_features_in_")}
        task = rebuild_task(lambda: InContextRegressionTask(*sizes.values()), sizes)
        self.task_ = task
        for key in self._FITTED:
            setattr(self, key, float(fitted[key]))
        self.n_features_in_, self.seq_len_ = fitted["n_features_in_"], fitted["seq_len_"]
        return self


def _contiguous(X):
    """Checked prompts as C-contiguous float64: the memory layout never changes a result."""
    return np.ascontiguousarray(X, dtype=np.float64)


def _finite_number(value):
    return _is_number(value) and math.isfinite(value)


@Substitution(attributes=_ATTRIBUTES)
class PromptRidge(_PromptBaseline):
    """Least squares on each prompt's examples, evaluated at its query.

    For a prompt of examples ``(x_i, y_i)``, ``i = 1..M``, the weights
    ``w_hat = argmin ||y - X w||^2 + alpha ||w||^2`` (the minimum-norm
    least-squares solution at ``alpha=0``), and the prediction
    ``<w_hat, x_q>``. Nothing is shared across prompts: :meth:`fit` checks
    the data and learns nothing. Without label noise and with ``M >= d``
    examples it recovers every prompt's ``w`` exactly (error 0); with
    label noise of variance ``sigma^2`` and ``w ~ N(0, I)``,
    ``alpha = sigma^2`` is the Bayes posterior mean.

    Parameters
    ----------
    alpha : float, default=0.0
        The ridge penalty (>= 0); 0 is minimum-norm least squares.

    Attributes
    ----------
    {attributes}

    See Also
    --------
    in_context_least_squares_risk : Its risk at ``alpha=0``.
    LinearAttentionRegressor : The trained layer it is compared with.

    Examples
    --------
    >>> from stsq_learn import PromptRidge, make_in_context_regression
    >>> X, y = make_in_context_regression(
    ...     100, n_examples=10, n_features=5, random_state=0)
    >>> model = PromptRidge().fit(X, y)
    >>> float(abs(model.predict(X) - y).max()) < 1e-8   # M >= d, no noise: exact
    True
    """

    _parameter_constraints: dict = {"alpha": [Interval(Real, 0, None, closed="left")]}

    def __init__(self, alpha=0.0):
        self.alpha = alpha

    def _fit_prompts(self, X, y):
        return {}

    def _predict_prompts(self, X):
        out = np.empty(len(X))
        for rows in self._chunks(X):
            w, _ = least_squares(X[rows, :-1, :-1], X[rows, :-1, -1], self.alpha)
            out[rows] = np.einsum("nd,nd->n", w, X[rows, -1, :-1])
        return out


@Substitution(attributes=_ATTRIBUTES)
class PromptGradientStep(_PromptBaseline):
    """One gradient step from 0 on each prompt: ``y_hat = eta x_q^T (1/M) sum_i y_i x_i``.

    The step of gradient descent on the prompt's loss
    ``(1/2M) sum_i (y_i - <w, x_i>)^2`` from ``w = 0`` is
    ``w_1 = eta (1/M) sum_i y_i x_i``; the prediction is ``<w_1, x_q>``.
    The trained linear self-attention layer is this step preconditioned by
    ``Gamma^{-1}``; averaging is ``step=1``.

    Parameters
    ----------
    step : float or "best", default="best"
        ``eta > 0``; ``"best"``: the step that fits the training prompts
        best (least squares of ``y`` on ``x_q^T h`` in :meth:`fit`). The best
        step depends on M (``M / (M + d + 1)`` for identity covariance
        without noise, :func:`~stsq_learn.in_context_gd_step`): fitted at one
        M it is that M's; for the step tuned to each M, fit on prompts of
        each M, or pass the closed form.

    Attributes
    ----------
    step_ : float
        The step the model predicts with.
    {attributes}

    See Also
    --------
    in_context_gd_step : The best step of a law, in closed form.
    LinearAttentionRegressor : The same step, preconditioned and trained.

    Examples
    --------
    >>> from stsq_learn import PromptGradientStep, make_in_context_regression
    >>> X, y = make_in_context_regression(
    ...     4000, n_examples=10, n_features=5, random_state=0)
    >>> round(PromptGradientStep().fit(X, y).step_, 1)   # about M / (M + d + 1)
    0.6
    """

    _parameter_constraints: dict = {
        "step": [Interval(Real, 0, None, closed="neither"), StrOptions({"best"})]
    }
    _FITTED = {"step_": (_finite_number, "a finite number")}

    def __init__(self, step="best"):
        self.step = step

    @staticmethod
    def _steps(X):
        """``x_q^T (1/M) sum_i y_i x_i`` of every prompt: the prediction of step 1."""
        out = np.empty(len(X))
        m = X.shape[1] - 1
        for rows in PromptGradientStep._chunks(X):
            h = np.einsum("nm,nmd->nd", X[rows, :-1, -1], X[rows, :-1, :-1]) / m
            out[rows] = np.einsum("nd,nd->n", h, X[rows, -1, :-1])
        return out

    def _fit_prompts(self, X, y):
        if self.step != "best":
            return {"step_": float(self.step)}
        s = self._steps(X)
        norm = float(s @ s)
        return {"step_": float(s @ y) / norm if norm > 0 else 0.0}

    def _predict_prompts(self, X):
        return self.step_ * self._steps(X)
