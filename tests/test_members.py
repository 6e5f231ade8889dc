"""Seeds of one estimator trained together as one model: each member is its own fit."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch.callbacks import Callback
from user_tasks import PairMeanTask

from stsq_learn import (
    AttentionRegressor,
    ErfAttentionRegressor,
    FCNAverager,
    FCNRegressor,
    FCNRetriever,
    FCNSelector,
    FixedStateCopier,
    InContextRegressionTask,
    LinearAttentionRegressor,
    LSTMCopier,
    NGramCopier,
    PromptGradientStep,
    PromptRidge,
    SingleLocationTask,
    SoftmaxAttentionRegressor,
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenAverager,
    SparseTokenClassificationTask,
    SparseTokenClassifier,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    TransformerCopier,
    load_model,
    registry,
    save_model,
)
from stsq_learn.encodings import sampling
from stsq_learn.encodings.draws import StreamedDraws
from stsq_learn.engine.batch_reuse import reuse_batches
from stsq_learn.engine.members import fit_members, fit_online_members, predict_members
from stsq_learn.engine.training import OnlineData
from stsq_learn.nn import Attention, FullyConnected
from stsq_learn.tasks.classification.modules import AttentionClassifier

STS = SparseTokenSelectionTask(seq_len=6, n_features=2, n_selected=2)
STS_RANGES = SparseTokenSelectionTask(seq_len=(5, 8), n_features=2, n_selected=(1, 3))
QSA = SparseAveragingTask(seq_len=5, n_features=2, n_selected=2)
RETRIEVAL = SparseRetrievalTask(seq_len=6, n_features=2, n_selected=2)
PAIR = PairMeanTask(seq_len=5, n_features=2)
IN_CONTEXT = InContextRegressionTask(seq_len=6, n_features=2)
_F64 = dict(dtype="float64")
SMALL = dict(**_F64, batch_size=16)
SEEDS = (0, 1, 2)
TOL = 1e-9

# Every engine estimator of the registry, with the settings that exercise it: encodings
# (stochastic marginal and full, fixed, randomized, sinusoidal), heads, the length scale,
# a range of lengths and of q, both solvers, momentum, weight decay, every schedule.
ONLINE = {
    "selector marginal": (SparseTokenSelector(8, **SMALL), STS),
    "selector full, 2 heads": (
        SparseTokenSelector(8, n_heads=2, pe_sampling="full", **SMALL),
        STS,
    ),
    "selector randomized, adam, cosine": (
        SparseTokenSelector(
            8, positional_encoding="randomized", solver="adam", learning_rate="cosine", **SMALL
        ),
        STS,
    ),
    "selector fixed, log scale, ranges": (
        SparseTokenSelector(8, positional_encoding="fixed", length_scale="log", **SMALL),
        STS_RANGES,
    ),
    "selector marginal, floor scale, ranges": (
        SparseTokenSelector(8, length_scale="floor", **SMALL),
        STS_RANGES,
    ),
    "selector sinusoidal, frozen token block": (
        SparseTokenSelector(8, positional_encoding="sinusoidal", learn_token_block=False, **SMALL),
        STS,
    ),
    "FCN selector, momentum, decay, invscaling": (
        FCNSelector(
            8,
            solver="sgd",
            momentum=0.9,
            alpha=1e-3,
            learning_rate="invscaling",
            learning_rate_init=0.05,
            **SMALL,
        ),
        STS,
    ),
    "averager": (SparseTokenAverager(8, **SMALL), QSA),
    "FCN averager": (FCNAverager(8, **SMALL), QSA),
    "retriever marginal, 2 heads": (SparseTokenRetriever(8, n_heads=2, **SMALL), RETRIEVAL),
    "FCN retriever": (FCNRetriever(8, **SMALL), RETRIEVAL),
    "user task attention": (AttentionRegressor(PairMeanTask, 8, **SMALL), PAIR),
    "user task FCN": (FCNRegressor(PairMeanTask, 8, **SMALL), PAIR),
    "linear attention": (LinearAttentionRegressor(**SMALL), IN_CONTEXT),
    "linear attention, full, sgd": (
        LinearAttentionRegressor(
            parametrization="full", solver="sgd", dtype="float64", batch_size=64
        ),
        IN_CONTEXT,
    ),
}
EXCLUDED = {
    # In-context baselines read each prompt alone: nothing is trained.
    PromptRidge: "no training",
    PromptGradientStep: "no training (one step size fitted in closed form)",
    # The copiers' modules (a transformer, an LSTM) have no member axis; the constructions
    # train nothing.
    TransformerCopier: "fitted one after another",
    LSTMCopier: "fitted one after another",
    NGramCopier: "no training",
    FixedStateCopier: "no training",
}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*worse than no model")
        yield


def _clones(est, seeds=SEEDS):
    return [clone(est).set_params(random_state=s) for s in seeds]


def _weights(est):
    return {k: v.detach() for k, v in est.net_.module_.state_dict().items()}


def _assert_same_fit(batched, single, X):
    for key, w in _weights(single).items():
        diff = float((_weights(batched)[key] - w).abs().max())
        assert diff <= TOL * max(1.0, float(w.abs().max())), (key, diff)
    predicted = batched.predict(X)
    if predicted.dtype.kind == "f":
        np.testing.assert_allclose(predicted, single.predict(X), rtol=0, atol=TOL)
    else:  # a classifier's labels
        np.testing.assert_array_equal(predicted, single.predict(X))
    np.testing.assert_allclose(batched.loss_curve_, single.loss_curve_, rtol=TOL, atol=0)
    for name in ("n_iter_", "t_", "seq_len_", "n_features_in_", "task_", "solver_"):
        assert getattr(batched, name) == getattr(single, name), name
    assert batched.learning_rate_init_ == pytest.approx(single.learning_rate_init_, rel=1e-12)
    assert batched.planned_steps_ == single.planned_steps_
    assert batched._predict_seed == single._predict_seed
    assert [list(e) for e in batched.net_.history] == [list(e) for e in single.net_.history]


@pytest.mark.parametrize("case", list(ONLINE))
def test_every_member_of_an_online_fit_is_its_own_fit(case):
    est, task = ONLINE[case]
    batched = fit_online_members(_clones(est), task, n_steps=200)
    X, _ = task.at_length(task.length_range[1]).sample(40, random_state=9)
    for seed, member in zip(SEEDS, batched):
        single = clone(est).set_params(random_state=seed).fit_online(task, n_steps=200)
        _assert_same_fit(member, single, X)
    assert batched[0].loss_curve_ != batched[1].loss_curve_  # each its own draws


def test_every_registered_estimator_is_covered():
    covered = {type(est) for est, _ in ONLINE.values()}
    covered |= {ErfAttentionRegressor, SoftmaxAttentionRegressor, SparseTokenClassifier}
    covered |= set(EXCLUDED)
    assert set(registry.estimators()) <= covered


@pytest.mark.parametrize(
    "est",
    [
        SparseTokenSelector(8, max_iter=70, **SMALL),  # 3 batches an epoch: 210 steps
        SparseTokenSelector(8, n_pe_samples_fit=2, max_iter=10, **SMALL),
        FCNSelector(8, max_iter=70, **SMALL),
    ],
    ids=["attention", "two encoding draws", "FCN"],
)
def test_every_member_of_a_fit_on_rows_is_its_own_fit(est):
    X, y = STS.sample(40, random_state=0)
    batched = fit_members(_clones(est), X, y)
    for seed, member in zip(SEEDS, batched):
        _assert_same_fit(member, clone(est).set_params(random_state=seed).fit(X, y), X)


@pytest.mark.parametrize(
    "est, batched",
    [
        (FCNSelector(8, max_iter=30, learning_rate="constant", **SMALL), True),
        (SparseTokenSelector(8, max_iter=10, **SMALL), False),
    ],
    ids=["one step size: batched", "step sizes following each member's rows: one by one"],
)
def test_members_with_rows_of_their_own_are_their_own_fits(est, batched, monkeypatch):
    rows = [STS.sample(40, random_state=10 + s) for s in SEEDS]
    stacked = []
    monkeypatch.setattr(Attention, "stacked", lambda ms: stacked.append(ms) or _stack(ms))
    monkeypatch.setattr(FullyConnected, "stacked", lambda ms: stacked.append(ms) or _stack(ms))
    members = fit_members(_clones(est), [X for X, _ in rows], [y for _, y in rows])
    assert bool(stacked) == batched
    for seed, member, (X, y) in zip(SEEDS, members, rows):
        _assert_same_fit(member, clone(est).set_params(random_state=seed).fit(X, y), X)
    with pytest.raises(ValueError, match="y must be a list of as many target arrays"):
        fit_members(_clones(est), [X for X, _ in rows], rows[0][1])


def _stack(modules):
    from stsq_learn.nn.members import stack

    return stack(modules)


def test_early_stopping_freezes_each_member_at_its_own_epoch():
    X, y = STS.sample(48, random_state=0)
    est = FCNSelector(
        16, max_iter=200, n_iter_no_change=3, tol=1e-2, learning_rate="constant", **SMALL
    )
    batched = fit_members(_clones(est, seeds=range(4)), X, y)
    stops = [m.n_iter_ for m in batched]
    assert len(set(stops)) > 1 and max(stops) < 200
    for seed, member in enumerate(batched):
        single = clone(est).set_params(random_state=seed).fit(X, y)
        _assert_same_fit(member, single, X)
        assert member.net_.history[-1]["stop_reason"] == "no_improvement"


# -- members that stop: their own callbacks -------------------------------------------------
class _StopAt(Callback):
    """Stops its fit at step ``step`` (None: never), as a study's stopping rule does."""

    def __init__(self, step):
        self.step = step

    def on_batch_end(self, net, training=False, **kwargs):
        if training and sum(len(e["batches"]) for e in net.history) == self.step:
            net.history.record("stop_reason", "test_stop")
            raise KeyboardInterrupt


