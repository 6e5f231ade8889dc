"""The counter-based generator of keyed draws: bit-exact integers, exact laws.

Philox-4x32-10 is checked against Random123's known-answer vectors and an
independent NumPy implementation in unsigned arithmetic; SplitMix64 against
its published reference outputs. The transforms (normals, unit vectors, one
coordinate of a unit vector, sorted subsets) are checked against their laws
with Kolmogorov-Smirnov and chi-square tests at fixed seeds.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from stsq_learn.encodings.families import KeyedDraws
from stsq_learn.encodings.keyed import (
    mix64,
    normal_pairs,
    philox4x32,
    row_keys,
    splitmix64,
)

# -- Philox-4x32-10 ------------------------------------------------------------------------
RANDOM123_KAT = [  # Random123's kat_vectors: counter, key, output
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), RANDOM123_KAT)
def test_philox_matches_random123_known_answers(counter, key, expected):
    words = philox4x32(counter, key)
    assert tuple(int(w) for w in words) == expected


def _philox_numpy(counter, key):
    """Philox-4x32-10 in NumPy uint64: an independent reference (logical shifts, masks)."""
    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(x, dtype=np.uint64) for x in counter]
    k0, k1 = (np.asarray(x, dtype=np.uint64) for x in key)
    for _ in range(10):
        p0 = c[0] * np.uint64(0xD2511F53)
        p1 = c[2] * np.uint64(0xCD9E8D57)
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ k0,
            p1 & mask,
            (p0 >> np.uint64(32)) ^ c[3] ^ k1,
            p0 & mask,
        ]
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    return c


def test_philox_is_bit_exact_against_numpy_on_random_counters_and_keys():
    rng = np.random.default_rng(0)
    counter = [rng.integers(0, 2**32, 5000, dtype=np.uint64) for _ in range(4)]
    key = [rng.integers(0, 2**32, 5000, dtype=np.uint64) for _ in range(2)]
    ours = philox4x32(
        [torch.as_tensor(c.astype(np.int64)) for c in counter],
        [torch.as_tensor(k.astype(np.int64)) for k in key],
    )
    for got, want in zip(ours, _philox_numpy(counter, key)):
        np.testing.assert_array_equal(got.numpy().astype(np.uint64), want)


def test_philox_broadcasts_its_words():
    # Counters varying along different axes give the words of the full grid.
    block, position = torch.arange(3), torch.arange(4).view(4, 1)
    key = (torch.tensor([[7]]), 9)
    grid = philox4x32((block, position, 5, 0), key)
    one = philox4x32((2, 3, 5, 0), (7, 9))
    assert grid[0].shape == (4, 3)
    assert [int(w[3, 2]) for w in grid] == [int(w) for w in one]


# -- SplitMix64 ----------------------------------------------------------------------------
def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def test_splitmix64_matches_its_reference_outputs():
    # Steele, Lea and Flood's generator seeded with 1234567 (Rosetta Code) and 0.
    want = [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
        4593380528125082431,
        16408922859458223821,
    ]
    out = splitmix64(torch.tensor([1234567, 0]), 5)
    assert [v % (1 << 64) for v in out[0].tolist()] == want
    assert out[1, 0].item() % (1 << 64) == 0xE220A8397B1DCDAF


def test_mix64_is_the_splitmix64_finalizer():
    def reference(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
        return z ^ (z >> 31)

    values = [0, 1, 2**63, 2**64 - 1, 0x0123456789ABCDEF]
    got = mix64(torch.tensor([_signed(v) for v in values]))
    assert [v % (1 << 64) for v in got.tolist()] == [reference(v) for v in values]


# -- row keys ------------------------------------------------------------------------------
def test_row_keys_depend_on_the_row_only():
    X = torch.randn(50, 6, 4)
    keys = row_keys(X, 3)
    assert keys.dtype == torch.int64 and keys.shape == (50,)
    assert len(set(keys.tolist())) == 50
    perm = torch.randperm(50, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(row_keys(X[perm], 3), keys[perm], rtol=0, atol=0)
    torch.testing.assert_close(row_keys(X[7:8], 3), keys[7:8], rtol=0, atol=0)
    doubled = torch.cat([X[:5], X[:5]])
    torch.testing.assert_close(row_keys(doubled, 3), keys[:5].repeat(2), rtol=0, atol=0)
    assert not torch.equal(row_keys(X, 4), keys)  # the seed
    assert not torch.equal(row_keys(X.double(), 3), keys)  # the bytes after the cast
    assert not torch.equal(row_keys(X.reshape(50, 4, 6), 3), keys)  # the shape


def test_row_keys_see_every_bit_and_odd_lengths():
    X = torch.randn(1, 5, 3)  # 15 float32 words: an odd count
    base = row_keys(X, 0)
    flipped = X.clone()
    flipped.view(torch.int32)[0, 4, 2] ^= 1  # the last word's lowest bit
    assert row_keys(flipped, 0) != base


def test_row_keys_do_not_depend_on_threads():
    X = torch.randn(300, 32, 9)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = row_keys(X, 5)
        torch.set_num_threads(2)
        two = row_keys(X, 5)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(one, two, rtol=0, atol=0)


# -- the laws of the keyed draws -------------------------------------------------------------
def _keyed(n_rows, seed=0, width=9):
    X = torch.arange(n_rows * width, dtype=torch.float32).view(n_rows, 1, width)
    return KeyedDraws(seed).for_rows(X)


def _normals_in_float64(words):
    """The keyed normals of 64-bit ``words``, in NumPy float64 from their definition.

    Radius from the high half's top 24 bits, angle from the low half's, each
    read as an int32 shifted right and offset by 2^23 (the top bit flipped).
    """
    w = words.numpy().view(np.uint64)
    k_r = ((w >> np.uint64(40)) ^ np.uint64(1 << 23)).astype(np.float64)
    k_t = (((w & np.uint64(0xFFFFFFFF)) >> np.uint64(8)) ^ np.uint64(1 << 23)).astype(np.float64)
    r, theta = np.sqrt(-2 * np.log((k_r + 1) / 2**24)), 2 * np.pi * k_t / 2**24
    return np.stack([r * np.cos(theta), r * np.sin(theta)])


def test_keyed_normals_are_computed_in_the_dtype_asked():
    """Float64 normals are float64's (CPU and CUDA agreed to 3.5e-6 only in a float64
    sphere, computed in float32); float32's log(k + 1) - 24 log 2 keeps ~2e-6 of a
    logarithm near 0, so a small radius is off by up to ~1e-4 (kept for float32 models)."""
    words = splitmix64(torch.arange(50), 400)
    exact = _normals_in_float64(words)
    f64 = normal_pairs(words, dtype=torch.float64)
    assert f64.dtype == torch.float64
    np.testing.assert_allclose(f64.numpy(), exact, rtol=0, atol=1e-14)
    out = torch.empty(2, 50, 400, dtype=torch.float64)
    assert normal_pairs(words, out=out) is out
    torch.testing.assert_close(out, f64, rtol=0, atol=0)
    f32 = normal_pairs(words)
    assert f32.dtype == torch.float32
    assert 1e-6 < np.abs(f32.double().numpy() - exact).max() < 1e-3


@pytest.mark.parametrize("width", [1, 3, 4, 8, 32])
def test_float64_keyed_draws_keep_float64_precision(width):
    """A float64 model's draws are computed in float64; a float32 model's draws are
    float32's, also asked in float64 (an overflowing chunk redone in float64)."""
    X = torch.randn(300, 6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    where = torch.arange(6).expand(300, 6)
    f64 = KeyedDraws(3, dtype=torch.float64).for_rows(X)
    asked = KeyedDraws(3).for_rows(X)  # no model dtype: the dtype asked decides
    for source in (f64, asked):
        P = source.sphere(where, width, "cpu", torch.float64)
        assert P.dtype == torch.float64
        torch.testing.assert_close(P.norm(dim=-1), torch.ones(300, 6, dtype=torch.float64))
    n_words = -(-width // 2)
    seeds = f64._seeds(where, 1, f64.keys.view(-1, 1))  # stream 1: the unit vectors
    Z = np.moveaxis(_normals_in_float64(splitmix64(seeds, n_words)), 0, 2)
    Z = Z.reshape(300, 6, 2 * n_words)[..., :width]
    want = Z / np.linalg.norm(Z, axis=-1, keepdims=True)
    np.testing.assert_allclose(f64.sphere(where, width, "cpu", torch.float64), want, atol=1e-13)
    f32 = KeyedDraws(3, dtype=torch.float32).for_rows(X)
    for draw in ("sphere", "coordinates"):
        args = (where, width) if draw == "sphere" else (300, 6, width)
        in_f32 = getattr(f32, draw)(*args, "cpu", torch.float32)
        redone = getattr(f32, draw)(*args, "cpu", torch.float64)
        # The float32 normals; a unit vector is normalised in the dtype asked.
        tol = 1e-6 if draw == "sphere" else 0
        torch.testing.assert_close(redone, in_f32.double(), rtol=0, atol=tol)
        if width > 1:  # the same keys' draws in float64 differ from float32's in the last bits
            own = getattr(asked, draw)(*args, "cpu", torch.float64)
            single = getattr(asked, draw)(*args, "cpu", torch.float32).double()
            assert not torch.equal(own, single)
            torch.testing.assert_close(own, single, rtol=0, atol=1e-4)


def test_keyed_normals_are_standard_normal_and_independent():
    words = splitmix64(torch.arange(50), 400)  # 20000 words: 40000 normals
    a, b = (z.flatten().double().numpy() for z in normal_pairs(words))
    for z in (a, b, np.concatenate([a, b])):
        assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.03  # the two halves of a pair
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.03  # consecutive words


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 16, 256])
def test_keyed_coordinates_have_the_law_of_a_coordinate(width):
    # One coordinate of a uniform unit vector of R^m: (1 + c) / 2 ~ Beta((m-1)/2, (m-1)/2).
    draws = _keyed(400, seed=width)
    c = draws.coordinates(400, 50, width, "cpu", torch.float64).flatten().numpy()
    assert np.abs(c).max() <= 1.0
    if width == 1:
        assert set(np.unique(c)) == {-1.0, 1.0} and 9500 < (c > 0).sum() < 10500
        return
    a = (width - 1) / 2
    assert stats.kstest((1 + c) / 2, stats.beta(a, a).cdf).pvalue > 1e-3
    assert c.var() * width == pytest.approx(1.0, abs=0.05)


