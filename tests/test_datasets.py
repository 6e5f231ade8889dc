import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stsq_learn import SparseTokenSelectionTask, make_sparse_token_selection


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 20),
    T=st.integers(1, 12),
    d=st.integers(1, 5),
    data=st.data(),
)
def test_contract_holds_for_any_shape(n, T, d, data):
    q = data.draw(st.integers(1, T))
    X, y = make_sparse_token_selection(n, T, d, q, random_state=data.draw(st.integers(0, 99)))
    assert X.shape == (n, T, d + 1) and y.shape == (n, d)
    mask = X[..., -1]
    assert set(np.unique(mask)) <= {0.0, 1.0}
    np.testing.assert_array_equal(mask.sum(1), q)
    expected = (mask[..., None] * X[..., :-1]).sum(1) / q
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


def test_reproducible_and_seed_dependent():
    a = make_sparse_token_selection(50, 10, 3, 2, random_state=7)
    b = make_sparse_token_selection(50, 10, 3, 2, random_state=7)
    c = make_sparse_token_selection(50, 10, 3, 2, random_state=8)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_q_range_draws_every_size_per_row():
    X, y = make_sparse_token_selection(2000, 10, 2, (2, 5), random_state=0)
    q = X[..., -1].sum(1)
    assert set(np.unique(q)) == {2, 3, 4, 5}
    np.testing.assert_allclose(y, (X[..., -1:] * X[..., :-1]).sum(1) / q[:, None])


def test_law_statistics():
    """Tokens are standard Gaussian and every position is selected with rate q/T."""
    X, y = make_sparse_token_selection(20000, 8, 2, 2, random_state=0)
    tokens = X[..., :-1]
    assert abs(tokens.mean()) < 0.01 and abs(tokens.std() - 1) < 0.01
    np.testing.assert_allclose(X[..., -1].mean(0), 2 / 8, atol=0.015)
    # E||y||^2 = d / q
    np.testing.assert_allclose((y**2).sum(1).mean(), 2 / 2, rtol=0.03)


def test_task_trivial_mse_and_repr():
    task = SparseTokenSelectionTask(16, 8, 4)
    assert task.trivial_mse == pytest.approx(2.0)
    assert SparseTokenSelectionTask(16, 6, (2, 3)).trivial_mse == pytest.approx(
        6 * (1 / 2 + 1 / 3) / 2
    )
    assert "seq_len=16" in repr(task)
    assert SparseTokenSelectionTask(16, 8, [2, 3]).n_selected == (2, 3)


def test_torch_sampler_matches_contract():
    task = SparseTokenSelectionTask(12, 3, (1, 4))
    g = torch.Generator().manual_seed(0)
    X, y = task.sample_torch(500, generator=g)
    assert X.shape == (500, 12, 4) and y.shape == (500, 3) and X.dtype == torch.float32
    q = X[..., -1].sum(1)
    assert set(q.unique().tolist()) == {1.0, 2.0, 3.0, 4.0}
    torch.testing.assert_close(y, (X[..., -1:] * X[..., :-1]).sum(1) / q[:, None])
    X2, _ = task.sample_torch(500, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(X, X2)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"n_selected": 20}, ValueError, "n_selected=20 cannot exceed seq_len=16"),
        ({"n_selected": 0}, ValueError, "n_selected must be an integer >= 1, got 0"),
        ({"n_selected": (3, 2)}, ValueError, "q_min <= q_max"),
        ({"n_selected": 2.5}, TypeError, "n_selected must be an integer"),
        ({"seq_len": 0}, ValueError, "seq_len must be an integer >= 1"),
        ({"seq_len": 16.0}, TypeError, "seq_len must be an integer"),
        ({"n_features": 0}, ValueError, "n_features must be an integer >= 1"),
        ({"n_samples": -1}, ValueError, "n_samples must be an integer >= 1"),
    ],
)
def test_impossible_arguments(kwargs, exc, match):
    args = {"n_samples": 5, "seq_len": 16, "n_features": 2, "n_selected": 2, **kwargs}
    with pytest.raises(exc, match=match):
        make_sparse_token_selection(**args)


def test_sample_torch_fixed_q_selects_uniform_subsets():
    task = SparseTokenSelectionTask(seq_len=6, n_features=2, n_selected=2)
    X, y = task.sample_torch(6000, generator=torch.Generator().manual_seed(0))
    mask = X[..., -1]
    assert set(mask.unique().tolist()) == {0.0, 1.0}
    assert torch.all(mask.sum(1) == 2)
    torch.testing.assert_close(y, torch.einsum("nt,ntd->nd", mask, X[..., :-1]) / 2)
    # every position is selected with probability q / T = 1/3
    assert torch.allclose(mask.mean(0), torch.full((6,), 1 / 3), atol=0.03)
    assert abs(X[..., :-1].std().item() - 1.0) < 0.02
