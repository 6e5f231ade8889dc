"""The single-location experiment: erf runs per seed, the baselines, the record and the figure."""

import json

import figure_parts as fp
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from stsq_learn import SingleLocationTask
from stsq_learn.experiments import (
    PRESETS,
    ExperimentResult,
    SingleLocationSettings,
    reproduce,
    single_location,
)
from stsq_learn.studies import StudyTable, stream_seed
from stsq_learn.tasks.single_location import experiment
from stsq_learn.tasks.single_location.experiment import MODELS, PROVENANCE, RECORD, headline
from stsq_learn.tasks.single_location.theory import bayes_risk, linear_risk, oracle_risk

TINY = PRESETS["tiny"]["single_location"]

# A softmax model of a few steps ends worse than predicting 0, and says so; not under test.
pytestmark = pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")


@pytest.fixture(scope="module")
def result():
    """The tiny preset's three seeds, in one call."""
    return single_location("tiny", seeds=3)


def test_tiny_runs_their_curves_and_where_they_ended(result):
    one = result.seed(0)
    runs, curves = one.tables["runs"], one.tables["curves"]
    assert isinstance(runs, StudyTable) and runs["model"].tolist() == list(MODELS)
    assert runs["seed"].tolist() == [0] * 4 and result.tables["runs"].meta["seeds"] == [0, 1, 2]
    # 200 steps at d=20: no run reaches the oracle; the decaying temperature gets closest.
    np.testing.assert_allclose(
        runs["relative_gap"], [0.118463, 0.747572, 0.0225316, 0.956894], rtol=1e-5
    )
    assert result.tables["runs"]["reached"].tolist() == [0] * 12
    assert result.tables["runs"]["endpoint"].tolist() == ["other"] * 12
    task = SingleLocationTask(5, 20)
    for row in runs:
        assert row["oracle"] == pytest.approx(oracle_risk(task, row["lambda"]))
        assert row["risk"] == pytest.approx(row["oracle"] * (1 + row["relative_gap"]))
    # The constant schedule ends at lambda 0.1, the decaying one at 1 / (1 + 3e-3 * 199).
    np.testing.assert_allclose(runs["lambda"], [1 / 1.597, 0.1, 1 / 1.597, 0.1])
    for model in MODELS:
        rows = curves.where(model=model)
        assert rows["step"].tolist() == [*range(0, 200, 10), 199]
        assert rows["risk"][-1] == runs.where(model=model)["risk"][0]
        assert abs(rows["key_alignment"][0]) < 0.5


def test_tiny_baselines_come_from_the_seed_streams(result):
    theory, task = result.tables["theory"], SingleLocationTask(5, 20)
    assert "seed" not in theory.columns and theory["schedule"].tolist() == ["decay", "constant"]
    assert theory["linear"][0] == pytest.approx(0.5 - 0.25 / 4.5)
    assert theory["zero"][0] == task.trivial_mse
    assert theory.where(schedule="decay")["swapped_gap"][0] == pytest.approx(0.0834878, rel=1e-5)
    b = result.seed(0).tables["baselines"][0]
    assert b["bayes"] < theory["linear"][0] < b["linear_fitted"] < theory["zero"][0]
    assert b["linear_train_rows"] == 10 * 5 * 20
    assert (b["bayes"], b["bayes_se"]) == bayes_risk(
        task, 500, random_state=stream_seed(0, "bayes")
    )
    assert b["linear_fitted"] == pytest.approx(0.4815797, rel=1e-6)
    soft = result.seed(0).tables["softmax"]
    assert soft.meta["study"] == "sweep" and soft["model"].tolist() == ["softmax"]
    assert soft["n_iter"].tolist() == [20] and soft["fit_failure"].tolist() == [""]
    assert soft["test_mse"][0] == pytest.approx(0.4274303, rel=1e-5)
    assert -1 <= soft["query_cosine"][0] <= 1