class _Probe(Callback):
    """Records the first weight of its fit's module at every step: what a member's callback sees."""

    def initialize(self):
        self.seen_ = []
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.seen_.append(float(next(net.module_.parameters()).detach().flatten()[0]))


def _optimizer_states(est):
    state = est.net_.optimizer_.state_dict()
    return [{k: v for k, v in s.items()} for _, s in sorted(state["state"].items())], [
        {k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]
    ]


def _assert_same_optimizer(batched, single):
    (a, groups_a), (b, groups_b) = _optimizer_states(batched), _optimizer_states(single)
    assert groups_a == groups_b
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            diff = (x[k] - y[k]).abs().max() if torch.is_tensor(x[k]) else abs(x[k] - y[k])
            assert float(diff) <= TOL, (k, float(diff))


STOPS = {0: 12, 1: None, 2: 31}  # seed -> the step its callback stops it at


@pytest.mark.parametrize(
    "case",
    [
        "selector marginal",
        "selector fixed, log scale, ranges",
        "FCN selector, momentum, decay, invscaling",
        "retriever marginal, 2 heads",
        "linear attention",
    ],
)
def test_a_member_that_stops_keeps_its_state_and_the_others_go_on(case, monkeypatch):
    est, task = ONLINE[case]
    drawn = []  # members drawn from at every step: a stopped member costs nothing more
    original = OnlineData.draw

    def counting(self, batch_size, generator):
        if isinstance(generator, list):
            drawn.append(len(generator))
        return original(self, batch_size, generator)

    monkeypatch.setattr(OnlineData, "draw", counting)
    members = _clones(est)
    probes = [_Probe() for _ in SEEDS]
    callbacks = [[_StopAt(STOPS[s]), probe] for s, probe in zip(SEEDS, probes)]
    fit_online_members(members, task, n_steps=50, callbacks=callbacks)
    monkeypatch.setattr(OnlineData, "draw", original)
    X, _ = task.at_length(task.length_range[1]).sample(40, random_state=9)
    for seed, member, probe in zip(SEEDS, members, probes):
        own = _Probe()
        single = clone(est).set_params(random_state=seed, callbacks=[_StopAt(STOPS[seed]), own])
        single.fit_online(task, n_steps=50)
        single.set_params(callbacks=None)
        assert member.n_iter_ == (STOPS[seed] or 50) == single.n_iter_
        _assert_same_fit(member, single, X)
        _assert_same_optimizer(member, single)
        np.testing.assert_allclose(probe.seen_, own.seen_, rtol=0, atol=TOL)
        assert member.get_params()["callbacks"] == est.get_params()["callbacks"]
    assert drawn[:12] == [3] * 12 and drawn[12:31] == [2] * 19 and drawn[31:] == [1] * 19


