"""The in-context regression experiment: the tiny run beside the theory, its result, its record."""

import json
import math

import matplotlib
import numpy as np
import pytest
import torch

from stsq_learn import in_context_preconditioner, in_context_risk
from stsq_learn.experiments import EXPERIMENTS, PRESETS, InContextResult, InContextSettings
from stsq_learn.studies import StudyTable, planning
from stsq_learn.tasks.in_context import record
from stsq_learn.tasks.in_context.experiment import (
    BASELINES,
    LAYER,
    CovariateShift,
    in_context_regression,
    preconditioner_error,
)

matplotlib.use("Agg")

SMALL = dict(
    n_steps=60,
    record_every=20,
    train_lengths=(5, 10),
    test_lengths=(5, 10, 20),
    scales=(1.0, 2.0),
    n_test=300,
    n_tune=300,
    n_train=10,
    progress=False,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's three seeds, in one call."""
    return in_context_regression(record.PRESETS["tiny"], seeds=(0, 1, 2), progress=False)


# -- the tiny run against the theory ---------------------------------------------------------
def test_tiny_run_converges_to_the_global_minimum(tiny):
    for res in tiny:
        # 200 steps at 0.02: both laws within 8% (4-7% measured), from about 90% at the start.
        assert res.final_error("isotropic") < 0.08
        assert res.final_error("anisotropic") < 0.08
        start = res.convergence.where(law="isotropic", step=0)["preconditioner_error"][0]
        assert start > 0.5


def test_tiny_run_risk_matches_the_formula(tiny):
    for res in tiny:
        risk, exact = res.measured("risk"), res.measured("fitted_risk")
        for m, theory in res.theory["risk"].items():
            assert theory == pytest.approx(in_context_risk(m, 20, np.ones(5)))
            # The fitted layer's exact risk is within 6% of the minimum's (its preconditioner
            # within 8% of Gamma^{-1}; at M < N it may be below: Gamma^{-1} is best at M = N
            # only); the Monte Carlo estimate on 2000 prompts within 12%.
            assert exact[m] == pytest.approx(theory, rel=0.06)
            assert risk[m] == pytest.approx(theory, rel=0.12)
        assert res.theory["risk"][20] == pytest.approx(1.1538, abs=1e-4)  # SPEC section 19


def test_tiny_run_baselines_and_the_meeting_at_n(tiny):
    for res in tiny:
        ls = res.measured("risk", BASELINES[0])
        assert max(ls.values()) < 1e-10  # noiseless, M >= d: exact
        gd = res.measured("risk", BASELINES[1])
        assert res.theory["gd_risk"][10] == pytest.approx(1.875)
        # The tuned step and the layer meet at M = N (the same predictor for Lambda = I).
        assert gd[20] == pytest.approx(res.measured("risk")[20], rel=0.05)
        assert gd[5] > res.theory["gd_risk"][5] * 0.85


def test_tiny_run_covariate_shift_slope(tiny):
    g = 1 + 6 / 20
    for res in tiny:
        slope = res.measured("slope")
        for c in (0.5, 1.0, 2.0, 3.0):
            assert res.theory["slope"][c] == pytest.approx(c * c / g)
            assert slope[c] == pytest.approx(c * c / g, rel=0.08)
        for value in res.measured("slope", BASELINES[0]).values():
            assert value == pytest.approx(1.0, abs=1e-9)
        shift = res.measured("risk_shift")
        assert shift[2.0] / 4 == pytest.approx(res.theory["shift_risk"][2.0] / 4, rel=0.15)


def test_tiny_run_best_training_length_is_the_test_length(tiny):
    for res in tiny:
        assert res.best["best_n_train"].tolist() == [5, 10, 20]
        assert res.law["params"]["b"] == pytest.approx(1.0)
        head = record.headline(res)
        assert head["best_n_M10"] == 10 and head["best_n_slope"] == pytest.approx(1.0)
        assert head["risk_ratio_M20"] == pytest.approx(1.0, abs=0.12)
        assert head["slope_ratio"] == pytest.approx(1.0, abs=0.08)
        assert head["least_squares_slope_c3"] == pytest.approx(1.0)
        assert head["gd_over_layer_at_N"] == pytest.approx(1.0, abs=0.05)
        assert all(math.isfinite(v) for v in head.values())


# -- the result --------------------------------------------------------------------------
def test_result_to_dict_is_json_and_round_trips_its_tables(tiny):
    res = tiny[0]
    out = json.loads(json.dumps(res.to_dict()))
    assert out["config"]["seed"] == 0 and out["config"]["n_train"] == 20
    lengths = StudyTable.from_dict(out["lengths"])
    assert lengths == res.lengths
    assert set(lengths["seed"]) == {0}
    assert len(lengths) == 3 * 3  # training x test lengths
    assert out["theory"]["risk"]["20"] == pytest.approx(1.1538, abs=1e-4)
    assert out["law"]["name"] == "linear"


def test_result_plot_draws_five_panels(tiny):
    fig = tiny[1].plot()
    assert len(fig.axes) == 5
    assert fig.axes[0].get_yscale() == "log"
    assert fig.axes[2].get_xlabel() == "covariate scale c"
    with pytest.raises(ValueError, match="5 matplotlib Axes"):
        tiny[1].plot(axes=fig.axes[:2])
    matplotlib.pyplot.close("all")


# -- seeds ---------------------------------------------------------------------------------
def test_a_list_of_seeds_gives_the_one_seed_runs():
    many = in_context_regression(seeds=[3, 1], **SMALL)
    one = in_context_regression(random_state=1, **SMALL)
    assert isinstance(many, list) and [r.config["seed"] for r in many] == [3, 1]
    assert isinstance(one, InContextResult)
    # The two seeds train as one batched float32 model: the one-seed run's numbers up to
    # rounding (3.5e-8 relative measured).
    assert record.headline(many[1]) == pytest.approx(record.headline(one), rel=1e-6)
    assert many[1].lengths["risk"] == pytest.approx(one.lengths["risk"], rel=1e-6)
    # Traced: the seeds fitted one after another, the same numbers bit for bit.
    traced = many[1].convergence["preconditioner_error"]
    assert traced.tolist() == one.convergence["preconditioner_error"].tolist()
    assert record.headline(many[0]) != pytest.approx(record.headline(one), rel=1e-3)


# -- settings refused by name, before any work -----------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"n_test": 2.5}, TypeError, "n_test"),
        ({"learning_rate": -1.0}, ValueError, "learning_rate"),
        ({"learning_rate": "fast"}, TypeError, "learning_rate"),
        ({"anisotropic": (1.0, 2.0)}, ValueError, "anisotropic must hold n_features=5"),
        ({"anisotropic": (1.0, 2.0, 0.0, 1.0, 1.0)}, ValueError, r"anisotropic\[2\]"),
        ({"train_lengths": (3, 20)}, ValueError, r"train_lengths\[0\] must be at least"),
        ({"train_lengths": (20, 20)}, ValueError, "train_lengths holds a value twice"),
        ({"train_lengths": "20"}, TypeError, "train_lengths"),
        ({"test_lengths": (5, 10)}, ValueError, "at least 3 lengths"),
        ({"test_lengths": (5, 10, 2.0)}, TypeError, r"test_lengths\[2\]"),
        ({"n_train": 15}, ValueError, "n_train=15 must be one of train_lengths"),
        ({"test_lengths": (5, 20, 40)}, ValueError, "n_train=10 must be one of test_lengths"),
        ({"n_tune": 0}, ValueError, "n_tune"),
        ({"scales": (1.0, math.inf)}, ValueError, r"scales\[1\]"),
        ({"scales": ()}, ValueError, "scales is empty"),
        ({"n_stepz": 3}, ValueError, "n_stepz"),
    ],
)
def test_bad_settings_are_refused_by_name(change, error, match):
    with planning() as plan:  # a refused setting records no work either
        with pytest.raises(error, match=match):
            in_context_regression(**{**SMALL, **change})
    assert len(plan) == 0


