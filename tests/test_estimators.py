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
# 0.3's optimiser (Adam at a constant 0.01), where a test's numbers describe it
ADAM = {"solver": "adam", "learning_rate_init": 0.01, "learning_rate": "constant"}


def _at_length(T, n=1000, seed=2):
    return make_sparse_token_selection(n, T, 8, 3, random_state=seed)


@pytest.fixture(scope="module")
def spe_model(small_data):
    X, y, _, _ = small_data
    return SparseTokenSelector(width=64, random_state=0).fit(X, y)


@pytest.mark.slow
def test_spe_learns_and_length_generalizes(spe_model, small_data):
    """Acceptance: defaults reach R^2 >= 0.8 at T=16 (the m=64 floor allows ~0.88)."""
    _, _, X_test, y_test = small_data
    assert spe_model.score(X_test, y_test) >= 0.8
    assert spe_model.score(*_at_length(8)) >= 0.8
    assert spe_model.score(*_at_length(32)) >= 0.7
    assert spe_model.score(*_at_length(64)) >= 0.5


@pytest.mark.slow
def test_spe_aligns_with_identity(spe_model):
    W = spe_model.key_query_
    assert W.shape == (8 + 64, 64)
    align = positional_alignment(W, 8)
    assert align["cos"] > 0.9 and align["gamma"] > 1.0
    assert align["token_norm"] < 0.2 * np.linalg.norm(W[8:])


@pytest.mark.slow
def test_fit_online_reaches_acceptance(small_data):
    _, _, X_test, y_test = small_data
    model = SparseTokenSelector(width=64, random_state=0).fit_online(TASK, n_steps=1000)
    assert model.score(X_test, y_test) >= 0.82
    assert len(model.loss_curve_) == model.n_iter_ == 1000
    assert model.t_ == 1000 * 256
    assert np.mean(model.loss_curve_[-50:]) < 0.3 * np.mean(model.loss_curve_[:10])


@pytest.mark.slow
def test_fixed_encodings_fit_but_do_not_extrapolate(spe_model, small_data):
    X, y, X_test, y_test = small_data
    fixed = SparseTokenSelector(width=64, positional_encoding="fixed", random_state=0).fit(X, y)
    assert fixed.score(X_test, y_test) >= 0.8
    X2, y2 = _at_length(32)
    assert fixed.score(X2, y2) < spe_model.score(X2, y2) - 0.3


@pytest.mark.slow
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


@pytest.mark.slow
def test_fcn_fit_online_learns_a_small_task():
    task = SparseTokenSelectionTask(4, 2, 2)
    fcn = FCNSelector(width=128, random_state=0).fit_online(task, n_steps=600)
    assert fcn.score(*task.sample(500, random_state=1)) > 0.8


@pytest.fixture(scope="module")
def short_spe_model(small_data):
    """A model trained a few epochs: W is no longer 0, so encodings change predictions."""
    X, y, _, _ = small_data
    return SparseTokenSelector(width=16, max_iter=3, random_state=0).fit(X[:500], y[:500])


def test_stochastic_predict_reproducible_and_changes_with_seed(short_spe_model, small_data):
    _, _, X_test, _ = small_data
    model = short_spe_model
    first = model.predict(X_test)
    np.testing.assert_array_equal(model.predict(X_test), first)  # the same draws
    # The same weights with another predict seed: other encoding draws, other predictions.
    state = model.get_fitted_state()
    state["fitted"]["predict_seed"] += 1
    other = SparseTokenSelector(**model.get_params()).set_fitted_state(state)
    np.testing.assert_array_equal(other.key_query_, model.key_query_)
    assert not np.allclose(other.predict(X_test), first)


@pytest.mark.slow
def test_grid_search_over_width(small_data):
    X, y, _, _ = small_data
    search = GridSearchCV(
        SparseTokenSelector(max_iter=20, random_state=0), {"width": [2, 32]}, cv=2
    ).fit(X[:600], y[:600])
    assert search.best_params_ == {"width": 32}
    assert search.best_estimator_.key_query_.shape == (40, 32)


@pytest.mark.slow
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


# -- pe_sampling: the marginal sampler of stochastic encodings -----------------------------
@pytest.mark.slow
def test_marginal_is_the_default_and_both_samplers_predict_alike(spe_model):
    """One fitted model, 20000 rows, one draw each: the same R^2 under both samplers."""
    assert SparseTokenSelector().pe_sampling == "marginal"
    X, y = make_sparse_token_selection(20000, 16, 8, 3, random_state=7)
    scores = {}
    for sampler in ("full", "marginal"):
        spe_model.set_params(pe_sampling=sampler)
        scores[sampler] = spe_model.score(X, y)
        again = spe_model.predict(X[:50])  # reproducible under each sampler
        np.testing.assert_array_equal(spe_model.predict(X[:50]), again)
    spe_model.set_params(pe_sampling="marginal")
    assert abs(scores["full"] - scores["marginal"]) < 0.004, scores


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["full", "marginal"])
def test_both_samplers_train_to_the_same_accuracy(sampler, small_data):
    _, _, X_test, y_test = small_data
    model = SparseTokenSelector(width=64, pe_sampling=sampler, random_state=0, **ADAM)
    model.fit_online(TASK, n_steps=600)
    assert model.score(X_test, y_test) == pytest.approx(0.86, abs=0.025)
    align = positional_alignment(model.key_query_, 8)
    assert align["cos"] > 0.85