def test_a_member_that_stops_within_an_epoch_of_a_fit_on_rows():
    X, y = STS.sample(40, random_state=0)
    est = FCNSelector(8, max_iter=30, **SMALL)  # 3 batches an epoch
    members = _clones(est)
    fit_members(members, X, y, callbacks=[[_StopAt(STOPS[s])] for s in SEEDS])
    for seed, member in zip(SEEDS, members):
        single = clone(est).set_params(random_state=seed, callbacks=[_StopAt(STOPS[seed])])
        single.fit(X, y).set_params(callbacks=None)
        _assert_same_fit(member, single, X)
        _assert_same_optimizer(member, single)


def test_member_callbacks_are_refused_before_any_work():
    members = _clones(SparseTokenSelector(8, **SMALL))
    with pytest.raises(ValueError, match="callbacks must be a list of 3 lists"):
        fit_online_members(members, STS, n_steps=5, callbacks=[[]])
    with pytest.raises(TypeError, match=r"callbacks\[1\] must be a list of skorch callbacks"):
        fit_online_members(members, STS, n_steps=5, callbacks=[[], [object()], []])
    stop = _StopAt(3)
    with pytest.raises(ValueError, match="one callback object twice"):
        fit_online_members(members, STS, n_steps=5, callbacks=[[stop], [stop], []])
    assert not any(hasattr(m, "net_") for m in members)


