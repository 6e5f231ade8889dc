"""How the models read a task's rows: the part of the task protocol the estimators' modules use.

:class:`ModelReading` is a base of :class:`~stsq_learn.Task` with the
defaults of a task whose output is one average of its tokens: one query per
row, one encoding slot, the flattened row for the fully-connected baseline.
A task overrides what its rows need (q-sparse averaging: a query per
position; retrieval: a slot per role and a learned readout).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np


class ModelReading:
    """What the attention model and the fully-connected baseline ask of a task.

    Attributes
    ----------
    structure : type
        The query structure of :mod:`stsq_learn.queries` that
        :meth:`queries` builds.
    readout_required : bool
        Whether the attention model needs a learned linear output map even
        with one head (the query's average is not itself the output).
    n_slots : int
        Encoding slots in a query of the attention model: 1 when a query is
        a sum of encodings, more when it concatenates them (one per role).
    isotropic_floor_applies : bool or None
        Whether each query is a sum of q encodings, as
        :func:`~stsq_learn.isotropic_floor` assumes (then
        :meth:`query_sizes` gives each row's q, and the length scale
        ``"floor"`` applies). None (the default) derives it: it applies
        when :meth:`query_sizes` gives sizes, as it does for a task whose
        ``structure`` sums encodings (:class:`~stsq_learn.queries.Selection`).
    """

    structure: ClassVar[type | None] = None
    readout_required: ClassVar[bool] = False
    isotropic_floor_applies: ClassVar[bool | None] = None

    def __init_subclass__(cls, **kwargs):
        """A task's override without a docstring keeps the protocol's (its parent's)."""
        super().__init_subclass__(**kwargs)
        for name, attr in vars(cls).items():
            target = attr.__func__ if isinstance(attr, (classmethod, staticmethod)) else attr
            if name.startswith("_") or getattr(target, "__doc__", None):
                continue
            parent = next((vars(b)[name] for b in cls.__mro__[1:] if name in vars(b)), None)
            doc = getattr(parent, "__doc__", None)
            if doc and callable(target):
                target.__doc__ = doc
            elif doc and isinstance(attr, property):
                setattr(cls, name, property(attr.fget, attr.fset, attr.fdel, doc))

    # -- what the models read --------------------------------------------------------
    @property
    def n_slots(self):
        """Encoding slots of a query (1: a query sums encodings)."""
        return 1

    @property
    def n_outputs(self):
        """Numbers the attention model outputs per query (a learned readout's size)."""
        return self.n_features

    @classmethod
    def queries_per_row(cls, seq_len):
        """Queries the attention model asks per row (sizes ``batch_size="auto"``).

        Parameters
        ----------
        seq_len : int
            Length of the rows.

        Returns
        -------
        int
        """
        return 1

    @property
    def largest_query_of_law(self):
        """The most positions a query of this law reads (sizes a fit's memory), or None."""
        return None

    def largest_query(self, X):
        """The most positions any query of rows ``X`` reads (sizes predict's chunks).

        Parameters
        ----------
        X : ndarray
            Checked rows.

        Returns
        -------
        int or None
            None: unknown (bounded by the width).
        """
        return None

    def queries(self, X):
        """The query structure of a batch for the attention model.

        Parameters
        ----------
        X : Tensor of shape (n, T, n_channels)
            The rows, contiguous.

        Returns
        -------
        queries : Selection, Subsets or Slots
            One of the structures of :mod:`stsq_learn.queries`; the default
            is ``structure(X, n_features)``.
        """
        return self.structure(X, self.n_features)

    def fcn_inputs(self, X):
        """The flat row the fully-connected baseline reads.

        Parameters
        ----------
        X : Tensor of shape (n, seq_len, n_channels)
            The rows.

        Returns
        -------
        Tensor of shape (n, n_inputs)
            The default: the row flattened.
        """
        return X.flatten(1)

    def fcn_input_size(self):
        """Length of :meth:`fcn_inputs` at this task's ``seq_len``.

        Returns
        -------
        int
            Numbers the fully-connected baseline reads per row.
        """
        X, _ = self.sample(1, random_state=0)
        return int(np.prod(X.shape[1:]))

    def fcn_elements_per_row(self, width):
        """Floats the baseline's forward pass holds per row (sizes predict's chunks).

        Parameters
        ----------
        width : int
            Units of the first hidden layer.

        Returns
        -------
        int
            The input and the first hidden layer's activations, per row.
        """
        return self.seq_len * width + self.fcn_input_size()

    def fcn_output_shape(self, n_samples):
        """Shape the baseline's flat output takes (it answers at the training length only).

        Parameters
        ----------
        n_samples : int
            Rows.

        Returns
        -------
        tuple of int
            :meth:`output_shape` at the training length.
        """
        return self.output_shape(n_samples, self.seq_len)

    def query_sizes(self, X):
        """Encodings summed into each row's queries, where :attr:`isotropic_floor_applies`.

        Parameters
        ----------
        X : Tensor of shape (n, T, n_channels)
            The rows.

        Returns
        -------
        Tensor of shape (n,) or None
            Each row's q (None: the queries are not sums of encodings). The
            default asks the query structure (its ``query_sizes``, which
            :class:`~stsq_learn.queries.Selection` has).
        """
        sizes = getattr(self.structure, "query_sizes", None)
        return sizes(X) if sizes is not None else None
