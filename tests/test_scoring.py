"""Length-shift transform, scorer and scoring dict (the user guide's length-shift section)."""

import pickle
import warnings
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import NotFittedError
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from stsq_learn import (
    FCNSelector,
    LengthShiftScorer,
    SparseTokenAverager,
    SparseTokenSelector,
    averaging_accuracy,
    length_shift_scoring,
    make_sparse_averaging,
    make_sparse_token_selection,
    relative_mse,
    shift_length,
    worst_position_error,
)
from stsq_learn.tasks import SparseAveragingTask, SparseTokenSelectionTask, subset_means


class OracleSelector(RegressorMixin, BaseEstimator):
    """Reads the indicator and returns the exact mean of the selected tokens."""

    def fit(self, X, y):
        self.n_features_in_ = X.shape[-1] - 1
        return self

    def predict(self, X):
        mask = X[..., -1]
        return np.einsum("nt,ntd->nd", mask, X[..., :-1]) / mask.sum(axis=1, keepdims=True)


def _selected(X):
    """Selected tokens of every row, in order, as an (n, q, c) array (fixed q)."""
    n = X.shape[0]
    return X[X[..., -1] == 1.0].reshape(n, -1, X.shape[-1])


def _is_subsequence(short, long):
    """True when the rows of ``short`` appear in ``long`` in the same order."""
    j = 0
    for row in long:
        if j < len(short) and np.array_equal(row, short[j]):
            j += 1
    return j == len(short)


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(60, 10, 3, 3, random_state=0)


# -- shift_length -------------------------------------------------------------


@pytest.mark.parametrize("new_len", [3, 5, 10, 11, 40])
def test_shift_keeps_selected_tokens_and_order(data, new_len):
    X, _ = data
    X0 = X.copy()
    Xs = shift_length(X, new_len, random_state=0)
    assert Xs.shape == (60, new_len, 4) and Xs.dtype == X.dtype
    np.testing.assert_array_equal(X, X0)  # input untouched
    # The selected tokens are bit-for-bit the same, in the same order.
    np.testing.assert_array_equal(_selected(Xs), _selected(X))
    assert set(np.unique(Xs[..., -1])) <= {0.0, 1.0}
    for i in range(0, 60, 7):
        if new_len >= 10:  # every original token survives, in order
            assert _is_subsequence(X[i], Xs[i])
        else:  # the survivors are a subsequence of the original row
            assert _is_subsequence(Xs[i], X[i])


@pytest.mark.parametrize("new_len", [5, 40])
def test_shift_moves_the_selected_positions(data, new_len):
    X, _ = data
    Xs = shift_length(X, new_len, random_state=0)
    pos = np.argwhere(X[..., -1] == 1.0)[:, 1].reshape(60, 3)
    pos_s = np.argwhere(Xs[..., -1] == 1.0)[:, 1].reshape(60, 3)
    assert (pos_s != pos).any(axis=1).mean() > 0.8
    if new_len > 10:  # spread over the longer row, not just kept at the front
        assert pos_s.max() > 30


def test_shift_same_length_is_a_copy(data):
    X, _ = data
    Xs = shift_length(X, 10, random_state=0)
    np.testing.assert_array_equal(Xs, X)
    assert not np.shares_memory(Xs, X)


def test_inserted_tokens_are_standard_gaussian():
    X, _ = make_sparse_token_selection(2000, 4, 2, 1, random_state=0)
    Xs = shift_length(X, 12, random_state=1)
    originals = {tuple(r) for r in X.reshape(-1, 3)}
    rows = Xs.reshape(-1, 3)
    new = np.array([r for r in rows if tuple(r) not in originals])
    assert new.shape == (2000 * 8, 3)
    assert (new[:, -1] == 0.0).all()
    assert stats.kstest(new[:, :-1].ravel(), "norm").pvalue > 0.01
    assert abs(np.corrcoef(new[:, 0], new[:, 1])[0, 1]) < 0.05


def test_insertion_positions_are_uniform():
    # T=2 -> T'=4: the two original tokens take each of the 6 slot pairs equally often.
    n = 6000
    X = np.zeros((n, 2, 2))
    X[:, 0, 0], X[:, 1, 0] = 5.0, 7.0
    X[:, 0, 1] = 1.0
    Xs = shift_length(X, 4, random_state=0)
    first = np.argmax(Xs[..., 0] == 5.0, axis=1)
    second = np.argmax(Xs[..., 0] == 7.0, axis=1)
    assert (first < second).all()
    counts = {
        pair: np.mean((first == pair[0]) & (second == pair[1]))
        for pair in combinations(range(4), 2)
    }
    assert all(abs(c - 1 / 6) < 0.025 for c in counts.values()), counts


