"""The encodings comparison: four positional-encoding families and a codebook sweep at longer T'."""

import json
import math

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from stsq_learn import FCNSelector, SparseTokenSelector
from stsq_learn.experiments import (
    EncodingsSettings,
    ExperimentResult,
    LengthGeneralizationSettings,
    encoding_families,
    length_generalization,
)
from stsq_learn.tasks.selection.encodings import RECORD, r2

SMALL = dict(n_steps=10, n_val=150)
FAMILIES = ["stochastic", "fixed", "randomized", "sinusoidal"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def three():
    """The tiny preset, a little shorter, at seeds 0, 1, 2 trained together."""
    return encoding_families("tiny", **SMALL, seeds=3, device="cpu")


def test_tiny_numbers(three):
    table = three.tables["lengths"]
    # The randomized family (max_positions None: max(factors) * T = 16) is the sweep's codebook
    # of its size, not a second fit.
    assert table.unique("model") == [*FAMILIES, "L=32", "L=8"]
    # Each model at every length it can place: L = 8 not at T' = 16.
    assert table.unique("eval_seq_len") == [8, 16] and len(table) == (5 * 2 + 1) * 3
    assert table.where(model="L=8").unique("eval_seq_len") == [8]
    res = three.seed(0)
    assert list(r2(res, "stochastic").values()) == pytest.approx([0.279, 0.140], abs=0.005)
    assert list(r2(res, "fixed").values()) == pytest.approx([0.338, 0.168], abs=0.005)
    for family in FAMILIES:
        values = r2(res, family)
        assert np.isfinite(list(values.values())).all() and values[16] < values[8]
    # A codebook of L = T positions: every row takes all of them in order, i.e. fixed
    # encodings; same seed, same batches, hence the same model up to rounding.
    assert r2(res, "L=8")[8] == pytest.approx(r2(res, "fixed")[8], abs=1e-5)
    # L = 8 < T' = 16: not scored, NaN.
    assert math.isnan(r2(res, "L=8")[16]) and np.isfinite(list(r2(res, "L=32").values())).all()


def test_the_same_seed_trains_the_same_models_as_the_length_experiment(three):
    # One seed rule: the stochastic and fixed models and rows of seed 0 are the length
    # experiment's (its held-out rows at the same size).
    length = length_generalization(
        "tiny",
        n_steps=10,
        n_pe_samples=1,
        n_val_large=150,
        length_scales=(),
        train_range=None,
        seeds=[0],
        device="cpu",
    )
    for family in ("stochastic", "fixed"):
        rows = length.tables["r2"].where(model=family, validation="val_large")
        np.testing.assert_allclose(rows["r2"], list(r2(three.seed(0), family).values()), atol=1e-5)


def test_a_seed_view_is_a_one_seed_run(three):
    one = encoding_families("tiny", **SMALL, seeds=[2], device="cpu")
    for name, value in RECORD.headline(one).items():
        expected = three.headline()[name][2]
        assert value == pytest.approx(expected, abs=1e-5, nan_ok=True)
    assert three.headline()["fixed_r2_at_1T"][0] != three.headline()["fixed_r2_at_1T"][1]


def test_a_randomized_family_shorter_than_the_longest_length():
    res = encoding_families(
        seq_len=4,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(4),
        n_steps=3,
        factors=(1, 2, 4),
        max_positions=8,
        codebook_factors=(1,),
        sweep_factor=4,
        n_val=50,
        seeds=1,
        device="cpu",
    )
    randomized = r2(res, "randomized")
    assert list(randomized) == [4, 8, 16]
    assert np.isfinite([randomized[4], randomized[8]]).all() and math.isnan(randomized[16])
    assert math.isnan(RECORD.headline(res)["randomized_r2_at_4T"])
    assert np.isfinite(list(r2(res, "stochastic").values())).all()
    table = "\n".join(res.summary())
    assert "| | randomized, L=8 |" in table and "/ n/a |" in table
    fig = res.plot()
    assert any("n/a at T'=16: L = 4 < T'" in t.get_text() for t in fig.axes[1].texts)
    plt.close(fig)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"factors": ()}, ValueError, "'factors' parameter"),
        ({"factors": (1, 0)}, ValueError, "'factors' parameter"),
        ({"codebook_factors": ()}, ValueError, "'codebook_factors' parameter"),
        ({"codebook_factors": (-2,)}, ValueError, "'codebook_factors' parameter"),
        ({"sweep_factor": 3}, ValueError, r"sweep_factor=3 must be one of factors=\[1, 2\]"),
        ({"sweep_factor": 0}, ValueError, "'sweep_factor' parameter"),
        ({"max_positions": 4}, ValueError, "max_positions=4 must be at least seq_len=8"),
        ({"max_positions": 0}, ValueError, "'max_positions' parameter"),
        ({"n_val": 0}, ValueError, "'n_val' parameter"),
        ({"n_steps": 0}, ValueError, "'n_steps' parameter"),
        ({"seq_len": 1}, ValueError, "n_selected"),
        ({"estimator": FCNSelector()}, TypeError, "'estimator' parameter"),
        ({"seeds": 0}, ValueError, "seeds must be a positive number"),
        ({"n_seeds": 2}, ValueError, r"\['n_seeds'\] are not settings of EncodingsSettings"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_work(monkeypatch, changes, error, match):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr("stsq_learn.tasks.selection.encodings.length_curve", no_training)
    with pytest.raises(error, match=match):
        encoding_families("tiny", **changes)


def test_settings_and_presets():
    assert RECORD.presets["quick"] == EncodingsSettings()
    tiny = RECORD.presets["tiny"]
    assert tiny.n_steps == 30 and tiny.codebook_factors == (1, 2, 4)
    with pytest.raises(TypeError, match="settings must be EncodingsSettings"):
        encoding_families(LengthGeneralizationSettings())
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        encoding_families(16)


def test_round_trip_through_strict_json_draws_the_same_figure(three):
    data = json.loads(json.dumps(three.to_dict(), allow_nan=False))  # NaN as null
    back = ExperimentResult.from_dict(data)
    assert back == three
    assert math.isnan(back.bands()["codebook_L8_r2_at_2T"]["median"])
    figs = three.plot(), back.plot()
    drawn = [
        [(ax.get_title(), [ln.get_label() for ln in ax.get_lines()]) for ax in f.axes] for f in figs
    ]
    assert drawn[0] == drawn[1]
    for f in figs:
        plt.close(f)


def test_the_figure_has_family_bands_and_the_codebook_sweep(three):
    fig = three.plot()
    ax, ax_sweep = fig.axes
    assert ax.get_xscale() == ax_sweep.get_xscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:4] == ["stochastic", "fixed", "randomized (L=16)", "sinusoidal"]
    assert len(fp.fills(ax)) == 4  # one band per family
    values = np.array([list(r2(three.seed(s), "fixed").values()) for s in three.seeds])
    np.testing.assert_allclose(fp.line(ax, "fixed").get_ydata(), np.median(values, axis=0))
    assert "randomized, codebook of L, at T'=16" in ax_sweep.get_legend_handles_labels()[1]
    # The references: the families' median at T', drawn over the codebooks that score there.
    fixed = fp.line(ax_sweep, "fixed at T'=16, median")
    assert list(fixed.get_xdata()) == [16, 32] and fixed.get_linestyle() == "--"
    assert fixed.get_ydata()[0] == pytest.approx(np.median(values[:, 1]))
    assert any("L = 8 < T'" in t.get_text() for t in ax_sweep.texts)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2)
    assert three.plot(axes=axes) is fig
    with pytest.raises(ValueError, match="2 matplotlib Axes"):
        three.plot(axes=axes[:1])
    plt.close(fig)


def test_record_headline_and_summary(three):
    head = RECORD.headline(three.seed(0))
    assert head["stochastic_r2_at_2T"] == r2(three.seed(0), "stochastic")[16]
    assert head["codebook_L32_r2_at_2T"] == r2(three.seed(0), "L=32")[16]
    assert head["codebook_L16_r2_at_2T"] == head["randomized_r2_at_2T"]
    assert math.isnan(head["codebook_L8_r2_at_2T"])
    rows = three.summary()
    assert rows[0] == "| encodings (T=8, m=8, 10 steps, 150 rows) | R^2 at 1T, 2T | |"
    assert rows[-1].startswith("| | randomized at 2T, L = 8, 16, 32 (n/a: L < 16) | n/a / ")
