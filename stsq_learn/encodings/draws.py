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

from .._docstrings import inherit_docstrings
from . import sampling as _sampling
from .keyed import (
    box_muller,
    normal_pair_of_halves,
    normal_pairs,
    philox4x32,
    row_keys,
    split_key,
    splitmix64,
    uniform_halves,
    uniforms,
)

# Counter word c2 holds (draw index << 8) | stream: one stream per kind of draw.
_SPHERE, _COORDINATES, _SUBSETS, _PROJECTIONS, _PROJECTION_GAMMA = 1, 2, 3, 4, 5


class _DrawSource:
    """The draws an encoding family asks for; :class:`StreamedDraws` and :class:`KeyedDraws`."""

    keyed = False

    def for_rows(self, X):
        """The source for the rows ``X`` of a forward pass.

        Parameters
        ----------
        X : Tensor of shape (n, T, d + 1)
            The rows, in the dtype the module computes in.

        Returns
        -------
        source : StreamedDraws or KeyedDraws
            A stream is itself; keyed draws get each row's key from its bytes
            (in their ``dtype``).
        """
        raise NotImplementedError

    def for_draw(self, k):
        """The source for draw ``k`` of the ``n_pe_samples`` a prediction averages.

        Parameters
        ----------
        k : int
            The draw index.

        Returns
        -------
        source : StreamedDraws or KeyedDraws
            A stream just goes on (itself); keyed draws put ``k`` in every key.
        """
        raise NotImplementedError

    def without_reuse(self):
        """This source, drawing full encodings into fresh storage.

        Returns
        -------
        source : StreamedDraws or KeyedDraws
            Used when several draws of one forward pass stay in the graph.
        """
        raise NotImplementedError

    def get_state(self):
        """The state to rewind to (a generator's state; None for keyed draws).

        Returns
        -------
        state : Tensor or None
            What :meth:`set_state` takes.
        """
        raise NotImplementedError

    def set_state(self, state):
        """Rewind to ``state`` (nothing to do for keyed draws).

        Parameters
        ----------
        state : Tensor or None
            As returned by :meth:`get_state`.
        """
        raise NotImplementedError

    def sphere(self, positions, width, device, dtype, full=False, read=None):
        """Unit vectors, uniform on the sphere, for given positions of every row.

        Parameters
        ----------
        positions : Tensor of shape (n, P), dtype int64
            The positions of the vectors (keyed draws key them by position).
        width : int
            Dimension m of a vector.
        device : str or torch.device
            Device of the result.
        dtype : torch.dtype
            Floating dtype of the result.
        full : bool, default=False
            Whether these are all the positions of full stochastic encodings
            (a stream made with ``reuse=True`` then draws into its buffer).
        read : Tensor of shape (n, P) or None, default=None
            The weight of each position in its row's query: a 0 marks
            padding (positions after a row's own, up to the batch's most),
            whose vector is never read. None: every position is read. A
            stream of several members pads each member's rows only up to
            that member's most, as its own fit would.

        Returns
        -------
        Tensor of shape (n, P, width)
            One independent unit vector per row and position.
        """
        raise NotImplementedError

    def coordinates(self, n, seq_len, width, device, dtype):
        """One coordinate of a uniform unit vector of ``R^width`` per row and position.

        Parameters
        ----------
        n : int
            Number of rows.
        seq_len : int
            Positions per row.
        width : int
            Dimension m of the sphere's space.
        device : str or torch.device
            Device of the result.
        dtype : torch.dtype
            Floating dtype of the result.

        Returns
        -------
        Tensor of shape (n, seq_len)
            Independent values of density proportional to
            ``(1 - c^2)^((width - 3) / 2)`` on [-1, 1].
        """
        raise NotImplementedError

    def joint_coordinates(self, n, seq_len, width, k, device, dtype):
        """The first ``k`` coordinates of a uniform unit vector of ``R^width`` per row and position.

        Parameters
        ----------
        n : int
            Number of rows.
        seq_len : int
            Positions per row.
        width : int
            Dimension m of the sphere's space, more than ``k``.
        k : int
            Number of coordinates (the heads of a multi-head query).
        device : str or torch.device
            Device of the result.
        dtype : torch.dtype
            Floating dtype of the result.

        Returns
        -------
        Tensor of shape (n, seq_len, k)
            Independent draws for every row and position.
        """
        raise NotImplementedError

    def subsets(self, n, seq_len, max_positions, device):
        """Sorted uniform random subsets of ``seq_len`` of ``max_positions`` positions.

        Parameters
        ----------
        n : int
            Number of rows.
        seq_len : int
            Size of a subset, at most ``max_positions``.
        max_positions : int
            Size L of the codebook.
        device : str or torch.device
            Device of the result.

        Returns
        -------
        Tensor of shape (n, seq_len), dtype int64
            Increasing codebook positions, every subset equally likely.
        """
        raise NotImplementedError


