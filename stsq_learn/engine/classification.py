"""The classifiers' base: labels, ``classes_``, the logistic loss, probabilities, accuracy.

:class:`_Classifier` is the engine (:class:`~.base._BaseEstimator`) with
what labels add, as scikit-learn's classifiers have it: ``fit`` encodes any
labels (integers such as -1/+1, strings, booleans) as the indices of
``classes_``, the loss is the logistic loss on one logit for two classes and
the softmax cross-entropy on one logit per class for more
(:class:`~stsq_learn.nn.LogisticLoss`), the owned net a
:class:`skorch.NeuralNetClassifier`, and ``predict`` returns labels of
``classes_``, ``predict_proba`` and ``decision_function`` the model's
probabilities and logits, ``score`` the accuracy. Everything else (device,
dtype, mini-batches, ``fit_online`` on the task's law, the memory check,
progress, divergence, warm starts, persistence) is the engine's.

A classifier's task gives ``from_rows(X)`` (its rows' contract, the labels
apart) and ``labels`` (the labels its law draws, the classes of
``fit_online``); a subclass gives the module (``_make_module``, which
reads the number of classes it is built for from :meth:`_n_classes`).
"""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d
from skorch import NeuralNetClassifier

from .._validation import check_callbacks
from ..nn import LogisticLoss
from .base import _BaseEstimator
from .state import check_fitted_state


def _is_label(value):
    """A label NumPy holds as it was fitted: a string, a boolean, an int64 or a finite float."""
    if isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, float) and math.isfinite(value)


def _is_classes(value):
    """At least two distinct labels of one JSON type (int, float, str or bool), sorted."""
    if not isinstance(value, list) or len(value) < 2 or not all(map(_is_label, value)):
        return False
    if len({type(v) for v in value}) != 1:
        return False
    return all(a < b for a, b in itertools.pairwise(value))


_CLASSES = {"classes_": (_is_classes, "at least two distinct labels of one type, sorted")}