def test_member_callbacks_of_a_classifier_stop_each_member_alone():
    X, y = SparseTokenClassificationTask(seq_len=6, n_features=3).sample(60, random_state=0)
    est = SparseTokenClassifier(max_iter=20)
    members = fit_members(_clones(est), X, y, callbacks=[[_StopAt(s + 2)] for s in SEEDS])
    for seed, member in zip(SEEDS, members):
        single = clone(est).set_params(random_state=seed, callbacks=[_StopAt(seed + 2)])
        single.fit(X, y)
        assert member.callbacks is None and member.net_.history[-1]["stop_reason"] == "test_stop"
        assert member.n_iter_ == single.n_iter_
        np.testing.assert_array_equal(member.decision_function(X), single.decision_function(X))


# -- failures: per member, or the whole call ------------------------------------------------
_UNSTABLE = FCNSelector(8, solver="sgd", learning_rate_init=0.8, **SMALL)
_OUTCOMES = {0: None, 1: "diverged: the final training loss", 5: "training loss became inf"}


def test_a_member_that_fails_fails_alone_as_its_fit_would():
    members = _clones(_UNSTABLE, seeds=list(_OUTCOMES))
    results = fit_online_members(members, STS, n_steps=60, errors="return")
    for (seed, outcome), member, result in zip(_OUTCOMES.items(), members, results):
        single = clone(_UNSTABLE).set_params(random_state=seed)
        if outcome is None:
            assert result is member
            _assert_same_fit(member, single.fit_online(STS, n_steps=60), STS.sample(9, 0)[0])
            continue
        with pytest.raises(ValueError) as info:
            single.fit_online(STS, n_steps=60)
        assert isinstance(result, ValueError) and str(result) == str(info.value)
        assert outcome in str(result).lower() and not hasattr(member, "net_")


def test_a_failed_call_raises_naming_the_members_and_changes_none():
    members = _clones(_UNSTABLE, seeds=list(_OUTCOMES))
    fit_online_members(members[:1], STS, n_steps=5)  # one fitted before
    before = _weights(members[0])
    with pytest.raises(ValueError, match=r"2 of the 3 members failed \(random_state=1, ") as info:
        fit_online_members(members, STS, n_steps=60)
    assert "no estimator was changed" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert all(torch.equal(before[k], w) for k, w in _weights(members[0]).items())
    assert members[0].n_iter_ == 5 and not hasattr(members[1], "net_")


@pytest.mark.parametrize(
    "estimators, error, match",
    [
        ([SparseTokenSelector(8), FCNSelector(8)], TypeError, "estimators\\[1\\] is a FCNSelector"),
        (
            [SparseTokenSelector(8), SparseTokenSelector(16)],
            ValueError,
            "estimators\\[1\\] has width=16 and estimators\\[0\\] width=8",
        ),
        ([], ValueError, "estimators is empty"),
        ("abc", TypeError, "estimators must be a list"),
        ([SparseTokenSelector(8), object()], TypeError, "estimators\\[1\\] is not an estimator"),
    ],
)
def test_mismatched_estimators_are_refused_before_any_work(estimators, error, match):
    with pytest.raises(error, match=match):
        fit_online_members(estimators, STS, n_steps=5)


