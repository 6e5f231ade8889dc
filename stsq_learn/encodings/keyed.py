"""Counter-based random numbers in torch integer operations: every number from its key.

A streamed generator (``torch.Generator``) gives the i-th number of a call,
so what a row gets depends on where it sits in the call. A counter-based
generator computes each number from a key and a counter in a fixed number of
integer rounds, so a row's numbers depend on nothing but the key:

- :func:`philox4x32` is Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, SC
  2011): four 32-bit counter words and two 32-bit key words give four 32-bit
  words. The words are held in int64 tensors (torch has no unsigned 64-bit
  arithmetic); the 32 x 32 -> 64-bit products are exact in int64's wrapping
  multiplication, and every right shift is masked.
- :func:`row_keys` turns each row's values into a 64-bit key: a multilinear
  hash of the 64-bit words of its bytes (-0.0 read as 0.0) with odd
  coefficients (wrapping int64 sums do not depend on the summation order,
  hence not on threads or devices), then
  SplitMix64's finalizer (:func:`mix64`) with the seed and the row's shape.
- :func:`uniforms` and :func:`box_muller` turn 32-bit words into float32
  uniforms on (0, 1) (24 bits each) and normals, two per pair of words
  (float64 for a float64 model: the same uniforms, normals to float64's
  precision).

Integer arithmetic is exact, so a CPU and a CUDA device compute the same
words; only the float transforms may round differently (``log``, ``sin`` and
``cos`` are within an ulp or two on each): float32 normals may differ by up
to 2.8e-3 at the smallest radii, 4e-5 wherever the radius is at least 0.1,
float64 ones by a few float64 ulps (the user guide's "What is random in a
prediction" derives the bound).
"""

from __future__ import annotations

import math

import torch

MASK32 = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox-4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # Philox-4x32 key increments (Weyl sequence)
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_U24 = 2.0**-24
_HASH_BLOCK = 1 << 17  # 64-bit words per block of rows hashed at once (1 MiB)


