"""The torch modules of copying: a causal transformer and an LSTM that read ``BOS x SEP``.

Both read a row as one token stream, ``BOS x_1 .. x_l SEP y_1 .. y_m``
(the symbols ``0 .. D-1``, then ``EOS = D``, ``BOS = D + 1``, ``SEP = D +
2``; a row's padding after its end is read as ``EOS``, which a causal model
never sees from a real position), and answer with logits over ``D + 1``
classes: the symbols and the end. In training the source and the target
come side by side, ``(n, 2T)`` (:func:`teacher_forced`), and the output is
the logits of the ``T + 1`` answer positions of each row (teacher forcing:
the logits that predict ``y_1 .. y_m`` and the end); :meth:`generate`
writes the answer greedily, one token at a time, each step reading the
tokens already written (the transformer keeps its keys and values).

Hard-ALiBi (Jelassi et al., 2024): the first half of the heads see only the
last ``2, 3, ..`` keys (a bias of ``-inf`` beyond; the paper's code starts at
1, a head that reads only its own token), the others every key with no
positional encoding.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["CausalTransformer", "RecurrentCopier"]

ENCODINGS = ("hard_alibi", "alibi", "nope", "learned")


def _specials(vocab_size):
    """``(EOS, BOS, SEP)`` of an alphabet of D symbols: ``D, D + 1, D + 2``."""
    return vocab_size, vocab_size + 1, vocab_size + 2


def _prompt(X, vocab_size):
    """``BOS x SEP`` of every row of sources ``X`` (``(n, T)``), ``EOS`` after: ``(n, T + 2)``,
    and the lengths of the sources."""
    eos, bos, sep = _specials(vocab_size)
    n, T = X.shape
    lx = (X >= 0).sum(1)
    stream = torch.full((n, T + 2), eos, dtype=torch.long, device=X.device)
    stream[:, 0] = bos
    stream[:, 1 : T + 1] = torch.where(X >= 0, X, eos)
    stream[torch.arange(n, device=X.device), 1 + lx] = sep
    return stream, lx


def teacher_forced(packed, vocab_size):
    """The training stream ``BOS x SEP y`` of rows ``[X, y]`` side by side, and where to read.

    Parameters
    ----------
    packed : Tensor of shape (n, 2T)
        Sources then targets (the integer tokens, any dtype), ``-1`` after each one's end.
    vocab_size : int
        D.

    Returns
    -------
    stream : LongTensor of shape (n, 2T + 2)
        ``BOS x SEP y``, ``EOS`` after.
    answer : LongTensor of shape (n, T + 1)
        The positions whose logits predict ``y_1, .., y_T`` and the end
        (clipped to the stream past a row's end, where the loss reads nothing).
    """
    tokens = packed.long()
    T = tokens.shape[1] // 2
    X, y = tokens[:, :T], tokens[:, T:]
    eos = _specials(vocab_size)[0]
    head, lx = _prompt(X, vocab_size)
    stream = torch.cat([head, torch.full_like(y, eos)], 1)
    steps = torch.arange(T + 1, device=tokens.device)
    stream.scatter_(1, 2 + lx[:, None] + steps[:T], torch.where(y >= 0, y, eos))
    answer = (1 + lx[:, None] + steps).clamp(max=stream.shape[1] - 1)
    return stream, answer


def _stop_after_end(tokens, eos):
    """Greedy tokens ``(n, T)`` with ``-1`` from each row's first ``EOS`` on."""
    ended = (tokens == eos).cumsum(1) > 0
    return torch.where(ended, torch.full_like(tokens, -1), tokens)


def _init_linear(module, std):
    if module.weight.device.type == "meta":  # shapes only (the memory check): nothing to draw
        return
    nn.init.normal_(module.weight, 0.0, std)
    if module.bias is not None:
        nn.init.zeros_(module.bias)


def _embedding(n, width):
    """An embedding drawn from N(0, 0.02^2) (not drawn at all on the meta device)."""
    weight = torch.empty(n, width)
    if weight.device.type != "meta":
        nn.init.normal_(weight, 0.0, 0.02)
    return nn.Embedding(n, width, _weight=weight)


class _Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then a ReLU MLP (4x width)."""

    def __init__(self, width, n_heads, n_layers):
        super().__init__()
        self.n_heads = n_heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        for layer in (self.qkv, self.up):
            _init_linear(layer, 0.02)
        for layer in (self.out, self.down):  # residual branches, scaled by depth (GPT-2)
            _init_linear(layer, 0.02 / math.sqrt(2 * n_layers))

    def _heads(self, h):
        n, L, _ = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(n, L, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        return q, k, v

    def _finish(self, h, attended):
        n, _, L, _ = attended.shape
        h = h + self.out(attended.transpose(1, 2).reshape(n, L, -1))
        return h + self.down(F.relu(self.up(self.norm2(h))))

    def forward(self, h, bias):
        q, k, v = self._heads(h)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self._finish(h, attended), (k, v)

    def step(self, h, bias, cache, at):
        """One position per row (``h`` of shape ``(n, 1, w)``, at ``at``), keys from ``cache``."""
        q, k, v = self._heads(h)
        rows = torch.arange(len(h), device=h.device)
        keys, values = cache
        keys[rows, :, at] = k[:, :, 0]
        values[rows, :, at] = v[:, :, 0]
        attended = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias)
        return self._finish(h, attended)


class CausalTransformer(nn.Module):
    """A causal pre-norm transformer over ``BOS x SEP y``, answering over the symbols and the end.

    Parameters
    ----------
    vocab_size : int
        D, the symbols of the alphabet.
    width : int, default=64
        Width of the residual stream.
    n_heads : int, default=8
        Heads of each layer (``width`` a multiple of it).
    n_layers : int, default=2
        Blocks.
    positional_encoding : {"hard_alibi", "alibi", "nope", "learned"}, default="hard_alibi"
        ``"hard_alibi"``: head ``h`` of the first ``n_heads // 2`` sees the
        last ``h + 2`` keys (itself included), the others every key with no
        positional term; ``"alibi"``: every head a linear bias
        ``-m_h (i - j)`` with ALiBi's slopes; ``"nope"``: none (causal
        masking only); ``"learned"``: a learned embedding of each position
        up to ``max_positions``.
    max_positions : int or None, default=None
        Positions of ``"learned"`` (a stream ``BOS x SEP y`` of strings of
        length T has ``2T + 2``).

    Attributes
    ----------
    n_classes : int
        ``D + 1``: the symbols and the end.
    """

    def __init__(
        self,
        vocab_size,
        width=64,
        n_heads=8,
        n_layers=2,
        positional_encoding="hard_alibi",
        max_positions=None,
    ):
        super().__init__()
        self.vocab_size, self.width, self.n_heads = vocab_size, width, n_heads
        self.n_layers, self.positional_encoding = n_layers, positional_encoding
        self.max_positions = max_positions
        self.n_classes = vocab_size + 1
        self.embed = _embedding(vocab_size + 3, width)
        if positional_encoding == "learned":
            self.positions = _embedding(max_positions, width)
        self.blocks = nn.ModuleList(_Block(width, n_heads, n_layers) for _ in range(n_layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, self.n_classes)
        _init_linear(self.head, 0.02)
        slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)
        windows = torch.full((n_heads,), math.inf)
        if positional_encoding == "hard_alibi":
            windows[: n_heads // 2] = torch.arange(2, n_heads // 2 + 2, dtype=torch.float)
        self.register_buffer("slopes", slopes, persistent=False)
        self.register_buffer("windows", windows, persistent=False)

    def _bias(self, queries, keys):
        """The attention bias ``(.., H, q, k)`` of query positions and key positions."""
        distance = (queries[..., :, None] - keys[None, :]).to(self.slopes.dtype)  # i - j
        distance = distance.unsqueeze(-3)  # a heads axis
        bias = torch.zeros_like(distance).expand(*distance.shape[:-3], self.n_heads, -1, -1)
        if self.positional_encoding == "alibi":
            bias = -self.slopes[:, None, None] * distance
        blocked = distance < 0
        if self.positional_encoding == "hard_alibi":
            blocked = blocked | (distance >= self.windows[:, None, None])
        return bias.masked_fill(blocked, -math.inf)

    def _embed(self, tokens, positions):
        h = self.embed(tokens)
        if self.positional_encoding == "learned":
            h = h + self.positions(positions)
        return h

    def forward(self, packed, generator=None):
        """Teacher-forced logits of rows ``[X, y]`` side by side.

        Parameters
        ----------
        packed : Tensor of shape (n, 2T)
            Sources then targets, ``-1`` after each one's end.
        generator : object, default=None
            Unused (the module draws nothing).

        Returns
        -------
        Tensor of shape (n, T + 1, D + 1)
            The logits predicting ``y_1 .. y_T`` and the end.
        """
        stream, answer = teacher_forced(packed, self.vocab_size)
        positions = torch.arange(stream.shape[1], device=stream.device)
        h = self._embed(stream, positions)
        bias = self._bias(positions, positions).to(h.dtype)
        for block in self.blocks:
            h, _ = block(h, bias)
        h = torch.gather(h, 1, answer[..., None].expand(-1, -1, h.shape[-1]))
        return self.head(self.norm(h))

    @torch.no_grad()
    def generate(self, X, n_steps):
        """Greedy answers to sources ``X``: ``n_steps`` tokens each, ``-1`` from the end on.

        Parameters
        ----------
        X : LongTensor of shape (n, T)
            Sources, ``-1`` after each row's end.
        n_steps : int
            Tokens to write (the answer's width).

        Returns
        -------
        LongTensor of shape (n, n_steps)
            The tokens written, ``-1`` after each row's end.
        """
        eos = _specials(self.vocab_size)[0]
        stream, lx = _prompt(X, self.vocab_size)
        n, P = stream.shape
        W = P + n_steps
        positions = torch.arange(P, device=X.device)
        h = self._embed(stream, positions)
        bias = self._bias(positions, positions).to(h.dtype)
        caches = []
        for block in self.blocks:
            h, (k, v) = block(h, bias)
            keys = k.new_zeros(n, self.n_heads, W, k.shape[-1])
            values = torch.zeros_like(keys)
            keys[:, :, :P], values[:, :, :P] = k, v
            caches.append((keys, values))
        rows = torch.arange(n, device=X.device)
        at = 1 + lx  # the SEP of each row
        logits = self.head(self.norm(h[rows, at]))
        out = []
        all_keys = torch.arange(W, device=X.device)
        for step in range(n_steps):
            token = logits.argmax(-1)
            out.append(token)
            if step == n_steps - 1 or bool((torch.stack(out, 1) == eos).any(1).all()):
                break
            at = at + 1
            h = self._embed(token[:, None], at[:, None])
            bias = self._bias(at[:, None], all_keys).to(h.dtype)  # (n, H, 1, W)
            for block, cache in zip(self.blocks, caches):
                h = block.step(h, bias, cache, at)
            logits = self.head(self.norm(h[:, 0]))
        tokens = torch.stack(out, 1)
        tokens = F.pad(tokens, (0, n_steps - tokens.shape[1]), value=eos)
        return _stop_after_end(tokens, eos)

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Floats a training forward pass holds per row of strings of length ``seq_len``.

        The residual stream, the scores and the MLP of each layer: the memory
        check's size.

        Parameters
        ----------
        seq_len : int
            The strings' length.
        pe_sampling, n_selected : object, default=None
            The shared signature's; unused.

        Returns
        -------
        int
            Floats per row.
        """
        L = 2 * seq_len + 2
        return self.n_layers * (12 * L * self.width + 2 * self.n_heads * L * L) + L * self.n_classes


class RecurrentCopier(nn.Module):
    """An LSTM over ``BOS x SEP y``, answering over the symbols and the end.

    Its initialisation is not PyTorch's default: orthogonal recurrent
    weights, Xavier input weights, a forget-gate bias of 1.

    Parameters
    ----------
    vocab_size : int
        D.
    hidden_size : int, default=80
        Units of each layer (its state: ``2 * n_layers * hidden_size`` floats).
    n_layers : int, default=2
        Stacked LSTM layers.
    """

    def __init__(self, vocab_size, hidden_size=80, n_layers=2):
        super().__init__()
        self.vocab_size, self.hidden_size, self.n_layers = vocab_size, hidden_size, n_layers
        self.n_classes = vocab_size + 1
        self.embed = _embedding(vocab_size + 3, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size, n_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, self.n_classes)
        for name, param in self.lstm.named_parameters():
            if param.device.type == "meta":
                break
            if name.startswith("weight_hh"):
                for gate in param.data.chunk(4, 0):
                    nn.init.orthogonal_(gate)
            elif name.startswith("weight_ih"):
                nn.init.xavier_uniform_(param.data)
            else:
                nn.init.zeros_(param.data)
                if name.startswith("bias_ih"):
                    param.data[hidden_size : 2 * hidden_size] = 1.0  # the forget gate

    def forward(self, packed, generator=None):
        """Teacher-forced logits of rows ``[X, y]`` side by side.

        Parameters
        ----------
        packed : Tensor of shape (n, 2T)
            Sources then targets, ``-1`` after each one's end.
        generator : object, default=None
            Unused (the module draws nothing).

        Returns
        -------
        Tensor of shape (n, T + 1, D + 1)
            The logits predicting ``y_1 .. y_T`` and the end.
        """
        stream, answer = teacher_forced(packed, self.vocab_size)
        h, _ = self.lstm(self.embed(stream))
        h = torch.gather(h, 1, answer[..., None].expand(-1, -1, h.shape[-1]))
        return self.head(h)

    @torch.no_grad()
    def generate(self, X, n_steps):
        """Greedy answers to sources ``X``: ``n_steps`` tokens each, ``-1`` from the end on.

        Parameters
        ----------
        X : LongTensor of shape (n, T)
            Sources, ``-1`` after each row's end.
        n_steps : int
            Tokens to write (the answer's width).

        Returns
        -------
        LongTensor of shape (n, n_steps)
            The tokens written, ``-1`` after each row's end.
        """
        eos = _specials(self.vocab_size)[0]
        stream, lx = _prompt(X, self.vocab_size)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(stream), (lx + 2).cpu(), batch_first=True, enforce_sorted=False
        )
        _, state = self.lstm(packed)
        h = state[0][-1]
        out = []
        for step in range(n_steps):
            token = self.head(h).argmax(-1)
            out.append(token)
            if step == n_steps - 1 or bool((torch.stack(out, 1) == eos).any(1).all()):
                break
            h, state = self.lstm(self.embed(token[:, None]), state)
            h = h[:, 0]
        tokens = torch.stack(out, 1)
        tokens = F.pad(tokens, (0, n_steps - tokens.shape[1]), value=eos)
        return _stop_after_end(tokens, eos)

    def elements_per_row(self, seq_len, pe_sampling=None, n_selected=None):
        """Floats a training forward pass holds per row of strings of length ``seq_len``.

        The LSTM's gates and states of each layer: the memory check's size.

        Parameters
        ----------
        seq_len : int
            The strings' length.
        pe_sampling, n_selected : object, default=None
            The shared signature's; unused.

        Returns
        -------
        int
            Floats per row.
        """
        return (2 * seq_len + 2) * (self.hidden_size * (1 + 6 * self.n_layers) + self.n_classes)
