"""q-sparse averaging: the task, its data contract, the two sibling estimators and scoring."""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.base import clone
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV

from stsq_learn import (
    FCNAverager,
    LengthShiftScorer,
    SparseAveragingTask,
    SparseTokenAverager,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    averaging_accuracy,
    isotropic_floor,
    load_model,
    make_sparse_averaging,
    make_sparse_token_selection,
    save_model,
    shift_averaging,
    worst_position_error,
)
from stsq_learn.datasets import subset_means
from stsq_learn.nn import AttentionAverager, AttentionSelector


@pytest.fixture(scope="module")
def qsa():
    return make_sparse_averaging(200, 12, 3, 2, random_state=0)


@pytest.fixture(scope="module")
def fitted(qsa):
    return SparseTokenAverager(width=24, random_state=0).fit(*qsa)


# -- the task ----------------------------------------------------------------------------
def _check_rows(X, y, N, d, q):
    tokens, index = X[..., :d], X[..., d:]
    assert np.array_equal(index, np.round(index)) and index.min() >= 0 and index.max() < N
    index = index.astype(int)
    assert (np.diff(np.sort(index, -1), axis=-1) > 0).all()  # distinct
    np.testing.assert_allclose(subset_means(tokens, index), y, rtol=1e-6, atol=1e-6)


def test_generator_shapes_contract_and_seed():
    X, y = make_sparse_averaging(50, seq_len=10, n_features=3, n_selected=4, random_state=1)
    assert X.shape == (50, 10, 7) and y.shape == (50, 10, 3)
    _check_rows(X, y, 10, 3, 4)
    X2, _ = make_sparse_averaging(50, seq_len=10, n_features=3, n_selected=4, random_state=1)
    np.testing.assert_array_equal(X, X2)


@pytest.mark.parametrize("sampler", ["numpy", "torch"])
def test_subsets_are_uniform_and_independent_of_position(sampler):
    N, q, n = 5, 2, 6000
    task = SparseAveragingTask(N, 1, q)
    if sampler == "numpy":
        X, _ = task.sample(n, random_state=0)
    else:
        X, _ = task.sample_torch(n, generator=torch.Generator().manual_seed(0))
        X = X.numpy()
    subsets = list(itertools.combinations(range(N), q))
    for position in (0, N - 1):
        seen = [tuple(r) for r in X[:, position, 1:].astype(int)]
        counts = [seen.count(s) for s in subsets]
        assert stats.chisquare(counts).pvalue > 1e-3


def test_torch_sampler_contract_and_device_dtype():
    task = SparseAveragingTask(9, 2, 3)
    X, y = task.sample_torch(40, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert X.dtype == torch.float64 and X.shape == (40, 9, 5) and y.shape == (40, 9, 2)
    _check_rows(X.numpy(), y.numpy(), 9, 2, 3)
    assert task.trivial_mse == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((8, 2, 9), ValueError, "cannot exceed seq_len=8"),
        ((8, 2, (1, 2)), TypeError, "must be one int"),
        ((8, 0, 2), ValueError, "n_features must be an integer >= 1"),
        ((8, 2, 0), ValueError, "n_selected must be an integer >= 1"),
    ],
)
def test_bad_task_arguments(args, error, match):
    with pytest.raises(error, match=match):
        SparseAveragingTask(*args)


