"""The models as torch modules: the math, and nothing else.

:class:`Attention` is the one-layer softmax attention of Wang, Wei, Hsu and Lee
(2024), with one or more heads, over any task's queries. Token t is embedded
as ``z_t = [x_t ; p_t]`` with a positional encoding ``p_t`` in ``R^m``; a
query ``z_0`` is made of encodings (the task's query structure,
:mod:`stsq_learn.queries`: for sparse token selection
``z_0 = [0 ; sum_{t in S} p_t]``); head h scores ``a_t = z_t^T W_h z_0`` and
outputs ``o_h = sum_t softmax(a)_t x_t``. One head whose query's average is
the output is the paper's model; several heads (or a task whose output is
not one average, like retrieval) add a learned linear readout of
``[o_1 ; ... ; o_H]``. Only the columns of ``W_h`` that meet the query's
positional part matter, so ``W_h`` is stored as ``(d + m, n_slots * m)``
(rows: token part, then positional part).

:class:`FullyConnected` is the baseline: the task's flat row through ReLU
layers. :class:`AttentionSelector` is the module of sparse token selection
built from its sizes; a task's own modules (q-sparse averaging's
:class:`AttentionAverager` and :class:`FullyConnectedAverager`) live in its
home and are registered with it (:mod:`stsq_learn.registry`): they are
importable from here too.
"""

from __future__ import annotations

import torch
from torch import nn

from .._live_names import live_names
from .attention import Attention as Attention
from .attention import positional_alignment as positional_alignment
from .fully_connected import FullyConnected as FullyConnected
from .task_attention import AttentionSelector as AttentionSelector

_OWN = ["Attention", "AttentionSelector", "FullyConnected", "SquaredError", "positional_alignment"]


def _task_modules():
    """The torch modules the registered tasks export from here, by name."""
    from .. import registry

    return {m.__name__: m for reg in registry.registrations() for m in reg.modules}


__getattr__, __dir__ = live_names(__name__, _task_modules, own=_OWN)


class SquaredError(nn.Module):
    """Mean over output rows of the squared Euclidean error ``||y_hat - y||^2``.

    Parameters
    ----------
    n_members : int or None, default=None
        For the S members of a batched fit (rows member-major, or a list of
        each member's rows): the loss is the sum of the members' means, so
        that each member's gradient is its own fit's; the members' losses
        are kept as ``member_losses_``.
    """

    def __init__(self, n_members=None):
        super().__init__()
        self.n_members = n_members

    def forward(self, y_pred, y_true):
        """Return the loss of a batch.

        Parameters
        ----------
        y_pred : Tensor of shape (n, ..., n_outputs)
            Predictions (members: a list of each member's, where their
            shapes differ).
        y_true : Tensor of the same shape
            Targets.

        Returns
        -------
        Tensor of shape ()
            ``mean ||y_pred[i] - y_true[i]||^2`` over the output rows (a 1-D
            target, one number per row: the mean of the squared errors);
            with members, the sum of every member's.
        """
        if self.n_members is None:
            return _row_errors(y_pred, y_true).mean()
        if isinstance(y_pred, list):
            losses = torch.stack([_row_errors(p, t).mean() for p, t in zip(y_pred, y_true)])
        else:
            losses = _row_errors(y_pred, y_true).reshape(self.n_members, -1).mean(1)
        self.member_losses_ = losses.detach()
        return losses.sum()


def _row_errors(y_pred, y_true):
    """``||y_pred[i] - y_true[i]||^2`` of every output row (a 1-D target: every number)."""
    err = (y_pred - y_true).square()
    return err.sum(-1) if err.dim() > 1 else err