def test_deletion_is_uniform_over_unselected_tokens():
    # T=4 (token t has value t), position 0 selected; keep 2 of 4 -> delete 2 of the 3 others.
    n = 6000
    X = np.zeros((n, 4, 2))
    X[..., 0] = np.arange(4)
    X[:, 0, 1] = 1.0
    Xs = shift_length(X, 2, random_state=0)
    assert (Xs[:, 0, 0] == 0).all() and (Xs[:, 0, 1] == 1).all()
    kept = np.bincount(Xs[:, 1, 0].astype(int), minlength=4) / n
    np.testing.assert_allclose(kept[1:], 1 / 3, atol=0.025)


def test_shift_is_deterministic_for_an_int_seed(data):
    X, _ = data
    a, b = shift_length(X, 25, random_state=3), shift_length(X, 25, random_state=3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, shift_length(X, 25, random_state=4))
    np.testing.assert_array_equal(
        shift_length(X, 4, random_state=3), shift_length(X, 4, random_state=3)
    )


def test_shift_keeps_float32_and_handles_varying_q():
    X, _ = make_sparse_token_selection(50, 8, 2, (1, 4), random_state=0)
    X32 = X.astype(np.float32)
    for new_len in (4, 8, 20):
        Xs = shift_length(X32, new_len, random_state=0)
        assert Xs.dtype == np.float32 and Xs.shape == (50, new_len, 3)
        np.testing.assert_array_equal(Xs[..., -1].sum(1), X32[..., -1].sum(1))
        np.testing.assert_array_equal(Xs[Xs[..., -1] == 1], X32[X32[..., -1] == 1])


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    T=st.integers(1, 8),
    d=st.integers(1, 3),
    data=st.data(),
)
def test_shift_shapes_property(n, T, d, data):
    q = data.draw(st.integers(1, T), label="q")
    new_len = data.draw(st.integers(q, 20), label="new_len")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    X, _ = make_sparse_token_selection(n, T, d, q, random_state=seed)
    X0 = X.copy()
    Xs = shift_length(X, new_len, random_state=seed)
    np.testing.assert_array_equal(X, X0)
    assert Xs.shape == (n, new_len, d + 1)
    assert (Xs[..., -1].sum(axis=1) == q).all()
    np.testing.assert_array_equal(_selected(Xs), _selected(X))
    if new_len < T:
        # exactly T - new_len unselected tokens gone, the rest a subsequence
        assert all(_is_subsequence(Xs[i], X[i]) for i in range(n))
    else:
        assert all(_is_subsequence(X[i], Xs[i]) for i in range(n))


def test_shift_rejects_a_length_below_q(data):
    X, _ = data
    with pytest.raises(ValueError, match=r"seq_len=2 cannot hold .* selects 3 tokens"):
        shift_length(X, 2)
    with pytest.raises(ValueError, match="seq_len must be an integer >= 1, got 0"):
        shift_length(X, 0)
    with pytest.raises(TypeError, match="seq_len must be an integer"):
        shift_length(X, 2.5)
    with pytest.raises(ValueError, match="must be 3-D"):
        shift_length(X[0], 20)


# -- LengthShiftScorer ----------------------------------------------------------


@pytest.mark.parametrize(
    "scorer_kw",
    [{"factor": 1}, {"factor": 0.5}, {"factor": 2}, {"factor": 4}, {"seq_len": 3}, {"seq_len": 64}],
)
def test_oracle_scores_perfectly_under_every_shift(data, scorer_kw):
    X, y = data
    oracle = OracleSelector().fit(X, y)
    r2 = LengthShiftScorer(**scorer_kw, random_state=0)(oracle, X, y)
    mse = LengthShiftScorer(**scorer_kw, metric="neg_mean_squared_error", random_state=0)
    rel = LengthShiftScorer(**scorer_kw, metric="neg_relative_mse", random_state=0)
    assert r2 == pytest.approx(1.0, abs=1e-12)
    assert mse(oracle, X, y) == pytest.approx(0.0, abs=1e-24)
    assert rel(oracle, X, y) == pytest.approx(0.0, abs=1e-24)


class ZeroPredictor(OracleSelector):
    def predict(self, X):
        return np.zeros((X.shape[0], X.shape[-1] - 1))


def test_metrics_values_for_the_trivial_predictor(data):
    X, y = data
    zero = ZeroPredictor().fit(X, y)
    rel = LengthShiftScorer(factor=2, metric="neg_relative_mse", random_state=0)(zero, X, y)
    mse = LengthShiftScorer(factor=2, metric="neg_mean_squared_error", random_state=0)(zero, X, y)
    assert rel == pytest.approx(-1.0)
    assert mse == pytest.approx(-np.mean(y**2))
    assert LengthShiftScorer(factor=2)(zero, X, y) < 0