# -- the data contract -------------------------------------------------------------------
def _bad(X, where, value):
    X = X.copy()
    X[where] = value
    return X


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda X: _bad(X, (3, 4, 3), 12.0), r"X\[3, 4, 3\] = 12.0 is outside \[0, 12\)"),
        (lambda X: _bad(X, (0, 1, 4), -1.0), r"is outside \[0, 12\)"),
        (lambda X: _bad(X, (2, 0, 3), 1.5), r"X\[2, 0, 3\] = 1.5 is not an integer"),
        (lambda X: _bad(X, (5, 7, 4), X[5, 7, 3]), "position 7 of row 5 repeats an index"),
        (lambda X: _bad(X, (1, 1, 0), np.nan), r"NaN or infinity, e\.g\. X\[1, 1, 0\] = nan"),
        (lambda X: X[..., :3], "no channel is left for the subsets' indices"),
        (lambda X: np.concatenate([X] + [X[..., 3:]] * 6, axis=2), "n_selected=14 indices"),
        (lambda X: X[..., 0], "must be 3-D"),
    ],
)
def test_bad_subsets_are_refused_before_any_work(qsa, fitted, change, match):
    X, y = qsa
    before = fitted.key_query_
    model = clone(fitted)
    with pytest.raises(ValueError, match=match):
        model.fit(change(X), y)
    assert not hasattr(model, "net_")
    with pytest.raises(ValueError, match=match):
        fitted.predict(change(X))
    np.testing.assert_array_equal(fitted.key_query_, before)


@pytest.mark.parametrize(
    ("y_change", "match"),
    [
        (lambda y: y[:, :5], r"does not match X"),
        (lambda y: y[..., 0], "must be 3-D"),
        (lambda y: None, "y is required"),
    ],
)
def test_bad_targets_are_refused(qsa, y_change, match):
    X, y = qsa
    with pytest.raises(ValueError, match=match):
        SparseTokenAverager(width=4).fit(X, y_change(y))


def test_other_token_features_at_predict_are_refused(qsa, fitted):
    X, _ = qsa
    assert fitted.n_selected_ == 2
    with pytest.raises(ValueError, match=r"4 channels per position.*n_features=3 with subsets of"):
        fitted.predict(np.concatenate([X[..., :2], X[..., 3:]], axis=-1))


# -- the attention model -----------------------------------------------------------------
def test_each_query_is_a_sparse_token_selection():
    """Output i of the averager is the selector's output on the STS row of subset y_i."""
    torch.manual_seed(0)
    N, d, q, m = 7, 3, 2, 5
    X, _ = make_sparse_averaging(4, N, d, q, random_state=0)
    kwargs = dict(positional_encoding="fixed", seq_len=N, encoding_seed=3)
    averager, selector = AttentionAverager(d, m, **kwargs), AttentionSelector(d, m, **kwargs)
    with torch.no_grad():
        averager.key_query.normal_()
        selector.key_query.copy_(averager.key_query)
        out = averager(torch.as_tensor(X, dtype=torch.float32)).numpy()
        for i in range(N):
            mask = np.zeros((4, N, 1))
            np.put_along_axis(mask, X[:, i, d:, None].astype(int), 1.0, axis=1)
            rows = torch.as_tensor(np.concatenate([X[..., :d], mask], axis=2), dtype=torch.float32)
            np.testing.assert_allclose(out[:, i], selector(rows).numpy(), rtol=1e-5, atol=1e-6)


def test_fit_predict_score(qsa, fitted):
    X, y = qsa
    assert fitted.predict(X).shape == y.shape and fitted.predict(X).dtype == np.float64
    assert fitted.n_features_in_ == 3 and fitted.seq_len_ == 12
    assert fitted.solver_ == "sgd" and fitted.planned_steps_ >= 960
    assert fitted.score(X, y) > 0.97
    X_test, y_test = make_sparse_averaging(100, 12, 3, 2, random_state=5)
    # The per-query floor at q = 2 is about 0: the held-out error is near it.
    assert fitted.score(X_test, y_test) > 0.95


def test_auto_batch_asks_as_many_queries_as_the_selector():
    assert SparseTokenAverager()._auto_batch_size(64, online=False) == 4
    assert SparseTokenAverager()._auto_batch_size(64, online=True) == 4
    assert SparseTokenAverager()._auto_batch_size(7, online=False) == 29
    assert FCNAverager()._auto_batch_size(64, online=False) == 200


def test_score_is_r2_over_every_position(qsa, fitted):
    X, y = qsa
    pred = fitted.predict(X).reshape(-1, 3)
    flat = y.reshape(-1, 3)
    r2 = 1 - ((pred - flat) ** 2).sum(0) / ((flat - flat.mean(0)) ** 2).sum(0)
    assert fitted.score(X, y) == pytest.approx(r2.mean())
    w = np.r_[np.ones(100), np.zeros(100)]
    assert fitted.score(X, y, sample_weight=w) == pytest.approx(fitted.score(X[:100], y[:100]))


