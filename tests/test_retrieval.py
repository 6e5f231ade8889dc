"""q-sparse token retrieval: the task, its contract and shift, the estimators and their heads."""

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from stsq_learn import (
    FCNRetriever,
    LengthShiftScorer,
    SparseRetrievalTask,
    SparseTokenRetriever,
    load_model,
    make_sparse_retrieval,
    relative_mse,
    save_model,
)
from stsq_learn.tasks.retrieval.estimators import relative_mse_per_role


@pytest.fixture(scope="module")
def data():
    return make_sparse_retrieval(300, seq_len=8, n_features=3, n_selected=2, random_state=0)


def test_rows_name_each_role_once_and_the_target_is_the_named_tokens(data):
    X, y = data
    roles = X[..., -1]
    for j in (1, 2):
        assert ((roles == j).sum(axis=1) == 1).all()
    t1, t2 = (roles == 1).argmax(axis=1), (roles == 2).argmax(axis=1)
    rows = np.arange(len(X))
    np.testing.assert_array_equal(y, np.concatenate([X[rows, t1, :3], X[rows, t2, :3]], axis=1))


@pytest.mark.parametrize("sampler", ["numpy", "torch"])
def test_named_positions_are_a_uniform_ordered_tuple(sampler):
    task = SparseRetrievalTask(5, 1, 2)
    if sampler == "numpy":
        X, _ = task.sample(20_000, random_state=0)
    else:
        X = task.sample_torch(20_000, generator=torch.Generator().manual_seed(0))[0].numpy()
    roles = X[..., -1]
    pairs = (roles == 1).argmax(1) * 5 + (roles == 2).argmax(1)
    counts = np.bincount(pairs, minlength=25).reshape(5, 5)
    assert (np.diag(counts) == 0).all()
    off = counts[~np.eye(5, dtype=bool)]
    assert stats.chisquare(off).pvalue > 1e-3


def test_the_torch_sampler_keeps_the_target_contract():
    X, y = SparseRetrievalTask(7, 2, 3).sample_torch(50, generator=torch.Generator())
    task, _, _ = SparseRetrievalTask.from_data(X.numpy(), y.numpy())
    assert task == SparseRetrievalTask(7, 2, 3)


def _with(X, where, value):
    X = X.copy()
    X[where] = value
    return X


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda X: _with(X, (3, 0, -1), 1.5), r"integers in \[0, n_selected=2\].*X\[3, 0, -1\]"),
        (lambda X: _with(X, (3, 0, -1), 5.0), r"X\[3, 0, -1\] = 5.0"),
        (lambda X: np.where(X[..., -1:] == 2, 1.0, X), "names role 1 2 times"),
        (lambda X: _with(X, (1, 1, 0), np.inf), "NaN or infinity"),
        (lambda X: X[..., -1:], r"1 channel\(s\)"),
        (lambda X: X[0], "must be 3-D"),
    ],
)
def test_bad_rows_are_refused_before_any_work(data, change, match):
    X, y = data
    X_bad = change(X)
    model = SparseTokenRetriever(width=4, n_heads=2, max_iter=2)
    with pytest.raises(ValueError, match=match):
        model.fit(X_bad, y)
    assert not hasattr(model, "net_")


def test_bad_targets_are_refused(data):
    X, y = data
    with pytest.raises(ValueError, match=r"\(n_samples, n_selected \* n_features\)"):
        FCNRetriever(max_iter=2).fit(X, y[:, :4])
    with pytest.raises(ValueError, match="NaN or infinity"):
        FCNRetriever(max_iter=2).fit(X, np.full_like(y, np.nan))


def test_the_shift_moves_rows_and_keeps_the_named_tokens_in_order(data):
    X, y = data
    task, X, y = SparseRetrievalTask.from_data(X, y)
    for length in (2, 5, 8, 20):
        X_s, y_s = task.shift(X, y, length, random_state=0)
        assert X_s.shape == (len(X), length, 4) and y_s is y
        SparseRetrievalTask.from_data(X_s, y)  # still valid rows for these targets
        roles = X_s[..., -1]
        rows = np.arange(len(X))
        got = np.concatenate([X_s[rows, (roles == j).argmax(1), :3] for j in (1, 2)], axis=1)
        np.testing.assert_array_equal(got, y)
    with pytest.raises(ValueError, match=r"seq_len=1 cannot hold the named tokens"):
        task.shift(X, y, 1)


def test_fit_predict_shapes_and_fitted_state(data):
    X, y = data
    model = SparseTokenRetriever(width=8, n_heads=3, max_iter=2, random_state=0).fit(X, y)
    assert model.predict(X).shape == y.shape and model.n_selected_ == 2
    assert model.key_queries_.shape == (3, 3 + 8, 2 * 8)
    assert model.key_query_.shape == (3, 3 + 8, 2 * 8) and model.readout_.shape == (6, 9)
    assert model.task_ == SparseRetrievalTask(8, 3, 2)
    one = SparseTokenRetriever(width=8, max_iter=2, random_state=0).fit(X, y)
    assert one.key_query_.shape == (11, 16) and one.readout_.shape == (6, 3)
    assert FCNRetriever(width=8, max_iter=2).fit(X, y).predict(X).shape == y.shape


