"""Bad input across the public API, failed calls, overflow, divergence, Ctrl-C,
pickling and determinism."""

import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch

import stsq_learn.nn as stsq_nn
from stsq_learn import (
    FCNSelector,
    LengthShiftScorer,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    length_shift_scoring,
    load_model,
    make_sparse_token_selection,
    save_model,
    shift_length,
)
from stsq_learn.engine.base import _BaseEstimator
from stsq_learn.engine.training import finite_forward

TASK = SparseTokenSelectionTask(5, 3, 2)


@pytest.fixture(scope="module")
def ctx():
    X, y = make_sparse_token_selection(60, 5, 3, 2, random_state=0)
    spe = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(X, y)
    fcn = FCNSelector(width=4, max_iter=2, random_state=0).fit(X, y)
    return {"X": X, "y": y, "spe": spe, "fcn": fcn}


def snapshot(est):
    """Everything a failed call must leave alone."""
    return {
        "state": {k: v.clone() for k, v in est.net_.module_.state_dict().items()},
        "attrs": {k: v for k, v in vars(est).items() if k != "net_"},
        "loss_curve": list(est.loss_curve_),
        "history": len(est.net_.history),
        "params": est.get_params(),
    }


def assert_unchanged(est, snap, X):
    now = snapshot(est)
    assert now["state"].keys() == snap["state"].keys()
    for k, v in snap["state"].items():
        assert torch.equal(now["state"][k], v), k
    assert now["loss_curve"] == snap["loss_curve"]
    assert now["history"] == snap["history"]
    assert now["attrs"].keys() == snap["attrs"].keys()
    assert {k: str(v) for k, v in now["attrs"].items()} == {
        k: str(v) for k, v in snap["attrs"].items()
    }


def with_x(change):
    """A function of ctx returning a modified copy of the training X."""

    def make(c):
        X = c["X"].copy()
        out = change(X)
        return X if out is None else out

    return make


def set_(index, value):
    def change(X):
        X[index] = value

    return change


# -- the battery -------------------------------------------------------------
# Each case: (id, call(ctx), exception type, regex the message must match).
def _fit(make_X=None, make_y=None, est=None, **params):
    def call(c):
        model = est() if est else SparseTokenSelector(width=4, max_iter=1, **params)
        X = make_X(c) if make_X else c["X"]
        y = make_y(c) if make_y else c["y"]
        model.fit(X, y)

    return call


def _fit_params(cls=SparseTokenSelector, **params):
    return _fit(est=lambda: cls(max_iter=1).set_params(**params))


def _predict(make_X, which="spe"):
    return lambda c: c[which].predict(make_X(c))