def test_fit_online_draws_the_averaging_task():
    task = SparseAveragingTask(10, 2, 2)
    model = SparseTokenAverager(width=16, random_state=0).fit_online(task, n_steps=300)
    X, y = task.sample(200, random_state=1)
    assert model.score(X, y) > 0.9 and len(model.loss_curve_) == 300
    with pytest.raises(TypeError, match="task must be a SparseAveragingTask"):
        model.fit_online(SparseTokenSelectionTask(10, 2, 2), n_steps=3)


def test_predict_depends_only_on_the_row(qsa, fitted):
    X, _ = qsa
    full = fitted.predict(X)
    order = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_allclose(fitted.predict(X[order]), full[order], atol=1e-6)
    np.testing.assert_allclose(fitted.predict(X[5:6])[0], full[5], atol=1e-6)


def test_zero_shot_transfer_from_sparse_token_selection():
    X, y = make_sparse_token_selection(2000, 16, 4, 3, random_state=0)
    selector = SparseTokenSelector(width=64, random_state=0).fit(X, y)
    X_avg, y_avg = make_sparse_averaging(300, 16, 4, 3, random_state=1)
    averager = SparseTokenAverager.from_selector(selector, 3)
    assert averager.get_params() == selector.get_params()
    np.testing.assert_array_equal(averager.key_query_, selector.key_query_)
    floor = isotropic_floor(16, 3, 64).relative_mse
    X_t, y_t = make_sparse_token_selection(2000, 16, 4, 3, random_state=2)
    sts_error = 1 - selector.score(X_t, y_t)
    qsa_error = 1 - averager.score(X_avg, y_avg)
    assert sts_error < 1.15 * floor and qsa_error < 1.15 * floor
    with pytest.raises(TypeError, match="takes a fitted SparseTokenSelector"):
        SparseTokenAverager.from_selector(averager, 3)


def test_persistence_round_trip(tmp_path, qsa, fitted):
    X, _ = qsa
    save_model(fitted, tmp_path / "m.stsq")
    loaded = load_model(tmp_path / "m.stsq")
    assert type(loaded) is SparseTokenAverager
    np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))
    fcn = FCNAverager(width=8, max_iter=3, random_state=0).fit(*qsa)
    save_model(fcn, tmp_path / "f.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "f.stsq").predict(X), fcn.predict(X))


# Sinusoidal encodings of width 24 are far from orthogonal at 12 positions: a lower bar.
@pytest.mark.parametrize(("pe", "bar"), [("fixed", 0.8), ("randomized", 0.8), ("sinusoidal", 0.4)])
def test_every_encoding_family_trains(qsa, pe, bar):
    X, y = qsa
    model = SparseTokenAverager(width=24, positional_encoding=pe, random_state=0).fit(X, y)
    assert model.score(X, y) > bar


# -- the fully-connected baseline --------------------------------------------------------
def test_fcn_reads_the_subsets_and_only_its_length(qsa):
    X, y = qsa
    model = FCNAverager(width=64, max_iter=100, random_state=0).fit(X, y)
    assert model.predict(X).shape == y.shape
    assert model.score(X, y) > 0.5
    X_long, _ = make_sparse_averaging(3, 13, 3, 2, random_state=0)
    with pytest.raises(ValueError, match="fitted on seq_len=12 and cannot predict at seq_len=13"):
        model.predict(X_long)


# -- length shift and accuracy -----------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 4),
    N=st.integers(1, 9),
    extra=st.integers(0, 9),
    d=st.integers(1, 3),
    data=st.data(),
)
def test_shift_averaging_keeps_every_target(n, N, extra, d, data):
    q = data.draw(st.integers(1, N))
    X, y = make_sparse_averaging(n, N, d, q, random_state=0)
    X0 = X.copy()
    X_long, y_long = shift_averaging(X, y, N + extra, random_state=1)
    assert X_long.shape == (n, N + extra, d + q) and y_long.shape == (n, N + extra, d)
    _check_rows(X_long, y_long, N + extra, d, q)
    np.testing.assert_array_equal(X, X0)
    for r in range(n):  # the original targets appear, in order, among the new ones
        kept = [i for i in range(N + extra) if (y_long[r, i] == y[r]).all(-1).any()]
        assert len(kept) >= N