def test_bad_input_and_options_are_refused_and_change_nothing():
    est = SparseTokenSelector(8, random_state=0)
    with pytest.raises(ValueError, match="same object twice"):
        fit_online_members([est, est], STS, n_steps=5)
    with pytest.raises(ValueError, match="errors must be 'raise' or 'return', got 'ignore'"):
        fit_online_members(_clones(est), STS, n_steps=5, errors="ignore")
    members = _clones(est)
    with pytest.raises(ValueError, match="n_steps"):
        fit_online_members(members, STS, n_steps=0)
    with pytest.raises(TypeError, match="task must be a SparseTokenSelectionTask"):
        fit_online_members(members, QSA, n_steps=5)
    X, y = STS.sample(10, random_state=0)
    with pytest.raises(ValueError):
        fit_members(members, X, y[:5])
    with pytest.raises(ValueError, match="would need about"):
        fit_online_members(_clones(est.set_params(width=2**16)), STS, n_steps=5)
    assert not any(hasattr(m, "net_") for m in members)


# -- what falls back to the fits one after another, exactly -------------------------------
@pytest.mark.parametrize(
    "settings",
    [dict(learning_rate="adaptive", max_iter=5), dict(verbose=1, max_iter=3)],
    ids=["adaptive rate", "verbose"],
)
def test_settings_that_cannot_move_in_lockstep_are_the_sequential_fits(settings, capsys):
    X, y = STS.sample(30, random_state=0)
    est = FCNSelector(8, **settings, **SMALL)
    batched = fit_members(_clones(est), X, y)
    for seed, member in zip(SEEDS, batched):
        single = clone(est).set_params(random_state=seed).fit(X, y)
        assert all(torch.equal(_weights(single)[k], w) for k, w in _weights(member).items())


def test_warm_start_continues_each_fitted_member_as_its_own_fit():
    est = SparseTokenSelector(8, warm_start=True, **SMALL)
    members, singles = _clones(est), _clones(est)
    fit_online_members(members, STS, n_steps=20)
    for single in singles:
        single.fit_online(STS, n_steps=20)
    fit_online_members(members, STS, n_steps=20)  # fitted, warm: one after another
    for member, single in zip(members, singles):
        _assert_same_fit(member, single.fit_online(STS, n_steps=20), STS.sample(9, 0)[0])


# -- the classifier: labels, classes and the two-step protocol, per member -----------------
SPARSE_CLASSES = SparseTokenClassificationTask(seq_len=6, n_features=3, signal=3.0)
_STRINGS = np.random.RandomState(1).choice(["a", "b", "c"], 60)  # three classes, strings
CLASSIFIERS = {
    "adam, float32, all rows": (SparseTokenClassifier(max_iter=20), None),
    "adam, three string classes": (SparseTokenClassifier(max_iter=20), _STRINGS),
    "sgd, momentum, minibatches": (
        SparseTokenClassifier(solver="sgd", momentum=0.9, batch_size=16, max_iter=8),
        None,
    ),
    "two steps, float64": (SparseTokenClassifier(solver="two_step", max_iter=5, **_F64), None),
    "two steps, query norm": (
        SparseTokenClassifier(solver="two_step", max_iter=5, query_norm=2.0),
        None,
    ),
}


def _count_stacked(monkeypatch):
    """The lists of modules stacked from now on (each a batched run of the classifier)."""
    stacked, original = [], AttentionClassifier.stacked.__func__

    def counting(cls, modules):
        stacked.append(modules)
        return original(cls, modules)

    monkeypatch.setattr(AttentionClassifier, "stacked", classmethod(counting))
    return stacked


def _assert_same_classifier(member, single, X):
    _assert_same_fit(member, single, X)
    np.testing.assert_array_equal(member.classes_, single.classes_)
    np.testing.assert_array_equal(member.decision_function(X), single.decision_function(X))
    if single.two_step_query_ is None:
        assert member.two_step_query_ is None
    else:
        np.testing.assert_array_equal(member.two_step_query_, single.two_step_query_)


