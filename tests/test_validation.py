"""The shared input checks, on generated shapes and bad values (hypothesis)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stsq_learn._validation import (
    check_float_range,
    check_n_selected,
    check_positive_int,
    check_sequences,
    check_targets,
    distinct_values,
    finite_floats,
    resolve_device,
)

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def valid_sequences(draw, dtype=np.float64):
    """A valid X: tokens anywhere in a moderate range, indicator 0/1, >= 1 selected per row."""
    n = draw(st.integers(1, 5))
    T = draw(st.integers(1, 7))
    d = draw(st.integers(1, 4))
    tokens = draw(
        hnp.arrays(dtype, (n, T, d), elements=st.floats(-1e6, 1e6, width=32, allow_nan=False))
    )
    mask = draw(hnp.arrays(np.bool_, (n, T)))
    first = draw(hnp.arrays(np.int64, n, elements=st.integers(0, T - 1)))
    mask[np.arange(n), first] = True
    return np.concatenate([tokens, mask[..., None].astype(dtype)], axis=2)


@SETTINGS
@given(valid_sequences())
def test_valid_sequences_pass_unchanged_and_uncopied(X):
    X0 = X.copy()
    X.setflags(write=False)
    out = check_sequences(X)
    assert out is X  # a float array is used as it is: no copy, no cast
    np.testing.assert_array_equal(X, X0)


@SETTINGS
@given(valid_sequences(), st.sampled_from([np.float32, np.int64, np.int32, np.uint8]))
def test_other_real_dtypes_and_lists_are_accepted(X, dtype):
    Xd = np.round(X).astype(dtype) if np.dtype(dtype).kind in "iu" else X.astype(dtype)
    if np.dtype(dtype).kind == "u":
        Xd = np.abs(np.round(X)).astype(dtype)
    out = check_sequences(Xd)
    assert out.dtype.kind == "f" and out.shape == X.shape
    np.testing.assert_array_equal(check_sequences(X.tolist()), X)


@SETTINGS
@given(
    hnp.array_shapes(min_dims=0, max_dims=6, min_side=1, max_side=3).filter(lambda s: len(s) != 3)
)
def test_wrong_number_of_dimensions(shape):
    with pytest.raises(ValueError, match=r"X must be 3-D.*got an array of shape"):
        check_sequences(np.ones(shape))


@SETTINGS
@given(valid_sequences(), st.data(), st.sampled_from([np.nan, np.inf, -np.inf]))
def test_nan_or_inf_anywhere_is_reported_at_its_position(X, data, bad):
    n, T, c = X.shape
    i, t, k = (data.draw(st.integers(0, s - 1)) for s in (n, T, c))
    X[i, t, k] = bad
    with pytest.raises(ValueError, match="NaN or infinity") as info:
        check_sequences(X)
    # the first bad entry in C order is the one we planted
    assert f"X[{i}, {t}, {k}]" in str(info.value)


@SETTINGS
@given(
    valid_sequences(),
    st.data(),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v not in (0.0, 1.0)),
)
def test_indicator_must_be_exactly_zero_or_one(X, data, value):
    n, T, _ = X.shape
    i, t = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, T - 1))
    X[i, t, -1] = value
    with pytest.raises(ValueError, match=r"exactly 0\.0 or 1\.0"):
        check_sequences(X)


@SETTINGS
@given(valid_sequences(), st.data())
def test_a_row_selecting_nothing(X, data):
    i = data.draw(st.integers(0, X.shape[0] - 1))
    X[i, :, -1] = 0.0
    with pytest.raises(ValueError, match=f"at least one token.*row {i}"):
        check_sequences(X)


@SETTINGS
@given(st.integers(0, 4), st.integers(0, 4))
def test_empty_or_featureless(n, T):
    if n and T:
        with pytest.raises(ValueError, match=r"1 channel\(s\)"):
            check_sequences(np.ones((n, T, 1)))
    else:
        with pytest.raises(ValueError, match="is empty"):
            check_sequences(np.ones((n, T, 3)))


@pytest.mark.parametrize(
    "value, exc, match",
    [
        (None, ValueError, "X is required"),
        ("abc", TypeError, "dtype <U3"),
        (np.array([[[1, "a"]]], dtype=object), TypeError, "dtype object"),
        (np.ones((2, 3, 4), dtype=complex), TypeError, "complex128"),
        (np.ones((2, 3, 4), dtype=bool), TypeError, "boolean dtype"),
        (torch.ones(2, 3, 4, dtype=torch.bool), TypeError, "boolean dtype"),
        (torch.ones(2, 3, 4, dtype=torch.complex64), TypeError, "complex64"),
        ([[[1.0, 1.0]], [[1.0]]], ValueError, "could not be converted"),
    ],
    ids=["none", "str", "object", "complex", "bool", "torch-bool", "torch-complex", "ragged"],
)
def test_non_numeric_inputs(value, exc, match):
    with pytest.raises(exc, match=match):
        check_sequences(value)


def test_sparse_matrix_is_refused():
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="sparse matrix"):
        check_sequences(sparse.csr_matrix(np.ones((3, 4))))


def test_torch_tensors_are_accepted_including_bfloat16_and_grad():
    X = np.ones((2, 3, 4))
    t = torch.ones(2, 3, 4, requires_grad=True)
    np.testing.assert_array_equal(check_sequences(t), X)
    np.testing.assert_array_equal(check_sequences(t.to(torch.bfloat16)), X)


@SETTINGS
@given(
    st.integers(1, 6),
    st.integers(1, 4),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7),
)
def test_targets_of_the_wrong_shape(n, d, shape):
    if shape == (n, d) or (d == 1 and shape == (n,)):
        y, _ = check_targets(np.zeros(shape), n, d)
        assert y.shape == (n, d)
    else:
        with pytest.raises(ValueError, match=rf"y must have shape .* \({n}, {d}\)"):
            check_targets(np.zeros(shape), n, d)


@pytest.mark.parametrize(
    "y, exc, match",
    [
        (None, ValueError, "y is required"),
        (np.full((3, 2), np.nan), ValueError, r"NaN or infinity, e\.g\. y\[0, 0\]"),
        (np.array([["a", "b"]] * 3), TypeError, "real numbers"),
        (np.ones((3, 2), dtype=bool), TypeError, "boolean"),
        (np.ones((3, 2), dtype=complex), TypeError, "complex"),
    ],
    ids=["none", "nan", "str", "bool", "complex"],
)
def test_bad_targets(y, exc, match):
    with pytest.raises(exc, match=match):
        check_targets(y, 3, 2)


@SETTINGS
@given(st.one_of(st.integers(max_value=0), st.floats(), st.booleans(), st.text(max_size=3)))
def test_positive_int_rejects(value):
    exc = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(exc, match="n_samples"):
        check_positive_int(value, "n_samples")


@SETTINGS
@given(st.integers(1, 50), st.integers(-3, 60))
def test_n_selected_against_seq_len(T, q):
    if 1 <= q <= T:
        assert check_n_selected(q, T) == (q, q)
    else:
        with pytest.raises(ValueError, match="n_selected"):
            check_n_selected(q, T)


def test_float_range_is_checked_against_the_compute_dtype():
    X = np.array([1.0, -1e39])
    with pytest.raises(ValueError, match=r"1e\+39 .* float32"):
        check_float_range(X, torch.float32)
    check_float_range(X, torch.float64)
    check_float_range(np.array([3e38]), torch.float32)


def test_a_broadcast_view_is_checked_once_per_distinct_value():
    """A read-only broadcast view of 4,000,000 x 256 x 64 (65e9 numbers, 488 GiB as a copy)
    is checked in no time: its broadcast axes are read once."""
    base = np.zeros((3, 1, 2))
    base[1, 0, 1] = np.nan
    view = np.broadcast_to(base, (3, 5, 2))
    assert distinct_values(view).shape == (3, 1, 2)
    with pytest.raises(ValueError, match=r"X contains NaN or infinity, e.g. X\[1, 0, 1\] = nan"):
        finite_floats(view, "X")
    huge = np.broadcast_to(np.array([1.0, -1e39]), (4_000_000, 256, 64, 2))
    with pytest.raises(ValueError, match=r"1e\+39 .* float32"):
        check_float_range(huge, torch.float32)
    zeros = np.broadcast_to(np.zeros((1, 1, 1)), (4_000_000, 256, 64))
    assert finite_floats(zeros, "X") is zeros
    check_float_range(zeros, torch.float32)


@pytest.mark.parametrize(
    "device, exc, match",
    [
        (3, TypeError, "device must be a string"),
        ("tpu", ValueError, "device='tpu'"),
        ("cuda:abc", ValueError, "is not a device"),
    ],
)
def test_bad_devices(device, exc, match):
    with pytest.raises(exc, match=match):
        resolve_device(device)


def test_a_missing_marker_channel_is_said_to_look_missing():
    """Rows without their indicator or role channel: said so, in fit and in predict."""
    from stsq_learn import (
        FCNRetriever,
        SparseTokenSelector,
        make_sparse_retrieval,
        make_sparse_token_selection,
    )

    X, y = make_sparse_token_selection(30, 6, 3, 2, random_state=0)
    tokens = X[..., :3]
    with pytest.raises(ValueError, match=r"None of its values is one: .* as if the selection "):
        SparseTokenSelector(4, max_iter=1).fit(tokens, y)
    model = SparseTokenSelector(4, max_iter=1, random_state=0).fit(X, y)
    with pytest.raises(
        ValueError,
        match=r"^X has 3 channels, as many as the token features SparseTokenSelector was "
        r"fitted with \(n_features=3\), and no selection indicator channel after them: the "
        r"selection indicator channel looks missing\.",
    ):
        model.predict(tokens)
    # A bad indicator value in a real indicator is still reported as a bad value.
    bad = X.copy()
    bad[0, 0, -1] = 2.0
    with pytest.raises(ValueError, match=r"X\[0, 0, -1\] = (np\.float64\(2\.0\)|2\.0)\.$"):
        model.predict(bad)
    with pytest.raises(ValueError, match=r"X has 1 token features per token.*n_features=3"):
        model.predict(X[..., 2:])
    # As many channels as token features, the last an indicator: a token feature is missing.
    with pytest.raises(ValueError, match=r"^X has 2 token features per token.*n_features=3"):
        model.predict(np.concatenate([X[..., :2], X[..., -1:]], axis=-1))

    Xr, yr = make_sparse_retrieval(30, 6, 2, 2, random_state=0)
    retriever = FCNRetriever(4, max_iter=1, random_state=0).fit(Xr, yr)
    with pytest.raises(ValueError, match=r"no role channel after them: the role channel looks"):
        retriever.predict(Xr[..., :2])
    with pytest.raises(ValueError, match=r"as if the role channel were missing"):
        FCNRetriever(4, max_iter=1).fit(Xr[..., :2], yr)