@pytest.fixture(scope="module")
def fitted_selector(data):
    X, y = data
    return SparseTokenSelector(width=8, max_iter=10, random_state=0).fit(X, y)


def test_factor_one_equals_estimator_score(data, fitted_selector):
    X, y = data
    assert LengthShiftScorer(factor=1)(fitted_selector, X, y) == fitted_selector.score(X, y)
    assert LengthShiftScorer(10)(fitted_selector, X, y) == fitted_selector.score(X, y)


def test_scorer_is_deterministic_and_does_not_mutate(data, fitted_selector):
    X, y = data
    X0, y0 = X.copy(), y.copy()
    scorer = LengthShiftScorer(factor=3, random_state=0)
    a, b = scorer(fitted_selector, X, y), scorer(fitted_selector, X, y)
    assert a == b and np.isfinite(a)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    # the predict-time encodings are seeded by the model; the shift by the scorer
    other = LengthShiftScorer(factor=3, random_state=1)(fitted_selector, X, y)
    assert other != a


def test_target_length():
    assert LengthShiftScorer(factor=2).target_length(16) == 32
    assert LengthShiftScorer(factor=0.5).target_length(5) == 3  # halves round up
    assert LengthShiftScorer(48).target_length(16) == 48


def test_init_only_stores_and_errors_come_at_call_time(data):
    X, y = data
    oracle = OracleSelector().fit(X, y)
    bad = LengthShiftScorer(seq_len=5, factor=2)
    assert bad.get_params() == {
        "seq_len": 5,
        "factor": 2,
        "metric": "r2",
        "random_state": None,
        "task": None,
    }
    unknown = LengthShiftScorer(factor=2, task="no such task")  # stored, checked when called
    assert unknown.task == "no such task"
    with pytest.raises(ValueError, match="task='no such task' is not a registered task"):
        unknown(oracle, X, y)
    with pytest.raises(TypeError, match="task must be a task name, a Task subclass or a Task"):
        LengthShiftScorer(factor=2, task=3)(oracle, X, y)
    with pytest.raises(ValueError, match=r"exactly one of seq_len .* got seq_len=5 and factor=2"):
        bad(oracle, X, y)
    with pytest.raises(ValueError, match="got seq_len=None and factor=None"):
        LengthShiftScorer()(oracle, X, y)
    for factor in (0, -2, float("nan"), float("inf")):
        with pytest.raises(
            ValueError, match=f"factor must be a positive finite number, got {factor}"
        ):
            LengthShiftScorer(factor=factor)(oracle, X, y)
    for factor in ("2", True):
        with pytest.raises(TypeError, match="factor must be a positive real number"):
            LengthShiftScorer(factor=factor)(oracle, X, y)
    with pytest.raises(ValueError, match=r"factor=0.01 moves rows of length T=10 to length 0"):
        LengthShiftScorer(factor=0.01)(oracle, X, y)
    with pytest.raises(ValueError, match=r"seq_len=2 cannot hold .* selects 3 tokens"):
        LengthShiftScorer(2)(oracle, X, y)
    assert LengthShiftScorer(factor=0.25)(oracle, X, y) == pytest.approx(1.0)  # T' = 3 = q
    with pytest.raises(ValueError, match=r"seq_len=2 cannot hold"):
        LengthShiftScorer(factor=0.2)(oracle, X, y)  # T' = 2 < q = 3
    with pytest.raises(ValueError, match=r"metric must be one of .* got 'accuracy'"):
        LengthShiftScorer(factor=2, metric="accuracy")(oracle, X, y)
    with pytest.raises(ValueError, match=r"y must have shape .* \(60, 3\)"):
        LengthShiftScorer(factor=2)(oracle, X, y[:, :2])


def test_check_scoring_accepts_it_and_pickle_round_trip(data, fitted_selector):
    X, y = data
    scorer = LengthShiftScorer(factor=2, metric="neg_relative_mse", random_state=0)
    checked = check_scoring(fitted_selector, scoring=scorer)
    assert checked(fitted_selector, X, y) == scorer(fitted_selector, X, y)
    clone_ = pickle.loads(pickle.dumps(scorer))
    assert repr(clone_) == repr(scorer)
    assert clone_(fitted_selector, X, y) == scorer(fitted_selector, X, y)


# -- model selection --------------------------------------------------------------


