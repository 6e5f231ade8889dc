"""The two models of the paper as torch modules: the math, and nothing else.

``AttentionSelector`` is the one-layer, single-head softmax attention of Wang,
Wei, Hsu and Lee (2024). Token t is embedded as ``z_t = [x_t ; p_t]`` with a
positional encoding ``p_t`` in ``R^m``; the query is ``z_0 = [0 ; sum_{t in S} p_t]``;
scores are ``a_t = z_t^T W z_0`` and the output is ``sum_t softmax(a)_t x_t``.
Only the columns of W that meet the query's positional part matter, so W is
stored as a ``(d + m, m)`` matrix (rows: token part, then positional part).

``FullyConnected`` is the baseline: the flattened row through ReLU layers.

``AttentionAverager`` and ``FullyConnectedAverager`` are the same two models
on q-sparse averaging (Sanford, Hsu and Telgarsky, 2023), where every position
i has its own subset y_i: the attention layer asks one query per position,
``[0 ; sum_{j in y_i} p_j]``, with the same W and encodings.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn

from ._draws import as_draws
from .encodings import encoding_family, query_scores

__all__ = [
    "AttentionAverager",
    "AttentionSelector",
    "FullyConnected",
    "FullyConnectedAverager",
    "SquaredError",
    "positional_alignment",
]


class AttentionSelector(nn.Module):
    """One-layer single-head softmax attention with positional encodings.

    The module holds W and the forward pass; where the encodings come from
    is its encoding family's business (:attr:`encoding`, an object of
    :mod:`stsq_learn.encodings`).

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}
        The encoding family (see :mod:`stsq_learn.encodings`): fresh draws
        on the sphere for every row at every call; one vector per position;
        a per-row sorted random subset of a codebook of ``max_positions``
        vectors; sines and cosines of the position.
    seq_len : int
        Training length; ``"fixed"`` keeps that many encodings as a buffer.
    encoding_seed : int
        Seed of the fixed encodings and of the codebook.
    learn_token_block : bool, default=True
        False keeps the token rows of W at 0: the forward pass never reads
        them, so they get no gradient and no optimiser moves them (the
        scores are then ``p_t^T W_pp s``, the limit the theory predicts).
    max_positions : int or None, default=None
        Codebook size L of ``"randomized"`` (kept as a buffer); ignored by
        the other families.

    Attributes
    ----------
    encoding : StochasticEncoding, FixedEncoding, RandomizedEncoding or SinusoidalEncoding
        The encoding family; its vectors, if any, are the buffer named
        ``encoding.table_name`` (``fixed_pe`` or ``codebook``).
    """

    # Defaults for modules pickled before these options existed.
    learn_token_block = True
    max_positions = None

    def __init__(
        self,
        n_features,
        width,
        positional_encoding="stochastic",
        seq_len=1,
        encoding_seed=0,
        learn_token_block=True,
        max_positions=None,
    ):
        super().__init__()
        self.n_features = n_features
        self.width = width
        self.positional_encoding = positional_encoding
        self.encoding_seed = encoding_seed
        self.learn_token_block = learn_token_block
        self.encoding = encoding_family(positional_encoding)(width, encoding_seed, max_positions)
        self.max_positions = self.encoding.max_length
        # W = 0: attention starts uniform, as in the theory.
        self.key_query = nn.Parameter(torch.zeros(n_features + width, width))
        table = self.encoding.initial_table(seq_len)
        if table is not None:
            self.register_buffer(self.encoding.table_name, table)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "encoding" not in self.__dict__:  # pickled by stsq-learn 0.3 or earlier
            family = encoding_family(self.positional_encoding)
            self.encoding = family(self.width, self.encoding_seed, self.max_positions)

    def _table(self):
        name = self.encoding.table_name
        return None if name is None else self._buffers[name]

    def encodings(self, n_samples, seq_len, generator=None):
        """Encodings for a batch: (n, T, m) if drawn per row, (T, m) if shared by all rows.

        Parameters
        ----------
        n_samples : int
            Number of rows n.
        seq_len : int
            Number of positions T; fixed encodings beyond the training length
            are drawn prefix-stably from ``encoding_seed``.
        generator : torch.Generator, StreamedDraws or None, default=None
            Source of the stochastic and randomized draws (keyed draws need
            the rows: see :meth:`forward`).

        Returns
        -------
        Tensor of shape (n_samples, seq_len, width) or (seq_len, width)
            Unit vectors on the device and in the dtype of the parameter.
        """
        W = self.key_query
        draws = as_draws(generator)
        return self.encoding.encodings(n_samples, seq_len, draws, self._table(), W.device, W.dtype)

    def _score_rows(self):
        """``(d, rows of W the scores read)``: all of W, or (0, its positional block) if frozen."""
        d = self.n_features if self.learn_token_block else 0
        return d, (self.key_query if d else self.key_query[self.n_features :])

    def _softmax(self, d, u, tokens, pos):
        """Softmax of the scores: the positional part ``pos`` plus the token part.

        ``tokens`` may carry the selection channel last (the whole ``X``): the
        token part of u then gets a 0 for it, which saves copying the tokens
        out of X.
        """
        if not d:
            return torch.softmax(pos, dim=-1)
        u_x = u[:, None, :d]
        if tokens.shape[-1] == d + 1:
            u_x = nn.functional.pad(u_x, (0, 1))
        scores = torch.bmm(u_x, tokens.transpose(1, 2)).squeeze(1) + pos
        return torch.softmax(scores, dim=-1)

    def attention(self, tokens, mask, P):
        """Softmax attention weights of shape (n, T) for encodings ``P``.

        Forms ``u = W z_0`` once per row (n m^2 work), then the scores
        ``[x_t ; p_t]^T u`` (n T (d + m) work); ``W p_t`` is never formed.

        Parameters
        ----------
        tokens : Tensor of shape (n, T, d) or (n, T, d + 1)
            The tokens x_t, optionally followed by the selection channel (the
            whole X), which the scores ignore.
        mask : Tensor of shape (n, T)
            Selection indicator, 0.0 or 1.0.
        P : Tensor of shape (n, T, m) or (T, m)
            Positional encodings, per row or shared by all rows.

        Returns
        -------
        Tensor of shape (n, T)
            Attention weights; every row sums to 1.
        """
        d, W = self._score_rows()
        u, pos = query_scores(W, d, mask, P)
        return self._softmax(d, u, tokens, pos)

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling="marginal"):
        """Predict the selected mean for a batch ``X`` of shape (n, T, d + 1).

        With encodings drawn per call (stochastic, randomized) the attention
        is averaged over ``n_pe_samples`` draws.

        Parameters
        ----------
        X : Tensor of shape (n, T, d + 1)
            Tokens, then the selection indicator in the last channel.
        generator : torch.Generator, StreamedDraws, KeyedDraws or None, default=None
            Source of the drawn encodings: a generator (or None, torch's
            global one) streams them, so what a row gets depends on the
            batch; :class:`~stsq_learn.encodings.KeyedDraws` computes them
            from each row's bytes, so a row's output depends on that row only
            (what the estimators' ``predict`` uses).
        n_pe_samples : int, default=1
            Number of encoding draws the attention is averaged over (ignored
            by the deterministic families).
        pe_sampling : {"marginal", "full"}, default="marginal"
            How stochastic encodings are drawn: only what the scores need,
            or every vector. Ignored by the other families.

        Returns
        -------
        Tensor of shape (n, d)
            The attention-weighted average of the tokens.
        """
        # The products below read the tokens in X itself, whose last channel
        # (the selection) gets weight 0 in the scores and is dropped from the
        # output: copying the tokens out of X cost as much as a tenth of a step.
        X = X.contiguous()
        tokens, mask = X, X[..., -1].contiguous()

        def weights(d, W, draws, table):
            u, pos = self.encoding.scores(W, d, mask, draws, table, pe_sampling)
            return self._softmax(d, u, tokens, pos)

        attn = self._mean_attention(X, generator, n_pe_samples, weights)
        return torch.bmm(attn.unsqueeze(1), tokens).squeeze(1)[:, :-1]

    def _mean_attention(self, X, generator, n_pe_samples, weights):
        """Attention weights averaged over the encoding draws of a forward pass.

        ``weights(d, W, draws, table)`` gives one draw's weights from the rows
        of W the scores read and that draw's source; the deterministic
        families have one draw.
        """
        draws = as_draws(generator)
        n_draws = n_pe_samples if self.encoding.drawn else 1
        if self.encoding.drawn:
            draws = draws.for_rows(X)  # keyed draws: each row's key, from its bytes
        if n_draws > 1 and torch.is_grad_enabled():
            draws = draws.without_reuse()  # each draw's encodings stay in the graph
        d, W = self._score_rows()
        table = self._table()
        attn = None
        for k in range(n_draws):
            w = weights(d, W, draws.for_draw(k), table)
            attn = w if attn is None else attn + w
        return attn / n_draws if n_draws > 1 else attn

    def elements_per_row(self, seq_len, pe_sampling="marginal", n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Length T of the rows.
        pe_sampling : {"marginal", "full"}, default="marginal"
            The sampler of stochastic encodings: the marginal one holds no
            ``T * width`` array.
        n_selected : int or None, default=None
            The largest number of selected positions in a row; None bounds
            it by the width.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        return self.encoding.elements_per_row(seq_len, self.n_features, pe_sampling, n_selected)


def _relu_layers(n_in, hidden, n_out):
    """``Linear`` + ``ReLU`` for every size of ``hidden``, then a linear output of ``n_out``."""
    sizes = [n_in, *hidden]
    layers = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(sizes[-1], n_out))
    return nn.Sequential(*layers)


class FullyConnected(nn.Module):
    """The fully-connected baseline on the flattened row.

    Parameters
    ----------
    seq_len, n_features : int
        Shape of a row; the input has ``seq_len * (n_features + 1)`` numbers.
    width : int
        Units of the first hidden layer (ReLU).
    extra_hidden_layers : tuple of int
        Sizes of further ReLU hidden layers.
    """

    def __init__(self, seq_len, n_features, width, extra_hidden_layers=()):
        super().__init__()
        self.width = width
        self.layers = _relu_layers(
            seq_len * (n_features + 1), (width, *extra_hidden_layers), n_features
        )

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling=None):
        """Predict the selected mean from the flattened batch ``X``.

        Parameters
        ----------
        X : Tensor of shape (n, seq_len, n_features + 1)
            Tokens, then the selection indicator in the last channel.
        generator : torch.Generator or None, default=None
            Unused; accepted so that both models share one call signature.
        n_pe_samples, pe_sampling : int, str or None
            Unused; accepted so that both models share one call signature.

        Returns
        -------
        Tensor of shape (n, n_features)
            The predictions.
        """
        return self.layers(X.flatten(1))

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Length T of the rows (the training length).
        pe_sampling, n_selected : None
            Unused; accepted so that both models share one call signature.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        return seq_len * self.width + self.layers[0].in_features


class AttentionAverager(AttentionSelector):
    """The attention layer of :class:`AttentionSelector` with one query per position.

    For q-sparse averaging: row ``X`` of shape (N, d + q) holds the tokens
    and, for every position i, the indices of its subset y_i. Query i is
    ``[0 ; s_i]`` with ``s_i = sum_{j in y_i} p_j``, ``u_i = W [0 ; s_i]``, the
    scores are ``a_ij = [x_j ; p_j]^T u_i`` and output i is
    ``sum_j softmax_j(a_i.) x_j``. Every query is a sparse token selection
    query over the same tokens and encodings, so a W trained on either task
    serves both (same parameters and buffers as :class:`AttentionSelector`).

    Every encoding is drawn (each position belongs to some subset), so a
    forward pass costs ``n N m`` draws, ``n N q m`` to sum the queries,
    ``n N m (d + m)`` for the ``u_i`` and ``n N^2 (d + m)`` for the scores,
    with ``n N^2`` attention weights held: the exact law's cost.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}
        The encoding family, as in :class:`AttentionSelector`.
    seq_len : int
        Training length; ``"fixed"`` keeps that many encodings as a buffer.
    encoding_seed : int
        Seed of the fixed encodings and of the codebook.
    learn_token_block : bool, default=True
        False keeps the token rows of W at 0.
    max_positions : int or None, default=None
        Codebook size of ``"randomized"``.

    Attributes
    ----------
    encoding : StochasticEncoding, FixedEncoding, RandomizedEncoding or SinusoidalEncoding
        The encoding family.
    """

    def _averaging_weights(self, d, W, tokens, index, P):
        """Attention weights (n, N, N): query i's softmax over the positions j."""
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
        u = s @ W.T  # (n, N, d + m): one query per position
        scores = u[..., d:] @ P_t
        if d:
            scores = scores + u[..., :d] @ tokens.transpose(1, 2)
        return torch.softmax(scores, dim=-1)

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling=None):
        """The q-sparse averages of a batch ``X`` of shape (n, N, d + q).

        Parameters
        ----------
        X : Tensor of shape (n, N, d + q)
            Tokens, then each position's subset as indices (floats).
        generator : torch.Generator, StreamedDraws, KeyedDraws or None, default=None
            Source of the drawn encodings, as in :meth:`AttentionSelector.forward`.
        n_pe_samples : int, default=1
            Number of encoding draws the attention is averaged over (ignored
            by the deterministic families).
        pe_sampling : str or None, default=None
            Unused: every position's encoding is drawn.

        Returns
        -------
        Tensor of shape (n, N, d)
            Output i is the attention-weighted average of the tokens for query i.
        """
        X = X.contiguous()
        n, N, _ = X.shape
        tokens = X[..., : self.n_features]
        index = X[..., self.n_features :].long()

        def weights(d, W, draws, table):
            P = self.encoding.encodings(n, N, draws, table, W.device, W.dtype)
            return self._averaging_weights(d, W, tokens, index, P)

        return self._mean_attention(X, generator, n_pe_samples, weights) @ tokens

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Number of positions N.
        pe_sampling, n_selected : object
            Unused.

        Returns
        -------
        int
            An upper estimate: the encodings and their draws, the queries,
            the scores and the weights.
        """
        m, d = self.width, self.n_features
        return seq_len * (8 * m + 3 * seq_len + 3 * d + 8)


class FullyConnectedAverager(nn.Module):
    """The fully-connected baseline on q-sparse averaging.

    Each position contributes its token and its subset as an N-long 0/1
    indicator (the form the selection channel has in sparse token
    selection; raw indices would make the net decode integers), so the
    flattened input has ``N (d + N)`` numbers. Then ReLU layers and a linear
    output of ``N d`` numbers, one row per position. Sanford, Hsu and
    Telgarsky prove such a net needs first-layer width about ``N d / 2``.

    Parameters
    ----------
    seq_len, n_features : int
        Number of positions N and token dimension d.
    width : int
        Units of the first hidden layer (ReLU).
    extra_hidden_layers : tuple of int
        Sizes of further ReLU hidden layers.
    """

    def __init__(self, seq_len, n_features, width, extra_hidden_layers=()):
        super().__init__()
        self.seq_len, self.n_features, self.width = seq_len, n_features, width
        self.layers = _relu_layers(
            seq_len * (n_features + seq_len), (width, *extra_hidden_layers), seq_len * n_features
        )

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling=None):
        """Predict every position's average from the flattened batch.

        Parameters
        ----------
        X : Tensor of shape (n, seq_len, n_features + q)
            Tokens, then each position's subset as indices.
        generator, n_pe_samples, pe_sampling : object
            Unused; accepted so that every model shares one call signature.

        Returns
        -------
        Tensor of shape (n, seq_len, n_features)
            The predictions.
        """
        n, N, _ = X.shape
        d = self.n_features
        index = X[..., d:].long()
        indicator = torch.zeros(n, N, N, device=X.device, dtype=X.dtype)
        indicator.scatter_(2, index, 1.0)
        flat = torch.cat([X[..., :d], indicator], dim=2).flatten(1)
        return self.layers(flat).view(n, N, d)

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Number of positions N (the training length).
        pe_sampling, n_selected : object
            Unused.

        Returns
        -------
        int
            An upper estimate: the input with its indicators, and the first layer.
        """
        return seq_len * (self.n_features + 2 * seq_len) + self.width


