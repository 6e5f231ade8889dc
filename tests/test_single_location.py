"""Single-location regression: the task, the closed-form risks and the two estimators."""

import copy
import math
import pickle
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from children import child_env
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression

from stsq_learn import (
    ErfAttentionRegressor,
    FCNRegressor,
    SingleLocationTask,
    SoftmaxAttentionRegressor,
    load_model,
    make_single_location,
    save_model,
)
from stsq_learn.tasks import TASKS, get_task
from stsq_learn.tasks.single_location.theory import (
    _NODES,
    _WEIGHTS,
    _noise_parts,
    _risk_and_partials,
    bayes_risk,
    erf_attention,
    erf_risk,
    erf_risk_gradient,
    linear_risk,
    oracle_risk,
)

# Runs of a few steps end worse than predicting 0, and say so; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _unit(x):
    return x / np.linalg.norm(x)


def _fitted(model):
    """A deep copy of everything a model holds (hyperparameters and fitted state)."""
    return copy.deepcopy(vars(model))


def _assert_same_fit(model, before):
    """The model holds exactly what it held (every fitted array bit for bit)."""
    now = vars(model)
    fitted = [k for k in before if k.endswith("_")]
    assert fitted and sorted(k for k in now if k.endswith("_")) == sorted(fitted)
    for key in fitted:
        a, b = before[key], now[key]
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b, key


# -- the task -------------------------------------------------------------------------
def test_task_law_and_directions():
    task = SingleLocationTask(6, 12, gamma=0.5, noise=0.1, random_state=3)
    k_star, v_star = task.directions
    np.testing.assert_allclose(
        [k_star @ k_star, v_star @ v_star, k_star @ v_star], [1, 1, 0], atol=1e-12
    )
    np.testing.assert_array_equal(SingleLocationTask(6, 12, random_state=3).key_direction, k_star)
    assert not np.allclose(SingleLocationTask(6, 12, random_state=4).key_direction, k_star)
    X, y = task.sample(50_000, random_state=0)
    assert X.shape == (50_000, 6, 12) and y.shape == (50_000,)
    # The relevant token is the one whose projection on k* is near sqrt(d/2) = 2.45.
    along = X @ k_star
    j0 = along.argmax(axis=1)
    assert np.mean(np.abs(along[np.arange(len(X)), j0] - math.sqrt(6)) < 2.0) > 0.99
    assert np.all(np.bincount(j0, minlength=6) > 7_000)  # uniform positions
    assert abs(np.mean(y**2) / task.trivial_mse - 1) < 0.02
    assert task.trivial_mse == pytest.approx(0.25 + 0.01)
    assert TASKS["single_location"] is SingleLocationTask is get_task("single_location")


