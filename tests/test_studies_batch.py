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
    assert x.shape == y.shape and np.allclose(x, y, rtol=0, atol=tol, equal_nan=True), (x, y)


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


# -- stopping and measuring each member: the numbers of each seed alone ---------------------
# The separation's models (its tiny and quick presets): plain GD on the attention model,
# Adam on the FCN, each fit stopped once it meets the target on its held-out rows.
PLAIN_GD = dict(
    solver="sgd",
    learning_rate="constant",
    learning_rate_init=3.0,
    token_block_rate=1.0,
    batch_size=256,
)
FCN = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024)


def _search_models(dtype):
    return {
        "transformer": SparseTokenSelector(dtype=dtype, device="cpu", **PLAIN_GD),
        "fcn": FCNSelector(dtype=dtype, device="cpu", **FCN),
    }


def _same_searches(batched, alone, trials_b, trials_a, tol):
    for col in ("value", "bound"):
        np.testing.assert_array_equal(batched[col], alone[col])
    for col in ("reached", "skipped", "n_fits", "n_iter", "seed", "model"):
        assert list(batched[col]) == list(alone[col]), col
    assert len(trials_b) == len(trials_a)
    # every fit of every seed: the same candidate, steps and score (to rounding)
    key = ("model", "seed", "param_seq_len", "param_width")
    order_b = sorted(range(len(trials_b)), key=lambda i: [trials_b[k][i] for k in key])
    order_a = sorted(range(len(trials_a)), key=lambda i: [trials_a[k][i] for k in key])
    for col in (*key, "n_iter"):
        assert [trials_b[col][i] for i in order_b] == [trials_a[col][i] for i in order_a], col
    scores_b = np.array([trials_b["score"][i] for i in order_b])
    scores_a = np.array([trials_a["score"][i] for i in order_a])
    np.testing.assert_allclose(scores_b, scores_a, rtol=0, atol=tol)


def _each_seed_alone(study, seeds, **kwargs):
    from stsq_learn.studies import StudyTable

    parts = [study(seeds=[s], **kwargs) for s in seeds]
    tables = StudyTable.concat([p[0] for p in parts]), StudyTable.concat([p[1] for p in parts])
    order = lambda t: sorted(  # noqa: E731 - the batched table's row order
        range(len(t)), key=lambda i: (list(kwargs["estimators"]).index(t["model"][i]), i)
    )
    return [t.take(order(t)) if hasattr(t, "take") else t for t in tables]


@pytest.mark.parametrize(
    "dtype, models, tol",
    [("float64", ("transformer", "fcn"), 1e-9), ("float32", ("transformer",), 1e-6)],
)
def test_a_batched_stopping_search_finds_each_seeds_own_value(dtype, models, tol):
    estimators = {k: v for k, v in _search_models(dtype).items() if k in models}
    kwargs = dict(
        estimators=estimators,
        task=TASK,
        widths=[2, 4, 8, 16],
        target=0.5,
        grid={"seq_len": [4, 8]},
        stop_at_target=True,
        n_steps=60,
        n_test=200,
        return_trials=True,
    )
    seeds = [0, 1, 2]
    batched, trials = minimal_width(seeds=seeds, batch_seeds=True, **kwargs)
    alone = [minimal_width(seeds=[s], **kwargs) for s in seeds]
    for s, (table, own_trials) in zip(seeds, alone):
        _same_searches(batched.where(seed=s), table, trials.where(seed=s), own_trials, tol)
    assert any(v < 60 for v in trials["n_iter"])  # some fits stopped at the target


def test_a_batched_training_curve_measures_every_member_as_its_own_fit():
    from stsq_learn.nn import positional_alignment
    from stsq_learn.studies import training_curve

    def gamma(est):
        return positional_alignment(est.key_query_, est.n_features_in_)["gamma"]

    def r2(est):
        return est.score(*TASK.sample(100, random_state=5))

    est = SparseTokenSelector(width=8, **F64)
    kw = dict(measures={"gamma": gamma, "r2": r2}, every=10, seeds=3, n_steps=40)
    one = training_curve(est, TASK, **kw)
    batched = training_curve(est, TASK, batch_seeds=True, **kw)
    assert batched.meta["batch_seeds"] is True
    assert list(batched["step"]) == list(one["step"]) == [0, 10, 20, 30, 40] * 3
    for col in ("gamma", "r2", "loss"):
        _close(one, batched, col)


@pytest.mark.slow
def test_the_quick_separation_search_finds_each_seeds_own_width_batched():
    # The quick separation preset's first curve (plain GD at q = 2: its widths, lengths,
    # steps, target and held-out rows) with the FCN beside it, in float32 as the experiment
    # runs it: each seed's widths, steps and scores those of its search alone, to the bit.
    models = {k: v for k, v in _search_models("float32").items()}
    kwargs = dict(
        estimators=models,
        task=SparseTokenSelectionTask(4, 2, 2),
        widths=[2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128],
        target=0.9,
        grid={"seq_len": [4, 8, 16]},
        stop_at_target=True,
        n_steps=400,
        n_test=1000,
        return_trials=True,
    )
    seeds = [0, 1, 2]
    batched, trials = minimal_width(seeds=seeds, batch_seeds=True, **kwargs)
    for s in seeds:
        table, own_trials = minimal_width(seeds=[s], **kwargs)
        _same_searches(batched.where(seed=s), table, trials.where(seed=s), own_trials, 0.0)
