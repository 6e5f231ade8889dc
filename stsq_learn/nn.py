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

__all__ = [
    "AttentionSelector",
    "FullyConnected",
    "SquaredError",
    "fixed_encodings",
    "positional_alignment",
    "sphere_encodings",
]

_FIXED_BLOCK = 64  # positions drawn per seed block: keeps fixed encodings prefix-stable


def sphere_encodings(
    n_samples, seq_len, width, *, generator=None, device="cpu", dtype=None, out=None
):
    """Draw i.i.d. encodings uniform on the unit sphere S^(width-1).

    Gaussian vectors are drawn and normalised in place, so the only large
    allocation is the result itself; ``out`` lets the training loop reuse
    storage across calls and avoid a fresh multi-megabyte allocation (and its
    page faults) at every step.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    seq_len : int
        Number of positions T per row.
    width : int
        Dimension m of an encoding.
    generator : torch.Generator or None, default=None
        Source of randomness; ``None`` uses torch's global generator.
    device : str or torch.device, default="cpu"
        Device of the returned tensor.
    dtype : torch.dtype or None, default=None
        Floating dtype of the returned tensor; ``None`` is torch's default.
    out : Tensor of shape (n_samples, seq_len, width) or None, default=None
        Contiguous storage to draw into; a new tensor when None.

    Returns
    -------
    Tensor of shape (n_samples, seq_len, width)
        One independent unit vector per row and position.
    """
    if out is None:
        P = torch.empty(n_samples, seq_len, width, device=device, dtype=dtype)
    else:
        P = out
    P.normal_(generator=generator)
    return P.div_(torch.linalg.vector_norm(P, dim=-1, keepdim=True))


