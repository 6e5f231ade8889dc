"""batch_seeds=True: a study's seeds trained as one batched model give the numbers of
one fit after another, up to float rounding (float64), for the package's estimators and a
user's task; what cannot train together falls back to the exact sequential fits."""

import numpy as np
import pytest
from user_tasks import PairMeanTask

from stsq_learn import (
    AttentionRegressor,
    FCNRegressor,
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.studies import length_curve, minimal_width, search_threshold, sweep

TASK = SparseTokenSelectionTask(8, 2, 2)
F64 = dict(dtype="float64", device="cpu")


def _close(a, b, col, tol=1e-9):
    x, y = np.asarray(a[col], dtype=float), np.asarray(b[col], dtype=float)
    assert x.shape == y.shape and np.allclose(x, y, rtol=0, atol=tol), (x, y)


@pytest.mark.parametrize(
    "models",
    [
        {"attention": SparseTokenSelector(**F64), "fcn": FCNSelector(**F64)},
        {"user": AttentionRegressor(PairMeanTask, width=8, **F64)},
    ],
    ids=["selection", "user-task"],
)
def test_a_batched_sweep_scores_as_one_fit_after_another(models):
    task = TASK if "attention" in models else PairMeanTask(6, 3)
    grid = {"width": [4, 16]}
    kw = dict(seeds=3, n_steps=60, n_test=300)
    one = sweep(models, task, grid, **kw)
    batched = sweep(models, task, grid, batch_seeds=True, **kw)
    assert batched.meta["batch_seeds"] is True and one.meta["batch_seeds"] is False
    assert list(batched["seed"]) == list(one["seed"]) == [0, 1, 2] * (2 * len(models))
    _close(one, batched, "score")
    assert list(batched["n_iter"]) == list(one["n_iter"])
    assert not any(batched["fit_failure"])
    # trained together: the batched run's seconds are shared equally by its seeds
    for label in models:
        for width in grid["width"]:
            secs = batched.where(model=label, width=width)["seconds"]
            assert len(set(secs)) == 1 and len(secs) == 3


def test_a_batched_sweep_on_rows_of_each_seed():
    model = FCNRegressor(PairMeanTask, width=16, max_iter=5, batch_size=50, **F64)
    kw = dict(seeds=[3, 7], n_train=200, n_test=200)
    one = sweep(model, PairMeanTask(6, 3), **kw)
    batched = sweep(model, PairMeanTask(6, 3), batch_seeds=True, **kw)
    _close(one, batched, "score")


def test_a_batched_length_curve_and_search_find_the_same_numbers():
    model = SparseTokenSelector(**F64)
    kw = dict(seeds=2, n_steps=60, n_test=300)
    a = length_curve(model.set_params(width=16), TASK, [8, 16], **kw)
    b = length_curve(model, TASK, [8, 16], batch_seeds=True, **kw)
    _close(a, b, "score")
    search = dict(target=0.6, grid={"seq_len": [4, 8]}, **kw)
    a = minimal_width(SparseTokenSelector(**F64), TASK, [2, 4, 8, 16], **search)
    b = minimal_width(SparseTokenSelector(**F64), TASK, [2, 4, 8, 16], batch_seeds=True, **search)
    assert list(a["value"]) == list(b["value"]) and b.meta["batch_seeds"] is True


def test_a_stopping_rule_fits_one_seed_after_another():
    # a stopping rule acts on one net: its fits run one after another, the numbers exact
    kw = dict(seeds=2, n_steps=60, n_test=300, target=0.5, stop_at_target=True)
    a = search_threshold(SparseTokenSelector(**F64), TASK, "width", [4, 16], **kw)
    b = search_threshold(SparseTokenSelector(**F64), TASK, "width", [4, 16], batch_seeds=True, **kw)
    assert list(a["value"]) == list(b["value"])
    assert list(a["n_iter"]) == list(b["n_iter"])


@pytest.mark.parametrize("study", [sweep, length_curve, search_threshold])
def test_batch_seeds_must_be_a_boolean(study):
    args = {
        sweep: (SparseTokenSelector(), TASK),
        length_curve: (SparseTokenSelector(), TASK, [8]),
        search_threshold: (SparseTokenSelector(), TASK, "width", [4, 8]),
    }[study]
    extra = {"target": 0.5} if study is search_threshold else {}
    with pytest.raises(TypeError, match="batch_seeds must be True or False, got 'yes'"):
        study(*args, batch_seeds="yes", seeds=1, n_steps=5, **extra)
