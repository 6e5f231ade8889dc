"""In-context linear regression: the law, its contract, the trained layer and the baselines."""

import copy
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stsq_learn import (
    AttentionRegressor,
    FCNRegressor,
    InContextRegressionTask,
    LengthShiftScorer,
    LinearAttentionRegressor,
    PromptGradientStep,
    PromptRidge,
    in_context_preconditioner,
    load_model,
    make_in_context_regression,
    save_model,
)
from stsq_learn.tasks.in_context.task import check_covariance

# Runs of a few steps end worse than predicting 0, and say so; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")

ANISO = np.array([2.0, 1.5, 1.0, 0.5, 0.25])


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def prompts():
    """400 prompts of 10 examples in d = 4, and 50 of 25 examples."""
    X, y = make_in_context_regression(400, n_examples=10, n_features=4, random_state=0)
    X_long, y_long = make_in_context_regression(50, n_examples=25, n_features=4, random_state=1)
    return X, y, X_long, y_long


def _lsa(**params):
    return LinearAttentionRegressor(**{"max_iter": 3, "random_state": 0, **params})


def _reduced_prediction(model, X):
    """``x_q^T A (1/M) sum_i y_i x_i`` with the model's ``preconditioner_`` (NumPy)."""
    M = X.shape[1] - 1
    h = np.einsum("nm,nmd->nd", X[:, :-1, -1], X[:, :-1, :-1]) / M
    return np.einsum("nd,de,ne->n", X[:, -1, :-1], model.preconditioner_, h)


# -- the law ---------------------------------------------------------------------------
def test_prompts_hold_examples_of_one_linear_function_and_the_query():
    X, y = make_in_context_regression(300, n_examples=8, n_features=3, random_state=0)
    assert X.shape == (300, 9, 4) and y.shape == (300,)
    assert np.all(X[:, -1, -1] == 0)
    # each prompt's labels are <w, x_i> for its own w, and the target is <w, x_q>
    w = np.stack([np.linalg.lstsq(X[i, :-1, :-1], X[i, :-1, -1], rcond=None)[0] for i in range(5)])
    np.testing.assert_allclose(np.einsum("nd,nd->n", w, X[:5, -1, :-1]), y[:5], atol=1e-10)
    assert not np.allclose(w[0], w[1])
    again = make_in_context_regression(300, n_examples=8, n_features=3, random_state=0)
    np.testing.assert_array_equal(again[0], X)


@pytest.mark.parametrize("where", ["numpy", "torch"])
def test_the_law_has_its_covariances(where):
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, 0.0], [0.0, 0.0, 0.5]])
    task = InContextRegressionTask(5, 3, covariance=cov, query_covariance=[1.0, 2.0, 3.0])
    if where == "numpy":
        X, y = task.sample(20000, random_state=0)
    else:
        g = torch.Generator().manual_seed(0)
        X, y = (t.numpy() for t in task.sample_torch(20000, generator=g, dtype=torch.float64))
    x = X[:, :-1, :-1].reshape(-1, 3)
    np.testing.assert_allclose(x.T @ x / len(x), cov, atol=0.05)
    np.testing.assert_allclose(
        X[:, -1, :-1].T @ X[:, -1, :-1] / len(X), np.diag([1, 2, 3]), atol=0.1
    )
    assert np.mean(y**2) == pytest.approx(task.trivial_mse, rel=0.05)
    assert task.trivial_mse == 6.0


def test_noise_is_on_the_examples_labels_not_on_the_target():
    task = InContextRegressionTask(31, 2, noise=0.5)
    X, y = task.sample(2000, random_state=0)
    ridge = PromptRidge().fit(X, y)
    residual = X[:, :-1, -1] - np.einsum("nmd,nd->nm", X[:, :-1, :-1], _weights(X))
    assert np.std(residual) == pytest.approx(0.5 * np.sqrt(28 / 30), rel=0.05)  # M - d dof
    assert ridge.score(X, y) > 0.9  # the target itself is clean


def _weights(X):
    x, labels = X[:, :-1, :-1], X[:, :-1, -1]
    gram, moments = np.einsum("nmd,nme->nde", x, x), np.einsum("nmd,nm->nd", x, labels)
    return np.linalg.solve(gram, moments[..., None])[..., 0]


