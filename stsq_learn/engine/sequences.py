"""The sequence-to-sequence models' base: token ids in, written strings out.

:class:`_SequenceModel` is the engine (:class:`~.base._BaseEstimator`)
with what strings of tokens add. A row ``X[i]`` is integer token ids then
``-1`` after its end (:func:`check_token_rows`), its target ``y[i]`` the
string to write, of the same shape. The module reads the source and, in
training, the target beside it (``[X, y]``, ``(n, 2T)``: teacher forcing)
and returns logits over the symbols and the end at each answer position;
the loss is :class:`~stsq_learn.nn.SequenceCrossEntropy`, the owned net a
plain :class:`skorch.NeuralNet`; every run warms its step size up over its
first 5% of steps (:class:`Warmup`) and clips each gradient to norm 1.
:meth:`predict` writes each answer greedily (the module's ``generate``),
:meth:`score` is the string accuracy; the rest is the engine's. The seeds
of a study are fitted one after another: these modules have no member axis.

:class:`_UntrainedSequenceModel` is the base of the string models that
train nothing (a rule, a construction of a proof): ``fit`` checks the rows
by the task's contract and keeps the task; a subclass writes the answers
(``_write``); ``score`` and model files are shared.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, MultiOutputMixin
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNet
from skorch.callbacks import Callback, GradientNormClipping

from .._validation import as_real_array, check_callbacks
from ..metrics import string_accuracy
from ..nn.losses import SequenceCrossEntropy
from ..tasks import get_task
from . import training as tr
from .base import _BaseEstimator
from .memory import PREDICT_ELEMENTS
from .params import AtomicSetParams, refuse_booleans
from .state import check_fitted_state, rebuild_task, size_check

SHAPE = "(n_samples, seq_len)"
MAX_TOKEN = 2**24 - 1
"""The largest token id: training holds the tokens as float32, exact below 2**24."""


def check_token_rows(X, name="X", *, vocab_size=None, owner="the model", empty_rows=False):
    """``X`` as C-contiguous int64 rows of token ids, each its tokens then ``-1``; or an error.

    A float array is refused, even of whole numbers; tokens must be below ``vocab_size`` (D;
    None: any id up to :data:`MAX_TOKEN`), fixed by ``owner``; ``empty_rows``: whether a row
    may hold no token. ``name`` names the argument in the messages.
    """
    arr = as_real_array(X, name, f"{SHAPE} of integer tokens for {name}")
    if arr.dtype.kind == "f":
        raise TypeError(
            f"{name} must hold integer token ids (0 .. D-1, and -1 after a row's end), got an "
            f"array of dtype {arr.dtype}; cast it with {name}.astype(int) if its values are whole."
        )
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D, {SHAPE} of token ids, got an array of shape {arr.shape}."
        )
    if 0 in arr.shape:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need a row and a token.")
    high = int(arr.max())
    limit = MAX_TOKEN + 1 if vocab_size is None else vocab_size
    if high >= limit or int(arr.min()) < -1:
        bad = np.argwhere((arr >= limit) | (arr < -1))[0]
        value = int(arr[tuple(bad)])
        where = f"{name}[{bad[0]}, {bad[1]}] = {value}"
        if value < -1:
            raise ValueError(f"{where}: tokens are ids >= 0, and -1 only pads a row after its end.")
        if vocab_size is None:
            raise ValueError(f"{where}: token ids must be below 2**24 (float32 holds them).")
        raise ValueError(
            f"{where} is outside [0, {vocab_size}): {owner} was fitted on an alphabet of "
            f"{vocab_size} symbols."
        )
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    pad = arr < 0
    inside = pad[:, :-1] & ~pad[:, 1:]
    if inside.any():
        i, j = np.argwhere(inside)[0]
        raise ValueError(
            f"{name}[{i}] has padding inside: {name}[{i}, {j}] = -1 but {name}[{i}, {j + 1}] = "
            f"{arr[i, j + 1]}; a row is its tokens, then -1 to the end."
        )
    if not empty_rows and pad[:, 0].any():
        i = int(np.argmax(pad[:, 0]))
        raise ValueError(f"{name}[{i}] holds no token (only -1); every row needs at least one.")
    return arr


class _PackedStream(tr.OnlineData):
    """A stream of fresh rows whose model input is ``[X, y]``: the source and the target."""

    def draw(self, batch_size, generator):
        X, y = super().draw(batch_size, generator)
        return torch.cat([X, y], 1), y

    def _probe(self, generator, chunk):
        for X, y in super()._probe(generator, chunk):
            yield torch.cat([X, y], 1), y


class Warmup(Callback):
    """The step size warmed up linearly over a run's first ``n_steps`` steps.

    Step k (from 0) takes ``(k + 1) / n_steps`` of the step size the
    schedule gives it: the rate is scaled before the step and put back
    after, before the schedule moves on, so any schedule composes with it.

    Parameters
    ----------
    n_steps : int
        Steps of the warmup.
    """

    def __init__(self, n_steps):
        self.n_steps = n_steps

    def initialize(self):
        self.step_ = 0
        return self

    def _scale(self, net, factor):
        for group in net.optimizer_.param_groups:
            group["lr"] *= factor

    def on_batch_begin(self, net, training=False, **kwargs):
        if training and self.step_ < self.n_steps:
            self._scale(net, (self.step_ + 1) / self.n_steps)

    def on_batch_end(self, net, training=False, **kwargs):
        if training and self.step_ < self.n_steps:
            self._scale(net, self.n_steps / (self.step_ + 1))
        self.step_ += bool(training)


class _StringScore:
    """``score`` of the models that write strings, through ``_predict_validated(X)``."""

    def score(self, X, y, sample_weight=None):
        """String accuracy: the fraction of rows written exactly (every token and the end).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Sources.
        y : array-like of shape (n_samples, seq_len)
            The strings to write.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights.

        Returns
        -------
        score : float
            :func:`~stsq_learn.string_accuracy` of ``self.predict(X)``.
        """
        check_is_fitted(self)
        X = self.task_.check_rows(X, type(self).__name__)
        y = self.task_.check_targets(y, X)
        return string_accuracy(y, self._predict_validated(X), sample_weight=sample_weight)


class _SequenceModel(_StringScore, MultiOutputMixin, _BaseEstimator):
    """``fit``, ``fit_online``, ``predict`` and ``score`` of the models that write strings."""

    _criterion = SequenceCrossEntropy
    _net_class = NeuralNet
    _clip = 1.0
    """The gradient norm each step is clipped to."""
    _warmup = 0.05
    """The fraction of a run's planned steps over which the step size warms up."""

    def _zero_loss(self, task, y=None):
        """The loss of logits 0: ``log(D + 1)``, the symbols and the end equally likely."""
        return math.log(task.n_features + 1)

    def _resolve_optimiser(self, zero_loss, planned_steps, module, online):
        solver, rate, token_rate, paces = super()._resolve_optimiser(
            zero_loss, planned_steps, module, online
        )
        warmup = Warmup(max(1, math.ceil(self._warmup * planned_steps)))
        return solver, rate, token_rate, [*paces, warmup, GradientNormClipping(self._clip)]

    @classmethod
    def _fit_members(cls, estimators, method, calls, errors):
        """The seeds are fitted one after another (the modules have no member axis)."""
        from .members import fit_one_by_one

        return fit_one_by_one(estimators, method, calls, errors)

    def fit(self, X, y):
        """Fit the model on strings with epochs of shuffled minibatches (teacher forcing).

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Sources: integer token ids, each row its tokens then ``-1``.
        y : array-like of shape (n_samples, seq_len)
            The strings to write, as ``X`` (for copying, ``X`` itself).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter, tokens that are not integers, below
            -1, or -1 inside a row, ``y`` of another shape than ``X``, or a
            fit too large for the memory, before any work; for a run that
            diverged. A failed call leaves the model as it was.
        """
        self._validate_params()
        check_callbacks(self.callbacks)
        task, X, y = self._task_class().from_data(X, y)
        packed = np.concatenate([X, y], axis=1)
        self._train(**self._rows_inputs(task, packed, y, y_1d=False))
        return self

    def fit_online(self, task, n_steps="auto"):
        """Fit on fresh strings drawn from ``task`` at every step (teacher forcing).

        Parameters
        ----------
        task : Task
            The law of the strings.
        n_steps : int or "auto", default="auto"
            Optimiser steps; ``"auto"``: the model's planned steps.

        Returns
        -------
        self : object
            The fitted estimator; ``loss_curve_`` holds the loss of every step.

        Raises
        ------
        ValueError, TypeError
            For a bad hyperparameter or argument, or a run too large for
            the memory, before any work; for a run that diverged.
        """
        inputs = self._online_inputs(task, n_steps)
        data = inputs["data"]
        inputs["data"] = _PackedStream(
            data.task, data.n_steps, data.batch_size, data.device, data.dtype
        )
        self._train(**inputs)
        return self

    def predict(self, X):
        """Write each row's answer greedily: the most likely token, until the end.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Sources, at any length, their tokens in ``[0, n_features_in_)``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples, seq_len), int64
            Each row the tokens written before the end, then ``-1`` (a
            string that would run past ``seq_len`` is cut there).
        """
        check_is_fitted(self)
        return self._predict_validated(self.task_.check_rows(X, type(self).__name__))

    def _predict_validated(self, X):
        n, T = X.shape
        self._check_predict_seq_len(T)
        module = self.net_.module_
        chunk = max(1, PREDICT_ELEMENTS // module.elements_per_row(T))
        device = next(module.parameters()).device
        module.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, n, chunk):
                rows = torch.as_tensor(X[start : start + chunk], device=device)
                out.append(module.generate(rows, T).cpu())
        return torch.cat(out).numpy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        tags.input_tags.three_d_array = False
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags


class _UntrainedSequenceModel(_StringScore, AtomicSetParams, MultiOutputMixin, BaseEstimator):
    """``fit`` (the contract's checks only), ``predict``, ``score`` and the fitted state of
    the string models that train nothing; a subclass gives ``_write(X)`` and ``_task``."""

    _task = None
    """The task (a name or a class) whose contract ``fit`` reads."""

    def _validate_params(self):
        super()._validate_params()
        refuse_booleans(self)

    def fit(self, X, y):
        """Check the strings and read the alphabet; nothing is learned.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Integer tokens, each row its tokens then ``-1``.
        y : array-like of shape (n_samples, seq_len)
            The strings to write.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        task, _, _ = get_task(self._task).from_data(X, y)
        self.task_ = task
        self.n_features_in_, self.seq_len_ = task.n_features, task.seq_len
        return self

    def predict(self, X):
        """Write each row's answer.

        Parameters
        ----------
        X : array-like of shape (n_samples, seq_len)
            Sources, tokens in ``[0, n_features_in_)``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples, seq_len), int64
            The tokens written, then ``-1``.
        """
        check_is_fitted(self)
        return self._write(self.task_.check_rows(X, type(self).__name__))

    def _predict_validated(self, X):
        return self._write(X)  # the rows checked: what the shared score predicts

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.requires_fit = True
        return tags

    def get_fitted_state(self):
        """The fitted sizes and the task's fields (what :func:`~stsq_learn.save_model` writes).

        Returns
        -------
        state : dict
            ``"fitted"``: ``n_features_in_``, ``seq_len_`` and the task's
            fitted fields; ``"history"`` and ``"weights"`` empty.
        """
        check_is_fitted(self)
        fitted = {"n_features_in_": int(self.n_features_in_), "seq_len_": int(self.seq_len_)}
        return {"fitted": {**fitted, **self.task_.fitted_state()}, "history": [], "weights": {}}

    def set_fitted_state(self, state, *, device=None):
        """Make this estimator the fitted model of ``state`` (:func:`~stsq_learn.load_model`).

        Parameters
        ----------
        state : dict
            As :meth:`get_fitted_state` returns it.
        device : object, default=None
            Unused (NumPy).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        try:
            self._validate_params()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid hyperparameter: {exc}") from None
        task_class = get_task(self._task)
        schema = {"n_features_in_": size_check(1), "seq_len_": size_check(1)}
        check_fitted_state(state, schema, known=task_class.fitted_keys)
        # Every file of these models (new in format 5) holds the task's fitted keys: a key
        # missing is a forged file (min_len shapes the fixed-state copier's code).
        missing = [k for k in task_class.fitted_keys if k not in state["fitted"]]
        if missing:
            raise ValueError(f"the fitted attribute {missing[0]!r} is missing.")
        if state["weights"] or state["history"]:
            raise ValueError(f"a {type(self).__name__} holds no weights and no history.")
        f = state["fitted"]
        fields = {k: f.get(k) for k in task_class.fitted_keys}
        sizes = {"seq_len_": f["seq_len_"], "n_features_in_": f["n_features_in_"], **fields}
        self.task_ = rebuild_task(
            lambda: task_class.from_fitted(f["seq_len_"], f["n_features_in_"], fields), sizes
        )
        self.n_features_in_, self.seq_len_ = f["n_features_in_"], f["seq_len_"]
        return self