def test_fixed_position_and_make():
    task = SingleLocationTask(5, 8, position=2)
    X, y = task.sample(400, random_state=1)
    np.testing.assert_allclose(X[:, 2] @ task.value_direction, y)
    X2, y2 = make_single_location(400, 5, 8, position=2, random_state=1)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(seq_len=(2, 4), n_features=3), TypeError, "seq_len"),
        (dict(seq_len=4, n_features=1), ValueError, "n_features must be at least 2"),
        (dict(seq_len=4, n_features=3, gamma=0.0), ValueError, "gamma must be a finite"),
        (dict(seq_len=4, n_features=3, noise=-1.0), ValueError, "noise must be"),
        (dict(seq_len=4, n_features=3, position=4), ValueError, r"position must be in \[0, "),
        (dict(seq_len=4, n_features=3, position=1.0), TypeError, "position must be an int"),
        (dict(seq_len=4, n_features=3, random_state=None), TypeError, "random_state"),
        (dict(seq_len=4, n_features=3, random_state=True), TypeError, "random_state"),
        (
            dict(seq_len=6, n_features=4, random_state=-1),
            ValueError,
            r"random_state of a task must be an int in \[0, 2\*\*32 - 1\] .*got -1\.",
        ),
        (
            dict(seq_len=6, n_features=4, random_state=2**32),
            ValueError,
            r"random_state of a task must be an int in \[0, 2\*\*32 - 1\] .*got 4294967296\.",
        ),
    ],
)
def test_task_refuses_bad_sizes(kwargs, error, match):
    with pytest.raises(error, match=match):
        SingleLocationTask(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(task_seed=-1), ValueError, r"task_seed must be an int in \[0, 2\*\*32 - 1\]"),
        (dict(task_seed=2**32), ValueError, r"task_seed must be an int in .*got 4294967296"),
        (dict(task_seed=1.5), TypeError, "task_seed must be an int"),
        (dict(random_state=-1), ValueError, "'random_state' parameter of make_single_location"),
        (dict(random_state="a"), ValueError, "'random_state' parameter of make_single_location"),
    ],
)
def test_make_single_location_names_a_bad_seed(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_single_location(10, 4, 3, **kwargs)


def test_data_contract_errors():
    X, y = make_single_location(20, 4, 3, random_state=0)
    task, X_checked, _ = SingleLocationTask.from_data(X, y)
    assert (task.seq_len, task.n_features) == (4, 3) and X_checked is X
    with pytest.raises(ValueError, match=r"must be 3-D, \(n_samples, seq_len, n_features\)"):
        SingleLocationTask.from_data(X[:, 0], y)
    with pytest.raises(ValueError, match=r"y must have shape \(n_samples,\) = \(20,\)"):
        SingleLocationTask.from_data(X, y[:5])
    np.testing.assert_array_equal(SingleLocationTask.from_data(X, y[:, None])[2], y)
    np.testing.assert_array_equal(task.check_targets(y[:, None], X), y)
    with pytest.raises(ValueError, match=r"= \(20,\) .* got shape \(20, 2\)\."):
        task.check_targets(np.c_[y, y], X)
    bad = X.copy()
    bad[3, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"X\[3, 1, 2\]"):
        SingleLocationTask.from_data(bad, y)
    with pytest.raises(ValueError, match=r"2 token features per token.*n_features=3"):
        task.check_rows(X[..., :2], "ErfAttentionRegressor")


def test_length_shift_keeps_the_targets_and_the_tokens_in_order():
    task = SingleLocationTask(4, 3)
    X, y = task.sample(30, random_state=0)
    X_long, y_long = task.shift(X, y, 9, random_state=1)
    assert X_long.shape == (30, 9, 3) and y_long is y
    for i in range(30):  # the original tokens, in order, are a subsequence of the new row
        rows = [np.flatnonzero((X_long[i] == t).all(axis=1))[0] for t in X[i]]
        assert rows == sorted(rows)
    with pytest.raises(ValueError, match="shorter than the rows' length 4"):
        task.shift(X, y, 3)


# -- the theory -----------------------------------------------------------------------
def _points(task):
    k_star, v_star = task.directions
    rng = np.random.RandomState(1)
    d = task.n_features
    return [
        (k_star, v_star, 0.3),  # the oracle
        (k_star, v_star, 1.0),
        (_unit(rng.randn(d)), _unit(rng.randn(d)), 0.5),  # from the sphere
        (
            _unit(k_star + 0.5 * v_star + 0.3 * _unit(rng.randn(d))),
            _unit(v_star + 0.4 * k_star),
            0.3,
        ),
        (1.3 * _unit(k_star + 0.5 * rng.randn(d) / d**0.5), 0.7 * _unit(v_star + k_star), 0.8),
    ]


def test_closed_form_risk_matches_monte_carlo_at_five_points():
    task = SingleLocationTask(5, 16, gamma=0.8, noise=0.2)
    points = _points(task)
    losses = [[] for _ in points]
    rng = np.random.RandomState(2)
    for _ in range(10):  # 200,000 rows in chunks
        X, y = task.sample(20_000, random_state=rng)
        for loss, (k, v, lam) in zip(losses, points, strict=True):
            loss.append((y - erf_attention(X, k, v, lam)) ** 2)
    for loss, (k, v, lam) in zip(losses, points, strict=True):
        loss = np.concatenate(loss)
        se = loss.std(ddof=1) / np.sqrt(len(loss))
        assert abs(loss.mean() - erf_risk(k, v, lam, task)) < 3 * se


def test_noise_term_closed_forms():
    for b in (0.05, 0.4, 1.0, 2.5):
        A, B, dA, dB = _noise_parts(b)
        assert A == pytest.approx(2 / np.pi * np.arcsin(2 * b * b / (1 + 2 * b * b)))
        from scipy.special import erf

        # against fine quadrature
        assert A == pytest.approx(_WEIGHTS @ erf(b * _NODES) ** 2, rel=1e-6)
        assert B == pytest.approx(_WEIGHTS @ (_NODES**2 * erf(b * _NODES) ** 2), rel=1e-6)
        h = 1e-6
        assert dA == pytest.approx((_noise_parts(b + h)[0] - _noise_parts(b - h)[0]) / (2 * h))
        assert dB == pytest.approx((_noise_parts(b + h)[1] - _noise_parts(b - h)[1]) / (2 * h))


def _torch_risk(p, lam, constants):
    """The population risk written again in torch: the reference for the hand-derived gradient."""
    a, g, eps, L = constants
    kk, kv, vk, vv, c, nk, nv = p
    z, w = torch.as_tensor(_NODES), torch.as_tensor(_WEIGHTS)
    sk = g * torch.sqrt(nk)
    f = torch.erf(lam * (a * kk + sk * z))
    M = a * vk + (c / nk) * sk * z
    Y = (kv / nk) * sk * z
    C, V = g * g * (vv - c * kv / nk), g * g * (nv - c * c / nk)
    ys, ss, s0 = (w * f * (C + Y * M)).sum(), (w * f * f * (V + M * M)).sum(), (w * f * M).sum()
    b2 = lam * lam * nk
    A = (2 / math.pi) * torch.asin(2 * b2 / (1 + 2 * b2))
    B = A + 8 * b2 / (math.pi * (1 + 2 * b2) * torch.sqrt(1 + 4 * b2))
    mu = c * lam * (2 / math.sqrt(math.pi)) / torch.sqrt(1 + 2 * lam * lam * nk)
    noise = (nv - c * c / nk) * A + c * c / nk * B
    return (
        g * g
        + eps * eps
        - 2 * ys
        + ss
        + (L - 1) * noise
        + 2 * (L - 1) * s0 * mu
        + (L - 1) * (L - 2) * mu * mu
    )


@pytest.mark.parametrize("lam", [0.1, 0.7, 2.0])
def test_gradient_matches_autograd_and_finite_differences(lam):
    constants = (math.sqrt(10), 0.7, 0.3, 7)
    for p in (
        [0.3, 0.2, -0.1, 0.5, 0.25, 1.3, 0.8],
        [1, 0, 0, 1, 0, 1, 1],
        [0.05, 0, 0.03, 0, 0, 1, 1],
    ):
        p = np.array(p, dtype=float)
        risk, partials = _risk_and_partials(p, lam, constants)
        pt = torch.tensor(p, requires_grad=True)
        reference = _torch_risk(pt, lam, constants)
        (grad,) = torch.autograd.grad(reference, pt)
        assert risk == pytest.approx(float(reference.detach()), abs=1e-12)
        np.testing.assert_allclose(partials, grad.numpy(), atol=1e-10)
    task = SingleLocationTask(7, 20, gamma=0.7, noise=0.3)
    k, v, _ = _points(task)[3]
    _, grad_k, grad_v = erf_risk_gradient(k, v, lam, task)
    h, rng = 1e-6, np.random.RandomState(0)
    for _ in range(3):
        dk, dv = rng.randn(2, 20)
        numeric = (
            erf_risk(k + h * dk, v + h * dv, lam, task)
            - erf_risk(k - h * dk, v - h * dv, lam, task)
        ) / (2 * h)
        assert numeric == pytest.approx(grad_k @ dk + grad_v @ dv, rel=1e-5, abs=1e-7)


def test_linear_and_bayes_risks():
    task = SingleLocationTask(10, 4)
    assert linear_risk(task) == pytest.approx(0.5 - 0.25 / 9.5)  # 0.474 at the paper's gamma
    X, y = task.sample(40_000, random_state=0)
    X_test, y_test = task.sample(40_000, random_state=1)
    fitted = LinearRegression().fit(X.reshape(len(X), -1), y)
    mse = np.mean((y_test - fitted.predict(X_test.reshape(len(X_test), -1))) ** 2)
    assert abs(mse - linear_risk(task)) < 0.01
    risk, se = bayes_risk(task, 40_000)
    assert 0 < risk < oracle_risk(task, 0.3) and se < 0.01 * risk + 1e-3
    fixed = SingleLocationTask(10, 4, noise=0.3, position=0)
    assert linear_risk(fixed) == pytest.approx(0.09) and bayes_risk(fixed) == (0.09, 0.0)


# -- the estimators -------------------------------------------------------------------
def test_projected_gd_recovers_the_directions():
    task = SingleLocationTask(5, 50)
    model = ErfAttentionRegressor(
        learning_rate_init=0.02, max_iter=3000, lambda_decay=3e-3, random_state=0
    )
    model.fit_online(task)
    k_star, v_star = task.directions
    assert abs(model.k_ @ k_star) > 0.999 and abs(model.v_ @ v_star) > 0.999
    assert model.loss_curve_[-1] == pytest.approx(
        oracle_risk(task, model.lambda_curve_[-1]), rel=1e-3
    )
    assert model.alignment_curve_.shape == (3001, 2) and model.n_iter_ == 3000
    assert model.lambda_curve_[1000] == pytest.approx(1 / 4)
    np.testing.assert_allclose([np.linalg.norm(model.k_), np.linalg.norm(model.v_)], 1)
    X, y = task.sample(2000, random_state=1)
    assert model.score(X, y) > 0.5 and model.predict(X).shape == (2000,)


def test_manifold_initialisation_and_constant_lambda():
    task = SingleLocationTask(5, 30)
    model = ErfAttentionRegressor(
        init="manifold", lambda_schedule="constant", max_iter=3, random_state=0
    ).fit_online(task)
    k_star, v_star = task.directions
    # at step 0 the key is orthogonal to v*, the value to k*
    first = model.alignment_curve_[0]
    assert abs(first[0]) < 0.5 and abs(first[1]) < 0.5
    np.testing.assert_array_equal(model.lambda_curve_, 1.0)
    assert model.lambda_ == 1.0
    k0, v0 = ErfAttentionRegressor(init="manifold")._initial(30, np.random.RandomState(0), task)
    np.testing.assert_allclose([k0 @ v_star, v0 @ k_star, k0 @ v0], 0, atol=1e-12)


def test_fit_on_data_starts_at_the_population_risk():
    task = SingleLocationTask(5, 20, gamma=0.8)
    X, y = task.sample(20_000, random_state=0)
    for solver in ("pgd", "sgd"):
        model = ErfAttentionRegressor(
            solver=solver, max_iter=2, batch_size=20_000, random_state=0
        ).fit(X, y)
        online = ErfAttentionRegressor(solver="pgd", max_iter=2, random_state=0).fit_online(task)
        # the same start; the data's loss at it is the population risk up to sampling error
        k0, v0 = model._initial(20, np.random.RandomState(0), None)
        loss = (y - erf_attention(X, k0, v0, 1.0)) ** 2
        assert model.loss_curve_[0] == pytest.approx(loss.mean(), rel=1e-9)
        se = loss.std() / np.sqrt(len(loss))
        assert abs(model.loss_curve_[0] - online.loss_curve_[0]) < 3 * se
        assert model.alignment_curve_ is None and model.n_iter_ == 2


@pytest.mark.slow
def test_fit_on_data_recovers_the_directions():
    task = SingleLocationTask(5, 50)
    X, y = task.sample(2000, random_state=0)
    X_test, y_test = task.sample(2000, random_state=1)
    model = ErfAttentionRegressor(
        solver="sgd", learning_rate_init=0.02, max_iter=2000, lambda_decay=3e-3, random_state=0
    ).fit(X, y)
    assert abs(model.k_ @ task.key_direction) > 0.9 and abs(model.v_ @ task.value_direction) > 0.9
    assert model.score(X_test, y_test) > 0.6


def test_softmax_attention_learns_the_task():
    task = SingleLocationTask(5, 20)
    model = SoftmaxAttentionRegressor(learning_rate_init=0.05, max_iter=300, random_state=0)
    model.fit_online(task)
    X, y = task.sample(2000, random_state=1)
    assert model.score(X, y) > 0.9 and model.alignment_curve_.shape == (301, 2)
    assert model.alignment_curve_[-1, 0] > 0.95 and abs(model.alignment_curve_[-1, 1]) > 0.95
    fitted = SoftmaxAttentionRegressor(learning_rate_init=0.05, max_iter=300, random_state=0)
    fitted.fit(*task.sample(3000, random_state=0))
    assert fitted.score(X, y) > 0.85 and fitted.alignment_curve_ is None


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        (dict(solver="adam"), ValueError, "'solver' parameter of ErfAttentionRegressor must be"),
        (dict(lambda_init=0), ValueError, r"'lambda_init' .* range \(0\.0, inf\)\. Got 0 "),
        (dict(lambda_init=np.inf), ValueError, r"'lambda_init' .* range \(0\.0, inf\)\. Got inf "),
        (dict(lambda_decay=-1.0), ValueError, r"'lambda_decay' .* range \[0\.0, inf\)"),
        (dict(lambda_schedule="cosine"), ValueError, "'lambda_schedule' parameter"),
        (dict(init="zeros"), ValueError, "'init' parameter"),
        (dict(max_iter=0), ValueError, "'max_iter' parameter .* Got 0 instead"),
        (dict(max_iter=True), TypeError, "'max_iter' parameter .* integer, got the boolean"),
        (dict(batch_size=2.5), TypeError, "'batch_size' parameter"),
        (dict(learning_rate_init="big"), TypeError, "'learning_rate_init' parameter"),
        (dict(learning_rate_init=True), TypeError, "real number, got the boolean True"),
        (dict(on_divergence="ignore"), ValueError, "'on_divergence' parameter"),
        (dict(verbose="loud"), ValueError, "'verbose' parameter of ErfAttentionRegressor"),
        (dict(verbose=-1), ValueError, "'verbose' parameter of ErfAttentionRegressor"),
        (dict(random_state=-1), ValueError, "'random_state' parameter of ErfAttentionRegressor"),
        (dict(random_state="a"), ValueError, "'random_state' parameter .* Got 'a' instead"),
    ],
)
def test_bad_hyperparameters_fail_before_any_work_and_keep_the_fit(params, error, match):
    X, y = make_single_location(50, 4, 6, random_state=0)
    model = ErfAttentionRegressor(max_iter=5, random_state=0).fit(X, y)
    before = _fitted(model)
    with pytest.raises(error, match=match):
        model.set_params(**params).fit(X, y)
    _assert_same_fit(model, before)
    with pytest.raises(error, match=match):
        model.fit_online(SingleLocationTask(4, 6))
    _assert_same_fit(model, before)


