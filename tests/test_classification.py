"""Sparse-token classification: the law, the attention classifier, the baselines, the theory."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.base import clone
from sklearn.calibration import calibration_curve
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

from stsq_learn import (
    FlattenTokens,
    MeanPoolTokens,
    SparseTokenClassificationTask,
    SparseTokenClassifier,
    attention_logit_limits,
    attention_signal_share,
    attention_threshold,
    load_model,
    make_flat_logistic,
    make_pooled_logistic,
    make_sparse_token_classification,
    pooled_error,
    pooled_threshold,
    registry,
    save_model,
    two_step_alignment,
)
from stsq_learn.tasks.checks import check_task, check_task_class


@pytest.fixture(scope="module")
def data():
    """300 training and 2000 test rows, L = 16, d = 8, theta = 4."""
    X, y = make_sparse_token_classification(300, 16, 8, signal=4.0, random_state=0)
    Xt, yt = make_sparse_token_classification(2000, 16, 8, signal=4.0, random_state=1)
    return X, y, Xt, yt


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return SparseTokenClassifier(max_iter=150, random_state=0).fit(X, y)


# -- the law ----------------------------------------------------------------------------
def test_task_passes_the_protocol_checks_and_is_registered():
    check_task_class(SparseTokenClassificationTask)
    check_task(SparseTokenClassificationTask(8, 4))
    reg = [r for r in registry.registrations() if r.task is SparseTokenClassificationTask]
    assert len(reg) == 1 and reg[0].estimators == (SparseTokenClassifier,)
    assert reg[0].make is make_sparse_token_classification


def test_the_law_puts_theta_xi_on_r_tokens_of_positive_rows_only():
    task = SparseTokenClassificationTask(12, 5, n_informative=3, signal=2.5, random_state=4)
    X, y = task.sample(4000, random_state=0)
    xi = task.signal_direction
    assert np.isclose(np.linalg.norm(xi), 1.0)
    assert y.dtype == np.int64  # integer labels, as scikit-learn's generators give them
    np.testing.assert_array_equal(np.unique(y), [0, 1])
    assert abs(y.mean() - 0.5) < 0.03
    proj = X @ xi  # (n, L)
    # positive rows: the token means along xi sum to R theta; negative rows: to 0
    assert abs(proj[y == 1].sum(1).mean() - 3 * 2.5) < 0.2
    assert abs(proj[y == 0].sum(1).mean()) < 0.2
    # the noise is N(0, 1) in every direction orthogonal to xi
    resid = X - proj[..., None] * xi
    assert abs(resid.reshape(-1, 5).var(0).sum() - 4.0) < 0.05
    # xi is the law's: the same seed gives the same xi, another seed another
    np.testing.assert_array_equal(
        SparseTokenClassificationTask(3, 5, random_state=4).signal_direction, xi
    )
    assert not np.allclose(SparseTokenClassificationTask(3, 5, random_state=5).signal_direction, xi)


def test_the_law_drawn_on_the_device_is_the_same_law():
    """fit_online's batches (sample_torch): the signal on R tokens of positive rows only."""
    task = SparseTokenClassificationTask(12, 5, n_informative=3, signal=2.5, random_state=4)
    X, y = task.sample_torch(4000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    X, y = X.numpy(), y.numpy()
    assert X.shape == (4000, 12, 5) and y.dtype == np.float64
    np.testing.assert_array_equal(np.unique(y), [0.0, 1.0])
    assert abs(y.mean() - 0.5) < 0.03
    proj = X @ task.signal_direction
    assert abs(proj[y == 1].sum(1).mean() - 3 * 2.5) < 0.2
    assert abs(proj[y == 0].sum(1).mean()) < 0.2
    # R distinct places: the informative tokens are the 3 largest along xi, by far
    top = np.sort(proj[y == 1], axis=1)[:, -3:]
    assert np.median(top) > 1.5
    again = task.sample_torch(7, generator=torch.Generator().manual_seed(0))
    assert again[0].dtype == torch.float32 and torch.equal(again[1], again[1])


def test_positive_fraction_and_seeds():
    X, y = make_sparse_token_classification(5000, 4, 2, positive_fraction=0.2, random_state=0)
    assert abs(y.mean() - 0.2) < 0.02
    X2, _ = make_sparse_token_classification(5000, 4, 2, positive_fraction=0.2, random_state=0)
    np.testing.assert_array_equal(X, X2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_informative": 9}, ValueError, r"n_informative=9 is more than seq_len=8"),
        ({"n_informative": 0}, ValueError, r"n_informative"),
        ({"signal": -1.0}, ValueError, r"signal must be a finite number in \[0, inf\), got -1.0"),
        ({"signal": True}, TypeError, r"signal must be a real number, got True"),
        ({"positive_fraction": 1.0}, ValueError, r"positive_fraction .* got 1.0"),
        ({"random_state": -1}, ValueError, r"random_state of a task must be an int in"),
        ({"random_state": 1.5}, TypeError, r"random_state of a task must be an int"),
    ],
)
def test_bad_law_fields_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        SparseTokenClassificationTask(8, 3, **kwargs)


