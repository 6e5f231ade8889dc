"""Streamed draws of the encoding families: each call takes the next numbers of a generator.

The functions :mod:`stsq_learn.encodings` exports for the stochastic and
randomized families (unit vectors, one coordinate of a unit vector, sorted
random subsets), and the two pieces the keyed draws share with them: the
Marsaglia-Tsang acceptance test (:func:`marsaglia_tsang`) and the codebook
length check (:func:`check_codebook_length`); and the deterministic vectors
of the fixed and sinusoidal families.

Each drawn sampler is written for several generators at once (the
``*_from`` functions): members of a batched fit
(:mod:`stsq_learn.engine.members`) draw their rows in equal blocks, each
block from its member's generator with exactly the calls a single fit makes,
in the same order (the rejection steps of the Gamma draws included), and the
arithmetic on the raw numbers is done once on all of them. One generator is
the plain sampler.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from .._validation import check_positive_int


def check_codebook_length(seq_len, max_positions):
    """Raise ``ValueError`` if ``seq_len`` positions do not fit a codebook of ``max_positions``.

    The one check of a randomized-encoding length, for training, predicting
    and :func:`randomized_positions`.
    """
    if seq_len > max_positions:
        raise ValueError(
            f"seq_len={seq_len} is longer than the codebook: max_positions={max_positions}; "
            f"randomized encodings need max_positions >= {seq_len}."
        )


def _draw_device(generator, device):
    """The device the numbers of ``generator`` are drawn on, for a result on ``device``.

    A ``torch.Generator`` draws only tensors of its own device type: a CPU
    generator asked for draws on CUDA (or the other way round) draws them on
    its own device, and the caller moves them to ``device``: the numbers of
    a generator are then the same wherever the result goes. None (torch's
    global generator of each device) draws on ``device``.
    """
    device = torch.device(device)
    if generator is None or generator.device.type == device.type:
        return device
    return generator.device


def gamma_constants(alpha):
    """``(boost, a, c)`` of Marsaglia and Tsang's method for the shape ``alpha``.

    For ``alpha < 1`` the method draws ``Gamma(alpha + 1)`` (``boost``) and
    the caller multiplies by ``U ** (1 / alpha)``.
    """
    boost = alpha < 1
    a = (alpha + 1 if boost else alpha) - 1 / 3
    return boost, a, 1 / np.sqrt(9 * a)


def marsaglia_tsang(cx, log_u, a, c):
    """One Marsaglia-Tsang candidate: ``(value, accepted)``, overwriting ``cx``.

    With ``cx = c x`` (x standard normal), ``log_u = log U`` and
    ``v = (1 + c x)^3``, the value ``a v`` is accepted when
    ``log U < x^2 / 2 + a - a v + a log v``. The test is written with
    ``log1p`` and ``v - 1 = c x (3 + 3 c x + (c x)^2)`` so that it keeps its
    precision in float32 at large shapes (wide encodings); ``log1p`` is
    -inf or NaN where ``c x <= -1``, and the comparison is False there, as
    the method requires.
    """
    v_minus_1 = (cx + 3).mul_(cx).add_(3).mul_(cx)
    threshold = torch.log1p(cx).mul_(3).sub_(v_minus_1).mul_(a)
    threshold.addcmul_(cx, cx, value=1 / (2 * c * c))
    accept = log_u < threshold
    return v_minus_1.add_(1).mul_(a), accept


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
        A generator of another device type than ``device`` draws on its own
        device; the result is moved (the same numbers on every device).
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
    return normalise(fill_normals(P, [generator]))


def fill_normals(out, generators):
    """Fill ``out`` with standard normals: its equal blocks of rows, one per generator, in turn.

    A block gets the numbers ``normal_`` gives a tensor of its shape from
    its generator (one generator: all of ``out``). Returns ``out``.
    """
    rows = out.shape[0] // len(generators)
    for s, generator in enumerate(generators):
        block = out if len(generators) == 1 else out[s * rows : (s + 1) * rows]
        where = _draw_device(generator, block.device)
        if where == block.device:
            block.normal_(generator=generator)
        else:
            normals = torch.empty(block.shape, device=where, dtype=block.dtype)
            block.copy_(normals.normal_(generator=generator))
    return out


def normalise(P):
    """Divide every vector (the last axis) of ``P`` by its norm, in place; returns ``P``."""
    return P.div_(torch.linalg.vector_norm(P, dim=-1, keepdim=True))


def draws_of_each(kind, generators, shape, device, dtype, counts=None):
    """``torch.randn`` (``kind="normal"``) or ``torch.rand`` of ``shape`` from each generator.

    The members of a batched fit draw so (their encodings here, their
    batches in a task's ``_sample_torch_members``).

    The draws are one tensor, each generator's block in turn on the first
    axis (``counts[s]`` rows for generator s, where given); a block holds
    the numbers that call gives alone. A count of 0 draws nothing, as a
    single sampler with nothing left to draw makes no call. One generator:
    the call itself.
    """
    if len(generators) == 1:
        size = shape if counts is None else (counts[0], *shape[1:])
        sample = torch.randn if kind == "normal" else torch.rand
        return sample(size, generator=generators[0], device=device, dtype=dtype)
    counts = [shape[0]] * len(generators) if counts is None else counts
    out = torch.empty((sum(counts), *shape[1:]), device=device, dtype=dtype)
    start = 0
    for k, generator in zip(counts, generators):
        if k:
            block = out[start : start + k]
            if kind == "normal":
                block.normal_(generator=generator)
            else:
                block.uniform_(generator=generator)
            start += k
    return out


def sphere_coordinates(shape, width, *, generator=None, device="cpu", dtype=None):
    """Draw i.i.d. copies of one coordinate of a uniform unit vector in ``R^width``.

    Its density is proportional to ``(1 - c^2) ** ((width - 3) / 2)`` on
    [-1, 1]. Drawn exactly as ``c = z / sqrt(z^2 + 2 G)`` with ``z`` standard
    normal and ``G ~ Gamma((width - 1) / 2, 1)`` (so ``2 G`` is the squared
    norm of the other ``width - 1`` coordinates), G by Marsaglia and Tsang's
    rejection method in whole-tensor operations; width 1 gives ``+-1``.

    Parameters
    ----------
    shape : tuple of int
        Shape of the result.
    width : int
        Dimension m of the sphere's ambient space.
    generator : torch.Generator or None, default=None
        Source of randomness.
        A generator of another device type than ``device`` draws on its own
        device; the result is moved (the same numbers on every device).
    device : str or torch.device, default="cpu"
        Device of the result.
    dtype : torch.dtype or None, default=None
        Floating dtype of the result; None is torch's default.

    Returns
    -------
    Tensor of the given shape
        Values in [-1, 1], mean 0, variance ``1 / width``.

    Raises
    ------
    TypeError, ValueError
        If ``width`` is not an integer >= 1.

    Examples
    --------
    >>> from stsq_learn.encodings import sphere_coordinates
    >>> g = torch.Generator().manual_seed(0)
    >>> c = sphere_coordinates((100000,), 16, generator=g, dtype=torch.float64)
    >>> round(float(c.var()) * 16, 1)
    1.0
    """
    return coordinates_from([generator], shape, width, device, dtype)


def coordinates_from(generators, shape, width, device="cpu", dtype=None):
    """:func:`sphere_coordinates` of ``shape`` from each generator, concatenated (first axis)."""
    width = check_positive_int(width, "width")  # the Gamma shape (width - 1) / 2 must be >= 0
    where = _draw_device(generators[0], device)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    z = draws_of_each("normal", generators, shape, where, dtype)
    if width == 1:
        return torch.where(z >= 0, 1.0, -1.0).to(device=device, dtype=z.dtype)
    block = z.shape if len(generators) == 1 else (z.shape[0] // len(generators), *z.shape[1:])
    chi2 = _standard_gamma(tuple(block), (width - 1) / 2, generators, where, z.dtype).mul_(2)
    return chi2.addcmul_(z, z).rsqrt_().mul_(z).to(device)


def sphere_projections(shape, width, k, *, generator=None, device="cpu", dtype=None):
    """Draw i.i.d. copies of the first ``k`` coordinates of a uniform unit vector in ``R^width``.

    Exactly ``c = z / sqrt(||z||^2 + 2 G)`` with ``z`` standard normal in
    ``R^k`` and ``G ~ Gamma((width - k) / 2, 1)`` (``2 G`` is the squared
    norm of the other ``width - k`` coordinates). ``k = 1`` is
    :func:`sphere_coordinates`' law.

    Parameters
    ----------
    shape : tuple of int
        Shape of the draws; the result has a last axis of ``k`` more.
    width : int
        Dimension m of the sphere's ambient space, more than ``k``.
    k : int
        Number of coordinates.
    generator : torch.Generator or None, default=None
        Source of randomness.
        A generator of another device type than ``device`` draws on its own
        device; the result is moved (the same numbers on every device).
    device : str or torch.device, default="cpu"
        Device of the result.
    dtype : torch.dtype or None, default=None
        Floating dtype of the result.

    Returns
    -------
    Tensor of shape ``shape + (k,)``
        Rows of norm below 1, rotation invariant, covariance ``I / width``.
    """
    return projections_from([generator], shape, width, k, device, dtype)


def projections_from(generators, shape, width, k, device="cpu", dtype=None):
    """:func:`sphere_projections` of ``shape`` from each generator, concatenated (first axis)."""
    if not 1 <= k < width:
        raise ValueError(
            f"need 1 <= k < width for k coordinates of a unit vector, got {k}, {width}."
        )
    where = _draw_device(generators[0], device)
    z = draws_of_each("normal", generators, (*shape, k), where, dtype)
    chi2 = _standard_gamma(tuple(shape), (width - k) / 2, generators, where, z.dtype).mul_(2)
    return z.mul_(chi2.add_(z.square().sum(-1)).rsqrt_().unsqueeze(-1)).to(device)


def _standard_gamma(shape, alpha, generator, device, dtype):
    """Exact Gamma(alpha, 1) draws by Marsaglia and Tsang's method (2000).

    For ``alpha >= 1`` every candidate is accepted with probability above
    0.95 (:func:`marsaglia_tsang`); the rejected ones are redrawn until all
    are accepted. For ``alpha < 1``, ``Gamma(alpha + 1)`` times
    ``U^(1 / alpha)``. Whole-tensor operations, a few times faster on a CPU
    than torch's element-by-element ``_standard_gamma``. A list of
    generators draws ``shape`` from each (its block of the result, on the
    first axis): every round draws each block's pending candidates from its
    own generator, and tests all of them at once.
    """
    generators = generator if isinstance(generator, list) else [generator]
    S = len(generators)
    n = int(np.prod(shape, dtype=np.int64))  # draws of each generator
    boost, a, c = gamma_constants(alpha)
    out = torch.empty(S * n, device=device, dtype=dtype)
    pending = None  # indices of out still to draw (None: all of them)
    while pending is None or pending.numel():
        if pending is None:
            counts = [n] * S
        elif S == 1:
            counts = [pending.numel()]
        else:  # pending is increasing: each block's candidates, in turn
            counts = torch.bincount(pending // n, minlength=S).tolist()
        cx = draws_of_each("normal", generators, (n,), device, dtype, counts).mul_(c)
        log_u = draws_of_each("uniform", generators, (n,), device, dtype, counts).log_()
        value, accept = marsaglia_tsang(cx, log_u, a, c)
        if pending is None:
            out.copy_(value)
            pending = (~accept).nonzero().squeeze(1)
        else:
            out[pending[accept]] = value[accept]
            pending = pending[~accept]
    if boost:
        u = draws_of_each("uniform", generators, (n,), device, dtype)
        out.mul_(u.pow_(1 / alpha))
    return out.view(S * shape[0], *shape[1:]) if shape else out.view(())


def randomized_positions(n_samples, seq_len, max_positions, *, generator=None, device="cpu"):
    """For every row, a sorted uniform random subset of ``seq_len`` of ``max_positions``.

    The positions a row of a randomized-encoding model reads from its
    codebook: distinct, in increasing order (so the order of the tokens is
    kept), every subset equally likely.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    seq_len : int
        Positions per row, at most ``max_positions``.
    max_positions : int
        Size L of the codebook.
    generator : torch.Generator or None, default=None
        Source of randomness.
        A generator of another device type than ``device`` draws on its own
        device; the result is moved (the same numbers on every device).
    device : str or torch.device, default="cpu"
        Device of the result.

    Returns
    -------
    Tensor of shape (n_samples, seq_len), dtype int64
        Increasing indices into the codebook.

    Examples
    --------
    >>> from stsq_learn.encodings import randomized_positions
    >>> generator = torch.Generator().manual_seed(0)
    >>> idx = randomized_positions(2, 3, 10, generator=generator)
    >>> idx.shape, bool((idx.diff(dim=1) > 0).all())
    (torch.Size([2, 3]), True)
    """
    return positions_from([generator], n_samples, seq_len, max_positions, device)


def positions_from(generators, n_samples, seq_len, max_positions, device="cpu"):
    """:func:`randomized_positions` of ``n_samples`` rows from each generator, concatenated."""
    check_codebook_length(seq_len, max_positions)
    where = _draw_device(generators[0], device)
    keys = draws_of_each("uniform", generators, (n_samples, max_positions), where, None)
    return keys.topk(seq_len, dim=1, sorted=False).indices.sort(dim=1).values.to(device)


_FIXED_BLOCK = 64  # positions drawn per seed block: keeps fixed encodings prefix-stable


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


def sinusoidal_encodings(seq_len, width, *, device="cpu", dtype=torch.float32):
    """The sine/cosine encodings of Vaswani et al. (2017), scaled to unit norm.

    Position t gets ``sin(t w_i)`` in coordinate ``2i`` and ``cos(t w_i)`` in
    ``2i + 1``, with frequencies ``w_i = 10000 ** (-2i / width)``; the vector
    is then divided by its norm. Deterministic and prefix-stable: the first T
    rows never depend on how many are asked for.

    Parameters
    ----------
    seq_len : int
        Number of positions T (0, ..., T - 1).
    width : int
        Dimension m of an encoding.
    device : str or torch.device, default="cpu"
        Device of the returned tensor.
    dtype : torch.dtype, default=torch.float32
        Floating dtype of the returned tensor.

    Returns
    -------
    Tensor of shape (seq_len, width)
        One unit vector per position.

    Examples
    --------
    >>> from stsq_learn.encodings import sinusoidal_encodings
    >>> P = sinusoidal_encodings(6, 4)
    >>> P.shape, bool(torch.allclose(P.norm(dim=1), torch.ones(6)))
    (torch.Size([6, 4]), True)
    """
    t = torch.arange(seq_len, dtype=torch.float64, device=device)[:, None]
    i = torch.arange(width, device=device) // 2
    freq = torch.pow(10000.0, -2.0 * i.to(torch.float64) / width)
    angle = t * freq
    P = torch.where(torch.arange(width, device=device) % 2 == 0, angle.sin(), angle.cos())
    return (P / torch.linalg.vector_norm(P, dim=1, keepdim=True)).to(dtype)