def test_covariate_shift_and_examples_are_laws_to_draw_from():
    task = InContextRegressionTask(21, 5, covariance=ANISO)
    shifted = task.scaled(3.0)
    np.testing.assert_allclose(shifted.covariance_matrix, 9 * np.diag(ANISO))
    assert shifted.trivial_mse == pytest.approx(9 * ANISO.sum())
    assert task.at_examples(80) == InContextRegressionTask(81, 5, covariance=ANISO)
    assert task.at_examples(80).n_examples == 80
    assert InContextRegressionTask((6, 21), 5).n_examples == (5, 20)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        task.scaled(0.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(covariance=[[1, 0.5], [0.2, 1]]), ValueError, r"symmetric: covariance\[0, 1\]"),
        (dict(covariance=[[1, 2], [2, 1]]), ValueError, "positive semi-definite.*-1"),
        (dict(covariance=[1.0, -0.5]), ValueError, r"covariance\[1\] = -0.5"),
        (dict(covariance=np.ones(3)), ValueError, "covariance is for 3 features.*n_features=2"),
        (dict(covariance=np.zeros(2)), ValueError, "covariance is 0"),
        (dict(covariance=[[1, np.nan], [np.nan, 1]]), ValueError, "NaN or infinity"),
        (dict(covariance=np.ones((2, 2, 2))), ValueError, "square matrix"),
        (dict(query_covariance=[[1, 3], [3, 1]]), ValueError, "query_covariance must be positive"),
        (dict(noise=-0.1), ValueError, "noise must be a finite number >= 0"),
        (dict(noise=10**400), ValueError, "noise must be a finite number >= 0, got 1000"),
        (dict(seq_len=1), ValueError, "seq_len must be at least 2"),
    ],
)
def test_bad_laws_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        InContextRegressionTask(**{"seq_len": 5, "n_features": 2, **kwargs})


def test_make_refuses_zero_examples_by_name():
    with pytest.raises(ValueError, match="n_examples must be an integer >= 1, got 0"):
        make_in_context_regression(10, n_examples=0, n_features=2)
    with pytest.raises(ValueError, match="positive semi-definite"):
        make_in_context_regression(10, 3, 2, covariance=[[0, 1], [1, 0]])


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(1, 6),
    seed=st.integers(0, 2**31 - 1),
    rank=st.integers(0, 6),
    skew=st.floats(0, 1),
)
def test_covariance_check_accepts_exactly_the_symmetric_psd(d, seed, rank, skew):
    rng = np.random.default_rng(seed)
    factor = rng.standard_normal((d, min(rank, d) or 1))
    psd = factor @ factor.T
    np.testing.assert_allclose(check_covariance(psd), psd, atol=1e-12)
    if d > 1 and skew > 0.01:
        bent = psd + skew * np.triu(np.ones((d, d)), 1)
        with pytest.raises(ValueError, match="must be symmetric"):
            check_covariance(bent)
    negative = psd - (np.linalg.eigvalsh(psd)[-1] + 1) * np.eye(d)
    with pytest.raises(ValueError, match="positive semi-definite"):
        check_covariance(negative)


# -- the data contract -----------------------------------------------------------------
ESTIMATORS = [_lsa(), PromptRidge(), PromptGradientStep()]
IDS = ["lsa", "ridge", "gd"]


def _bad_inputs(X, y):
    one_token = X[:, -1:]
    nan_label = X.copy()
    nan_label[3, 2, -1] = np.nan
    nan_target = y.copy()
    nan_target[5] = np.inf
    leaked = X.copy()
    leaked[7, -1, -1] = y[7]
    return [
        ((one_token, y), "1 token.*n_examples = 0"),
        ((nan_label, y), r"X\[3, 2, 4\] = nan"),
        ((X, nan_target), r"y contains NaN or infinity, e.g. y\[5\] = inf"),
        ((leaked, y), r"X\[7, -1, -1\] = .*label slot must be 0"),
        ((X[..., :1], y), "1 channel.*n_features \\+ 1 >= 2"),
        ((X[0], y), "must be 3-D"),
        ((X, y[:-1]), r"y must have shape \(n_samples,\) = \(400,\)"),
    ]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_bad_prompts_are_refused_by_name_before_work_and_leave_the_fit(estimator, prompts):
    X, y, X_long, _ = prompts
    model = copy.deepcopy(estimator).fit(X, y)
    before = model.predict(X_long)
    state = copy.deepcopy(vars(model))
    for (bad_X, bad_y), match in _bad_inputs(X, y):
        with pytest.raises(ValueError, match=match):
            model.fit(bad_X, bad_y)
    with pytest.raises(
        ValueError, match=r"6 channels per token.*n_features=4.*\[x; y\], n_features \+ 1 = 5"
    ):
        model.predict(np.concatenate([X_long[..., :1], X_long], axis=-1))
    with pytest.raises(ValueError, match="1 token"):
        model.predict(X_long[:, -1:])
    np.testing.assert_array_equal(model.predict(X_long), before)
    assert vars(model).keys() == state.keys()