@pytest.mark.parametrize(
    "case, online",
    [(case, False) for case in CLASSIFIERS]
    + [(case, True) for case, (_, labels) in CLASSIFIERS.items() if labels is None],
)
def test_every_member_of_a_classifier_is_its_own_fit_to_the_bit(case, online, monkeypatch):
    est, labels = CLASSIFIERS[case]
    stacked = _count_stacked(monkeypatch)
    X, y = SPARSE_CLASSES.sample(60, random_state=0)  # 60 rows: blocks off the alignment
    y = y if labels is None else labels
    members = _clones(est)
    if online:
        fit_online_members(members, SPARSE_CLASSES, n_steps=12)
    else:
        fit_members(members, X, y)
    assert len(stacked) == 1 and len(stacked[0]) == len(SEEDS)  # one model for all seeds
    for seed, member in zip(SEEDS, members):
        single = clone(est).set_params(random_state=seed)
        single = single.fit_online(SPARSE_CLASSES, 12) if online else single.fit(X, y)
        _assert_same_classifier(member, single, X)
    assert members[0].loss_curve_ != members[1].loss_curve_


@pytest.mark.parametrize("stop", [1, 2, 4])
def test_a_two_step_member_that_stops_keeps_its_own_query(stop):
    X, y = SPARSE_CLASSES.sample(60, random_state=0)
    est = SparseTokenClassifier(solver="two_step", max_iter=5, query_norm=2.0)
    members = _clones(est)
    stops = {0: stop, 1: None, 2: stop + 1}
    fit_members(members, X, y, callbacks=[[_StopAt(stops[s])] for s in SEEDS])
    for seed, member in zip(SEEDS, members):
        single = clone(est).set_params(random_state=seed, callbacks=[_StopAt(stops[seed])])
        single.fit(X, y).set_params(callbacks=None)
        assert member.n_iter_ == single.n_iter_
        _assert_same_classifier(member, single, X)
        assert (member.two_step_query_ is None) == (stops[seed] == 1)  # stopped before step 2


@pytest.mark.parametrize("labels", [None, _STRINGS], ids=["two classes", "three classes"])
def test_classifier_members_predict_together_their_own_logits(labels):
    X, y = SPARSE_CLASSES.sample(60, random_state=0)
    members = fit_members(
        _clones(SparseTokenClassifier(max_iter=5)), X, y if labels is None else labels
    )
    rows = [SPARSE_CLASSES.sample(30, random_state=20 + s)[0] for s in SEEDS]
    together = predict_members(members, [m.task_.check_rows(X) for m, X in zip(members, rows)])
    for member, X, logits in zip(members, rows, together):
        np.testing.assert_array_equal(logits, member.decision_function(X))  # to the bit


def test_classifier_members_with_other_numbers_of_classes_are_fitted_one_after_another(
    monkeypatch,
):
    stacked = []
    monkeypatch.setattr(AttentionClassifier, "stacked", lambda ms: stacked.append(ms))
    rows = [SPARSE_CLASSES.sample(60, random_state=10 + s) for s in SEEDS]
    labels = [rows[0][1], _STRINGS, rows[2][1]]  # member 1: three classes
    est = SparseTokenClassifier(max_iter=10)
    members = fit_members(_clones(est), [X for X, _ in rows], labels)
    assert not stacked
    for seed, member, (X, _), y in zip(SEEDS, members, rows, labels):
        _assert_same_classifier(member, clone(est).set_params(random_state=seed).fit(X, y), X)


def test_classifier_members_with_bad_labels_are_refused_before_any_work():
    rows = [SPARSE_CLASSES.sample(60, random_state=10 + s) for s in SEEDS]
    est = SparseTokenClassifier(max_iter=10)
    fitted = fit_members(_clones(est)[:1], rows[0][0], rows[0][1])[0]
    before = _weights(fitted)
    members = [fitted, *_clones(est)[1:]]
    labels = [rows[0][1], np.zeros(60), rows[2][1]]  # member 1: one class
    with pytest.raises(ValueError, match="needs at least 2 classes in y, got 1"):
        fit_members(members, [X for X, _ in rows], labels)
    assert all(torch.equal(before[k], w) for k, w in _weights(fitted).items())
    assert not any(hasattr(m, "net_") or hasattr(m, "classes_") for m in members[1:])
    assert not any("_classes_building" in vars(m) for m in members)


