"""The single-location experiment: erf runs per seed, the baselines, the record and the figure."""

import json

import figure_parts as fp
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from stsq_learn import SingleLocationTask
from stsq_learn.experiments import PRESETS, reproduce
from stsq_learn.studies import StudyTable, stream_seed
from stsq_learn.tasks.single_location import experiment, record
from stsq_learn.tasks.single_location.experiment import (
    MODELS,
    SingleLocationResult,
    single_location,
)
from stsq_learn.tasks.single_location.theory import bayes_risk, linear_risk, oracle_risk

TINY = PRESETS["tiny"]["single_location"]

# A softmax model of a few steps ends worse than predicting 0, and says so; not under test.
pytestmark = pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")


@pytest.fixture(scope="module")
def one():
    return single_location(TINY, random_state=0)


@pytest.fixture(scope="module")
def seeds():
    return single_location(TINY, seeds=[0, 1, 2])


def test_tiny_runs_their_curves_and_where_they_ended(one):
    runs, curves = one.runs, one.curves
    assert isinstance(runs, StudyTable) and runs["model"].tolist() == list(MODELS)
    assert runs["seed"].tolist() == [0] * 4 and runs.meta["seeds"] == [0]
    # 200 steps at d=20: no run reaches the oracle; the decaying temperature gets closest.
    np.testing.assert_allclose(
        runs["relative_gap"], [0.118463, 0.747572, 0.0225316, 0.956894], rtol=1e-5
    )
    assert runs["reached"].tolist() == [0, 0, 0, 0]
    assert runs["endpoint"].tolist() == ["other"] * 4
    task = SingleLocationTask(5, 20)
    for row in runs:
        assert row["oracle"] == pytest.approx(oracle_risk(task, row["lambda"]))
        assert row["risk"] == pytest.approx(row["oracle"] * (1 + row["relative_gap"]))
    # The constant schedule ends at lambda 0.1, the decaying one at 1 / (1 + 3e-3 * 199).
    np.testing.assert_allclose(runs["lambda"], [1 / 1.597, 0.1, 1 / 1.597, 0.1])
    for model in MODELS:
        rows = curves.where(model=model)
        assert rows["step"].tolist() == [*range(0, 200, 10), 199]
        last = runs.where(model=model)
        assert rows["risk"][-1] == last["risk"][0]
        assert abs(rows["key_alignment"][0]) < 0.5


def test_tiny_baselines_come_from_the_seed_streams(one):
    b, task = one.baselines, SingleLocationTask(5, 20)
    assert b["linear"] == pytest.approx(0.5 - 0.25 / 4.5) and b["zero"] == task.trivial_mse
    assert b["bayes"] < b["linear"] < b["linear_fitted"] < b["zero"]
    assert b["linear_train_rows"] == 10 * 5 * 20
    assert (b["bayes"], b["bayes_se"]) == bayes_risk(
        task, 500, random_state=stream_seed(0, "bayes")
    )
    assert b["linear_fitted"] == pytest.approx(0.4815797, rel=1e-6)
    assert b["swapped"]["decay"]["relative_gap"] == pytest.approx(0.0834878, rel=1e-5)
    soft = one.softmax
    assert soft.meta["study"] == "sweep" and soft["model"].tolist() == ["softmax"]
    assert soft["n_iter"].tolist() == [20] and soft["error"].tolist() == [""]
    assert soft["test_mse"][0] == pytest.approx(0.4274303, rel=1e-5)
    assert -1 <= soft["query_cosine"][0] <= 1


