import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV

from stsq_learn import (
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    make_sparse_token_selection,
)
from stsq_learn.nn import positional_alignment

TASK = SparseTokenSelectionTask(16, 8, 3)


def _at_length(T, n=1000, seed=2):
    return make_sparse_token_selection(n, T, 8, 3, random_state=seed)


@pytest.fixture(scope="module")
def spe_model(small_data):
    X, y, _, _ = small_data
    return SparseTokenSelector(width=64, random_state=0).fit(X, y)


def test_spe_learns_and_length_generalizes(spe_model, small_data):
    """Acceptance: defaults reach R^2 >= 0.8 at T=16 (the m=64 floor allows ~0.88)."""
    _, _, X_test, y_test = small_data
    assert spe_model.score(X_test, y_test) >= 0.8
    assert spe_model.score(*_at_length(8)) >= 0.8
    assert spe_model.score(*_at_length(32)) >= 0.7
    assert spe_model.score(*_at_length(64)) >= 0.5


def test_spe_aligns_with_identity(spe_model):
    W = spe_model.key_query_
    assert W.shape == (8 + 64, 64)
    align = positional_alignment(W, 8)
    assert align["cos"] > 0.9 and align["gamma"] > 1.0
    assert align["token_norm"] < 0.2 * np.linalg.norm(W[8:])


def test_fit_online_reaches_acceptance(small_data):
    _, _, X_test, y_test = small_data
    model = SparseTokenSelector(width=64, random_state=0).fit_online(TASK, n_steps=1000)
    assert model.score(X_test, y_test) >= 0.82
    assert len(model.loss_curve_) == model.n_iter_ == 1000
    assert model.t_ == 1000 * 256
    assert np.mean(model.loss_curve_[-50:]) < 0.3 * np.mean(model.loss_curve_[:10])


def test_fixed_encodings_fit_but_do_not_extrapolate(spe_model, small_data):
    X, y, X_test, y_test = small_data
    fixed = SparseTokenSelector(width=64, positional_encoding="fixed", random_state=0).fit(X, y)
    assert fixed.score(X_test, y_test) >= 0.8
    X2, y2 = _at_length(32)
    assert fixed.score(X2, y2) < spe_model.score(X2, y2) - 0.3


def test_n_pe_samples_improves_prediction(spe_model, small_data):
    _, _, X_test, y_test = small_data
    single = spe_model.score(X_test, y_test)
    averaged = spe_model.set_params(n_pe_samples=8).score(X_test, y_test)
    spe_model.set_params(n_pe_samples=1)
    assert averaged > single + 0.03


def test_same_seed_same_predictions(small_data):
    X, y, X_test, _ = small_data
    a = SparseTokenSelector(width=16, max_iter=3, random_state=5).fit(X[:500], y[:500])
    b = SparseTokenSelector(width=16, max_iter=3, random_state=5).fit(X[:500], y[:500])
    c = SparseTokenSelector(width=16, max_iter=3, random_state=6).fit(X[:500], y[:500])
    np.testing.assert_array_equal(a.predict(X_test), b.predict(X_test))
    np.testing.assert_array_equal(a.predict(X_test), a.predict(X_test))
    assert not np.array_equal(a.predict(X_test), c.predict(X_test))
    np.testing.assert_array_equal(a.key_query_, b.key_query_)


def test_fcn_fits_and_refuses_other_lengths(small_data):
    X, y, _, _ = small_data
    fcn = FCNSelector(width=64, max_iter=30, random_state=0).fit(X[:500], y[:500])
    assert fcn.score(X[:500], y[:500]) > 0.5  # it fits its training data
    assert fcn.n_features_in_ == 8 and fcn.seq_len_ == 16
    with pytest.raises(ValueError, match=r"seq_len=16 .* seq_len=32"):
        fcn.predict(_at_length(32, n=10)[0])


def test_fcn_fit_online_learns_a_small_task():
    task = SparseTokenSelectionTask(4, 2, 2)
    fcn = FCNSelector(width=128, random_state=0).fit_online(task, n_steps=600)
    assert fcn.score(*task.sample(500, random_state=1)) > 0.8