BATTERY = [
    # -- X in fit
    ("fit-X-2d", _fit(lambda c: c["X"][:, :, 0]), ValueError, r"X must be 3-D.*\(60, 5\)"),
    ("fit-X-4d", _fit(lambda c: c["X"][None]), ValueError, r"X must be 3-D.*\(1, 60, 5, 4\)"),
    ("fit-X-1d-list", _fit(lambda c: [1.0, 2.0]), ValueError, "X must be 3-D"),
    ("fit-X-scalar", _fit(lambda c: 3.0), ValueError, r"X must be 3-D.*shape \(\)"),
    ("fit-X-none", _fit(lambda c: None), ValueError, "X is required"),
    ("fit-X-string", _fit(lambda c: "tokens"), TypeError, "X must hold real numbers.*<U6"),
    ("fit-X-object", _fit(lambda c: c["X"].astype(object)), TypeError, "dtype object"),
    ("fit-X-complex", _fit(lambda c: c["X"] + 0j), TypeError, "complex128"),
    ("fit-X-bool", _fit(lambda c: c["X"] > 0), TypeError, "boolean dtype"),
    ("fit-X-no-rows", _fit(lambda c: c["X"][:0]), ValueError, r"X is empty: shape \(0, 5, 4\)"),
    ("fit-X-no-tokens", _fit(lambda c: c["X"][:, :0]), ValueError, r"empty: shape \(60, 0, 4\)"),
    ("fit-X-no-features", _fit(lambda c: c["X"][..., -1:]), ValueError, r"1 channel\(s\)"),
    ("fit-X-nan", _fit(with_x(set_((3, 1, 0), np.nan))), ValueError, r"NaN .* X\[3, 1, 0\]"),
    ("fit-X-inf", _fit(with_x(set_((0, 4, 2), np.inf))), ValueError, r"infinity.*X\[0, 4, 2\]"),
    ("fit-X-nan-indicator", _fit(with_x(set_((2, 0, -1), np.nan))), ValueError, "NaN"),
    ("fit-indicator-half", _fit(with_x(set_((5, 2, -1), 0.5))), ValueError, r"X\[5, 2, -1\] = "),
    ("fit-indicator-two", _fit(with_x(set_((0, 0, -1), 2.0))), ValueError, "exactly 0.0 or 1.0"),
    ("fit-indicator-neg", _fit(with_x(set_((1, 3, -1), -1.0))), ValueError, "exactly 0.0 or 1.0"),
    ("fit-row-selects-none", _fit(with_x(set_((7, slice(None), -1), 0.0))), ValueError, "row 7"),
    ("fit-X-ragged", _fit(lambda c: [[[1.0, 1.0]], [[1.0]]]), ValueError, "could not be converted"),
    ("fit-X-beyond-float32", _fit(with_x(set_((0, 0, 0), 1e39))), ValueError, "float32"),
    (
        "fit-X-torch-complex",
        _fit(lambda c: torch.ones(4, 3, 2, dtype=torch.cfloat)),
        TypeError,
        "complex",
    ),
    # -- y in fit
    ("fit-y-none", _fit(make_y=lambda c: None), ValueError, "y is required"),
    ("fit-y-rows", _fit(make_y=lambda c: c["y"][:-1]), ValueError, r"\(60, 3\).*\(59, 3\)"),
    ("fit-y-features", _fit(make_y=lambda c: c["y"][:, :2]), ValueError, r"\(60, 3\).*\(60, 2\)"),
    ("fit-y-1d", _fit(make_y=lambda c: c["y"][:, 0]), ValueError, r"got shape \(60,\)"),
    ("fit-y-3d", _fit(make_y=lambda c: c["y"][None]), ValueError, r"got shape \(1, 60, 3\)"),
    (
        "fit-y-nan",
        _fit(make_y=lambda c: np.where(c["y"] > 1, np.nan, c["y"])),
        ValueError,
        "y contains NaN",
    ),
    ("fit-y-string", _fit(make_y=lambda c: c["y"].astype(str)), TypeError, "y must hold real"),
    ("fit-y-bool", _fit(make_y=lambda c: c["y"] > 0), TypeError, "y has boolean"),
    ("fit-y-beyond-float32", _fit(make_y=lambda c: c["y"] * 1e39), ValueError, "y holds values"),
    # -- hyperparameters, checked in fit
    ("param-width-0", _fit_params(width=0), ValueError, "'width' parameter.*Got 0"),
    ("param-width-float", _fit_params(width=2.5), TypeError, "'width' parameter.*Got 2.5"),
    ("param-width-str", _fit_params(width="64"), TypeError, "'width' parameter.*Got '64'"),
    ("param-solver", _fit_params(solver="lbfgs"), ValueError, "'solver' parameter.*lbfgs"),
    ("param-lr-0", _fit_params(learning_rate_init=0), ValueError, "'learning_rate_init'"),
    ("param-lr-nan", _fit_params(learning_rate_init=np.nan), ValueError, "learning_rate_init.*nan"),
    ("param-lr-inf", _fit_params(learning_rate_init=np.inf), ValueError, "learning_rate_init.*inf"),
    ("param-batch-0", _fit_params(batch_size=0), ValueError, "'batch_size'.*Got 0"),
    ("param-batch-str", _fit_params(batch_size="big"), ValueError, "'batch_size'.*'big'"),
    ("param-max-iter-0", _fit_params(max_iter=0), ValueError, "'max_iter'.*Got 0"),
    ("param-tol-neg", _fit_params(tol=-1.0), ValueError, "'tol'.*Got -1.0"),
    ("param-patience-0", _fit_params(n_iter_no_change=0), ValueError, "'n_iter_no_change'"),
    ("param-momentum-1", _fit_params(momentum=1.0), ValueError, "'momentum'.*Got 1.0"),
    ("param-alpha-neg", _fit_params(alpha=-0.1), ValueError, "'alpha'.*Got -0.1"),
    ("param-dtype", _fit_params(dtype="float16"), ValueError, "'dtype'.*float16"),
    ("param-device-int", _fit_params(device=3), TypeError, "'device' parameter.*Got 3"),
    ("param-device-tpu", _fit_params(device="tpu"), ValueError, "device='tpu'"),
    ("param-device-garbled", _fit_params(device="cuda:abc"), ValueError, "'cuda:abc' is not"),
    ("param-random-state", _fit_params(random_state="seed"), ValueError, "'random_state'"),
    ("param-verbose-neg", _fit_params(verbose=-1), ValueError, "'verbose'"),
    ("param-pe-samples-0", _fit_params(n_pe_samples=0), ValueError, "'n_pe_samples'.*Got 0"),
    ("param-pe-samples-huge-float", _fit_params(n_pe_samples=1e9), TypeError, "'n_pe_samples'"),
    ("param-encoding", _fit_params(positional_encoding="learned"), ValueError, "learned"),
    (
        "param-fcn-layers-0",
        _fit_params(FCNSelector, extra_hidden_layers=(8, 0)),
        ValueError,
        r"extra_hidden_layers\[1\]",
    ),
    (
        "param-fcn-layers-int",
        _fit_params(FCNSelector, extra_hidden_layers=5),
        TypeError,
        "'extra_hidden_layers'",
    ),
    (
        "param-fcn-layers-float",
        _fit_params(FCNSelector, extra_hidden_layers=(2.0,)),
        TypeError,
        r"extra_hidden_layers\[0\]",
    ),
    # -- predict / score on fitted models
    (
        "predict-token-dim",
        _predict(lambda c: c["X"][..., 1:]),
        ValueError,
        "2 token features.*n_features=3",
    ),
    (
        "predict-fcn-seq-len",
        _predict(lambda c: c["X"][:, :4], "fcn"),
        ValueError,
        "seq_len=5 .* seq_len=4",
    ),
    ("predict-nan", _predict(with_x(set_((0, 0, 1), np.nan))), ValueError, "NaN"),
    ("predict-2d", _predict(lambda c: c["X"][0]), ValueError, "3-D"),
    ("predict-fcn-bool", _predict(lambda c: c["X"] > 0, "fcn"), TypeError, "boolean"),
    (
        "predict-pe-samples-0",
        lambda c: _BadPE(c),
        ValueError,
        "n_pe_samples must be an integer >= 1",
    ),
    (
        "score-y-shape",
        lambda c: c["spe"].score(c["X"], c["y"][:10]),
        ValueError,
        r"y must have shape .* = \(60, 3\)",
    ),
    (
        "score-y-nan",
        lambda c: c["fcn"].score(c["X"], c["y"] * np.nan),
        ValueError,
        "y contains NaN",
    ),
    ("score-y-none", lambda c: c["spe"].score(c["X"], None), ValueError, "y is required"),
    ("score-X-bad", lambda c: c["spe"].score(c["X"][..., :1], c["y"]), ValueError, r"1 channel"),
    # -- fit_online
    (
        "online-task-tuple",
        lambda c: SparseTokenSelector().fit_online((5, 3, 2)),
        TypeError,
        "SparseTokenSelectionTask",
    ),
    ("online-task-none", lambda c: FCNSelector().fit_online(None), TypeError, "got NoneType"),
    (
        "online-steps-0",
        lambda c: SparseTokenSelector().fit_online(TASK, 0),
        ValueError,
        "n_steps must be an integer >= 1",
    ),
    (
        "online-steps-float",
        lambda c: SparseTokenSelector().fit_online(TASK, 1.5),
        TypeError,
        "n_steps must be an integer, got 1.5",
    ),
    (
        "online-steps-bool",
        lambda c: SparseTokenSelector().fit_online(TASK, True),
        TypeError,
        "n_steps.*bool",
    ),
    (
        "online-bad-param",
        lambda c: SparseTokenSelector(width=-1).fit_online(TASK, 2),
        ValueError,
        "'width'",
    ),
    # -- generator and task
    (
        "make-q-gt-T",
        lambda c: make_sparse_token_selection(10, 4, 2, 5),
        ValueError,
        "n_selected=5 cannot exceed seq_len=4",
    ),
    (
        "make-q-0",
        lambda c: make_sparse_token_selection(10, 4, 2, 0),
        ValueError,
        "n_selected must be an integer >= 1",
    ),
    ("make-q-float", lambda c: make_sparse_token_selection(10, 4, 2, 1.5), TypeError, "n_selected"),
    (
        "make-q-range-reversed",
        lambda c: make_sparse_token_selection(10, 4, 2, (3, 2)),
        ValueError,
        "q_min <= q_max",
    ),
    (
        "make-q-triple",
        lambda c: make_sparse_token_selection(10, 4, 2, (1, 2, 3)),
        ValueError,
        "pair",
    ),
    (
        "make-n-float",
        lambda c: make_sparse_token_selection(2.5, 4, 2, 1),
        TypeError,
        "n_samples must be an integer, got 2.5",
    ),
    (
        "make-n-0",
        lambda c: make_sparse_token_selection(0, 4, 2, 1),
        ValueError,
        "n_samples must be an integer >= 1",
    ),
    ("make-T-0", lambda c: make_sparse_token_selection(5, 0, 2, 1), ValueError, "seq_len must be"),
    (
        "make-d-str",
        lambda c: make_sparse_token_selection(5, 4, "2", 1),
        TypeError,
        "n_features must be an integer",
    ),
    (
        "make-seed-str",
        lambda c: make_sparse_token_selection(5, 4, 2, 1, random_state="x"),
        ValueError,
        "cannot be used to seed",
    ),
    (
        "task-q-gt-T",
        lambda c: SparseTokenSelectionTask(3, 2, 4),
        ValueError,
        "cannot exceed seq_len=3",
    ),
    (
        "task-sample-neg",
        lambda c: TASK.sample(-1),
        ValueError,
        "n_samples must be an integer >= 1, got -1",
    ),
    (
        "task-sample-str",
        lambda c: TASK.sample("10"),
        TypeError,
        "n_samples must be an integer, got '10'",
    ),
    # -- length-shift scorer, shift_length and length_shift_scoring
    (
        "scorer-both-lengths",
        lambda c: LengthShiftScorer(8, factor=2)(c["spe"], c["X"], c["y"]),
        ValueError,
        "exactly one of seq_len .* and factor",
    ),
    (
        "scorer-no-length",
        lambda c: LengthShiftScorer()(c["spe"], c["X"], c["y"]),
        ValueError,
        "exactly one of seq_len",
    ),
    (
        "scorer-factor-0",
        lambda c: LengthShiftScorer(factor=0)(c["spe"], c["X"], c["y"]),
        ValueError,
        "factor must be a positive finite number, got 0",
    ),
    (
        "scorer-factor-nan",
        lambda c: LengthShiftScorer(factor=np.nan)(c["spe"], c["X"], c["y"]),
        ValueError,
        "factor must be a positive finite number, got nan",
    ),
    (
        "scorer-factor-str",
        lambda c: LengthShiftScorer(factor="2")(c["spe"], c["X"], c["y"]),
        TypeError,
        "factor must be a positive real number, got '2'",
    ),
    (
        "scorer-factor-tiny",
        lambda c: LengthShiftScorer(factor=0.01)(c["spe"], c["X"], c["y"]),
        ValueError,
        "to length 0",
    ),
    (
        "scorer-metric",
        lambda c: LengthShiftScorer(8, metric="accuracy")(c["spe"], c["X"], c["y"]),
        ValueError,
        "metric must be one of .* got 'accuracy'",
    ),
    (
        "scorer-len-below-q",
        lambda c: LengthShiftScorer(1)(c["spe"], c["X"], c["y"]),
        ValueError,
        "seq_len=1 cannot hold the selected tokens",
    ),
    (
        "scorer-len-float",
        lambda c: LengthShiftScorer(7.5)(c["spe"], c["X"], c["y"]),
        TypeError,
        "seq_len must be an integer, got 7.5",
    ),
    (
        "scorer-X-nan",
        lambda c: LengthShiftScorer(8)(c["spe"], c["X"] * np.nan, c["y"]),
        ValueError,
        "X contains NaN",
    ),
    (
        "scorer-X-2d",
        lambda c: LengthShiftScorer(8)(c["spe"], c["X"][0], c["y"]),
        ValueError,
        "X must be 3-D",
    ),
    (
        "scorer-y-shape",
        lambda c: LengthShiftScorer(8)(c["spe"], c["X"], c["y"][:, :1]),
        ValueError,
        r"y must have shape .* = \(60, 3\)",
    ),
    (
        "scorer-fcn-length",
        lambda c: LengthShiftScorer(factor=2)(c["fcn"], c["X"], c["y"]),
        ValueError,
        "fitted on seq_len=5 and cannot predict at seq_len=10",
    ),
    (
        "scorer-unfitted",
        lambda c: LengthShiftScorer(8)(FCNSelector(), c["X"], c["y"]),
        ValueError,
        "not fitted",
    ),
    (
        "scorer-seed",
        lambda c: LengthShiftScorer(8, random_state="x")(c["spe"], c["X"], c["y"]),
        ValueError,
        "cannot be used to seed",
    ),
    (
        "shift-length-float",
        lambda c: shift_length(c["X"], 2.5),
        TypeError,
        "seq_len must be an integer",
    ),
    ("shift-length-bool-X", lambda c: shift_length(c["X"] > 0, 8), TypeError, "boolean"),
    ("scoring-empty", lambda c: length_shift_scoring(()), ValueError, "at least one factor"),
    ("scoring-duplicate", lambda c: length_shift_scoring((2, 2.0)), ValueError, "2.0 twice"),
    ("scoring-len-0", lambda c: length_shift_scoring(seq_lens=(0,)), ValueError, r"seq_lens\[i\]"),
    ("scoring-metric", lambda c: length_shift_scoring(metric="mae"), ValueError, "got 'mae'"),
    # -- persistence
    (
        "save-unfitted-invalid",
        lambda c: save_model(SparseTokenSelector(width=0), "never.stsq"),
        ValueError,
        "'width' parameter of SparseTokenSelector",
    ),
    ("save-not-estimator", lambda c: save_model(object(), "never.stsq"), TypeError, "got object"),
    ("save-path-int", lambda c: save_model(c["spe"], 5), TypeError, "path must be a str"),
    ("load-not-zip", lambda c: load_model(io.__file__), ValueError, "not a zip archive"),
]


