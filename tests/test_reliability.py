"""Nothing lost, nothing silent: the outside probe's cases of 0.4.0, each as a test.

Setup of the probe: ``make_sparse_token_selection(400, seq_len=8, n_features=3,
n_selected=2, random_state=0)``.
"""

import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

import stsq_learn.engine.base as base
from stsq_learn import (
    FCNSelector,
    SparseTokenAverager,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    load_model,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    save_model,
)


@pytest.fixture(scope="module")
def data():
    return make_sparse_token_selection(400, seq_len=8, n_features=3, n_selected=2, random_state=0)


def test_a_warm_start_on_a_longer_length_saves_and_loads(tmp_path, data):
    """Case 1: fixed encodings continued at seq_len=12 saved a buffer of the old length."""
    X, y = data
    X2, y2 = make_sparse_token_selection(400, 12, 3, 2, random_state=1)
    model = SparseTokenSelector(width=8, positional_encoding="fixed", max_iter=3, random_state=0)
    model.fit(X, y).set_params(warm_start=True).fit(X2, y2)
    assert model.seq_len_ == 12 and model.net_.module_.fixed_pe.shape == (12, 8)
    save_model(model, tmp_path / "m.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "m.stsq").predict(X2), model.predict(X2))


@pytest.mark.parametrize("how", ["fit", "fit_online", "fit_online_10_steps"])
def test_a_diverged_fit_keeps_the_previous_model(data, how):
    """Case 2: Adam at 1e4 ended 3 times worse than it started, with only a warning."""
    X, y = data
    model = SparseTokenSelector(width=8, max_iter=3, random_state=0).fit(X, y)
    before, pred = model.key_query_, model.predict(X)
    model.set_params(solver="adam", learning_rate_init=1e4)
    with pytest.raises(ValueError, match=r"Training diverged: .* times that of the model it"):
        if how == "fit":
            model.fit(X, y)
        else:  # online: judged on the mean of the last tenth of the steps, at least 5
            n_steps = 10 if how.endswith("10_steps") else 50
            model.fit_online(SparseTokenSelectionTask(8, 3, 2), n_steps=n_steps)
    np.testing.assert_array_equal(model.key_query_, before)
    np.testing.assert_array_equal(model.predict(X), pred)
    with pytest.warns(UserWarning, match="training diverged.*kept as on_divergence='warn'"):
        model.set_params(on_divergence="warn").fit(X, y)
    assert not np.array_equal(model.key_query_, before)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda X, y: SparseTokenSelector(width=10**6).fit(X, y), r"width=1000000.*GiB"),
        (lambda X, y: FCNSelector(width=10**8).fit(X, y), r"width=100000000.*GiB"),
        (
            lambda X, y: SparseTokenSelector(
                positional_encoding="randomized", max_positions=10**9
            ).fit(X, y),
            r"max_positions=1000000000.*GiB",
        ),
        (
            lambda X, y: SparseTokenSelector(batch_size=10**5).fit_online(
                SparseTokenSelectionTask(4096, 8, 3)
            ),
            r"batch_size=100000, seq_len=4096 would need about .* GiB",
        ),
    ],
)
def test_impossible_sizes_are_refused_before_any_work(data, make, match, monkeypatch):
    """Case 5: they reached torch's allocator (or swapped)."""
    monkeypatch.setattr("stsq_learn.engine.memory.available_bytes", lambda device: 8 * 2**30)
    with pytest.raises(ValueError, match=match):
        make(*data)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SparseTokenSelector(width=2**31), r"width=2147483648, seq_len=8 is too large"),
        (
            lambda: SparseTokenSelector(width=2**40, n_heads=2),
            r"n_heads=2, width=1099511627776, seq_len=8 is too large",
        ),
        (lambda: FCNSelector(width=2**62), r"width=4611686018427387904, seq_len=8 is too large"),
    ],
)
@pytest.mark.parametrize("how", ["fit", "fit_online"])
def test_sizes_whose_bytes_overflow_are_a_value_error_and_leave_the_model(data, make, match, how):
    """A width whose weights' byte count overflows raised torch's RuntimeError from fit."""
    X, y = data
    model = make()
    fitted = clone(model).set_params(width=4, max_iter=2, random_state=0).fit(X, y)
    before, pred = fitted.get_params()["width"], fitted.predict(X)
    fitted.set_params(width=model.width)
    with pytest.raises(ValueError, match=match):
        if how == "fit":
            fitted.fit(X, y)
        else:
            fitted.fit_online(SparseTokenSelectionTask(8, 3, 2), n_steps=2)
    assert fitted.n_features_in_ == 3 and fitted.net_.module_ is not None
    fitted.set_params(width=before)
    np.testing.assert_array_equal(fitted.predict(X), pred)