def test_unfitted_and_wrong_inputs():
    X, y = make_single_location(50, 4, 6, random_state=0)
    for model in (ErfAttentionRegressor(max_iter=2), SoftmaxAttentionRegressor(max_iter=2)):
        with pytest.raises(NotFittedError):
            model.predict(X)
        with pytest.raises(TypeError, match="task must be a SingleLocationTask, got str"):
            model.fit_online("single_location")
        model.fit(X, y)
        with pytest.raises(ValueError, match="5 token features per token"):
            model.predict(X[..., :5])
        assert model.predict(SingleLocationTask(4, 6).shift(X, y, 8, random_state=0)[0]).shape == (
            50,
        )


# -- the shared engine's guarantees (issues 31 and 32) ------------------------------------
@pytest.fixture(scope="module")
def data():
    return make_single_location(200, seq_len=6, n_features=4, random_state=0)


_DIVERGING = [
    dict(solver="sgd", learning_rate_init=1e3, max_iter=5),  # the reported case: full batches
    dict(solver="adam", learning_rate_init=1e3, max_iter=5),
    dict(solver="sgd", learning_rate_init=1e3, max_iter=5, batch_size=50),  # minibatches
]


@pytest.mark.parametrize("params", _DIVERGING)
def test_divergence_is_refused_naming_the_step_size(data, params):
    X, y = data
    model = SoftmaxAttentionRegressor(random_state=0, **params)
    with pytest.raises(ValueError, match="Training diverged: the final training loss is") as info:
        model.fit(X, y)
    assert "times that of the model it started from" in str(info.value)
    assert "lower learning_rate_init (it was 1000)" in str(info.value)
    assert not hasattr(model, "loss_curve_")


