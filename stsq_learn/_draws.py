"""Where the drawn encodings get their randomness: a stream, or each row's key.

The encoding families ask a draw source for three things: unit vectors at
given positions (:meth:`~KeyedDraws.sphere`), one coordinate of a unit vector
per position (:meth:`~KeyedDraws.coordinates`) and sorted random subsets of a
codebook (:meth:`~KeyedDraws.subsets`). Both sources give them the same law:

- :class:`StreamedDraws` takes the next numbers of a ``torch.Generator``
  (training: fast, and what a row gets depends on the batch);
- :class:`KeyedDraws` computes every number from (seed, the row's bytes,
  draw index, position, kind of draw) with Philox-4x32-10
  (:mod:`._keyed`), so a row's draws depend on nothing else (prediction).
"""

from __future__ import annotations

import torch

from . import _sampling
from ._keyed import (
    MASK32,
    box_muller,
    normal_pairs,
    philox4x32,
    row_keys,
    split_key,
    splitmix64,
    srl,
    uniforms,
)

# Counter word c2 holds (draw index << 8) | stream: one stream per kind of draw.
_SPHERE, _COORDINATES, _SUBSETS = 1, 2, 3


class StreamedDraws:
    """Draws taken in turn from a ``torch.Generator``.

    Parameters
    ----------
    generator : torch.Generator or None, default=None
        Source of the numbers; None is torch's global generator.
    reuse : bool, default=False
        Whether full stochastic encodings are drawn into one buffer kept
        across calls (each call overwrites the previous call's encodings:
        the training loop, which is done with them after each backward).
    """

    keyed = False

    def __init__(self, generator=None, reuse=False):
        self.generator = generator
        self.reuse = reuse
        self._buffer = None

    def for_rows(self, X):
        """The source for the rows ``X`` (a stream ignores them)."""
        return self

    def for_draw(self, k):
        """The source for draw ``k`` (a stream just goes on)."""
        return self

    def without_reuse(self):
        """The same stream, drawing full encodings into fresh storage."""
        if not self.reuse:
            return self
        return StreamedDraws(self.generator)

    def get_state(self):
        """The generator's state (None for the global generator)."""
        return None if self.generator is None else self.generator.get_state()

    def set_state(self, state):
        """Rewind the generator to ``state``."""
        if self.generator is not None:
            self.generator.set_state(state)

    def sphere(self, positions, width, device, dtype, full=False):
        """Unit vectors of shape (n, P, width) for positions of shape (n or 1, P)."""
        n, P = positions.shape
        out = None
        if full and self.reuse:
            buf = self._buffer
            if buf is None or buf.shape[0] < n or buf.shape[1:] != (P, width) or buf.dtype != dtype:
                buf = self._buffer = torch.empty(n, P, width, device=device, dtype=dtype)
            out = buf[:n]
        return _sampling.sphere_encodings(
            n, P, width, generator=self.generator, device=device, dtype=dtype, out=out
        )

    def coordinates(self, n, seq_len, width, device, dtype):
        """One coordinate of a uniform unit vector per row and position: (n, seq_len)."""
        return _sampling.sphere_coordinates(
            (n, seq_len), width, generator=self.generator, device=device, dtype=dtype
        )

    def subsets(self, n, seq_len, max_positions, device):
        """Sorted uniform subsets of ``seq_len`` of ``max_positions``: (n, seq_len)."""
        return _sampling.randomized_positions(
            n, seq_len, max_positions, generator=self.generator, device=device
        )