def test_booleans_are_not_integers(data):
    """Case 7: width=True trained a width-1 model."""
    with pytest.raises(TypeError, match="'width' parameter of SparseTokenSelector must be an int"):
        SparseTokenSelector(width=True).fit(*data)
    with pytest.raises(TypeError, match="'n_heads'"):
        SparseTokenSelector(n_heads=True).fit(*data)


def test_big_endian_arrays_work_and_predict_as_native_ones(data):
    """Case 7: torch refused them ('byte order')."""
    X, y = data
    model = SparseTokenSelector(width=8, max_iter=2, random_state=0)
    swapped = model.fit(X.astype(">f8"), y.astype(">f8")).predict(X.astype(">f4"))
    np.testing.assert_array_equal(swapped, model.predict(X))


def test_checking_finiteness_allocates_no_copy_of_x(data, monkeypatch):
    """Case 7: np.isfinite(X) cost a quarter of X's size; one sum now, blocks on a failure."""
    X, y = data
    calls = []
    isfinite = np.isfinite
    monkeypatch.setattr(np, "isfinite", lambda a, *k: calls.append(np.size(a)) or isfinite(a, *k))
    SparseTokenSelector(width=4, max_iter=1).fit(X, y)
    assert max(calls) == 1  # only the sums were tested
    bad = X.copy()
    bad[7, 3, 1] = np.inf
    with pytest.raises(ValueError, match=r"X\[7, 3, 1\] = inf"):
        SparseTokenSelector(width=4).fit(bad, y)


def test_a_wrong_token_dimension_is_named_before_the_indices(data):
    """Case 8: an averager fitted on d=6 given d=7 talked about non-integer indices."""
    X6, y6 = make_sparse_averaging(40, 8, 6, 2, random_state=0)
    X7, _ = make_sparse_averaging(40, 8, 7, 2, random_state=0)
    model = SparseTokenAverager(width=4, max_iter=1, random_state=0).fit(X6, y6)
    with pytest.raises(ValueError, match="X has 9 channels per position, but SparseTokenAverager"):
        model.predict(X7)


def test_long_work_reports_progress_at_verbose_1(data, capsys, monkeypatch):
    """Case 9: fit_online printed nothing until the end, predict nothing at all."""
    X, y = data
    SparseTokenSelector(width=4, verbose=1).fit_online(SparseTokenSelectionTask(8, 3, 2), 5)
    assert "0/5" in capsys.readouterr().err  # a bar of the 5 steps, from the start
    model = SparseTokenSelector(width=4, max_iter=1, verbose=1, random_state=0).fit(X, y)
    capsys.readouterr()
    monkeypatch.setattr(base, "PREDICT_ELEMENTS", 8 * 1000)  # chunks of a few rows
    model.predict(X)
    assert "SparseTokenSelector.predict" in capsys.readouterr().err


_TASKS = [
    (SparseTokenSelector, make_sparse_token_selection),
    (SparseTokenAverager, make_sparse_averaging),
    (SparseTokenRetriever, make_sparse_retrieval),
]


@pytest.mark.filterwarnings("ignore:.*worse than no model")  # one epoch: not the point
@pytest.mark.parametrize("sampling", ["marginal", "full"])
@pytest.mark.parametrize("family", ["stochastic", "randomized"])
@pytest.mark.parametrize(("cls", "make"), _TASKS, ids=["selection", "averaging", "retrieval"])
def test_rows_equal_as_values_predict_alike(cls, make, family, sampling):
    """Case 3: a 0.0 turned -0.0 (token, indicator, role or index channel) changed the draws."""
    X, y = make(60, 6, 3, 2, random_state=0)
    model = cls(width=4, positional_encoding=family, pe_sampling=sampling, max_iter=1)
    model.set_params(random_state=0).fit(X, y)
    X = X.copy()
    X[::3, 0, :2] = 0.0  # zeros among the tokens too, not only in the channels
    negative = np.where(X == 0, -0.0, X)
    assert np.signbit(negative[X == 0]).all() and np.signbit(negative).any(axis=(1, 2)).all()
    np.testing.assert_array_equal(model.predict(negative), model.predict(X))
    one = np.where(np.arange(X.shape[-1]) == X.shape[-1] - 1, negative, X)  # only the last channel
    np.testing.assert_array_equal(model.predict(one), model.predict(X))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory, data):
    X, y = data
    path = tmp_path_factory.mktemp("file") / "m.stsq"
    save_model(SparseTokenSelector(width=2, max_iter=1, random_state=0).fit(X[:40], y[:40]), path)
    return path