def test_bad_seeds_are_refused():
    with pytest.raises(ValueError, match="twice"):
        in_context_regression(seeds=[1, 1], **SMALL)
    with pytest.raises(TypeError, match=r"seeds\[0\]"):
        in_context_regression(seeds=["a"], **SMALL)


# -- the pieces ------------------------------------------------------------------------------
def test_covariate_shift_scorer_scales_the_prompts():
    class Exact:  # the minimum's prediction, for a known slope
        seq_len_ = 21

        def predict(self, X):
            A = in_context_preconditioner(20, np.ones(5))
            h = np.einsum("nm,nmd->nd", X[:, :-1, -1], X[:, :-1, :-1]) / (X.shape[1] - 1)
            return np.einsum("nd,de,ne->n", h, A, X[:, -1, :-1])

    from stsq_learn import InContextRegressionTask

    X, y = InContextRegressionTask(21, 5).sample(20000, random_state=0)
    slope = CovariateShift(2.0, "slope")(Exact(), X, y)
    assert slope == pytest.approx(4 / 1.3, rel=0.03)
    assert math.isnan(CovariateShift(2.0, "slope")(Exact(), X[:, 5:], y))


def test_preconditioner_error_is_zero_at_the_minimum():
    class AtMinimum:
        from stsq_learn import InContextRegressionTask

        task_ = InContextRegressionTask(21, 5, covariance=(2.0, 1.5, 1.0, 0.5, 0.25))
        preconditioner_ = in_context_preconditioner(20, [2.0, 1.5, 1.0, 0.5, 0.25])

    assert preconditioner_error(AtMinimum()) == pytest.approx(0.0, abs=1e-12)


# -- the record ------------------------------------------------------------------------------
def test_record_is_registered_at_every_size():
    assert "in_context_regression" in EXPERIMENTS
    rec = record.RECORD
    assert rec.settings is InContextSettings and rec.result is InContextResult
    for size in ("tiny", "quick", "full", "gpu"):
        assert PRESETS[size]["in_context_regression"] is rec.presets[size]
        work = rec.planned_work(size)
        preset = rec.presets[size]
        assert sum(w.fits for w in work) == 2 + len(preset.train_lengths)
        assert all(w.steps == preset.n_steps for w in work)
    assert all(v.startswith(("paper:", "ours:")) for v in record.PROVENANCE.values())


def test_summary_rows_name_the_numbers(tiny):
    rows = []
    record.summary_rows(rows, tiny[0])
    assert rows[0].startswith("| in_context_regression (d=5, N=20, 200 steps)")
    assert any("risk at M=20" in r for r in rows)
    assert any("theory N = M" in r and "M=20: 20" in r for r in rows)
    assert LAYER == "linear attention"