def _BadPE(c):
    est = c["spe"]
    est.set_params(n_pe_samples=0)
    try:
        est.predict(c["X"])
    finally:
        est.set_params(n_pe_samples=1)


def test_battery_is_large_and_ids_are_unique():
    ids = [case[0] for case in BATTERY]
    assert len(ids) == len(set(ids)) >= 40


@pytest.mark.parametrize("call, exc, match", [c[1:] for c in BATTERY], ids=[c[0] for c in BATTERY])
def test_bad_input_raises_clear_error_before_any_work(call, exc, match, ctx, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started before the input was rejected")

    monkeypatch.setattr(_BaseEstimator, "_train", no_training)
    before = {k: snapshot(ctx[k]) for k in ("spe", "fcn")}
    X0, y0 = ctx["X"].copy(), ctx["y"].copy()
    with pytest.raises(exc, match=match):
        call(ctx)
    for k in ("spe", "fcn"):
        assert_unchanged(ctx[k], before[k], ctx["X"])
    np.testing.assert_array_equal(ctx["X"], X0)
    np.testing.assert_array_equal(ctx["y"], y0)


# -- failed calls leave a fitted model as it was -------------------------------
@pytest.mark.parametrize("cls", [SparseTokenSelector, FCNSelector])
def test_failed_fit_and_predict_leave_the_model_as_it_was(cls, ctx):
    X, y = ctx["X"], ctx["y"]
    est = cls(width=4, max_iter=3, solver="sgd", learning_rate_init=0.01, random_state=0)
    est.fit(X, y)
    before, pred = snapshot(est), est.predict(X)
    for bad in (X[..., :2], X[:, :0], np.where(X > 2, np.nan, X)):
        with pytest.raises(ValueError):
            est.fit(bad, y)
        with pytest.raises(ValueError):
            est.predict(bad)
    # a fit that passes validation and then diverges
    with pytest.raises(ValueError, match="Training diverged"):
        est.set_params(learning_rate_init=1e6).fit(X, y)
    est.set_params(learning_rate_init=0.01)
    # targets whose squares overflow float32: the first loss, before any step, is inf
    with pytest.raises(ValueError, match="before any training step, so the step size is not"):
        est.fit(X, y * 1e20)
    assert_unchanged(est, before, X)
    np.testing.assert_array_equal(est.predict(X), pred)


def test_scoring_and_moving_never_mutate_read_only_inputs(ctx):
    """fit and predict: tests/test_common.py::test_fit_does_not_mutate_params_or_data."""
    X, y = ctx["X"].astype(np.float32), ctx["y"]
    est = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(X, y)
    for arr in (X, y):
        arr.setflags(write=False)
    X0, y0 = X.copy(), y.copy()
    est.score(X, y)
    LengthShiftScorer(factor=1, random_state=0)(est, X, y)
    shift_length(X, 7, random_state=0)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_score_validates_y_and_accepts_1d_targets_and_weights():
    from sklearn.metrics import r2_score

    X, y = make_sparse_token_selection(60, 5, 1, 2, random_state=0)
    est = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(X, y.ravel())
    w = np.linspace(0.5, 2.0, 60)
    expected = r2_score(y.ravel(), est.predict(X), sample_weight=w)
    assert est.score(X, y.ravel(), sample_weight=w) == pytest.approx(expected)
    assert est.score(X, y) == pytest.approx(r2_score(y.ravel(), est.predict(X)))


def test_nested_lists_and_tensors_are_accepted(ctx):
    X, y = ctx["X"], ctx["y"]
    a = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(X.tolist(), y.tolist())
    b = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(torch.tensor(X), y)
    np.testing.assert_array_equal(a.predict(X.tolist()), b.predict(torch.tensor(X)))


def test_integer_and_float64_inputs_work(ctx):
    """float64 is computed in float32 unless asked; integer tokens are accepted."""
    X, y = ctx["X"], ctx["y"]
    Xi = np.round(X).astype(np.int32)
    Xi[..., -1] = X[..., -1]
    est = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(Xi, y)
    assert np.isfinite(est.predict(Xi)).all()
    assert est.predict(Xi.astype(np.int64)).shape == y.shape
    for cls in (SparseTokenSelector, FCNSelector):
        a = cls(width=4, max_iter=2, random_state=0).fit(X, y).predict(X)
        b = cls(width=4, max_iter=2, random_state=0).fit(X.astype(np.float32), y).predict(X)
        np.testing.assert_allclose(a, b, rtol=1e-6)
    model64 = SparseTokenSelector(width=4, max_iter=2, dtype="float64", random_state=0).fit(X, y)
    assert model64.net_.module_.key_query.dtype == torch.float64


# -- large tokens ------------------------------------------------------------
@pytest.mark.parametrize("which", ["spe", "fixed", "fcn"])
@pytest.mark.parametrize(
    "scale, dtype", [(1e20, np.float32), (1e30, np.float64), (3e38, np.float32), (1e39, np.float64)]
)
def test_huge_finite_tokens_give_finite_predictions(which, scale, dtype, ctx):
    X, y = ctx["X"], ctx["y"]
    est = {
        "spe": SparseTokenSelector(width=4, max_iter=5, random_state=0),
        "fixed": SparseTokenSelector(
            width=4, max_iter=5, positional_encoding="fixed", random_state=0
        ),
        "fcn": FCNSelector(width=4, max_iter=5, random_state=0),
    }[which].fit(X, y)
    big = X.copy()
    big[..., :-1] = np.clip(big[..., :-1] * scale, -np.finfo(dtype).max, np.finfo(dtype).max)
    big = big.astype(dtype)
    pred = est.predict(big)
    assert np.isfinite(pred).all()
    # A prediction is an average of tokens for the transformer.
    if which != "fcn":
        assert np.abs(pred).max() <= np.abs(big[..., :-1].astype(np.float64)).max() * (1 + 1e-6)


def test_overflow_fallback_does_not_touch_normal_inputs(ctx):
    est = ctx["spe"]
    module = est.net_.module_
    X = ctx["X"]
    device = next(module.parameters()).device  # CUDA where device="auto" found one
    gen = torch.Generator().manual_seed(7)  # a CPU generator: its draws are moved to device
    with torch.no_grad():
        direct = module(torch.as_tensor(X, dtype=torch.float32, device=device), generator=gen)
        gen.manual_seed(7)
        safe = finite_forward(module, X, gen, {})
    assert torch.equal(direct.cpu(), safe.cpu())


def test_values_beyond_float32_refused_in_fit_handled_in_predict(ctx):
    X, y = ctx["X"].copy(), ctx["y"]
    X[..., :-1] *= 1e40
    with pytest.raises(ValueError, match=r"up to [0-9.]+e\+40 .*beyond the range of float32"):
        SparseTokenSelector(width=4, max_iter=2).fit(X, y)
    est = SparseTokenSelector(width=4, max_iter=2, dtype="float64", random_state=0)
    assert np.isfinite(est.fit(ctx["X"], y).predict(X)).all()
    assert np.isfinite(ctx["spe"].predict(X)).all()  # float32 model: float64 fallback


# -- divergence ---------------------------------------------------------------
@pytest.mark.parametrize(
    "est, how",
    [
        (FCNSelector(width=8, solver="sgd", learning_rate_init=1e6, max_iter=20), "fit"),
        (SparseTokenSelector(width=4, solver="sgd", learning_rate_init=1e3), "huge-y"),
        (FCNSelector(width=8, solver="sgd", learning_rate_init=1e6), "online"),
    ],
    ids=["fcn-huge-lr", "spe-huge-y", "fcn-online-huge-lr"],
)
def test_divergence_is_a_clear_error_never_a_nan_model(est, how, ctx):
    X, y = ctx["X"], ctx["y"]
    est.set_params(random_state=0)
    # Targets whose squares overflow float32 make the first loss inf before any step:
    # the data are named, not the step size.
    match = (
        r"loss of the starting model is inf .* the values of X or y overflow"
        if how == "huge-y"
        else r"Training diverged: .*(nan|inf|NaN).* learning_rate_init"
    )
    with pytest.raises(ValueError, match=match):
        if how == "online":
            est.fit_online(TASK, 50)
        else:
            est.fit(X, y * (1e20 if how == "huge-y" else 1))
    assert not hasattr(est, "net_")  # still unfitted: no model that predicts NaN


# -- Ctrl-C -------------------------------------------------------------------
@pytest.fixture
def interrupt_after(monkeypatch):
    """Make the k-th loss evaluation raise KeyboardInterrupt, as Ctrl-C would."""

    def arm(k):
        calls = {"n": 0}
        forward = stsq_nn.SquaredError.forward

        def patched(self, y_pred, y_true):
            calls["n"] += 1
            if calls["n"] == k:
                raise KeyboardInterrupt
            return forward(self, y_pred, y_true)

        monkeypatch.setattr(stsq_nn.SquaredError, "forward", patched)

    return arm


@pytest.mark.parametrize("cls", [SparseTokenSelector, FCNSelector])
def test_ctrl_c_during_fit_keeps_weights_and_warns(cls, ctx, interrupt_after):
    X, y = ctx["X"], ctx["y"]
    interrupt_after(8)  # 3 batches per epoch: epochs 1 and 2 done, the 8th batch cut
    est = cls(width=4, batch_size=20, max_iter=10, random_state=0)
    with pytest.warns(UserWarning, match=r"interrupted \(KeyboardInterrupt\) after 2 of 10 epochs"):
        est.fit(X, y)
    assert est.n_iter_ == len(est.loss_curve_) == 2
    assert est.t_ == 2 * 60 + 20  # the first batch of epoch 3 was a completed step
    pred = est.predict(X)
    assert np.isfinite(pred).all() and np.isfinite(est.score(X, y))
    untouched = cls(width=4, batch_size=20, max_iter=10, random_state=0)
    assert not np.array_equal(untouched.fit(X, y).predict(X), pred)  # weights are the partial ones


def test_ctrl_c_during_fit_online_keeps_completed_steps(interrupt_after):
    interrupt_after(7)
    est = SparseTokenSelector(width=4, batch_size=16, random_state=0)
    with pytest.warns(UserWarning, match="after 6 of 50 steps"):
        est.fit_online(TASK, 50)
    assert est.n_iter_ == len(est.loss_curve_) == 6 and est.t_ == 6 * 16
    assert np.isfinite(est.predict(TASK.sample(10, random_state=0)[0])).all()


def test_early_stopping_is_not_reported_as_an_interruption(ctx):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = SparseTokenSelector(width=4, tol=1e9, n_iter_no_change=1, max_iter=50)
        est.fit(ctx["X"], ctx["y"])
    assert est.n_iter_ == 2


# -- pickling -----------------------------------------------------------------
@pytest.mark.parametrize("which", ["spe", "fcn"])
def test_joblib_round_trip(which, ctx, tmp_path):
    est = ctx[which]
    joblib.dump(est, tmp_path / "m.joblib")
    restored = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(restored.predict(ctx["X"]), est.predict(ctx["X"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a machine without CUDA")
@pytest.mark.filterwarnings("ignore::skorch.exceptions.DeviceWarning")
def test_model_fitted_on_cuda_unpickles_on_a_cpu_only_machine(ctx):
    est = SparseTokenSelector(width=4, max_iter=2, random_state=0).fit(ctx["X"], ctx["y"])
    expected = est.predict(ctx["X"])
    # What a CUDA-fitted model looks like to pickle; this machine has no CUDA.
    est.device_ = torch.device("cuda", 0)
    est.net_.device = "cuda"
    blob = pickle.dumps(est)
    with pytest.warns(UserWarning, match="fitted on cuda:0.*predicts on the CPU"):
        restored = pickle.loads(blob)
    assert restored.device_ == torch.device("cpu") and restored.net_.device == "cpu"
    np.testing.assert_array_equal(restored.predict(ctx["X"]), expected)