class _Classifier(ClassifierMixin, _BaseEstimator):
    """``fit``, ``fit_online``, the probabilities and labels of the estimators of classes."""

    _criterion = LogisticLoss
    _net_class = NeuralNetClassifier
    _fitted_extra_keys = ("classes_",)

    # -- the classes the module is built for -----------------------------------------
    @contextlib.contextmanager
    def _building_for(self, classes):
        """Within the block, modules are built for ``classes`` (a fit's labels, a file's)."""
        self._classes_building = classes
        try:
            yield
        finally:
            self.__dict__.pop("_classes_building", None)

    def _n_classes(self):
        """Classes of the module being built (in a fit or a load), else of the fitted model."""
        classes = getattr(self, "_classes_building", None)
        return len(self.classes_ if classes is None else classes)

    def _size_hyperparameters(self):
        return [*super()._size_hyperparameters(), f"len(classes_)={self._n_classes()}"]

    def _zero_loss(self, task, y=None):
        """The loss of logits 0 (a model that learned nothing): ``log(n_classes)``."""
        return math.log(self._n_classes())

    # -- fitting ---------------------------------------------------------------------
    def _encode(self, y, n_rows):
        """``(classes, indices)`` of labels ``y`` of ``n_rows`` rows, checked before any work."""
        if y is None:
            raise ValueError(
                f"y is required: labels of shape (n_samples,) = ({n_rows},), got None."
            )
        y = column_or_1d(np.asarray(y), warn=True)
        if len(y) != n_rows:
            raise ValueError(f"y has {len(y)} labels but X has {n_rows} rows; they must match.")
        check_classification_targets(y)
        classes, indices = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y, got "
                f"{len(classes)}: {classes.tolist()}."
            )
        return classes, indices.reshape(-1).astype(np.float64)

    def _check_warm_classes(self, classes):
        """A warm start continues the fitted classes: refuse others before any work."""
        if self.warm_start and hasattr(self, "net_") and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start=True continues the previous fit, whose classes were "
                f"{self.classes_.tolist()}; this call's are {classes.tolist()}. Set "
                "warm_start=False to start afresh."
            )

    def fit(self, X, y):
        """Fit the classifier on rows ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens.
        y : array-like of shape (n_samples,)
            Labels of any type scikit-learn classifies (integers such as 0/1
            or -1/+1, strings, booleans), at least two distinct ones; they
            are kept, sorted, in ``classes_``.

        Returns
        -------
        self : object
            The fitted classifier.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter, rows that are not 3-D finite reals,
            labels of another length, continuous or of one class, or a fit
            too large for the memory, before any work (nothing is copied);
            for a run that diverged (lower ``learning_rate_init``). A failed
            call leaves the model as it was.

        Notes
        -----
        A ``KeyboardInterrupt`` (Ctrl-C) stops training early without raising:
        the model keeps the weights reached so far, a ``UserWarning`` says so,
        and ``loss_curve_`` and ``n_iter_`` describe the completed epochs.
        """
        self._train(**self._fit_inputs(X, y))
        return self

    def _fit_inputs(self, X, y):
        """:meth:`fit`'s checks (hyperparameters, rows, labels), then what it trains on.

        The keyword arguments of :meth:`_train`: the engine's, with
        ``classes`` (the sorted labels) and ``module_sizes`` (the number of
        classes: members of a batched fit train together only with one);
        nothing is trained or assigned.
        """
        self._validate_params()
        check_callbacks(self.callbacks)
        task, X = self._task_class().from_rows(X)
        classes, indices = self._encode(y, len(X))
        self._check_warm_classes(classes)
        with self._building_for(classes):
            inputs = self._rows_inputs(task, X, indices, y_1d=True)
        return {**inputs, "classes": classes, "module_sizes": (len(classes),)}

    def fit_online(self, task, n_steps="auto"):
        """Fit on a fresh batch drawn from ``task``'s law at every step, on the device.

        Batches of ``batch_size`` rows (256 for ``"auto"`` and ``"full"``: a
        stream has no full batch) are drawn where the model trains; there are
        no epochs and no early stopping. The classes are the labels the law
        draws (0 and 1 for :class:`~stsq_learn.SparseTokenClassificationTask`);
        a warm start keeps the fitted ``classes_`` (the law's label ``k`` is
        ``classes_[k]``).

        Parameters
        ----------
        task : Task
            The law to draw training batches from.
        n_steps : int or "auto", default="auto"
            Optimiser steps; ``"auto"``: ``max_iter``.

        Returns
        -------
        self : object
            The fitted classifier; ``loss_curve_`` holds the loss of every step.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or argument, or a run too large for the
            memory, before any work; for a run that diverged. A failed call
            leaves the model as it was.
        """
        self._train(**self._online_inputs(task, n_steps))
        return self

    def _online_inputs(self, task, n_steps):
        """:meth:`fit_online`'s checks, then what it trains on (as :meth:`_fit_inputs`)."""
        task_class = self._task_class()
        classes = np.asarray(getattr(task_class, "labels", ()))
        if self.warm_start and hasattr(self, "net_"):
            if len(self.classes_) != len(classes):
                raise ValueError(
                    f"warm_start=True continues the previous fit, which has "
                    f"{len(self.classes_)} classes; the law of {task_class.__name__} draws "
                    f"{len(classes)}. Set warm_start=False to start afresh."
                )
            classes = self.classes_
        with self._building_for(classes):
            inputs = super()._online_inputs(task, n_steps)
        return {**inputs, "classes": classes, "module_sizes": (len(classes),)}

    def _train(self, data, task, device, batch_size, *, classes, module_sizes, **run):
        """The engine's run, its module built for ``classes`` (kept as ``classes_``)."""
        with self._building_for(classes):
            super()._train(data, task, device, batch_size, **run)

    def _member_inputs(self, inputs):
        """A member of a batched fit builds its module for its own classes (:mod:`.members`).

        Called by the batched fit with the member's :meth:`_fit_inputs` (or
        :meth:`_online_inputs`) before its run is planned; its
        :meth:`_fit_members` forgets them after the run.
        """
        self._classes_building = inputs["classes"]

    def _assign_fitted(self, run, net, losses):
        super()._assign_fitted(run, net, losses)
        self.classes_ = self._classes_building

    @classmethod
    def _fit_members(cls, estimators, method, calls, errors, callbacks=None):
        """A classifier's seeds trained together as one model (:func:`.members.fit_stacked`).

        As the engine's regressors: one stacked module, each member with its
        own classes (members whose numbers of classes differ are fitted one
        after another), rows, draws, verdict and callbacks.
        """
        from .members import fit_stacked

        try:
            return fit_stacked(estimators, method, calls, errors, callbacks)
        finally:
            for est in estimators:
                est.__dict__.pop("_classes_building", None)

    _fit_members.__func__.takes_callbacks = True

    def _auto_steps(self):
        """Steps of ``fit_online(n_steps="auto")``: ``max_iter``."""
        return self.max_iter

    # -- prediction --------------------------------------------------------------------
    def decision_function(self, X):
        """The logits of each row: for two classes, positive for ``classes_[1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            One logit per row for two classes, one per class for more; float64.
        """
        check_is_fitted(self)
        return self._forward(self.task_.check_rows(X, type(self).__name__))

    def predict_proba(self, X):
        """Probabilities of the classes: the sigmoid (two classes) or softmax of the logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; each row sums to 1.
        """
        f = self.decision_function(X)
        if f.ndim == 1:
            return np.stack([expit(-f), expit(f)], axis=1)
        return softmax(f, axis=1)

    def predict_log_proba(self, X):
        """Logarithms of :meth:`predict_proba`, computed stably.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Column ``j`` for ``classes_[j]``.
        """
        f = self.decision_function(X)
        if f.ndim == 1:
            return np.stack([log_expit(-f), log_expit(f)], axis=1)
        return log_softmax(f, axis=1)

    def predict(self, X):
        """The label of each row: the class of the largest logit (two classes: ``f > 0``).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len, n_features)
            Tokens, at any length.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels of ``classes_``.
        """
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(int) if f.ndim == 1 else f.argmax(axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags

    # -- fitted state ------------------------------------------------------------------
    def _extra_fitted(self):
        """The fitted values the classifier adds to the file (JSON types)."""
        return {"classes_": self.classes_.tolist()}

    def _read_extra_fitted(self, state):
        """Check :meth:`_extra_fitted`'s values in ``state``; the attributes they give."""
        check_fitted_state(state, _CLASSES)
        return {"classes_": np.asarray(state["fitted"]["classes_"])}

    def set_fitted_state(self, state, *, device=None):
        extra = self._read_extra_fitted(state)
        with self._building_for(extra["classes_"]):
            super().set_fitted_state(state, device=device)
        for name, value in extra.items():
            setattr(self, name, value)
        return self

    set_fitted_state.__doc__ = _BaseEstimator.set_fitted_state.__doc__
