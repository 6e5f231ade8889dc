"""What the estimators of single-location regression share: checks, tags, fit and predict.

:class:`_SingleLocationModel` holds the data contract (rows of shape
``(n_samples, seq_len, n_features)``, one target per row), the two ways to
fit (on data, or on the law: ``fit_online``), prediction and the tags; a
subclass gives ``_check_params``, ``_train`` and ``_forward``.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._validation import as_tensor
from .tasks import SingleLocationTask


def _check_number(value, name, *, positive=True, allow_zero=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    ok = np.isfinite(value) and (value > 0 or (allow_zero and value == 0) or not positive)
    if not ok:
        raise ValueError(
            f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {value!r}."
        )
    return value


def _check_choice(value, name, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}.")
    return value


def _check_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def _check_task(task):
    if not isinstance(task, SingleLocationTask):
        raise TypeError(f"task must be a SingleLocationTask, got {task!r}.")
    return task


def _unit(x):
    return x / np.linalg.norm(x)


class _SingleLocationModel(RegressorMixin, BaseEstimator):
    """What both estimators share: the data contract, tags, prediction, the fit's frame."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def fit(self, X, y):
        """Fit on rows ``X`` and targets ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the training loss
            before each step and ``alignment_curve_`` is None (``k*`` and
            ``v*`` are not known from data).

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or input, before any work; the model
            keeps its previous fit.
        """
        self._check_params()
        task, X, y = SingleLocationTask.from_data(X, y)
        Xt, yt = as_tensor(X, torch.float64), as_tensor(y, torch.float64)
        rng = check_random_state(self.random_state)
        n = len(Xt)

        def batches():
            if self.solver == "pgd":
                while True:
                    yield Xt, yt
            size = min(self.batch_size, n)
            while True:
                order = rng.permutation(n)
                for start in range(0, n - size + 1, size):
                    idx = torch.as_tensor(order[start : start + size])
                    yield Xt[idx], yt[idx]

        state = self._train(task, batches(), None, self.max_iter, rng)
        self._set_fitted(task, state)
        return self

    def fit_online(self, task, n_steps=None):
        """Fit on the law ``task``: its population risk or fresh batches from it.

        Parameters
        ----------
        task : SingleLocationTask
            The law.
        n_steps : int or None, default=None
            Steps; None: ``max_iter``.

        Returns
        -------
        self : object
            The fitted estimator, with ``alignment_curve_`` recorded.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or argument, before any work.
        """
        self._check_params()
        task = _check_task(task)
        n_steps = self.max_iter if n_steps is None else _check_int(n_steps, "n_steps")
        rng = check_random_state(self.random_state)

        def batches():  # drawn from after the initialisation: fit's start is fit_online's
            draws = np.random.RandomState(rng.randint(2**31 - 1))
            while True:
                X, y = task.sample(self.batch_size, random_state=draws)
                yield as_tensor(X, torch.float64), as_tensor(y, torch.float64)

        state = self._train(task, batches(), task, n_steps, rng)
        self._set_fitted(task.at_length(task.seq_len), state)
        return self

    def _set_fitted(self, task, state):
        for key, value in state.items():
            setattr(self, key, value)
        self.task_ = task
        self.n_features_in_ = task.n_features
        self.seq_len_ = task.seq_len

    def predict(self, X):
        """Predict one number per row.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predictions, as float64.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        with torch.no_grad():
            out = self._forward(as_tensor(X, torch.float64))
        return out.numpy().astype(np.float64)
