"""The theory of in-context regression: the reference values, and Monte Carlo with our prompts."""

import numpy as np
import pytest

from stsq_learn import (
    InContextRegressionTask,
    PromptGradientStep,
    PromptRidge,
    in_context_best_train_length,
    in_context_gd_step,
    in_context_least_squares_risk,
    in_context_preconditioner,
    in_context_risk,
    in_context_slope,
)

ISO = np.ones(5)
ANISO = np.array([2.0, 1.5, 1.0, 0.5, 0.25])


# -- the reference values (Zhang, Frei and Bartlett's formula, d = 5, N = 20) --------------
@pytest.mark.parametrize(
    ("covariance", "expected"),
    [(ISO, (2.0414, 1.1538, 0.4882, 0.2663)), (ANISO, (1.978, 1.134, 0.501, 0.290))],
    ids=["isotropic", "anisotropic"],
)
def test_risk_matches_the_reference_table(covariance, expected):
    got = [in_context_risk(m, 20, covariance) for m in (10, 20, 80, np.inf)]
    np.testing.assert_allclose(got, expected, atol=1e-3)


def test_reference_values_at_d20_and_the_isotropic_closed_form():
    assert in_context_risk(40, 40, np.ones(20)) == pytest.approx(6.885, abs=1e-3)
    assert in_context_risk(np.inf, 40, np.ones(20)) == pytest.approx(2.370, abs=1e-3)
    d, N = 5, 20
    g = 1 + (d + 1) / N
    for M in (3, 10, 80):
        closed = d * ((1 + (d + 1) / M) / g**2 - 2 / g + 1)
        assert in_context_risk(M, N, ISO) == pytest.approx(closed, rel=1e-12)
    np.testing.assert_allclose(in_context_preconditioner(N, ISO), np.eye(d) / g, rtol=1e-12)


def test_best_gd_step_and_least_squares_columns():
    for M, risk in ((10, 1.875), (20, 1.1538), (80, 0.3488)):
        eta = in_context_gd_step(M, ISO)
        assert eta == pytest.approx(M / (M + 6), rel=1e-12)
        gd = in_context_risk(M, M, ISO, preconditioner=eta * np.eye(5))
        assert gd == pytest.approx(risk, abs=1e-3)
        assert gd == pytest.approx(30 / (M + 6), rel=1e-12)  # d (d + 1) / (M + d + 1)
        assert in_context_least_squares_risk(M, ISO) == 0.0
    # the step at M = N is the layer's: the two meet there
    assert in_context_risk(20, 20, ISO) == pytest.approx(
        in_context_risk(20, 20, ISO, preconditioner=in_context_gd_step(20, ISO) * np.eye(5))
    )
    assert in_context_gd_step(np.inf, ISO) == 1.0
    assert in_context_risk(np.inf, 20, ISO, preconditioner=np.eye(5)) == pytest.approx(0, abs=1e-12)
    assert in_context_least_squares_risk(3, ISO) == pytest.approx(2.0)  # d - M below d


def test_covariate_scale_is_not_tolerated():
    """R / c^2 at M = inf for covariates scaled by c at test: 3.26, 0.266, 21.6, 175."""
    A = in_context_preconditioner(20, ISO)
    got = [in_context_risk(np.inf, 20, c**2 * ISO, preconditioner=A) / c**2 for c in (0.5, 1, 2, 3)]
    np.testing.assert_allclose(got, [3.26, 0.266, 21.6, 175], rtol=3e-3)
    for c in (0.5, 2.0, 3.0):
        slope = in_context_slope(20, c**2 * ISO, preconditioner=A)
        assert slope == pytest.approx(c**2 / 1.3, rel=1e-12)
    assert in_context_slope(20, ISO) == pytest.approx(1 / 1.3)


def test_label_noise_adds_its_exact_term():
    A = in_context_preconditioner(20, ANISO)
    L = np.diag(ANISO)
    for M in (5, 40):
        added = in_context_risk(M, 20, ANISO, noise=0.7) - in_context_risk(M, 20, ANISO)
        assert added == pytest.approx(0.49 / M * np.trace(A @ A @ L @ L), rel=1e-10)


def test_best_train_length():
    assert in_context_best_train_length(40, ISO) == 40.0
    assert in_context_best_train_length(40, ANISO, query_covariance=ISO) == 40.0
    assert in_context_best_train_length(np.inf, ANISO) == np.inf
    # Lambda = I with test noise: N = M (d + 1) / (d + 1 + sigma^2)
    assert in_context_best_train_length(40, ISO, noise=1.0) == pytest.approx(40 * 6 / 7, rel=1e-6)
    # a numerical minimum is a minimum
    best = in_context_best_train_length(30, ANISO, noise=1.5)

    def risk(N):
        return in_context_risk(30, N, ANISO, noise=1.5)

    assert risk(round(best)) <= min(risk(round(best) - 2), risk(round(best) + 2))


