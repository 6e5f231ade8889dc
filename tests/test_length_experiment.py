"""The length generalization experiment: a batched length curve of stochastic and fixed PEs."""

import json

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from sklearn.base import clone

from stsq_learn import FCNSelector, SparseTokenSelector
from stsq_learn.experiments import (
    PRESETS,
    LengthGeneralizationResult,
    LengthGeneralizationSettings,
    length_generalization,
    summary_table,
)
from stsq_learn.experiments._records import length_generalization as record

TINY = PRESETS["tiny"]["length_generalization"]
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
    return length_generalization(TINY, **SMALL, device="cpu", seeds=3)


def test_tiny_numbers(three):
    first = three[0]
    assert isinstance(first, LengthGeneralizationResult)
    assert first.eval_lengths == [8, 16] and first.models == MODELS
    large = first.r2["val_large"]
    # Seed 0 at 10 steps: the fixed encoding fits the training length better; both lose at 2T.
    assert large["stochastic"] == pytest.approx([0.279, 0.140], abs=0.005)
    assert large["fixed"] == pytest.approx([0.338, 0.168], abs=0.005)
    for curves in first.r2.values():
        assert all(len(v) == 2 and np.isfinite(v).all() for v in curves.values())
        # One encoding draw and no scale at the training length: the same predictions.
        assert curves["stochastic, log scale"][0] == curves["stochastic"][0]
        assert curves["fixed, floor scale"][0] == curves["fixed"][0]
    assert first.train_r2 == {
        "stochastic": large["stochastic"][0],
        "fixed": large["fixed"][0],
        MODELS[-1]: large[MODELS[-1]][0],
    }
    assert first.at("fixed", 2) == large["fixed"][1]
    assert first.floor_r2 is None  # the tiny preset skips the floor
    # The 128 rows are the first of the large set's: other numbers, the same model.
    assert first.r2["val_128"]["stochastic"] != large["stochastic"]


def test_one_seed_is_the_same_run_as_a_list_of_seeds(three):
    one = length_generalization(TINY, **SMALL, device="cpu", random_state=1)
    assert one.config["random_state"] == three[1].config["random_state"] == 1
    assert one.models == three[1].models
    for name in one.r2:
        for model in one.models:
            np.testing.assert_allclose(one.r2[name][model], three[1].r2[name][model], atol=1e-5)
    assert [r.config["random_state"] for r in three] == [0, 1, 2]
    assert three[0].r2 != three[1].r2


def test_the_floor_is_the_best_isotropic_r2():
    res = length_generalization(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(8),
        n_steps=5,
        factors=(1, 2),
        n_pe_samples=1,
        n_val_large=100,
        length_scales=(),
        device="cpu",
    )
    assert res.models == ["stochastic", "fixed"]
    assert len(res.floor_r2) == 2 and res.floor_r2[0] > res.floor_r2[1] > 0
    head = record.headline(res)
    ratio = (1 - res.at("fixed", 2)) / (1 - res.floor_r2[1])
    assert head["fixed_floor_ratio_at_2T"] == pytest.approx(ratio)


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"factors": ()}, ValueError, "factors must name at least one"),
        ({"factors": (1, 0)}, ValueError, r"factors\[i\]"),
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"n_pe_samples": 0}, ValueError, "n_pe_samples"),
        ({"n_val_large": -1}, ValueError, "n_val_large"),
        ({"seq_len": 2, "n_selected": 3}, ValueError, "n_selected"),
        ({"train_range": (4, 6)}, ValueError, "train_range must end at the training length"),
        ({"train_range": 4}, ValueError, r"train_range must be None or \(T_min, T_max\)"),
        ({"length_scales": ("cubic",)}, ValueError, "cubic"),
        ({"estimator": FCNSelector()}, TypeError, "estimator must be a SparseTokenSelector"),
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
        length_generalization(TINY, **changes)


def test_settings_and_changes_to_them():
    assert type(TINY) is LengthGeneralizationSettings
    res = length_generalization(TINY, n_steps=2, n_val_large=50, device="cpu")
    assert res.config["n_steps"] == 2 and res.config["n_val_large"] == 50
    assert res.config["seq_len"] == 8 and res.config["train_range"] == [4, 8]
    assert TINY.n_steps == 30 and TINY.n_val_large == 200
    with pytest.raises(TypeError, match="got int: 16"):  # the old positional seq_len
        length_generalization(16)


def test_the_given_estimator_is_cloned():
    given = SparseTokenSelector(6, random_state=123)
    before = given.get_params()
    res = length_generalization(TINY, estimator=given, n_steps=2, n_val_large=50, device="cpu")
    assert given.get_params() == before and not hasattr(given, "net_")
    assert res.config["width"] == 6 and clone(given).get_params() == before


def test_to_dict_round_trip(three):
    res = three[2]
    data = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    back = LengthGeneralizationResult.from_dict(data)
    assert back.r2 == res.r2 and back.models == res.models and back.config == res.config
    assert back.table == res.table
    assert set(back.table.columns) == {"model", "validation", "seed", "eval_seq_len", "r2"}
    assert len(back.table) == len(MODELS) * 2 * 2  # curves x validation sets x lengths


def test_the_figure_has_a_panel_of_bands_per_validation_set(three):
    fig = LengthGeneralizationResult.plot_bands(three)
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    assert [ax.get_title() for ax in fig.axes] == [
        "Validation set of 128 rows, 3 seed(s)",
        "Validation set of 150 rows, 3 seed(s)",
    ]
    for ax, name in zip(fig.axes, ("val_128", "val_large")):
        assert ax.get_xscale() == "log"
        values = np.array([r.r2[name]["fixed"] for r in three])
        np.testing.assert_allclose(fp.line(ax, "fixed").get_ydata(), np.median(values, axis=0))
        assert len(fp.fills(ax)) == len(MODELS)  # one band per curve
    plt.close(fig)
    one = three[0].plot()
    assert not fp.fills(one.axes[0])
    np.testing.assert_array_equal(
        fp.line(one.axes[1], "stochastic").get_ydata(), three[0].r2["val_large"]["stochastic"]
    )
    plt.close(one)
    fp.check_plot_bands_names_bad_results(LengthGeneralizationResult, three[0])
    with pytest.raises(ValueError, match=r"results\[1\]\.models differs"):
        other = LengthGeneralizationResult(**{**vars(three[1]), "models": MODELS[:2]})
        LengthGeneralizationResult.plot_bands([three[0], other])


def test_record_headline_and_summary(three):
    head = record.headline(three[0])
    assert head["stochastic_r2_at_2T"] == three[0].at("stochastic", 2)
    assert (
        head["stochastic_trained_on_4_8_log_scale_r2_at_1T"]
        == three[0].r2["val_large"][MODELS[-1]][0]
    )
    assert not any("floor_ratio" in k for k in head)
    table = summary_table({"length_generalization": three[0]})
    assert "| length generalization (T=8, 150 rows) | R^2 at 1T, 2T | |" in table
    assert record.RECORD.seeds_batched
