"""What a study refuses before any work, n_train as a grid name, and how its plan counts."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from user_tasks import PairMeanTask

from stsq_learn import (
    FCNRegressor,
    SparseTokenClassificationTask,
    SparseTokenClassifier,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.engine import base
from stsq_learn.studies import (
    length_curve,
    minimal_width,
    planning,
    search_threshold,
    sweep,
    training_curve,
)
from stsq_learn.studies import plan as plan_module

ROOT = Path(__file__).resolve().parent.parent
TASK = SparseTokenSelectionTask(8, 2, 2)


@pytest.fixture
def no_fit(monkeypatch):
    """Any fit fails the test: what is refused is refused before any work."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was fitted")

    monkeypatch.setattr(base._BaseEstimator, "_train", refuse)


# -- n_train as a grid name -----------------------------------------------------------------
def test_n_train_in_the_grid_fits_each_point_on_its_rows():
    model = FCNRegressor(PairMeanTask, width=8, max_iter=5, batch_size=50, dtype="float64")
    task = PairMeanTask(6, 3)
    kw = dict(seeds=2, n_test=200)
    table = sweep(model, task, {"n_train": [60, 200]}, **kw)
    assert table.columns[:3] == ("model", "seed", "param_n_train")
    assert table["param_n_train"].tolist() == [60, 60, 200, 200]
    for n in (60, 200):
        alone = sweep(model, task, n_train=n, **kw)
        np.testing.assert_array_equal(table.where(n_train=n)["score"], alone["score"])
    batched = sweep(model, task, {"n_train": [60, 200]}, batch_seeds=True, **kw)
    np.testing.assert_allclose(batched["score"], table["score"], rtol=0, atol=1e-9)
    with planning() as plan:
        sweep(model, task, {"n_train": [60, 200]}, **kw)
    assert [w.train_rows for w in plan] == [60, 200] and plan.steps == 0


def test_n_train_in_the_grid_is_checked_before_any_fit(no_fit):
    model = FCNRegressor(PairMeanTask, width=8)
    with pytest.raises(ValueError, match=r"grid point \{'n_train': 0\}: .*n_train.*positive int"):
        sweep(model, PairMeanTask(6, 3), {"n_train": [100, 0]}, seeds=1)
    with pytest.raises(ValueError, match="training_curve trains online: n_train is not a grid"):
        training_curve(
            SparseTokenSelector(4), TASK, {"w": lambda e: 0.0}, grid={"n_train": [10]}, seeds=1
        )
    with pytest.raises(ValueError, match="stop_at_target stops online fits"):
        minimal_width(
            SparseTokenSelector(), TASK, [2, 4], grid={"n_train": [50]}, stop_at_target=True
        )
    with pytest.raises(ValueError, match=r"neither a field of .*, a setting of the study \(n_tr"):
        sweep(SparseTokenSelector(), TASK, {"n_rows": [5]}, seeds=1)


# -- a target no fit can reach ----------------------------------------------------------------
@pytest.mark.parametrize(
    "estimator, task, kwargs, match",
    [
        (SparseTokenSelector(), TASK, dict(target=1.2), r"target=1.2 cannot be reached: .*R\^2"),
        (
            SparseTokenClassifier(),
            SparseTokenClassificationTask(seq_len=6, n_features=3),
            dict(target=-0.1, greater_is_better=False, n_train=50, param="signal"),
            r"cannot be reached with greater_is_better=False: .*accuracy.* at least 0",
        ),
        (
            SparseTokenSelector(),
            TASK,
            dict(target=0.5, scoring="neg_mean_squared_error"),
            r"'neg_mean_squared_error' is at most 0",
        ),
        (SparseTokenSelector(), TASK, dict(target=1.01, scoring="r2"), "cannot be reached"),
    ],
    ids=["R^2 above 1", "accuracy below 0", "a neg_ scorer above 0", "r2 by name"],
)
def test_a_target_the_score_cannot_reach_is_refused_before_any_work(
    estimator, task, kwargs, match, no_fit
):
    param = kwargs.pop("param", "width")
    with pytest.raises(ValueError, match=match):
        search_threshold(estimator, task, param, [2, 4], seeds=1, n_steps=5, **kwargs)
    with pytest.raises(ValueError, match=match):  # a plan is refused too
        search_threshold(estimator, task, param, [2, 4], seeds=1, dry_run=True, **kwargs)