class KeyedDraws:
    """Draws computed from each row's key: a row's draws depend on nothing else.

    Every number is a Philox-4x32-10 word of the counter (block index,
    position, ``draw << 8 | kind``, candidate) under the row's 64-bit key,
    which hashes the seed with the row's bytes. Rows are given by
    :meth:`for_rows`.

    Parameters
    ----------
    seed : int
        The fitted model's prediction seed.
    keys : Tensor of shape (n_samples,), dtype int64, or None, default=None
        The rows' keys (None until :meth:`for_rows`).
    draw : int, default=0
        The draw index k (``n_pe_samples`` draws are averaged).
    """

    keyed = True

    def __init__(self, seed, keys=None, draw=0):
        self.seed = int(seed)
        self.keys = keys
        self.draw = int(draw)

    def for_rows(self, X):
        """This source keyed by the bytes of the rows ``X`` (kept once set).

        A float64 redo of an overflowing float32 chunk keeps the keys of
        the float32 rows, so its draws are those of the first pass.
        """
        if self.keys is not None:
            return self
        return KeyedDraws(self.seed, row_keys(X, self.seed), self.draw)

    def for_draw(self, k):
        """The source for draw ``k``."""
        return KeyedDraws(self.seed, self.keys, k)

    def without_reuse(self):
        """This source (keyed draws never reuse storage)."""
        return self

    def get_state(self):
        """None: keyed draws have no state."""
        return None

    def set_state(self, state):
        """Nothing to rewind."""

    def _words(self, position, stream, keys, candidate=0):
        """The four Philox words of each (row key, position, draw, kind, candidate) counter."""
        k0, k1 = split_key(keys)
        return philox4x32((0, position, (self.draw << 8) | stream, candidate), (k0, k1))

    def _seeds(self, position, stream, keys):
        """A 64-bit SplitMix64 seed per (row key, position): two words of a Philox block."""
        w = self._words(position, stream, keys)
        return w[0] | (w[1] << 32)

    def sphere(self, positions, width, device, dtype, full=False):
        """Unit vectors of shape (n, P, width), keyed by row, position and coordinate.

        A Philox block per (row, position) seeds SplitMix64, whose ``width / 2``
        words give ``width`` normals (two per word), then normalised.
        """
        n, P = self.keys.shape[0], positions.shape[1]
        n_words = -(-width // 2)
        words = splitmix64(self._seeds(positions, _SPHERE, self.keys.view(-1, 1)), n_words)
        Z = torch.empty(n, P, 2, n_words, device=device)
        Z[:, :, 0], Z[:, :, 1] = normal_pairs(words)
        Z = Z.view(n, P, 2 * n_words)[..., :width]
        return Z.div_(torch.linalg.vector_norm(Z, dim=-1, keepdim=True)).to(dtype)

    def coordinates(self, n, seq_len, width, device, dtype):
        """One coordinate of a uniform unit vector per row and position: (n, seq_len).

        Its density is proportional to ``(1 - c^2)^k``, ``k = (width - 3) / 2``.
        For ``width >= 5`` (k >= 1) by rejection from ``N(0, 1 / (2 k))``, whose
        density ``exp(-k c^2)`` bounds it (``log(1 - t) <= -t``): accept ``c``
        when ``c^2 < 1`` and ``log U < k (log(1 - c^2) + c^2)``, more than 75 %
        of candidates at width 5 and 99.7 % at width 256. One SplitMix64 word
        per position (the normal's half of a Box-Muller pair, the uniform);
        the rejected ones take further candidates, one Philox block each,
        keyed by the candidate's index, until all are accepted (exact).
        Narrower widths: ``z / sqrt(z^2 + 2 G)`` with Marsaglia and Tsang's
        Gamma (:meth:`_narrow_coordinates`).
        """
        if width < 5:
            return self._narrow_coordinates(n, seq_len, width, device).to(dtype)
        k = (width - 3) / 2
        sigma = (2 * k) ** -0.5
        n_pairs = -(-seq_len // 2)
        words = splitmix64(self._seeds(0, _COORDINATES, self.keys.view(-1, 1)), 2 * n_pairs)
        words = words.view(n, n_pairs, 2)
        x = torch.empty(n, n_pairs, 2, device=device)
        x[..., 0], x[..., 1] = box_muller(words[..., 0] & MASK32, words[..., 1] & MASK32)
        c = x.view(n, 2 * n_pairs)[:, :seq_len].mul_(sigma)
        accept = _accept_coordinate(c, uniforms(srl(words.view(n, -1)[:, :seq_len], 32)), k)
        rows, cols = (~accept).nonzero(as_tuple=True)
        candidate = 1
        while rows.numel():
            w = self._words(cols, _COORDINATES, self.keys[rows], candidate)
            value = box_muller(w[0], w[1])[0].mul_(sigma)
            ok = _accept_coordinate(value, uniforms(w[2]), k)
            c[rows[ok], cols[ok]] = value[ok]
            rows, cols, candidate = rows[~ok], cols[~ok], candidate + 1
        return c.to(dtype)

    def _narrow_coordinates(self, n, seq_len, width, device):
        """Coordinates for widths 1 to 4: a sign, or ``z / sqrt(z^2 + 2 G)``, G by Marsaglia-Tsang.

        One Philox block per position: ``z`` and the first candidate's normal
        (Box-Muller), its uniform, and the ``U^(1 / alpha)`` factor of shapes
        below 1; rejected candidates are redrawn, keyed by their index.
        """
        keys = self.keys.view(-1, 1)
        position = torch.arange(seq_len, device=device)
        w = self._words(position, _COORDINATES, keys)
        z, x = box_muller(w[0], w[1])
        if width == 1:
            return torch.where(z >= 0, 1.0, -1.0)
        alpha = (width - 1) / 2
        boost, a, c = _sampling.gamma_constants(alpha)
        G, accept = _sampling.marsaglia_tsang(x.mul_(c), uniforms(w[2]).log_(), a, c)
        rows, cols = (~accept).nonzero(as_tuple=True)
        candidate = 1
        while rows.numel():
            v = self._words(cols, _COORDINATES, self.keys[rows], candidate)
            cx = box_muller(v[0], v[1])[0].mul_(c)
            value, ok = _sampling.marsaglia_tsang(cx, uniforms(v[2]).log_(), a, c)
            G[rows[ok], cols[ok]] = value[ok]
            rows, cols, candidate = rows[~ok], cols[~ok], candidate + 1
        if boost:
            G.mul_(uniforms(w[3]).pow_(1 / alpha))
        return G.mul_(2).addcmul_(z, z).rsqrt_().mul_(z)

    def subsets(self, n, seq_len, max_positions, device):
        """Sorted uniform subsets of ``seq_len`` of ``max_positions``: (n, seq_len).

        Every codebook position gets a 64-bit SplitMix64 word; the positions
        of the ``seq_len`` largest form the subset (distinct words: uniform).
        """
        _sampling.check_codebook_length(seq_len, max_positions)
        keys = splitmix64(self._seeds(0, _SUBSETS, self.keys), max_positions)
        return keys.topk(seq_len, dim=1, sorted=False).indices.sort(dim=1).values


def _accept_coordinate(c, u, k):
    """Whether candidates ``c ~ N(0, 1 / (2 k))`` are accepted for the density ``(1 - c^2)^k``."""
    t = c * c
    return (t < 1) & (u.log_() < torch.log1p(-t).add_(t).mul_(k))


def as_draws(generator):
    """The draw source of ``generator``: a ``torch.Generator``, None, or a source itself."""
    if generator is None or isinstance(generator, torch.Generator):
        return StreamedDraws(generator)
    if isinstance(generator, (StreamedDraws, KeyedDraws)):
        return generator
    raise TypeError(
        "generator must be a torch.Generator, None, StreamedDraws or KeyedDraws, "
        f"got {type(generator).__name__}."
    )