def test_a_loss_that_overflows_is_refused_naming_the_step_size(data):
    X, y = data
    model = SoftmaxAttentionRegressor(solver="sgd", learning_rate_init=1e3, max_iter=100)
    with pytest.raises(
        ValueError, match=r"Training diverged: the training loss became inf at step \d+\. "
    ):
        model.set_params(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="lower learning_rate_init \\(it was 1000\\)"):
        model.set_params(on_divergence="warn").fit(X, y)  # not finite: never kept
    with pytest.raises(ValueError, match="Training diverged"):
        model.set_params(max_iter=10, on_divergence="raise").fit_online(SingleLocationTask(6, 4))


def test_on_divergence_warn_keeps_the_diverged_model(data):
    X, y = data
    model = SoftmaxAttentionRegressor(
        solver="sgd", learning_rate_init=1e3, max_iter=5, random_state=0, on_divergence="warn"
    )
    with pytest.warns(UserWarning, match="training diverged: .* on_divergence='warn' asks"):
        model.fit(X, y)
    assert model.loss_curve_[-1] > 1e20 * model.loss_curve_[0]
    assert np.isfinite(model.predict(X)).all()


@pytest.mark.parametrize("method", ["fit", "fit_online"])
def test_a_failed_call_leaves_the_fitted_model_exactly_as_it_was(data, method):
    X, y = data
    for model in (
        SoftmaxAttentionRegressor(learning_rate_init=0.05, max_iter=20, random_state=0),
        ErfAttentionRegressor(max_iter=20, random_state=0),
    ):
        model.fit_online(SingleLocationTask(6, 4)) if method == "fit_online" else model.fit(X, y)
        before = _fitted(model)
        failing = [
            lambda m: m.fit(X * 1e200, y),  # the data overflow
            lambda m: m.fit_online(SingleLocationTask(6, 4), n_steps=10**11),  # memory
            lambda m: m.fit(X, np.c_[y, y]),  # the contract
        ]
        if isinstance(model, SoftmaxAttentionRegressor):  # the step size
            failing.append(lambda m: m.set_params(solver="sgd", learning_rate_init=1e3).fit(X, y))
        for fail in failing:
            with pytest.raises(ValueError):
                fail(model)
            _assert_same_fit(model, before)


