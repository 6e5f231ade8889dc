"""Query structures: which positions' encodings form each query of the attention model.

A task says how its rows are read by giving one of three structures for a
batch (:meth:`stsq_learn.Task.queries`); the attention module
(:mod:`stsq_learn.nn`) asks it for every head's attention weights and for the
weighted average of the tokens. With positional encodings ``p_t`` in
``R^m`` and, for head h, a key-query matrix ``W_h`` of shape
``(d + m, n_slots * m)`` (token rows, then positional rows):

- :class:`Selection` (sparse token selection): one query per row, the sum
  of the encodings of the selected positions, ``s = sum_{t in S} p_t``;
  ``u_h = W_h s`` and the score of t is ``[x_t ; p_t]^T u_h``.
- :class:`Subsets` (q-sparse averaging): one query per position i, the sum
  over its own subset, ``s_i = sum_{j in y_i} p_j``.
- :class:`Slots` (q-sparse token retrieval): one query per row whose slots
  hold the encodings of the named positions in role order,
  ``z = [p_{t_1} ; ... ; p_{t_q}]``.

``W p_t`` is never formed: each query gives ``u = W z`` once, and the scores
are products with it. With stochastic encodings and ``sampling="marginal"``
(:class:`Selection` and :class:`Slots`) only the encodings a query is made
of are drawn: an encoding no query reads is independent of every query, so
its scores on the H directions ``u_1 .. u_H`` have the law of ``c^T R``,
with ``c`` the first H coordinates of a uniform unit vector and ``R`` the
triangular factor of the ``u_h`` (``u_h = sum_j R_jh e_j`` for orthonormal
``e_j``): H numbers per position instead of m.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .._docstrings import Substitution
from .members import linear

__all__ = ["Selection", "Slots", "Subsets", "query_scores"]

_MARKS = """\
Parameters
----------
marks : ndarray of shape (n, T, c)
    The channels after the token features of rows a task samples (T positions, c channels).