class SquaredError(nn.Module):
    """Mean over rows of the squared Euclidean error ``||y_hat - y||^2``."""

    def forward(self, y_pred, y_true):
        """Return the loss of a batch.

        Parameters
        ----------
        y_pred : Tensor of shape (n, n_features)
            Predictions.
        y_true : Tensor of shape (n, n_features)
            Targets.

        Returns
        -------
        Tensor of shape ()
            ``mean_i ||y_pred[i] - y_true[i]||^2``.
        """
        return (y_pred - y_true).square().sum(-1).mean()


def positional_alignment(key_query, n_features):
    """How close the positional block of W is to a multiple of the identity.

    Parameters
    ----------
    key_query : array-like of shape (n_features + m, m)
        The learned W, token rows first.
    n_features : int
        Token dimension d.

    Returns
    -------
    dict
        ``cos`` = tr(W_pp) / (sqrt(m) ||W_pp||_F), the cosine between W_pp and
        the identity; ``gamma`` = tr(W_pp) / m; ``token_norm`` = ||W_xp||_F,
        the norm of the token block (it stays near 0 under SPE training).
    """
    W = np.asarray(key_query, dtype=np.float64)
    W_pp, W_xp = W[n_features:], W[:n_features]
    m = W_pp.shape[0]
    fro = np.linalg.norm(W_pp)
    tr = float(np.trace(W_pp))
    return {
        "cos": tr / (math.sqrt(m) * fro) if fro > 0 else 0.0,
        "gamma": tr / m,
        "token_norm": float(np.linalg.norm(W_xp)),
    }