def test_refused_before_any_training_step(prompts, monkeypatch):
    X, y, _, _ = prompts
    from stsq_learn.engine import base

    def no_training(*args, **kwargs):  # pragma: no cover - reaching it fails the test
        raise AssertionError("training started")

    monkeypatch.setattr(base._BaseEstimator, "_run", no_training)
    nan_label = X.copy()
    nan_label[0, 0, -1] = np.nan
    for bad in (X[:, -1:], nan_label, X[..., :1]):
        with pytest.raises(ValueError):
            _lsa().fit(bad, y)
    with pytest.raises(ValueError, match="init_scale=3 breaks the paper's condition"):
        _lsa(init_scale=3.0).fit(X, y)
    with pytest.raises(TypeError, match="task must be a InContextRegressionTask"):
        _lsa().fit_online(InContextRegressionTask.__mro__[1], 3)


# -- the trained layer -----------------------------------------------------------------
def test_prediction_is_one_preconditioned_step_normalised_by_each_prompts_length(prompts):
    X, y, X_long, _ = prompts
    model = _lsa(dtype="float64").fit(X, y)
    for rows in (X, X_long, X_long[:, -4:]):  # M = 10, 25, 3
        np.testing.assert_allclose(
            model.predict(rows), _reduced_prediction(model, rows), rtol=1e-10
        )
    assert model.n_features_in_ == 4 and model.seq_len_ == 11
    assert model.predict(X_long).shape == (50,) and model.predict(X_long).dtype == np.float64


def test_init_is_the_papers_and_auto_meets_the_scale_condition():
    task = InContextRegressionTask(21, 5, covariance=ANISO)
    gamma = np.linalg.inv(in_context_preconditioner(20, ANISO))
    bound = np.linalg.norm(gamma, 2) * np.sqrt(5)
    for init in ("random", "identity"):
        est = LinearAttentionRegressor("full", init=init)
        module = est._make_module(task, 0)
        s = float(module.value[-1].detach())
        assert s**2 * bound == pytest.approx(1.0)  # "auto": half the bound of 2
        pv, kq = (m.detach().numpy() for m in module.matrices())
        assert np.count_nonzero(pv) == 1 and pv[5, 5] == pytest.approx(s)
        block = kq[:5, :5] / s
        assert np.linalg.norm(block) == pytest.approx(1.0, rel=1e-6)  # ||T T^T||_F = 1
        np.testing.assert_allclose(block, block.T, atol=1e-7)
        assert np.linalg.eigvalsh(block)[0] > -1e-6 and not kq[5].any() and not kq[:, 5].any()
    module = LinearAttentionRegressor(init="identity", init_scale=0.5)._make_module(task, 0)
    np.testing.assert_allclose(module.preconditioner().detach(), 0.25 * np.eye(5) / np.sqrt(5))


def _mirrored(X, y):
    """Every prompt and its mirror under w -> -w (labels and target negated)."""
    mirror = X.copy()
    mirror[:, :, -1] *= -1
    return np.concatenate([X, mirror]), np.concatenate([y, -y])


def test_full_parametrization_keeps_the_off_diagonal_blocks_at_zero(prompts):
    """The paper's Lemma: from its init, on prompts closed under w -> -w, the blocks the reduced
    model leaves out get no gradient, and the full model moves exactly as the reduced one (by
    gradient descent: Adam would blow the gradient's rounding up to steps of its step size)."""
    X, y = _mirrored(*prompts[:2])
    params = dict(dtype="float64", batch_size=len(X), max_iter=40, solver="sgd")
    full = _lsa(parametrization="full", **params).fit(X, y)
    reduced = _lsa(**params).fit(X, y)
    pv, kq = full.value_matrix_, full.key_query_matrix_
    assert np.abs(pv[4, :4]).max() < 1e-12 and np.abs(kq[4, :4]).max() < 1e-12
    np.testing.assert_allclose(full.preconditioner_, reduced.preconditioner_, rtol=1e-8, atol=1e-10)
    assert full.loss_curve_[-1] < 0.5 * full.loss_curve_[0]