def test_shift_adds_noise_tokens_and_keeps_labels():
    task = SparseTokenClassificationTask(6, 3, signal=3.0)
    X, y = task.sample(50, random_state=0)
    Xs, ys = task.shift(X, y, 20, random_state=1)
    assert Xs.shape == (50, 20, 3) and ys is y
    # each original row appears, in order, inside its shifted row
    for i in range(5):
        rows = {tuple(np.round(t, 12)) for t in Xs[i]}
        assert all(tuple(np.round(t, 12)) in rows for t in X[i])
    with pytest.raises(ValueError, match=r"seq_len=4 is shorter than the rows' length 6"):
        task.shift(X, y, 4)


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros((4, 3)), [0, 1, 0, 1], r"X must be 3-D"),
        (np.zeros((4, 3, 2)), [0, 1, 0], r"y must have shape \(n_samples,\) = \(4,\)"),
        (np.zeros((4, 3, 2)), [0, 1, 2, 1], r"holds 0 \(noise\) and 1 .* got 2 at row 2"),
        (np.full((2, 3, 2), np.nan), [0, 1], r"NaN"),
    ],
)
def test_contract_errors(X, y, match):
    with pytest.raises(ValueError, match=match):
        SparseTokenClassificationTask.from_data(X, y)


# -- the attention classifier -------------------------------------------------------------
def test_it_learns(data, fitted):
    X, y, Xt, yt = data
    assert fitted.score(Xt, yt) > 0.85
    pooled = make_pooled_logistic().fit(X, y).score(Xt, yt)
    flat = make_flat_logistic().fit(X, y).score(Xt, yt)
    assert fitted.score(Xt, yt) > pooled + 0.1 and fitted.score(Xt, yt) > flat + 0.1
    # the query points along xi: the attention picks the informative token
    xi = SparseTokenClassificationTask(16, 8).signal_direction
    assert fitted.query_ @ xi / np.linalg.norm(fitted.query_) > 0.7