def test_noisy_training_minimum_and_a_precondition_from_noise():
    """Trained on noisy labels the minimum is Gamma_sigma^{-1}: the risk is least there."""
    for sigma in (0.0, 1.0):
        A = in_context_preconditioner(20, ANISO, noise=sigma)
        best = in_context_risk(20, 20, ANISO, noise=sigma, preconditioner=A)
        rng = np.random.default_rng(0)
        for _ in range(5):
            other = A + 1e-3 * rng.standard_normal(A.shape)
            assert in_context_risk(20, 20, ANISO, noise=sigma, preconditioner=other) > best


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: in_context_risk(0, 20, ISO), ValueError, "n_test must be an integer >= 1"),
        (lambda: in_context_risk(2.5, 20, ISO), ValueError, "n_test must be an integer"),
        (lambda: in_context_risk("10", 20, ISO), TypeError, "n_test must be an integer"),
        (lambda: in_context_preconditioner(True, ISO), TypeError, "n_examples must be"),
        (lambda: in_context_risk(10, 20, [[1, 2], [0, 1]]), ValueError, "must be symmetric"),
        (lambda: in_context_risk(10, 20, [[1, 2], [2, 1]]), ValueError, "positive semi-definite"),
        (lambda: in_context_risk(10, 20, [1, -1]), ValueError, "variances, which are >= 0"),
        (lambda: in_context_risk(10, 20, ISO, preconditioner=np.eye(4)), ValueError, r"\(5, 5\)"),
        (
            lambda: in_context_risk(10, 20, ISO, query_covariance=np.ones(4)),
            ValueError,
            "query_covariance is for 4 features",
        ),
        (lambda: in_context_risk(10, 20, ISO, noise=-1), ValueError, "noise must be"),
        (
            lambda: in_context_least_squares_risk(3, ANISO),
            ValueError,
            "isotropic covariance",
        ),
        (lambda: in_context_preconditioner(np.inf, [1.0, 0.0]), ValueError, "singular"),
    ],
)
def test_bad_arguments_are_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- Monte Carlo with the package's own prompts ------------------------------------------
def _preconditioned(X, A):
    """``x_q^T A (1/M) sum_i y_i x_i`` of every prompt (NumPy, the theory's prediction)."""
    M = X.shape[1] - 1
    h = np.einsum("nm,nmd->nd", X[:, :-1, -1], X[:, :-1, :-1]) / M
    return np.einsum("nd,de,ne->n", X[:, -1, :-1], A, h)


def _assert_monte_carlo(errors, expected):
    """The mean of ``errors`` is ``expected`` within 4 standard errors."""
    mean, se = errors.mean(), errors.std() / np.sqrt(len(errors))
    assert abs(mean - expected) < 4 * se, (mean, se, expected)


@pytest.mark.parametrize(
    ("task", "A"),
    [
        (InContextRegressionTask(11, 5), None),
        (InContextRegressionTask(4, 5, covariance=ANISO), None),
        (
            InContextRegressionTask(31, 3, covariance=[[2, 0.8, 0], [0.8, 1, 0.3], [0, 0.3, 0.5]]),
            None,
        ),
        (InContextRegressionTask(11, 5, covariance=ANISO, noise=0.8), None),
        (InContextRegressionTask(11, 5, covariance=ANISO, query_covariance=ISO[::-1] * 3), None),
        (InContextRegressionTask(8, 5, covariance=ANISO), "asymmetric"),
    ],
    ids=["iso-M10", "aniso-M3", "correlated", "noise", "query-shift", "asymmetric-A"],
)
def test_risk_formula_matches_monte_carlo(task, A):
    """The general form (preconditioner, noise, another query law) on 8000 prompts."""
    d, M = task.n_features, task.n_examples
    if A is None:
        A = in_context_preconditioner(20, task.covariance_matrix)
    else:  # x_q^T A h, not x_q^T A^T h: the formula's A^T would give 6.10 here, not 3.85
        A = np.eye(d) / 2
        A[0, 4] = 1.5
    X, y = task.sample(8000, random_state=0)
    errors = (_preconditioned(X, A) - y) ** 2
    expected = in_context_risk(
        M,
        20,
        task.covariance_matrix,
        noise=task.noise,
        query_covariance=task.query_covariance,
        preconditioner=A,
    )
    _assert_monte_carlo(errors, expected)


def test_baselines_risks_match_monte_carlo():
    task = InContextRegressionTask(4, 5, noise=0.5)  # M = 3 < d: least squares misses w
    X, y = task.sample(4000, random_state=0)
    ridge = PromptRidge().fit(X, y)
    _assert_monte_carlo(
        (ridge.predict(X) - y) ** 2, in_context_least_squares_risk(3, ISO, noise=0.5)
    )
    task = InContextRegressionTask(16, 5, covariance=ANISO, noise=0.5)
    X, y = task.sample(4000, random_state=1)
    _assert_monte_carlo(
        (ridge.predict(X) - y) ** 2, in_context_least_squares_risk(15, ANISO, noise=0.5)
    )
    eta = in_context_gd_step(15, ANISO, noise=0.5)
    gd = PromptGradientStep(step=eta).fit(X, y)
    _assert_monte_carlo(
        (gd.predict(X) - y) ** 2,
        in_context_risk(15, 15, ANISO, noise=0.5, preconditioner=eta * np.eye(5)),
    )


def test_slope_under_a_covariate_scale_matches_monte_carlo():
    A = in_context_preconditioner(20, ISO)
    X, y = InContextRegressionTask(21, 5).scaled(2.0).sample(4000, random_state=0)
    pred = _preconditioned(X, A)
    slope = (pred @ y) / (y @ y)
    assert slope == pytest.approx(4 / 1.3, rel=0.03)