@pytest.mark.slow
def test_full_parametrization_online_stays_near_the_reduced_minimum():
    task = InContextRegressionTask(21, 5)
    model = LinearAttentionRegressor("full", random_state=0).fit_online(task, 600)
    target = in_context_preconditioner(20, np.ones(5))
    pv, kq = model.value_matrix_, model.key_query_matrix_
    assert np.linalg.norm(model.preconditioner_ - target) < 0.06 * np.linalg.norm(target)
    assert np.abs(pv[5, :5]).max() < 0.05 * pv[5, 5] and np.abs(kq[5, :5]).max() < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("covariance", [None, ANISO], ids=["isotropic", "anisotropic"])
def test_fit_online_reaches_the_global_minimum(covariance):
    """The defaults (Adam 0.01, 256 prompts a step, 1000 steps) end within 5% of Gamma^{-1}."""
    task = InContextRegressionTask(21, 5, covariance=covariance)
    model = LinearAttentionRegressor(random_state=0).fit_online(task)
    target = in_context_preconditioner(20, task.covariance_matrix)
    assert np.linalg.norm(model.preconditioner_ - target) < 0.05 * np.linalg.norm(target)


def test_fit_reads_the_law_from_the_examples(prompts):
    X = make_in_context_regression(300, 10, 5, covariance=ANISO, random_state=0)[0]
    model = _lsa().fit(X, np.zeros(len(X)))
    np.testing.assert_allclose(model.task_.covariance_matrix, np.diag(ANISO), atol=0.1)
    assert model.task_.seq_len == 11 and model.task_.noise == 0.0


def test_fit_online_on_a_range_of_lengths_and_sgd(prompts):
    _, _, X_long, y_long = prompts
    task = InContextRegressionTask((4, 16), 4)
    model = _lsa(solver="sgd", learning_rate_init=0.05).fit_online(task, 20)
    assert model.seq_len_ == 16 and model.task_ == task.at_length(16) and model.n_iter_ == 20
    assert model.score(X_long, y_long) > -1


def test_dtypes_devices_and_warm_start(prompts):
    X, y, _, _ = prompts
    single = _lsa(device="cpu").fit(X, y)
    double = _lsa(device="cpu", dtype="float64").fit(X, y)
    assert single.device_ == torch.device("cpu")
    assert next(double.net_.module_.parameters()).dtype == torch.float64
    np.testing.assert_allclose(single.preconditioner_, double.preconditioner_, rtol=1e-4, atol=1e-6)
    model = _lsa(warm_start=True).fit(X, y)
    first = model.preconditioner_
    model.fit(X, y)
    assert model.n_iter_ == 6 and not np.allclose(model.preconditioner_, first)
    with pytest.raises(ValueError, match=r"another architecture.*key_query"):
        model.set_params(parametrization="full").fit(X, y)


def test_saved_model_keeps_its_law_and_predicts_the_same(prompts, tmp_path):
    X, y, X_long, _ = prompts
    task = InContextRegressionTask(11, 4, covariance=[1, 2, 3, 4], noise=0.1)
    model = _lsa(parametrization="full").fit_online(task, 5)
    save_model(model, tmp_path / "lsa.stsq")
    loaded = load_model(tmp_path / "lsa.stsq")
    assert loaded.task_ == task
    np.testing.assert_array_equal(loaded.predict(X_long), model.predict(X_long))
    np.testing.assert_array_equal(loaded.preconditioner_, model.preconditioner_)
    ridge = PromptGradientStep().fit(X, y)
    save_model(ridge, tmp_path / "gd.stsq")
    assert load_model(tmp_path / "gd.stsq").step_ == ridge.step_


def test_length_shift_scorer_lengthens_prompts_with_their_own_w(prompts):
    X, y, _, _ = prompts
    ridge = PromptRidge().fit(X, y)
    for length in (6, 11, 41):  # M = 5, 10, 40: least squares stays exact (M >= d)
        assert LengthShiftScorer(length, random_state=0)(ridge, X, y) == pytest.approx(1.0)


# -- the length shift ------------------------------------------------------------------
def test_shift_keeps_queries_targets_and_the_examples_order():
    task = InContextRegressionTask(9, 3)
    X, y = task.sample(50, random_state=0)
    short, y_short = task.shift(X, y, 4, random_state=0)
    assert short.shape == (50, 4, 4) and y_short is y
    np.testing.assert_array_equal(short[:, -1], X[:, -1])
    for i in range(3):  # a kept example is one of the row's, in the row's order
        kept = [np.flatnonzero((X[i, :-1] == t).all(1))[0] for t in short[i, :-1]]
        assert kept == sorted(kept)
    long, _ = task.shift(X, y, 30, random_state=0)
    assert long.shape == (50, 30, 4)
    np.testing.assert_array_equal(long[:, -1], X[:, -1])
    np.testing.assert_allclose(PromptRidge().fit(X, y).predict(long), y, atol=1e-9)
    for i in range(3):
        old = np.flatnonzero((long[i, :-1, None] == X[i, None, :-1]).all(-1).any(-1))
        assert len(old) == 8


