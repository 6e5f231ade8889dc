"""The attention model as a torch module: :class:`Attention`, over any task, with H heads.

Token t is embedded as ``z_t = [x_t ; p_t]`` with a positional encoding
``p_t`` in ``R^m``; a query ``z_0`` is made of encodings (the task's query
structure, :mod:`stsq_learn.queries`); head h scores ``a_t = z_t^T W_h z_0``
and outputs ``o_h = sum_t softmax(a)_t x_t``; several heads, or a task whose
output is not one average, add a learned linear readout of
``[o_1 ; ... ; o_H]``. ``stsq_learn.nn.task_attention`` builds it for the
first two tasks from their sizes.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..encodings.draws import as_draws
from ..encodings.families import encoding_family
from ..encodings.length_scale import length_scale_rule
from . import members

__all__ = ["Attention", "positional_alignment"]


class Attention(nn.Module):
    """One-layer softmax attention with positional encodings, ``n_heads`` heads, over a task.

    The module holds the key-query matrices, the readout and the forward
    pass; where the encodings come from is its encoding family's business
    (:attr:`encoding`), which positions form each query the task's
    (:meth:`~stsq_learn.Task.queries`).

    Parameters
    ----------
    task : Task
        The task at its training length (its ``n_features``, query
        structure and output size).
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}
        The encoding family (see :mod:`stsq_learn.encodings`).
    encoding_seed : int, default=0
        Seed of the fixed encodings and of the codebook.
    learn_token_block : bool, default=True
        False keeps the token rows of every W at 0: the forward pass never
        reads them, so they get no gradient and no optimiser moves them.
    max_positions : int or None, default=None
        Codebook size L of ``"randomized"`` (kept as a buffer).
    n_heads : int, default=1
        Number of heads H, each with its own key-query matrix.

    Attributes
    ----------
    key_query : Parameter of shape (d + m, n_slots * m), or (H, d + m, n_slots * m)
        The key-query matrices, initialised to 0 (uniform attention): one
        matrix at one head.
    readout : Parameter of shape (n_outputs, H * d) or None
        The linear output map of several heads (initialised to their
        average) or of a task that needs one (small random values); None for
        the paper's one-head model.
    encoding : StochasticEncoding, FixedEncoding, RandomizedEncoding or SinusoidalEncoding
        The encoding family; its vectors, if any, are the buffer named
        ``encoding.table_name`` (``fixed_pe`` or ``codebook``).
    n_members : int or None
        None; S for the members of a batched fit stacked by :meth:`stacked`
        (every parameter and buffer then has a leading axis S).
    """

    # Defaults for modules pickled before these options existed.
    learn_token_block = True
    max_positions = None
    n_heads = 1
    n_members = None

    def __init__(
        self,
        task,
        width,
        positional_encoding="stochastic",
        encoding_seed=0,
        learn_token_block=True,
        max_positions=None,
        n_heads=1,
    ):
        super().__init__()
        self.task = task
        self.n_features = task.n_features
        self.width = width
        self.positional_encoding = positional_encoding
        self.encoding_seed = encoding_seed
        self.learn_token_block = learn_token_block
        self.n_heads = n_heads
        self.encoding = encoding_family(positional_encoding)(width, encoding_seed, max_positions)
        self.max_positions = self.encoding.max_length
        shape = (self.n_features + width, task.n_slots * width)
        if n_heads > 1:
            shape = (n_heads, *shape)
        self.key_query = nn.Parameter(torch.zeros(shape))  # W = 0: attention starts uniform
        readout = None
        if n_heads > 1 or task.readout_required:
            readout = nn.Parameter(self._initial_readout(task, n_heads))
        self.register_parameter("readout", readout)
        table = self.encoding.initial_table(task.reference_length)
        if table is not None:
            self.register_buffer(self.encoding.table_name, table)

    @staticmethod
    def _initial_readout(task, n_heads):
        """The heads' average where that is the task's output, else small random values."""
        d = task.n_features
        if not task.readout_required and task.n_outputs == d:
            return torch.eye(d).repeat(1, n_heads) / n_heads
        readout = torch.empty(task.n_outputs, n_heads * d)
        if readout.device.type != "meta":
            readout.normal_(0.0, 0.1)
        return readout

    @classmethod
    def stacked(cls, modules):
        """The members of a batched fit as one module (:func:`stsq_learn.nn.members.stack`).

        Parameters
        ----------
        modules : list of Attention
            Modules of one architecture, one per member.

        Returns
        -------
        Attention
            Its ``key_query``, ``readout`` and encoding table with a leading
            member axis; each member's rows (member-major) are scored with
            its own (the encoding family's settings are the first member's:
            a member's seed enters only through its table).
        """
        return members.stack(modules)

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

    def heads(self):
        """Every head's key-query matrix, ``(H, d + m, n_slots * m)`` (a view)."""
        W = self.key_query
        return W if W.dim() == 3 else W.unsqueeze(0)

    def _score_rows(self):
        """``(d, [rows of each W the scores read])``: all, or (0, the positional rows) if frozen.

        Each W is ``(d + m, n_slots * m)``, or ``(S, d + m, n_slots * m)``
        for stacked members.
        """
        d = self.n_features if self.learn_token_block else 0
        W = self.key_query
        heads = [W] if self.n_heads == 1 else W.unbind(0 if self.n_members is None else 1)
        return d, [h if d else h[..., self.n_features :, :] for h in heads]

    def forward(self, X, generator=None, n_pe_samples=1, pe_sampling="marginal", length_scale=None):
        """The model's output for a batch ``X`` of the task's rows.

        With encodings drawn per call (stochastic, randomized) the attention
        is averaged over ``n_pe_samples`` draws.

        Parameters
        ----------
        X : Tensor of shape (n, T, n_channels)
            Rows of the task.
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
            or every vector (see :mod:`stsq_learn.queries`). Ignored by the
            other families.
        length_scale : {"log", "floor"} or None, default=None
            Multiply a row's scores by a factor of its length relative to the
            task's (training) length: :mod:`stsq_learn.length_scale`. None is
            the paper's model.

        Returns
        -------
        Tensor of the task's output shape
            The attention-weighted averages of the tokens (through the
            readout where there is one).
        """
        if isinstance(X, list):  # stacked members whose batches differ in length
            return members.forward_groups(
                self,
                X,
                generator,
                n_pe_samples=n_pe_samples,
                pe_sampling=pe_sampling,
                length_scale=length_scale,
            )
        structure, attention = self._attention(
            X, generator, n_pe_samples, pe_sampling, length_scale
        )
        outputs = [structure.read(a) for a in attention]
        if self.readout is None:
            return outputs[0]
        return members.linear(torch.cat(outputs, dim=-1), self.readout)

    def attention_weights(
        self, X, generator=None, n_pe_samples=1, pe_sampling="marginal", length_scale=None
    ):
        """Every head's softmax attention weights on a batch ``X`` of the task's rows.

        What :meth:`forward` averages the tokens with, before the readout:
        with drawn encodings, the weights are averaged over ``n_pe_samples``
        draws, as there.

        Parameters
        ----------
        X : Tensor of shape (n, T, n_channels)
            Rows of the task.
        generator : torch.Generator, StreamedDraws, KeyedDraws or None, default=None
            Source of the drawn encodings (as in :meth:`forward`).
        n_pe_samples : int, default=1
            Encoding draws the weights are averaged over.
        pe_sampling : {"marginal", "full"}, default="marginal"
            How stochastic encodings are drawn.
        length_scale : {"log", "floor"} or None, default=None
            The length-aware scale of the scores.

        Returns
        -------
        Tensor of shape (H, n, T), or (H, n, N, T) for a task with a query per position
            The weights of head h on row i; each sums to 1 over the positions.
        """
        _, attention = self._attention(X, generator, n_pe_samples, pe_sampling, length_scale)
        return torch.stack(attention)

    def _attention(self, X, generator, n_pe_samples, pe_sampling, length_scale):
        """``(structure, weights)``: the task's queries of ``X``, each head's attention (a list)."""
        # The query structures read the tokens in X itself (its marker channels get
        # weight 0 in the scores): copying the tokens out of X cost up to a tenth of a step.
        X = X.contiguous()
        structure = self.task.queries(X)
        scale = self.length_factors(X, length_scale, n_pe_samples)

        def weights(d, Ws, draws, table):
            return structure.attention(Ws, d, self.encoding, draws, table, pe_sampling, scale)

        return structure, self._mean_attention(X, generator, n_pe_samples, weights)

    def length_factors(self, X, length_scale, n_pe_samples=1):
        """The factor of each row's scores under the rule ``length_scale`` (None: no scale).

        Parameters
        ----------
        X : Tensor of shape (n, T, n_channels)
            The rows.
        length_scale : {"log", "floor"} or None
            The rule (:mod:`stsq_learn.length_scale`).
        n_pe_samples : int, default=1
            Encoding draws averaged (the floor's best gamma depends on them).

        Returns
        -------
        float, Tensor of shape (n,) or None
            None where nothing is scaled (no rule, or rows of the training length).
        """
        rule = length_scale_rule(length_scale)
        reference, T = self.task.reference_length, X.shape[1]
        if rule is None or T == reference:
            return None
        sizes = self.task.query_sizes(X) if rule.needs_query_sizes else None
        draws = n_pe_samples if self.encoding.drawn else 1
        factors = rule.factors(T, reference, sizes, self.width, draws)
        return factors.to(X.device, X.dtype) if torch.is_tensor(factors) else factors

    def _mean_attention(self, X, generator, n_pe_samples, weights):
        """Every head's attention weights averaged over the encoding draws of a forward pass.

        ``weights(d, Ws, draws, table)`` gives one draw's weights (a list, one
        per head) from the rows of each W the scores read and that draw's
        source; the deterministic families have one draw.
        """
        draws = as_draws(generator)
        n_draws = n_pe_samples if self.encoding.drawn else 1
        if self.encoding.drawn:
            draws = draws.for_rows(X)  # keyed draws: each row's key, from its bytes
        if n_draws > 1 and torch.is_grad_enabled():
            draws = draws.without_reuse()  # each draw's encodings stay in the graph
        d, Ws = self._score_rows()
        table = self._table()
        attn = None
        for k in range(n_draws):
            w = weights(d, Ws, draws.for_draw(k), table)
            attn = w if attn is None else [a + b for a, b in zip(attn, w)]
        return [a / n_draws for a in attn] if n_draws > 1 else attn

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
            The most positions a query reads; None bounds it by the width.

        Returns
        -------
        int
            An upper estimate of the floats held per row.
        """
        structure = self.task.structure
        per_head = structure.elements_per_row(
            self.encoding, seq_len, self.n_features, pe_sampling, n_selected
        )
        return self.n_heads * per_head


def positional_alignment(key_query, n_features):
    """How close the positional block of W is to a multiple of the identity.

    Parameters
    ----------
    key_query : array-like of shape (n_features + m, m)
        The learned W, token rows first (one head, one slot).
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