def _signed(value):
    """A 64-bit pattern as the int64 that holds it."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def srl(x, shift):
    """Logical right shift of int64 ``x`` (torch shifts int64 arithmetically)."""
    return (x >> shift) & ((1 << (64 - shift)) - 1)


def mix64(x):
    """SplitMix64's finalizer on an int64 tensor (64-bit patterns, wrapping).

    Parameters
    ----------
    x : Tensor of dtype int64
        Values to mix.

    Returns
    -------
    Tensor of dtype int64
        ``z ^ (z >> 31)`` after the two multiply-xorshift steps of Steele,
        Lea and Flood's SplitMix64, with logical shifts.
    """
    z = (x ^ srl(x, 30)) * _signed(_MIX1)
    z = (z ^ srl(z, 27)) * _signed(_MIX2)
    return z ^ srl(z, 31)


def mix64_int(value):
    """:func:`mix64` of one Python integer (a 64-bit pattern), as an int64 value."""
    return int(mix64(torch.tensor(_signed(value), dtype=torch.int64)))


def philox4x32(counter, key, rounds=10):
    """Philox-4x32 of a counter under a key, in int64 tensor operations.

    Every argument may be an int64 tensor holding values in [0, 2^32) or a
    Python integer; tensors broadcast against each other, which keeps the
    first rounds small when the counters vary along different axes.

    Parameters
    ----------
    counter : tuple of 4 int or Tensor
        The counter words ``c0, c1, c2, c3``.
    key : tuple of 2 int or Tensor
        The key words ``k0, k1``.
    rounds : int, default=10
        Number of rounds (10 is the standard Philox-4x32-10).

    Returns
    -------
    tuple of 4 Tensor of dtype int64
        The output words, each in [0, 2^32), of the broadcast shape.

    Examples
    --------
    >>> from stsq_learn.encodings.keyed import philox4x32
    >>> words = philox4x32((0, 0, 0, 0), (0, 0))
    >>> [hex(int(w)) for w in words]  # Random123's known-answer vector
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    """
    device = next((x.device for x in (*counter, *key) if isinstance(x, torch.Tensor)), None)
    c0, c1, c2, c3 = (torch.as_tensor(c, dtype=torch.int64, device=device) for c in counter)
    k0, k1 = key
    shape = torch.broadcast_shapes(*(getattr(x, "shape", ()) for x in (c0, c1, c2, c3, k0, k1)))
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + _W0) & MASK32, (k1 + _W1) & MASK32
        p0, p1 = c0 * _M0, c2 * _M1  # exact 64-bit products of 32-bit words
        # The low words (p0, p1) keep garbage above bit 31: they only meet
        # xors that are masked afterwards, and are masked on the way out.
        c0 = _xor_masked(p1 >> 32, c1, k0, shape)
        c2 = _xor_masked(p0 >> 32, c3, k1, shape)
        c1, c3 = p1, p0
    return c0, c1 & MASK32, c2, c3 & MASK32


def _xor_masked(a, b, k, shape):
    """``(a ^ b ^ k) & MASK32``, in place on ``a`` (a fresh tensor) once it has ``shape``."""
    if a.shape == shape:
        a ^= b
        a ^= k
    else:
        a = a ^ b ^ k
    return a.bitwise_and_(MASK32)


def uniforms(words, dtype=torch.float32):
    """Uniforms on (0, 1] from 32-bit words: ``(k + 1) / 2^24``, k their top 24 bits.

    Parameters
    ----------
    words : Tensor of dtype int64
        Values in [0, 2^32).
    dtype : torch.dtype, default=torch.float32
        float32 or float64: the values are the same, exact in both.

    Returns
    -------
    Tensor of dtype ``dtype``
        Exact in float32, never 0 (their logarithm is finite).
    """
    return (words >> 8).to(dtype).add_(1.0).mul_(_U24)


def box_muller(words_r, words_theta, dtype=torch.float32):
    """Two independent standard normals from two 32-bit words (Box and Muller, 1958).

    Parameters
    ----------
    words_r, words_theta : Tensor of dtype int64
        Values in [0, 2^32), of one shape: the radius's and the angle's words.
    dtype : torch.dtype, default=torch.float32
        The dtype the transform is computed in (float32 or float64).

    Returns
    -------
    tuple of 2 Tensor of dtype ``dtype``
        ``r cos(theta)`` and ``r sin(theta)`` with ``r = sqrt(-2 log u1)``
        (``u1`` from :func:`uniforms`) and ``theta = 2 pi k / 2^24``, k the
        top 24 bits of ``words_theta``.
    """
    r = uniforms(words_r, dtype).log_().mul_(-2.0).sqrt_()
    theta = (words_theta >> 8).to(dtype).mul_(2 * math.pi * _U24)
    return r * theta.cos(), r.mul_(theta.sin_())


def _hash_coefficients(n_words, device):
    """Odd 64-bit coefficients of the multilinear row hash, one per 64-bit word."""
    j = torch.arange(n_words, dtype=torch.int64, device=device)
    return mix64(j * _signed(_GOLDEN) + 0x5851F42D) | 1


def row_keys(X, seed):
    """One 64-bit key per row of ``X``, from the seed and the row's values.

    Parameters
    ----------
    X : Tensor of shape (n_samples, ...)
        The rows, in the dtype they are computed in (their bytes are
        hashed, with -0.0 read as 0.0: rows equal as values hash alike).
    seed : int
        The seed, e.g. a fitted model's prediction seed.

    Returns
    -------
    Tensor of shape (n_samples,), dtype int64
        Equal rows (same values, shape and dtype) get equal keys, whatever
        the other rows, their order, the device or the thread count.
    """
    n = X.shape[0]
    if n == 0:
        return torch.empty(0, dtype=torch.int64, device=X.device)
    rows = X.contiguous().reshape(n, -1)
    n_words = -(-rows.shape[1] * X.element_size() // 8)
    coef = _hash_coefficients(n_words, X.device)
    # In blocks of rows: the products stay in cache (wrapping sums are exact).
    step = max(1, _HASH_BLOCK // n_words)
    h = torch.cat([(_words(rows[i : i + step]) * coef).sum(dim=1) for i in range(0, n, step)])
    shape_tag = _signed(
        mix64_int(seed * _GOLDEN + 1)
        ^ mix64_int(hash_shape(X.shape[1:], X.element_size()) * _GOLDEN)
    )
    return mix64(mix64(h + shape_tag) + _signed(_GOLDEN))


def _words(rows):
    """A block of rows as 64-bit words of their values: -0.0 read as 0.0.

    Adding +0.0 turns -0.0 into +0.0 and leaves every other value's bits as
    they are, so equal rows (``==``) hash alike whatever their zeros' signs.
    """
    if rows.is_floating_point() or rows.is_complex():
        rows = rows + 0.0
    words = rows.contiguous().view(torch.int32)
    if words.shape[1] % 2:
        words = torch.cat([words, words.new_zeros(len(words), 1)], dim=1)
    return words.view(torch.int64)


def hash_shape(shape, element_size):
    """A 64-bit integer from a row's shape and element size (part of its key)."""
    value = element_size
    for size in shape:
        value = mix64_int(value * _GOLDEN + size + 1) & ((1 << 64) - 1)
    return value


def split_key(keys):
    """The two 32-bit Philox key words of 64-bit keys: ``(low, high)``."""
    return keys & MASK32, srl(keys, 32)