def test_keyed_coordinates_take_further_candidates_when_rejected():
    # At width 5 a quarter of the first candidates are rejected: the redrawn
    # ones come from their own keys, and the law is still exact.
    draws = _keyed(1000, seed=1)
    c = draws.coordinates(1000, 40, 5, "cpu", torch.float32)
    again = _keyed(1000, seed=1).coordinates(1000, 40, 5, "cpu", torch.float32)
    torch.testing.assert_close(c, again, rtol=0, atol=0)
    assert stats.kstest((1 + c.flatten().double().numpy()) / 2, stats.beta(2, 2).cdf).pvalue > 1e-3


def test_the_coordinate_law_test_can_tell_a_wrong_width_apart():
    c = _keyed(400, seed=7).coordinates(400, 50, 16, "cpu", torch.float64).flatten().numpy()
    assert stats.kstest((1 + c) / 2, stats.beta(5.5, 5.5).cdf).pvalue < 1e-6  # width 12


@pytest.mark.parametrize("width", [3, 16])
def test_keyed_unit_vectors_are_uniform_on_the_sphere(width):
    draws = _keyed(2000, seed=width)
    positions = torch.arange(5).expand(2000, 5)
    P = draws.sphere(positions, width, "cpu", torch.float64)
    assert P.shape == (2000, 5, width)
    torch.testing.assert_close(P.norm(dim=-1), torch.ones(2000, 5, dtype=torch.float64))
    a = (width - 1) / 2
    for j in (0, width - 1):  # a first and a last coordinate
        assert (
            stats.kstest((1 + P[..., j].flatten().numpy()) / 2, stats.beta(a, a).cdf).pvalue > 1e-3
        )
    # Isotropy: the projection on a fixed direction has the same law.
    v = torch.ones(width, dtype=torch.float64) / math.sqrt(width)
    assert stats.kstest((1 + (P @ v).flatten().numpy()) / 2, stats.beta(a, a).cdf).pvalue > 1e-3
    # Different positions and rows get independent vectors.
    assert abs(float((P[:, 0] * P[:, 1]).sum(-1).mean())) < 4 / math.sqrt(2000 * width)


