"""The two models of the paper as torch modules: the math, and nothing else.

``AttentionSelector`` is the one-layer, single-head softmax attention of Wang,
Wei, Hsu and Lee (2024). Token t is embedded as ``z_t = [x_t ; p_t]`` with a
positional encoding ``p_t`` in ``R^m``; the query is ``z_0 = [0 ; sum_{t in S} p_t]``;
scores are ``a_t = z_t^T W z_0`` and the output is ``sum_t softmax(a)_t x_t``.
Only the columns of W that meet the query's positional part matter, so W is
stored as a ``(d + m, m)`` matrix (rows: token part, then positional part).

``FullyConnected`` is the baseline: the flattened row through ReLU layers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn

from .encodings import (
    fixed_encodings,
    randomized_positions,
    sinusoidal_encodings,
    sphere_coordinates,
    sphere_encodings,
)

__all__ = [
    "AttentionSelector",
    "FullyConnected",
    "SquaredError",
    "positional_alignment",
]


class AttentionSelector(nn.Module):
    """One-layer single-head softmax attention with positional encodings.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}
        Where the encodings come from (see :mod:`stsq_learn.encodings`):
        fresh draws on the sphere for every row at every call; one vector
        per position; a per-row sorted random subset of a codebook of
        ``max_positions`` vectors; sines and cosines of the position.
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
        # W = 0: attention starts uniform, as in the theory.
        self.key_query = nn.Parameter(torch.zeros(n_features + width, width))
        self.fixed_pe = self.codebook = None
        if positional_encoding == "fixed":
            del self.fixed_pe
            self.register_buffer("fixed_pe", _fixed_buffer(seq_len, width, encoding_seed))
        elif positional_encoding == "randomized":
            del self.codebook
            self.max_positions = int(max_positions)
            self.register_buffer("codebook", _fixed_buffer(max_positions, width, encoding_seed))

    def encodings(self, n_samples, seq_len, generator=None, workspace=None):
        """Encodings for a batch: (n, T, m) if drawn per row, (T, m) if shared by all rows.

        Parameters
        ----------
        n_samples : int
            Number of rows n.
        seq_len : int
            Number of positions T; fixed encodings beyond the training length
            are drawn prefix-stably from ``encoding_seed``.
        generator : torch.Generator or None, default=None
            Source of the stochastic and randomized draws.
        workspace : dict or None, default=None
            Owned by the caller, it lets stochastic encodings reuse one buffer
            across calls: a call overwrites the encodings the previous call
            returned, so pass it only when those are no longer needed (the
            training loop passes one per fit, used after each backward).

        Returns
        -------
        Tensor of shape (n_samples, seq_len, width) or (seq_len, width)
            Unit vectors on the device and in the dtype of the parameter.
        """
        W = self.key_query
        kind = self.positional_encoding
        if kind == "fixed":
            if seq_len <= self.fixed_pe.shape[0]:
                return self.fixed_pe[:seq_len]
            return fixed_encodings(
                seq_len, self.width, self.encoding_seed, device=W.device, dtype=W.dtype
            )
        if kind == "sinusoidal":
            return sinusoidal_encodings(seq_len, self.width, device=W.device, dtype=W.dtype)
        if kind == "randomized":
            idx = randomized_positions(
                n_samples, seq_len, self.max_positions, generator=generator, device=W.device
            )
            return self.codebook[idx]
        out = None
        if workspace is not None:
            buf = workspace.get("pe")
            if (
                buf is None
                or buf.shape[0] < n_samples
                or buf.shape[1:] != (seq_len, self.width)
                or buf.dtype != W.dtype
                or buf.device != W.device
            ):
                buf = torch.empty(n_samples, seq_len, self.width, device=W.device, dtype=W.dtype)
                workspace["pe"] = buf
            out = buf[:n_samples]
        return sphere_encodings(
            n_samples,
            seq_len,
            self.width,
            generator=generator,
            device=W.device,
            dtype=W.dtype,
            out=out,
        )

    def _score_rows(self):
        """``(d, rows of W the scores read)``: all of W, or (0, its positional block) if frozen."""
        d = self.n_features if self.learn_token_block else 0
        return d, (self.key_query if d else self.key_query[self.n_features :])

    def _query(self, P_selected, mask_or_valid):
        """``(d, u = W z_0)`` for the query ``z_0 = [0 ; sum of the selected p_t]``."""
        d, W = self._score_rows()
        s = torch.bmm(mask_or_valid.unsqueeze(1), P_selected)  # (n, 1, m)
        return d, s @ W.T

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
        Every product is a row vector times a matrix (``u^T P^T``), the
        order the batched BLAS kernels run fastest.

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
        if P.dim() == 2:
            d, W = self._score_rows()
            u = (mask @ P) @ W.T  # (n, d + m)
            return self._softmax(d, u, tokens, u[:, d:] @ P.T)
        d, u = self._query(P, mask)
        pos = torch.bmm(u[:, :, d:], P.transpose(1, 2)).squeeze(1)
        return self._softmax(d, u.squeeze(1), tokens, pos)

    def marginal_attention(self, tokens, mask, generator=None):
        """Attention weights of stochastic encodings, drawing only what the scores need.

        The selected positions' encodings are drawn in full (``q`` vectors
        per row, padded to the batch's largest ``q`` and masked), which gives
        the query ``s`` and ``u = W z_0``. An unselected encoding is
        independent of ``s`` and uniform on the sphere, so its positional
        score ``p_t^T u_p`` has exactly the law of ``||u_p|| c_t`` with
        ``c_t`` one coordinate of a uniform unit vector: one number is drawn
        per position instead of ``m``. The attention has the same law as
        :meth:`attention` on full draws, and autograd through it gives the
        full gradient's expectation given these draws (unbiased, lower
        variance). Work is O(n (T d + q m + m^2)), with no n T m term.

        Parameters
        ----------
        tokens : Tensor of shape (n, T, d) or (n, T, d + 1)
            The tokens x_t, optionally followed by the selection channel (the
            whole X), which the scores ignore.
        mask : Tensor of shape (n, T)
            Selection indicator, 0.0 or 1.0; every row selects at least one.
        generator : torch.Generator or None, default=None
            Source of the draws.

        Returns
        -------
        Tensor of shape (n, T)
            Attention weights; every row sums to 1.
        """
        n, T = mask.shape
        W = self.key_query
        q_max = int(mask.sum(dim=1).max())
        chosen, where = mask.topk(q_max, dim=1)  # selected positions first, then padding
        P_sel = sphere_encodings(
            n, q_max, self.width, generator=generator, device=W.device, dtype=W.dtype
        )
        d, u = self._query(P_sel, chosen)  # padded slots have weight 0 in the query
        u_p = u[:, :, d:]
        c = sphere_coordinates(
            (n, T), self.width, generator=generator, device=W.device, dtype=W.dtype
        )
        pos = torch.linalg.vector_norm(u_p, dim=-1) * c  # (n, T): the unselected law
        selected = torch.bmm(u_p, P_sel.transpose(1, 2)).squeeze(1)  # (n, q_max)
        pos = pos.scatter(1, where, torch.where(chosen > 0, selected, pos.gather(1, where)))
        return self._softmax(d, u.squeeze(1), tokens, pos)

    def forward(self, X, generator=None, n_pe_samples=1, workspace=None, pe_sampling="full"):
        """Predict the selected mean for a batch ``X`` of shape (n, T, d + 1).

        With encodings drawn per call (stochastic, randomized) the attention
        is averaged over ``n_pe_samples`` independent draws.

        Parameters
        ----------
        X : Tensor of shape (n, T, d + 1)
            Tokens, then the selection indicator in the last channel.
        generator : torch.Generator or None, default=None
            Source of the drawn encodings.
        n_pe_samples : int, default=1
            Number of encoding draws the attention is averaged over (ignored
            by the deterministic families).
        workspace : dict or None, default=None
            Passed to :meth:`encodings`.
        pe_sampling : {"full", "marginal"}, default="full"
            How stochastic encodings are drawn: every vector
            (:meth:`attention`), or only what the scores need
            (:meth:`marginal_attention`). Ignored by the other families.

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
        n, T = mask.shape
        drawn = self.positional_encoding in ("stochastic", "randomized")
        draws = n_pe_samples if drawn else 1
        if self.positional_encoding == "stochastic" and pe_sampling == "marginal":

            def attend():
                return self.marginal_attention(tokens, mask, generator)
        else:
            if draws > 1 and torch.is_grad_enabled():
                workspace = None  # each draw's encodings stay in the graph for backward

            def attend():
                return self.attention(tokens, mask, self.encodings(n, T, generator, workspace))

        attn = attend()
        for _ in range(draws - 1):
            attn = attn + attend()
        if draws > 1:
            attn = attn / draws
        return torch.bmm(attn.unsqueeze(1), tokens).squeeze(1)[:, :-1]

    def elements_per_row(self, seq_len, pe_sampling="full"):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Length T of the rows.
        pe_sampling : {"full", "marginal"}, default="full"
            The sampler of stochastic encodings: the marginal one holds no
            ``T * width`` array.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        if self.positional_encoding == "stochastic" and pe_sampling == "marginal":
            return seq_len * (self.n_features + 4) + self.width * (self.width + 4)
        return seq_len * (self.width + self.n_features + 1)


def _fixed_buffer(n_positions, width, seed):
    """``fixed_encodings`` as a buffer; under ``torch.device("meta")`` only its shape."""
    pe = torch.empty(n_positions, width)
    if pe.device.type != "meta":
        pe = fixed_encodings(n_positions, width, seed)
    return pe


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
        sizes = [seq_len * (n_features + 1), width, *extra_hidden_layers]
        layers = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], n_features))
        self.layers = nn.Sequential(*layers)

    def forward(self, X, generator=None, n_pe_samples=1, workspace=None):
        """Predict the selected mean from the flattened batch ``X``.

        Parameters
        ----------
        X : Tensor of shape (n, seq_len, n_features + 1)
            Tokens, then the selection indicator in the last channel.
        generator : torch.Generator or None, default=None
            Unused; accepted so that both models share one call signature.
        n_pe_samples, workspace : int, dict or None
            Unused; accepted so that both models share one call signature.

        Returns
        -------
        Tensor of shape (n, n_features)
            The predictions.
        """
        return self.layers(X.flatten(1))

    def elements_per_row(self, seq_len, pe_sampling=None):
        """Numbers a forward pass holds per row (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Length T of the rows (the training length).
        pe_sampling : None
            Unused; accepted so that both models share one call signature.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        return seq_len * self.width + self.layers[0].in_features


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