def test_a_seed_view_is_a_one_seed_run(result):
    other = single_location("tiny", seeds=[2])
    assert other.seeds == (2,) and result.seeds == (0, 1, 2)
    assert headline(result.seed(2)) == pytest.approx(headline(other), rel=1e-9)
    np.testing.assert_allclose(
        result.seed(2).tables["curves"]["risk"], other.tables["curves"]["risk"], rtol=1e-9
    )
    bands = result.bands()
    assert bands["gap_median_sphere_decay"]["values"] == pytest.approx(
        [headline(result.seed(s))["gap_median_sphere_decay"] for s in (0, 1, 2)]
    )
    gaps = result.tables["runs"].where(model="sphere/decay")["relative_gap"]
    assert gaps[0] != pytest.approx(gaps[1])  # each seed its own start


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(n_seeds=2), ValueError, r"\['n_seeds'\] are not settings of SingleLocationSettings"),
        (dict(n_steps=0), ValueError, "'n_steps' parameter"),
        (dict(record_every=0), ValueError, "'record_every' parameter"),
        (dict(n_linear=0), ValueError, "'n_linear' parameter"),
        (dict(learning_rate=-1.0), ValueError, "'learning_rate' parameter"),
        (dict(gamma=float("inf")), ValueError, "'gamma' parameter"),
        (dict(softmax_learning_rate="a"), TypeError, "'softmax_learning_rate' parameter"),
        (dict(noise=-0.1), ValueError, "'noise' parameter"),
        (dict(lambda_decay=-1e-3), ValueError, "'lambda_decay' parameter"),
        (dict(alignment=1.5), ValueError, "'alignment' parameter"),
        (dict(seq_len=2.5), TypeError, "'seq_len' parameter"),
        (dict(seeds=[0, 0]), ValueError, "seeds holds 0 twice"),
        (dict(seeds=[2**31]), ValueError, "seeds"),
        (dict(progress="yes"), TypeError, "progress must be True or False"),
        (dict(n_jobs=0), ValueError, "n_jobs"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(kwargs, error, match, monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "fit_online_batch", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(experiment, "sweep", lambda *a, **k: calls.append(a))
    with pytest.raises(error, match=match):
        single_location("tiny", **kwargs)
    assert calls == []


def _drawn(fig):
    """Each panel's title and its lines' labels and data."""
    return [
        (ax.get_title(), [(ln.get_label(), ln.get_xydata().tolist()) for ln in ax.get_lines()])
        for ax in fig.axes
        if ax.get_visible()
    ]


def test_round_trip_through_json_draws_the_same_figure(result):
    payload = json.loads(json.dumps(result.to_dict()))
    back = ExperimentResult.from_dict(payload)
    assert back == result
    assert back.settings["n_features"] == 20 and back.settings["n_linear"] is None
    assert back.bands() == result.bands()
    first, second = result.plot(), back.plot()
    assert _drawn(first) == _drawn(second)
    plt.close(first)
    plt.close(second)


def test_figure_has_four_panels_with_bands_over_seeds(result):
    fig = result.plot()
    ax_r, ax_k, ax_v, ax_e = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in (ax_r, ax_k, ax_v, ax_e)] == [
        "Population risk",
        "Key alignment |<k, k*>|",
        "Value alignment |<v, v*>|",
        "Where the runs ended",
    ]
    assert fp.suptitle(fig) == "Single-location regression, median over 3 seeds, band: min-max"
    assert (ax_r.get_xscale(), ax_r.get_yscale()) == ("log", "log")
    assert len(fp.fills(ax_r)) == len(fp.fills(ax_v)) == 4  # one band per run
    line = fp.line(ax_r, "manifold, lambda decay")
    assert line.get_marker() in ("", "None") and line.get_xdata()[[0, -1]].tolist() == [1, 200]
    risks = np.array(
        [result.seed(s).tables["curves"].where(model="manifold/decay")["risk"] for s in (0, 1, 2)]
    )
    low, high = fp.band(fp.fills(ax_r)[2], line.get_xdata()[-1:])
    np.testing.assert_allclose(line.get_ydata()[-1], np.median(risks[:, -1]))
    np.testing.assert_allclose([low[0], high[0]], [risks[:, -1].min(), risks[:, -1].max()])
    assert fp.line(ax_r, "best linear").get_ydata()[0] == result.tables["theory"]["linear"][0]
    soft = fp.line(ax_r, "softmax attention (test)").get_ydata()[0]
    assert soft == np.median(result.tables["softmax"]["test_mse"])
    assert np.all(fp.line(ax_k, "manifold, lambda constant").get_ydata() >= 0)
    others = [p.get_height() for p in ax_e.patches][8:]  # bars: oracle, swapped, other
    assert others == [1.0] * 4
    plt.close(fig)
    fig, axes = plt.subplots(1, 4)
    assert result.plot(axes=axes) is fig and fp.suptitle(fig) == ""  # the caller's figure
    plt.close(fig)
    with pytest.raises(ValueError, match="axes must hold 4"):
        result.plot(axes=[None])


def test_headline_summary_provenance_and_plan(result):
    numbers = headline(result.seed(0))
    assert numbers["gap_median_manifold_decay"] == result.seed(0).tables["runs"]["relative_gap"][2]
    assert numbers["reached_sphere_decay"] == 0.0 and numbers["swapped_manifold_constant"] == 0.0
    assert numbers["linear"] == pytest.approx(linear_risk(SingleLocationTask(5, 20)))
    assert len(numbers) == 20 and all(type(v) is float for v in numbers.values())
    rows = result.summary()
    assert rows[0] == (
        "| single_location (d=20, L=5, 200 steps, 3 seeds) | where the runs ended, sphere / "
        "manifold, lambda decay | 3 other / 3 other |"
    )
    assert rows[1] == (
        "| | where the runs ended, sphere / manifold, lambda 0.1 | 3 other / 3 other |"
    )
    assert any(r.startswith("| | softmax attention test MSE | ") for r in rows)
    assert all(v.startswith(("paper: ", "ours: ")) for v in PROVENANCE.values())
    assert PROVENANCE["gamma"].startswith("paper") and PROVENANCE["update"].startswith("ours")
    work = RECORD.planned_work("tiny", n_seeds=2)
    assert [(w.label, w.fits, w.steps) for w in work] == [
        ("single_location: erf, projected GD", 8, 200),
        ("sweep: softmax", 2, 20),
    ]


def test_reproduce_single_location_section(tmp_path, result):
    results = reproduce(
        "tiny", out=tmp_path, only="content", n_seeds=2, progress=False, n_threads=1
    )
    assert list(results) == ["single_location"]
    assert headline(results["single_location"].seed(1)) == pytest.approx(
        headline(result.seed(1)), rel=1e-9
    )
    payload = json.loads((tmp_path / "results.json").read_text())
    section = payload["experiments"]["single_location"]
    assert section["tables"]["runs"]["columns"]["seed"] == [0, 1] * 4
    assert section["headline"]["linear"]["values"] == [pytest.approx(0.5 - 0.25 / 4.5)] * 2
    assert (tmp_path / "single_location.png").stat().st_size > 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| | where the runs ended, sphere / manifold, lambda 0.1 | 2 other / 2 other |" in (
        summary
    )


