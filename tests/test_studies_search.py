"""search_threshold and minimal_width: the same searches as the experiments of 0.6, and more.

``tests/data/searches_0_6.json`` holds what stsq-learn 0.6.0's width
searches (``experiments._width_search``: the scan at the first length, the
bracket from the previous length's width after; the bisection from a start
guess; each with and without stopping fits at the target) and its
classification experiment's geometric bisection of the signal found on
tiny settings, with the study's seeds (``random_state=s``, held-out rows
from ``stream_seed(s, "test")``). The studies must find them to the bit.
"""

import json
import math
import pathlib
import warnings

import numpy as np
import pytest

from stsq_learn import (
    FCNSelector,
    SparseRetrievalTask,
    SparseTokenClassificationTask,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    make_flat_logistic,
)
from stsq_learn.studies import minimal_width, search_threshold

RECORDED = json.loads((pathlib.Path(__file__).parent / "data" / "searches_0_6.json").read_text())
ATT = SparseTokenSelector(solver="adam", learning_rate_init=0.05, learning_rate="cosine")
FCN = FCNSelector(learning_rate_init=0.01)
GRID = [2, 4, 8, 16, 32]


def _check_recorded(recorded, table, trials, target):
    for key, found in recorded.items():
        seed, T = (int(v) for v in key.split("/"))
        row = table.where(seed=seed, seq_len=T)[0]
        tried = trials.where(seed=seed, seq_len=T)
        if found is None:  # not searched: the previous length reached no width
            assert row["skipped"] and not row["reached"] and len(tried) == 0
            continue
        assert dict(zip(map(str, tried["param_width"]), tried["score"])) == found
        passing = [int(w) for w, s in found.items() if s >= target]
        assert row["reached"] == bool(passing)
        if passing:
            assert row["value"] == min(passing) and math.isnan(row["bound"])
        else:
            assert math.isnan(row["value"]) and row["bound"] == max(int(w) for w in found)
        assert row["n_fits"] == len(found)


def test_bracket_search_is_0_6s():
    table, trials = minimal_width(
        ATT,
        SparseTokenSelectionTask(8, 2, 2),
        GRID,
        target=0.7,
        grid={"seq_len": [4, 8, 16]},
        seeds=[0, 1],
        n_steps=40,
        n_test=200,
        return_trials=True,
    )
    _check_recorded(RECORDED["bracket"], table, trials, 0.7)
    assert table.where(seed=0, seq_len=16)["bound"][0] == 32  # carried over from T=8


def test_bracket_search_stopping_fits_at_the_target_is_0_6s():
    table, trials = minimal_width(
        ATT,
        SparseTokenSelectionTask(8, 2, 2),
        GRID,
        target=0.6,
        grid={"seq_len": [4, 8]},
        seeds=[0, 1],
        n_steps=60,
        n_test=200,
        stop_at_target=True,
        return_trials=True,
    )
    _check_recorded(RECORDED["bracket_stop"], table, trials, 0.6)
    passed = trials[trials["score"] >= 0.6]
    assert (passed["n_iter"] % 25 == 0).all() and (passed["n_iter"] < 60).all()


def test_bisection_from_a_start_policy_is_0_6s():
    def start(params, previous):
        T = params["seq_len"]
        if previous is None:
            return 2 * T * 2
        return previous["value"] * T / previous["params"]["seq_len"]

    table, trials = minimal_width(
        FCN,
        SparseTokenSelectionTask(8, 2, 2),
        GRID,
        target=0.3,
        grid={"seq_len": [4, 8]},
        method="bisect",
        start=start,
        seeds=[0, 2],
        n_steps=60,
        n_test=200,
        stop_at_target=True,
        return_trials=True,
    )
    _check_recorded(RECORDED["bisect_fcn"], table, trials, 0.3)
    # the order of the fits is the bisection's: the start, then 1, 2, 4 steps
    first = trials.where(seed=0, seq_len=4)["param_width"].tolist()
    assert first == [16, 8, 2]