def test_fitted_attributes_and_shapes(fitted, data):
    Xt = data[2]
    assert fitted.n_features_in_ == 8 and fitted.seq_len_ == 16
    assert fitted.n_iter_ == 150 == len(fitted.loss_curve_)
    assert fitted.t_ == 150 * 300  # batches of 200 and 100 rows an epoch
    assert fitted.loss_curve_[0] == pytest.approx(np.log(2), abs=0.02)  # from w = 0
    assert fitted.loss_curve_[-1] < 0.5 * fitted.loss_curve_[0]
    np.testing.assert_array_equal(fitted.classes_, [0, 1])
    assert (
        fitted.device_ == torch.device("cpu") and fitted.net_.module_.query.dtype == torch.float32
    )
    assert fitted.query_.shape == fitted.readout_.shape == (8,)
    assert isinstance(fitted.intercept_, float)
    proba = fitted.predict_proba(Xt[:7])
    assert proba.shape == (7, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(np.exp(fitted.predict_log_proba(Xt[:7])), proba, rtol=1e-12)
    att = fitted.attention(Xt[:3])
    assert att.shape == (3, 16)
    np.testing.assert_allclose(att.sum(1), 1.0, rtol=1e-6)
    # any length at predict
    assert fitted.predict(make_sparse_token_classification(5, 40, 8, random_state=0)[0]).shape == (
        5,
    )


def test_proba_agrees_with_the_decision(fitted, data):
    Xt = data[2][:200]
    f = fitted.decision_function(Xt)
    p = fitted.predict_proba(Xt)[:, 1]
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-f)), rtol=1e-12)
    assert np.all(np.diff(p[np.argsort(f)]) >= 0)
    np.testing.assert_array_equal(fitted.predict(Xt), fitted.classes_[(f > 0).astype(int)])
    # the logit is the module's, by hand: <w, sum_l softmax(x_l q) x_l> + b
    q, w, b = fitted.query_, fitted.readout_, fitted.intercept_
    s = Xt @ q
    a = np.exp(s - s.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    np.testing.assert_allclose(f, np.einsum("nl,nld->nd", a, Xt) @ w + b, rtol=1e-4, atol=1e-5)


def test_labels_of_any_type(data):
    X, y, _, _ = data
    ref = SparseTokenClassifier(max_iter=20, random_state=0).fit(X, y)
    for labels in (
        np.array([-1, 1]),
        np.array(["noise", "signal"]),
        np.array([False, True]),
        np.array([0.0, 1.0]),
    ):
        yy = labels[y]
        clf = SparseTokenClassifier(max_iter=20, random_state=0).fit(X, yy)
        np.testing.assert_array_equal(clf.classes_, labels)
        assert set(clf.predict(X[:20])) <= set(labels)
        np.testing.assert_array_equal(clf.decision_function(X[:20]), ref.decision_function(X[:20]))


def test_continuous_y_is_refused(data):
    X = data[0]
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        SparseTokenClassifier().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match=r"needs at least 2 classes in y, got 1: \[0\]"):
        SparseTokenClassifier().fit(X, np.zeros(len(X), dtype=int))


def test_three_classes_by_a_softmax_readout_over_one_query():
    """Class 0 is noise, classes 1 and 2 carry the signal along two directions."""
    rng = np.random.default_rng(0)
    L, d, n = 8, 6, 900
    X = rng.standard_normal((2 * n, L, d))
    y = np.arange(2 * n) % 3
    directions = np.eye(d)[:2]
    place = rng.integers(0, L, 2 * n)
    for k in (1, 2):
        rows = y == k
        X[rows, place[rows]] += 4.0 * directions[k - 1]
    labels = np.array(["noise", "first", "second"])[y]
    clf = SparseTokenClassifier(max_iter=60, learning_rate_init=0.1, random_state=0)
    clf.fit(X[:n], labels[:n])
    np.testing.assert_array_equal(clf.classes_, ["first", "noise", "second"])
    f = clf.decision_function(X[n:])
    p = clf.predict_proba(X[n:])
    assert f.shape == p.shape == (n, 3) and clf.readout_.shape == (3, d)
    assert clf.intercept_.shape == (3,)
    np.testing.assert_allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X[n:])), p, rtol=1e-10)
    np.testing.assert_array_equal(clf.predict(X[n:]), clf.classes_[f.argmax(1)])
    assert clf.score(X[n:], labels[n:]) > 0.8  # chance is 1/3
    assert clf.loss_curve_[-1] < 0.5 * np.log(3)  # log 3: the loss of logits 0


