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
    PRESETS,
    EncodingsResult,
    EncodingsSettings,
    encoding_families,
    length_generalization,
    summary_table,
)
from stsq_learn.experiments._records import encodings as record

TINY = PRESETS["tiny"]["encodings"]
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
    return encoding_families(TINY, **SMALL, device="cpu", seeds=3)


def test_tiny_numbers(three):
    res = three[0]
    assert isinstance(res, EncodingsResult) and res.families == FAMILIES
    assert res.eval_lengths == [8, 16] and res.codebook_sizes == [8, 16, 32]
    assert res.sweep_length == 16 and res.config["max_positions"] == 16  # max(factors) * T
    assert res.r2["stochastic"] == pytest.approx([0.279, 0.140], abs=0.005)
    assert res.r2["fixed"] == pytest.approx([0.338, 0.168], abs=0.005)
    for family in FAMILIES:
        assert np.isfinite(res.r2[family]).all() and res.r2[family][1] < res.r2[family][0]
    # The randomized family is the sweep's codebook of its size, not a second fit.
    assert res.sweep_r2["16"] == res.r2["randomized"]
    # A codebook of L = T positions: every row takes all of them in order, i.e. fixed
    # encodings; same seed, same batches, hence the same model up to rounding.
    assert res.codebook_at(8, 1) == pytest.approx(res.at("fixed", 1), abs=1e-5)
    # L = 8 < T' = 16: not scorable, NaN.
    assert math.isnan(res.sweep_r2["8"][1]) and math.isnan(res.codebook_at(8, 2))
    assert np.isfinite(res.sweep_r2["32"]).all()


def test_the_same_seed_trains_the_same_models_as_the_length_experiment(three):
    # One seed rule: the stochastic and fixed models and rows of seed 0 are the length
    # experiment's (its held-out rows at the same size).
    length = length_generalization(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=TINY.estimator,
        n_steps=10,
        factors=(1, 2),
        n_pe_samples=1,
        n_val_large=150,
        length_scales=(),
        floor=False,
        device="cpu",
        random_state=0,
    )
    for family in ("stochastic", "fixed"):
        np.testing.assert_allclose(length.r2["val_large"][family], three[0].r2[family], atol=1e-5)