def test_grid_search_reports_shift_scores_with_n_jobs(data):
    X, y = data
    scoring = {"r2": "r2", "x2": LengthShiftScorer(factor=2, random_state=0)}
    search = GridSearchCV(
        SparseTokenSelector(max_iter=5, random_state=0),
        {"width": [2, 8]},
        scoring=scoring,
        refit="r2",
        cv=2,
        n_jobs=2,
    ).fit(X, y)
    res = search.cv_results_
    assert np.isfinite(res["mean_test_x2"]).all() and np.isfinite(res["mean_test_r2"]).all()
    # the parallel scores are the serial scorer's
    best = search.best_estimator_
    assert np.isfinite(scoring["x2"](best, X, y))
    X_tr, y_tr = X[30:], y[30:]
    est = SparseTokenSelector(width=2, max_iter=5, random_state=0).fit(X_tr, y_tr)
    assert res["split0_test_x2"][0] == pytest.approx(scoring["x2"](est, X[:30], y[:30]))


def test_cross_validate_and_length_shift_scoring(data):
    X, y = data
    scoring = length_shift_scoring((1, 0.5, 2), seq_lens=[32], random_state=0)
    assert list(scoring) == ["r2", "x0.5", "x2", "T32"]
    res = cross_validate(
        SparseTokenSelector(width=8, max_iter=5, random_state=0), X, y, cv=2, scoring=scoring
    )
    for key in scoring:
        assert np.isfinite(res[f"test_{key}"]).all()


def test_pipeline_parameter_routing(data):
    X, y = data
    pipe = Pipeline(
        [
            ("id", FunctionTransformer(validate=False)),
            ("sts", SparseTokenSelector(max_iter=5, random_state=0)),
        ]
    )
    search = GridSearchCV(
        pipe,
        {"sts__width": [2, 8]},
        scoring=length_shift_scoring((1, 4), random_state=0),
        refit="r2",
        cv=2,
    ).fit(X, y)
    assert search.best_params_["sts__width"] in (2, 8)
    assert np.isfinite(search.cv_results_["mean_test_x4"]).all()


def test_length_shift_scoring_metric_and_errors():
    scoring = length_shift_scoring(metric="neg_relative_mse", random_state=3)
    assert list(scoring) == ["neg_relative_mse", "x2", "x4", "x8"]
    assert all(s.metric == "neg_relative_mse" and s.random_state == 3 for s in scoring.values())
    assert scoring["x4"].factor == 4.0 and scoring["neg_relative_mse"].factor == 1.0
    with pytest.raises(ValueError, match="twice"):
        length_shift_scoring((2, 2.0))
    with pytest.raises(ValueError, match="twice"):
        length_shift_scoring((1,), seq_lens=(8, 8))
    with pytest.raises(ValueError, match="at least one"):
        length_shift_scoring(())
    with pytest.raises(ValueError, match="metric must be one of"):
        length_shift_scoring(metric="r3")
    with pytest.raises(ValueError, match="positive finite number, got -1"):
        length_shift_scoring((1, -1))


# -- the FCN follows error_score -----------------------------------------------------


def test_fcn_at_another_length_is_nan_with_a_warning(data):
    X, y = data
    scoring = {"r2": "r2", "x2": LengthShiftScorer(factor=2, random_state=0)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = cross_validate(
            FCNSelector(width=8, max_iter=5, random_state=0), X, y, cv=2, scoring=scoring
        )
    assert np.isnan(res["test_x2"]).all()
    assert np.isfinite(res["test_r2"]).all()
    messages = " ".join(str(w.message) for w in caught)
    assert "Scoring failed" in messages
    assert "fitted on seq_len=10 and cannot predict at seq_len=20" in messages


def test_fcn_single_shift_scorer_nan_by_default(data):
    X, y = data
    with pytest.warns(UserWarning, match="Scoring failed"):
        res = cross_validate(
            FCNSelector(width=8, max_iter=5, random_state=0),
            X,
            y,
            cv=2,
            scoring=LengthShiftScorer(factor=4, random_state=0),
        )
    assert np.isnan(res["test_score"]).all()


def test_fcn_shift_raises_with_error_score_raise(data):
    X, y = data
    with pytest.raises(ValueError, match="fitted on seq_len=10 and cannot predict at seq_len=40"):
        GridSearchCV(
            FCNSelector(max_iter=5, random_state=0),
            {"width": [4]},
            scoring={"r2": "r2", "x4": LengthShiftScorer(factor=4)},
            refit="r2",
            cv=2,
            error_score="raise",
        ).fit(X, y)


def test_fcn_at_its_own_length_scores_fine(data):
    X, y = data
    fcn = FCNSelector(width=8, max_iter=5, random_state=0).fit(X, y)
    assert LengthShiftScorer(factor=1)(fcn, X, y) == fcn.score(X, y)


# -- acceptance ------------------------------------------------------------------------


@pytest.mark.slow
def test_acceptance_grid_search_picks_width_64_and_generalizes_x4():
    X, y = make_sparse_token_selection(1500, 16, 6, 3, random_state=0)
    search = GridSearchCV(
        SparseTokenSelector(random_state=0),
        {"width": [4, 64]},
        scoring={"r2": "r2", "x4": LengthShiftScorer(factor=4, random_state=0)},
        refit="r2",
        cv=3,
        n_jobs=2,
    ).fit(X, y)
    assert search.best_params_ == {"width": 64}
    x4 = search.cv_results_["mean_test_x4"][search.best_index_]
    assert np.isfinite(x4) and x4 > 0.4


def test_random_state_instance_is_consumed_and_tensors_accepted(data):
    import torch

    X, _ = data
    rs = np.random.RandomState(0)
    a, b = shift_length(X, 20, random_state=rs), shift_length(X, 20, random_state=rs)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, shift_length(X, 20, random_state=np.random.RandomState(0)))
    np.testing.assert_array_equal(
        shift_length(torch.from_numpy(X), 20, random_state=0), shift_length(X, 20, random_state=0)
    )