def test_lists_and_tensors_are_accepted(data):
    X, y = data[0][:40], data[1][:40]
    ref = SparseTokenClassifier(max_iter=5, random_state=0).fit(X, y)
    for XX, yy in ((X.tolist(), y.tolist()), (torch.as_tensor(X), torch.as_tensor(y))):
        clf = SparseTokenClassifier(max_iter=5, random_state=0).fit(XX, yy)
        np.testing.assert_array_equal(clf.decision_function(XX), ref.decision_function(X))


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"solver": "bogus"}, ValueError, r"'solver' parameter .* must be a str among"),
        ({"learning_rate_init": 0}, ValueError, r"'learning_rate_init' parameter"),
        ({"learning_rate_init": True}, TypeError, r"must be a real number, got the boolean True"),
        ({"max_iter": 2.5}, ValueError, r"'max_iter' parameter"),
        ({"alpha": float("inf")}, ValueError, r"'alpha' parameter .* Got inf instead"),
        ({"query_norm": -1.0}, ValueError, r"'query_norm' parameter"),
        ({"batch_size": "all"}, ValueError, r"'batch_size' parameter"),
        ({"dtype": "float16"}, ValueError, r"'dtype' parameter"),
        ({"device": "bogus"}, ValueError, r"device"),
    ],
)
def test_bad_hyperparameters_are_refused_before_any_work_and_leave_the_fit(
    params, error, match, fitted, data
):
    clf = clone(fitted).set_params(max_iter=5).fit(data[0][:50], data[1][:50])
    before = clf.decision_function(data[2][:5])
    with pytest.raises(error, match=match):
        clf.set_params(**params).fit(data[0], data[1])
    np.testing.assert_array_equal(clf.decision_function(data[2][:5]), before)


def test_solver_gd_of_0_6_is_deprecated_full_batch_sgd(data):
    X, y = data[0][:60], data[1][:60]
    with pytest.warns(FutureWarning, match=r"solver='gd' is deprecated .* batch_size='full'"):
        old = SparseTokenClassifier(solver="gd", max_iter=4, random_state=0).fit(X, y)
    new = SparseTokenClassifier(solver="sgd", batch_size="full", max_iter=4, random_state=0)
    np.testing.assert_array_equal(old.decision_function(X), new.fit(X, y).decision_function(X))
    assert old.t_ == 4 * 60 and old.solver_ == "sgd"


def test_divergence_is_a_value_error_naming_the_step_size(data):
    X, y = data[0] * 1e3, data[1]
    clf = SparseTokenClassifier(solver="sgd", batch_size="full", learning_rate_init=1e10)
    with pytest.raises(ValueError, match=r"lower learning_rate_init \(it was 1e\+10\)"):
        clf.set_params(max_iter=50).fit(X, y)
    assert not hasattr(clf, "classes_")
    with pytest.warns(UserWarning, match="training diverged"):
        clf.set_params(on_divergence="warn", learning_rate_init=30.0).fit(X, y)


def test_other_token_features_at_predict_are_refused(fitted):
    with pytest.raises(ValueError, match=r"3 token features per token.*n_features=8"):
        fitted.predict(np.zeros((2, 5, 3)))


def test_idempotent_with_an_int_seed_and_inputs_unchanged(data):
    X, y = data[0][:60].copy(), data[1][:60].copy()
    X.setflags(write=False)
    a = SparseTokenClassifier(max_iter=10, random_state=3).fit(X, y).decision_function(X)
    b = SparseTokenClassifier(max_iter=10, random_state=3).fit(X, y).decision_function(X)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, data[0][:60])


