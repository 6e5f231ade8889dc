import numpy as np
import pytest
import torch

from stsq_learn import SparseAveragingTask, SparseRetrievalTask, SparseTokenSelectionTask
from stsq_learn.encodings.families import (
    KeyedDraws,
    StreamedDraws,
    fixed_encodings,
    sphere_encodings,
)
from stsq_learn.nn import Attention, AttentionSelector, FullyConnected, positional_alignment
from stsq_learn.nn.queries import query_scores, softmax


def _naive_attention(W, X, P):
    """Scores z_t^T W z_0 formed the expensive way, for every t."""
    tokens, mask = X[..., :-1], X[..., -1]
    Z = torch.cat([tokens, P], dim=-1)  # (n, T, d + m)
    z0_p = (mask.unsqueeze(-1) * P).sum(1)  # (n, m)
    scores = torch.einsum("ntk,km,nm->nt", Z, W, z0_p)
    return torch.einsum("nt,ntd->nd", torch.softmax(scores, -1), tokens)


@pytest.mark.parametrize("keyed", [False, True], ids=["streamed", "keyed"])
@pytest.mark.parametrize("encoding", ["stochastic", "fixed", "randomized", "sinusoidal"])
def test_cheap_order_equals_naive_formula(encoding, keyed):
    torch.manual_seed(0)
    n, T, d, m = 5, 7, 3, 4
    module = AttentionSelector(d, m, encoding, seq_len=T, encoding_seed=1, max_positions=20)
    module = module.double()
    with torch.no_grad():
        module.key_query.normal_()
    X = torch.randn(n, T, d + 1, dtype=torch.float64)
    X[..., -1] = (torch.rand(n, T) < 0.4).double()
    X[:, 0, -1] = 1.0

    def draws():
        return KeyedDraws(3).for_rows(X) if keyed else torch.Generator().manual_seed(3)

    out = module(X, generator=draws(), pe_sampling="full")
    P = module.encodings(n, T, draws())
    P = P.expand(n, T, m) if P.dim() == 2 else P
    torch.testing.assert_close(out, _naive_attention(module.key_query, X, P))


@pytest.mark.parametrize("learn_token_block", [True, False])
def test_attention_reads_tokens_with_or_without_the_selection_channel(learn_token_block):
    # forward passes the whole X (no copy of the tokens); the selection channel
    # must get weight 0 in the scores, whatever its values.
    torch.manual_seed(0)
    module = AttentionSelector(3, 4, learn_token_block=learn_token_block).double()
    with torch.no_grad():
        module.key_query.normal_()
    X = torch.randn(6, 5, 4, dtype=torch.float64)
    X[..., -1] = (torch.rand(6, 5) < 0.5).double()
    X[:, 0, -1] = 1.0
    P = module.encodings(6, 5, torch.Generator().manual_seed(1))
    mask = X[..., -1]
    torch.testing.assert_close(
        module.attention(X, mask, P), module.attention(X[..., :-1].contiguous(), mask, P)
    )
    d, Ws = module._score_rows()
    u, pos = query_scores(Ws[0], d, mask, P)
    torch.testing.assert_close(softmax(d, u, X, pos), softmax(d, u, X[..., :-1].contiguous(), pos))


def test_zero_init_is_uniform_average():
    module = AttentionSelector(2, 8)
    X = torch.randn(4, 6, 3)
    X[..., -1] = 0
    X[:, 0, -1] = 1
    torch.testing.assert_close(module(X), X[..., :-1].mean(1))


def test_n_pe_samples_averages_attention():
    torch.manual_seed(0)
    module = AttentionSelector(2, 8)
    with torch.no_grad():
        module.key_query.normal_()
    X = torch.randn(3, 5, 3)
    X[..., -1] = 1
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    avg = module(X, generator=g1, n_pe_samples=3, pe_sampling="full")
    tokens, mask = X[..., :-1], X[..., -1]
    attn = sum(module.attention(tokens, mask, module.encodings(3, 5, g2)) for _ in range(3)) / 3
    torch.testing.assert_close(avg, torch.bmm(attn.unsqueeze(1), tokens).squeeze(1))


