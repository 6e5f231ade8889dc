"""The q-sparse token retrieval experiment: heads, widths against T, length, its record."""

import json
import math

import figure_parts as fp
import matplotlib
import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from stsq_learn import FCNRetriever, FCNSelector, SparseTokenRetriever, SparseTokenSelector
from stsq_learn.experiments import (
    PRESETS,
    ExperimentResult,
    InContextSettings,
    SparseRetrievalSettings,
    reproduce,
    sparse_retrieval,
)
from stsq_learn.studies import StudyTable, planning
from stsq_learn.tasks.retrieval.experiment import (
    PROVENANCE,
    RECORD,
    head_thresholds,
    headline,
    summary,
)

TINY = PRESETS["tiny"]["retrieval"]
SMALL = dict(seq_lens=(4,), widths={"transformer": (4,), "fcn": (8,)}, factors=(1,))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's three seeds, in one call."""
    return sparse_retrieval("tiny", seeds=3)


# -- the three studies -----------------------------------------------------------------------
def test_heads_part_is_a_sweep_over_q_and_h(tiny):
    hd = tiny.seed(0).tables["heads"]
    assert isinstance(hd, StudyTable) and hd.meta["study"] == "sweep"
    assert hd["n_selected"].tolist() == [2, 2] and hd["n_heads"].tolist() == [1, 2]
    assert hd["n_iter"].tolist() == [20, 20] and hd.meta["solver"] == "sgd"
    # 20 SGD steps at width 8: barely below the error of predicting 0.
    np.testing.assert_allclose(hd["relative_mse"], [0.8688, 0.8120], atol=2e-3)
    assert math.isnan(headline(tiny.seed(0))["threshold.q=2"])  # neither below 1/(2q) = 0.25


def test_threshold_is_the_fewest_heads_below_half_the_bound_of_q_minus_one(tiny):
    data = tiny.seed(0).to_dict()
    columns = data["tables"]["heads"]["columns"]
    columns["relative_mse"] = [0.52, 0.24]
    assert headline(ExperimentResult.from_dict(data))["threshold.q=2"] == 2
    columns["relative_mse"] = [0.52, 0.26]  # 0.26 is not below 0.25
    assert math.isnan(headline(ExperimentResult.from_dict(data))["threshold.q=2"])
    columns.update(param_n_heads=[1, 2], relative_mse=[0.2, 0.1])  # already at H = 1
    found = head_thresholds(ExperimentResult.from_dict(data))
    assert found["threshold"].tolist() == [1.0] and found["n_selected"].tolist() == [2]


def test_width_search_is_minimal_width_per_model_at_q_heads(tiny):
    wd = tiny.seed(0).tables["widths"]
    assert wd.meta["study"] == "search_threshold" and wd.meta["param"] == "width"
    assert wd["model"].tolist() == ["transformer"] * 2 + ["fcn"] * 2
    assert wd["seq_len"].tolist() == [4, 8, 4, 8]
    # 20 steps reach R^2 0.5 at no width: the largest width tried is the lower bound,
    # and T = 8 after a miss is not searched (its bound carried over).
    assert np.isnan(wd["value"]).all() and not wd["reached"].any()
    assert wd["bound"].tolist() == [8, 8, 16, 16] and wd["skipped"].tolist() == [0, 1, 0, 1]
    assert math.isnan(headline(tiny.seed(0))["law.transformer.b"])
    # The attention model of the search has q heads (the plan's models are the studies').
    search = [w for w in RECORD.planned_work("tiny") if w.label.startswith("search width: tr")]
    assert [w.estimator.n_heads for w in search] == [2, 2]


def test_length_part_trains_q_heads_and_scores_longer_rows(tiny):
    ln = tiny.seed(0).tables["length"]
    assert ln.meta["study"] == "length_curve" and ln.meta["n_test"] == 200
    assert ln["model"].tolist() == ["stochastic"] * 2 + ["fixed"] * 2
    assert ln["eval_seq_len"].tolist() == [6, 12, 6, 12]
    assert (ln["score"] > -1).all() and (ln["score"] <= 1).all()
    np.testing.assert_allclose(ln["score"], [0.1836, 0.0772, 0.2215, 0.0957], atol=2e-3)
    work = [w for w in RECORD.planned_work("tiny") if w.label.startswith("length_curve")]
    assert [(w.estimator.n_heads, w.estimator.positional_encoding) for w in work] == [
        (2, "stochastic"),
        (2, "fixed"),
    ]


