"""Step sizes that follow the width: "auto" resolved, per-block rates, stopping, failures."""

import itertools
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
from stsq_learn.engine import rates
from stsq_learn.engine.rates import Cooldown

TASK = SparseTokenSelectionTask(8, 3, 2)


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(120, 8, 3, 2, random_state=0)


# -- the rule -------------------------------------------------------------------------
def test_planned_steps_are_those_of_the_gamma_travel():
    assert rates.auto_steps() == 960  # 120 at the largest gamma-rate, 1/8, at every width


def test_the_noise_rate_falls_like_one_over_root_width():
    assert [rates.noise_rate(m) for m in (1, 16, 40)] == [0.125] * 3  # capped up to (0.8 * 8)^2
    assert [rates.noise_rate(m) for m in (64, 256, 1024)] == pytest.approx([0.1, 0.05, 0.025])


def test_sgd_rates_are_linear_in_the_width_and_move_gamma_at_its_own_rate():
    (a, boost_a), (b, boost_b) = (rates.sgd_rates(m, 2.0, 960) for m in (256, 1024))
    assert b == pytest.approx(2 * a)  # c m / L0, c = 0.8 / sqrt(m)
    assert a == pytest.approx(0.05 * 256 / 2.0)
    assert (boost_a, boost_b) == pytest.approx((2.5, 5))  # gamma at 1/8 = c * identity_rate
    assert rates.sgd_rates(16, 2.0, 960) == pytest.approx((16 / 8 / 2.0, 1))  # c capped at 1/8
    # A plan long enough for 120 / steps to fall under the width's noise rate is plain SGD.
    assert rates.sgd_rates(1024, 2.0, 9600) == pytest.approx((120 / 9600 * 1024 / 2.0, 1))
    assert rates.sgd_rates(1024, 2.0, 2400) == pytest.approx((0.025 * 1024 / 2.0, 2))


def test_auto_resolves_in_fit_and_is_recorded(data):
    X, y = data
    model = SparseTokenSelector(width=16, random_state=0)
    model.fit(X, y)
    zero_loss = float(np.square(y).sum() / len(y))
    assert model.solver_ == "sgd"
    assert model.planned_steps_ == rates.auto_steps() == 960
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


def test_fit_online_runs_the_planned_steps():
    task = SparseTokenSelectionTask(4, 2, 1)
    model = SparseTokenSelector(width=64, batch_size=8, random_state=0).fit_online(task)
    assert model.n_iter_ == model.planned_steps_ == rates.auto_steps() == 960
    assert model.learning_rate_init_ == pytest.approx(0.1 * 64 / task.trivial_mse)
    assert model.learning_rate == "cooldown"
    assert model.net_.history[-1, "batches", -1, "event_lr"] == pytest.approx(
        model.learning_rate_init_ / 192  # the last step of the linear decay over 192
    )


def test_fcn_auto_step_follows_its_size_and_plan_with_a_cooldown_online(data):
    task = SparseTokenSelectionTask(8, 3, 2)  # 32 inputs, 3 outputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FCNSelector(width=64, batch_size=16, random_state=0).fit_online(task, 10)
    expected = rates.FCN_ADAM_SCALE / 32 * np.sqrt(256 / 64) * (10 / 600) ** 0.3
    assert (model.solver_, model.planned_steps_) == ("adam", 10)
    assert model.learning_rate_init_ == pytest.approx(expected)
    lrs = [b["event_lr"] for b in model.net_.history[-1]["batches"]]
    np.testing.assert_allclose(lrs, expected * np.array([1] * 9 + [0.5]))  # the cooldown
    assert not hasattr(model, "token_block_rate_")
    with pytest.raises(ValueError, match="solver"):
        FCNSelector(solver="auto").fit_online(task, 10)


def test_fcn_auto_step_in_fit_is_the_reference_plans_made_adaptive(data):
    """fit's epochs end where the loss stalls: the step of 600 steps, divided by 5 at a stall."""
    X, y = data  # 32 inputs, 3 outputs; 120 rows: one step an epoch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FCNSelector(width=256, max_iter=300, n_iter_no_change=2, random_state=0)
        model.fit(X, y)
    expected = rates.FCN_ADAM_SCALE / 32
    assert model.learning_rate_init_ == pytest.approx(expected)
    lrs = [e["batches"][-1]["event_lr"] for e in model.net_.history]
    assert lrs[0] == pytest.approx(expected) and min(lrs) < expected / 4  # divided at stalls
    ratios = {round(b / a, 6) for a, b in itertools.pairwise(lrs)}
    assert ratios <= {1.0, 0.2}


