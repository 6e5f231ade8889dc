"""A prediction is a function of its row: the same row, the same prediction.

Whatever else is in X, the rows' order, the chunks predict cuts X into, the
thread count, the process, or a save and load: every family, one and 16
encoding draws, float32 and float64.
"""

import joblib
import numpy as np
import pytest
import torch

from stsq_learn import (
    SparseTokenSelector,
    load_model,
    make_sparse_token_selection,
    save_model,
)
from stsq_learn.engine import base as _base

FAMILIES = ["stochastic", "fixed", "randomized", "sinusoidal"]
N_ROWS = 200


@pytest.fixture(scope="module")
def data():
    X, y = make_sparse_token_selection(
        N_ROWS, seq_len=8, n_features=3, n_selected=2, random_state=0
    )
    X[:, :, :-1] *= 1 + np.arange(N_ROWS)[:, None, None] % 3  # rows of several scales
    return X, y


@pytest.fixture(scope="module")
def models(data):
    """One small fitted model per (family, dtype)."""
    X, y = data
    out = {}
    for family in FAMILIES:
        for dtype in ("float32", "float64"):
            est = SparseTokenSelector(
                width=8,
                positional_encoding=family,
                dtype=dtype,
                max_iter=3,
                solver="adam",  # 3 short steps: the rows' scales (1 to 3) overshoot SGD's
                learning_rate_init=0.01,
                random_state=0,
            )
            out[family, dtype] = est.fit(X, y)
    return out


def _tolerance(dtype):
    return {"rtol": 1e-6, "atol": 1e-12} if dtype == "float64" else {"rtol": 1e-5, "atol": 1e-6}


CASES = [
    pytest.param(f, dt, k, id=f"{f}-{dt}-k{k}")
    for f in FAMILIES
    for dt in ("float32", "float64")
    for k in (1, 16)
]


@pytest.mark.parametrize(("family", "dtype", "n_pe_samples"), CASES)
def test_a_row_predicts_the_same_alone_in_order_and_in_chunks(
    models, data, family, dtype, n_pe_samples, monkeypatch
):
    X = data[0]
    model = models[family, dtype].set_params(n_pe_samples=n_pe_samples)
    full = model.predict(X)
    tol = _tolerance(dtype)
    rows = range(N_ROWS) if dtype == "float64" else range(0, N_ROWS, 10)
    alone = np.concatenate([model.predict(X[i : i + 1]) for i in rows])
    np.testing.assert_allclose(alone, full[list(rows)], **tol)
    order = np.random.default_rng(1).permutation(N_ROWS)
    np.testing.assert_allclose(model.predict(X[order]), full[order], **tol)
    monkeypatch.setattr(_base, "_PREDICT_ELEMENTS", 1)  # chunks of one row
    np.testing.assert_allclose(model.predict(X[:30]), full[:30], **tol)
    monkeypatch.setattr(_base, "_PREDICT_ELEMENTS", 7 * model.net_.module_.elements_per_row(8))
    np.testing.assert_allclose(model.predict(X), full, **tol)


@pytest.mark.parametrize("family", ["stochastic", "randomized"])
def test_the_draws_are_random_but_keyed(models, data, family):
    """Drawn families: identical rows agree, other seeds and draw counts differ."""
    X = data[0]
    model = models[family, "float64"].set_params(n_pe_samples=1)
    twice = np.concatenate([X[:20], X[:20]])
    pred = model.predict(twice)
    np.testing.assert_array_equal(pred[:20], pred[20:])
    assert not np.allclose(model.predict(X[:20]), model.set_params(n_pe_samples=4).predict(X[:20]))


def test_the_full_sampler_is_keyed_too(models, data):
    X = data[0]
    model = models["stochastic", "float64"].set_params(pe_sampling="full", n_pe_samples=2)
    full = model.predict(X)
    alone = np.concatenate([model.predict(X[i : i + 1]) for i in range(0, N_ROWS, 20)])
    np.testing.assert_allclose(alone, full[::20], rtol=1e-6, atol=1e-12)
    model.set_params(pe_sampling="marginal")


def test_the_thread_count_does_not_change_a_prediction(models, data):
    X = data[0]
    model = models["stochastic", "float64"].set_params(n_pe_samples=16)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = model.predict(X)
        torch.set_num_threads(2)
        two = model.predict(X)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(one, two, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_saved_model_predicts_the_same(models, data, family, tmp_path):
    X = data[0]
    model = models[family, "float32"].set_params(n_pe_samples=16)
    path = tmp_path / "model.stsq"
    save_model(model, path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_allclose(loaded.predict(X[3:4]), model.predict(X)[3:4], rtol=1e-5)


def _predict_chunk(model, X):
    return model.predict(X)


def test_a_joblib_chunked_predict_equals_one_call(models, data):
    """Chunks predicted in other processes (joblib's loky workers) agree with one call."""
    X = data[0]
    model = models["stochastic", "float64"].set_params(n_pe_samples=4)
    chunks = [X[i : i + 37] for i in range(0, N_ROWS, 37)]
    parts = joblib.Parallel(n_jobs=2)(joblib.delayed(_predict_chunk)(model, c) for c in chunks)
    np.testing.assert_allclose(np.concatenate(parts), model.predict(X), rtol=1e-6, atol=1e-12)


def test_keyed_and_streamed_predictions_have_the_same_accuracy():
    """Same law: a trained model scores alike with keyed and with streamed (0.3) draws."""
    from sklearn.metrics import r2_score

    from stsq_learn import SparseTokenSelectionTask
    from stsq_learn.encodings.families import StreamedDraws

    task = SparseTokenSelectionTask(16, 8, 3)
    model = SparseTokenSelector(width=32, random_state=0).fit_online(task, n_steps=300)
    X, y = task.sample(4000, random_state=1)
    draws = StreamedDraws(torch.Generator().manual_seed(0))
    with torch.inference_mode():
        streamed = model.net_.module_(torch.as_tensor(X, dtype=torch.float32), draws)
    keyed_r2, streamed_r2 = r2_score(y, model.predict(X)), r2_score(y, streamed.numpy())
    assert keyed_r2 > 0.6
    assert abs(keyed_r2 - streamed_r2) < 0.015, (keyed_r2, streamed_r2)


def test_a_chunk_redone_in_float64_keeps_its_draws(models, data):
    """A row beyond float32 makes predict redo its chunk in float64: same draws, keyed
    by the rows' float32 bytes, so the other rows only change by float rounding."""
    X = data[0][:40].astype(np.float64)
    model = models["stochastic", "float32"].set_params(n_pe_samples=4)
    huge = X.copy()
    huge[7, :, :-1] *= 1e40
    mixed = model.predict(huge)
    assert np.isfinite(mixed).all()
    normal = np.delete(np.arange(40), 7)
    np.testing.assert_allclose(mixed[normal], model.predict(X)[normal], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(huge[7:8]), mixed[7:8], rtol=1e-6)