def test_two_step_protocol_aligns_the_query(data):
    X, y, Xt, yt = data
    clf = SparseTokenClassifier(solver="two_step", learning_rate_init=1.0, query_norm=2.0).fit(X, y)
    xi = SparseTokenClassificationTask(16, 8).signal_direction
    q = clf.two_step_query_
    assert q @ xi / np.linalg.norm(q) > 0.5
    np.testing.assert_allclose(np.linalg.norm(clf.query_), 2.0, rtol=1e-6)
    np.testing.assert_allclose(clf.query_ / 2.0, q / np.linalg.norm(q), rtol=1e-5, atol=1e-7)
    assert clf.score(Xt, yt) > 0.8
    assert clf.n_iter_ == 302 and clf.t_ == 302 * 300  # the two steps, then 300, on all rows
    assert SparseTokenClassifier(max_iter=3).fit(X, y).two_step_query_ is None


def test_the_two_steps_are_the_papers_gradient_steps(data):
    """Step 1 moves w alone, step 2 q alone (from q = w = b = 0), by plain gradient steps
    on the mean logistic loss; then q is kept: the protocol by hand, in float64."""
    X, y = data[0][:80], data[1][:80].astype(float)
    lr = 0.5
    clf = SparseTokenClassifier(solver="two_step", learning_rate_init=lr, max_iter=2, alpha=0.0)
    clf.set_params(dtype="float64").fit(X, y)
    pooled = X.mean(1)  # uniform attention at q = 0
    w1 = -lr * pooled.T @ (0.5 - y) / len(y)
    f = pooled @ w1
    p = 1 / (1 + np.exp(-f))
    # d f / d q at q = 0: <w, sum_l a_l (x_l - pooled) (x_l . )> with a_l = 1 / L
    xw = X @ w1  # (n, L)
    grad_q = np.einsum("nl,nld->nd", xw - xw.mean(1, keepdims=True), X) / X.shape[1]
    q2 = -lr * ((p - y)[:, None] * grad_q).mean(0)
    np.testing.assert_allclose(clf.two_step_query_, q2, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(clf.query_, q2, rtol=1e-10, atol=1e-14)  # kept after step 2


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 30),
    L=st.integers(1, 12),
    d=st.integers(1, 5),
    L_pred=st.integers(1, 20),
    solver=st.sampled_from(["adam", "sgd", "two_step"]),
    batch_size=st.sampled_from(["auto", "full", 3]),
)
def test_any_shape_fits_and_predicts(n, L, d, L_pred, solver, batch_size):
    rng = np.random.default_rng(n * 100 + L)
    X = rng.standard_normal((n, L, d))
    y = np.arange(n) % 2
    clf = SparseTokenClassifier(solver=solver, max_iter=3, batch_size=batch_size, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # three steps may end worse than no model
        clf.fit(X, y)
    Xp = rng.standard_normal((3, L_pred, d))
    assert clf.predict(Xp).shape == (3,)
    assert clf.predict_proba(Xp).shape == (3, 2)
    assert np.isfinite(clf.decision_function(Xp)).all()


# -- the engine: device, dtype, batches, streams, memory, warm starts --------------------------
def test_device_auto_and_a_missing_cuda(data):
    X, y = data[0][:30], data[1][:30]
    clf = SparseTokenClassifier(max_iter=2, random_state=0).fit(X, y)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert clf.device_.type == expected and clf.net_.module_.query.device.type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            SparseTokenClassifier(device="cuda").fit(X, y)


def test_float64_and_minibatches(data):
    X, y = data[0], data[1]
    clf = SparseTokenClassifier(dtype="float64", batch_size=50, max_iter=3, random_state=0)
    clf.fit(X, y)
    assert clf.net_.module_.query.dtype == torch.float64
    batches = [len(e["batches"]) for e in clf.net_.history]
    assert batches == [6, 6, 6] and clf.t_ == 3 * 300
    full = SparseTokenClassifier(batch_size="full", max_iter=3, random_state=0).fit(X, y)
    assert [len(e["batches"]) for e in full.net_.history] == [1, 1, 1]


def test_fit_online_learns_from_a_stream_of_the_law(data):
    _, _, Xt, yt = data
    task = SparseTokenClassificationTask(16, 8, signal=4.0)
    clf = SparseTokenClassifier(batch_size=64, random_state=0).fit_online(task, n_steps=200)
    np.testing.assert_array_equal(clf.classes_, [0, 1])
    assert clf.n_iter_ == 200 == len(clf.loss_curve_) and clf.t_ == 200 * 64
    assert clf.score(Xt, yt) > 0.85
    # a warm start keeps the fitted labels: the law's label 1 is classes_[1]
    named = SparseTokenClassifier(max_iter=5, random_state=0, warm_start=True)
    named.fit(data[0], np.array(["n", "s"])[data[1]]).fit_online(task, n_steps=100)
    np.testing.assert_array_equal(named.classes_, ["n", "s"])
    assert named.n_iter_ == 105 and named.score(Xt, np.array(["n", "s"])[yt]) > 0.8


def test_a_warm_start_continues_and_keeps_its_classes(data):
    X, y, Xt, _ = data
    clf = SparseTokenClassifier(max_iter=20, random_state=0, warm_start=True).fit(X, y)
    first = clf.loss_curve_[-1]
    clf.fit(X, y)
    assert clf.n_iter_ == 40 and len(clf.loss_curve_) == 40 and clf.loss_curve_[20] <= first + 0.05
    before = clf.decision_function(Xt[:5])
    with pytest.raises(ValueError, match=r"whose classes were \[0, 1\]; this call's are \[-1, 1\]"):
        clf.fit(X, np.where(y > 0, 1, -1))
    with pytest.raises(ValueError, match=r"which has 3 classes; the law of .* draws 2"):
        SparseTokenClassifier(max_iter=2, warm_start=True).fit(X, np.arange(300) % 3).fit_online(
            SparseTokenClassificationTask(16, 8)
        )
    np.testing.assert_array_equal(clf.decision_function(Xt[:5]), before)


def test_a_problem_too_large_for_the_memory_is_refused_before_any_copy(monkeypatch):
    """4,000,000 rows x L=256 x d=64 as a read-only broadcast view of zeros (the issue's
    case: 0.6 copied it and numpy raised MemoryError, 488 GiB)."""
    X = np.broadcast_to(np.zeros((1, 1, 1)), (4_000_000, 256, 64))
    y = np.broadcast_to(np.array([0, 1]), (2_000_000, 2)).reshape(-1)

    def no_copy(*args, **kwargs):
        raise AssertionError("the rows were copied before the memory check")

    monkeypatch.setattr("stsq_learn.engine.training.as_tensor", no_copy)
    with pytest.raises(ValueError) as info:
        SparseTokenClassifier().fit(X, y)
    message = str(info.value)
    assert (
        "SparseTokenClassifier with len(classes_)=2, batch_size=200, seq_len=256 would need "
        "about 244 GiB"
    ) in message
    assert "244 GiB for the training rows" in message and "fit_online" in message


# -- scikit-learn's tools -----------------------------------------------------------------
def test_grid_search_with_roc_auc_on_stratified_folds(data):
    X, y = data[0], data[1]
    grid = GridSearchCV(
        SparseTokenClassifier(max_iter=40, batch_size="full", random_state=0),
        {"learning_rate_init": [0.01, 0.1], "alpha": [1e-4, 1e-2]},
        scoring="roc_auc",
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
    ).fit(X, y)
    assert grid.best_score_ > 0.8
    assert set(grid.best_params_) == {"learning_rate_init", "alpha"}
    scores = cross_val_score(
        SparseTokenClassifier(max_iter=40, learning_rate_init=0.1, random_state=0),
        X,
        y,
        cv=StratifiedKFold(3),
        scoring="accuracy",
    )
    assert scores.shape == (3,) and scores.mean() > 0.75


def test_probabilities_are_calibrated(fitted, data):
    """The calibration check: on 2000 fresh rows, in 5 quantile bins, the observed
    positive rate is within 0.1 of the mean predicted probability (0.007 measured; seeds
    1 to 3: at most 0.052), and the Brier score is below the base rate's (0.25). A heavy
    weight decay shrinks the logits: alpha=1e-2 is off by 0.13 in the second bin."""
    _, _, Xt, yt = data
    p = fitted.predict_proba(Xt)[:, 1]
    observed, predicted = calibration_curve(yt, p, n_bins=5, strategy="quantile")
    assert np.max(np.abs(observed - predicted)) < 0.1
    assert np.mean((p - yt) ** 2) < 0.15


def test_save_and_load_round_trip(fitted, data, tmp_path):
    path = tmp_path / "clf.stsq"
    save_model(fitted, path)
    loaded = load_model(path)
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(
        loaded.decision_function(data[2]), fitted.decision_function(data[2])
    )
    np.testing.assert_array_equal(loaded.classes_, fitted.classes_)
    assert loaded.loss_curve_ == fitted.loss_curve_ and loaded.t_ == fitted.t_
    two = SparseTokenClassifier(solver="two_step", max_iter=5).fit(
        data[0], np.where(data[1] > 0, "s", "n")
    )
    save_model(two, path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(data[2][:50]), two.predict(data[2][:50]))
    np.testing.assert_array_equal(loaded.two_step_query_, two.two_step_query_)
    three = SparseTokenClassifier(max_iter=3, random_state=0).fit(data[0], np.arange(300) % 3)
    save_model(three, path)
    np.testing.assert_array_equal(
        load_model(path).predict_proba(data[2][:50]), three.predict_proba(data[2][:50])
    )


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("classes_", [1.0], "fitted classes_ must be at least two distinct labels of one type"),
        ("classes_", [1, 1], "fitted classes_ must be at least two distinct labels of one type"),
        ("classes_", [1, "a"], "fitted classes_ must be at least two distinct labels of one type"),
        ("classes_", [0, 1, 2], r"weight 'readout' has shape \(8,\), but the model of"),
        ("two_step_query_", [1.0], r"two_step_query_ must be None or 8 finite numbers"),
        ("seq_len_", 0, "fitted seq_len_ must be an integer from 1 to 2147483647, got 0"),
        # A forged huge size: refused before a shape is computed (was torch's overflow error).
        ("n_features_in_", 2**62, "fitted n_features_in_ must be an integer from 1 to "),
        ("n_features_in_", 10**30, r"got 1000000000000000000000000000000\."),
        ("n_features_in_", 10**6, r"n_features_in_=1000000 does not fit the weights.*is 8\."),
        ("loss_curve_", [10**400], "fitted loss_curve_ must be a list of numbers"),
        ("two_step_query_", [10**400] * 8, "fitted two_step_query_ must be None or a list"),
    ],
)
def test_a_bad_fitted_state_is_refused(fitted, key, value, match):
    state = fitted.get_fitted_state()
    state["fitted"][key] = value
    model = clone(fitted)
    with pytest.raises(ValueError, match=match):
        model.set_fitted_state(state)
    assert not hasattr(model, "classes_") and not hasattr(model, "net_")