def splitmix64(seeds, n_words):
    """The first ``n_words`` outputs of SplitMix64 seeded with each of ``seeds``.

    SplitMix64 (Steele, Lea and Flood, 2014) adds the golden-ratio constant
    to its state and returns :func:`mix64` of it: output j (from 1) is
    ``mix64(seed + j * 0x9E3779B97F4A7C15)``, computed here for every j at
    once, in place (two allocations, whatever the size).

    Parameters
    ----------
    seeds : Tensor of dtype int64
        One 64-bit seed per stream, any shape S.
    n_words : int
        Outputs per stream.

    Returns
    -------
    Tensor of shape S + (n_words,), dtype int64
        The outputs (64-bit patterns).
    """
    j = torch.arange(1, n_words + 1, dtype=torch.int64, device=seeds.device)
    z = seeds.unsqueeze(-1) + j * _signed(_GOLDEN)
    t = torch.empty_like(z)
    for shift, factor in ((30, _MIX1), (27, _MIX2), (31, None)):
        torch.bitwise_right_shift(z, shift, out=t)
        z ^= t.bitwise_and_((1 << (64 - shift)) - 1)
        if factor is not None:
            z *= _signed(factor)
    return z


def normal_pairs(words, out=None, dtype=torch.float32):
    """Two standard normals per 64-bit word: Box-Muller on its two 24-bit uniforms.

    The radius takes the top 24 bits of the word's high half, the angle those
    of its low half (read as int32 halves: arithmetic shifts, then offset to
    [0, 2^24)), as :func:`box_muller` does.

    Parameters
    ----------
    words : Tensor of dtype int64
        64-bit patterns, contiguous, any shape S.
    out : Tensor of shape (2,) + S, float32 or float64, or None, default=None
        Where to write the normals (may be a strided view); they are
        computed in its dtype.
    dtype : torch.dtype, default=torch.float32
        The dtype the normals are computed in when ``out`` is None.

    Returns
    -------
    Tensor of shape (2,) + S
        ``r cos(theta)`` and ``r sin(theta)`` with ``r = sqrt(-2 log u1)``,
        ``theta = 2 pi u2``.
    """
    halves = words.view(torch.int32)
    return normal_pair_of_halves(halves[..., 1::2], halves[..., 0::2], out, dtype)


def normal_pair_of_halves(radius, angle, out=None, dtype=torch.float32):
    """Box-Muller on int32 words: the normals of :func:`normal_pairs`, from given halves.

    Parameters
    ----------
    radius, angle : Tensor of dtype int32
        Words of one shape S (views allowed): the radius's and the angle's.
    out : Tensor of shape (2,) + S, float32 or float64, or None, default=None
        Where to write the normals (may be a strided view); they are
        computed in its dtype.
    dtype : torch.dtype, default=torch.float32
        The dtype the normals are computed in when ``out`` is None.

    Returns
    -------
    Tensor of shape (2,) + S
        ``r cos(theta)`` and ``r sin(theta)``.
    """
    dtype = dtype if out is None else out.dtype
    theta = _top24(angle, dtype).mul_(2 * math.pi * _U24)
    if dtype == torch.float32:
        # u1 = (k + 1) / 2^24, so log u1 = log(k + 1) - 24 log 2 (k + 1 is exact in float32).
        # The difference keeps ~2e-6 of log u1 near u1 = 1 (float32's spacing at log 2^24):
        # a small radius takes the last bits of log(k + 1), which CPU and CUDA may round
        # apart (logf within 1 ulp on each): up to 2.8e-3 in the smallest radii, 4e-5 where
        # r >= 0.1 (docs, "keyed-draws"). Kept: float32 models draw what they drew. The
        # clamp changes no CPU value (no log(k + 1) rounds above 24 log 2 there) and keeps
        # a device whose log rounds up from a NaN radius.
        r = _top24(radius, dtype).add_(1.0).log_().sub_(24 * math.log(2)).clamp_(max=0.0)
    else:  # log u1 itself (u1 exact): no cancellation, every device's last bits agree
        r = _top24(radius, dtype).add_(1.0).mul_(_U24).log_()
    r = r.mul_(-2.0).sqrt_()
    if out is None:
        out = torch.empty((2, *theta.shape), device=theta.device, dtype=dtype)
    torch.cos(theta, out=out[0])
    torch.sin(theta, out=out[1])
    return out.mul_(r)


def uniform_halves(halves, dtype=torch.float32):
    """Uniforms on (0, 1], ``(k + 1) / 2^24``, from the top 24 bits of int32 words."""
    return _top24(halves, dtype).add_(1.0).mul_(_U24)


def _top24(halves, dtype=torch.float32):
    """``k`` in ``dtype``, ``k`` in [0, 2^24) the top 24 bits of each int32 word (exact)."""
    return (halves >> 8).to(dtype).add_(2**23)