Returns
-------
str or None
    The problem, as the end of a sentence; None when the marks are valid."""


def query_scores(W, d, mask, P):
    """``(u, pos)``: the query ``u = W z_0`` (n, d + m) and the positional scores (n, T).

    ``W`` holds the rows of the key-query matrix the scores read (token rows
    first when ``d > 0``); ``P`` the encodings, per row (n, T, m) or shared
    by all rows (T, m). ``W p_t`` is never formed: u is one row vector per
    row, and every product a row vector times a matrix.
    """
    return _head_scores(_mask_sum(mask, P), W, d, P)


def _mask_sum(mask, P):
    """``s = sum_t mask_t p_t`` for every row: (n, m) for shared encodings, (n, 1, m) per row."""
    return mask @ P if P.dim() == 2 else torch.bmm(mask.unsqueeze(1), P)


def _head_scores(s, W, d, P):
    """``(u, pos)`` of one head from its query ``s``, (n, m') or (n, 1, m'), and encodings ``P``."""
    u = linear(s, W)
    if u.dim() == 3 and P.dim() == 2:
        u = u.squeeze(1)
    if u.dim() == 2:
        return u, u[:, d:] @ P.T
    pos = torch.bmm(u[:, :, d:], P.transpose(1, 2)).squeeze(1)
    return u.squeeze(1), pos


def softmax(d, u, tokens, pos, scale=None):
    """Softmax over positions of the scores: the positional part ``pos`` plus the token part.

    ``tokens`` may carry one marker channel last (the whole ``X``): the token
    part of u then gets a 0 for it, which saves copying the tokens out of X.
    ``scale`` (a number, or one per row) multiplies the scores first.
    """
    if d:
        u_x = u[:, None, :d]
        if tokens.shape[-1] == d + 1:
            u_x = nn.functional.pad(u_x, (0, 1))
        pos = torch.bmm(u_x, tokens.transpose(1, 2)).squeeze(1) + pos
    if scale is not None:
        pos = pos * (scale.unsqueeze(-1) if torch.is_tensor(scale) else scale)
    return torch.softmax(pos, dim=-1)


def triangular_factor(U):
    """``R`` (n, H, H), upper triangular, with ``u_h = sum_j R[:, j, h] e_j`` for orthonormal e.

    Gram-Schmidt on the rows of ``U`` (n, H, m); a zero direction (W = 0 at
    the start) gets a zero column and a zero gradient, not NaN.
    """
    n, H, _ = U.shape
    tiny = torch.finfo(U.dtype).tiny
    basis, columns = [], []
    for h in range(H):
        u = U[:, h]
        coefficients = [(e * u).sum(-1) for e in basis]
        v = u
        for e, r in zip(basis, coefficients):
            v = v - r[:, None] * e
        norm = (v * v).sum(-1).add(tiny).sqrt()
        basis.append(v / norm[:, None])
        column = [*coefficients, norm, *([U.new_zeros(n)] * (H - h - 1))]
        columns.append(torch.stack(column, dim=1))
    return torch.stack(columns, dim=2)


def _unread_scores(U_p, draws, n, T, width, device, dtype):
    """Positional scores (n, T, H) on the directions ``U_p`` (n, H, m) of encodings no query reads.

    One head: ``||u|| c`` with c one coordinate of a uniform unit vector (the
    sampler of sparse token selection). Several: ``c^T R`` with c the first
    H coordinates (:func:`triangular_factor`).
    """
    H = U_p.shape[1]
    if H == 1:
        c = draws.coordinates(n, T, width, device, dtype)
        return (torch.linalg.vector_norm(U_p[:, 0], dim=-1)[:, None] * c).unsqueeze(-1)
    C = draws.joint_coordinates(n, T, width, H, device, dtype)
    return torch.bmm(C, triangular_factor(U_p))


class _OneQuery:
    """One query per row, built from the encodings of some positions: shared machinery.

    Subclasses give :meth:`_read_positions` (the positions a query reads and
    their weights) and :meth:`_query` (the query from those encodings).
    """

    def __init__(self, X, n_features):
        self.tokens = X  # the tokens, with one marker channel last
        self.n_features = n_features

    def _read_positions(self):  # pragma: no cover - abstract
        """``(where, weights)``: positions (n, K) the query reads, their weights (None: all 1)."""
        raise NotImplementedError

    def _query(self, P_read, weights):  # pragma: no cover - abstract
        """The query (n, 1, n_slots * m) from the read encodings ``P_read`` (n, K, m)."""
        raise NotImplementedError

    def attention(self, Ws, d, family, draws, table, sampling="marginal", scale=None):
        """Every head's attention weights (n, T): one draw of the encodings, all heads.

        Parameters
        ----------
        Ws : list of Tensor of shape (d + m, n_slots * m)
            The rows of each head's key-query matrix the scores read; with a
            leading member axis S for stacked members (rows member-major:
            :mod:`stsq_learn.nn.members`).
        d : int
            Token rows in each of ``Ws`` (0 when the token block is frozen).
        family : encoding family
            Of :mod:`stsq_learn.encodings`.
        draws : StreamedDraws or KeyedDraws
            Source of the draws, keyed by the rows if keyed.
        table : Tensor or None
            The module's encoding buffer.
        sampling : {"marginal", "full"}, default="marginal"
            How stochastic encodings are drawn.
        scale : Tensor of shape (n,), float or None, default=None
            Multiplies every score of a row (the length-aware scale).

        Returns
        -------
        list of Tensor of shape (n, T)
            Per head, the softmax weights of each row's query.
        """
        W0 = Ws[0]
        n, T = self.tokens.shape[:2]
        width = family.width
        if family.marginal and sampling == "marginal" and (len(Ws) == 1 or len(Ws) < width):
            return self._marginal(Ws, d, draws, n, T, width, scale)
        P = family.encodings(n, T, draws, table, W0.device, W0.dtype)
        s = self._full_query(P)
        out = []
        for W in Ws:
            u, pos = _head_scores(s, W, d, P)
            out.append(softmax(d, u, self.tokens, pos, scale))
        return out

    def _full_query(self, P):
        """The query from all encodings ``P`` (shared (T, m) or per row (n, T, m))."""
        where, weights = self._read_positions()
        rows = torch.arange(where.shape[0], device=P.device)[:, None]
        return self._query(P[where] if P.dim() == 2 else P[rows, where], weights)

    def _marginal(self, Ws, d, draws, n, T, width, scale):
        """Draw only the read encodings; the other positions' scores by their law."""
        where, weights = self._read_positions()
        W0 = Ws[0]
        P_read = draws.sphere(where, width, W0.device, W0.dtype, read=weights)
        s = self._query(P_read, weights)
        us = [linear(s, W) for W in Ws]  # (n, 1, d + m) each
        U_p = torch.cat([u[:, :, d:] for u in us], dim=1)  # (n, H, m)
        pos_all = _unread_scores(U_p, draws, n, T, width, W0.device, W0.dtype)
        out = []
        for h, u in enumerate(us):
            pos = pos_all[..., h]
            read = torch.bmm(u[:, :, d:], P_read.transpose(1, 2)).squeeze(1)  # (n, K)
            if weights is not None:
                read = torch.where(weights > 0, read, pos.gather(1, where))
            pos = pos.scatter(1, where, read)
            out.append(softmax(d, u.squeeze(1), self.tokens, pos, scale))
        return out

    def read(self, attn):
        """The attention-weighted average of the tokens.

        Parameters
        ----------
        attn : Tensor of shape (n, T)
            One head's attention weights.

        Returns
        -------
        Tensor of shape (n, n_features)
            The head's output.
        """
        return torch.bmm(attn.unsqueeze(1), self.tokens).squeeze(1)[:, : self.n_features]

    @staticmethod
    def elements_per_row(family, seq_len, n_features, sampling, n_read):
        """Floats a head's forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        family : encoding family
            The encodings.
        seq_len, n_features : int
            Length and token dimension of the rows.
        sampling : {"marginal", "full"}
            The sampler of stochastic encodings.
        n_read : int or None
            The most positions a query reads (None: unknown).

        Returns
        -------
        int
            Floats per row.
        """
        return family.elements_per_row(seq_len, n_features, sampling, n_read)