def test_one_seed_is_the_same_run_as_a_list_of_seeds(three):
    one = encoding_families(TINY, **SMALL, device="cpu", random_state=2)
    assert one.config["random_state"] == three[2].config["random_state"] == 2
    for family in FAMILIES:
        np.testing.assert_allclose(one.r2[family], three[2].r2[family], atol=1e-5)
    np.testing.assert_allclose(one.sweep_r2["32"], three[2].sweep_r2["32"], atol=1e-5)
    assert three[0].r2 != three[1].r2


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
        device="cpu",
    )
    assert res.eval_lengths == [4, 8, 16]
    assert np.isfinite(res.r2["randomized"][:2]).all() and math.isnan(res.r2["randomized"][2])
    assert np.isfinite(res.r2["stochastic"]).all()
    table = summary_table({"encodings": res})
    assert "| | randomized, L=8 |" in table and "/ n/a |" in table
    fig = res.plot()
    assert any("n/a at T'=16: L = 4 < T'" in t.get_text() for t in fig.axes[1].texts)
    plt.close(fig)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"factors": ()}, ValueError, "factors must name at least one"),
        ({"factors": (1, 0)}, ValueError, r"factors\[i\] must be an integer >= 1, got 0"),
        ({"codebook_factors": ()}, ValueError, "codebook_factors must name at least one"),
        ({"codebook_factors": (-2,)}, ValueError, r"codebook_factors\[i\] must be an integer"),
        ({"sweep_factor": 3}, ValueError, r"sweep_factor=3 must be one of factors=\[1, 2\]"),
        ({"max_positions": 4}, ValueError, "max_positions=4 must be at least seq_len=8"),
        ({"n_val": 0}, ValueError, "n_val"),
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"seq_len": 2, "n_selected": 3}, ValueError, "n_selected"),
        ({"estimator": FCNSelector()}, TypeError, "estimator must be a SparseTokenSelector"),
        ({"seeds": 0}, ValueError, "seeds must be a positive number"),
        ({"n_seeds": 2}, ValueError, r"\['n_seeds'\] are not settings of EncodingsSettings"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_work(monkeypatch, changes, error, match):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr("stsq_learn.tasks.selection.encodings.length_curve", no_training)
    with pytest.raises(error, match=match):
        encoding_families(TINY, **changes)


def test_settings_and_changes_to_them():
    assert type(TINY) is EncodingsSettings
    res = encoding_families(TINY, n_steps=2, n_val=50, codebook_factors=(1,), device="cpu")
    assert res.config["n_steps"] == 2 and res.config["n_val"] == 50 and res.codebook_sizes == [8]
    assert res.config["seq_len"] == 8 and res.eval_lengths == [8, 16]
    assert TINY.n_steps == 30 and TINY.codebook_factors == (1, 2, 4)
    with pytest.raises(TypeError, match="settings must be EncodingsSettings"):
        encoding_families(PRESETS["tiny"]["length_generalization"])
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        encoding_families(16)


def test_to_dict_round_trip(three):
    res = three[1]
    data = json.loads(json.dumps(res.to_dict(), allow_nan=False))  # strict JSON: NaN as null
    assert data["sweep_r2"]["8"][1] is None
    back = EncodingsResult.from_dict(data)
    assert back.r2 == res.r2 and back.config == res.config and back.table == res.table
    assert math.isnan(back.sweep_r2["8"][1]) and back.sweep_r2["32"] == res.sweep_r2["32"]
    assert len(back.table) == (4 + 2) * 2  # models (families, codebooks 8 and 32) x lengths


def test_the_figure_has_family_bands_and_the_codebook_sweep(three):
    fig = EncodingsResult.plot_bands(three)
    ax, ax_sweep = fig.axes
    assert ax.get_xscale() == ax_sweep.get_xscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:4] == ["stochastic", "fixed", "randomized (L=16)", "sinusoidal"]
    assert len(fp.fills(ax)) == 4  # one band per family
    values = np.array([r.r2["fixed"] for r in three])
    np.testing.assert_allclose(fp.line(ax, "fixed").get_ydata(), np.median(values, axis=0))
    sweep_labels = ax_sweep.get_legend_handles_labels()[1]
    assert "randomized, codebook of L, at T'=16" in sweep_labels
    # The references: the families' median at T', drawn over the codebooks that score there.
    fixed = fp.line(ax_sweep, "fixed at T'=16, median")
    assert list(fixed.get_xdata()) == [16, 32]
    assert fixed.get_ydata()[0] == pytest.approx(np.median(values[:, 1]))
    assert any("L = 8 < T'" in t.get_text() for t in ax_sweep.texts)
    plt.close(fig)
    fp.check_plot_bands_names_bad_results(EncodingsResult, three[0])
    fig, axes = plt.subplots(1, 2)
    assert three[0].plot(axes=axes) is fig
    with pytest.raises(ValueError, match="2 matplotlib Axes"):
        three[0].plot(axes=axes[:1])
    plt.close(fig)


def test_record_headline_and_summary(three):
    head = record.headline(three[0])
    assert head["stochastic_r2_at_2T"] == three[0].at("stochastic", 2)
    assert head["codebook_L32_r2_at_2T"] == three[0].codebook_at(32, 2)
    assert math.isnan(head["codebook_L8_r2_at_2T"])
    assert not any(k.endswith(("_min", "_max")) for k in head)  # bands over seeds are the runner's
    table = summary_table({"encodings": three[0]})
    assert "| encodings (T=8, m=8, 10 steps, seed 0, 150 rows) | R^2 at 1T, 2T | |" in table
    assert "| | randomized at 2T, L = 8, 16, 32 (n/a: L < 16) | n/a / " in table
    assert record.RECORD.seeds_batched and not record.RECORD.seeds_inside