def fixed_encodings(seq_len, width, seed, *, device="cpu", dtype=torch.float32):
    """One unit vector per position, deterministic in ``(seed, position)``.

    Positions are drawn in blocks of 64 from seeds derived from ``(seed,
    block)``, so the first T rows never depend on how many are asked for
    (prefix-stable): a longer sequence gets the same vectors for the positions
    seen in training, plus vectors for positions never seen.

    Parameters
    ----------
    seq_len : int
        Number of positions T.
    width : int
        Dimension m of an encoding.
    seed : int
        Seed of the encodings; the same seed gives the same vectors.
    device : str or torch.device, default="cpu"
        Device of the returned tensor.
    dtype : torch.dtype, default=torch.float32
        Floating dtype of the returned tensor.

    Returns
    -------
    Tensor of shape (seq_len, width)
        One unit vector per position.
    """
    n_blocks = -(-seq_len // _FIXED_BLOCK)
    blocks = [
        np.random.default_rng([int(seed), b]).standard_normal((_FIXED_BLOCK, width))
        for b in range(n_blocks)
    ]
    P = np.concatenate(blocks)[:seq_len]
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    return torch.as_tensor(P, dtype=dtype, device=device)


class AttentionSelector(nn.Module):
    """One-layer single-head softmax attention with positional encodings.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed"}
        ``"stochastic"`` draws fresh encodings on the sphere for every row at
        every call; ``"fixed"`` uses one vector per position.
    seq_len : int
        Training length; ``"fixed"`` keeps that many encodings as a buffer.
    encoding_seed : int
        Seed of the fixed encodings.
    learn_token_block : bool, default=True
        False keeps the token rows of W at 0: the forward pass never reads
        them, so they get no gradient and no optimiser moves them (the
        scores are then ``p_t^T W_pp s``, the limit the theory predicts).
    """

    learn_token_block = True  # the default for modules pickled before the option existed

    def __init__(
        self,
        n_features,
        width,
        positional_encoding="stochastic",
        seq_len=1,
        encoding_seed=0,
        learn_token_block=True,
    ):
        super().__init__()
        self.n_features = n_features
        self.width = width
        self.positional_encoding = positional_encoding
        self.encoding_seed = encoding_seed
        self.learn_token_block = learn_token_block
        # W = 0: attention starts uniform, as in the theory.
        self.key_query = nn.Parameter(torch.zeros(n_features + width, width))
        if positional_encoding == "fixed":
            pe = torch.empty(seq_len, width)
            if pe.device.type != "meta":  # under torch.device("meta") only the shape is wanted
                pe = fixed_encodings(seq_len, width, encoding_seed)
            self.register_buffer("fixed_pe", pe)
        else:
            self.fixed_pe = None

    def encodings(self, n_samples, seq_len, generator=None, workspace=None):
        """Encodings for a batch: (n, T, m) if stochastic, (T, m) if fixed.

        Parameters
        ----------
        n_samples : int
            Number of rows n.
        seq_len : int
            Number of positions T; fixed encodings beyond the training length
            are drawn prefix-stably from ``encoding_seed``.
        generator : torch.Generator or None, default=None
            Source of the stochastic draws.
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
        if self.fixed_pe is None:
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
                    buf = torch.empty(
                        n_samples, seq_len, self.width, device=W.device, dtype=W.dtype
                    )
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
        if seq_len <= self.fixed_pe.shape[0]:
            return self.fixed_pe[:seq_len]
        return fixed_encodings(
            seq_len, self.width, self.encoding_seed, device=W.device, dtype=W.dtype
        )

    def attention(self, tokens, mask, P):
        """Softmax attention weights of shape (n, T) for encodings ``P``.

        Forms ``u = W z_0`` once per row (n m^2 work), then the scores
        ``[x_t ; p_t]^T u`` (n T (d + m) work); ``W p_t`` is never formed.
        Every product is a row vector times a matrix (``u^T P^T``), the
        order the batched BLAS kernels run fastest.

        Parameters
        ----------
        tokens : Tensor of shape (n, T, d)
            The tokens x_t.
        mask : Tensor of shape (n, T)
            Selection indicator, 0.0 or 1.0.
        P : Tensor of shape (n, T, m) or (T, m)
            Positional encodings, per row or shared by all rows.

        Returns
        -------
        Tensor of shape (n, T)
            Attention weights; every row sums to 1.
        """
        # Rows of W the scores read: all, or only the positional block.
        d = self.n_features if self.learn_token_block else 0
        W = self.key_query if d else self.key_query[self.n_features :]
        if P.dim() == 2:
            u = (mask @ P) @ W.T  # (n, d + m) or (n, m)
            pos = u[:, d:] @ P.T
        else:
            s = torch.bmm(mask.unsqueeze(1), P)  # (n, 1, m): the query's positional part
            u = s @ W.T  # (n, 1, d + m) or (n, 1, m): W applied to it
            pos = torch.bmm(u[:, :, d:], P.transpose(1, 2)).squeeze(1)
            u = u.squeeze(1)
        if not d:
            return torch.softmax(pos, dim=-1)
        scores = torch.bmm(u[:, None, :d], tokens.transpose(1, 2)).squeeze(1) + pos
        return torch.softmax(scores, dim=-1)

    def forward(self, X, generator=None, n_pe_samples=1, workspace=None):
        """Predict the selected mean for a batch ``X`` of shape (n, T, d + 1).

        With stochastic encodings the attention is averaged over
        ``n_pe_samples`` independent draws.

        Parameters
        ----------
        X : Tensor of shape (n, T, d + 1)
            Tokens, then the selection indicator in the last channel.
        generator : torch.Generator or None, default=None
            Source of the stochastic encodings.
        n_pe_samples : int, default=1
            Number of encoding draws the attention is averaged over (ignored
            by fixed encodings).
        workspace : dict or None, default=None
            Passed to :meth:`encodings`.

        Returns
        -------
        Tensor of shape (n, d)
            The attention-weighted average of the tokens.
        """
        # Contiguous copies of the two parts (small: n T (d + 1) numbers) keep
        # every product below on the batched BLAS path instead of a per-row loop.
        tokens, mask = X[..., :-1].contiguous(), X[..., -1].contiguous()
        n, T = mask.shape
        draws = n_pe_samples if self.fixed_pe is None else 1
        if draws > 1 and torch.is_grad_enabled():
            workspace = None  # each draw's encodings stay in the graph for backward
        attn = self.attention(tokens, mask, self.encodings(n, T, generator, workspace))
        for _ in range(draws - 1):
            attn = attn + self.attention(tokens, mask, self.encodings(n, T, generator, workspace))
        if draws > 1:
            attn = attn / draws
        return torch.bmm(attn.unsqueeze(1), tokens).squeeze(1)


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