def test_every_run_of_a_longer_tiny_run_ends_at_the_oracle_or_the_swapped_point():
    # d = 20, L = 5, lambda_t = 1 / (1 + 6e-3 t) down to 0.1, 1500 steps: the swapped
    # point's risk is 2.55% below the oracle's; from the sphere seed 0 ends there.
    res = single_location(
        "tiny",
        seeds=1,
        n_steps=1500,
        lambda_decay=6e-3,
        n_softmax_steps=5,
        n_test=200,
        n_linear=200,
    )
    head = headline(res)
    for model in MODELS:
        key = model.replace("/", "_")
        assert head[f"reached_{key}"] + head[f"swapped_{key}"] == 1.0
    assert res.tables["runs"]["endpoint"].tolist() == ["swapped", "swapped", "oracle", "oracle"]
    assert head["swapped_gap_constant"] == pytest.approx(-0.025525, abs=1e-5)
    assert head["gap_median_sphere_decay"] == pytest.approx(-0.025525, abs=1e-4)
    assert head["oracle_constant"] == pytest.approx(0.26790, abs=1e-5)


def test_settings_and_presets_are_changes_from_the_defaults():
    assert RECORD.settings is SingleLocationSettings
    assert all(type(p) is SingleLocationSettings for p in RECORD.presets.values())
    assert RECORD.presets["quick"] == SingleLocationSettings()
    assert RECORD.presets["gpu"] == RECORD.presets["full"]
    assert RECORD.presets["full"].n_features == 400 and RECORD.presets["full"].seq_len == 10
    assert TINY.n_features == 20 and TINY.n_linear is None
    # A preset and keyword changes on top of it: the change is what runs.
    res = single_location(
        TINY,
        seeds=1,
        n_steps=3,
        lambda_init=0.1,
        lambda_decay=0.0,
        n_softmax_steps=2,
        n_test=40,
        n_linear=30,
        record_every=1,
    )
    assert res.settings["n_steps"] == 3 and res.settings["n_features"] == 20
    assert res.settings["lambda_init"] == 0.1 and len(res.tables["runs"]) == 4
    assert res.tables["curves"].where(model="sphere/decay")["step"].tolist() == [0, 1, 2]
    assert res.tables["softmax"]["n_iter"].tolist() == [2]
    assert res.tables["baselines"]["linear_train_rows"].tolist() == [30]
    assert TINY.n_steps == 200  # the preset is not changed
    with pytest.raises(ValueError, match=r"\['n_step'\] are not settings"):
        single_location(n_step=3)


@pytest.mark.slow
def test_quick_preset_runs_reach_the_oracle_or_the_swapped_point():
    res = single_location("quick", seeds=[0, 1], n_softmax_steps=5)
    runs = res.tables["runs"]
    # From the manifold every run reaches (k*, v*); from the sphere a run may end swapped.
    assert set(runs.where(param_init="manifold")["endpoint"]) == {"oracle"}
    assert set(runs["endpoint"]) <= {"oracle", "swapped"}
    rows = runs.where(endpoint="oracle")
    assert np.all(np.abs(rows["relative_gap"]) <= 1e-3) and np.all(rows["reached"] == 1)