@pytest.mark.parametrize("encoding", ["stochastic", "fixed", "randomized", "sinusoidal"])
def test_every_family_predicts_at_longer_lengths_and_saves(tmp_path, data, encoding):
    X, y = data
    model = SparseTokenRetriever(
        width=8, n_heads=2, positional_encoding=encoding, max_iter=2, random_state=0
    ).fit(X, y)
    score = LengthShiftScorer(factor=2, random_state=0)(model, X, y)
    assert np.isfinite(score)
    save_model(model, tmp_path / "r.stsq")
    loaded = load_model(tmp_path / "r.stsq")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_the_per_role_error_names_where_the_heads_went():
    y = np.arange(12.0).reshape(3, 4) + 1
    pred = y.copy()
    pred[:, 2:] = 0.0
    np.testing.assert_allclose(relative_mse_per_role(y, pred, n_selected=2), [0.0, 1.0])
    with pytest.raises(ValueError, match="n_selected=3"):
        relative_mse_per_role(y, pred, n_selected=3)


_Y = np.arange(12.0).reshape(3, 4) + 1


@pytest.mark.parametrize(
    ("n_selected", "error", "match"),
    [
        (0, ValueError, "n_selected must be an integer >= 1, got 0"),  # was ZeroDivisionError
        (-2, ValueError, "n_selected must be an integer >= 1, got -2"),
        (True, TypeError, "n_selected must be an integer, got True of type bool"),
        (np.bool_(True), TypeError, "n_selected must be an integer, got .*True_? of type bool"),
        (2.0, TypeError, r"n_selected must be an integer, got 2\.0 of type float"),
        (float("nan"), TypeError, "n_selected must be an integer, got nan of type float"),
        ("2", TypeError, "n_selected must be an integer, got '2' of type str"),
        (None, TypeError, "n_selected must be an integer, got None of type NoneType"),
        (3, ValueError, r"n_selected=3, and y_pred as many values; got \(3, 4\)"),
    ],
)
def test_the_per_role_error_checks_n_selected(n_selected, error, match):
    with pytest.raises(error, match=match):
        relative_mse_per_role(_Y, _Y, n_selected=n_selected)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "error", "match"),
    [
        (np.where(_Y == 6, np.nan, _Y), _Y, ValueError, r"y_true contains NaN .* y_true\[1, 1\]"),
        (_Y, np.full((3, 4), np.inf), ValueError, r"y_pred contains NaN or infinity"),
        (np.zeros((0, 4)), np.zeros((0, 4)), ValueError, r"non-empty array .* \(0, 4\)"),
        (_Y[0], _Y[0], ValueError, r"y_true must have shape \(n_samples, n_selected"),
        (_Y > 3, _Y, TypeError, "y_true has boolean dtype"),
        (_Y, _Y.astype(str), TypeError, "y_pred must hold real numbers"),
        (_Y, _Y[:2], ValueError, r"got \(3, 4\) and \(2, 4\)"),
        (
            np.c_[_Y[:, :2], np.zeros((3, 2))],
            _Y,
            ValueError,
            r"relative MSE of role 2 is undefined: every target of that role "
            r"\(y_true\[:, 2:4\]\) is zero",
        ),
    ],
)
def test_the_per_role_error_refuses_bad_arrays(y_true, y_pred, error, match):
    with pytest.raises(error, match=match):
        relative_mse_per_role(y_true, y_pred, n_selected=2)


@pytest.mark.parametrize("n_selected", [1, 2, 4, np.int64(2)])
def test_the_per_role_error_of_each_role_is_its_relative_mse(n_selected):
    rng = np.random.RandomState(0)
    y, pred = rng.standard_normal((2, 5, 8))
    q, d = int(n_selected), 8 // int(n_selected)
    blocks = [
        relative_mse(y[:, j * d : (j + 1) * d], pred[:, j * d : (j + 1) * d]) for j in range(q)
    ]
    np.testing.assert_allclose(relative_mse_per_role(y, pred, n_selected=n_selected), blocks)


@pytest.mark.slow
def test_q_heads_retrieve_q_tokens_and_fewer_heads_cannot():
    X, y = make_sparse_retrieval(1000, seq_len=6, n_features=2, n_selected=2, random_state=0)
    X_t, y_t = make_sparse_retrieval(1000, seq_len=6, n_features=2, n_selected=2, random_state=1)
    errors = {}
    for heads in (1, 2):
        model = SparseTokenRetriever(width=12, n_heads=heads, random_state=0).fit(X, y)
        errors[heads] = 1 - model.score(X_t, y_t)
    assert errors[2] < 0.05 and errors[1] > 0.8 * 0.5
    per_role = relative_mse_per_role(y_t, model.predict(X_t), n_selected=2)
    assert (per_role < 0.05).all()


@pytest.mark.slow
def test_grid_search_over_heads_picks_at_least_q():
    X, y = make_sparse_retrieval(800, seq_len=6, n_features=2, n_selected=3, random_state=0)
    base = SparseTokenRetriever(width=12, batch_size=100, random_state=0)
    search = GridSearchCV(base, {"n_heads": [1, 2, 3]}, cv=2).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["n_heads"] == 3 and scores[0] < scores[1] < scores[2]


def test_a_model_with_several_heads_is_one_with_its_heads_averaged_at_the_start(data):
    """Several heads on a one-average task: W = 0 and the readout the heads' mean."""
    from stsq_learn import SparseTokenSelector, make_sparse_token_selection

    X, y = make_sparse_token_selection(50, 6, 3, 2, random_state=0)
    one = SparseTokenSelector(width=4, max_iter=1, learning_rate_init=1e-12, random_state=0)
    two = clone(one).set_params(n_heads=2)
    np.testing.assert_allclose(one.fit(X, y).predict(X), two.fit(X, y).predict(X), atol=1e-6)
    np.testing.assert_allclose(two.readout_, np.hstack([np.eye(3), np.eye(3)]) / 2, atol=1e-6)
