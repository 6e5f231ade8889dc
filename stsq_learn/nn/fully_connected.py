"""The fully-connected baseline as a torch module: the task's flat row through ReLU layers."""

from __future__ import annotations

import itertools

import numpy as np
from torch import nn

from ..tasks.selection.task import SparseTokenSelectionTask
from . import members

__all__ = ["FullyConnected"]


def _relu_layers(n_in, hidden, n_out):
    """``Linear`` + ``ReLU`` for every size of ``hidden``, then a linear output of ``n_out``."""
    sizes = [n_in, *hidden]
    layers = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(sizes[-1], n_out))
    return nn.Sequential(*layers)


class FullyConnected(nn.Module):
    """The fully-connected baseline on a task's flat row (``Task.fcn_inputs``).

    Parameters
    ----------
    seq_len, n_features : int
        Shape of a row (of sparse token selection when ``task`` is None: the
        input then has ``seq_len * (n_features + 1)`` numbers).
    width : int
        Units of the first hidden layer (ReLU).
    extra_hidden_layers : tuple of int, default=()
        Sizes of further ReLU hidden layers.
    task : Task or None, default=None
        The task at its training length; None: sparse token selection.
    """

    def __init__(self, seq_len, n_features, width, extra_hidden_layers=(), task=None):
        super().__init__()
        if task is None:
            task = SparseTokenSelectionTask.from_fitted(seq_len, n_features, {})
        self.task = task
        self.seq_len, self.n_features, self.width = seq_len, n_features, width
        n_out = int(np.prod(task.fcn_output_shape(1)[1:]))
        self.layers = _relu_layers(task.fcn_input_size(), (width, *extra_hidden_layers), n_out)

    n_members = None  # S for the members of a batched fit, stacked by :meth:`stacked`

    @classmethod
    def stacked(cls, modules):
        """The members of a batched fit as one module (:func:`stsq_learn.nn.members.stack`).

        Parameters
        ----------
        modules : list of FullyConnected
            Modules of one architecture, one per member.

        Returns
        -------
        FullyConnected
            Its layers grouped (:class:`~stsq_learn.nn.members.GroupedLinear`:
            the same parameter names, with a leading member axis); member s's
            rows (member-major) go through member s's layers.
        """
        return members.stack(modules)

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling=None):
        """Predict from the flattened batch ``X``.

        Parameters
        ----------
        X : Tensor of shape (n, seq_len, n_channels)
            Rows of the task at its training length.
        generator : torch.Generator or None, default=None
            Unused; accepted so that every model shares one call signature.
        n_pe_samples, pe_sampling : int, str or None
            Unused; accepted so that every model shares one call signature.

        Returns
        -------
        Tensor of the task's output shape
            The predictions.
        """
        return self.layers(self.task.fcn_inputs(X)).view(self.task.fcn_output_shape(len(X)))

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Length T of the rows (the training length).
        pe_sampling, n_selected : None
            Unused; accepted so that every model shares one call signature.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        return self.task.fcn_elements_per_row(self.width)