def test_relative_mse_is_close_to_one_minus_r2(data, fitted_selector):
    X, y = data
    r2 = LengthShiftScorer(factor=2, random_state=0)(fitted_selector, X, y)
    rel = LengthShiftScorer(factor=2, metric="neg_relative_mse", random_state=0)
    assert rel(fitted_selector, X, y) == pytest.approx(r2 - 1, abs=0.1)


# -- which task the scorer shifts by (issue 32, item 1) --------------------------------


class AveragingOracle(RegressorMixin, BaseEstimator):
    """A model of another package: the exact q-sparse averages, and no ``task_``."""

    def fit(self, X, y):
        self.n_features_out_ = np.shape(y)[-1]
        return self

    def predict(self, X):
        d = self.n_features_out_
        return subset_means(X[..., :d], X[..., d:].astype(np.int64))


@pytest.fixture(scope="module")
def averaging():
    return make_sparse_averaging(120, 8, 3, 2, random_state=0)


@pytest.fixture(scope="module")
def one_selected():
    """Sparse token selection with q = 1: valid retrieval data (one role) as well."""
    return make_sparse_token_selection(40, 6, 3, 1, random_state=0)


def _averager():
    return SparseTokenAverager(width=8, max_iter=3, random_state=0)


def _passthrough_pipeline(model):
    return Pipeline([("id", FunctionTransformer(validate=False)), ("model", model)])


@pytest.mark.parametrize(
    "make_search",
    [
        lambda: GridSearchCV(_averager(), {"n_heads": [1, 2]}, cv=2),
        lambda: RandomizedSearchCV(
            _averager(), {"n_heads": [1, 2]}, n_iter=2, cv=2, random_state=0
        ),
        lambda: GridSearchCV(_passthrough_pipeline(_averager()), {"model__n_heads": [1]}, cv=2),
    ],
    ids=["grid", "randomized", "grid-of-pipeline"],
)
def test_a_search_is_scored_with_its_best_models_task(averaging, make_search):
    # The reported case: the search has no task_, and was taken for sparse token
    # selection ("The selection indicator X[..., -1] must be exactly 0.0 or 1.0").
    Xa, ya = averaging
    search = make_search().fit(Xa, ya)
    score = LengthShiftScorer(factor=2, random_state=0)(search, Xa, ya)
    assert np.isfinite(score)
    assert score == LengthShiftScorer(factor=2, random_state=0)(search.best_estimator_, Xa, ya)


def test_the_reported_grid_search_on_averaging_scores(averaging):
    Xa, ya = averaging
    search = GridSearchCV(SparseTokenAverager(width=8, max_iter=3), {"n_heads": [1, 2]}, cv=2).fit(
        Xa, ya
    )
    assert np.isfinite(LengthShiftScorer(factor=2)(search, Xa, ya))


def test_a_pipeline_ending_in_an_averager_is_scored_with_its_task(averaging):
    Xa, ya = averaging
    pipe = _passthrough_pipeline(_averager()).fit(Xa, ya)
    model = pipe[-1]
    for scorer in (
        LengthShiftScorer(factor=2, random_state=0),
        LengthShiftScorer(factor=2, random_state=0, task="averaging"),
    ):
        assert scorer(pipe, Xa, ya) == scorer(model, Xa, ya)
    assert LengthShiftScorer(factor=1)(pipe, Xa, ya) == model.score(Xa, ya)