def test_classifier_members_in_a_study_train_together_with_the_sequential_scores(monkeypatch):
    from stsq_learn.studies import search_threshold, sweep

    stacked = _count_stacked(monkeypatch)
    est = SparseTokenClassifier(learning_rate_init=0.1, max_iter=20, batch_size="full")
    task = SparseTokenClassificationTask(8, 4)
    kw = dict(seeds=[0, 1, 2], n_train=80, n_test=200, scoring=lambda e, X, y: 1 - e.score(X, y))
    together = sweep({"attention": est}, task, {"signal": [1.0, 4.0]}, batch_seeds=True, **kw)
    assert [len(s) for s in stacked] == [3, 3]
    alone = sweep({"attention": est}, task, {"signal": [1.0, 4.0]}, **kw)
    np.testing.assert_array_equal(together["score"], alone["score"])
    search = dict(target=0.2, n_iter=3, greater_is_better=False, method="geometric", **kw)
    stacked.clear()
    together = search_threshold({"a": est}, task, "signal", (1.0, 8.0), batch_seeds=True, **search)
    assert stacked and all(len(s) > 1 for s in stacked)
    alone = search_threshold({"a": est}, task, "signal", (1.0, 8.0), **search)
    np.testing.assert_array_equal(together["value"], alone["value"])


# -- a member is a fitted estimator like any other ------------------------------------------
def test_a_member_saves_loads_and_continues_as_its_fit(tmp_path):
    est = SparseTokenRetriever(8, n_heads=2, **SMALL)
    member = fit_online_members(_clones(est), RETRIEVAL, n_steps=30)[1]
    X, y = RETRIEVAL.sample(20, random_state=3)
    save_model(member, tmp_path / "m.stsq")
    loaded = load_model(tmp_path / "m.stsq")
    np.testing.assert_array_equal(loaded.predict(X), member.predict(X))
    single = clone(est).set_params(random_state=1).fit_online(RETRIEVAL, n_steps=30)
    assert member.score(X, y) == pytest.approx(single.score(X, y), abs=1e-9)
    for model in (member, single):
        model.set_params(warm_start=True).fit_online(RETRIEVAL, n_steps=10)
    _assert_same_fit(member, single, X)


def test_batch_reuse_replays_each_members_stream():
    est = SparseTokenSelector(8, **SMALL)
    with reuse_batches() as kept:
        first = fit_online_members(_clones(est), STS, n_steps=10)
        again = fit_online_members(_clones(est), STS, n_steps=10)
        assert len(kept) == len(SEEDS)
    for a, b in zip(first, again):
        assert all(torch.equal(_weights(a)[k], w) for k, w in _weights(b).items())


# -- single-location regression: its own loops, every solver ------------------------------
SINGLE_LOCATION = SingleLocationTask(seq_len=4, n_features=6)


@pytest.mark.parametrize(
    "est, online",
    [
        (ErfAttentionRegressor(learning_rate_init=0.02, max_iter=200), True),
        (ErfAttentionRegressor(solver="sgd", batch_size=16, max_iter=200, init="manifold"), True),
        (ErfAttentionRegressor(learning_rate_init=0.02, max_iter=200), False),
        (SoftmaxAttentionRegressor(batch_size=16, max_iter=200, learning_rate_init=0.05), True),
        (SoftmaxAttentionRegressor(solver="sgd", batch_size=16, max_iter=200), False),
    ],
    ids=[
        "erf pgd online",
        "erf sgd online",
        "erf pgd fit",
        "softmax adam online",
        "softmax sgd fit",
    ],
)
def test_single_location_members_are_their_own_fits(est, online):
    X, y = SINGLE_LOCATION.sample(64, random_state=0)
    members = _clones(est)
    if online:
        fit_online_members(members, SINGLE_LOCATION, n_steps=200)
    else:
        fit_members(members, X, y)
    for seed, member in zip(SEEDS, members):
        single = clone(est).set_params(random_state=seed)
        single = single.fit_online(SINGLE_LOCATION, 200) if online else single.fit(X, y)
        for name in est._vectors:
            np.testing.assert_allclose(getattr(member, name), getattr(single, name), atol=TOL)
        np.testing.assert_allclose(member.loss_curve_, single.loss_curve_, rtol=TOL)
        np.testing.assert_allclose(member.predict(X), single.predict(X), atol=TOL)


# -- the member-aware pieces ---------------------------------------------------------------
def _generators(n=3):
    return [torch.Generator().manual_seed(10 + s) for s in range(n)]