class Selection(_OneQuery):
    """One query per row, the sum of the encodings of the selected positions.

    Parameters
    ----------
    X : Tensor of shape (n, T, n_features + 1)
        Tokens, then the selection indicator (0.0 or 1.0), contiguous.
    n_features : int
        Token dimension d.
    """

    def __init__(self, X, n_features):
        super().__init__(X, n_features)
        self.mask = X[..., -1].contiguous()

    @staticmethod
    def query_sizes(X):
        """Encodings summed into each row's query: its number of selected positions.

        Parameters
        ----------
        X : Tensor of shape (n, T, n_features + 1)
            Rows, the selection indicator last.

        Returns
        -------
        Tensor of shape (n,)
            Each row's q.
        """
        return X[..., -1].sum(dim=1)

    @staticmethod
    @Substitution(marks=_MARKS)
    def check_marks(marks):
        """What is wrong with marker channels ``marks`` (n, T, c) of rows, or None.

        {marks}
        """
        if marks.shape[-1] != 1:
            return f"are {marks.shape[-1]}, not the one selection indicator"
        if not np.isin(marks, (0.0, 1.0)).all() or (marks.sum(axis=(1, 2)) == 0).any():
            return "are not a selection indicator (0.0 or 1.0, a 1.0 in every row)"
        return None

    def _read_positions(self):
        # The selected positions first, each set in increasing order, then padding (weight 0).
        mask = self.mask
        T = mask.shape[1]
        q_max = int(mask.sum(dim=1).max())
        rank = mask * (2 * T) - torch.arange(T, device=mask.device, dtype=mask.dtype)
        where = rank.topk(q_max, dim=1).indices
        return where, mask.gather(1, where)

    def _query(self, P_read, weights):
        return torch.bmm(weights.unsqueeze(1), P_read)

    def _full_query(self, P):
        return _mask_sum(self.mask, P)


class Slots(_OneQuery):
    """One query per row whose slots hold the named positions' encodings, in role order.

    Parameters
    ----------
    X : Tensor of shape (n, T, n_features + 1)
        Tokens, then the role channel (0: not named, j: the position of role j).
    n_features : int
        Token dimension d.
    where : Tensor of shape (n, q), dtype int64
        The position of each role.
    """

    def __init__(self, X, n_features, where):
        super().__init__(X, n_features)
        self.where = where

    @staticmethod
    @Substitution(marks=_MARKS)
    def check_marks(marks):
        """What is wrong with marker channels ``marks`` (n, T, c) of rows, or None.

        {marks}
        """
        if marks.shape[-1] != 1:
            return f"are {marks.shape[-1]}, not the one role channel"
        if not ((marks >= 0) & (marks == np.round(marks))).all() or not (marks > 0).any(1).all():
            return "are not roles (0 or a role number j >= 1, a named position in every row)"
        return None

    def _read_positions(self):
        return self.where, None

    def _query(self, P_read, weights):
        return P_read.flatten(1).unsqueeze(1)  # (n, 1, q m): the slots side by side