@pytest.mark.parametrize(
    ("wrap", "unwrap"),
    [
        (lambda m: TransformedTargetRegressor(regressor=m), lambda w: w.regressor_),
        (
            lambda m: _passthrough_pipeline(TransformedTargetRegressor(regressor=m)),
            lambda w: w[-1].regressor_,
        ),
        (
            lambda m: GridSearchCV(
                _passthrough_pipeline(TransformedTargetRegressor(regressor=m)),
                {"model__regressor__width": [4]},
                cv=2,
            ),
            lambda w: w.best_estimator_[-1].regressor_,
        ),
    ],
    ids=["ttr", "pipeline-of-ttr", "search-of-pipeline-of-ttr"],
)
def test_nested_wrappers_expose_the_task_through_every_level(one_selected, wrap, unwrap):
    # On q = 1 data selection and retrieval both accept (X, y): only the fitted
    # model's task_, found through the wrappers, says which one applies.
    X, y = one_selected
    wrapped = wrap(SparseTokenSelector(width=4, max_iter=3, random_state=0)).fit(X, y)
    inner = unwrap(wrapped)
    assert isinstance(inner, SparseTokenSelector) and not hasattr(wrapped, "task_")
    scorer = LengthShiftScorer(factor=2, random_state=0)
    score = scorer(wrapped, X, y)
    assert np.isfinite(score) and score == scorer(inner, X, y)


def test_a_model_without_task_on_data_one_task_accepts(data, averaging):
    X, y = data  # q = 3 > 1: only sparse token selection accepts it
    oracle = OracleSelector().fit(X, y)
    assert LengthShiftScorer(factor=2, random_state=0)(oracle, X, y) == pytest.approx(1.0)
    Xa, ya = averaging  # only q-sparse averaging accepts it (its 3-D y): as in 0.4
    avg = AveragingOracle().fit(Xa, ya)
    for factor in (1, 2, 3):
        score = LengthShiftScorer(factor=factor, random_state=0)(avg, Xa, ya)
        assert score == pytest.approx(1.0, abs=1e-12)


def test_a_model_without_task_on_data_several_tasks_accept_asks_for_task(one_selected):
    X, y = one_selected
    oracle = OracleSelector().fit(X, y)
    with pytest.raises(
        ValueError,
        match=r"OracleSelector carries no fitted task .* several tasks: 'selection', "
        r"'retrieval'\. Pass the task with task=, e.g. task='selection'",
    ):
        LengthShiftScorer(factor=2)(oracle, X, y)
    # d = 1: single-location regression (y read as 1-D, two features) accepts it too.
    X1, y1 = make_sparse_token_selection(30, 5, 1, 1, random_state=0)
    with pytest.raises(ValueError, match="'selection', 'retrieval', 'single_location'"):
        LengthShiftScorer(factor=2)(OracleSelector().fit(X1, y1), X1, y1)
    # Named, the task decides: by name, class or object, alike.
    for task in ("selection", SparseTokenSelectionTask, SparseTokenSelectionTask(6, 3, 1)):
        scorer = LengthShiftScorer(factor=2, random_state=0, task=task)
        assert scorer(oracle, X, y) == pytest.approx(1.0)


def test_a_model_without_task_on_data_no_task_accepts(data):
    X, y = data
    oracle = OracleSelector().fit(X, y)
    with pytest.raises(ValueError) as info:
        LengthShiftScorer(factor=2)(oracle, X, y[:, :2])
    message = str(info.value)
    assert "no registered task accepts (X, y) under its contract" in message
    for name in ("'selection': ", "'averaging': ", "'retrieval': ", "'single_location': "):
        assert name in message
    assert "y must have shape (n_samples, n_features) = (60, 3)" in message
    assert "Pass the task with task=" in message
    # An explicit task reports its own contract's error only.
    with pytest.raises(ValueError, match=r"^y must have shape .* \(60, 3\)"):
        LengthShiftScorer(factor=2, task="selection")(oracle, X, y[:, :2])


def test_an_explicit_task_must_agree_with_the_fitted_one(averaging):
    Xa, ya = averaging
    search = GridSearchCV(_averager(), {"n_heads": [1]}, cv=2).fit(Xa, ya)
    same = LengthShiftScorer(factor=2, random_state=0, task=SparseAveragingTask)
    assert same(search, Xa, ya) == LengthShiftScorer(factor=2, random_state=0)(search, Xa, ya)
    for model in (search, search.best_estimator_):
        with pytest.raises(
            ValueError,
            match=r"task='selection' \(SparseTokenSelectionTask\) conflicts with the task the "
            r"model was fitted on, SparseAveragingTask .* pass task=None, or task='averaging'",
        ):
            LengthShiftScorer(factor=2, task="selection")(model, Xa, ya)


@pytest.mark.parametrize(
    "unfitted",
    [
        lambda: SparseTokenAverager(width=8, max_iter=3),
        lambda: GridSearchCV(SparseTokenAverager(width=8, max_iter=3), {"n_heads": [1, 2]}),
        lambda: RandomizedSearchCV(SparseTokenAverager(), {"n_heads": [1, 2]}, n_iter=1),
        lambda: _passthrough_pipeline(SparseTokenAverager()),
        lambda: TransformedTargetRegressor(regressor=SparseTokenSelector()),
        lambda: AveragingOracle(),
    ],
    ids=["averager", "grid", "randomized", "pipeline", "ttr", "user-model"],
)
def test_an_unfitted_estimator_is_not_fitted_error_first(averaging, unfitted):
    Xa, ya = averaging
    with pytest.raises(NotFittedError, match="is not fitted yet"):
        LengthShiftScorer(factor=2)(unfitted(), Xa, ya)
    # before the scorer's own parameters and the data are looked at
    with pytest.raises(NotFittedError):
        LengthShiftScorer(factor=-1, metric="accuracy", task="nope")(unfitted(), Xa, ya[:, :1])


