"""Length-aware score scales: the rules, their composition with the rest, training over ranges."""

import math

import numpy as np
import pytest
import torch
from sklearn.base import clone

from stsq_learn import (
    FCNSelector,
    LengthShiftScorer,
    SparseAveragingTask,
    SparseTokenAverager,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    load_model,
    make_sparse_retrieval,
    make_sparse_token_selection,
    save_model,
    shift_length,
)
from stsq_learn.encodings.length_scale import FloorScale, cached_floor, length_scale_rule


@pytest.fixture(scope="module")
def fitted():
    X, y = make_sparse_token_selection(300, 8, 3, 2, random_state=0)
    return SparseTokenSelector(width=8, max_iter=3, random_state=0).fit(X, y), X, y


def test_the_log_rule_is_log_length_over_log_training_length():
    rule = length_scale_rule("log")
    assert rule.factors(64, 8, None, 16, 1) == pytest.approx(2.0)
    assert rule.factors(8, 8, None, 16, 1) == 1.0 and rule.factors(5, 1, None, 16, 1) == 1.0
    assert length_scale_rule(None) is None
    with pytest.raises(ValueError, match=r"length_scale must be None or one of \['floor', 'log'\]"):
        length_scale_rule("sqrt")


def test_the_floor_rule_is_the_ratio_of_the_floor_s_best_gammas_per_row():
    q = torch.tensor([2.0, 3.0, 3.0, 1.0])
    factors = FloorScale().factors(32, 8, q, 16, 1)
    for i, size in enumerate(q.tolist()):
        at, ref = cached_floor(32, int(size), 16).gamma, cached_floor(8, int(size), 16).gamma
        if 0 < at < math.inf and 0 < ref < math.inf:
            assert factors[i] == pytest.approx(at / ref)
        else:  # an unbounded best gamma: the log rule stands in
            assert factors[i] == pytest.approx(math.log(32) / math.log(8))
    assert factors[1] == factors[2] > 1


def test_predictions_at_the_training_length_do_not_change(fitted):
    model, X, y = fitted
    expected = model.predict(X)
    for rule in ("log", "floor"):
        np.testing.assert_array_equal(
            clone(model)
            .set_params(length_scale=rule)
            .set_params(length_scale=None)
            .fit(X, y)
            .predict(X),
            expected,
        )
        np.testing.assert_array_equal(model.set_params(length_scale=rule).predict(X), expected)
    model.set_params(length_scale=None)


