"""Encoding families and the marginal sampler of stochastic encodings.

The marginal sampler must give the forward pass exactly the law of full
draws; the tests compare both samplers on the same fixed rows and W over
thousands of draws, with their sampling error (means) and a two-sample
Kolmogorov-Smirnov test at fixed seeds.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from stsq_learn.encodings import sampling as _sampling
from stsq_learn.encodings.families import (
    fixed_encodings,
    randomized_positions,
    sinusoidal_encodings,
    sphere_coordinates,
    sphere_encodings,
)
from stsq_learn.encodings.sampling import _standard_gamma
from stsq_learn.nn import AttentionSelector


# -- one coordinate of a uniform unit vector -------------------------------------------
@pytest.mark.parametrize("width", [2, 3, 16, 256])
def test_sphere_coordinates_have_the_law_of_a_coordinate(width):
    g = torch.Generator().manual_seed(width)
    c = sphere_coordinates((20000,), width, generator=g, dtype=torch.float64).numpy()
    full = sphere_encodings(20000, 1, width, generator=g, dtype=torch.float64)[:, 0, 0].numpy()
    assert np.abs(c).max() <= 1.0
    # Moments of the law: E c = 0, E c^2 = 1/m, E c^4 = 3 / (m (m + 2)).
    assert abs(c.mean()) < 4 * math.sqrt(1 / width / 20000)
    assert c.var() * width == pytest.approx(1.0, abs=0.05)
    assert (c**4).mean() == pytest.approx(3 / (width * (width + 2)), rel=0.1)
    assert stats.ks_2samp(c, full).pvalue > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5, 127.5, 8191.5])
def test_standard_gamma_has_the_gamma_law(alpha, dtype):
    # The rejection sampler behind the coordinates, against scipy's Gamma law:
    # the boosted branch (alpha < 1), the smallest shape of the main branch, and
    # the shapes of widths 256 and 16384 in float32 (where a naive acceptance
    # test would lose its precision).
    g = torch.Generator().manual_seed(int(2 * alpha))
    G = _standard_gamma((40000,), alpha, g, "cpu", dtype)
    assert G.dtype == dtype and G.shape == (40000,) and bool((G > 0).all())
    G = G.double().numpy()
    assert G.mean() == pytest.approx(alpha, abs=4 * math.sqrt(alpha / 40000))
    assert G.var() == pytest.approx(alpha, rel=0.05)
    assert stats.kstest(G, stats.gamma(alpha).cdf).pvalue > 1e-3


def test_standard_gamma_is_reproducible_and_shaped():
    draw = lambda: _standard_gamma((3, 5), 7.5, torch.Generator().manual_seed(3), "cpu", None)  # noqa: E731
    a, b = draw(), draw()
    assert a.shape == (3, 5) and torch.equal(a, b)


def test_a_wrong_gamma_law_is_detected():
    # The KS test above has the power to see a shape off by 2 %.
    g = torch.Generator().manual_seed(0)
    G = _standard_gamma((40000,), 127.5 * 1.02, g, "cpu", torch.float64).numpy()
    assert stats.kstest(G, stats.gamma(127.5).cdf).pvalue < 1e-3


@pytest.mark.parametrize(
    ("width", "error", "match"),
    [
        (0, ValueError, "width must be an integer >= 1, got 0"),
        (-3, ValueError, "got -3"),
        (2.5, TypeError, "width must be an integer, got 2.5"),
    ],
)
def test_sphere_coordinates_reject_a_bad_width(width, error, match):
    # A negative Gamma shape would never accept a draw: the check comes first.
    with pytest.raises(error, match=match):
        sphere_coordinates((3,), width, generator=torch.Generator().manual_seed(0))


def test_sphere_coordinates_of_width_one_are_signs():
    c = sphere_coordinates((1000,), 1, generator=torch.Generator().manual_seed(0))
    assert set(c.unique().tolist()) == {-1.0, 1.0}
    assert 400 < int((c > 0).sum()) < 600


# -- the marginal forward pass has the law of the full one ------------------------------
def _rows(n_features, mask_rows, seed=0):
    """Fixed rows: Gaussian tokens, the given 0/1 selection per row."""
    mask = torch.tensor(mask_rows, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(*mask.shape, n_features, generator=g, dtype=torch.float64)
    return torch.cat([tokens, mask.unsqueeze(-1)], dim=-1)


def _draws(module, X, pe_sampling, n_draws, seed):
    """``n_draws`` independent forward passes of the same rows: (n_draws, n, d)."""
    g = torch.Generator().manual_seed(seed)
    batch = X.repeat(n_draws, 1, 1)
    with torch.no_grad():
        out = module(batch, generator=g, pe_sampling=pe_sampling)
    return out.reshape(n_draws, *X.shape[:1], -1)


def _module(n_features, width, learn_token_block=True, seed=0):
    module = AttentionSelector(n_features, width, learn_token_block=learn_token_block).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # A W with a sizeable positional block near gamma I and a non-zero token block.
        W = 0.4 * torch.randn(n_features + width, width, generator=g, dtype=torch.float64)
        W[n_features:] += 3.0 * torch.eye(width, dtype=torch.float64)
        module.key_query.copy_(W)
    return module


# Rows of T=7 with q = 1, 2 and 3 selected (per-row q), or a fixed q.
VARYING_Q = [
    [1, 0, 0, 0, 0, 0, 0],
    [0, 1, 0, 0, 1, 0, 0],
    [1, 0, 1, 0, 0, 0, 1],
]
FIXED_Q = [[0, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 1]]


@pytest.mark.parametrize(
    "width, mask, learn_token_block",
    [
        (16, VARYING_Q, True),
        (16, FIXED_Q, False),
        (1, VARYING_Q, True),
        (2, VARYING_Q, True),
        (2, FIXED_Q, False),
    ],
    ids=["m16-varying-q", "m16-frozen", "m1", "m2", "m2-frozen"],
)
def test_marginal_forward_has_the_law_of_full_draws(width, mask, learn_token_block):
    n_draws = 4000
    X = _rows(3, mask)
    module = _module(3, width, learn_token_block)
    full = _draws(module, X, "full", n_draws, seed=1).numpy()
    marginal = _draws(module, X, "marginal", n_draws, seed=2).numpy()
    for row in range(X.shape[0]):
        for j in range(3):
            a, b = full[:, row, j], marginal[:, row, j]
            se = math.sqrt((a.var() + b.var()) / n_draws)
            assert abs(a.mean() - b.mean()) < 4.5 * se + 1e-12, (row, j)
            assert stats.ks_2samp(a, b).pvalue > 1e-4, (row, j)


def test_the_law_test_can_tell_a_wrong_sampler_apart(monkeypatch):
    """The same test rejects a sampler that is off: coordinates of R^4 instead of R^16."""
    n_draws = 4000
    X = _rows(3, FIXED_Q)
    module = _module(3, 16)
    full = _draws(module, X, "full", n_draws, seed=1).numpy()
    right = sphere_coordinates
    monkeypatch.setattr(
        _sampling, "sphere_coordinates", lambda shape, width, **kw: right(shape, 4, **kw)
    )
    off = _draws(module, X, "marginal", n_draws, seed=2).numpy()
    pvalues = [
        stats.ks_2samp(full[:, r, j], off[:, r, j]).pvalue for r in (0, 1) for j in (0, 1, 2)
    ]
    assert min(pvalues) < 1e-6


def test_marginal_gradient_is_unbiased_and_less_noisy():
    """Mean gradient over draws: the same for both samplers, within its sampling error.

    Its positional block is the conditional expectation of the full one
    (Rao-Blackwell), so its variance is lower; on long rows, where the
    unselected positions carry most of the noise, much lower.
    """
    T = 32
    X = _rows(2, [[1, 1] + [0] * (T - 2), [0] * (T - 3) + [1, 0, 1]])
    y = X[..., :-1].mul(X[..., -1:]).sum(1) / X[..., -1].sum(1, keepdim=True)
    grads = {}
    for name, seed in (("full", 1), ("marginal", 2)):
        module = _module(2, 8, seed=5)
        g = torch.Generator().manual_seed(seed)
        batch, target = X.repeat(2000, 1, 1), y.repeat(2000, 1)
        per_row = (module(batch, generator=g, pe_sampling=name) - target).square().sum(-1)
        groups = per_row.reshape(200, 20).mean(1)  # 200 groups of 10 draws of each row
        grads[name] = torch.stack(
            [torch.autograd.grad(v, module.key_query, retain_graph=True)[0] for v in groups]
        )
    diff = grads["full"].mean(0) - grads["marginal"].mean(0)
    se = torch.sqrt((grads["full"].var(0) + grads["marginal"].var(0)) / 200)
    assert (diff.abs() <= 4 * se).float().mean() > 0.97
    positional = {name: G[:, 2:].var(0).sum() for name, G in grads.items()}
    assert positional["marginal"] < 0.5 * positional["full"], positional


def test_marginal_sampling_is_reproducible_and_ignored_by_other_families():
    X = _rows(3, VARYING_Q).float()
    module = AttentionSelector(3, 8)
    with torch.no_grad():
        module.key_query.normal_()
    runs = [module(X, generator=torch.Generator().manual_seed(0), pe_sampling="marginal")]
    runs.append(module(X, generator=torch.Generator().manual_seed(0), pe_sampling="marginal"))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    for family in ("fixed", "sinusoidal", "randomized"):
        other = AttentionSelector(3, 8, family, seq_len=7, max_positions=20)
        outs = [
            other(X, generator=torch.Generator().manual_seed(0), pe_sampling=s)
            for s in ("full", "marginal")
        ]
        torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)


# -- the deterministic and codebook families ---------------------------------------------
def test_sinusoidal_encodings_are_unit_deterministic_and_prefix_stable():
    long = sinusoidal_encodings(64, 10)
    torch.testing.assert_close(long.norm(dim=1), torch.ones(64))
    torch.testing.assert_close(sinusoidal_encodings(16, 10), long[:16], rtol=0, atol=0)
    # Position 0: sin 0 = 0 and cos 0 = 1 on the coordinates 2i and 2i + 1.
    torch.testing.assert_close(long[0], torch.tensor([0.0, 1.0] * 5) / math.sqrt(5))
    # Distinct positions get distinct vectors.
    assert torch.cdist(long, long).add(torch.eye(64)).min() > 0.05


def test_randomized_positions_are_sorted_uniform_subsets():
    g = torch.Generator().manual_seed(0)
    idx = randomized_positions(20000, 3, 6, generator=g)
    assert bool((idx.diff(dim=1) > 0).all()) and idx.min() >= 0 and idx.max() < 6
    # All C(6, 3) = 20 subsets, each about 1/20 of the rows.
    _, counts = torch.unique(idx, dim=0, return_counts=True)
    assert len(counts) == 20
    assert counts.min() > 850 and counts.max() < 1150
    with pytest.raises(ValueError, match="seq_len=7 is longer than the codebook: max_positions=6;"):
        randomized_positions(1, 7, 6)


def test_a_codebook_of_the_training_length_is_the_fixed_encodings():
    module = AttentionSelector(2, 8, "randomized", seq_len=10, encoding_seed=4, max_positions=10)
    fixed = AttentionSelector(2, 8, "fixed", seq_len=10, encoding_seed=4)
    torch.testing.assert_close(module.codebook, fixed.fixed_pe, rtol=0, atol=0)
    torch.testing.assert_close(module.codebook, fixed_encodings(10, 8, 4), rtol=0, atol=0)
    P = module.encodings(5, 10, torch.Generator().manual_seed(0))
    torch.testing.assert_close(P, fixed.fixed_pe.expand(5, 10, 8), rtol=0, atol=0)


# -- a generator of another device than the draws ---------------------------------------
def test_draws_are_made_on_the_generators_device():
    """A torch.Generator draws only on its own device type: a CPU generator asked for
    CUDA draws (the 0.3 streamed predictions of a CUDA model) draws on the CPU."""
    cpu = torch.Generator()
    assert _sampling._draw_device(cpu, "cuda") == torch.device("cpu")
    assert _sampling._draw_device(cpu, torch.device("cuda", 1)) == torch.device("cpu")
    assert _sampling._draw_device(cpu, "cpu") == torch.device("cpu")
    assert _sampling._draw_device(None, "cuda:0") == torch.device("cuda", 0)
    assert _sampling._draw_device(None, "cpu") == torch.device("cpu")


def _cross_device_draws(generator, device):
    """Every streamed draw of the encodings from ``generator``, on ``device``."""
    f64 = torch.float64
    return {
        "sphere": sphere_encodings(5, 3, 4, generator=generator, device=device, dtype=f64),
        "sphere-out": sphere_encodings(
            5, 3, 4, generator=generator, out=torch.empty(5, 3, 4, device=device, dtype=f64)
        ),
        "coordinates": sphere_coordinates((5, 3), 6, generator=generator, device=device),
        "signs": sphere_coordinates((5, 3), 1, generator=generator, device=device),
        "projections": _sampling.sphere_projections(
            (5, 3), 6, 2, generator=generator, device=device, dtype=f64
        ),
        "subsets": randomized_positions(5, 3, 8, generator=generator, device=device),
    }


def test_a_cpu_generator_draws_for_another_device():
    """The meta device stands for CUDA here: the draws arrive there, with their shapes."""
    got = _cross_device_draws(torch.Generator().manual_seed(0), "meta")
    want = _cross_device_draws(torch.Generator().manual_seed(0), "cpu")
    for name, value in got.items():
        assert value.device.type == "meta", name
        assert value.shape == want[name].shape and value.dtype == want[name].dtype, name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cpu_generator_draws_its_cpu_numbers_on_cuda():
    got = _cross_device_draws(torch.Generator().manual_seed(0), "cuda")
    want = _cross_device_draws(torch.Generator().manual_seed(0), "cpu")
    for name, value in got.items():
        assert value.device.type == "cuda", name
        # Drawn on the CPU and moved; only the sphere's normalisation runs on CUDA.
        torch.testing.assert_close(value.cpu(), want[name], rtol=1e-6, atol=1e-7, msg=name)
    # The streamed (0.3) forward pass of a CUDA model with a CPU generator.
    from stsq_learn import SparseTokenSelector, make_sparse_token_selection

    X, y = make_sparse_token_selection(40, 6, 3, 2, random_state=0)
    model = SparseTokenSelector(width=8, max_iter=2, device="cuda", random_state=0).fit(X, y)
    module = model.net_.module_
    X = torch.as_tensor(X, dtype=torch.float32)
    with torch.no_grad():
        on_cuda = module(X.cuda(), generator=torch.Generator().manual_seed(3)).cpu()
        on_cpu = module.cpu()(X, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(on_cuda, on_cpu, rtol=1e-5, atol=1e-5)