class Subsets:
    """One query per position i: the sum of the encodings of its subset ``y_i``.

    Every encoding is drawn (each position is in some subset): the exact
    law's cost, ``n N m`` draws and ``n N^2 (d + m)`` for the scores, with
    ``n N^2`` attention weights held.

    Parameters
    ----------
    X : Tensor of shape (n, N, n_features + q)
        Tokens, then each position's subset as indices (floats), contiguous.
    n_features : int
        Token dimension d.
    """

    @staticmethod
    @Substitution(marks=_MARKS)
    def check_marks(marks):
        """What is wrong with marker channels ``marks`` (n, N, q) of rows, or None.

        {marks}
        """
        N = marks.shape[1]
        if not ((marks >= 0) & (marks < N) & (marks == np.round(marks))).all():
            return f"are not subsets of the {N} positions (indices 0 .. {N - 1})"
        return None

    def __init__(self, X, n_features):
        self.tokens = X[..., :n_features]
        self.index = X[..., n_features:].long()
        self.n_features = n_features

    def attention(self, Ws, d, family, draws, table, sampling=None, scale=None):
        """Every head's attention weights (n, N, N): query i's softmax over the positions j.

        Parameters
        ----------
        Ws : list of Tensor of shape (d + m, m)
            The rows of each head's key-query matrix the scores read (with a
            leading member axis for stacked members).
        d : int
            Token rows in each of ``Ws`` (0 when the token block is frozen).
        family : encoding family
            Of :mod:`stsq_learn.encodings`.
        draws : StreamedDraws or KeyedDraws
            Source of the draws, keyed by the rows if keyed.
        table : Tensor or None
            The module's encoding buffer.
        sampling : str or None, default=None
            Unused: every encoding is in some subset, so all are drawn.
        scale : Tensor of shape (n,), float or None, default=None
            Multiplies every score of a row (the length-aware scale).

        Returns
        -------
        list of Tensor of shape (n, N, N)
            Per head, query i's softmax weights over the positions j.
        """
        n, N = self.index.shape[:2]
        W0 = Ws[0]
        P = family.encodings(n, N, draws, table, W0.device, W0.dtype)
        index = self.index
        if P.dim() == 2:
            s = P[index[..., 0]]
            for k in range(1, index.shape[-1]):
                s = s + P[index[..., k]]
            P_t = P.T
        else:
            rows = torch.arange(len(P), device=P.device)[:, None]
            s = P[rows, index[..., 0]]
            for k in range(1, index.shape[-1]):
                s = s + P[rows, index[..., k]]
            P_t = P.transpose(1, 2)
        out = []
        for W in Ws:
            u = linear(s, W)  # (n, N, d + m): one query per position
            scores = u[..., d:] @ P_t
            if d:
                scores = scores + u[..., :d] @ self.tokens.transpose(1, 2)
            if scale is not None:
                scores = scores * (scale.view(-1, 1, 1) if torch.is_tensor(scale) else scale)
            out.append(torch.softmax(scores, dim=-1))
        return out

    def read(self, attn):
        """Output i: the average of the tokens for query i.

        Parameters
        ----------
        attn : Tensor of shape (n, N, N)
            One head's attention weights, a row per query.

        Returns
        -------
        Tensor of shape (n, N, n_features)
            The head's output at every position.
        """
        return attn @ self.tokens

    @staticmethod
    def elements_per_row(family, seq_len, n_features, sampling, n_read):
        """Floats a head's forward pass holds per row: the encodings and their draws, the
        queries, the scores and the weights.

        Parameters
        ----------
        family : encoding family
            The encodings.
        seq_len, n_features : int
            Length and token dimension of the rows.
        sampling : {"marginal", "full"}
            Unused: every encoding is drawn.
        n_read : int or None
            Unused: a query reads q positions, every position is read.

        Returns
        -------
        int
            Floats per row.
        """
        m, d = family.width, n_features
        return seq_len * (8 * m + 3 * seq_len + 3 * d + 8)
