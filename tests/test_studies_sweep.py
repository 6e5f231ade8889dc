"""sweep, length_curve and training_curve: the runs they make, their numbers, their refusals."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.linear_model import Ridge
from user_tasks import PairMeanTask

from stsq_learn import (
    AttentionRegressor,
    FCNRegressor,
    FCNSelector,
    LengthShiftScorer,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.nn import positional_alignment
from stsq_learn.studies import (
    StudyPlan,
    length_curve,
    planning,
    stream_seed,
    sweep,
    training_curve,
)
from stsq_learn.studies.fits import test_rows

TASK = SparseTokenSelectionTask(8, 2, 2)
ATT = SparseTokenSelector(solver="adam", learning_rate_init=0.05, learning_rate="constant")
FCN = FCNSelector(learning_rate_init=0.01)
COMPARED = ("model", "seed", "param_width", "param_seq_len", "score", "n_iter", "fit_failure")


def _same(a, b, columns):
    for name in columns:
        if name in a.columns:
            assert a[name].tolist() == b[name].tolist(), name


def test_sweep_rows_are_the_fits_a_user_would_make():
    table = sweep(
        {"att": ATT, "fcn": FCN},
        TASK,
        {"width": [4, 16], "seq_len": [6, 8]},
        seeds=[3, 5],
        n_steps=20,
        n_test=150,
    )
    assert table.columns == (
        "model",
        "seed",
        "param_width",
        "param_seq_len",
        "score",
        "n_iter",
        "seconds",
        "fit_failure",
    )
    assert len(table) == 2 * 4 * 2 and set(table["fit_failure"]) == {""}
    assert table["param_width"][:4].tolist() == [4, 4, 16, 16]  # the first name varies fastest
    assert table.meta["seeds"] == [3, 5] and table.meta["grid"] == ["width", "seq_len"]
    for row in (table[0], table[7], table[13]):
        est = ATT if row["model"] == "att" else FCN
        task = SparseTokenSelectionTask(row["param_seq_len"], 2, 2)
        model = clone(est).set_params(width=row["param_width"], random_state=row["seed"])
        model.fit_online(task, 20)
        assert row["score"] == model.score(*test_rows(task, row["seed"], 150))
        assert row["n_iter"] == 20


def test_sweep_on_rows_with_scorers_and_a_users_task():
    task = PairMeanTask(6, 2)
    table = sweep(
        {
            "attention": AttentionRegressor(task=PairMeanTask, width=8),
            "fcn": FCNRegressor(task=PairMeanTask, width=16, max_iter=3),
        },
        task,
        seeds=2,
        n_train=120,
        n_test=100,
        scoring={"r2": "r2", "mse": "neg_mean_squared_error"},
    )
    assert table.columns[:4] == ("model", "seed", "r2", "mse") and len(table) == 4
    model = FCNRegressor(task=PairMeanTask, width=16, max_iter=3, random_state=1)
    model.fit(*task.sample(120, random_state=stream_seed(1, "train")))
    X, y = test_rows(task, 1, 100)
    assert table.where(model="fcn", seed=1)["r2"][0] == model.score(X, y)


def test_sweep_numbers_do_not_depend_on_n_jobs():
    kwargs = dict(grid={"width": [4, 8]}, seeds=2, n_steps=15, n_test=100)
    one = sweep({"att": ATT, "fcn": FCN}, TASK, **kwargs)
    two = sweep({"att": ATT, "fcn": FCN}, TASK, n_jobs=2, **kwargs)
    _same(one, two, COMPARED)


def test_a_failed_fit_is_a_row_with_its_error():
    diverging = FCNSelector(solver="sgd", learning_rate_init=1e6, width=8)
    with pytest.warns(FitFailedWarning, match="2 of 4 fits or scorings failed"):
        table = sweep(
            {"ok": FCN.set_params(width=8), "bad": diverging}, TASK, seeds=2, n_steps=10, n_test=50
        )
    bad = table.where(model="bad")
    assert np.isnan(bad["score"]).all() and all(
        "Training diverged" in e for e in bad["fit_failure"]
    )
    assert set(table.where(model="ok")["fit_failure"]) == {""}
    assert table.where(model="bad")["n_iter"].tolist() == [0, 0]
    zero = sweep(diverging, TASK, seeds=1, n_steps=10, n_test=50, error_score=0.0)
    assert zero["score"].tolist() == [0.0]
    with pytest.raises(ValueError, match="Training diverged"):
        sweep(diverging, TASK, seeds=1, n_steps=10, error_score="raise")


@pytest.fixture
def no_fit(monkeypatch):
    """Fail a test that fits anything: bad input must be refused before any work."""

    def refuse(*args, **kwargs):
        raise AssertionError("a fit ran before the bad input was refused")

    monkeypatch.setattr(SparseTokenSelector, "fit_online", refuse)
    monkeypatch.setattr(SparseTokenSelector, "fit", refuse)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"grid": {"widht": [4]}}, ValueError, "'widht' is neither a field of"),
        ({"grid": {"width": [4, 0]}}, ValueError, r"grid point \{'width': 0\}"),
        ({"grid": {"seq_len": [8, 0]}}, ValueError, r"grid point \{'seq_len': 0\}"),
        ({"grid": {"width": []}}, ValueError, r"grid\['width'\] is empty"),
        ({"grid": {"width": 4}}, TypeError, r"grid\['width'\] must be a sequence"),
        ({"grid": [4]}, TypeError, "grid must be a dict"),
        ({"seeds": 0}, ValueError, "positive number of seeds"),
        ({"n_steps": 0}, ValueError, "n_steps must be a positive int"),
        ({"n_test": 2.5}, ValueError, "n_test must be a positive int"),
        ({"n_train": -1}, ValueError, "n_train must be a positive int"),
        ({"scoring": 3}, TypeError, "scoring 'scoring' must be None"),
        ({"scoring": "r3"}, ValueError, "scoring 'scoring'"),
        ({"error_score": "skip"}, ValueError, "error_score must be"),
        ({"n_jobs": 0}, ValueError, "n_jobs must be None"),
    ],
)
def test_bad_input_is_refused_before_any_fit(no_fit, kwargs, error, match):
    with pytest.raises(error, match=match):
        sweep({"att": ATT}, TASK, **{"n_steps": 5, **kwargs})


def test_bad_models_and_tasks_are_refused(no_fit):
    from stsq_learn import SparseRetrievalTask

    with pytest.raises(TypeError, match=r"estimators\['x'\] must be a scikit-learn estimator"):
        sweep({"x": "SparseTokenSelector"}, TASK)
    with pytest.raises(ValueError, match="empty dict"):
        sweep({}, TASK)
    with pytest.raises(TypeError, match="task must be a Task"):
        sweep(ATT, (8, 2, 2))
    with pytest.raises(TypeError, match="trains on SparseTokenSelectionTask"):
        sweep(ATT, SparseRetrievalTask(8, 2, 2))
    with pytest.raises(TypeError, match="has no fit_online: give n_train"):
        sweep({"p": Ridge()}, TASK)
    with pytest.raises(ValueError, match="lengths"):
        length_curve(ATT, TASK, [8, 0])


def test_length_curve_scores_as_the_length_shift_scorer():
    table = length_curve(
        {"att": ATT.set_params(width=8), "fcn": FCN.set_params(width=8)},
        TASK,
        [8, 16, 4],
        seeds=[2],
        n_steps=15,
        n_test=120,
    )
    assert table["eval_seq_len"].tolist() == [8, 16, 4, 8, 16, 4]
    model = clone(ATT).set_params(width=8, random_state=2).fit_online(TASK, 15)
    X, y = test_rows(TASK, 2, 120)
    for row in table.where(model="att"):
        scorer = LengthShiftScorer(row["eval_seq_len"], random_state=stream_seed(2, "shift"))
        assert row["score"] == scorer(model, X, y)
    fcn = table.where(model="fcn")
    assert np.isfinite(fcn["score"][0]) and fcn["fit_failure"][0] == ""
    assert np.isnan(fcn["score"][1:]).all()
    assert "cannot predict at seq_len=16" in fcn["fit_failure"][1]


def test_training_curve_measures_the_model_at_each_step():
    def gamma(est):
        return positional_alignment(est.key_query_, est.n_features_in_)["gamma"]

    def r2(est):
        return est.score(*test_rows(TASK, 0, 100))

    table = training_curve(
        ATT.set_params(width=8), TASK, {"gamma": gamma, "r2": r2}, every=10, seeds=[0], n_steps=30
    )
    assert table["step"].tolist() == [0, 10, 20, 30]
    assert table["gamma"][0] == 0.0 and math.isnan(table["loss"][0])
    short = clone(ATT).set_params(width=8, random_state=0).fit_online(TASK, 20)
    row = table.where(step=20)[0]
    assert row["gamma"] == gamma(short)  # a constant rate: the first 20 steps of the run
    assert row["r2"] == r2(short) and row["loss"] == short.loss_curve_[-1]
    with pytest.raises(TypeError, match="measures must be a non-empty dict"):
        training_curve(ATT, TASK, {})
    with pytest.raises(TypeError, match=r"measures\['g'\] must be callable"):
        training_curve(ATT, TASK, {"g": 1})


def test_plans_say_the_work_before_it_runs(no_fit):
    plan = length_curve(
        {"att": ATT, "fcn": FCN},
        TASK,
        [8, 16],
        grid={"width": [4, 8]},
        seeds=3,
        n_steps=7,
        n_test=10,
        dry_run=True,
    )
    assert isinstance(plan, StudyPlan) and len(plan) == 4
    assert plan.fits == 12 and plan.steps == 84
    assert plan[0].predict_rows == 20 and plan[0].predict_len == 16
    with planning() as recorded:
        empty = sweep(ATT, TASK, {"width": [4]}, seeds=2, n_steps=5)
        sweep(FCN, TASK, seeds=1, n_train=50)
    assert len(empty) == 0 and "score" in empty.columns
    assert recorded.fits == 3 and recorded[-1].train_rows == 50 and recorded[-1].steps == 0
    assert "| total | 3 | 10 |" in str(recorded)


def test_plan_estimate_times_each_part():
    plan = sweep(ATT.set_params(width=4), TASK, seeds=2, n_steps=30, n_test=50, dry_run=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the timing runs are quiet
        (part,) = plan.estimate(device="cpu")  # raised: the clones' steps are not one object
    assert part["fits"] == 2 and part["steps"] == 60 and part["seconds"] > 0


def test_a_batched_plan_of_seeds_that_cannot_batch_times_them_one_by_one():
    """A pipeline's seeds fit one after another (its clones' steps are other objects):
    the plan of a batched study times them so, where it once raised the members' check."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from stsq_learn import SparseTokenClassificationTask
    from stsq_learn.tasks.classification.baselines import FlattenTokens

    task = SparseTokenClassificationTask(seq_len=4, n_features=2, signal=3.0)
    flat = make_pipeline(FlattenTokens(), LogisticRegression())
    plan = sweep(flat, task, seeds=3, n_train=40, n_test=40, batch_seeds=True, dry_run=True)
    (part,) = plan.estimate(device="cpu")  # raised: the clones' steps are not one object
    assert part["fits"] == 3 and part["seconds"] >= 0  # milliseconds, rounded
