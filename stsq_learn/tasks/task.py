"""The task protocol: what a task owns, and what the estimators ask of it.

A task of the provable-attention family is one class. An *instance* is a
law of rows with its sizes (what :meth:`Task.sample` draws and what
``fit_online`` trains on); the same instance, built from data by
:meth:`Task.from_data`, is the *contract* a fitted model keeps: how its rows
and targets are checked, which positions' encodings form each query of the
attention model, what the fully-connected baseline reads, how rows move to
another length, and what the task adds to a model file. The estimators, the
scorers, persistence and the experiments ask these questions of a task object
and never look at the task's class or at the shape of ``y``.

The registry (:func:`~stsq_learn.tasks.get_task`) maps a task's
:attr:`~Task.name` to its class; :func:`~stsq_learn.tasks.register_task`
adds a task of one's own, so that estimators take it by name and model files
that name it load.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import numpy as np
import torch
from sklearn.metrics import r2_score
from sklearn.utils import check_random_state

from .._validation import as_tensor, check_positive_int, check_seq_len
from ._reading import ModelReading

__all__ = ["Task"]


class Task(ModelReading, abc.ABC):
    """Base class of the tasks: a law of rows, its data contract and its query structure.

    Subclasses are frozen dataclasses whose fields are the law's sizes:
    ``seq_len`` and ``n_features`` always, then whatever else the law needs
    (a subset size, a noise level). Their instances are immutable and
    compare by value. A subclass defines:

    - the law: ``_sample(n_samples, rng)`` at one length (:meth:`sample`
      calls it) and, to draw on the training device,
      ``_sample_torch(n_samples, generator, device, dtype)`` (the default
      draws with NumPy from a seed taken from the torch generator);
      :attr:`trivial_mse`, the loss of the predictor 0;
    - the contract: :meth:`from_data` (check ``(X, y)`` of ``fit`` and
      return the task they describe), :meth:`check_rows` (``X`` of
      ``predict``) and :attr:`fitted_keys` (the fields a model file keeps);
    - the models' reading of a row (its base ``ModelReading``,
      whose defaults suit a task answering one average per row): its query
      ``structure`` for the attention model, and :meth:`fcn_inputs` for the
      fully-connected baseline;
    - the length shift: :meth:`shift`.

    Everything else has a default: scoring (:meth:`score`, R^2 over the
    output units of :meth:`units`), target checks, lengths, sizes.

    Attributes
    ----------
    name : str
        The task's registry name (model files and the estimators' ``task``
        parameter use it).
    fitted_keys : tuple of str
        Fields beyond ``seq_len`` and ``n_features`` that a fitted model
        keeps (its model file stores them; :meth:`from_fitted` reads them).
    targets_1d : bool
        Whether the targets are one number per row, given as a 1-D ``y``
        (:meth:`sample` returns them so, :meth:`sample_torch` as a column).
    """

    name: ClassVar[str | None] = None
    fitted_keys: ClassVar[tuple] = ()
    targets_1d: ClassVar[bool] = False

    seq_len: int
    n_features: int

    # -- lengths ---------------------------------------------------------------------
    @property
    def length_range(self):
        """``(shortest, longest)`` training length: one length, or a range drawn per batch."""
        T = self.seq_len
        return (T, T) if np.ndim(T) == 0 else (int(T[0]), int(T[1]))

    @property
    def reference_length(self):
        """The one length that stands for the task: its ``seq_len``, or a range's longest."""
        return self.length_range[1]

    def at_length(self, seq_len):
        """This law at another length (a fixed one), with every other size kept.

        Parameters
        ----------
        seq_len : int
            The new length.

        Returns
        -------
        task : Task
            A copy with ``seq_len`` replaced.
        """
        return dataclasses.replace(self, seq_len=seq_len)

    def check_sizes(self):
        """Validate ``seq_len`` and ``n_features``; a subclass calls it in ``__post_init__``.

        ``seq_len`` must be an int >= 1 or an inclusive range ``(shortest,
        longest)`` of them (a range of one length becomes that int),
        ``n_features`` an int >= 1; NumPy integers become ints. The fields
        are set in place (the dataclass is frozen, so through
        ``object.__setattr__``), so that equal laws compare equal.

        Raises
        ------
        TypeError, ValueError
            Naming the field and the offending value.

        Examples
        --------
        >>> from dataclasses import dataclass
        >>> from stsq_learn import Task
        >>> @dataclass(frozen=True)
        ... class Sized(Task):
        ...     seq_len: int
        ...     n_features: int
        ...     def __post_init__(self):
        ...         self.check_sizes()
        ...     # the rest, left out here:
        ...     _sample = from_data = check_rows = shift = None
        >>> Sized((8, 8), 2).seq_len
        8
        >>> Sized(8, 0)
        Traceback (most recent call last):
        ...
        ValueError: n_features must be an integer >= 1, got 0.
        """
        object.__setattr__(self, "seq_len", check_seq_len(self.seq_len))
        object.__setattr__(self, "n_features", check_positive_int(self.n_features, "n_features"))

    _check_sizes = check_sizes  # the name of 0.6 and earlier, which subclasses may still call

    # -- the law ---------------------------------------------------------------------
    def sample(self, n_samples, random_state=None):
        """Draw ``n_samples`` rows as NumPy arrays.

        A task whose ``seq_len`` is a range draws all the rows of a call at
        one length, uniform in the range.

        Parameters
        ----------
        n_samples : int
            Number of rows.
        random_state : int, RandomState instance or None, default=None
            Seed of the draw; an int gives the same rows every time.

        Returns
        -------
        X : ndarray of shape (n_samples, seq_len, n_channels)
            The rows.
        y : ndarray of shape :meth:`output_shape`
            Their targets.
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = check_random_state(random_state)
        lo, hi = self.length_range
        task = self.at_length(int(rng.randint(lo, hi + 1))) if hi > lo else self
        return task._sample(n_samples, rng)

    @abc.abstractmethod
    def _sample(self, n_samples, rng):
        """:meth:`sample` at one length: ``n_samples`` rows ``(X, y)`` from the ``RandomState``
        ``rng``, at this task's ``seq_len`` (required)."""

    def sample_torch(self, n_samples, *, generator, device="cpu", dtype=torch.float32):
        """Draw ``n_samples`` rows as tensors on ``device``, from ``generator``.

        The sampler of online training: the batch is drawn where the model
        trains. A task whose ``seq_len`` is a range draws the batch at one
        length, uniform in the range.

        Parameters
        ----------
        n_samples : int
            Number of rows.
        generator : torch.Generator
            Source of randomness, on ``device``.
        device : str or torch.device, default="cpu"
            Device the rows are drawn on.
        dtype : torch.dtype, default=torch.float32
            Floating dtype of the rows.

        Returns
        -------
        X, y : Tensor
            As :meth:`sample` returns them.
        """
        lo, hi = self.length_range
        task = self
        if hi > lo:
            T = int(torch.randint(lo, hi + 1, (1,), generator=generator, device=device))
            task = self.at_length(T)
        return task._sample_torch(n_samples, generator, device, dtype)

    def _sample_torch_members(self, n_samples, generators, device, dtype):
        """``n_samples`` rows of :meth:`_sample_torch` from each generator, concatenated.

        The batches of the members of a batched fit (this task at one
        length): block s is what ``generators[s]`` alone gives. The default
        calls :meth:`_sample_torch` for each; a task may draw every block's
        numbers from its generator and do the arithmetic once.
        """
        Xs, ys = zip(*(self._sample_torch(n_samples, g, device, dtype) for g in generators))
        return torch.cat(Xs), torch.cat(ys)

    def _sample_torch(self, n_samples, generator, device, dtype):
        """:meth:`sample_torch` at one length. The default draws with NumPy from a seed
        taken from ``generator``; tasks override it to draw on the device."""
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=device))
        X, y = self._sample(n_samples, np.random.RandomState(seed))
        return tuple(as_tensor(a, dtype, device) for a in (X, y))

    @property
    def trivial_mse(self):
        """The training loss (mean squared norm of an output row's error) of the predictor 0.

        The default estimates ``E||y||^2`` from 10,000 rows of a fixed seed;
        tasks give it in closed form.
        """
        _, y = self.sample(10_000, random_state=0)
        return float(np.square(y).reshape(len(y), -1, y.shape[-1]).sum(-1).mean())

    # -- the contract ----------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def from_data(cls, X, y):
        """Check ``(X, y)`` of ``fit``; return the task they describe (required).

        Parameters
        ----------
        X : array-like
            The rows.
        y : array-like
            Their targets.

        Returns
        -------
        task : Task
            The task at the data's length and sizes.
        X : ndarray
            ``X`` as a floating NumPy array (the input itself when it is one).
        y : ndarray
            ``y`` as a floating NumPy array shaped as the model's outputs.

        Raises
        ------
        ValueError, TypeError
            Naming the problem and the offending value.
        """

    @abc.abstractmethod
    def check_rows(self, X, owner="the model"):
        """Check rows for ``predict`` of a model fitted on this task, any length (required).

        Parameters
        ----------
        X : array-like
            The rows.
        owner : str, default="the model"
            What was fitted on this task, for the messages (an estimator's
            class name).

        Returns
        -------
        X : ndarray
            A floating NumPy array (the input itself when it already is one).
        """

    def output_shape(self, n_samples, seq_len):
        """Shape of the targets (and predictions) of ``n_samples`` rows of length ``seq_len``.

        Parameters
        ----------
        n_samples, seq_len : int
            Rows and their length.

        Returns
        -------
        tuple of int
            The default: ``(n_samples, n_features)``.
        """
        return (n_samples, self.n_features)

    def check_targets(self, y, X):
        """Check the targets of rows ``X`` (of :meth:`check_rows`) for ``score``.

        Parameters
        ----------
        y : array-like
            The targets; a 1-D ``y`` stands for one output per row.
        X : ndarray
            The checked rows.

        Returns
        -------
        y : ndarray
            ``y`` as floats of :meth:`output_shape`.
        """
        from .._validation import check_target_shape

        return check_target_shape(y, self.output_shape(*X.shape[:2]))

    # -- fitted state ----------------------------------------------------------------
    def fitted_state(self):
        """The values of :attr:`fitted_keys` (what a model file keeps of the task).

        Returns
        -------
        dict
            Field name to a JSON value.
        """
        return {key: getattr(self, key) for key in self.fitted_keys}

    @classmethod
    def from_fitted(cls, seq_len, n_features, state):
        """The contract of a fitted model from its training length, features and state.

        Parameters
        ----------
        seq_len, n_features : int
            The fitted model's ``seq_len_`` and ``n_features_in_``.
        state : dict
            :meth:`fitted_state` of the task (possibly with None values, for
            files of releases that did not store them).

        Returns
        -------
        task : Task
        """
        return cls(seq_len, n_features, **state)

    # -- scoring ---------------------------------------------------------------------
    def units(self, y, sample_weight=None):
        """The output units of targets ``y``: the rows a metric counts, and their weights.

        An output unit is one vector the model predicts: a row's output, or
        one per position where a task answers at every position.

        Parameters
        ----------
        y : ndarray of shape :meth:`output_shape`
            Targets or predictions.
        sample_weight : array-like of shape (n_samples,) or None
            Row weights.

        Returns
        -------
        units : ndarray of shape (n_units, n_outputs)
            ``y`` with one unit per row.
        weights : ndarray of shape (n_units,) or None
            Each row's weight, repeated for each of its units.
        """
        n = len(y)
        units = np.asarray(y).reshape(-1, np.shape(y)[-1])
        if sample_weight is None:
            return units, None
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}.")
        return units, np.repeat(w, len(units) // max(n, 1))

    def score(self, y, y_pred, sample_weight=None):
        """R^2 of ``y_pred`` over the output units, averaged over their outputs.

        Parameters
        ----------
        y : ndarray of shape :meth:`output_shape`
            Targets.
        y_pred : ndarray with as many values
            Predictions.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights (each row's units share its weight).

        Returns
        -------
        float
            The coefficient of determination (1 is perfect, 0 the mean).
        """
        y_units, w = self.units(y, sample_weight)
        return float(r2_score(y_units, np.reshape(y_pred, y_units.shape), sample_weight=w))

    # -- length shift ----------------------------------------------------------------
    @abc.abstractmethod
    def shift(self, X, y, seq_len, random_state=None):
        """Move rows to length ``seq_len`` keeping every target: the length shift (required).

        Parameters
        ----------
        X : ndarray
            Rows checked by :meth:`from_data` (a task at their length).
        y : ndarray
            Their targets, of :meth:`output_shape`.
        seq_len : int
            The new length.
        random_state : int, RandomState instance or None, default=None
            Seed of the new tokens and places.

        Returns
        -------
        X_shifted, y_shifted : ndarray
            The moved rows and their (unchanged) targets.
        """