@pytest.mark.parametrize(
    "params",
    [
        {"dtype": "float64"},
        {"learn_token_block": False},
        {"n_pe_samples_fit": 2, "n_pe_samples": 3},
        {"width": 1},
        {"width": 2},
    ],
    ids=["float64", "frozen-block", "averaged-draws", "width-1", "width-2"],
)
@pytest.mark.slow
def test_marginal_sampler_trains_in_every_configuration(params):
    task = SparseTokenSelectionTask(8, 3, (1, 3))  # q varies from row to row
    X, y = task.sample(400, random_state=1)
    model = SparseTokenSelector(batch_size=64, random_state=0, **{"width": 8, **params})
    model.fit_online(task, n_steps=150)
    assert np.isfinite(model.loss_curve_).all()
    assert np.mean(model.loss_curve_[-20:]) < np.mean(model.loss_curve_[:5])
    first = model.predict(X)
    np.testing.assert_array_equal(model.predict(X), first)
    assert model.score(X, y) > 0.0
    if not params.get("learn_token_block", True):
        assert not model.key_query_[:3].any()


def test_pe_sampling_is_ignored_by_fixed_encodings(tiny_data):
    X, y = tiny_data
    fits = [
        SparseTokenSelector(width=4, positional_encoding="fixed", pe_sampling=s, max_iter=3)
        .set_params(random_state=0)
        .fit(X, y)
        for s in ("full", "marginal")
    ]
    np.testing.assert_array_equal(fits[0].key_query_, fits[1].key_query_)
    np.testing.assert_array_equal(fits[0].predict(X), fits[1].predict(X))


def test_bad_pe_sampling_is_refused_in_fit_and_after_fit(short_spe_model, small_data):
    X, y, X_test, _ = small_data
    with pytest.raises(ValueError, match="'pe_sampling' parameter"):
        SparseTokenSelector(pe_sampling="exact").fit(X, y)
    short_spe_model.set_params(pe_sampling="exact")
    try:
        with pytest.raises(ValueError, match="pe_sampling must be 'marginal' or 'full'"):
            short_spe_model.predict(X_test)
    finally:
        short_spe_model.set_params(pe_sampling="marginal")


# -- encoding families: randomized codebooks and sinusoidal encodings ----------------------
@pytest.fixture(scope="module")
def families():
    """One model per family at T=16, d=8, q=3, width 64, 800 online steps."""
    out = {}
    for name, params in {
        "fixed": {"positional_encoding": "fixed"},
        "codebook_T": {"positional_encoding": "randomized", "max_positions": 16},
        "codebook_8T": {"positional_encoding": "randomized", "max_positions": 128},
        "sinusoidal": {"positional_encoding": "sinusoidal"},
    }.items():
        model = SparseTokenSelector(width=64, random_state=0, **params, **ADAM)
        out[name] = model.fit_online(TASK, n_steps=800)
    return out


@pytest.mark.slow
def test_a_large_codebook_generalizes_where_fixed_encodings_do_not(families):
    X4, y4 = _at_length(64)
    scores = {name: families[name].score(X4, y4) for name in ("fixed", "codebook_8T")}
    assert scores["codebook_8T"] >= 0.55 and scores["fixed"] < 0.2, scores
    assert families["codebook_8T"].max_positions_ == 128


@pytest.mark.slow
def test_a_codebook_of_the_training_length_behaves_like_fixed_encodings(families):
    X, y = _at_length(16)
    fixed, codebook = families["fixed"], families["codebook_T"]
    np.testing.assert_allclose(codebook.predict(X), fixed.predict(X), atol=1e-5)
    assert codebook.score(X, y) > 0.99


def test_the_codebook_size_bounds_the_length():
    model = SparseTokenSelector(
        width=8, positional_encoding="randomized", max_positions=16, random_state=0
    ).fit_online(TASK, n_steps=2)
    X = _at_length(17, n=10)[0]
    X0, W0 = X.copy(), model.key_query_
    with pytest.raises(
        ValueError, match="seq_len=17 is longer than the codebook: max_positions=16"
    ):
        model.predict(X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(model.key_query_, W0)
    short = SparseTokenSelector(width=8, positional_encoding="randomized", max_positions=10)
    with pytest.raises(
        ValueError, match="seq_len=16 is longer than the codebook: max_positions=10"
    ):
        short.fit_online(TASK, n_steps=2)
    assert not hasattr(short, "net_")
    default = SparseTokenSelector(width=8, positional_encoding="randomized", random_state=0)
    assert default.fit_online(TASK, n_steps=2).max_positions_ == 64  # 4 x the training length


def test_sinusoidal_encodings_are_deterministic():
    model = SparseTokenSelector(width=8, positional_encoding="sinusoidal", random_state=0)
    model.fit_online(TASK, n_steps=20)
    X, _ = _at_length(32, n=50)
    first = model.predict(X)
    np.testing.assert_array_equal(model.set_params(n_pe_samples=4).predict(X), first)
    model.set_params(n_pe_samples=1)
    # The first rows' predictions do not depend on the other rows: nothing is drawn
    # (up to float32 rounding of the batched products).
    np.testing.assert_allclose(model.predict(X[:5]), first[:5], atol=1e-6)


def test_grid_search_sweeps_the_codebook_size():
    X, y = make_sparse_token_selection(300, 8, 3, 2, random_state=0)
    search = GridSearchCV(
        SparseTokenSelector(width=8, positional_encoding="randomized", max_iter=3, random_state=0),
        {"max_positions": [8, 32]},
        cv=2,
    ).fit(X, y)
    assert [p["max_positions"] for p in search.cv_results_["params"]] == [8, 32]
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