# -- the baselines ------------------------------------------------------------------------
def test_baselines_are_pipelines_of_scikit_learn_logistic_regression(data):
    X, y = data[0], data[1]
    flat, pooled = make_flat_logistic(C=0.5), make_pooled_logistic()
    assert [n for n, _ in flat.steps] == ["flattentokens", "logisticregression"]
    assert [n for n, _ in pooled.steps] == ["meanpooltokens", "logisticregression"]
    assert flat.get_params()["logisticregression__C"] == 0.5
    np.testing.assert_array_equal(FlattenTokens().fit_transform(X), X.reshape(len(X), -1))
    np.testing.assert_allclose(MeanPoolTokens().fit_transform(X), X.mean(1))
    flat.fit(X, y)
    with pytest.raises(ValueError, match=r"rows of 20 tokens, but FlattenTokens was fitted on"):
        flat.predict(make_sparse_token_classification(3, 20, 8, random_state=0)[0])
    assert pooled.fit(X, y).predict(make_sparse_token_classification(3, 20, 8)[0]).shape == (3,)
    with pytest.raises(ValueError, match="must be 3-D"):
        MeanPoolTokens().fit_transform(np.zeros((3, 4)))


# -- the theory, against Monte Carlo --------------------------------------------------------
@pytest.mark.parametrize(("theta", "L", "R", "pi"), [(4.0, 16, 1, 0.5), (6.0, 64, 2, 0.3)])
def test_pooled_error_is_the_error_of_the_pooled_oracle(theta, L, R, pi):
    task = SparseTokenClassificationTask(L, 4, n_informative=R, signal=theta, positive_fraction=pi)
    X, y = task.sample(40_000, random_state=0)
    p = X.mean(1) @ task.signal_direction
    mu = R * theta / L
    t = mu / 2 + np.log((1 - pi) / pi) / (L * mu)
    mc = np.mean((p > t) != (y == 1))
    assert abs(mc - pooled_error(theta, L, R, pi)) < 0.006
    assert pooled_error(0.0, L, R, pi) == min(pi, 1 - pi)