@pytest.mark.parametrize("cls", [ErfAttentionRegressor, SoftmaxAttentionRegressor])
@pytest.mark.parametrize("solver", ["first", "sgd"])
def test_huge_data_get_a_message_about_the_data_not_the_step(data, cls, solver):
    X, y = data
    solver = {"first": "pgd" if cls is ErfAttentionRegressor else "adam"}.get(solver, solver)
    model = cls(solver=solver, max_iter=5, batch_size=50, random_state=0)
    with pytest.raises(ValueError, match=r"y holds values up to 2\.38e\+200 .* overflow float64"):
        model.fit(X * 1e200, y * 1e200)
    with pytest.raises(
        ValueError, match="before any training step, so the step size is not"
    ) as info:
        model.fit(X * 1e200, y)
    assert "X holds values up to 3.8e+200 and y up to 2.38" in str(info.value)
    assert "learning_rate_init" not in str(info.value)
    with pytest.raises(ValueError, match=r"step size is not the cause: .* SingleLocationTask"):
        model.fit_online(SingleLocationTask(6, 4, gamma=1e200), n_steps=3)


@pytest.mark.parametrize("cls", [ErfAttentionRegressor, SoftmaxAttentionRegressor])
def test_runs_too_large_for_the_memory_are_refused_before_any_allocation(data, cls):
    X, y = data
    with pytest.raises(
        ValueError, match=r"with max_iter=100000000000, .* would need about [\d.e+]+ GiB"
    ):
        cls(max_iter=10**11).fit(X, y)
    with pytest.raises(ValueError, match=r"with n_steps=2, batch_size=1000000000, seq_len=6, n_"):
        cls(solver="sgd", batch_size=10**9).fit_online(SingleLocationTask(6, 4), n_steps=2)
    with pytest.raises(ValueError, match=r"with n_steps=100000000000, .*more than the"):
        cls().fit_online(SingleLocationTask(6, 4), n_steps=10**11)