@pytest.mark.parametrize("rule", ["log", "floor"])
@pytest.mark.parametrize("encoding", ["stochastic", "fixed", "randomized", "sinusoidal"])
def test_every_family_scales_keyed_rows_and_saves(tmp_path, rule, encoding):
    X, y = make_sparse_token_selection(200, 8, 3, 2, random_state=0)
    model = SparseTokenSelector(
        width=8,
        positional_encoding=encoding,
        length_scale=rule,
        n_pe_samples=2,
        max_iter=2,
        random_state=0,
    ).fit(X, y)
    X_long = shift_length(X, 24, random_state=0)
    pred = model.predict(X_long)
    assert not np.array_equal(
        pred, clone(model).set_params(length_scale=None).fit(X, y).predict(X_long)
    )
    np.testing.assert_allclose(model.predict(X_long[:5]), pred[:5], atol=1e-6)  # row-wise
    save_model(model, tmp_path / "m.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "m.stsq").predict(X_long), pred)


def test_q_sparse_averaging_scales_too_and_retrieval_takes_only_the_log_rule():
    Xa, ya = SparseAveragingTask(6, 2, 2).sample(50, random_state=0)
    avg = SparseTokenAverager(width=8, length_scale="floor", max_iter=2, random_state=0)
    assert np.isfinite(LengthShiftScorer(factor=2, random_state=0)(avg.fit(Xa, ya), Xa, ya))
    X, y = make_sparse_retrieval(50, 6, 2, 2, random_state=0)
    SparseTokenRetriever(width=8, n_heads=2, length_scale="log", max_iter=2).fit(X, y)
    retriever = SparseTokenRetriever(width=8, n_heads=2, length_scale="floor", max_iter=2)
    with pytest.raises(ValueError, match="not sums of encodings; use length_scale='log'"):
        retriever.fit(X, y)
    assert not hasattr(retriever, "net_")
    fitted = retriever.set_params(length_scale="log").fit(X, y).set_params(length_scale="floor")
    with pytest.raises(ValueError, match="not sums of encodings"):
        fitted.predict(X)


def test_training_over_a_range_of_lengths():
    task = SparseTokenSelectionTask((6, 12), 2, 2)
    model = SparseTokenSelector(width=8, length_scale="log", batch_size=16, random_state=0)
    model.fit_online(task, n_steps=20)
    assert model.seq_len_ == 12 and model.task_.seq_len == 12
    assert model.n_iter_ == 20
    assert model.predict(task.at_length(6).sample(5, random_state=0)[0]).shape == (5, 2)
    with pytest.raises(ValueError, match="trains at one length"):
        FCNSelector(width=8).fit_online(task, n_steps=2)
    with pytest.raises(ValueError, match="seq_len=12 is longer than the codebook"):
        SparseTokenSelector(positional_encoding="randomized", max_positions=10).fit_online(task, 2)


@pytest.mark.slow
def test_the_scale_takes_a_model_to_the_floor_at_longer_lengths():
    """Trained at T=8 (q=3, width 32): near the floor at 8T with a scale, far without."""
    task = SparseTokenSelectionTask(8, 4, 3)
    model = SparseTokenSelector(width=32, random_state=0).fit_online(task)
    X, y = task.sample(2000, random_state=1)
    floor = cached_floor(64, 3, 32).relative_mse
    ratio = {}
    for rule in (None, "log", "floor"):
        model.set_params(length_scale=rule)
        ratio[rule] = (1 - LengthShiftScorer(64, random_state=0)(model, X, y)) / floor
    assert ratio[None] > 1.3 and ratio["log"] < 1.15 and ratio["floor"] < 1.1


def _long_row_model():
    X, y = make_sparse_token_selection(100, 8, 3, 2, random_state=0)
    model = SparseTokenSelector(width=8, length_scale="floor", max_iter=2, random_state=0)
    return model.fit(X, y), X


@pytest.mark.parametrize("limit", ["available", "address space"])
def test_the_floor_checks_its_cost_before_simulating(monkeypatch, limit):
    """Issue 32: one row at T'=65536 simulated 20,000 rows of that length (about 5 GiB) and
    failed with a raw MemoryError under a 4 GiB limit."""
    import stsq_learn.floor as floor
    import stsq_learn.length_scale as ls

    model, X = _long_row_model()
    X_long = shift_length(X[:1], 65536, random_state=0)
    needed = floor.simulation_bytes(65536, 20_000)
    assert needed == 5_326_766_080
    if limit == "available":
        monkeypatch.setattr(ls, "available_bytes", lambda device: 2**32)
    else:  # ulimit -v: what the process may still map
        monkeypatch.setattr(ls, "address_space_left", lambda: 2**32)

    def refuse(*args, **kwargs):
        raise AssertionError("simulated before the check")

    monkeypatch.setattr(floor, "isotropic_floor", refuse)
    before = {k: v.clone() for k, v in model.net_.module_.state_dict().items()}
    with pytest.raises(ValueError) as info:
        model.predict(X_long)
    assert str(info.value) == (
        "length_scale='floor' at seq_len=65536 simulates 20,000 rows of that length (q=2, "
        "width=8, 1 encoding draw) to find its best gamma: about 4.96 GiB (5,326,766,080 "
        "bytes), more than the 4 GiB available. Predict at a shorter length, or use "
        "length_scale='log', which simulates nothing."
    )
    for k, v in model.net_.module_.state_dict().items():
        assert torch.equal(v, before[k])
    # The rule itself, at any length not yet computed: refused before any simulation.
    monkeypatch.setattr(ls, "available_bytes", lambda device: 1000)
    with pytest.raises(ValueError, match=r"seq_len=9 simulates 20,000 rows .*\(7,920,000 bytes\)"):
        FloorScale().factors(9, 8, torch.tensor([2.0]), 8, 1)


def test_a_floor_already_computed_is_not_checked_again(monkeypatch):
    import stsq_learn.length_scale as ls

    model, X = _long_row_model()
    X_long = shift_length(X[:3], 12, random_state=0)
    expected = model.predict(X_long)  # computes the floors at 12 and 8
    monkeypatch.setattr(ls, "available_bytes", lambda device: 0)
    np.testing.assert_array_equal(model.predict(X_long), expected)
    with pytest.raises(ValueError, match=r"seq_len=13 simulates 20,000 rows .* than the 0 GiB"):
        model.predict(shift_length(X[:3], 13, random_state=0))
