"""The torch module of sparse-token classification (exported by :mod:`stsq_learn.nn`).

:class:`AttentionClassifier` is the single-layer attention classifier of
Barnfield, Cui and Lu (ICLR 2026): a query vector scores every token, a
softmax over the tokens weighs them, and a linear readout of the weighted
token gives the logits. Its parameters are plain tensors and every product
is an ``einsum`` over named axes (``n`` rows, ``l`` tokens, ``d`` features,
``k`` classes). The seeds of a batched fit (:mod:`stsq_learn.engine.members`)
train as one module with a leading member axis on every parameter
(:meth:`AttentionClassifier.stacked`), each member's rows through its own
parameters by the single module's expression
(:func:`stsq_learn.nn.members.per_member`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...nn.members import per_member, stack

__all__ = ["AttentionClassifier"]


class AttentionClassifier(nn.Module):
    """``f(X) = <w, sum_l softmax_l(<x_l, q>) x_l> + b``: the logits of a row of tokens.

    One logit per row for two classes (``readout`` of shape ``(d,)``,
    ``intercept`` ``(1,)``: the logit of the second class against the
    first), one per class for more (``readout`` ``(n_classes, d)``,
    ``intercept`` ``(n_classes,)``: a softmax readout over a shared query).

    Parameters
    ----------
    n_features : int
        Token dimension d.
    n_classes : int, default=2
        Number of classes (at least 2).
    query_std : float, default=0.0
        Standard deviation of the query's entries at initialisation, drawn
        from torch's global generator (0: the query starts at 0, uniform
        attention). The readout and intercept start at 0.

    Attributes
    ----------
    query : Parameter of shape (n_features,)
        ``q``.
    readout : Parameter of shape (n_features,) or (n_classes, n_features)
        ``w``.
    intercept : Parameter of shape (1,) or (n_classes,)
        ``b``.
    n_members : int or None
        None; S for the members of a batched fit stacked by :meth:`stacked`
        (every parameter then has a leading axis S).
    """

    n_members = None

    def __init__(self, n_features, n_classes=2, query_std=0.0):
        super().__init__()
        self.n_features, self.n_classes = n_features, n_classes
        outputs = () if n_classes == 2 else (n_classes,)
        query = torch.zeros(n_features)
        if query_std and query.device.type != "meta":  # on the meta device: shapes only
            query = torch.randn(n_features).mul_(query_std)
        self.query = nn.Parameter(query)
        self.readout = nn.Parameter(torch.zeros(*outputs, n_features))
        self.intercept = nn.Parameter(torch.zeros(outputs or (1,)))

    def attention(self, X):
        """The weights ``softmax_l(<x_l, q>)`` of each row over its tokens.

        Parameters
        ----------
        X : Tensor of shape (n, L, d)
            Rows of tokens.

        Returns
        -------
        Tensor of shape (n, L)
            Each row sums to 1.
        """
        return _attention(X, self.query)

    @classmethod
    def stacked(cls, modules):
        """The members of a batched fit as one module (:func:`stsq_learn.nn.members.stack`).

        Parameters
        ----------
        modules : list of AttentionClassifier
            The members, each as its single fit made it (one number of classes).

        Returns
        -------
        AttentionClassifier
            One module whose ``query``, ``readout`` and ``intercept`` have a
            leading member axis; member s's rows (member-major) are scored
            and read out with its own.
        """
        return stack(modules)

    def forward(self, X, generator=None):
        """The logits of the rows.

        Parameters
        ----------
        X : Tensor of shape (n, L, d)
            Rows of tokens, at any length (stacked members: ``S * n`` rows,
            member-major).
        generator : object, default=None
            Unused (the module draws nothing); accepted as every module of
            the package takes the draws of its forward pass.

        Returns
        -------
        Tensor of shape (n,) or (n, n_classes)
            One logit per row (two classes), or one per class.
        """
        weights = (self.query, self.readout, self.intercept)
        if self.n_members is None:
            return self._logits(X, *weights)
        return per_member(self._logits, X, *weights)

    def _logits(self, X, query, readout, intercept):
        """The logits of rows ``X`` with one model's parameters."""
        pooled = torch.einsum("nl,nld->nd", _attention(X, query), X)
        if self.n_classes == 2:
            return torch.einsum("nd,d->n", pooled, readout) + intercept[0]
        return torch.einsum("nd,kd->nk", pooled, readout) + intercept

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks and the memory check).

        Parameters
        ----------
        seq_len : int
            Length L of the rows.
        pe_sampling, n_selected : None
            Unused; accepted so that every model shares one call signature.

        Returns
        -------
        int
            The row, its scores and weights, the pooled token and the logits.
        """
        d = self.n_features
        return seq_len * (d + 2) + d + self.n_classes


def _attention(X, query):
    """``softmax_l(<x_l, q>)`` of rows ``X`` (n, L, d) for one query (d,)."""
    return torch.softmax(torch.einsum("nld,d->nl", X, query), dim=1)


def initial_query_std(n_features):
    """The query's standard deviation at initialisation for joint training: ``1e-2 / sqrt(d)``."""
    return 1e-2 / math.sqrt(n_features)