def test_verbose_shows_a_progress_bar(data, capsys):
    X, y = data
    ErfAttentionRegressor(max_iter=20, random_state=0, verbose=1).fit(X, y)
    SoftmaxAttentionRegressor(max_iter=20, random_state=0, verbose=1).fit_online(
        SingleLocationTask(6, 4)
    )
    err = capsys.readouterr().err
    assert "ErfAttentionRegressor.fit: 100%" in err and "20/20" in err and "loss=" in err
    assert "SoftmaxAttentionRegressor.fit_online: 100%" in err
    ErfAttentionRegressor(max_iter=20, random_state=0).fit(X, y)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("cls", [ErfAttentionRegressor, SoftmaxAttentionRegressor])
def test_fit_online_auto_steps_are_max_iter_and_none_is_deprecated(cls):
    task = SingleLocationTask(6, 4)
    auto = cls(max_iter=7, random_state=0).fit_online(task)
    assert auto.n_iter_ == 7 and len(auto.loss_curve_) == 7
    explicit = cls(max_iter=7, random_state=0).fit_online(task, n_steps="auto")
    with pytest.warns(FutureWarning, match=r"fit_online\(n_steps=None\) is deprecated"):
        old = cls(max_iter=7, random_state=0).fit_online(task, n_steps=None)
    for other in (explicit, old):
        np.testing.assert_array_equal(other.loss_curve_, auto.loss_curve_)
        np.testing.assert_array_equal(other.v_, auto.v_)
    with pytest.raises(TypeError, match="n_steps must be an integer, got 'many'"):
        cls().fit_online(task, n_steps="many")
    with pytest.raises(ValueError, match="n_steps must be an integer >= 1, got 0"):
        cls().fit_online(task, n_steps=0)