@inherit_docstrings(_DrawSource)
class StreamedDraws(_DrawSource):
    """Draws taken in turn from a ``torch.Generator``, or from one per member of a batched fit.

    Parameters
    ----------
    generator : torch.Generator, list of torch.Generator or None, default=None
        Source of the numbers; None is torch's global generator. A list
        gives the members of a batched fit (:mod:`stsq_learn.engine.members`)
        their own: rows come in equal blocks, one per member in turn, and
        each block gets the numbers the member's generator gives it alone,
        by the same calls in the same order (what a single fit of the
        member draws).
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
        self._generators = list(generator) if isinstance(generator, list) else [generator]

    def for_rows(self, X):
        return self

    def for_draw(self, k):
        return self

    def without_reuse(self):
        if not self.reuse:
            return self
        return StreamedDraws(self.generator)

    def members(self, index):
        """The stream of the members ``index`` (a list of member numbers), in that order.

        Parameters
        ----------
        index : list of int
            Members of this stream (its generators' positions).

        Returns
        -------
        StreamedDraws
            Their generators, with a buffer of its own.
        """
        return StreamedDraws([self._generators[i] for i in index], self.reuse)

    def keep(self, index):
        """Keep only the members at positions ``index``: the others stopped (a batched fit).

        Parameters
        ----------
        index : list of int
            Positions, in this stream's list, of the members that go on.
        """
        self._generators[:] = [self._generators[i] for i in index]
        self._buffer = None

    def get_state(self):
        states = [None if g is None else g.get_state() for g in self._generators]
        return states if isinstance(self.generator, list) else states[0]

    def set_state(self, state):
        states = state if isinstance(self.generator, list) else [state]
        for generator, value in zip(self._generators, states):
            if generator is not None:
                generator.set_state(value)

    def sphere(self, positions, width, device, dtype, full=False, read=None):
        n, P = positions.shape
        out = None
        if full and self.reuse:
            buf = self._buffer
            if buf is None or buf.shape[0] < n or buf.shape[1:] != (P, width) or buf.dtype != dtype:
                buf = self._buffer = torch.empty(n, P, width, device=device, dtype=dtype)
            out = buf[:n]
        if len(self._generators) == 1:
            return _sampling.sphere_encodings(
                n, P, width, generator=self._generators[0], device=device, dtype=dtype, out=out
            )
        if out is None:
            out = torch.empty(n, P, width, device=device, dtype=dtype)
        S = len(self._generators)
        rows = n // S
        # Each member's rows as its own fit draws them: padded only to its own largest query
        # (a member reads its last position if one of its rows does: positions come first).
        if read is None or bool((read[:, -1] != 0).view(S, rows).any(1).all()):
            return _sampling.normalise(_sampling.fill_normals(out, self._generators))
        counts = (read != 0).view(S, rows, P).sum(2).amax(1).tolist()
        for s, (generator, k) in enumerate(zip(self._generators, counts)):
            block = out[s * rows : (s + 1) * rows]
            block[:, k:] = 1.0  # padding of this member: never read, any finite vector
            own = torch.empty(rows, k, width, device=device, dtype=dtype)
            block[:, :k] = _sampling.fill_normals(own, [generator])
        return _sampling.normalise(out)

    def coordinates(self, n, seq_len, width, device, dtype):
        if len(self._generators) == 1:
            return _sampling.sphere_coordinates(
                (n, seq_len), width, generator=self._generators[0], device=device, dtype=dtype
            )
        shape = (n // len(self._generators), seq_len)
        return _sampling.coordinates_from(self._generators, shape, width, device, dtype)

    def joint_coordinates(self, n, seq_len, width, k, device, dtype):
        if len(self._generators) == 1:
            return _sampling.sphere_projections(
                (n, seq_len), width, k, generator=self._generators[0], device=device, dtype=dtype
            )
        shape = (n // len(self._generators), seq_len)
        return _sampling.projections_from(self._generators, shape, width, k, device, dtype)

    def subsets(self, n, seq_len, max_positions, device):
        if len(self._generators) == 1:
            return _sampling.randomized_positions(
                n, seq_len, max_positions, generator=self._generators[0], device=device
            )
        rows = n // len(self._generators)
        return _sampling.positions_from(self._generators, rows, seq_len, max_positions, device)


@inherit_docstrings(_DrawSource)
class KeyedDraws(_DrawSource):
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
    dtype : torch.dtype or None, default=None
        The dtype whose bytes of a row are hashed (the fitted model's; None:
        the rows' own). A float64 redo of an overflowing float32 chunk then
        hashes the same bytes, and gets the same draws.

    Notes
    -----
    - The transforms of the integer words are computed in float32, in
      float64 for a float64 model (``dtype``; without one, for draws asked
      in float64), so that the draws keep the precision asked: CPU and
      CUDA then agree to float64 rounding.
    - Unit vectors: a Philox block per (row, position) seeds SplitMix64,
      whose ``width / 2`` words give ``width`` normals (Box-Muller, two per
      word), then normalised.
    - Coordinates, density proportional to ``(1 - c^2)^k`` with
      ``k = (width - 3) / 2``: for ``width >= 5`` (k >= 1) by rejection from
      ``N(0, 1 / (2 k))``, whose density ``exp(-k c^2)`` bounds it
      (``log(1 - t) <= -t``): ``c`` is accepted when ``c^2 < 1`` and
      ``log U < k (log(1 - c^2) + c^2)``, for more than 75 % of candidates at
      width 5 and 99.7 % at width 256. One SplitMix64 word per position
      gives the candidate (half a Box-Muller pair) and its uniform; each
      rejected one takes further candidates, one Philox block each, keyed by
      the candidate's index, until accepted (exact). Widths 1 to 4: a sign,
      or ``z / sqrt(z^2 + 2 G)`` with ``G`` by Marsaglia and Tsang's method.
    - Subsets: one 64-bit SplitMix64 word per codebook position; the
      positions of the ``seq_len`` largest, sorted (distinct words: every
      subset equally likely).
    """

    keyed = True

    def __init__(self, seed, keys=None, draw=0, dtype=None):
        if not 0 <= int(draw) < 1 << 24:
            raise ValueError(f"draw must be in [0, 2^24), got {draw!r}.")
        self.seed = int(seed)
        self.keys = keys
        self.draw = int(draw)
        self.dtype = dtype

    def for_rows(self, X):
        if self.keys is not None:
            return self
        rows = X if self.dtype is None else X.to(self.dtype)
        return KeyedDraws(self.seed, row_keys(rows, self.seed), self.draw, self.dtype)

    def for_draw(self, k):
        return KeyedDraws(self.seed, self.keys, k, self.dtype)

    def without_reuse(self):
        return self

    def get_state(self):
        return None

    def set_state(self, state):
        pass

    def _words(self, position, stream, keys, candidate=0):
        """The four Philox words of each (row key, position, draw, kind, candidate) counter."""
        k0, k1 = split_key(keys)
        return philox4x32((0, position, (self.draw << 8) | stream, candidate), (k0, k1))

    def _seeds(self, position, stream, keys):
        """A 64-bit SplitMix64 seed per (row key, position): two words of a Philox block."""
        w = self._words(position, stream, keys)
        return w[0] | (w[1] << 32)

    def _computed_in(self, dtype):
        """The dtype the draws are computed in: float64 for a float64 model, else float32.

        The model's dtype (:attr:`dtype`) decides, so that a float64 redo of
        a float32 model's chunk gets its float32 draws; without one, the
        dtype asked.
        """
        model = self.dtype if self.dtype is not None else dtype
        return torch.float64 if model == torch.float64 else torch.float32

    def sphere(self, positions, width, device, dtype, full=False, read=None):
        n, P = self.keys.shape[0], positions.shape[1]
        n_words = -(-width // 2)
        words = splitmix64(self._seeds(positions, _SPHERE, self.keys.view(-1, 1)), n_words)
        Z = torch.empty(n, P, 2, n_words, device=device, dtype=self._computed_in(dtype))
        normal_pairs(words, out=Z.movedim(2, 0))
        Z = Z.view(n, P, 2 * n_words)[..., :width].to(dtype)
        return Z.div_(torch.linalg.vector_norm(Z, dim=-1, keepdim=True))

    def coordinates(self, n, seq_len, width, device, dtype):
        computed_in = self._computed_in(dtype)
        if width < 5:
            return self._narrow_coordinates(n, seq_len, width, device, computed_in).to(dtype)
        k = (width - 3) / 2
        sigma = (2 * k) ** -0.5
        n_pairs = -(-seq_len // 2)
        words = splitmix64(self._seeds(0, _COORDINATES, self.keys.view(-1, 1)), 2 * n_pairs)
        # Int32 halves of the two words of a pair of positions: lo0, hi0, lo1, hi1.
        # The low halves make a Box-Muller pair, the high ones the two uniforms.
        halves = words.view(torch.int32).view(n, n_pairs, 4)
        x = torch.empty(n, n_pairs, 2, device=device, dtype=computed_in)
        normal_pair_of_halves(halves[..., 0], halves[..., 2], out=x.movedim(2, 0))
        c = x.view(n, 2 * n_pairs)[:, :seq_len].mul_(sigma)
        u = uniform_halves(halves[..., 1::2], computed_in).view(n, 2 * n_pairs)[:, :seq_len]
        accept = _accept_coordinate(c, u, k)
        rows, cols = (~accept).nonzero(as_tuple=True)
        candidate = 1
        while rows.numel():
            w = self._words(cols, _COORDINATES, self.keys[rows], candidate)
            value = box_muller(w[0], w[1], computed_in)[0].mul_(sigma)
            ok = _accept_coordinate(value, uniforms(w[2], computed_in), k)
            c[rows[ok], cols[ok]] = value[ok]
            rows, cols, candidate = rows[~ok], cols[~ok], candidate + 1
        return c.to(dtype)

    def _narrow_coordinates(self, n, seq_len, width, device, computed_in):
        """Coordinates for widths 1 to 4: a sign, or ``z / sqrt(z^2 + 2 G)``, G by Marsaglia-Tsang.

        One Philox block per position: ``z`` and the first candidate's normal
        (Box-Muller), its uniform, and the ``U^(1 / alpha)`` factor of shapes
        below 1; rejected candidates are redrawn, keyed by their index.
        """
        keys = self.keys.view(-1, 1)
        position = torch.arange(seq_len, device=device)
        w = self._words(position, _COORDINATES, keys)
        z, x = box_muller(w[0], w[1], computed_in)
        if width == 1:
            return torch.where(z >= 0, 1.0, -1.0)
        G = self._keyed_gamma(w, x, (width - 1) / 2, _COORDINATES)
        return G.mul_(2).addcmul_(z, z).rsqrt_().mul_(z)

    def joint_coordinates(self, n, seq_len, width, k, device, dtype):
        # k normals from SplitMix64 words of a per-position seed, and Gamma((width - k) / 2)
        # by Marsaglia and Tsang, a Philox block per candidate (as _narrow_coordinates).
        keys = self.keys.view(-1, 1)
        position = torch.arange(seq_len, device=device)
        words = splitmix64(self._seeds(position, _PROJECTIONS, keys), -(-k // 2))
        computed_in = self._computed_in(dtype)
        z = normal_pairs(words, dtype=computed_in).movedim(0, -1).reshape(n, seq_len, -1)[..., :k]
        w = self._words(position, _PROJECTION_GAMMA, keys)
        x = box_muller(w[0], w[1], computed_in)[0]
        G = self._keyed_gamma(w, x, (width - k) / 2, _PROJECTION_GAMMA)
        return z.mul_(G.mul_(2).add_(z.square().sum(-1)).rsqrt_().unsqueeze(-1)).to(dtype)

    def _keyed_gamma(self, w, x, alpha, stream):
        """Gamma(alpha, 1) per row and position by Marsaglia and Tsang, from Philox blocks.

        ``w`` holds the four words of each position's first block and ``x``
        its candidate's standard normal (overwritten); the uniform is
        ``w[2]``'s, the ``U^(1 / alpha)`` factor of shapes below 1 ``w[3]``'s.
        Rejected candidates are redrawn, a block each, keyed by their index.
        """
        boost, a, c = _sampling.gamma_constants(alpha)
        G, accept = _sampling.marsaglia_tsang(x.mul_(c), uniforms(w[2], x.dtype).log_(), a, c)
        rows, cols = (~accept).nonzero(as_tuple=True)
        candidate = 1
        while rows.numel():
            v = self._words(cols, stream, self.keys[rows], candidate)
            cx = box_muller(v[0], v[1], G.dtype)[0].mul_(c)
            value, ok = _sampling.marsaglia_tsang(cx, uniforms(v[2], G.dtype).log_(), a, c)
            G[rows[ok], cols[ok]] = value[ok]
            rows, cols, candidate = rows[~ok], cols[~ok], candidate + 1
        if boost:
            G.mul_(uniforms(w[3], G.dtype).pow_(1 / alpha))
        return G

    def subsets(self, n, seq_len, max_positions, device):
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