def test_a_seed_of_a_run_is_the_one_seed_run(tiny):
    one = sparse_retrieval("tiny", seeds=[2])
    assert headline(tiny.seed(2)) == pytest.approx(headline(one), rel=1e-5, nan_ok=True)
    np.testing.assert_allclose(
        tiny.seed(2).tables["length"]["score"], one.tables["length"]["score"], rtol=1e-5
    )
    assert tiny.seed(1).tables["heads"]["seed"].tolist() == [1, 1]
    assert headline(tiny.seed(1)) != pytest.approx(headline(tiny.seed(0)), nan_ok=True)


def test_width_laws_are_fitted_per_seed_and_drawn_as_their_median(tiny):
    data = tiny.to_dict()
    widths = {"transformer": [[10, 14, 18], [10, 16, 22], [10, 18, 26]], "fcn": [[8, 32]] * 3}
    rows = [
        (model, seed, T, w)
        for model, per_seed in widths.items()
        for seed, ws in enumerate(per_seed)
        for T, w in zip([4, 8, 16], ws)
    ]
    data["tables"]["widths"] = StudyTable(
        {
            "model": [r[0] for r in rows],
            "seed": [r[1] for r in rows],
            "param_seq_len": [r[2] for r in rows],
            "value": [float(r[3]) for r in rows],
            "bound": [None] * len(rows),
        }
    ).to_dict()
    res = ExperimentResult.from_dict(data)
    # b = 4, 6, 8 per seed (a = 2, -2, -6): the headline holds each seed's, the summary their
    # band, the figure their median law over the lengths it was fitted on. The FCN: 2 widths.
    assert [headline(res.seed(s))["law.transformer.b"] for s in res.seeds] == pytest.approx(
        [4, 6, 8]
    )
    assert math.isnan(headline(res.seed(0))["law.fcn.c"])
    assert "| | attention: w = a + b log2(T), per seed | a -2 [-6, 2], b 6 [4, 8]" in "".join(
        summary(res)
    )
    fig = res.plot()
    (law,) = [ln for ln in fig.axes[1].get_lines() if "log2(T)" in ln.get_label()]
    assert law.get_label() == "-2 + 6 log2(T) (median of 3 fits, R^2 1.00)"
    assert (law.get_xdata().min(), law.get_xdata().max()) == pytest.approx((4, 16))
    plt.close(fig)


# -- the result ------------------------------------------------------------------------------
def test_result_round_trips_through_json_and_draws_the_same_figure(tiny):
    back = ExperimentResult.from_dict(json.loads(json.dumps(tiny.to_dict())))
    assert back == tiny and back.tables["heads"].meta["solver"] == "sgd"
    np.testing.assert_equal(back.headline(), tiny.headline())
    one, two = tiny.plot(), back.plot()
    for a, b in zip(one.axes, two.axes):
        assert a.get_title() == b.get_title()
        assert [ln.get_label() for ln in a.lines] == [ln.get_label() for ln in b.lines]
    plt.close("all")