@pytest.mark.parametrize(
    "model",
    [
        ErfAttentionRegressor(max_iter=3, random_state=0),
        SoftmaxAttentionRegressor(max_iter=3, random_state=0),
        FCNRegressor("single_location", width=8, max_iter=2, random_state=0),
    ],
    ids=["erf", "softmax", "fcn"],
)
def test_y_is_one_number_per_row_in_fit_and_score_alike(data, model):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps: worse than no model
        column = copy.deepcopy(model).fit(X, y[:, None])
        model.fit(X, y)
    np.testing.assert_array_equal(column.predict(X), model.predict(X))
    assert column.predict(X).shape == model.predict(X).shape == (200,)
    assert model.score(X, y[:, None]) == model.score(X, y)
    for bad in (np.c_[y, y], y[:50], y[None, :]):
        match = r"y must have shape \(n_samples,\) = \(200,\) .*got shape " + re.escape(
            f"{bad.shape}."
        )
        with pytest.raises(ValueError, match=match):
            model.score(X, bad)
        with pytest.raises(ValueError, match="y must have shape"):
            copy.deepcopy(model).fit(X, bad)


@pytest.mark.parametrize("cls", [ErfAttentionRegressor, SoftmaxAttentionRegressor])
def test_inputs_are_never_written(data, cls):
    X, y = data
    X, y = X.copy(), y.copy()
    X.setflags(write=False)
    y.setflags(write=False)
    X0, y0 = X.copy(), y.copy()
    model = cls(solver="sgd", max_iter=5, batch_size=50, random_state=0).fit(X, y)
    model.predict(X), model.score(X, y)
    model.set_params(solver=cls().solver).fit(X, y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


# -- save and load -----------------------------------------------------------------------
_SAVED = {
    "erf-fit": lambda X, y, task: ErfAttentionRegressor(max_iter=5, random_state=0).fit(X, y),
    "erf-sgd-fit": lambda X, y, task: ErfAttentionRegressor(
        solver="sgd", max_iter=5, batch_size=50, random_state=0
    ).fit(X, y),
    "erf-online": lambda X, y, task: ErfAttentionRegressor(
        init="manifold", lambda_schedule="constant", max_iter=5, random_state=0
    ).fit_online(task),
    "softmax-fit": lambda X, y, task: SoftmaxAttentionRegressor(max_iter=5, random_state=0).fit(
        X, y
    ),
    "softmax-online": lambda X, y, task: SoftmaxAttentionRegressor(
        solver="sgd", learning_rate_init=0.05, max_iter=5, batch_size=20, random_state=0
    ).fit_online(task),
}


@pytest.fixture(scope="module")
def saved(data):
    X, y = data
    task = SingleLocationTask(6, 4, noise=0.1, position=2, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # five steps: worse than no model
        return {name: make(X, y, task) for name, make in _SAVED.items()}


@pytest.mark.parametrize("name", list(_SAVED))
def test_save_and_load_give_the_same_model(saved, data, name, tmp_path):
    model = saved[name]
    save_model(model, tmp_path / "m.stsq")
    loaded = load_model(tmp_path / "m.stsq")
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    assert loaded.task_ == model.task_
    _assert_same_fit(loaded, _fitted(model))
    X = data[0]
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    long = model.task_.shift(X, data[1], 9, random_state=0)[0]
    np.testing.assert_array_equal(loaded.predict(long), model.predict(long))
    assert loaded.score(X, data[1]) == model.score(X, data[1])


@pytest.mark.parametrize("cls", [ErfAttentionRegressor, SoftmaxAttentionRegressor])
def test_an_unfitted_model_saves_and_loads_unfitted(cls, tmp_path):
    save_model(cls(max_iter=7, random_state=3), tmp_path / "m.stsq")
    loaded = load_model(tmp_path / "m.stsq")
    assert (
        type(loaded) is cls and loaded.get_params() == cls(max_iter=7, random_state=3).get_params()
    )
    with pytest.raises(NotFittedError):
        loaded.predict(make_single_location(4, seq_len=6, n_features=4, random_state=0)[0])


def test_a_tampered_model_file_or_state_is_refused(saved, tmp_path):
    model = saved["erf-online"]
    path = tmp_path / "m.stsq"
    save_model(model, path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "bad.stsq").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"bad\.stsq"):
        load_model(tmp_path / "bad.stsq")
    state = model.get_fitted_state()
    fresh = ErfAttentionRegressor(**model.get_params())
    cases = [
        (
            {**state, "weights": {"k_": state["weights"]["k_"][:3], "v_": state["weights"]["v_"]}},
            r"weight 'k_' has shape \(3,\), but the model of n_features_in_=4 needs \(4,\)",
        ),
        ({**state, "weights": {"k_": state["weights"]["k_"]}}, r"missing \['v_'\]"),
        ({**state, "fitted": {**state["fitted"], "n_iter_": 0}}, "n_iter_ must be an integer >= 1"),
        ({**state, "fitted": {**state["fitted"], "loss_curve_": [1.0]}}, "n_iter_=5 finite"),
        ({**state, "fitted": {**state["fitted"], "alignment_curve_": [[1, 2]]}}, "6 pairs"),
        ({**state, "fitted": {**state["fitted"], "lambda_": -1.0}}, "lambda_ must be a number > 0"),
        (
            {**state, "fitted": {**state["fitted"], "task": {"gamma": -1.0}}},
            r"its task \(seq_len_=6, n_features_in_=4, task=.*\) is invalid",
        ),
    ]
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            fresh.set_fitted_state(bad)
        assert not hasattr(fresh, "k_")
    with pytest.raises(ValueError, match="invalid hyperparameter"):
        ErfAttentionRegressor(max_iter=0).set_fitted_state(state)


_FRESH = textwrap.dedent(
    """
    import sys
    import numpy as np, torch
    torch.set_num_threads(1)
    from stsq_learn import load_model
    X = np.load(sys.argv[1])
    for path in sys.argv[2:]:
        np.save(path + ".npy", load_model(path).predict(X))
    """
)


@pytest.mark.slow
def test_saved_models_predict_the_same_in_a_fresh_process(saved, data, tmp_path):
    X = data[0]
    np.save(tmp_path / "X.npy", X)
    paths = []
    for name, model in saved.items():
        paths.append(str(tmp_path / f"{name}.stsq"))
        save_model(model, paths[-1])
    env = child_env(PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH, str(tmp_path / "X.npy"), *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    for name, path in zip(saved, paths, strict=True):
        np.testing.assert_array_equal(np.load(path + ".npy"), saved[name].predict(X))


def test_models_pickle_and_predict_the_same(saved, data):
    for model in saved.values():
        np.testing.assert_array_equal(
            pickle.loads(pickle.dumps(model)).predict(data[0]), model.predict(data[0])
        )


def test_the_positional_attention_core_refuses_a_task_selected_by_content():
    from stsq_learn import AttentionRegressor, FCNRegressor, make_single_location

    X, y = make_single_location(50, n_features=4, seq_len=5, random_state=0)
    with pytest.raises(ValueError, match="the task 'single_location' has none"):
        AttentionRegressor(task="single_location").fit(X, y)
    # The fully-connected baseline reads the flattened row of any task.
    model = FCNRegressor(task="single_location", width=8, max_iter=2, random_state=0).fit(X, y)
    assert model.predict(X).shape == (50,)