def test_cross_validate_scores_wrapped_and_foreign_models(averaging, one_selected):
    Xa, ya = averaging
    shift = {"shift": LengthShiftScorer(factor=2, random_state=0)}
    res = cross_validate(
        GridSearchCV(_averager(), {"n_heads": [1, 2]}, cv=2), Xa, ya, cv=2, scoring=shift
    )
    assert np.isfinite(res["test_shift"]).all()
    res = cross_validate(_passthrough_pipeline(_averager()), Xa, ya, cv=2, scoring=shift)
    assert np.isfinite(res["test_shift"]).all()
    res = cross_validate(AveragingOracle(), Xa, ya, cv=2, scoring=shift)
    np.testing.assert_allclose(res["test_shift"], 1.0)
    # Several tasks accept q = 1 selection data: the error says to pass task=...
    X, y = one_selected
    with pytest.raises(ValueError, match="several tasks: 'selection', 'retrieval'"):
        cross_validate(OracleSelector(), X, y, cv=2, scoring=shift, error_score="raise")
    # ... which length_shift_scoring hands to every scorer.
    scoring = length_shift_scoring((1, 2), seq_lens=[12], random_state=0, task="selection")
    assert {s.task for s in scoring.values()} == {"selection"}
    res = cross_validate(OracleSelector(), X, y, cv=2, scoring=scoring)
    for key in ("r2", "x2", "T12"):
        np.testing.assert_allclose(res[f"test_{key}"], 1.0)


@pytest.mark.parametrize(
    ("task", "error", "match"),
    [
        ("nope", ValueError, "task='nope' is not a registered task"),
        (3, TypeError, "task must be a task name, a Task subclass or a Task object, got 3"),
        (SparseTokenSelector, TypeError, "task must be a task name"),
    ],
)
def test_length_shift_scoring_checks_task_when_called(task, error, match):
    with pytest.raises(error, match=match):
        length_shift_scoring((1, 2), task=task)


@pytest.mark.parametrize(
    "task", [None, "averaging", SparseAveragingTask, SparseAveragingTask(8, 3, 2)]
)
def test_pickle_and_clone_keep_the_task(averaging, task):
    Xa, ya = averaging
    model = AveragingOracle().fit(Xa, ya)
    scorer = LengthShiftScorer(factor=2, metric="neg_relative_mse", random_state=0, task=task)
    for copy in (pickle.loads(pickle.dumps(scorer)), clone(scorer)):
        assert copy.task == task and repr(copy) == repr(scorer)
        assert copy(model, Xa, ya) == scorer(model, Xa, ya) == pytest.approx(0.0, abs=1e-24)


# -- the metrics' guards (issue 32, item 7) -----------------------------------------------

_Y2 = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, -1.0]])
_Y3 = np.arange(12.0).reshape(2, 3, 2) + 1


@pytest.mark.parametrize(
    ("epsilon", "error", "match"),
    [
        (True, TypeError, "epsilon must be a real number, got True of type bool"),
        (np.bool_(False), TypeError, r"epsilon must be a real number, got .*False_? of type bool"),
        ("0.5", TypeError, "epsilon must be a real number, got '0.5' of type str"),
        (None, TypeError, "epsilon must be a real number, got None of type NoneType"),
        (0, ValueError, "epsilon must be a number > 0 and finite, got 0"),
        (-0.5, ValueError, r"epsilon must be a number > 0 and finite, got -0\.5"),
        (float("nan"), ValueError, "epsilon must be a number > 0 and finite, got nan"),
        (float("inf"), ValueError, "epsilon must be a number > 0 and finite, got inf"),
    ],
)
def test_averaging_accuracy_checks_epsilon(epsilon, error, match):
    with pytest.raises(error, match=match):
        averaging_accuracy(_Y3, _Y3, epsilon=epsilon)


@pytest.mark.parametrize("epsilon", [1, 0.5, np.float32(0.5), np.int64(2)])
def test_averaging_accuracy_takes_any_positive_real_epsilon(epsilon):
    assert averaging_accuracy(_Y3, _Y3 + 0.1, epsilon=epsilon) == 1.0


