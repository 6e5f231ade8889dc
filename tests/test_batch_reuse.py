"""reuse_batches: a batch stream drawn once for the fits that read it, the numbers unchanged."""

import re
import threading
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stsq_learn import (
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenAverager,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.engine.batch_reuse import BatchReuse, active_reuse, reuse_batches
from stsq_learn.experiments import _runs
from stsq_learn.regressors import FCNSelector


def _weights(model):
    return [p.detach().clone() for p in model.net_.module_.parameters()]


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def _fits():
    """Three widths of one stream (one stopping early), an FCN, another task: the weights."""
    sts = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=2)
    qsa = SparseAveragingTask(seq_len=8, n_features=2, n_selected=2)
    out = []
    for width, steps in ((8, 12), (16, 5), (12, 20)):
        model = SparseTokenSelector(width, solver="adam", random_state=3)
        out.append(_weights(model.fit_online(sts, n_steps=steps)))
    out.append(_weights(FCNSelector(32, random_state=3).fit_online(sts, n_steps=10)))
    out.append(_weights(SparseTokenAverager(8, random_state=3).fit_online(qsa, n_steps=10)))
    retrieval = SparseRetrievalTask(seq_len=8, n_features=2, n_selected=2)
    for width in (8, 12):
        model = SparseTokenRetriever(width, random_state=3)
        out.append(_weights(model.fit_online(retrieval, n_steps=6)))
    return out


@pytest.fixture(scope="module")
def fresh():
    assert active_reuse() is None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*worse than no model")
        return _fits()


@pytest.mark.filterwarnings("ignore:.*worse than no model")
@pytest.mark.parametrize("max_bytes", [2**28, 20_000, 0])
def test_fits_inside_give_the_same_weights_bit_for_bit(fresh, max_bytes):
    # Kept whole, kept in part (the bound reached mid-stream), or not kept at all.
    with reuse_batches(max_bytes=max_bytes) as kept:
        reused = _fits()
        assert kept.nbytes <= max_bytes
    assert all(_same(a, b) for a, b in zip(fresh, reused))
    assert active_reuse() is None


def test_streams_are_keyed_by_task_batch_size_and_seed():
    task = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=2)
    with reuse_batches() as kept:
        for width in (8, 16):  # one stream
            SparseTokenSelector(width, random_state=0).fit_online(task, n_steps=4)
        assert len(kept) == 1
        SparseTokenSelector(8, random_state=1).fit_online(task, n_steps=4)  # another seed
        SparseTokenSelector(8, random_state=0, batch_size=64).fit_online(task, n_steps=4)
        other = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=3)
        SparseTokenSelector(8, random_state=0).fit_online(other, n_steps=4)
        assert len(kept) == 4
        assert kept.nbytes > 0


def _draw(generator):
    return (torch.rand(3, generator=generator), torch.randn(2, generator=generator))


def _fresh(seed, n_steps):
    generator = torch.Generator().manual_seed(seed)
    return [_draw(generator) for _ in range(n_steps)]


def _seeded(seed):
    return torch.Generator().manual_seed(seed)


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 9)), min_size=1, max_size=8),
    max_bytes=st.sampled_from([0, 20, 40, 100, 200, 10_000]),
)
def test_every_replay_is_the_fresh_stream(calls, max_bytes):
    # Any order of streams and lengths, any bound (eviction, partial streams): each call
    # yields exactly the batches its seed draws afresh.
    reuse = BatchReuse(max_bytes)
    for seed, n_steps in calls:
        got = list(reuse.stream(("stream", seed), n_steps, _seeded(seed), _draw))
        want = _fresh(seed, n_steps)
        assert len(got) == n_steps
        assert all(torch.equal(a, b) for g, w in zip(got, want) for a, b in zip(g, w))
        assert reuse.nbytes <= max_bytes


def test_the_least_recently_used_stream_goes_first():
    one = 20  # bytes of a batch of _draw
    reuse = BatchReuse(4 * one)
    list(reuse.stream("a", 2, _seeded(0), _draw))
    list(reuse.stream("b", 2, _seeded(1), _draw))
    list(reuse.stream("a", 1, _seeded(0), _draw))  # a used last
    list(reuse.stream("c", 2, _seeded(2), _draw))  # makes room by dropping b
    assert list(reuse._streams) == ["a", "c"] and reuse.nbytes == 4 * one


def test_a_key_that_cannot_be_hashed_is_drawn_as_usual():
    reuse = BatchReuse(10_000)
    got = list(reuse.stream(["unhashable"], 3, _seeded(5), _draw))
    assert len(reuse) == 0
    assert all(torch.equal(a, b) for g, w in zip(got, _fresh(5, 3)) for a, b in zip(g, w))


def test_streams_read_by_several_threads_at_once_are_each_whole():
    reuse = BatchReuse(10_000)
    results = {}

    def read(name, n_steps):
        results[name] = list(reuse.stream("s", n_steps, _seeded(7), _draw))

    threads = [threading.Thread(target=read, args=(i, 5 + i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        want = _fresh(7, 5 + i)
        assert all(torch.equal(a, b) for g, w in zip(results[i], want) for a, b in zip(g, w))


def test_contexts_nest_and_restore():
    with reuse_batches() as outer:
        with reuse_batches(max_bytes=10) as inner:
            assert active_reuse() is inner
        assert active_reuse() is outer
    assert active_reuse() is None


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (-1, ValueError, "max_bytes must be an integer >= 0, got -1."),
        (1.5, TypeError, "max_bytes must be an integer, got 1.5 of type float."),
        ("1", TypeError, "max_bytes must be an integer, got '1' of type str."),
        (True, TypeError, "max_bytes must be an integer, got True of type bool."),
        (None, TypeError, "max_bytes must be an integer, got None of type NoneType."),
    ],
)
def test_a_bad_bound_is_refused_naming_it(bad, error, message):
    with pytest.raises(error, match=re.escape(message)):
        with reuse_batches(max_bytes=bad):
            pass
    assert active_reuse() is None


def test_each_run_of_reproduce_reuses_its_batches():
    seen = []
    _runs.run_one(lambda: seen.append(active_reuse()), {}, 1)
    assert isinstance(seen[0], BatchReuse) and active_reuse() is None


def test_an_experiment_called_directly_reuses_its_streams(monkeypatch):
    # The experiments open a context of their own when none is active (as reproduce's
    # runs do), and keep the one that is.
    from stsq_learn.engine import training
    from stsq_learn.experiments import PRESETS, encoding_families

    seen = []
    batches = training.OnlineData.batches

    def spy(self, batch_size, generator):
        seen.append(active_reuse())
        return batches(self, batch_size, generator)

    monkeypatch.setattr(training.OnlineData, "batches", spy)
    encoding_families(PRESETS["tiny"]["encodings"])
    assert seen and all(isinstance(r, BatchReuse) for r in seen)
    assert len({id(r) for r in seen}) == 1 and active_reuse() is None
    seen.clear()
    with reuse_batches() as outer:
        encoding_families(PRESETS["tiny"]["encodings"])
    assert seen and all(r is outer for r in seen)


def test_reusing_batches_keeps_the_function_and_its_signature():
    import inspect

    from stsq_learn.engine.batch_reuse import reusing_batches

    @reusing_batches
    def experiment(settings=None, *, random_state=0):
        """Doc."""
        return active_reuse()

    assert experiment.__doc__ == "Doc." and "random_state" in str(inspect.signature(experiment))
    assert isinstance(experiment(), BatchReuse) and active_reuse() is None
