"""The shared training loop: learning-rate schedules, warm start, training draws."""

import math
import warnings
from unittest import mock

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Callback

from stsq_learn import (
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    load_model,
    make_sparse_token_selection,
    save_model,
)
from stsq_learn.nn import positional_alignment

TASK = SparseTokenSelectionTask(8, 3, 2)
ADAM = {"solver": "adam", "learning_rate_init": 0.01}  # 0.3's optimiser, for the schedule tests


def _lr(model):
    """The rate of the last training step, as the schedule recorded it in the history."""
    return model.net_.history[-1, "batches", -1, "event_lr"]


def _step_rates(model, task, n_steps, optimizer=torch.optim.Adam):
    """The rate of every step of ``fit_online``, read by a spy on the optimiser's ``step``."""
    seen = []
    step = optimizer.step

    def recording(opt, *args, **kwargs):
        seen.append(opt.param_groups[0]["lr"])
        return step(opt, *args, **kwargs)

    with mock.patch.object(optimizer, "step", recording):
        model.fit_online(task, n_steps=n_steps)
    return seen


# -- learning_rate ----------------------------------------------------------------
def test_constant_rate_keeps_learning_rate_init():
    model = SparseTokenSelector(width=4, batch_size=16, learning_rate="constant", **ADAM)
    rates = _step_rates(model.set_params(random_state=0), TASK, 5)
    assert rates == [0.01] * 5


def test_cosine_rate_follows_a_half_cosine_over_the_planned_steps():
    model = SparseTokenSelector(
        width=4, batch_size=16, learning_rate="cosine", random_state=0, **ADAM
    )
    rates = _step_rates(model, TASK, 10)
    expected = [0.005 * (1 + math.cos(math.pi * k / 10)) for k in range(10)]
    np.testing.assert_allclose(rates, expected, rtol=1e-12)


