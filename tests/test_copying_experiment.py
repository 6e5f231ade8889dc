"""The copying experiment: the tiny run, its tables, headline numbers, figure and record."""

import json
import math

import matplotlib
import pytest
import torch

from stsq_learn import fixed_state_error_bound, ngram_error_bound
from stsq_learn.experiments import EXPERIMENTS, PRESETS, CopyingSettings, ExperimentResult, copying
from stsq_learn.studies import planning
from stsq_learn.tasks.copying.experiment import (
    MODELS,
    RECORD,
    accuracy_bounds,
    matched_hidden_size,
    strings_to_target,
    trained_copiers,
)

matplotlib.use("Agg")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset over two seeds."""
    return copying("tiny", seeds=2)


def test_the_tiny_run_has_every_table_and_seed(tiny):
    assert sorted(tiny.tables) == ["constructions", "curve", "trained"] and tiny.seeds == (0, 1)
    curve = tiny.tables["curve"]
    assert set(curve.unique("model")) == set(MODELS)
    assert curve.unique("step") == [0, 50, 100, 150]
    assert list(curve["strings"][:3]) == [0, 800, 1600]  # 16 strings a step
    for column in ("accuracy_L4", "accuracy_L8"):
        assert all(0 <= v <= 1 for v in curve[column])
    assert tiny.tables["constructions"].unique("param_seq_len") == [4, 8, 16]


def test_the_headline_numbers_and_the_theory(tiny):
    bands = tiny.bands()
    # D = 3, b = 16: every string of 4 or 8 symbols is stored; at 16, 2^16 of 3^16 are.
    for L in (4, 8):
        assert bands[f"fixed_state_gap_L{L}"]["max"] == 0.0
    assert abs(bands["fixed_state_gap_L16"]["median"]) < 0.01  # 500 strings: sampling error
    for L in (4, 8, 16):
        assert bands[f"ngram_bound_L{L}"]["median"] == ngram_error_bound(L, 3, 4)
        assert bands[f"ngram_error_L{L}"]["max"] <= ngram_error_bound(L, 3, 4)
    assert bands["ngram_error_L4"]["max"] == 0.0  # L = n: copied by position
    assert 0.3 < bands["ngram_error_L16"]["median"] < 0.6  # 500 strings: about 0.44
    # 150 steps: the transformer starts to copy strings of 4, the LSTM barely
    assert bands["accuracy_transformer_L4"]["median"] > 0.1
    assert set(bands) >= {"strings_to_target_transformer", "accuracy_lstm_x2", "accuracy_lstm_L4"}
    assert math.isinf(strings_to_target(tiny.seed(0), "LSTM", target=1.01))
    assert strings_to_target(tiny.seed(0), "LSTM", target=0.0) == 0.0
    curves = accuracy_bounds(tiny.settings)
    ((xs, fixed),) = (v for k, v in curves.items() if k.startswith("fixed"))
    assert fixed == [1 - fixed_state_error_bound(L, 3, 16) for L in xs]


def test_the_result_saves_redraws_and_summarises(tiny):
    again = ExperimentResult.from_dict(json.loads(json.dumps(tiny.to_dict(), default=str)))
    assert again == tiny
    fig = again.plot()
    assert len(fig.axes) == 3
    title = fig.axes[0].get_legend().get_title().get_text()
    assert "theorems" in title and "vacuous" in title
    rows = tiny.summary()
    assert rows[0].startswith("| copying (D=3, L=2-4, 150 steps) | strings seen until 0.9")
    assert any("n-gram copier's error" in row for row in rows)


def test_the_settings_are_checked_before_any_work():
    with pytest.raises(ValueError, match="min_len=9 exceeds train_len=8"):
        copying("tiny", train_len=8, min_len=9)
    with pytest.raises(ValueError, match=r"factors must start at 1"):
        copying("tiny", factors=(2, 4))
    with pytest.raises(ValueError, match="n_bits"):
        CopyingSettings(n_bits=63)
    with pytest.raises(ValueError, match="width=30 must be a multiple of n_heads=8"):
        CopyingSettings(width=30)


def test_the_models_are_matched_and_set_explicitly():
    cfg = CopyingSettings()
    transformer, lstm = trained_copiers(cfg).values()
    assert lstm.hidden_size == matched_hidden_size(64, 4, 10)
    count = {}
    for label, est in trained_copiers(cfg).items():
        module = est._make_module(type("T", (), {"n_features": 10, "reference_length": 20})(), 0)
        count[label] = sum(p.numel() for p in module.parameters())
    assert abs(count["LSTM"] / count["transformer"] - 1) < 0.03
    assert transformer.get_params()["batch_size"] == cfg.batch_size


def test_the_record_and_its_plan():
    assert "copying" in EXPERIMENTS and PRESETS["quick"]["copying"] is RECORD.presets["quick"]
    assert all(type(p) is CopyingSettings for p in RECORD.presets.values())
    with planning() as plan:
        RECORD.run(RECORD.presets["quick"], (0, 1, 2), device=None, progress=False, n_jobs=None)
    quick = RECORD.presets["quick"]
    assert plan.fits == 3 * 2 * (len(quick.theory_lengths) + len(quick.trained_lengths) + 1)