def test_figure_has_three_banded_panels(tiny):
    fig = tiny.plot()
    ax_h, ax_w, ax_l = fig.axes
    assert ax_h.get_xlabel() == "heads H"
    assert ax_h.get_title() == "Retrieval: error against heads (T=6, d=2, m=8, 20 SGD steps)"
    assert [t.get_text() for t in ax_h.get_legend().get_texts()] == [
        "q=2",
        "bound $1 - H/q$ (H <= q)",
        "threshold level $1/(2q)$ at H = q",
    ]
    errors = np.array([tiny.seed(s).tables["heads"]["relative_mse"] for s in tiny.seeds])
    np.testing.assert_allclose(fp.line(ax_h, "q=2").get_ydata(), np.median(errors, axis=0))
    low, high = fp.band(fp.fills(ax_h)[0], [1, 2])
    np.testing.assert_allclose([low, high], [errors.min(axis=0), errors.max(axis=0)])
    assert [t.get_text() for t in ax_h.texts] == [
        "no threshold at H = q for q=2 (3 of 3 seeds) within this budget\n"
        "(relative MSE at H = q not below 1/(2q)): too few steps"
    ]
    assert ax_w.get_xlabel() == "sequence length T (log scale)"
    assert ax_w.get_title() == "Retrieval: width against T (d=2, q=H=2)"
    # No width reached: each model's lower bounds, no law; the ticks at the lengths.
    labels = [t.get_text() for t in ax_w.get_legend().get_texts()]
    assert "attention (SPE): not reached, > bound" in labels and "FCN (none reached)" in labels
    assert [t.get_text() for t in ax_w.get_xticklabels()] == ["4", "8"]
    assert ax_l.get_xlabel() == "evaluation length T' (log scale)"
    assert len(fp.fills(ax_l)) == 2  # one band per encoding
    fig.canvas.draw()
    assert [t.get_text() for t in ax_l.get_xticklabels(minor=True) if t.get_text()] == []
    plt.close(fig)


def test_summary_rows(tiny):
    rows = tiny.summary()
    assert (
        rows[0] == "| Retrieval heads (T=6, d=2, m=8, 20 SGD steps) | relative MSE at H = 1, 2 | |"
    )
    assert rows[1].startswith("| | q=2 | 0.873 [0.869, 0.889] / 0.823 [0.812, 0.847]")
    assert (
        "| | q=2: fewest H with relative MSE < 1/(2q) = 0.250 (theory: H = q) "
        "| not reached within this budget |" in rows
    )
    assert "| Retrieval widths (d=2, q=H=2, R^2 >= 0.5) | T = 4, 8 | |" in rows
    assert "| | minimal width, FCN | >16 / >16 |" in rows
    assert "| Retrieval length (trained at T=6, q=H=2, m=8) | R^2 at T' = 6, 12 | |" in rows