def test_stochastic_predict_reproducible_and_changes_with_seed(spe_model, small_data):
    _, _, X_test, _ = small_data
    np.testing.assert_array_equal(spe_model.predict(X_test), spe_model.predict(X_test))


def test_grid_search_over_width(small_data):
    X, y, _, _ = small_data
    search = GridSearchCV(
        SparseTokenSelector(max_iter=20, random_state=0), {"width": [2, 32]}, cv=2
    ).fit(X[:600], y[:600])
    assert search.best_params_ == {"width": 32}
    assert search.best_estimator_.key_query_.shape == (40, 32)


def test_sgd_solver_trains(small_data):
    X, y, X_test, y_test = small_data
    model = SparseTokenSelector(
        width=32, solver="sgd", learning_rate_init=1.0, max_iter=15, random_state=0
    ).fit(X, y)
    assert model.loss_curve_[-1] < 0.7 * model.loss_curve_[0]
    assert model.score(X_test, y_test) > 0.3


def test_one_dimensional_tokens_accept_1d_targets():
    X, y = make_sparse_token_selection(300, 6, 1, 2, random_state=0)
    model = SparseTokenSelector(width=16, max_iter=5, random_state=0).fit(X, y.ravel())
    assert model.predict(X).shape == (300,)
    assert model.fit(X, y).predict(X).shape == (300, 1)


def test_float64_and_integer_input(tiny_data):
    X, y = tiny_data
    a = SparseTokenSelector(width=8, max_iter=2, random_state=0).fit(X, y)
    b = SparseTokenSelector(width=8, max_iter=2, random_state=0).fit(X.astype(np.float32), y)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-6)
    model64 = SparseTokenSelector(width=8, max_iter=2, dtype="float64", random_state=0).fit(X, y)
    assert model64.net_.module_.key_query.dtype == torch.float64
    Xi = np.round(X).astype(np.int64)
    assert a.predict(Xi).shape == y.shape


def test_verbose_prints_epoch_table(tiny_data, capsys):
    SparseTokenSelector(width=8, max_iter=2, verbose=1, random_state=0).fit(*tiny_data)
    out = capsys.readouterr().out
    assert "train_loss" in out and "epoch" in out


def test_cuda_without_cuda_is_a_clear_error(tiny_data):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        SparseTokenSelector(device="cuda").fit(*tiny_data)
    with pytest.raises(ValueError, match="device='tpu'"):
        SparseTokenSelector(device="tpu").fit(*tiny_data)


def test_auto_device_resolves_in_fit(tiny_data):
    model = SparseTokenSelector(width=8, max_iter=1, random_state=0)
    assert model.device == "auto"
    model.fit(*tiny_data)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert model.device_.type == expected and model.device == "auto"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_returns_numpy(small_data):
    X, y, X_test, y_test = small_data
    model = SparseTokenSelector(width=64, device="cuda", random_state=0).fit(X, y)
    assert isinstance(model.predict(X_test), np.ndarray)
    assert model.score(X_test, y_test) >= 0.8
    online = SparseTokenSelector(width=64, device="cuda", random_state=0)
    assert online.fit_online(TASK, n_steps=1000).score(X_test, y_test) >= 0.8


def test_fit_under_metadata_routing(tiny_data):
    """The owned skorch net's fit parameters never meet the user's routing."""
    import sklearn
    from sklearn.model_selection import cross_validate

    X, y = tiny_data
    with sklearn.config_context(enable_metadata_routing=True):
        scores = cross_validate(
            SparseTokenSelector(width=8, max_iter=3, random_state=0), X, y, cv=2
        )["test_score"]
    assert np.isfinite(scores).all()


@pytest.mark.parametrize("make", [SparseTokenSelector, FCNSelector])
def test_predict_reads_fitted_state_not_hyperparameters(make, tiny_data):
    """Changing ``width`` after fit does not change (or break) predict and score."""
    X, y = tiny_data
    model = make(width=8, max_iter=2, random_state=0).fit(X, y)
    before, score = model.predict(X), model.score(X, y)
    model.set_params(width="not an int")
    np.testing.assert_array_equal(model.predict(X), before)
    assert model.score(X, y) == score