@pytest.mark.parametrize(
    ("per", "error", "match"),
    [
        (np.array(["row", "row"]), TypeError, "per must be the string 'position' or 'row'"),
        (None, TypeError, "per must be the string 'position' or 'row', got None"),
        ("rows", ValueError, "per must be 'position' or 'row', got 'rows'"),
    ],
)
def test_averaging_accuracy_checks_per(per, error, match):
    with pytest.raises(error, match=match):
        averaging_accuracy(_Y3, _Y3, epsilon=1, per=per)


_NAN3 = np.where(_Y3 == 5, np.nan, _Y3)


@pytest.mark.parametrize("metric", ["accuracy", "worst"])
@pytest.mark.parametrize(
    ("y_true", "y_pred", "error", "match"),
    [
        (_NAN3, _Y3, ValueError, r"y_true contains NaN or infinity, e.g. y_true\[0, 2, 0\] = nan"),
        (_Y3, _NAN3, ValueError, r"y_pred contains NaN or infinity, e.g. y_pred\[0, 2, 0\]"),
        (_Y3, np.full(_Y3.shape, np.inf), ValueError, "y_pred contains NaN or infinity"),
        (np.zeros((0, 3, 2)), np.zeros((0, 3, 2)), ValueError, r"non-empty .* shape \(0, 3, 2\)"),
        (np.zeros((2, 0, 2)), np.zeros((2, 0, 2)), ValueError, r"non-empty .* shape \(2, 0, 2\)"),
        (_Y3 > 2, _Y3, TypeError, "y_true has boolean dtype; a metric takes real numbers"),
        (_Y3, _Y3.astype(str), TypeError, "y_pred must hold real numbers, got an array of dtype"),
        (_Y3, _Y3[:1], ValueError, "as many values"),
    ],
)
def test_position_metrics_refuse_bad_arrays(metric, y_true, y_pred, error, match):
    with pytest.raises(error, match=match):
        if metric == "accuracy":
            averaging_accuracy(y_true, y_pred, epsilon=1)
        else:
            worst_position_error(y_true, y_pred)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sample_weight": [1, -1, 1]}, ValueError, r"must be >= 0; sample_weight\[1\] = -1\.0"),
        ({"sample_weight": [1, np.nan, 1]}, ValueError, r"sample_weight contains NaN .*\[1\]"),
        ({"sample_weight": [1, np.inf, 1]}, ValueError, "sample_weight contains NaN or infinity"),
        ({"sample_weight": [1, 1]}, ValueError, r"sample_weight must have shape \(3,\).* \(2,\)"),
        ({"sample_weight": [[1, 1, 1]]}, ValueError, r"must have shape \(3,\).* \(1, 3\)"),
        ({"sample_weight": [True, False, True]}, TypeError, "sample_weight has boolean dtype"),
        ({"sample_weight": ["1", "1", "1"]}, TypeError, "sample_weight must hold real numbers"),
        ({"sample_weight": [0, 0, 0]}, ValueError, "sample_weight is 0 on every row whose"),
        ({"y_true": 3.0}, ValueError, r"y_true must be a non-empty array .* got shape \(\)"),
        ({"y_true": [], "y_pred": []}, ValueError, r"non-empty array .* got shape \(0,\)"),
        ({"y_true": np.where(_Y2 == 2, np.nan, _Y2)}, ValueError, r"y_true\[1, 1\] = nan"),
        ({"y_pred": np.full(6, np.inf)}, ValueError, r"y_pred contains NaN .* y_pred\[0\] = inf"),
        ({"y_pred": _Y2 > 0}, TypeError, "y_pred has boolean dtype"),
        ({"y_true": [["a", "b"]]}, TypeError, "y_true must hold real numbers"),
        ({"y_pred": [1.0, 2.0]}, ValueError, "y_pred has 2 values"),
        ({"y_true": np.zeros((3, 2))}, ValueError, "every target in y_true is zero"),
    ],
)
def test_relative_mse_refuses_bad_input(kwargs, error, match):
    args = {"y_true": _Y2, "y_pred": _Y2, **kwargs}
    weight = {"sample_weight": args.pop("sample_weight")} if "sample_weight" in args else {}
    with pytest.raises(error, match=match):
        relative_mse(args["y_true"], args["y_pred"], **weight)


def test_relative_mse_values_are_unchanged_by_the_checks():
    pred = np.zeros_like(_Y2)
    assert relative_mse(_Y2, pred) == 1.0
    assert relative_mse(_Y2.astype(np.float32), pred.astype(np.int64)) == 1.0
    assert relative_mse(_Y2, _Y2 * 0.5, sample_weight=[1, 0, 2]) == pytest.approx(
        0.25 * (1 + 2 * 10) / (1 + 2 * 10)
    )
    assert relative_mse([1.0, 2.0], [1.0, 0.0]) == pytest.approx(4 / 5)