def test_a_reachable_target_and_an_unknown_scorer_are_taken():
    kw = dict(seeds=1, n_steps=5, n_test=50, dry_run=True)
    assert search_threshold(SparseTokenSelector(), TASK, "width", [2], target=1.0, **kw).fits
    assert search_threshold(
        SparseTokenSelector(), TASK, "width", [2], target=7.0, scoring=lambda e, X, y: 0.0, **kw
    ).fits


# -- length_curve: every evaluation length checked before the first fit ----------------------
def test_a_length_the_shift_refuses_is_refused_before_any_fit(no_fit):
    task = SparseTokenSelectionTask(8, 2, 3)  # three selected tokens: no row fits in 2
    with pytest.raises(ValueError, match=r"lengths\[1\]=2: the task's length shift cannot"):
        length_curve(SparseTokenSelector(8), task, [8, 2, 16], seeds=1, n_steps=5)
    with pytest.raises(ValueError, match=r"lengths\[0\]=4: .* at grid point \{'n_selected': 5\}"):
        length_curve(
            SparseTokenSelector(8), task, [4], grid={"n_selected": [5]}, seeds=1, n_steps=5
        )


# -- pandas, in the extra the docs name ----------------------------------------------------------
def test_pandas_is_in_the_extra_the_studies_page_names():
    page = " ".join((ROOT / "docs" / "user_guide" / "studies.rst").read_text().split())
    named = re.search(r'pandas\.DataFrame\(table\)`` .*?pip install "\.\[(\w+)\]"', page)
    assert named, "the studies page names the extra that installs pandas"
    pyproject = (ROOT / "pyproject.toml").read_text()
    extras = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    (line,) = re.findall(rf"^{named.group(1)} = \[(.*)\]$", extras, flags=re.M)
    assert re.search(r'"pandas[>=<]', line), line
    install = (ROOT / "docs" / "install.rst").read_text()
    assert f"``{named.group(1)}``\n   pandas" in install


# -- the plan counts the work as it runs ---------------------------------------------------------
def test_the_plan_counts_batched_seeds_stops_and_checks():
    est = SparseTokenSelector(8)
    kw = dict(seeds=3, n_steps=50, n_test=100, dry_run=True)
    plain = sweep(est, TASK, {"width": [4, 8]}, **kw)
    batched = sweep(est, TASK, {"width": [4, 8]}, batch_seeds=True, **kw)
    assert [w.members for w in plain] == [1, 1] and [w.members for w in batched] == [3, 3]
    search = minimal_width(est, TASK, [2, 4, 8, 16], stop_at_target=True, **kw)
    (part,) = search
    assert part.stops and part.check_every == 25 and part.check_rows == 100
    assert part.expected_steps == 50 * plan_module.STOP_SHARE
    assert part.estimator.width == 4  # timed at the middle of the widths searched
    curve = training_curve(est, TASK, {"one": lambda e: 1.0}, every=10, seeds=3, dry_run=True)
    assert curve[0].check_every == 10 and list(curve[0].measures) == ["one"]


def test_the_estimate_times_a_batched_fit_of_as_many_seeds(monkeypatch):
    from stsq_learn.engine import members

    sizes = []
    original = members.fit_online_members

    def counting(estimators, *args, **kwargs):
        sizes.append(len(estimators))
        return original(estimators, *args, **kwargs)

    monkeypatch.setattr(members, "fit_online_members", counting)
    kw = dict(seeds=3, n_steps=50, n_test=100, dry_run=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = sweep(SparseTokenSelector(8), TASK, batch_seeds=True, **kw)
        (row,) = plan.estimate()
    assert sizes == [3, 3, 3] and row["fits"] == 3 and row["seconds"] > 0