def test_reproduce_writes_the_whole_result(tmp_path, tiny):
    results = reproduce("tiny", out=tmp_path, only="retrieval", device="cpu", progress=False)
    assert list(results) == ["retrieval"]
    assert (tmp_path / "retrieval.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    tables = payload["experiments"]["retrieval"]["tables"]
    assert tables["heads"]["columns"]["relative_mse"] == pytest.approx(
        tiny.seed(0).tables["heads"]["relative_mse"].tolist(), rel=1e-5
    )
    assert "| | minimal width, attention | >8 / >8 |" in (tmp_path / "summary.md").read_text()


# -- settings refused by name, before any work -----------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"target_r2": 0.0}, ValueError, "target_r2"),
        ({"q_values": ()}, ValueError, "q_values"),
        ({"seq_len": 4, "q_values": (5,)}, ValueError, "q_values name up to 5"),
        ({"n_heads": (2, 1)}, ValueError, "n_heads"),
        ({"factors": ()}, ValueError, "factors"),
        ({"length_task": (8, 2)}, ValueError, "length_task"),
        ({"length_task": (4, 2, 5)}, ValueError, "n_selected"),
        ({"heads_steps": "many"}, ValueError, "heads_steps"),
        ({"heads_width": 0}, ValueError, "heads_width"),
        ({"widths": {"fcn": (8, 0)}}, ValueError, "widths"),
        ({"n_steps": {"mlp": 3}}, ValueError, "n_steps"),
        ({"transformer": SparseTokenSelector()}, ValueError, "transformer"),
        ({"fcn": FCNSelector()}, ValueError, "fcn"),
        ({"heads_estimator": SparseTokenSelector()}, ValueError, "heads_estimator"),
        ({"stop_at_target": 1}, ValueError, "stop_at_target"),
        ({"fcn": FCNRetriever(learning_rate_init=-1.0)}, ValueError, "learning_rate_init"),
        ({"n_head": (1,)}, ValueError, r"\['n_head'\] are not settings of SparseRetrievalSet"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(change, error, match, monkeypatch):
    for cls in (SparseTokenRetriever, FCNRetriever):
        monkeypatch.setattr(cls, "fit_online", lambda *a, **k: pytest.fail("a model trained"))
    with planning() as plan, pytest.raises(error, match=match):
        sparse_retrieval(TINY, **change)
    assert len(plan) == 0


@pytest.mark.parametrize("name", SparseRetrievalSettings.field_names())
def test_every_setting_is_checked_by_its_constraint(name):
    with planning() as plan, pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        sparse_retrieval(TINY, **{name: "bad"})
    assert len(plan) == 0


def test_bad_seeds_and_settings_are_refused():
    with pytest.raises(ValueError, match="seeds holds 0 twice"):
        sparse_retrieval(TINY, seeds=[0, 0])
    with pytest.raises(TypeError, match="settings must be SparseRetrievalSettings"):
        sparse_retrieval(InContextSettings())


# -- the settings and the record -------------------------------------------------------------
def test_presets_are_changes_from_the_quick_defaults():
    assert RECORD.settings is SparseRetrievalSettings
    assert RECORD.aliases == ("sparse_retrieval",)
    assert RECORD.presets["quick"] == SparseRetrievalSettings()
    quick = PRESETS["quick"]["retrieval"]
    params = quick.heads_estimator.get_params()
    assert (params["solver"], params["learning_rate_init"]) == ("adam", 0.05)
    assert (quick.heads_width, quick.heads_steps) == (32, 150)
    assert TINY.heads_estimator is None and PRESETS["full"]["retrieval"].heads_steps == "auto"
    assert all(v.startswith(("paper: ", "ours: ")) for v in PROVENANCE.values())


def test_a_change_reaches_its_part_only(tiny):
    res = sparse_retrieval(TINY, seeds=[0], seq_lens=(4,), factors=(1,))
    assert res.tables["widths"].unique("seq_len") == [4]
    assert res.tables["length"].unique("eval_seq_len") == [6]
    np.testing.assert_allclose(
        res.tables["heads"]["relative_mse"], tiny.seed(0).tables["heads"]["relative_mse"], rtol=1e-5
    )
    # H > q + 1 is not tried: no more is learned past q.
    with planning() as plan:
        sparse_retrieval(TINY, **SMALL, q_values=(1,), n_heads=(1, 2, 3))
    heads = [w for w in plan if w.label.startswith("sweep")]
    assert sorted(w.estimator.n_heads for w in heads) == [1, 2]


def test_plan_is_the_studies_work():
    # One seed: 2 heads fits, 3 + 2 fits a model's search, 2 length fits.
    work = RECORD.planned_work("tiny")
    assert [w.fits for w in work] == [1, 1, 3, 2, 3, 2, 1, 1]
    assert sum(w.fits * w.steps for w in work) == 280


def test_width_search_fits_stop_at_the_target_unless_told_not_to():
    small = dict(
        q_values=(2,),
        n_heads=(2,),
        seq_lens=(4,),
        fcn_max_seq_len=4,
        target_r2=0.6,
        widths={"transformer": (4, 8), "fcn": (8, 32)},
        n_steps={"transformer": 100, "fcn": 100},
        factors=(1,),
        seeds=[0],
    )
    stopped = sparse_retrieval(TINY, **small).tables["widths"]
    full = sparse_retrieval(TINY, **small, stop_at_target=False).tables["widths"]
    assert stopped.meta["stop_at_target"] and not full.meta["stop_at_target"]
    assert full["n_iter"].tolist() == [100 * n for n in full["n_fits"]]
    reached = stopped.where(reached=True)
    assert len(reached) and (reached["n_iter"] < 100 * reached["n_fits"]).all()
    np.testing.assert_array_equal(stopped["value"], full["value"])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")  # 2-step searches
def test_quick_heads_part_shows_the_threshold_at_q():
    small = dict(SMALL, n_steps={"transformer": 2, "fcn": 2}, length_steps=2, n_test=1000)
    res = sparse_retrieval("quick", **small, q_values=(3,), seeds=[0])
    errors = res.tables["heads"]["relative_mse"]
    assert errors[2] < 1 / 6 < 0.3 < errors[1] < errors[0]
    assert headline(res)["threshold.q=3"] == 3