def test_shift_refuses_what_does_not_determine_w():
    X, y = InContextRegressionTask(4, 5).sample(5, random_state=0)  # M = 3 < d
    with pytest.raises(ValueError, match="3 examples in d=5 dimensions cannot be lengthened"):
        InContextRegressionTask(4, 5).shift(X, y, 10)
    noisy = InContextRegressionTask(9, 3, noise=0.5)
    X, y = noisy.sample(5, random_state=0)
    with pytest.raises(ValueError, match=r"label noise.*noise=0.5"):
        noisy.shift(X, y, 20)
    with pytest.raises(ValueError, match=r"prompt 0 of X does not determine its w.*residual"):
        InContextRegressionTask(9, 3).shift(X, y, 20)
    degenerate, y = InContextRegressionTask(9, 3).sample(2, random_state=0)
    degenerate[1, :-1, 2] = degenerate[1, :-1, 0]
    with pytest.raises(ValueError, match=r"prompt 1 .* span fewer than d=3"):
        InContextRegressionTask(9, 3).shift(degenerate, y, 20)
    with pytest.raises(ValueError, match="seq_len=1 leaves no example"):
        InContextRegressionTask(9, 3).shift(degenerate, y, 1)


# -- the baselines -----------------------------------------------------------------------
def test_prompt_ridge_is_least_squares_and_ridge_on_each_prompt():
    X, y = make_in_context_regression(30, n_examples=3, n_features=5, noise=0.3, random_state=0)
    for alpha in (0.0, 0.7):
        pred = PromptRidge(alpha=alpha).fit(X, y).predict(X)
        for i in range(5):
            x, labels = X[i, :-1, :-1], X[i, :-1, -1]
            if alpha == 0:
                w = np.linalg.lstsq(x, labels, rcond=None)[0]  # minimum norm: M < d
            else:
                w = np.linalg.solve(x.T @ x + alpha * np.eye(5), x.T @ labels)
            assert pred[i] == pytest.approx(w @ X[i, -1, :-1], rel=1e-9)
    X, y = make_in_context_regression(50, n_examples=12, n_features=5, random_state=0)
    np.testing.assert_allclose(PromptRidge().fit(X[:2], y[:2]).predict(X), y, atol=1e-9)


def test_prompt_gradient_step_fits_the_best_step_and_takes_a_given_one():
    X, y = make_in_context_regression(6000, n_examples=10, n_features=5, random_state=0)
    best = PromptGradientStep().fit(X, y)
    assert best.step_ == pytest.approx(10 / 16, rel=0.05)
    averaging = PromptGradientStep(step=1.0).fit(X[:5], y[:5])
    M = 10
    h = np.einsum("nm,nmd->nd", X[:, :-1, -1], X[:, :-1, :-1]) / M
    np.testing.assert_allclose(averaging.predict(X), np.einsum("nd,nd->n", h, X[:, -1, :-1]))
    assert averaging.step_ == 1.0
    assert best.score(X, y) > averaging.score(X, y)
    with pytest.raises(ValueError, match="'step' parameter"):
        PromptGradientStep(step=-1.0).fit(X, y)
    with pytest.raises(TypeError, match="got the boolean True"):
        PromptRidge(alpha=True).fit(X, y)


def test_fcn_reads_the_flat_prompt_and_softmax_attention_does_not_apply(prompts):
    X, y, X_long, _ = prompts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fcn = FCNRegressor(task="in_context", width=16, max_iter=3, random_state=0).fit(X, y)
    assert fcn.predict(X).shape == (400,)
    with pytest.raises(ValueError, match="fitted on seq_len=11 and cannot predict at seq_len=26"):
        fcn.predict(X_long)
    with pytest.raises(ValueError, match=r"has none.*structure is None"):
        AttentionRegressor(task="in_context").fit(X, y)


def test_memory_is_checked_before_work_and_progress_is_shown(capsys):
    task = InContextRegressionTask(1001, 100)
    with pytest.raises(ValueError, match=r"LinearAttentionRegressor with batch_size=\d+.*GiB"):
        LinearAttentionRegressor(batch_size=10**9).fit_online(task, 1)
    LinearAttentionRegressor(batch_size=8, verbose=1).fit_online(InContextRegressionTask(4, 2), 2)
    out = capsys.readouterr()
    assert "train_loss" in out.out and "0/2" in out.err  # the epoch table and the step bar
