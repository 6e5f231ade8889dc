"""The in-context regression experiment: the tiny run beside the theory, its result, its record."""

import json
import math

import matplotlib
import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from stsq_learn import in_context_preconditioner, in_context_risk
from stsq_learn.experiments import PRESETS, ExperimentResult, InContextSettings
from stsq_learn.studies import planning
from stsq_learn.tasks.in_context import experiment as icl
from stsq_learn.tasks.in_context.experiment import (
    BASELINES,
    CovariateShift,
    in_context_regression,
    preconditioner_error,
    values_of,
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
    return in_context_regression("tiny", seeds=3)


# -- the tiny run against the theory ---------------------------------------------------------
def test_tiny_run_converges_to_the_global_minimum(tiny):
    for s in tiny.seeds:
        view = tiny.seed(s)
        # 200 steps at 0.02: both laws within 8% (4-7% measured), from about 90% at the start.
        assert icl.final_error(view, "isotropic") < 0.08
        assert icl.final_error(view, "anisotropic") < 0.08
        start = view.tables["convergence"].where(law="isotropic", step=0)
        assert start["preconditioner_error"][0] > 0.5


def test_tiny_run_risk_matches_the_formula(tiny):
    th = icl.closed_forms(tiny.settings)
    assert th["risk"][20] == pytest.approx(1.1538, abs=1e-4)  # SPEC section 19
    for s in tiny.seeds:
        view = tiny.seed(s)
        risk, exact = values_of(view, "risk"), values_of(view, "fitted_risk")
        for m, theory in th["risk"].items():
            assert theory == pytest.approx(in_context_risk(m, 20, np.ones(5)))
            # The fitted layer's exact risk is within 6% of the minimum's (its preconditioner
            # within 8% of Gamma^{-1}; at M < N it may be below: Gamma^{-1} is best at M = N
            # only); the Monte Carlo estimate on 2000 prompts within 12%.
            assert exact[m] == pytest.approx(theory, rel=0.06)
            assert risk[m] == pytest.approx(theory, rel=0.12)


def test_tiny_run_baselines_and_the_meeting_at_n(tiny):
    th = icl.closed_forms(tiny.settings)
    assert th["gd_risk"][10] == pytest.approx(1.875)
    for s in tiny.seeds:
        view = tiny.seed(s)
        assert max(values_of(view, "risk", BASELINES[0]).values()) < 1e-10  # noiseless, M >= d
        gd = values_of(view, "risk", BASELINES[1])
        # The tuned step and the layer meet at M = N (the same predictor for Lambda = I).
        assert gd[20] == pytest.approx(values_of(view, "risk")[20], rel=0.05)
        assert gd[5] > th["gd_risk"][5] * 0.85


def test_tiny_run_covariate_shift_slope(tiny):
    g = 1 + 6 / 20
    th = icl.closed_forms(tiny.settings)
    for s in tiny.seeds:
        view = tiny.seed(s)
        slope = values_of(view, "slope")
        for c in (0.5, 1.0, 2.0, 3.0):
            assert th["slope"][c] == pytest.approx(c * c / g)
            assert slope[c] == pytest.approx(c * c / g, rel=0.08)
        for value in values_of(view, "slope", BASELINES[0]).values():
            assert value == pytest.approx(1.0, abs=1e-9)
        shift = values_of(view, "risk_shift")
        assert shift[2.0] / 4 == pytest.approx(th["shift_risk"][2.0] / 4, rel=0.15)


def test_tiny_run_best_training_length_is_the_test_length(tiny):
    best = icl.best_lengths(tiny)
    assert best.where(seed=1)["best_n_train"].tolist() == [5, 10, 20]
    bands = tiny.bands()
    for s, law in icl.best_length_laws(tiny).items():
        assert law.params["b"] == pytest.approx(1.0), s
    assert bands["best_n_M10"]["values"] == [10.0] * 3
    assert bands["best_n_slope"]["median"] == pytest.approx(1.0)
    assert bands["risk_ratio_M20"]["median"] == pytest.approx(1.0, abs=0.12)
    assert bands["slope_ratio"]["median"] == pytest.approx(1.0, abs=0.08)
    assert bands["least_squares_slope_c3"]["median"] == pytest.approx(1.0)
    assert bands["gd_over_layer_at_N"]["median"] == pytest.approx(1.0, abs=0.05)
    assert all(math.isfinite(v) for b in bands.values() for v in b["values"])


# -- the result --------------------------------------------------------------------------
def test_result_round_trips_through_json_and_draws_the_same_figure(tiny):
    again = ExperimentResult.from_dict(json.loads(json.dumps(tiny.to_dict())))
    assert again == tiny and again.bands() == tiny.bands()
    assert sorted(tiny.tables) == ["baselines", "convergence", "lengths"]
    assert len(tiny.tables["lengths"]) == 3 * 3 * 3  # seeds x training x test lengths
    assert tiny.settings["n_train"] == 20 and tiny.settings["test_lengths"] == [5, 10, 20]
    first, second = tiny.plot(), again.plot()
    assert len(first.axes) == 5
    titles = [ax.get_title() for ax in first.axes]
    assert titles == [ax.get_title() for ax in second.axes]
    assert titles[0] == "1. Convergence to Gamma^-1 (N = 20)"
    assert first.axes[0].get_yscale() == "log" and first.axes[2].get_xlabel() == "covariate scale c"
    labels = [line.get_label() for line in first.axes[4].get_lines()]
    assert any(label.startswith("-0 + 1 M") or label.startswith("0 + 1 M") for label in labels)
    with pytest.raises(ValueError, match="5 matplotlib Axes"):
        tiny.plot(axes=first.axes[:2])
    matplotlib.pyplot.close("all")


def test_summary_rows_read_the_bands(tiny):
    rows = tiny.summary()
    assert rows[0].startswith("| in_context_regression (d=5, N=20, 200 steps)")
    assert any("risk at M=20 over the formula's 1.1538" in r for r in rows)
    assert any("theory N = M" in r and "M=20: 20" in r for r in rows)


# -- seeds ---------------------------------------------------------------------------------
def test_a_seed_of_a_batched_run_gives_the_one_seed_run():
    many = in_context_regression(seeds=[3, 1], **SMALL)
    one = in_context_regression(seeds=[1], **SMALL)
    assert many.seeds == (3, 1)
    # The two seeds train as one batched float32 model: the one-seed run's numbers up to
    # rounding (3.5e-8 relative measured); the traced curves fit one after another, exactly.
    view = many.seed(1)
    assert view.bands()["risk_ratio_M10"]["median"] == pytest.approx(
        one.bands()["risk_ratio_M10"]["median"], rel=1e-6
    )
    assert view.tables["lengths"]["risk"] == pytest.approx(one.tables["lengths"]["risk"], rel=1e-6)
    other = many.seed(3).bands()["precond_error_isotropic"]["median"]
    assert other != pytest.approx(one.bands()["precond_error_isotropic"]["median"], rel=1e-3)


# -- settings refused by name, before any work -----------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"n_steps": 0}, InvalidParameterError, "'n_steps' parameter of InContextSettings"),
        ({"n_test": 2.5}, InvalidParameterError, "'n_test' parameter"),
        ({"learning_rate": -1.0}, InvalidParameterError, "'learning_rate' parameter"),
        ({"learning_rate": "fast"}, InvalidParameterError, "Got 'fast' instead"),
        ({"anisotropic": (1.0, 2.0)}, ValueError, "anisotropic must hold n_features=5"),
        ({"anisotropic": (1.0, 2.0, 0.0, 1.0, 1.0)}, InvalidParameterError, "'anisotropic'"),
        ({"train_lengths": (3, 10)}, ValueError, "train_lengths must be at least n_features=5"),
        ({"train_lengths": (10, 10)}, InvalidParameterError, "strictly increasing"),
        ({"train_lengths": "20"}, InvalidParameterError, "'train_lengths' parameter"),
        ({"test_lengths": (5, 10)}, InvalidParameterError, "at least 3 items"),
        ({"test_lengths": (5, 10, 20.0)}, InvalidParameterError, "'test_lengths' parameter"),
        ({"n_train": 15}, ValueError, "n_train=15 must be one of train_lengths"),
        ({"test_lengths": (5, 20, 40)}, ValueError, "n_train=10 must be one of test_lengths"),
        ({"n_tune": 0}, InvalidParameterError, "'n_tune' parameter"),
        ({"scales": (1.0, math.inf)}, InvalidParameterError, "'scales' parameter"),
        ({"scales": ()}, InvalidParameterError, "'scales' parameter"),
        ({"n_stepz": 3}, ValueError, "n_stepz"),
    ],
)
def test_bad_settings_are_refused_by_name(change, error, match):
    with planning() as plan:  # a refused setting records no work either
        with pytest.raises(error, match=match):
            in_context_regression(**{**SMALL, **change})
    assert len(plan) == 0


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
def test_record_presets_are_changes_from_the_defaults_and_plan_every_fit():
    rec = icl.RECORD
    assert rec.settings is InContextSettings
    assert rec.presets["quick"] == InContextSettings()  # the defaults are the quick size's
    assert rec.presets["gpu"] is rec.presets["full"]
    for size in ("tiny", "quick", "full", "gpu"):
        assert PRESETS[size]["in_context_regression"] is rec.presets[size]
        preset = rec.presets[size]
        work = rec.planned_work(size)
        fits = [w for w in work if w.train_rows is None]  # the layer's online fits
        assert sum(w.fits for w in fits) == 2 + len(preset.train_lengths)
        assert all(w.steps == preset.n_steps for w in fits)
    assert all(v.startswith(("paper:", "ours:")) for v in icl.PROVENANCE.values())
