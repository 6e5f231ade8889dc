"""The linear self-attention layer of in-context regression as a torch module.

Zhang, Frei and Bartlett's layer reads a prompt ``E`` (columns ``z_j = [x_j;
y_j]``, the last ``[x_q; 0]``) as ``f(E) = E + W^PV E (E^T W^KQ E) / M``
and predicts the bottom-right entry:

``y_hat = (1/M) sum_j (v . z_j) (z_j^T K x_q)``, the sum over every token,

where ``v`` is the last row of ``W^PV`` and ``K`` the first ``d`` columns
of ``W^KQ``: only these reach the prediction (the query's label slot is 0).
The paper's initialisation and its gradient flow keep ``v = [0; u]`` and
``K = [U; 0]``, when the prediction is ``u x_q^T U^T h``, ``h = (1/M)
sum_i y_i x_i``: the *reduced* parametrization. The *full* one trains all
of ``v`` and ``K``.

Parameters are plain tensors and every product with one is an ``einsum``, so
a leading axis of stacked models can be added to both; the prompt's own
sums (``h``) do not involve a parameter.
"""

from __future__ import annotations

import torch
from torch import nn

from ...nn.members import linear, stack

__all__ = ["LinearSelfAttention"]

PARAMETRIZATIONS = ("reduced", "full")
INITS = ("random", "identity")


class LinearSelfAttention(nn.Module):
    """One linear self-attention layer predicting the query's label, normalised by M.

    Parameters
    ----------
    n_features : int
        Dimension d of the covariates (a token has ``d + 1`` channels).
    parametrization : {"reduced", "full"}, default="reduced"
        ``"reduced"``: the value scalar ``u`` and the key-query block ``U``
        (d x d); ``"full"``: the last row ``v`` of ``W^PV`` (``d + 1``) and
        the first d columns ``K`` of ``W^KQ`` (``(d + 1) x d``), every
        entry of the two matrices that reaches the prediction.
    init_scale : float, default=1.0
        ``s`` of the paper's initialisation ``W^PV(0) = s [0 0; 0 1]``,
        ``W^KQ(0) = s [T T^T 0; 0 0]``.
    init : {"random", "identity"}, default="random"
        ``T T^T``: ``T`` with standard Gaussian entries (from torch's global
        generator), or ``T = I``; either way scaled to ``||T T^T||_F = 1``.

    Attributes
    ----------
    value : Parameter of shape (1,) or (d + 1,)
        ``u`` (reduced) or ``v`` (full).
    key_query : Parameter of shape (d, d) or (d + 1, d)
        ``U`` (reduced) or ``K`` (full).
    """

    def __init__(self, n_features, parametrization="reduced", init_scale=1.0, init="random"):
        super().__init__()
        if parametrization not in PARAMETRIZATIONS:
            raise ValueError(
                f"parametrization must be one of {PARAMETRIZATIONS}, got {parametrization!r}."
            )
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}.")
        d = n_features
        self.n_features, self.parametrization, self.init = d, parametrization, init
        theta = torch.randn(d, d) if init == "random" else torch.eye(d)
        block = theta @ theta.T
        block = init_scale * block / block.norm()
        full = parametrization == "full"
        value = torch.zeros(d + 1 if full else 1)
        value[-1] = init_scale
        key_query = torch.zeros(d + 1 if full else d, d)
        key_query[:d] = block
        self.value = nn.Parameter(value)
        self.key_query = nn.Parameter(key_query)

    def forward(self, X, generator=None, **unused):
        """Predict the query's label of every prompt.

        Parameters
        ----------
        X : Tensor of shape (n, M + 1, d + 1)
            Prompts, the query last (its label slot 0).
        generator : object, default=None
            Unused; accepted so that every model shares one call signature.
        **unused
            Other keyword arguments of that signature, unused.

        Returns
        -------
        Tensor of shape (n,)
            The predictions.
        """
        d = self.n_features
        m = X.shape[1] - 1
        query = X[:, -1, :d]
        # The prompt's own parts are elementwise products and sums (torch's batched
        # mat-vec on strided views is several times slower on the CPU); every product
        # with a parameter goes through nn.members.linear, which also serves the
        # stacked members of a batched fit (a leading member axis on each parameter).
        if self.parametrization == "reduced":
            h = (X[:, :, :d] * X[:, :, d:]).sum(1) / m  # (1/M) sum_i y_i x_i (the query's y is 0)
            hU = linear(h, self.key_query.transpose(-1, -2))  # h^T U, row by row
            return _rows(self.value[..., 0], len(X)) * (hU * query).sum(-1)
        keys = linear(query, self.key_query)  # K x_q, row by row
        scores = (X * keys[:, None, :]).sum(-1)
        values = linear(X, self.value.unsqueeze(-2)).squeeze(-1)  # <v, z_t> of every token
        return (scores * values).sum(1) / m

    @classmethod
    def stacked(cls, modules):
        """The members of a batched fit as one module (:func:`stsq_learn.nn.members.stack`).

        Parameters
        ----------
        modules : list of LinearSelfAttention
            The members, each as its single fit made it.

        Returns
        -------
        LinearSelfAttention
            One module whose parameters have a leading member axis.
        """
        return stack(modules)

    def preconditioner(self):
        """``A`` with ``y_hat = x_q^T A h`` on the reduced blocks: ``u U^T`` (the paper's ``u U``).

        Returns
        -------
        Tensor of shape (d, d)
            The preconditioner.
        """
        return self.value[-1] * self.key_query[: self.n_features].T

    def matrices(self):
        """``(W^PV, W^KQ)``, each ``(d + 1) x (d + 1)``, zero where the prediction never reads.

        Returns
        -------
        tuple of Tensor
            ``W^PV`` and ``W^KQ``.
        """
        d = self.n_features
        pv = self.value.new_zeros(d + 1, d + 1)
        kq = self.value.new_zeros(d + 1, d + 1)
        if self.parametrization == "full":
            pv[d] = self.value
            kq[:, :d] = self.key_query
        else:
            pv[d, d] = self.value[0]
            kq[:d, :d] = self.key_query
        return pv, kq

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Numbers a forward pass holds per prompt (sizes the chunks of a prediction).

        Parameters
        ----------
        seq_len : int
            Tokens per prompt, ``M + 1``.
        pe_sampling, n_selected : None
            Unused; accepted so that every model shares one call signature.

        Returns
        -------
        int
            An upper estimate of the floats held per prompt.
        """
        return 3 * seq_len * (self.n_features + 1) + 4 * (self.n_features + 1)


def _rows(value, n_rows):
    """A scalar per member (``value`` of shape () or (S,)) as one per row of ``n_rows``."""
    return value if value.dim() == 0 else value.repeat_interleave(n_rows // len(value))