@pytest.mark.parametrize("width", [1, 3, 16])
def test_a_stream_of_members_gives_each_its_own_draws_bit_for_bit(width):
    n, T = 5, 7
    together, alone = StreamedDraws(_generators()), [StreamedDraws(g) for g in _generators()]
    # Each member reads its own largest query: member 1's is 1 position, the others' 2.
    read = torch.tensor([[1.0, 1.0]] * n + [[1.0, 0.0]] * n + [[1.0, 0.0]] * (n - 1) + [[1, 1]])
    where = torch.arange(2).expand(3 * n, 2)
    P = together.sphere(where, width, "cpu", torch.float64, read=read)
    for s, draws in enumerate(alone):
        own = draws.sphere(where[:n, : 1 if s == 1 else 2], width, "cpu", torch.float64)
        assert torch.equal(P[s * n : (s + 1) * n, : own.shape[1]], own)
    assert torch.isfinite(P).all()
    checks = [
        lambda d, k: d.coordinates(k * n, T, width, "cpu", torch.float64),
        lambda d, k: d.subsets(k * n, T, 12, "cpu"),
    ]
    if width > 2:
        checks.append(lambda d, k: d.joint_coordinates(k * n, T, width, 2, "cpu", torch.float64))
    for draw in checks:
        expected = torch.cat([draw(d, 1) for d in alone])
        assert torch.equal(draw(together, 3), expected)
    for g, draws in zip(together.generator, alone):  # every generator where its own fit's is
        assert torch.equal(g.get_state(), draws.generator.get_state())


def test_the_gamma_draws_of_members_are_each_generators_own():
    for alpha in (0.4, 2.5, 60.0):
        together = sampling._standard_gamma((50,), alpha, _generators(), "cpu", torch.float64)
        alone = [
            sampling._standard_gamma((50,), alpha, g, "cpu", torch.float64) for g in _generators()
        ]
        assert torch.equal(together, torch.cat(alone))


@pytest.mark.parametrize(
    "family, heads",
    [("stochastic", 1), ("stochastic", 3), ("fixed", 2), ("randomized", 1), ("sinusoidal", 1)],
)
@pytest.mark.parametrize("task", [STS, QSA, RETRIEVAL], ids=["selection", "averaging", "retrieval"])
def test_a_stacked_module_computes_each_members_forward(family, heads, task):
    modules = []
    for seed in range(3):
        torch.manual_seed(seed)
        module = Attention(task, 6, family, encoding_seed=seed, max_positions=20, n_heads=heads)
        with torch.no_grad():
            module.key_query.normal_()
        modules.append(module.double())
    stacked = Attention.stacked(modules)
    rows = [task.sample_torch(4, generator=g, dtype=torch.float64)[0] for g in _generators()]
    out = stacked(torch.cat(rows), generator=StreamedDraws(_generators()))
    alone = [m(X, generator=StreamedDraws(g)) for m, X, g in zip(modules, rows, _generators())]
    torch.testing.assert_close(out, torch.cat(alone), rtol=0, atol=1e-12)
    assert stacked.key_query.shape == (3, *modules[0].key_query.shape)


def test_a_stacked_fully_connected_net_keeps_its_parameter_names():
    modules = [FullyConnected(5, 2, 7, (4,)).double() for _ in range(3)]
    stacked = FullyConnected.stacked(modules)
    assert list(stacked.state_dict()) == list(modules[0].state_dict())
    X = torch.randn(6, 5, 3, dtype=torch.float64)
    torch.testing.assert_close(stacked(X), torch.cat([m(x) for m, x in zip(modules, X.chunk(3))]))


@pytest.mark.parametrize("case", ["selector marginal", "FCN averager", "linear attention"])
def test_members_predict_together_as_each_alone(case):
    est, task = ONLINE[case]
    members = fit_online_members(_clones(est.set_params(dtype="float32")), task, n_steps=20)
    rows = [task.sample(30, random_state=20 + s)[0] for s in SEEDS]
    checked = [members[0].task_.check_rows(X) for X in rows]
    together = predict_members(members, checked)
    for member, X, pred in zip(members, rows, together):
        np.testing.assert_array_equal(pred, member.predict(X))  # to the bit
    assert predict_members(members, [checked[0], checked[1], checked[2][:10]]) is None
    assert predict_members(members[:1], checked[:1]) is None