def test_pooled_threshold_is_the_sqrt_law():
    L = np.array([8, 32, 128, 512])
    th = pooled_threshold(L, n_informative=2, target_error=0.1)
    np.testing.assert_allclose(th / np.sqrt(L), 2 * norm.ppf(0.9) / 2)
    for t, length in zip(th, L, strict=True):
        np.testing.assert_allclose(pooled_error(t, length, n_informative=2), 0.1)


def test_attention_limits_against_monte_carlo():
    """The oracle attention (query beta xi, readout xi): the mean logits of negative and
    positive rows agree with beta and beta + m theta where the token sums concentrate."""
    L, R, beta = 4000, 400, 1.0
    theta = attention_threshold(L, R, beta)  # share 1/2
    assert np.isclose(attention_signal_share(theta, L, R, beta), 0.5)
    rng = np.random.default_rng(0)
    u = rng.standard_normal((300, L))  # the tokens' coordinates along xi
    u_pos = u.copy()
    u_pos[:, :R] += theta
    neg, pos = attention_logit_limits(theta, L, R, beta)

    def logit(u):
        a = np.exp(beta * u - (beta * u).max(1, keepdims=True))
        return (a * u).sum(1) / a.sum(1)

    assert abs(logit(u).mean() - neg) < 0.02
    assert abs(logit(u_pos).mean() - pos) < 0.02
    # the log law: equal steps in log L give equal steps in the threshold
    steps = np.diff(attention_threshold(np.array([1e3, 1e4, 1e5]) + 1, 1, beta))
    np.testing.assert_allclose(steps, np.log(10) / beta, rtol=1e-3)


@pytest.mark.parametrize("alpha", [2.0, 8.0])
def test_two_step_alignment_against_monte_carlo(alpha):
    d, L, theta = 400, 8, 3.0
    task = SparseTokenClassificationTask(L, d, signal=theta)
    xi = task.signal_direction
    cos = []
    for seed in range(4):
        X, y = task.sample(int(alpha * d), random_state=seed)
        clf = SparseTokenClassifier(solver="two_step", learning_rate_init=1e-3, max_iter=1)
        q = clf.fit(X, y).two_step_query_
        cos.append(q @ xi / np.linalg.norm(q))
    _, rho2 = two_step_alignment(theta, L, alpha)
    assert abs(np.mean(cos) - rho2) < 0.06
    assert np.mean(cos) > 5 / np.sqrt(d)  # far above chance
    assert two_step_alignment(theta, L, 2 * alpha)[1] > rho2  # grows with n / d