def test_one_seed_and_a_list_of_seeds_agree(one, seeds):
    assert [r.config["random_state"] for r in seeds] == [0, 1, 2]
    assert record.headline(seeds[0]) == pytest.approx(record.headline(one), rel=1e-9)
    np.testing.assert_allclose(seeds[0].curves["risk"], one.curves["risk"], rtol=1e-9)
    other = single_location(TINY, random_state=2)
    assert record.headline(seeds[2]) == pytest.approx(record.headline(other), rel=1e-9)
    assert seeds[1].runs["seed"].tolist() == [1] * 4 and seeds[1].curves.meta["seeds"] == [1]
    assert seeds[1].runs["relative_gap"][0] != pytest.approx(seeds[0].runs["relative_gap"][0])
    # Every model of seed s is fitted with random_state=s: the erf runs and the softmax model.
    assert seeds[1].softmax["seed"].tolist() == [1]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(n_seeds=2), ValueError, r"\['n_seeds'\] are not settings of SingleLocationSettings"),
        (dict(n_steps=0), ValueError, "n_steps must be an integer >= 1, got 0"),
        (dict(record_every=0), ValueError, "record_every must be an integer >= 1"),
        (dict(n_linear=0), ValueError, "n_linear must be an integer >= 1"),
        (dict(learning_rate=-1.0), ValueError, "learning_rate must be a finite number above 0"),
        (dict(softmax_learning_rate="a"), TypeError, "softmax_learning_rate must be a real"),
        (dict(noise=-0.1), ValueError, "noise must be a finite number at least 0"),
        (
            dict(alignment=1.5),
            ValueError,
            "alignment must be a finite number above 0 and at most 1",
        ),
        (dict(random_state=0, seeds=[0, 1]), ValueError, "random_state .* or seeds"),
        (dict(seeds=[0, 0]), ValueError, "seeds holds 0 twice"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(kwargs, error, match, monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "fit_online_batch", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(experiment, "sweep", lambda *a, **k: calls.append(a))
    with pytest.raises(error, match=match):
        single_location(TINY, **kwargs)
    assert calls == []


def test_to_dict_round_trip(one):
    payload = json.loads(json.dumps(one.to_dict()))
    assert set(payload) == {"config", "curves", "runs", "baselines", "softmax"}
    assert payload["config"]["random_state"] == 0 and "n_seeds" not in payload["config"]
    back = SingleLocationResult.from_dict(payload)
    for name in ("curves", "runs", "softmax"):
        assert getattr(back, name) == getattr(one, name)
    assert back.baselines == payload["baselines"]
    assert record.headline(back) == record.headline(one)


def test_figure_has_four_panels_with_bands_over_seeds(one, seeds):
    fig = one.plot()
    ax_r, ax_k, ax_v, ax_e = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [
        "Population risk",
        "Key alignment |<k, k*>|",
        "Value alignment |<v, v*>|",
        "Where the runs ended",
    ]
    assert fp.suptitle(fig) == "" and not fp.fills(ax_r)
    assert (ax_r.get_xscale(), ax_r.get_yscale()) == ("log", "log")
    line = fp.line(ax_r, "sphere, lambda decay")
    rows = one.curves.where(model="sphere/decay")
    at = np.searchsorted(rows["step"] + 1, line.get_xdata())
    np.testing.assert_allclose(line.get_ydata(), rows["risk"][at])
    assert line.get_xdata()[0] == 1 and line.get_xdata()[-1] == 200
    assert fp.line(ax_r, "best linear").get_ydata()[0] == one.baselines["linear"]
    soft = fp.line(ax_r, "softmax attention (test)").get_ydata()[0]
    assert soft == one.softmax["test_mse"][0]
    assert np.all(fp.line(ax_k, "manifold, lambda constant").get_ydata() >= 0)
    others = [p.get_height() for p in ax_e.patches][8:]  # bars: oracle, swapped, other
    assert others == [1.0] * 4
    plt.close(fig)
    bands = SingleLocationResult.plot_bands(seeds)
    ax_r, ax_k, ax_v, _ = bands.axes
    assert fp.suptitle(bands) == "Single-location regression, median over 3 seeds, band: min-max"
    assert len(fp.fills(ax_r)) == len(fp.fills(ax_v)) == 4  # one band per run
    risks = np.array([r.curves.where(model="manifold/decay")["risk"] for r in seeds])
    line = fp.line(ax_r, "manifold, lambda decay")
    low, high = fp.band(fp.fills(ax_r)[2], line.get_xdata()[-1:])
    np.testing.assert_allclose(line.get_ydata()[-1], np.median(risks[:, -1]))
    np.testing.assert_allclose([low[0], high[0]], [risks[:, -1].min(), risks[:, -1].max()])
    plt.close(bands)


def test_plot_bands_refuses_bad_results(one, seeds):
    fp.check_plot_bands_names_bad_results(SingleLocationResult, one)
    other = single_location(TINY, n_steps=20, random_state=1)
    with pytest.raises(ValueError, match=r"results\[1\] differs from results\[0\] in n_steps"):
        SingleLocationResult.plot_bands([seeds[0], other])


def test_record_headline_provenance_and_work(one):
    numbers = record.headline(one)
    assert numbers["gap_median_manifold_decay"] == one.runs["relative_gap"][2]
    assert numbers["reached_sphere_decay"] == 0.0 and numbers["swapped_manifold_constant"] == 0.0
    assert numbers["linear"] == pytest.approx(linear_risk(SingleLocationTask(5, 20)))
    assert len(numbers) == 20
    assert record.RECORD.seeds_batched and not record.RECORD.seeds_inside
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    assert all("n_seeds" not in dict(p) for p in record.PRESETS.values())
    work = record.work(TINY)
    assert [(w.label, w.fits, w.steps) for w in work] == [
        ("single_location: erf, projected GD", 4, 200),
        ("sweep: softmax", 1, 20),
    ]


def test_reproduce_single_location_section(tmp_path, seeds):
    results = reproduce(
        "tiny", out=tmp_path, only="content", n_seeds=2, progress=False, n_threads=1
    )
    assert list(results) == ["single_location"]
    assert record.headline(results["single_location"]) == pytest.approx(
        record.headline(seeds[0]), rel=1e-9
    )
    payload = json.loads((tmp_path / "results.json").read_text())
    section = payload["single_location"]
    assert section["runs"]["columns"]["model"] == list(MODELS)
    assert (tmp_path / "single_location.png").stat().st_size > 0
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "| single_location (d=20, L=5, 200 steps, seed 0) | where the run ended, sphere / "
        "manifold, lambda decay | other / other |" in summary
    )
    assert "| | where the run ended, sphere / manifold, lambda 0.1 | other / other |" in summary


def test_every_run_of_a_longer_tiny_run_ends_at_the_oracle_or_the_swapped_point():
    # d = 20, L = 5, lambda_t = 1 / (1 + 6e-3 t) down to 0.1, 1500 steps: the swapped
    # point's risk is 2.55% below the oracle's; from the sphere seed 0 ends there.
    res = single_location(
        TINY, n_steps=1500, lambda_decay=6e-3, n_softmax_steps=5, n_test=200, n_linear=200
    )
    head = record.headline(res)
    assert all(isinstance(k, str) and type(v) is float for k, v in head.items())
    for init, schedule in (m.split("/") for m in MODELS):
        both = head[f"reached_{init}_{schedule}"] + head[f"swapped_{init}_{schedule}"]
        assert both == 1.0
    assert res.runs["endpoint"].tolist() == ["swapped", "swapped", "oracle", "oracle"]
    assert head["swapped_gap_constant"] == pytest.approx(-0.025525, abs=1e-5)
    assert head["gap_median_sphere_decay"] == pytest.approx(-0.025525, abs=1e-4)
    assert head["oracle_constant"] == pytest.approx(0.26790, abs=1e-5)
    assert record.PROVENANCE["gamma"].startswith("paper")
    assert record.PROVENANCE["update"].startswith("ours")


def test_settings_are_one_typed_object_presets_its_instances():
    from stsq_learn.experiments import SingleLocationSettings

    assert record.RECORD.settings is SingleLocationSettings
    assert all(type(p) is SingleLocationSettings for p in record.PRESETS.values())
    assert TINY.n_features == 20 and TINY.n_linear is None
    # A preset and keyword changes on top of it: the change is what runs.
    res = single_location(
        TINY,
        n_steps=3,
        lambda_init=0.1,
        lambda_decay=0.0,
        n_softmax_steps=2,
        n_test=40,
        n_linear=30,
        record_every=1,
    )
    assert res.config["n_steps"] == 3 and res.config["n_features"] == 20
    assert res.config["lambda_init"] == 0.1 and len(res.runs) == 4
    assert res.curves.where(model="sphere/decay")["step"].tolist() == [0, 1, 2]
    assert res.softmax["n_iter"].tolist() == [2] and res.baselines["linear_train_rows"] == 30
    assert TINY.n_steps == 200  # the preset is not changed
    with pytest.raises(ValueError, match=r"\['n_step'\] are not settings"):
        single_location(n_step=3)


@pytest.mark.slow
def test_quick_preset_runs_reach_the_oracle_or_the_swapped_point():
    quick = PRESETS["quick"]["single_location"]
    res = single_location(quick, seeds=[0, 1], n_softmax_steps=5)
    ends = [r.runs["endpoint"].tolist() for r in res]
    # From the manifold every run reaches (k*, v*); from the sphere a run may end swapped.
    assert all(e[2:] == ["oracle", "oracle"] for e in ends)
    assert {x for e in ends for x in e} <= {"oracle", "swapped"}
    for r in res:
        rows = r.runs.where(endpoint="oracle")
        assert np.all(np.abs(rows["relative_gap"]) <= 1e-3) and np.all(rows["reached"] == 1)