def test_geometric_search_of_a_task_field_is_0_6s():
    def error(est, X, y):
        return 1.0 - est.score(X, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table, trials = search_threshold(
            make_flat_logistic(max_iter=1000),
            SparseTokenClassificationTask(8, 4),
            "signal",
            (0.5, 16.0),
            target=0.25,
            greater_is_better=False,
            method="geometric",
            n_iter=4,
            grid={"seq_len": [8, 16]},
            seeds=[0, 1],
            n_train=200,
            n_test=300,
            scoring=error,
            return_trials=True,
        )
    for key, found in RECORDED["geometric"].items():
        seed, L = (int(v) for v in key.split("/"))
        row = table.where(seed=seed, seq_len=L)[0]
        assert row["value"] == found["threshold"]
        assert row["n_fits"] == 4 and len(trials.where(seed=seed, seq_len=L)) == 4


def test_heads_threshold_with_an_error_below_a_level():
    """The retrieval experiment's threshold: the fewest heads whose relative MSE is < 1/(2q)."""

    def relative_mse(est, X, y):
        return float(np.square(est.predict(X) - y).sum() / np.square(y).sum())

    table, trials = search_threshold(
        SparseTokenRetriever(width=16, solver="adam", learning_rate_init=0.05),
        SparseRetrievalTask(6, 2, 2),
        "n_heads",
        [1, 2, 3],
        target=0.25,
        greater_is_better=False,
        method="scan",
        start=None,
        seeds=2,
        n_steps=120,
        n_test=300,
        scoring=relative_mse,
        return_trials=True,
    )
    for row in table:
        tried = trials.where(seed=row["seed"])
        below = [h for h, e in zip(tried["param_n_heads"], tried["score"]) if e < 0.25]
        assert row["value"] == min(below) and tried["param_n_heads"].tolist() == list(
            range(1, int(row["value"]) + 1)
        )


def test_search_numbers_do_not_depend_on_n_jobs():
    kwargs = dict(
        target=0.5, grid={"seq_len": [4, 8]}, seeds=2, n_steps=30, n_test=100, return_trials=True
    )
    models = {"att": ATT, "fcn": FCN}
    one, one_trials = minimal_width(models, SparseTokenSelectionTask(8, 2, 2), GRID, **kwargs)
    two, two_trials = minimal_width(
        models, SparseTokenSelectionTask(8, 2, 2), GRID, n_jobs=2, **kwargs
    )
    for name in ("model", "seed", "param_seq_len", "value", "bound", "reached", "n_fits"):
        assert one[name].tolist() == two[name].tolist() or np.array_equal(
            one[name], two[name], equal_nan=True
        ), name
    assert one_trials["score"].tolist() == two_trials["score"].tolist()


@pytest.fixture
def no_fit(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a fit ran before the bad input was refused")

    monkeypatch.setattr(SparseTokenSelector, "fit_online", refuse)


@pytest.mark.parametrize(
    ("param", "values", "kwargs", "error", "match"),
    [
        ("width", [4, 2], {}, ValueError, "values must be increasing"),
        ("width", [], {}, ValueError, "values is empty"),
        ("width", [0, 2], {}, ValueError, "width"),
        ("widht", [2, 4], {}, ValueError, "'widht' is neither a field"),
        ("seq_len", [4, 8], {"grid": {"seq_len": [4]}}, ValueError, "both searched and a name"),
        ("width", [2, 4], {"method": "golden"}, ValueError, "method must be one of"),
        ("width", [2], {"method": "geometric"}, ValueError, "two numbers"),
        ("width", [2, 4], {"method": "geometric"}, ValueError, "must be an int in the range"),
        ("width", (4, 2), {"method": "geometric"}, ValueError, "0 < low < high"),
        ("width", [2, 4], {"target": math.nan}, ValueError, "target must be a finite"),
        ("width", [2, 4], {"target": "0.9"}, TypeError, "target must be a number"),
        ("width", [2, 4], {"start": "floor"}, ValueError, "start must be"),
        ("width", [2, 4], {"n_iter": 0}, ValueError, "n_iter must be"),
        ("width", [2, 4], {"scoring": {"a": "r2"}}, TypeError, "one scorer"),
        ("width", [2, 4], {"stop_at_target": True, "n_train": 10}, ValueError, "stop_at_target"),
        ("n_selected", [2, 99], {}, ValueError, "n_selected=99"),
        (3, [2, 4], {}, TypeError, "param must be the name"),
    ],
)
def test_bad_searches_are_refused_before_any_fit(no_fit, param, values, kwargs, error, match):
    with pytest.raises(error, match=match):
        search_threshold(
            ATT,
            SparseTokenSelectionTask(8, 2, 2),
            param,
            values,
            **{"target": 0.9, "n_steps": 5, **kwargs},
        )


def test_search_plans_count_expected_fits(no_fit):
    plan = minimal_width(
        {"att": ATT, "fcn": FCN},
        SparseTokenSelectionTask(8, 2, 2),
        GRID,
        grid={"seq_len": [4, 8, 16]},
        seeds=3,
        n_steps=10,
        dry_run=True,
    )
    assert [w.fits for w in plan] == [9, 6, 6] * 2 and plan.steps == 420