def test_shift_averaging_refuses_to_shorten(qsa):
    with pytest.raises(ValueError, match="can only be lengthened: seq_len=6 < N=12"):
        shift_averaging(*qsa, 6)


def test_length_shift_scorer_and_grid_search_on_averaging(qsa):
    X, y = qsa
    search = GridSearchCV(
        SparseTokenAverager(random_state=0, max_iter=2),
        {"width": [2, 24]},
        cv=2,
        scoring={
            "r2": LengthShiftScorer(factor=1),
            "x2": LengthShiftScorer(factor=2, random_state=0),
            "acc": make_scorer(averaging_accuracy, epsilon=0.5),
        },
        refit="r2",
    )
    search.fit(X, y)
    res = search.cv_results_
    assert search.best_params_ == {"width": 24}
    assert (np.diff(res["mean_test_x2"]) > 0).all() and (np.diff(res["mean_test_acc"]) > 0).all()


def test_stochastic_encodings_generalize_to_longer_rows():
    X, y = make_sparse_averaging(600, 8, 4, 2, random_state=0)
    X_t, y_t = make_sparse_averaging(200, 8, 4, 2, random_state=1)
    x4 = LengthShiftScorer(factor=4, random_state=0)
    scores = {
        pe: x4(SparseTokenAverager(32, positional_encoding=pe, random_state=0).fit(X, y), X_t, y_t)
        for pe in ("stochastic", "fixed")
    }
    assert scores["stochastic"] > 0.8 and scores["stochastic"] > scores["fixed"] + 0.3


def test_accuracy_and_worst_position_error():
    y = np.zeros((2, 3, 2))
    pred = y.copy()
    pred[0, 1] = [0.3, 0.4]  # error 0.5
    pred[1, 2] = [2.0, 0.0]  # error 2
    assert averaging_accuracy(y, pred, epsilon=0.5) == pytest.approx(5 / 6)
    assert averaging_accuracy(y, pred, epsilon=0.4) == pytest.approx(4 / 6)
    assert averaging_accuracy(y, pred, epsilon=0.5, per="row") == pytest.approx(1 / 2)
    assert worst_position_error(y, pred) == pytest.approx((0.5 + 2.0) / 2)
    # Sparse token selection targets: one position per row.
    assert averaging_accuracy(y[:, 0], pred[:, 1], epsilon=0.6) == 1.0
    with pytest.raises(ValueError, match="epsilon must be a number > 0"):
        averaging_accuracy(y, pred, epsilon=0)
    with pytest.raises(ValueError, match="per must be 'position' or 'row'"):
        averaging_accuracy(y, pred, epsilon=1, per="rows")
    with pytest.raises(ValueError, match="as many values"):
        worst_position_error(y, pred[:1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("cls", [SparseTokenAverager, FCNAverager])
def test_cuda_fit_online_and_predict_agree_with_cpu(qsa, cls):
    X, y = qsa
    model = cls(width=16, max_iter=3, device="cuda", random_state=0).fit(X, y)
    assert model.device_.type == "cuda" and isinstance(model.predict(X), np.ndarray)
    online = cls(width=16, device="cuda", random_state=0)
    online.fit_online(SparseAveragingTask(12, 3, 2), n_steps=20)  # drawn on the GPU
    cpu = load_model_on_cpu(model)
    np.testing.assert_allclose(cpu.predict(X), model.predict(X), rtol=1e-4, atol=1e-5)


def load_model_on_cpu(model):
    import pickle

    restored = pickle.loads(pickle.dumps(model))
    return restored.set_fitted_state(model.get_fitted_state(), device="cpu")
