"""isotropic_floor: the best error of W = gamma I, against a brute-force simulation."""

import math

import numpy as np
import pytest
import torch

from stsq_learn import IsotropicFloor, isotropic_floor, relative_mse
from stsq_learn.encodings.families import sphere_encodings
from stsq_learn.nn import AttentionSelector


def _isotropic_module(n_features, width, gamma):
    """The package's attention with W = [0 ; gamma I]: the point SPE training converges to."""
    module = AttentionSelector(n_features, width, learn_token_block=False)
    with torch.no_grad():
        module.key_query[n_features:] = gamma * torch.eye(width)
    return module


def _brute_force(T, q, m, gamma, n=20_000, seed=0):
    """Expected relative MSE given the attention, all T encodings drawn in full."""
    g = torch.Generator().manual_seed(seed)
    module = _isotropic_module(1, m, gamma).double()
    mask = torch.zeros(n, T, dtype=torch.float64)
    mask[:, :q] = 1.0  # which positions are selected does not matter: encodings are i.i.d.
    P = sphere_encodings(n, T, m, generator=g, dtype=torch.float64)
    with torch.no_grad():
        a = module.attention(torch.zeros(n, T, 1, dtype=torch.float64), mask, P)
    return float((q * (a - mask / q).square().sum(1)).mean())


def test_result_object_and_reference_value():
    floor = isotropic_floor(64, 4, 256, n_samples=20_000, random_state=0)
    assert isinstance(floor, IsotropicFloor)
    assert 0.104 < floor.relative_mse < 0.113 and 4.1 < floor.gamma < 4.7
    assert 0 < floor.std_error < 0.001
    assert (floor.seq_len, floor.n_selected, floor.width, floor.n_samples) == (64, 4, 256, 20_000)
    # the refined optimum is at least as good as every gamma of the coarse curve
    assert floor.relative_mse <= floor.relative_mse_curve.min() + 1e-12
    assert floor.gammas[0] == 0 and math.isinf(floor.gammas[-1])
    assert len(floor.gammas) == len(floor.relative_mse_curve)
    assert "relative MSE 0.1" in str(floor)


@pytest.mark.parametrize("T, q, m", [(16, 3, 16), (12, 2, 8), (10, 4, 3)])
def test_curve_matches_full_encodings(T, q, m):
    """The cheap simulation (Gram matrix + one coordinate per position) has the full law."""
    floor = isotropic_floor(T, q, m, n_samples=20_000, random_state=1)
    for gamma in (1.0, 4.0, 16.0):
        ours = floor.relative_mse_curve[np.isclose(floor.gammas, gamma)][0]
        full = _brute_force(T, q, m, gamma)
        assert ours == pytest.approx(full, rel=0.02, abs=0.01), (gamma, ours, full)


@pytest.mark.parametrize("d", [1, 8])
def test_floor_is_the_error_of_the_isotropic_model_whatever_d(d):
    """Gaussian tokens of any dimension: the model W = gamma I scores the floor."""
    floor = isotropic_floor(16, 3, 64, n_samples=20_000, random_state=0)
    assert floor.relative_mse == pytest.approx(0.116, abs=0.004)
    n = 20_000
    g = torch.Generator().manual_seed(d)
    tokens = torch.randn(n, 16, d, generator=g, dtype=torch.float64)
    mask = torch.zeros(n, 16, dtype=torch.float64)
    mask[:, :3] = 1.0
    X = torch.cat([tokens, mask[..., None]], dim=-1)
    y = tokens[:, :3].mean(1)
    module = _isotropic_module(d, 64, floor.gamma).double()
    with torch.no_grad():
        pred = module(X, generator=g)
    assert relative_mse(y.numpy(), pred.numpy()) == pytest.approx(floor.relative_mse, abs=0.012)