def test_sphere_encodings_are_unit_and_isotropic():
    P = sphere_encodings(2000, 4, 16, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(P.norm(dim=-1), torch.ones(2000, 4))
    assert P.mean().abs() < 0.01


def test_fixed_encodings_prefix_stable_and_seeded():
    short, long = fixed_encodings(10, 8, 3), fixed_encodings(300, 8, 3)
    torch.testing.assert_close(long[:10], short)
    torch.testing.assert_close(long.norm(dim=-1), torch.ones(300))
    assert not torch.equal(fixed_encodings(10, 8, 4), short)
    module = AttentionSelector(2, 8, "fixed", seq_len=10, encoding_seed=3)
    torch.testing.assert_close(module.encodings(1, 100, None)[:10], short)


def test_fcn_shapes():
    net = FullyConnected(6, 3, 10, (5,))
    assert net(torch.randn(4, 6, 4)).shape == (4, 3)
    assert net.layers[0].in_features == 24 and net.layers[2].in_features == 10


def test_positional_alignment_of_identity():
    d, m = 3, 5
    W = np.vstack([np.zeros((d, m)), 2.5 * np.eye(m)])
    a = positional_alignment(W, d)
    assert a["cos"] == pytest.approx(1.0) and a["gamma"] == pytest.approx(2.5)
    assert a["token_norm"] == 0.0
    assert positional_alignment(np.zeros((d + m, m)), d)["cos"] == 0.0


def test_sphere_encodings_out_reuses_storage_and_matches_fresh_draw():
    out = torch.empty(6, 5, 16)
    P = sphere_encodings(6, 5, 16, generator=torch.Generator().manual_seed(2), out=out)
    assert P.data_ptr() == out.data_ptr()
    fresh = sphere_encodings(6, 5, 16, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(P, fresh)
    torch.testing.assert_close(P.norm(dim=-1), torch.ones(6, 5))


def test_streamed_draws_reuse_one_buffer_and_keep_outputs():
    torch.manual_seed(0)
    module = AttentionSelector(3, 8)
    with torch.no_grad():
        module.key_query.normal_()
    X = torch.randn(5, 7, 4)
    X[..., -1] = (torch.rand(5, 7) < 0.5).float()
    X[:, 0, -1] = 1.0
    draws = StreamedDraws(torch.Generator().manual_seed(1), reuse=True)
    a = module(X, generator=draws, pe_sampling="full")
    buf = draws._buffer
    b = module(X, generator=torch.Generator().manual_seed(1), pe_sampling="full")
    torch.testing.assert_close(a, b)
    module(X[:3], generator=draws, pe_sampling="full")  # smaller batch: the same buffer
    assert draws._buffer is buf
    module(torch.cat([X, X]), generator=draws, pe_sampling="full")  # larger: a bigger one
    assert draws._buffer.shape[0] == 10


def test_reuse_is_bypassed_when_draws_are_kept_for_backward():
    torch.manual_seed(0)
    module = AttentionSelector(2, 6)
    with torch.no_grad():
        module.key_query.normal_()
    X = torch.randn(4, 5, 3)
    X[..., -1] = 1.0
    draws = StreamedDraws(torch.Generator().manual_seed(0), reuse=True)
    out = module(X, generator=draws, n_pe_samples=3, pe_sampling="full")
    out.square().sum().backward()  # would raise if a draw had been overwritten in place
    grad = module.key_query.grad.clone()
    module.key_query.grad = None
    g = torch.Generator().manual_seed(0)
    module(X, generator=g, n_pe_samples=3, pe_sampling="full").square().sum().backward()
    torch.testing.assert_close(module.key_query.grad, grad)


def test_the_module_samples_as_the_estimator_does_by_default():
    import inspect

    from stsq_learn import SparseTokenSelector

    default = inspect.signature(AttentionSelector.forward).parameters["pe_sampling"].default
    assert default == SparseTokenSelector().pe_sampling == "marginal"


def test_a_bad_draw_source_is_refused():
    module = AttentionSelector(2, 4)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator, None"):
        module(torch.ones(1, 3, 3), generator=7)


def test_forward_does_not_write_its_input():
    module = AttentionSelector(2, 4)
    X = torch.randn(3, 5, 3)
    X[..., -1] = 1.0
    before = X.clone()
    module(X, generator=StreamedDraws(reuse=True), pe_sampling="full")
    module(X, generator=KeyedDraws(0))
    torch.testing.assert_close(X, before)


@pytest.mark.parametrize(
    "task, n_heads",
    [
        (SparseTokenSelectionTask(7, 3, 2), 1),
        (SparseTokenSelectionTask(7, 3, 2), 3),
        (SparseAveragingTask(7, 3, 2), 2),
        (SparseRetrievalTask(7, 3, 2), 2),
    ],
    ids=["selection", "selection-3-heads", "averaging", "retrieval"],
)
def test_attention_weights_are_what_forward_averages_the_tokens_with(task, n_heads):
    torch.manual_seed(0)
    module = Attention(task, 5, n_heads=n_heads).double()
    with torch.no_grad():
        module.key_query.normal_()
    X, _ = task.sample_torch(4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a = module.attention_weights(X, torch.Generator().manual_seed(2), pe_sampling="full")
    assert a.shape[:2] == (n_heads, 4) and a.shape[-1] == 7
    torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1], dtype=a.dtype))
    tokens = X[..., : task.n_features]
    # a head's output is its weights times the tokens (one query, or one per position/role)
    outputs = [w @ tokens if w.dim() == 3 else torch.einsum("nt,ntd->nd", w, tokens) for w in a]
    joint = torch.cat(outputs, dim=-1)  # [o_1 ; ... ; o_H] per query
    expected = joint if module.readout is None else joint @ module.readout.T
    out = module(X, generator=torch.Generator().manual_seed(2), pe_sampling="full")
    torch.testing.assert_close(out.reshape(4, -1), expected.reshape(4, -1))