def test_fcn_auto_rule_in_each_size():
    """1 / fan-in, 1 / sqrt(width), 1 / sqrt(outputs) above 8, (steps / 600) ** 0.3, a cap."""
    base = rates.fcn_adam_rate(256, 400, 4, 600)
    assert base == pytest.approx(rates.FCN_ADAM_SCALE / 400)
    assert rates.fcn_adam_rate(1024, 400, 4, 600) == pytest.approx(base / 2)
    assert rates.fcn_adam_rate(256, 800, 4, 600) == pytest.approx(base / 2)
    assert rates.fcn_adam_rate(256, 400, 1, 600) == rates.fcn_adam_rate(256, 400, 8, 600) == base
    assert rates.fcn_adam_rate(256, 400, 32, 600) == pytest.approx(base / 2)
    assert rates.fcn_adam_rate(256, 400, 4, 600 * 2**10) == pytest.approx(base * 2**3)
    assert rates.fcn_adam_rate(8, 4, 1, 10**6) == rates.FCN_MAX_RATE == 0.05


@pytest.mark.parametrize("params", [{"learning_rate_init": 0.001}, {"solver": "sgd"}])
def test_fcn_explicit_step_and_sgd_keep_0_6s_constant_rate(params, data):
    """An explicit step, and plain SGD's "auto" (0.001), run at a constant rate, as in 0.6."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FCNSelector(width=8, max_iter=3, random_state=0, **params).fit(X, y)
        same = FCNSelector(
            width=8,
            max_iter=3,
            random_state=0,
            learning_rate="constant",
            **{"learning_rate_init": 0.001, **params},
        ).fit(X, y)
    assert model.learning_rate_init_ == 0.001
    assert "event_lr" not in model.net_.history[-1]["batches"][-1]  # no schedule ran
    np.testing.assert_array_equal(model.predict(X), same.predict(X))


@pytest.mark.slow
def test_fcn_default_is_fair_where_0_6s_was_not():
    """The issue's case: FCNSelector(width=256) at T=16, 600 online steps (0.6: R^2 0.54)."""
    task = SparseTokenSelectionTask(16, 4, 2)
    X, y = task.sample(2000, random_state=1)
    scores = {
        step: FCNSelector(learning_rate_init=step, random_state=0)
        .fit_online(task, n_steps=600)
        .score(X, y)
        for step in ("auto", 0.001)
    }
    assert scores[0.001] < 0.6 and scores["auto"] > 0.9


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


def _identity_run(identity_rate, X, y):
    """One SGD step from W = 0 with the given pace of W_pp's identity component."""
    model = SparseTokenSelector(
        width=8,
        solver="sgd",
        learning_rate_init=0.5,
        learning_rate="constant",
        max_iter=1,
        batch_size=len(X),
        random_state=0,
    )
    callbacks = [] if identity_rate == 1 else [rates.IdentityRate(identity_rate)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.set_params(callbacks=callbacks).fit(X, y).key_query_


def test_the_identity_component_moves_at_its_own_rate(data):
    """From W = 0, one step: the step's component along I is scaled, the rest is not."""
    X, y = data
    plain, paced = _identity_run(1, X, y), _identity_run(4.0, X, y)
    np.testing.assert_array_equal(paced[:3], plain[:3])  # the token rows
    step, paced_step = plain[3:], paced[3:]
    along = np.trace(step) / 8 * np.eye(8)
    assert abs(np.trace(step)) > 0
    np.testing.assert_allclose(paced_step, step + 3 * along, rtol=1e-5, atol=1e-7)


def test_auto_paces_the_identity_only_where_the_noise_rate_is_below_1_8(data):
    X, y = data

    def paces(model):
        return [cb.rate for _, cb in model.net_.callbacks_ if isinstance(cb, rates.IdentityRate)]

    wide = SparseTokenSelector(width=256, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert paces(wide.fit(X, y)) == [pytest.approx(2.5)]  # gamma at 1/8, the rest at 0.05
        assert paces(SparseTokenSelector(width=16, max_iter=2).fit(X, y)) == []
        explicit = SparseTokenSelector(width=256, learning_rate_init=1.0, max_iter=2).fit(X, y)
        assert paces(explicit) == []  # a number is used as it is: plain SGD


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