def test_keyed_subsets_are_sorted_uniform_subsets():
    draws = _keyed(20000, seed=3)
    idx = draws.subsets(20000, 3, 6, "cpu")
    assert bool((idx.diff(dim=1) > 0).all()) and idx.min() >= 0 and idx.max() < 6
    subsets = [tuple(r) for r in idx.tolist()]
    counts = np.array([subsets.count(s) for s in itertools.combinations(range(6), 3)])
    assert counts.sum() == 20000  # all C(6, 3) = 20 subsets
    assert stats.chisquare(counts).pvalue > 1e-3
    with pytest.raises(ValueError, match="seq_len=7 is longer than the codebook: max_positions=6"):
        draws.subsets(20000, 7, 6, "cpu")


def test_draws_are_keyed_by_draw_index_position_and_kind():
    draws = _keyed(10)
    where = torch.arange(3).expand(10, 3)
    first = draws.sphere(where, 8, "cpu", torch.float32)
    torch.testing.assert_close(draws.for_draw(0).sphere(where, 8, "cpu", torch.float32), first)
    assert not torch.allclose(draws.for_draw(1).sphere(where, 8, "cpu", torch.float32), first)
    # A position's vector does not depend on the other positions asked for.
    torch.testing.assert_close(
        draws.sphere(where[:, 2:], 8, "cpu", torch.float32), first[:, 2:], rtol=0, atol=0
    )
    c = draws.coordinates(10, 6, 8, "cpu", torch.float32)
    torch.testing.assert_close(draws.coordinates(10, 4, 8, "cpu", torch.float32), c[:, :4])