def _refused(path, blob):
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match=re.escape(repr(str(path)))) as info:
        load_model(path)
    return str(info.value)


def test_every_corruption_of_a_model_file_is_one_value_error_naming_it(model_file, tmp_path):
    """Case 4: a flipped byte raised BadZipFile or zlib.error, a re-zipped bit flip loaded."""
    data = model_file.read_bytes()
    path = tmp_path / "bad.stsq"
    tail = len(data) - 120  # the end of the central directory and the checksum, every byte
    for i in [*range(0, tail, 5), *range(tail, len(data))]:
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        assert "corrupted" in _refused(path, flipped)
    for n in (0, 1, 30, len(data) // 2, len(data) - 1):
        _refused(path, data[:n])  # truncated
    _refused(path, data + b"\x00")  # appended to
    with zipfile.ZipFile(model_file) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
        comment = zf.comment
    weights = bytearray(members["weights.pt"])
    weights[-200] ^= 0x01  # one bit inside a tensor's data
    for keep_comment in (True, False):  # the old checksum, or none
        with zipfile.ZipFile(path, "w") as zf:
            for name, blob in {**members, "weights.pt": bytes(weights)}.items():
                zf.writestr(name, blob)
            zf.comment = comment if keep_comment else b""
        with pytest.raises(ValueError, match="is corrupted"):
            load_model(path)
    assert load_model(model_file).seq_len_ == 8  # the intact file loads


def test_old_files_without_a_checksum_give_value_errors_too(tmp_path):
    """A 0.4 file has no checksum: the zip layer's failures become one ValueError."""
    data = (Path(__file__).parent / "data" / "models" / "fcn-0.4.0.stsq").read_bytes()
    path = tmp_path / "old.stsq"
    for i in range(0, len(data), 11):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        path.write_bytes(bytes(flipped))
        try:
            load_model(path)
        except ValueError as exc:
            assert repr(str(path)) in str(exc)


def test_a_model_is_saved_only_where_it_can_be(model_file, tmp_path):
    """Case 4: saving to a directory named the internal temporary file."""
    model = load_model(model_file)
    for where, why in [
        (tmp_path, "it is a directory"),
        (model_file / "m.stsq", "is a file, not a directory"),
        (tmp_path / "missing" / "m.stsq", "does not exist"),
        (
            Path("/proc/m.stsq"),
            "No such file or directory|Permission denied|not writable|does not exist",
        ),
    ]:
        named = f"Cannot save a model to {re.escape(repr(str(where)))}: .*({why})"
        with pytest.raises(ValueError, match=named):
            save_model(model, where)
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left behind


@pytest.mark.parametrize("cls", [SparseTokenSelector, FCNSelector])
def test_data_that_overflow_are_blamed_not_the_step_size(cls):
    """A loss that is not finite on the first batch, before any step, is the data's."""
    from stsq_learn import make_sparse_token_selection

    X, y = make_sparse_token_selection(100, 8, 3, 2, random_state=0)
    X = X.copy()
    X[..., :-1] *= 1e200
    model = cls(width=8, max_iter=3, dtype="float64", random_state=0)
    with pytest.raises(ValueError, match="before any training step, so the step size is not"):
        model.fit(X, y * 1e200)
    assert not hasattr(model, "net_")


def test_single_location_messages_name_what_the_model_has():
    from stsq_learn import ErfAttentionRegressor, SoftmaxAttentionRegressor, make_single_location

    X, y = make_single_location(100, seq_len=6, n_features=4, random_state=0)
    with pytest.raises(ValueError, match=r"it was 1000\), or rescale") as exc:
        SoftmaxAttentionRegressor(solver="sgd", learning_rate_init=1e3, max_iter=5).fit(X, y)
    assert "'auto'" not in str(exc.value)  # these models have no automatic step size
    with pytest.raises(ValueError, match=r"Lower max_iter \(n_steps: a loss is kept"):
        ErfAttentionRegressor(max_iter=10**11).fit(X, y)
