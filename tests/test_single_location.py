"""Single-location regression: the task, the closed-form risks and the two estimators."""

import math

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression

from stsq_learn import (
    ErfAttentionRegressor,
    SingleLocationTask,
    SoftmaxAttentionRegressor,
    make_single_location,
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


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _unit(x):
    return x / np.linalg.norm(x)


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
    ],
)
def test_task_refuses_bad_sizes(kwargs, error, match):
    with pytest.raises(error, match=match):
        SingleLocationTask(**kwargs)


def test_data_contract_errors():
    X, y = make_single_location(20, 4, 3, random_state=0)
    task, X_checked, _ = SingleLocationTask.from_data(X, y)
    assert (task.seq_len, task.n_features) == (4, 3) and X_checked is X
    with pytest.raises(ValueError, match=r"must be 3-D, \(n_samples, seq_len, n_features\)"):
        SingleLocationTask.from_data(X[:, 0], y)
    with pytest.raises(ValueError, match=r"y must have shape \(n_samples,\) = \(20,\)"):
        SingleLocationTask.from_data(X, y[:5])
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
        (dict(solver="adam"), ValueError, "solver must be one of 'pgd', 'sgd', got 'adam'"),
        (dict(lambda_init=0), ValueError, "lambda_init must be a finite number > 0, got 0"),
        (dict(lambda_schedule="cosine"), ValueError, "lambda_schedule"),
        (dict(init="zeros"), ValueError, "init must be one of"),
        (dict(max_iter=0), ValueError, "max_iter must be an integer >= 1, got 0"),
        (dict(batch_size=2.5), TypeError, "batch_size must be an integer"),
        (dict(learning_rate_init="big"), TypeError, "learning_rate_init must be a real"),
    ],
)
def test_bad_hyperparameters_fail_before_any_work_and_keep_the_fit(params, error, match):
    X, y = make_single_location(50, 4, 6, random_state=0)
    model = ErfAttentionRegressor(max_iter=5, random_state=0).fit(X, y)
    k = model.k_.copy()
    with pytest.raises(error, match=match):
        model.set_params(**params).fit(X, y)
    np.testing.assert_array_equal(model.k_, k)


def test_unfitted_and_wrong_inputs():
    X, y = make_single_location(50, 4, 6, random_state=0)
    for model in (ErfAttentionRegressor(max_iter=2), SoftmaxAttentionRegressor(max_iter=2)):
        with pytest.raises(NotFittedError):
            model.predict(X)
        with pytest.raises(TypeError, match="task must be a SingleLocationTask"):
            model.fit_online("single_location")
        model.fit(X, y)
        with pytest.raises(ValueError, match="5 token features per token"):
            model.predict(X[..., :5])
        assert model.predict(SingleLocationTask(4, 6).shift(X, y, 8, random_state=0)[0]).shape == (
            50,
        )


# -- the experiment -------------------------------------------------------------------
def test_experiment_tiny_preset_and_its_outputs(tmp_path):
    import json

    from stsq_learn.experiments import reproduce

    results = reproduce("tiny", only="content", out=tmp_path, progress=False, n_threads=1)
    res = results["single_location"]
    assert len(res.runs) == 4 and {r["init"] for r in res.runs} == {"sphere", "manifold"}
    for run in res.runs:
        assert run["steps"][0] == 0 and run["steps"][-1] == 199
        assert len(run["risk"]) == len(run["steps"]) == len(run["key_alignment"])
        final = run["final"]
        assert final["oracle"] == pytest.approx(
            oracle_risk(SingleLocationTask(5, 20), final["lambda"])
        )
    b = res.baselines
    assert b["linear"] == pytest.approx(0.5 - 0.25 / 4.5) and b["bayes"] < b["linear"] < b["zero"]
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload["single_location"]["reached"]) == {
        "sphere/decay",
        "sphere/constant",
        "manifold/decay",
        "manifold/constant",
    }
    assert (tmp_path / "single_location.png").stat().st_size > 0
    assert "single_location (d=20, L=5, 200 steps)" in (tmp_path / "summary.md").read_text()


def test_the_positional_attention_core_refuses_a_task_selected_by_content():
    from stsq_learn import AttentionRegressor, FCNRegressor, make_single_location

    X, y = make_single_location(50, n_features=4, seq_len=5, random_state=0)
    with pytest.raises(ValueError, match="the task 'single_location' has none"):
        AttentionRegressor(task="single_location").fit(X, y)
    # The fully-connected baseline reads the flattened row of any task.
    model = FCNRegressor(task="single_location", width=8, max_iter=2, random_state=0).fit(X, y)
    assert model.predict(X).shape == (50,)