def _radius(log_k1):
    """The float32 radius of keyed normals from ``log(k + 1)`` (keyed.normal_pair_of_halves)."""
    return log_k1.sub(24 * math.log(2)).clamp_(max=0.0).mul_(-2.0).sqrt_()


@pytest.mark.parametrize(("ulps", "largest"), [(1, 1.96e-3), (2, 2.77e-3)])
def test_the_float32_radius_moves_within_the_documented_bound_when_log_rounds_apart(ulps, largest):
    """The user guide's bound of the CPU-CUDA difference of float32 keyed normals: a
    logarithm ``ulps`` ulps apart moves the radius by at most ``largest`` (at the smallest
    radii), by under 4e-5 where r >= 0.1, and never to NaN (the clamp). The largest 2**18
    values of k hold every radius below 0.17, where the cancellation is."""
    k1 = torch.arange(2**24 - 2**18, 2**24, dtype=torch.float64).add_(1).to(torch.float32)
    log = k1.log()
    r = _radius(log)
    assert not torch.isnan(r).any() and float(log.max()) <= 24 * math.log(2) + 1e-6
    for direction in (math.inf, -math.inf):
        moved = log.clone()
        for _ in range(ulps):
            moved = torch.nextafter(moved, torch.tensor(direction))
        r_moved = _radius(moved)
        assert not torch.isnan(r_moved).any()
        diff = (r_moved - r).abs()
        assert float(diff.max()) <= largest
        assert float(diff[r >= 0.1].max()) < 4e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_and_cuda_compute_the_same_keyed_draws():
    X = torch.randn(64, 12, 5)
    keys = row_keys(X, 11)
    torch.testing.assert_close(row_keys(X.cuda(), 11).cpu(), keys, rtol=0, atol=0)
    counter = (torch.arange(1000), torch.arange(1000).flip(0), 3, 1)
    for got, want in zip(
        philox4x32([c.cuda() if torch.is_tensor(c) else c for c in counter], (5, 6)),
        philox4x32(counter, (5, 6)),
    ):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    words = splitmix64(keys, 300)
    torch.testing.assert_close(splitmix64(keys.cuda(), 300).cpu(), words, rtol=0, atol=0)
    cpu, gpu = KeyedDraws(11).for_rows(X), KeyedDraws(11).for_rows(X.cuda())
    where = torch.arange(3).expand(64, 3)
    # Float64 draws are computed in float64 (they differed by 3.5e-6 when computed in
    # float32): the devices' log, sin and cos agree to a few float64 ulps.
    torch.testing.assert_close(
        gpu.sphere(where.cuda(), 32, "cuda", torch.float64).cpu(),
        cpu.sphere(where, 32, "cpu", torch.float64),
        rtol=1e-9,
        atol=1e-11,
    )
    for width in (3, 32):
        torch.testing.assert_close(
            gpu.coordinates(64, 12, width, "cuda", torch.float64).cpu(),
            cpu.coordinates(64, 12, width, "cpu", torch.float64),
            rtol=1e-9,
            atol=1e-11,
        )
    torch.testing.assert_close(
        gpu.joint_coordinates(64, 12, 16, 3, "cuda", torch.float64).cpu(),
        cpu.joint_coordinates(64, 12, 16, 3, "cpu", torch.float64),
        rtol=1e-9,
        atol=1e-11,
    )
    torch.testing.assert_close(
        gpu.subsets(64, 12, 40, "cuda").cpu(), cpu.subsets(64, 12, 40, "cpu"), rtol=0, atol=0
    )
    # Float32 normals: within the user guide's bound (2.8e-3; 4e-5 + 1.1e-6 where |z| >= 0.1).
    z_cpu = normal_pairs(words)
    diff = (normal_pairs(words.cuda()).cpu() - z_cpu).abs()
    assert float(diff.max()) <= 2.8e-3
    assert float(diff[z_cpu.abs() >= 0.1].max()) <= 4.2e-5


def test_keyed_draws_refuse_a_draw_index_beyond_their_counter():
    with pytest.raises(ValueError, match=r"draw must be in \[0, 2\^24\), got 16777216"):
        KeyedDraws(0, draw=1 << 24)
    assert row_keys(torch.empty(0, 4, 3), 0).shape == (0,)