def test_cosine_rate_spans_max_iter_epochs_in_fit(tiny_data):
    X, y = tiny_data  # 120 rows, batch 50: 3 batches per epoch, 4 epochs -> 12 steps
    model = SparseTokenSelector(
        width=4, batch_size=50, max_iter=4, learning_rate="cosine", random_state=0, **ADAM
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert _lr(model) == pytest.approx(0.005 * (1 + math.cos(math.pi * 11 / 12)))


def test_invscaling_rate_counts_rows_seen():
    model = SparseTokenSelector(
        width=4, batch_size=16, learning_rate="invscaling", power_t=0.25, random_state=0, **ADAM
    )
    rates = _step_rates(model, TASK, 4)
    np.testing.assert_allclose(rates, [0.01 / (16 * k + 1) ** 0.25 for k in range(4)])


def test_adaptive_rate_divides_by_five_then_stops(tiny_data):
    """tol larger than any improvement: every epoch after the first is a miss."""
    X, y = tiny_data
    model = SparseTokenSelector(
        width=4,
        learning_rate="adaptive",
        tol=1e9,
        n_iter_no_change=1,
        max_iter=50,
        random_state=0,
        **ADAM,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a ConvergenceWarning nor "interrupted"
        model.fit(X, y)
    # 0.01 / 5**6 = 6.4e-7 <= 1e-6: epoch 1 sets the best, epochs 2-7 divide, 8 stops.
    assert model.n_iter_ == 8
    assert _lr(model) == pytest.approx(0.01 / 5**6)


def test_adaptive_rate_keeps_the_rate_while_the_loss_improves(tiny_data):
    X, y = tiny_data
    model = SparseTokenSelector(
        width=8, learning_rate="adaptive", max_iter=5, random_state=0, **ADAM
    )
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    assert _lr(model) == 0.01


def test_adaptive_rate_is_refused_online_before_training():
    model = SparseTokenSelector(width=4, learning_rate="adaptive")
    with pytest.raises(ValueError, match=r"learning_rate='adaptive'.*fit_online has no epochs"):
        model.fit_online(TASK, n_steps=3)
    assert not hasattr(model, "net_")


@pytest.mark.parametrize(
    "params, match",
    [
        ({"learning_rate": "exponential"}, "learning_rate"),
        ({"power_t": -1.0}, "power_t"),
        ({"warm_start": "yes"}, "warm_start"),
        ({"n_pe_samples_fit": 0}, "n_pe_samples_fit"),
        ({"learn_token_block": 1.5}, "learn_token_block"),
    ],
)
def test_new_hyperparameters_are_validated(params, match, tiny_data):
    with pytest.raises(ValueError, match=match):
        SparseTokenSelector(**params).fit(*tiny_data)


# -- warm_start -----------------------------------------------------------------------
def test_warm_start_continues_the_previous_fit(tiny_data):
    X, y = tiny_data
    first = SparseTokenSelector(width=8, max_iter=5, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first.fit(X, y)
        cold_curve, cold_t, W = list(first.loss_curve_), first.t_, first.key_query_
        second = clone(first).set_params(warm_start=True).fit(X, y)
        # with a negligible rate the continuation keeps the trained W (a cold start: 0)
        second.set_params(learning_rate_init=1e-9).fit(X, y)
    assert second.n_iter_ == 10 and len(second.loss_curve_) == 10
    assert second.t_ == 2 * cold_t
    assert second.loss_curve_[:5] == cold_curve
    np.testing.assert_allclose(second.key_query_, W, atol=1e-6)
    assert np.abs(W).max() > 0.01


def test_warm_start_online_draws_new_batches():
    model = SparseTokenSelector(width=8, batch_size=16, warm_start=True, random_state=0)
    model.fit_online(TASK, n_steps=20)
    first = model.key_query_
    model.fit_online(TASK, n_steps=20)
    assert model.n_iter_ == 40 and model.t_ == 640
    assert not np.array_equal(model.key_query_, first)
    # a fresh model with the same seed repeats the first call exactly
    fresh = SparseTokenSelector(width=8, batch_size=16, random_state=0).fit_online(TASK, 20)
    np.testing.assert_array_equal(fresh.key_query_, first)
    assert model.loss_curve_[:20] == fresh.loss_curve_
    assert model.loss_curve_[20:] != fresh.loss_curve_


def test_warm_start_false_refits_from_scratch(tiny_data):
    X, y = tiny_data
    model = SparseTokenSelector(width=8, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W = model.fit(X, y).key_query_
        np.testing.assert_array_equal(model.fit(X, y).key_query_, W)
    assert model.n_iter_ == 3


def test_warm_start_can_change_rate_schedule_regime_and_training_draws(tiny_data):
    X, y = tiny_data
    model = SparseTokenSelector(width=8, max_iter=2, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    t_fit = model.t_
    model.set_params(
        warm_start=True,
        learning_rate_init=0.003,
        learning_rate="cosine",
        n_pe_samples_fit=3,
        batch_size=32,
    )
    model.fit_online(SparseTokenSelectionTask(6, 3, 2), n_steps=5)
    assert model.n_iter_ == 7 and len(model.loss_curve_) == 7
    assert model.t_ == t_fit + 5 * 32
    assert _lr(model) == pytest.approx(0.0015 * (1 + math.cos(math.pi * 4 / 5)))


@pytest.mark.parametrize(
    "make, change, match",
    [
        (lambda: SparseTokenSelector(width=8), {"width": 6}, r"key_query shape: \(11, 8\) -> "),
        (
            lambda: SparseTokenSelector(width=8),
            {"positional_encoding": "fixed"},
            "positional_encoding: stochastic -> fixed",
        ),
        (
            lambda: SparseTokenSelector(width=8),
            {"learn_token_block": False},
            "learn_token_block: True -> False",
        ),
        (
            lambda: FCNSelector(width=8),
            {"extra_hidden_layers": (4,)},
            "layers.2.weight shape",
        ),
    ],
)
def test_warm_start_refuses_another_architecture_and_keeps_the_model(make, change, match):
    X, y = make_sparse_token_selection(64, 8, 3, 2, random_state=0)
    model = make().set_params(max_iter=2, warm_start=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    before = model.predict(X)
    model.set_params(**change)
    with pytest.raises(ValueError, match=match):
        model.fit(X, y)
    assert model.n_iter_ == 2
    model.set_params(**{k: make().get_params()[k] for k in change})
    np.testing.assert_array_equal(model.predict(X), before)


def test_warm_start_refuses_other_token_features_or_fcn_length():
    X, y = make_sparse_token_selection(64, 8, 3, 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        spe = SparseTokenSelector(width=4, max_iter=1, warm_start=True).fit(X, y)
        fcn = FCNSelector(width=4, max_iter=1, warm_start=True).fit(X, y)
    X2, y2 = make_sparse_token_selection(64, 8, 2, 2, random_state=0)
    with pytest.raises(ValueError, match="had n_features=3; this data has n_features=2"):
        spe.fit(X2, y2)
    X3, y3 = make_sparse_token_selection(64, 10, 3, 2, random_state=0)
    with pytest.raises(ValueError, match=r"layers.0.weight shape: \(4, 32\) -> \(4, 40\)"):
        fcn.fit(X3, y3)
    # the selector continues at another length: its W does not depend on T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert spe.fit(X3, y3).seq_len_ == 10


# -- n_pe_samples_fit -----------------------------------------------------------------
@pytest.mark.slow
def test_training_on_averaged_draws_sharpens_the_attention():
    """A W trained on K averaged draws settles at a larger gamma, best for K draws."""
    task = SparseTokenSelectionTask(16, 4, 3)
    X, y = task.sample(2000, random_state=5)
    gamma, score = {}, {}
    for k in (1, 8):
        model = SparseTokenSelector(
            width=16,
            batch_size=128,
            n_pe_samples_fit=k,
            n_pe_samples=8,
            learning_rate="cosine",
            random_state=0,
        ).fit_online(task, n_steps=300)
        gamma[k] = positional_alignment(model.key_query_, 4)["gamma"]
        score[k] = model.score(X, y)
    assert gamma[8] > gamma[1], gamma
    assert score[8] > score[1] + 0.01, score


def test_training_draws_are_ignored_by_fixed_encodings(tiny_data):
    X, y = tiny_data
    fits = [
        SparseTokenSelector(
            width=4, positional_encoding="fixed", n_pe_samples_fit=k, max_iter=3, random_state=0
        )
        for k in (1, 4)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a, b = (f.fit(X, y).key_query_ for f in fits)
    np.testing.assert_array_equal(a, b)


# -- learn_token_block ----------------------------------------------------------------
def test_frozen_token_block_stays_exactly_zero(tiny_data, tmp_path):
    X, y = tiny_data
    model = SparseTokenSelector(
        width=8, learn_token_block=False, alpha=0.01, max_iter=20, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    W = model.key_query_
    assert W.shape == (3 + 8, 8)
    assert not W[:3].any()
    assert positional_alignment(W, 3)["gamma"] > 0.1
    path = tmp_path / "frozen.stsq"
    save_model(model, path)
    loaded = load_model(path)
    assert loaded.learn_token_block is False
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.slow
def test_frozen_token_block_beats_the_full_w_after_a_short_adam_run():
    """The paper's token block only adds Adam noise here (issue 8)."""
    task = SparseTokenSelectionTask(32, 8, 4)
    X, y = task.sample(2048, random_state=0)
    X_test, y_test = task.sample(2048, random_state=1)
    scores = {}
    for learn in (True, False):
        model = SparseTokenSelector(
            width=64,
            batch_size=256,
            max_iter=6,
            n_iter_no_change=6,
            tol=0.0,
            learn_token_block=learn,
            random_state=0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            scores[learn] = model.fit(X, y).score(X_test, y_test)
    assert scores[False] > scores[True], scores


# -- why training stopped, the callbacks hook, fitted state ------------------------------
def test_early_stopping_records_its_reason_and_does_not_warn(tiny_data):
    X, y = tiny_data
    model = SparseTokenSelector(width=4, tol=1e9, n_iter_no_change=2, max_iter=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither "interrupted" nor ConvergenceWarning
        model.fit(X, y)
    assert model.n_iter_ == 3
    assert model.net_.history[-1, "stop_reason"] == "no_improvement"


def test_adaptive_stop_records_its_reason(tiny_data):
    X, y = tiny_data
    model = SparseTokenSelector(
        width=4, learning_rate="adaptive", tol=1e9, n_iter_no_change=1, random_state=0
    )
    model.fit(X, y)
    assert model.net_.history[-1, "stop_reason"] == "learning_rate_too_small"
    assert "stop_reason" not in model.net_.history[-2]


def test_a_run_that_ends_early_without_a_reason_warns_as_interrupted(tiny_data):
    class CtrlC(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 2:
                raise KeyboardInterrupt

    X, y = tiny_data
    model = SparseTokenSelector(width=4, max_iter=5, callbacks=[CtrlC()], random_state=0)
    with pytest.warns(UserWarning, match="interrupted .* after 2 of 5 epochs"):
        model.fit(X, y)
    assert model.n_iter_ == 2


class Counter(Callback):
    """Counts training batches and epochs."""

    def __init__(self, label="x"):
        self.label = label

    def initialize(self):
        self.batches_, self.epochs_ = 0, 0
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        self.batches_ += training

    def on_epoch_end(self, net, **kwargs):
        self.epochs_ += 1


def test_callbacks_see_every_step_and_are_cloned_unfitted(tiny_data):
    counter = Counter(label="mine")
    model = SparseTokenSelector(width=4, batch_size=16, callbacks=[("count", counter)])
    model.set_params(random_state=0).fit_online(TASK, n_steps=6)
    assert counter.batches_ == 6 and counter.epochs_ == 1
    assert dict(model.net_.callbacks_)["count"] is counter
    copy = clone(model)
    ((name, cloned),) = copy.callbacks
    assert name == "count" and cloned is not counter and cloned.label == "mine"
    # Callbacks do not change what is learned.
    plain = SparseTokenSelector(width=4, batch_size=16, random_state=0).fit_online(TASK, 6)
    np.testing.assert_array_equal(plain.key_query_, model.key_query_)


@pytest.mark.parametrize("bad", [["progress"], [("name",)], [object()]])
def test_callbacks_must_be_skorch_callbacks(bad, tiny_data):
    model = SparseTokenSelector(width=4, callbacks=bad)
    with pytest.raises(TypeError, match=r"callbacks\[0\] must be a skorch callback"):
        model.fit(*tiny_data)
    assert not hasattr(model, "net_")


def test_fitted_state_round_trip_gives_the_same_model(tiny_data):
    X, y = tiny_data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = SparseTokenSelector(width=6, max_iter=3, random_state=0).fit(X, y)
    state = model.get_fitted_state()
    assert set(state) == {"fitted", "history", "weights"}
    assert state["fitted"]["n_iter_"] == 3 and state["weights"]["key_query"].shape == (9, 6)
    copy = SparseTokenSelector(**model.get_params()).set_fitted_state(state)
    np.testing.assert_array_equal(copy.predict(X), model.predict(X))
    assert copy.loss_curve_ == model.loss_curve_ and copy.t_ == model.t_


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda s: s.pop("history"), "keys 'fitted', 'history' and 'weights'"),
        (lambda s: s["fitted"].update(extra=1), r"unknown fitted attributes \['extra'\]"),
        (lambda s: s["fitted"].update(t_=-1), "fitted t_ must be an integer >= 0"),
        (lambda s: s["weights"].update(key_query=torch.zeros(6, 9)), "needs \\(9, 6\\)"),
        # Weights smaller than the fitted sizes: refused before any shape is built.
        (
            lambda s: s["weights"].update(key_query=torch.zeros(2, 2)),
            "fitted n_features_in_=3 does not fit the weights",
        ),
    ],
)
def test_set_fitted_state_refuses_a_bad_state_and_keeps_the_model(edit, match, tiny_data):
    X, y = tiny_data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = SparseTokenSelector(width=6, max_iter=3, random_state=0).fit(X, y)
        other = SparseTokenSelector(width=6, max_iter=2, random_state=1).fit(X, y)
    before = other.predict(X)
    state = model.get_fitted_state()
    edit(state)
    with pytest.raises(ValueError, match=match):
        other.set_fitted_state(state)
    np.testing.assert_array_equal(other.predict(X), before)
