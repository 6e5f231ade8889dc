"""Single-location regression: several erf-predictor runs in one batched computation."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

from stsq_learn import ErfAttentionRegressor, SingleLocationTask, SoftmaxAttentionRegressor
from stsq_learn.engine.members import fit_online_members
from stsq_learn.tasks.single_location.batch import fit_online_batch, fit_online_seeds
from stsq_learn.tasks.single_location.theory import (
    _risk_gradient,
    _risk_gradient_batch,
    _task_constants,
)

TASK = SingleLocationTask(seq_len=5, n_features=20)
SETTINGS = dict(learning_rate_init=0.02, lambda_decay=3e-3, max_iter=150)


def _grid(seeds=(0, 1)):
    return [
        ErfAttentionRegressor(
            init=init,
            lambda_schedule=schedule,
            lambda_init=1.0 if schedule == "decay" else 0.1,
            random_state=seed,
            **SETTINGS,
        )
        for init in ("sphere", "manifold")
        for schedule in ("decay", "constant")
        for seed in seeds
    ]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():  # short runs: "worse than no model" is expected
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def _assert_same_fit(one, batched):
    np.testing.assert_allclose(batched.k_, one.k_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(batched.v_, one.v_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(batched.loss_curve_, one.loss_curve_, rtol=1e-12, atol=0)
    np.testing.assert_allclose(batched.alignment_curve_, one.alignment_curve_, atol=1e-12)
    np.testing.assert_array_equal(batched.lambda_curve_, one.lambda_curve_)
    assert batched.lambda_ == one.lambda_ and batched.n_iter_ == one.n_iter_
    assert batched.task_ == one.task_ and batched.seq_len_ == one.seq_len_


def test_batched_runs_match_separate_fits_for_every_start_and_schedule():
    separate = [_quiet(clone(e).fit_online, TASK) for e in _grid()]
    batched = _quiet(fit_online_batch, [clone(e) for e in _grid()], TASK)
    assert len(batched) == 8
    for one, many in zip(separate, batched):
        _assert_same_fit(one, many)
    # the runs differ from each other: each kept its own start and schedule
    assert len({round(float(m.k_[0]), 12) for m in batched}) == 8


def test_fit_online_seeds_clones_the_estimator_per_seed_and_leaves_it_unfitted():
    est = ErfAttentionRegressor(**SETTINGS)
    models = _quiet(fit_online_seeds, est, TASK, [3, 5, 11])
    assert [m.random_state for m in models] == [3, 5, 11]
    assert not hasattr(est, "k_") and all(m is not est for m in models)
    for seed, model in zip([3, 5, 11], models):
        one = _quiet(clone(est).set_params(random_state=seed).fit_online, TASK)
        _assert_same_fit(one, model)


def test_single_fit_numbers_are_those_of_0_5():
    # The batched path leaves fit_online's own loop alone: the numbers of 0.5 (to the bit
    # with this NumPy; the oldest supported NumPy rounds the last digit of some otherwise).
    model = _quiet(
        ErfAttentionRegressor(random_state=7, **(SETTINGS | {"max_iter": 200})).fit_online, TASK
    )
    exact = pytest.approx
    assert float(model.k_[0]) == exact(0.4397732949497969, rel=1e-13, abs=0)
    assert float(model.v_[3]) == exact(0.07750813846700902, rel=1e-13, abs=0)
    assert float(model.loss_curve_[-1]) == exact(1.3224669862258773, rel=1e-13, abs=0)
    assert float(model.alignment_curve_[-1, 0]) == exact(0.4203574785806883, rel=1e-13, abs=0)
    # one run "batched" is fit_online itself
    (alone,) = _quiet(
        fit_online_seeds, ErfAttentionRegressor(**(SETTINGS | {"max_iter": 200})), TASK, [7]
    )
    np.testing.assert_array_equal(alone.k_, model.k_)


@pytest.mark.parametrize("n_steps", [1, 7])
def test_explicit_n_steps_and_different_max_iter(n_steps):
    ests = [ErfAttentionRegressor(max_iter=m, random_state=i) for i, m in enumerate((10, 20))]
    with pytest.raises(ValueError, match=r"these differ \(\[10, 20\]\).*give n_steps"):
        fit_online_batch(ests, TASK)
    _quiet(fit_online_batch, ests, TASK, n_steps)
    assert [e.n_iter_ for e in ests] == [n_steps, n_steps]
    assert ests[0].loss_curve_.shape == (n_steps,) and ests[0].alignment_curve_.shape == (
        n_steps + 1,
        2,
    )


def test_a_shared_random_state_is_drawn_from_in_list_order():
    def models():
        rng = np.random.RandomState(42)
        return [ErfAttentionRegressor(random_state=rng, **SETTINGS) for _ in range(3)]

    separate = [_quiet(m.fit_online, TASK) for m in models()]
    batched = _quiet(fit_online_batch, models(), TASK)
    for one, many in zip(separate, batched):
        _assert_same_fit(one, many)


def test_the_batched_gradient_is_the_single_one_row_by_row():
    rng = np.random.default_rng(0)
    K, V = rng.standard_normal((2, 6, 20))  # off the sphere, k not orthogonal to v
    lam = np.linspace(0.05, 2.0, 6)
    k_star, v_star = TASK.directions
    risk, gk, gv, kk, vv = _risk_gradient_batch(K, V, lam, k_star, v_star, _task_constants(TASK))
    for i in range(6):
        r1, gk1, gv1 = _risk_gradient(K[i], V[i], lam[i], k_star, v_star, _task_constants(TASK))
        assert risk[i] == pytest.approx(r1, rel=1e-13)
        np.testing.assert_allclose(gk[i], gk1, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(gv[i], gv1, rtol=1e-12, atol=1e-13)
        assert kk[i] == pytest.approx(K[i] @ k_star, abs=1e-14)
        assert vv[i] == pytest.approx(V[i] @ v_star, abs=1e-14)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: fit_online_batch([], TASK), ValueError, "estimators is empty"),
        (lambda: fit_online_batch("abc", TASK), TypeError, "must be a list of Erf"),
        (
            lambda: fit_online_batch([ErfAttentionRegressor(), SoftmaxAttentionRegressor()], TASK),
            TypeError,
            r"estimators\[1\] must be an ErfAttentionRegressor, got SoftmaxAttentionRegressor",
        ),
        (
            lambda: fit_online_batch([ErfAttentionRegressor(solver="sgd")], TASK),
            ValueError,
            r"estimators\[0\] has solver='sgd'",
        ),
        (
            lambda: fit_online_batch([ErfAttentionRegressor(lambda_init=-1.0)], TASK),
            ValueError,
            "lambda_init",
        ),
        (lambda: fit_online_batch([ErfAttentionRegressor()] * 2, TASK), ValueError, "twice"),
        (
            lambda: fit_online_batch([ErfAttentionRegressor()], "task"),
            TypeError,
            "task must be a SingleLocationTask, got str",
        ),
        (
            lambda: fit_online_batch([ErfAttentionRegressor()], TASK, n_steps=0),
            ValueError,
            "n_steps",
        ),
        (
            lambda: fit_online_seeds(ErfAttentionRegressor(), TASK, [0, 1.5]),
            TypeError,
            r"random_states\[1\] must be an int seed, got 1.5",
        ),
        (lambda: fit_online_seeds(ErfAttentionRegressor(), TASK, []), ValueError, "is empty"),
        (lambda: fit_online_seeds(ErfAttentionRegressor(), TASK, 3), TypeError, "iterable"),
        (
            lambda: fit_online_seeds(SoftmaxAttentionRegressor(), TASK, [0]),
            TypeError,
            "estimator must be an ErfAttentionRegressor",
        ),
    ],
)
def test_bad_calls_are_refused_before_any_work(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_diverged_run_raises_and_leaves_every_estimator_as_it_was():
    good = _quiet(ErfAttentionRegressor(random_state=0, **SETTINGS).fit_online, TASK)
    before = (good.k_.copy(), good.loss_curve_.copy())
    bad = ErfAttentionRegressor(random_state=1, **(SETTINGS | {"learning_rate_init": 1e6}))
    fresh = ErfAttentionRegressor(random_state=2, **SETTINGS)
    with pytest.raises(ValueError, match="learning_rate_init"):
        _quiet(fit_online_batch, [good, bad, fresh], TASK)
    np.testing.assert_array_equal(good.k_, before[0])
    np.testing.assert_array_equal(good.loss_curve_, before[1])
    assert not hasattr(bad, "k_") and not hasattr(fresh, "k_")


def test_fit_online_batch_names_the_failed_runs_and_chains_the_first_error():
    runs = [ErfAttentionRegressor(random_state=s, **SETTINGS) for s in range(3)]
    runs[1].set_params(learning_rate_init=1e6)
    with pytest.raises(ValueError, match=r"1 of the 3 members failed \(estimators\[1\]\)") as info:
        _quiet(fit_online_batch, runs, TASK)
    with pytest.raises(ValueError) as alone:
        _quiet(clone(runs[1]).fit_online, TASK)
    assert str(info.value.__cause__) == str(alone.value)
    assert not any(hasattr(r, "k_") for r in runs)


# -- the seeds as members of the engine's batched fits ----------------------------------
# Seed 0 diverges (its final risk 3.3 times its start), seeds 1 and 2 do not.
_UNSTABLE = ErfAttentionRegressor(**(SETTINGS | {"learning_rate_init": 0.045, "max_iter": 50}))


def test_seeds_fail_alone_as_their_fits_and_the_call_names_them():
    members = [clone(_UNSTABLE).set_params(random_state=s) for s in range(3)]
    results = _quiet(fit_online_members, members, TASK, "auto", errors="return")
    for seed, (member, result) in enumerate(zip(members, results)):
        single = clone(_UNSTABLE).set_params(random_state=seed)
        if seed == 0:
            with pytest.raises(ValueError) as info:
                _quiet(single.fit_online, TASK)
            assert isinstance(result, ValueError)
            for message in (str(result), str(info.value)):
                assert message.startswith("Training diverged") and "(it was 0.045)" in message
            assert not hasattr(member, "k_")
        else:
            assert result is member
            _assert_same_fit(_quiet(single.fit_online, TASK), member)
    fresh = [clone(_UNSTABLE).set_params(random_state=s) for s in range(3)]
    with pytest.raises(ValueError, match=r"1 of the 3 members failed \(random_state=0\)"):
        _quiet(fit_online_seeds, _UNSTABLE, TASK, range(3))
    with pytest.raises(ValueError, match=r"no estimator was changed"):
        _quiet(fit_online_members, fresh, TASK)
    assert not any(hasattr(m, "k_") for m in fresh)


def test_verbose_seeds_train_together_behind_one_bar(capsys):
    est = ErfAttentionRegressor(verbose=1, **SETTINGS)
    models = _quiet(fit_online_seeds, est, TASK, [0, 1, 2])
    assert "ErfAttentionRegressor.fit_online (3 runs)" in capsys.readouterr().err
    for seed, model in enumerate(models):
        _assert_same_fit(_quiet(clone(est).set_params(random_state=seed).fit_online, TASK), model)


def test_a_study_batches_the_seeds_of_the_erf_runs(monkeypatch):
    from stsq_learn.studies import sweep
    from stsq_learn.tasks.single_location import batch

    runs, original = [], batch._train
    monkeypatch.setattr(
        batch, "_train", lambda ests, *a: runs.append(len(ests)) or original(ests, *a)
    )
    est = ErfAttentionRegressor(**SETTINGS)
    kw = dict(seeds=[0, 1, 2], n_steps=150, n_test=200, error_score="raise")
    together = _quiet(
        sweep, {"erf": est}, TASK, {"init": ["sphere", "manifold"]}, batch_seeds=True, **kw
    )
    assert runs == [3, 3]  # one batched run of the 3 seeds at each point
    alone = _quiet(sweep, {"erf": est}, TASK, {"init": ["sphere", "manifold"]}, **kw)
    np.testing.assert_allclose(together["score"], alone["score"], rtol=1e-10, atol=0)


# -- what holds at which d: the swapped point ------------------------------------------
def test_small_d_the_swapped_point_beats_the_oracle_and_sphere_runs_end_there():
    # d = 20, L = 5, lambda_t = 1 / (1 + 6e-3 t) down to 0.1: the stationary point
    # k = v*, v = k* has risk 2.55% below the oracle's, and from the sphere seeds 0 and 2
    # end there (seed 1 at the oracle); from the manifold every seed reaches (k*, v*).
    from stsq_learn.single_location_theory import oracle_risk, swapped_point

    point = swapped_point(TASK, 0.1, learning_rate=0.05)
    assert point["converged"] and point["relative_gap"] == pytest.approx(-0.025525, abs=1e-6)
    assert point["k.v*"] == pytest.approx(1.0) and point["v.k*"] == pytest.approx(1.0)
    settings = dict(lambda_decay=6e-3, learning_rate_init=0.02, max_iter=1500)
    models = _quiet(
        fit_online_batch,
        [
            ErfAttentionRegressor(init=init, random_state=seed, **settings)
            for init in ("sphere", "manifold")
            for seed in range(3)
        ],
        TASK,
    )
    k_star, v_star = TASK.directions
    ends = []
    for m in models:
        gap = m.loss_curve_[-1] / oracle_risk(TASK, m.lambda_curve_[-1]) - 1
        if min(abs(m.k_ @ k_star), abs(m.v_ @ v_star)) > 0.999:
            ends.append("oracle")
            assert abs(gap) < 1e-4
        elif abs(m.k_ @ v_star) > 0.999:
            ends.append("swapped")
            assert gap == pytest.approx(point["relative_gap"], abs=1e-4)  # below the oracle
        else:
            ends.append("other")
    assert ends == ["swapped", "oracle", "swapped", "oracle", "oracle", "oracle"]


@pytest.mark.slow
def test_at_the_papers_size_the_swapped_point_is_above_the_oracle():
    from stsq_learn.single_location_theory import swapped_point

    point = swapped_point(SingleLocationTask(10, 400), 0.1)
    assert point["relative_gap"] == pytest.approx(0.01774, abs=1e-4)
    assert point["v.k*"] == pytest.approx(0.6298, abs=1e-3)  # v only partly along k*
