"""Marginal draws hold no batch x T x width array, and the start-loss probe holds a chunk.

Issue 31: ``fit_online`` at T=16384, width 1024, marginal draws, peaked at
1.9 GiB in 0.5.0 (0.4.0: 0.5 GiB). A step was not the cause: the start-loss
probe put 1,024 rows of that length through the model at once. These tests
check the largest single allocation (torch's profiler) at moderate sizes.
"""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from stsq_learn import (
    SparseRetrievalTask,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.engine import progress
from stsq_learn.engine import training as tr
from stsq_learn.nn import Attention, SquaredError

FLOAT = 4  # bytes of a float32


def largest_allocation(fn):
    """Bytes of the largest block one op allocated itself while ``fn()`` ran."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return max(e.self_cpu_memory_usage for e in prof.events())


def training_step(module, X, y, pe_sampling):
    def step():
        out = module(X, generator=torch.Generator().manual_seed(0), pe_sampling=pe_sampling)
        (out - y).square().sum(-1).mean().backward()

    return step


@pytest.mark.parametrize("n_heads", [1, 3])
@pytest.mark.parametrize(
    "task", [SparseTokenSelectionTask(1024, 4, 3), SparseRetrievalTask(1024, 3, 2)], ids=repr
)
def test_marginal_step_holds_no_batch_by_length_by_width_array(task, n_heads):
    n, m = 16, 64
    module = Attention(task, m, n_heads=n_heads)
    with torch.no_grad():  # W away from 0: the heads' directions differ
        module.key_query.normal_(0, 0.1, generator=torch.Generator().manual_seed(1))
    X, y = task.sample_torch(n, generator=torch.Generator().manual_seed(2))
    n_T_m = n * task.reference_length * m * FLOAT  # 4 MiB
    marginal = largest_allocation(training_step(module, X, y, "marginal"))
    assert marginal < n_T_m / 8
    # The full sampler draws every encoding: the check sees the array it exists to avoid.
    assert largest_allocation(training_step(module, X, y, "full")) >= n_T_m


def test_start_loss_probe_is_taken_a_chunk_at_a_time(monkeypatch):
    T, d = 256, 4
    monkeypatch.setattr(tr, "_PROBE_ELEMENTS", 2**18)
    task = SparseTokenSelectionTask(T, d, 2)
    model = SparseTokenSelector(width=16, batch_size=8, random_state=0)
    module = model._make_module(task, 0)
    chunk = tr.probe_chunk(module, T, "marginal", 2, 8)
    per_row = module.elements_per_row(T, "marginal", n_selected=2)
    assert per_row == T * (d + 12) + 16 * (4 * 2 + 4) + d
    assert chunk == 2**18 // per_row == 61
    calls = []
    start_loss = progress.start_loss
    monkeypatch.setattr(progress, "start_loss", lambda *a: calls.append(a[-2]) or start_loss(*a))
    whole_probe = 1024 * T * (d + 1) * FLOAT  # the 1,024 probe rows at once: 5 MiB (0.5.0's peak)
    peak = largest_allocation(lambda: model.fit_online(task, n_steps=2))
    assert calls == [61]
    assert peak < whole_probe / 8


def test_probe_chunk_is_at_least_a_batch_and_keeps_short_rows_whole():
    task = SparseTokenSelectionTask(16, 4, 3)
    module = Attention(task, 1024)
    # The paper's width at short rows: fit_online's 1,024 probe rows in one pass, as before.
    assert tr.probe_chunk(module, 16, "marginal", 3, 32) == 2**25 // (16 * 16 + 1024 * 16 + 4)
    assert tr.probe_chunk(module, 16, "marginal", 3, 32) >= 1024
    long = Attention(SparseTokenSelectionTask(16384, 16, 4), 1024)
    assert tr.probe_chunk(long, 16384, "marginal", 4, 32) == 2**25 // (16384 * 28 + 1024 * 20 + 16)
    assert tr.probe_chunk(long, 16384, "full", 4, 32) == 32  # never under the batch


@pytest.mark.parametrize("chunk", [7, 100, 4096])
def test_chunked_start_loss_is_the_loss_of_the_same_rows(chunk):
    task = SparseTokenSelectionTask(12, 3, 2)
    X, y = task.sample_torch(300, generator=torch.Generator().manual_seed(0))
    module = Attention(task, 8, positional_encoding="fixed")
    with torch.no_grad():
        module.key_query.normal_(0, 1, generator=torch.Generator().manual_seed(1))
    data = tr.TensorData(X, y)
    got = progress.start_loss(module, data, torch.Generator(), {}, chunk, SquaredError())
    with torch.no_grad():
        whole = float((module(X) - y).square().sum(-1).mean())
    assert got == pytest.approx(whole, rel=1e-6)
    if chunk >= len(X):  # one chunk: the number of 0.5.0's probe, bit for bit
        assert got == whole
