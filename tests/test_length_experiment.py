"""The length generalization experiment: batched length curves of stochastic and fixed PEs."""

import json

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from stsq_learn import FCNSelector, SparseTokenSelector
from stsq_learn.experiments import (
    ExperimentResult,
    LengthGeneralizationSettings,
    length_generalization,
)
from stsq_learn.tasks.selection.length import RECORD, floor_r2

SMALL = dict(n_steps=10, n_val_large=150, n_pe_samples=2)
MODELS = [
    "stochastic",
    "stochastic, 2 draws",
    "stochastic, log scale",
    "stochastic, floor scale",
    "fixed",
    "fixed, floor scale",
    "stochastic, trained on 4..8, log scale",
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def three():
    """The tiny preset, a little shorter, at seeds 0, 1, 2 trained together."""
    return length_generalization("tiny", **SMALL, seeds=3, device="cpu")


def r2(result, model, validation="val_large"):
    return result.tables["r2"].where(model=model, validation=validation)["r2"].tolist()


def test_tiny_numbers(three):
    table = three.tables["r2"]
    assert set(three.tables) == {"r2"}  # the tiny preset skips the floor
    assert table.unique("eval_seq_len") == [8, 16] and table.unique("model") == MODELS
    assert len(table) == len(MODELS) * 2 * 3 * 2  # curves x validation sets x seeds x lengths
    first = three.seed(0)
    # Seed 0 at 10 steps: the fixed encoding fits the training length better; both lose at 2T.
    assert r2(first, "stochastic") == pytest.approx([0.279, 0.140], abs=0.005)
    assert r2(first, "fixed") == pytest.approx([0.338, 0.168], abs=0.005)
    assert np.isfinite(table["r2"]).all()
    for name in ("val_128", "val_large"):
        # One encoding draw and no scale at the training length: the same predictions.
        assert r2(first, "stochastic, log scale", name)[0] == r2(first, "stochastic", name)[0]
        assert r2(first, "fixed, floor scale", name)[0] == r2(first, "fixed", name)[0]
    # The 128 rows are the first of the large set's: other numbers, the same model.
    assert r2(first, "stochastic", "val_128") != r2(first, "stochastic")


def test_a_seed_view_is_a_one_seed_run(three):
    one = length_generalization("tiny", **SMALL, seeds=[1], device="cpu")
    for name, values in RECORD.headline(one).items():
        assert values == pytest.approx(three.headline()[name][1], abs=1e-5)
    assert three.headline()["fixed_r2_at_1T"][0] != three.headline()["fixed_r2_at_1T"][1]


def test_the_floor_is_the_best_isotropic_r2():
    res = length_generalization(
        "tiny",
        seeds=1,
        estimator=SparseTokenSelector(8),
        n_steps=5,
        n_pe_samples=1,
        n_val_large=100,
        length_scales=(),
        train_range=None,
        floor=True,
        device="cpu",
    )
    assert res.tables["r2"].unique("model") == ["stochastic", "fixed"]
    floor = floor_r2(res)
    assert list(floor) == [8, 16] and floor[8] > floor[16] > 0
    assert "seed" not in res.tables["floor"].columns  # no seed changes it
    head = RECORD.headline(res)
    ratio = (1 - r2(res, "fixed")[1]) / (1 - floor[16])
    assert head["fixed_floor_ratio_at_2T"] == pytest.approx(ratio)
    assert "| | floor at T' (best W = gamma I of width 8) |" in "\n".join(res.summary())
    fig = res.plot()
    floor_line = fp.line(fig.axes[1], "floor at T' (best W = gamma I, width 8)")
    np.testing.assert_allclose(floor_line.get_ydata(), [floor[8], floor[16]])
    plt.close(fig)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"factors": ()}, ValueError, "'factors' parameter"),
        ({"factors": (1, 0)}, ValueError, "'factors' parameter"),
        ({"n_steps": 0}, ValueError, "'n_steps' parameter"),
        ({"n_pe_samples": 0}, ValueError, "'n_pe_samples' parameter"),
        ({"n_val_large": -1}, ValueError, "'n_val_large' parameter"),
        ({"seq_len": 1}, ValueError, "n_selected"),
        ({"train_range": (4, 6)}, ValueError, r"train_range must be \(T_min, seq_len=8\)"),
        ({"train_range": (2, 4, 8)}, ValueError, r"train_range must be \(T_min, seq_len=8\)"),
        ({"train_range": 4}, ValueError, "'train_range' parameter"),
        ({"length_scales": ("cubic",)}, ValueError, "'length_scales' parameter"),
        ({"range_scale": "cubic"}, ValueError, "'range_scale' parameter"),
        ({"floor": 1}, ValueError, "'floor' parameter"),
        ({"estimator": FCNSelector()}, TypeError, "'estimator' parameter"),
        ({"seeds": [1, 1]}, ValueError, "seeds holds 1 twice"),
        ({"device": "tpu"}, ValueError, "device='tpu' is not"),
        ({"n_step": 2}, ValueError, r"\['n_step'\] are not settings"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_work(monkeypatch, changes, error, match):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr("stsq_learn.tasks.selection.length.length_curve", no_training)
    with pytest.raises(error, match=match):
        length_generalization("tiny", **changes)


def test_settings_presets_and_the_given_estimator():
    assert RECORD.presets["quick"] == LengthGeneralizationSettings(train_range=(4, 16))
    assert RECORD.presets["tiny"].n_steps == 30 and RECORD.presets["tiny"].train_range == (4, 8)
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        length_generalization(16)
    given = SparseTokenSelector(6, random_state=123)
    before = given.get_params()
    res = length_generalization("tiny", estimator=given, n_steps=2, n_val_large=50, seeds=1)
    assert given.get_params() == before and not hasattr(given, "net_")
    assert res.settings["n_steps"] == 2 and res.settings["train_range"] == [4, 8]


def test_round_trip_through_json_draws_the_same_figure(three):
    data = json.loads(json.dumps(three.to_dict(), allow_nan=False))
    back = ExperimentResult.from_dict(data)
    assert back == three and back.bands() == three.bands()
    figs = three.plot(), back.plot()
    drawn = [
        [(ax.get_title(), [ln.get_label() for ln in ax.get_lines()]) for ax in f.axes] for f in figs
    ]
    assert drawn[0] == drawn[1]
    for f in figs:
        plt.close(f)


def test_the_figure_has_a_panel_of_bands_per_validation_set(three):
    fig = three.plot()
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    assert [ax.get_title() for ax in fig.axes] == [
        "Validation set of 128 rows",
        "Validation set of 150 rows",
    ]
    assert fp.suptitle(fig).endswith("(median over 3 seeds, band: min-max)")
    for ax, name in zip(fig.axes, ("val_128", "val_large")):
        assert ax.get_xscale() == "log"
        values = np.array([r2(three.seed(s), "fixed", name) for s in three.seeds])
        np.testing.assert_allclose(fp.line(ax, "fixed").get_ydata(), np.median(values, axis=0))
        assert len(fp.fills(ax)) == len(MODELS)  # one band per curve
        assert fp.line(ax, "fixed, floor scale").get_linestyle() == ":"
    plt.close(fig)
    one = three.seed(0).plot()
    assert not fp.fills(one.axes[0])
    np.testing.assert_array_equal(
        fp.line(one.axes[1], "stochastic").get_ydata(), r2(three.seed(0), "stochastic")
    )
    plt.close(one)


def test_record_headline_and_summary(three):
    head = RECORD.headline(three.seed(0))
    assert head["stochastic_r2_at_2T"] == r2(three.seed(0), "stochastic")[1]
    assert head["stochastic_trained_on_4_8_log_scale_r2_at_1T"] == r2(three.seed(0), MODELS[-1])[0]
    assert not any("floor_ratio" in k for k in head)
    rows = three.summary()
    assert rows[0] == "| length generalization (T=8, 150 rows) | R^2 at 1T, 2T | |"
    assert len(rows) == 1 + len(MODELS) and rows[5].startswith("| | fixed | ")
    assert RECORD.aliases == ("length",)