def test_floor_falls_with_width_and_draws_and_gamma_grows():
    kw = dict(n_samples=10_000, random_state=0)
    floors = [isotropic_floor(64, 4, m, **kw) for m in (32, 128, 1024)]
    errors = [f.relative_mse for f in floors]
    assert errors == sorted(errors, reverse=True)
    assert errors[0] == pytest.approx(0.40, abs=0.01)
    assert errors[2] == pytest.approx(0.04, abs=0.004)
    assert floors[0].gamma < floors[1].gamma < floors[2].gamma
    averaged = isotropic_floor(64, 4, 256, n_pe_samples=4, **kw)
    single = isotropic_floor(64, 4, 256, **kw)
    assert averaged.relative_mse == pytest.approx(0.040, abs=0.003)
    assert averaged.gamma > single.gamma and averaged.n_pe_samples == 4


def test_edge_cases_of_gamma():
    # q = T: uniform attention (gamma 0) is exact
    full = isotropic_floor(4, 4, 8, n_samples=2000, random_state=0)
    assert full.gamma == 0.0 and full.relative_mse == pytest.approx(0.0, abs=1e-6)
    # q = 2: the two selected scores tie, so a large gamma reaches about 0
    pair = isotropic_floor(64, 2, 256, n_samples=5000, random_state=0)
    assert pair.relative_mse < 1e-3 and pair.gamma > 20
    # q = 1 at width 4: the error still falls at the grid's end; the floor is the limit
    one = isotropic_floor(16, 1, 4, n_samples=5000, random_state=0)
    assert math.isinf(one.gamma) and one.relative_mse == pytest.approx(0.0, abs=1e-9)
    assert one.relative_mse_curve[-2] > 0  # gamma = 256 is not there yet
    # width 1: every score is +-||s||, the floor is near the trivial predictor's error
    narrow = isotropic_floor(64, 4, 1, n_samples=5000, random_state=0)
    assert 0.9 < narrow.relative_mse < 0.95


def test_reproducible_and_seeded():
    a = isotropic_floor(16, 3, 32, n_samples=3000, random_state=5)
    b = isotropic_floor(16, 3, 32, n_samples=3000, random_state=5)
    c = isotropic_floor(16, 3, 32, n_samples=3000, random_state=6)
    assert a == b and a.relative_mse != c.relative_mse
    np.testing.assert_array_equal(a.relative_mse_curve, b.relative_mse_curve)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((8, 9, 16), {}, ValueError, r"n_selected=9 cannot exceed seq_len=8"),
        ((8, 2, 0), {}, ValueError, r"width must be an integer >= 1, got 0"),
        ((8, 2, 2.5), {}, TypeError, r"width must be an integer, got 2\.5"),
        ((8, True, 4), {}, TypeError, r"n_selected must be an integer, got True"),
        ((8, 2, 4), {"n_samples": 0}, ValueError, r"n_samples must be an integer >= 1, got 0"),
        ((8, 2, 4), {"n_pe_samples": "4"}, TypeError, r"n_pe_samples must be an integer"),
        (("8", 2, 4), {}, TypeError, r"seq_len must be an integer, got '8'"),
    ],
)
def test_invalid_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        isotropic_floor(*args, **kwargs)


def test_relative_mse_public_function():
    y = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert relative_mse(y, np.zeros_like(y)) == 1.0
    assert relative_mse(y, y) == 0.0
    assert relative_mse(y, [[0.0, 0.0], [0.0, 2.0]], sample_weight=[3.0, 1.0]) == pytest.approx(
        3 / 7
    )
    with pytest.raises(ValueError, match="y_pred has 3 values"):
        relative_mse(y, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="every target in y_true is zero"):
        relative_mse(np.zeros((2, 2)), y)


@pytest.mark.parametrize("T, n, K", [(64, 3000, 1), (256, 500, 2), (3000, 40, 1)])
def test_simulation_bytes_bounds_what_the_floor_holds(T, n, K):
    """The estimate the length scale's cost check uses: at least the kept scores, and no less
    than the floor's measured peak (numpy's allocations, traced)."""
    import tracemalloc

    from stsq_learn.floor import simulation_bytes

    estimate = simulation_bytes(T, n, K)
    assert estimate >= 4 * n * T * K  # every row's float32 scores are kept
    tracemalloc.start()
    try:
        isotropic_floor(T, 3, 16, n_samples=n, n_pe_samples=K, random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 4 * n * T * K <= peak <= estimate
    assert simulation_bytes(65536, 20_000) == 4 * 20_000 * 65536 + 40 * 32 * 65536
