"""Query structures: every head's scores, and the marginal sampler's law with several heads."""

import numpy as np
import pytest
import torch
from scipy import stats

from stsq_learn.encodings.families import KeyedDraws, StreamedDraws
from stsq_learn.nn import Attention
from stsq_learn.nn.queries import triangular_factor
from stsq_learn.tasks import SparseRetrievalTask, SparseTokenSelectionTask


def test_the_triangular_factor_rebuilds_the_directions():
    U = torch.randn(5, 3, 7, dtype=torch.float64)
    R = triangular_factor(U)
    assert torch.allclose(R.tril(-1), torch.zeros_like(R))
    # R^T R is the Gram matrix of the rows of U: u_h = sum_j R[j, h] e_j, e orthonormal.
    torch.testing.assert_close(R.transpose(1, 2) @ R, U @ U.transpose(1, 2))


def test_zero_directions_give_a_zero_factor_and_finite_gradients():
    U = torch.zeros(2, 3, 5, requires_grad=True)
    R = triangular_factor(U)
    assert R.abs().max() < 1e-15
    (R * torch.randn_like(R)).sum().backward()
    assert torch.isfinite(U.grad).all()


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("source", ["streamed", "keyed"])
def test_joint_coordinates_are_those_of_a_uniform_unit_vector(k, source):
    m, n, T = 9, 400, 50
    if source == "streamed":
        draws = StreamedDraws(torch.Generator().manual_seed(0))
    else:
        draws = KeyedDraws(0).for_rows(torch.randn(n, 2, 2, dtype=torch.float64))
    C = draws.joint_coordinates(n, T, m, k, "cpu", torch.float64).reshape(-1, k).numpy()
    norm2 = (C**2).sum(1)
    # The first k coordinates of a uniform unit vector: ||c||^2 ~ Beta(k / 2, (m - k) / 2).
    assert stats.kstest(norm2, stats.beta(k / 2, (m - k) / 2).cdf).pvalue > 1e-3
    np.testing.assert_allclose(np.cov(C.T) * m, np.eye(k), atol=0.05)


def _module(task, heads, seed=0):
    torch.manual_seed(seed)
    module = Attention(task, 12, n_heads=heads).double()
    with torch.no_grad():
        module.key_query.normal_(0.0, 0.6)
        module.readout.normal_()
    return module


@pytest.mark.parametrize(
    "task", [SparseTokenSelectionTask(7, 2, 2), SparseRetrievalTask(7, 2, 2)], ids=["sts", "ret"]
)
def test_marginal_and_full_draws_have_the_same_law_with_several_heads(task):
    """Over many streamed draws of one row, both samplers give the same expected output."""
    module = _module(task, heads=3)
    X = torch.as_tensor(task.sample(1, random_state=0)[0]).expand(20_000, -1, -1)

    def mean_output(sampling, seed):
        with torch.no_grad():
            out = module(X, torch.Generator().manual_seed(seed), pe_sampling=sampling)
        return out.mean(0), out.std(0) / len(X) ** 0.5

    full, se = mean_output("full", 1)
    marginal, _ = mean_output("marginal", 2)
    assert ((full - marginal).abs() < 4 * 2**0.5 * se).all()


def test_keyed_predictions_with_several_heads_are_functions_of_their_rows():
    task = SparseRetrievalTask(7, 2, 2)
    module = _module(task, heads=2)
    X = torch.as_tensor(task.sample(6, random_state=0)[0])
    with torch.no_grad():
        both = module(X, KeyedDraws(5), n_pe_samples=2)
        alone = torch.cat([module(X[i : i + 1], KeyedDraws(5), n_pe_samples=2) for i in range(6)])
    torch.testing.assert_close(both, alone)
