"""Step sizes that follow the width: "auto" resolved, per-block rates, stopping, failures."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from stsq_learn import (
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
    make_sparse_token_selection,
)
from stsq_learn import _rates as rates
from stsq_learn._rates import Cooldown

TASK = SparseTokenSelectionTask(8, 3, 2)


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(120, 8, 3, 2, random_state=0)


# -- the rule -------------------------------------------------------------------------
def test_planned_steps_grow_with_the_width():
    steps = [rates.auto_steps(m) for m in (1, 16, 40, 64, 256, 1024, 2048)]
    assert steps[:3] == [960, 960, 960]  # c capped at 1/8 up to width (0.8 * 8)^2 = 41
    assert steps[3:6] == [1200, 2400, 4800]  # 120 / c with c = 0.8 / sqrt(width)
    assert steps[6] == pytest.approx(math.sqrt(2) * steps[5], rel=1e-3)


def test_sgd_rate_is_linear_in_the_width_for_a_given_plan():
    a, b = (rates.sgd_rate(m, 2.0, 1600) for m in (64, 256))
    assert b == pytest.approx(4 * a)
    assert a == pytest.approx(120 / 1600 * 64 / 2.0)
    assert rates.sgd_rate(64, 2.0, 100) == pytest.approx(64 / 8 / 2.0)  # c capped at 1/8


def test_auto_resolves_in_fit_and_is_recorded(data):
    X, y = data
    model = SparseTokenSelector(width=16, random_state=0)
    model.fit(X, y)
    zero_loss = float(np.square(y).sum() / len(y))
    assert model.solver_ == "sgd"
    assert model.planned_steps_ == rates.auto_steps(16) == 960
    assert model.n_iter_ == 960  # one batch of 120 rows per epoch: 960 planned epochs
    assert model.learning_rate_init_ == pytest.approx(16 / 8 / zero_loss, rel=1e-6)
    assert model.token_block_rate_ == 1 / 16
    assert model.learning_rate_init == "auto" and model.solver == "auto"  # untouched


def test_explicit_values_mean_what_they_say(data):
    X, y = data
    model = SparseTokenSelector(
        width=16, solver="adam", learning_rate_init=0.02, max_iter=3, random_state=0
    ).fit(X, y)
    assert (model.solver_, model.learning_rate_init_, model.token_block_rate_) == ("adam", 0.02, 1)
    assert model.n_iter_ == 3 and model.planned_steps_ == 3
    assert model.net_.optimizer_.__class__ is torch.optim.Adam
    frozen = SparseTokenSelector(width=16, learn_token_block=False, max_iter=2).fit(X, y)
    assert frozen.token_block_rate_ is None
    sgd = SparseTokenSelector(
        width=16, solver="sgd", learning_rate_init=0.5, token_block_rate=0.25, max_iter=2
    ).fit(X, y)
    assert (sgd.learning_rate_init_, sgd.token_block_rate_) == (0.5, 0.25)


def test_auto_rate_of_adam_is_0_3s():
    model = SparseTokenSelector(width=8, solver="adam", random_state=0)
    model.fit_online(TASK, n_steps=3)
    assert model.learning_rate_init_ == rates.ADAM_RATE == 0.01
    assert model.token_block_rate_ == 1.0


def test_fit_online_plans_its_steps_from_the_width():
    task = SparseTokenSelectionTask(4, 2, 1)
    model = SparseTokenSelector(width=64, batch_size=8, random_state=0).fit_online(task)
    assert model.n_iter_ == model.planned_steps_ == rates.auto_steps(64) == 1200
    assert model.learning_rate_init_ == pytest.approx(0.1 * 64 / task.trivial_mse)
    assert model.learning_rate == "cooldown"
    assert model.net_.history[-1, "batches", -1, "event_lr"] == pytest.approx(
        model.learning_rate_init_ / 240  # the last step of the linear decay over 240
    )


def test_fcn_keeps_its_defaults(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FCNSelector(width=8, max_iter=2, random_state=0).fit(X, y)
    assert (model.solver_, model.learning_rate_init_, model.planned_steps_) == ("adam", 0.001, 2)
    assert not hasattr(model, "token_block_rate_")
    with pytest.raises(ValueError, match="solver"):
        FCNSelector(solver="auto").fit(X, y)


# -- per-block rates ------------------------------------------------------------------
def _one_step(token_block_rate, solver, X, y):
    model = SparseTokenSelector(
        width=8,
        solver=solver,
        learning_rate_init=0.5,
        token_block_rate=token_block_rate,
        learning_rate="constant",
        max_iter=1,
        batch_size=len(X),
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y).key_query_


@pytest.mark.parametrize("solver", ["sgd", "adam"])
def test_the_token_rows_move_at_their_own_rate(solver, data):
    """From W = 0, one step: the token rows move ``token_block_rate`` times as far."""
    X, y = data
    full, slow = _one_step(1.0, solver, X, y), _one_step(0.125, solver, X, y)
    np.testing.assert_allclose(slow[3:], full[3:], rtol=1e-6)  # the positional rows
    np.testing.assert_allclose(slow[:3], 0.125 * full[:3], rtol=1e-5, atol=1e-9)
    assert np.abs(full[:3]).max() > 0


# -- stopping -------------------------------------------------------------------------
def test_a_planned_run_ends_without_a_convergence_warning(data):
    X, y = data
    model = SparseTokenSelector(width=8, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(X, y)
    assert model.n_iter_ == 5


def test_early_stopping_when_asked_for(data):
    X, y = data
    model = SparseTokenSelector(width=8, max_iter=50, n_iter_no_change=2, tol=1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(X, y)
    assert model.n_iter_ == 3  # the first epoch sets the best, two misses stop
    assert model.net_.history[-1]["stop_reason"] == "no_improvement"
    capped = SparseTokenSelector(width=8, max_iter=2, n_iter_no_change=5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="maximum iterations"):
        capped.fit(X, y)


def test_cooldown_schedule_holds_then_falls_linearly():
    factor = Cooldown(10)
    assert [factor(k) for k in range(10)] == pytest.approx([1, 1, 1, 1, 1, 1, 1, 1, 1, 0.5])
    factor = Cooldown(100)
    assert factor(79) == 1 and factor(90) == pytest.approx(0.5) and factor(100) == 0


# -- failures ---------------------------------------------------------------------------
def test_worse_than_zero_warns_with_the_cause(data):
    X, y = data
    model = SparseTokenSelector(width=8, solver="sgd", learning_rate_init=1e-9, max_iter=1)
    # W = 0 averages the tokens, which anti-correlate with these targets: about 1.75
    # times the loss of predicting 0 (T=8, q=2), and a rate of 1e-9 does not move it.
    with pytest.warns(UserWarning, match=r"1\.\d+ times that of predicting 0.*too short"):
        model.fit(X, -y)
    assert model.n_iter_ == 1  # a result, with a warning


def test_a_barely_trained_model_worse_than_zero_is_no_divergence(data):
    """An FCN starts worse than 0; a step of 1e-9 leaves it there: a warning, not an error."""
    X, y = data
    model = FCNSelector(width=2, max_iter=1, learning_rate_init=1e-9, random_state=0)
    # Targets 100 times smaller than the initial outputs: far more than twice the loss of 0.
    with pytest.warns(UserWarning, match=r"\d+ times that of predicting 0.*too short"):
        model.fit(X, 0.01 * y)
    assert model.n_iter_ == 1


def test_divergence_raises_and_leaves_the_model_as_it_was(data):
    X, y = data
    model = SparseTokenSelector(width=8, max_iter=2, random_state=0).fit(X, y)
    before = model.key_query_
    state = {k: v for k, v in vars(model).items() if k.endswith("_")}
    model.set_params(
        solver="sgd", learning_rate_init=1e4, token_block_rate=1.0, learning_rate="constant"
    )
    with pytest.raises(ValueError, match=r"Training diverged.*step size"):
        model.fit(X, y)
    np.testing.assert_array_equal(model.key_query_, before)
    assert model.n_iter_ == state["n_iter_"] and model.solver_ == state["solver_"]


# -- the claim (slow) ---------------------------------------------------------------------
@pytest.mark.slow
def test_defaults_reach_the_floor_of_every_width():
    """T=16, q=3: with only the width set, each width ends near its floor."""
    X, y = make_sparse_token_selection(4000, 16, 8, 3, random_state=0)
    X_test, y_test = make_sparse_token_selection(4000, 16, 8, 3, random_state=1)
    errors = []
    for m in (16, 64):
        model = SparseTokenSelector(width=m, random_state=0).fit(X, y)
        errors.append(1 - model.score(X_test, y_test))
        floor = isotropic_floor(16, 3, m, random_state=0).relative_mse
        assert errors[-1] < 1.1 * floor, (m, errors[-1], floor)
    assert errors[1] < errors[0]
