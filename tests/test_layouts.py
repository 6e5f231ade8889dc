"""The memory layout of an input never changes a result.

Every public estimator, on data of its own task, at every entry point that
reads arrays (``fit``, ``predict``, ``score``, the length-shift scorers; ``fit_online``
reads a task, not arrays): an array with negative strides (``X[::-1]``), in
Fortran order, a strided slice of a bigger buffer, with its axes swapped,
read-only, memory-mapped, big-endian, misaligned, a non-contiguous tensor, or
any composition of these, gives exactly (bit for bit) the result of a
C-contiguous copy of the same values, and is left unchanged.

Issue 32, item 0: 0.5 refused ``X[::-1]`` everywhere with torch's "At least one
stride in the given numpy array is negative"; every array now becomes a tensor
in one place, :func:`stsq_learn._validation.as_tensor`.
"""

import itertools
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from stsq_learn import (
    AttentionRegressor,
    ErfAttentionRegressor,
    FCNAverager,
    FCNRegressor,
    FCNRetriever,
    FCNSelector,
    FixedStateCopier,
    LengthShiftScorer,
    LinearAttentionRegressor,
    LSTMCopier,
    NGramCopier,
    PromptGradientStep,
    PromptRidge,
    SoftmaxAttentionRegressor,
    SparseTokenAverager,
    SparseTokenClassifier,
    SparseTokenRetriever,
    SparseTokenSelector,
    TransformerCopier,
    length_shift_scoring,
    make_copying,
    make_in_context_regression,
    make_single_location,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_classification,
    make_sparse_token_selection,
)
from stsq_learn._validation import as_tensor

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_DATA = {
    "selection": lambda: make_sparse_token_selection(40, 6, 3, 2, random_state=0),
    "averaging": lambda: make_sparse_averaging(40, 6, 3, 2, random_state=0),
    "retrieval": lambda: make_sparse_retrieval(40, 6, 3, 2, random_state=0),
    "single_location": lambda: make_single_location(40, seq_len=6, n_features=4, random_state=0),
    "classification": lambda: make_sparse_token_classification(
        40, seq_len=6, n_features=4, signal=3.0, random_state=0
    ),
    "in_context": lambda: make_in_context_regression(40, 5, 3, random_state=0),
    "copying": lambda: make_copying(40, 6, vocab_size=4, min_len=2, random_state=0),
}

# Every public estimator, on its own task; the options that change the forward pass
# (several encoding draws, the log length scale, several heads) on attention models.
ESTIMATORS = {
    "selector": (SparseTokenSelector(width=8, max_iter=2), "selection"),
    "selector-k4": (SparseTokenSelector(width=8, max_iter=2, n_pe_samples=4), "selection"),
    "fcn-selector": (FCNSelector(width=8, max_iter=2), "selection"),
    "averager": (SparseTokenAverager(width=8, max_iter=2), "averaging"),
    "fcn-averager": (FCNAverager(width=8, max_iter=2), "averaging"),
    "retriever-3heads": (SparseTokenRetriever(width=8, n_heads=3, max_iter=2), "retrieval"),
    "fcn-retriever": (FCNRetriever(width=8, max_iter=2), "retrieval"),
    "attention-log-k3": (
        AttentionRegressor("averaging", width=8, length_scale="log", n_pe_samples=3, max_iter=2),
        "averaging",
    ),
    "fcn-regressor": (FCNRegressor("single_location", width=8, max_iter=2), "single_location"),
    "erf": (ErfAttentionRegressor(max_iter=3), "single_location"),
    "softmax": (SoftmaxAttentionRegressor(max_iter=3, batch_size=16), "single_location"),
    "classifier": (SparseTokenClassifier(max_iter=3, random_state=0), "classification"),
    "lsa-full": (LinearAttentionRegressor("full", max_iter=2), "in_context"),
    "prompt-ridge": (PromptRidge(alpha=0.1), "in_context"),
    "prompt-gd": (PromptGradientStep(), "in_context"),
    "transformer-copier": (TransformerCopier(width=8, n_heads=2, max_iter=2), "copying"),
    "lstm-copier": (LSTMCopier(hidden_size=8, max_iter=2), "copying"),
    "ngram-copier": (NGramCopier(2), "copying"),
    "fixed-state-copier": (FixedStateCopier(4), "copying"),
}
# Rows of integer token ids: the dtypes their layouts come in.
_TOKEN_ROWS = {name for name, (_, task) in ESTIMATORS.items() if task == "copying"}


def _seeded(est):
    """A clone of ``est`` with ``random_state=0`` where it has one (the baselines draw nothing)."""
    est = clone(est)
    return est.set_params(random_state=0) if "random_state" in est.get_params() else est


IDS = list(ESTIMATORS)


def test_every_public_estimator_is_covered():
    import stsq_learn

    public = {
        name
        for name in stsq_learn.__all__
        if isinstance(getattr(stsq_learn, name), type)
        and hasattr(getattr(stsq_learn, name), "predict")
    }
    assert public == {type(est).__name__ for est, _ in ESTIMATORS.values()}


# -- layouts: each returns an array (or tensor) holding exactly the values of ``a`` ----
def _reversed(a):
    """Every stride negative: a reversed view of a reversed copy."""
    flip = (slice(None, None, -1),) * a.ndim
    return np.ascontiguousarray(a[flip])[flip]


def _rows_reversed(a):
    """``X[::-1]`` of the issue: a view of a buffer whose rows are in reverse order."""
    return np.ascontiguousarray(a[::-1])[::-1]


def _strided(a):
    """Every other element of a buffer twice as long on every axis."""
    fill = np.nan if a.dtype.kind == "f" else -7  # integer tokens: a value no row holds
    big = np.full(tuple(2 * s for s in a.shape), fill, dtype=a.dtype)
    view = big[(slice(None, None, 2),) * a.ndim]
    view[...] = a
    return view


def _swapped(a):
    """The first two axes swapped in memory (rows interleaved), or Fortran order in 1-D."""
    if a.ndim < 2:
        return _strided(a)
    return np.ascontiguousarray(a.swapaxes(0, 1)).swapaxes(0, 1)


def _read_only(a):
    b = a.copy()
    b.setflags(write=False)
    return b


def _big_endian(a):
    return a.astype(a.dtype.newbyteorder(">"))


def _misaligned(a):
    """C-contiguous, but one byte off the element alignment."""
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    view = buf[1:].view(a.dtype).reshape(a.shape)
    view[...] = a
    assert not view.flags.aligned
    return view


def _tensor(a):
    """A torch tensor with non-contiguous strides (swapped like :func:`_swapped`)."""
    a = a.astype(a.dtype.newbyteorder("="))  # torch holds native byte order only
    if a.ndim < 2:
        return torch.from_numpy(np.repeat(a, 2))[::2]  # (np.repeat copies)
    return torch.from_numpy(a.swapaxes(0, 1).copy()).transpose(0, 1)


class _Memmap:
    """A read-only ``np.memmap`` of the values, in a file under a temporary directory."""

    def __init__(self, folder):
        self.folder, self.count = folder, itertools.count()

    def __call__(self, a):
        path = self.folder / f"array{next(self.count)}.dat"
        out = np.memmap(path, dtype=a.dtype, mode="w+", shape=a.shape)
        out[...] = a
        out.flush()
        del out
        return np.memmap(path, dtype=a.dtype, mode="r", shape=a.shape)


LAYOUTS = {
    "reversed": _reversed,
    "rows-reversed": _rows_reversed,
    "fortran": np.asfortranarray,
    "strided": _strided,
    "swapped": _swapped,
    "read-only": _read_only,
    "memmap": None,  # needs a folder: see the ``layouts`` fixture
    "big-endian": _big_endian,
    "misaligned": _misaligned,
}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    out = dict(LAYOUTS)
    out["memmap"] = _Memmap(tmp_path_factory.mktemp("memmap"))
    return out


def _values(a):
    return np.asarray(a.numpy() if isinstance(a, torch.Tensor) else a)


def _contiguous_copy(a):
    """What the layout stands for: a fresh C-contiguous native-endian copy of the values."""
    a = _values(a)
    return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")


def test_the_layouts_are_what_they_say(layouts):
    X = make_sparse_token_selection(5, 4, 3, 2, random_state=0)[0]
    made = {name: make(X) for name, make in layouts.items()}
    assert all(s < 0 for s in made["reversed"].strides)
    assert made["rows-reversed"].strides[0] < 0
    assert made["fortran"].flags.f_contiguous and not made["fortran"].flags.c_contiguous
    for name in ("strided", "swapped"):
        assert not made[name].flags.c_contiguous and not made[name].flags.f_contiguous
    assert not made["read-only"].flags.writeable and not made["memmap"].flags.writeable
    assert isinstance(made["memmap"], np.memmap)
    assert made["big-endian"].dtype.byteorder == ">"
    assert not made["misaligned"].flags.aligned
    assert not _tensor(X).is_contiguous()
    for name, a in made.items():
        np.testing.assert_array_equal(a, X, err_msg=name)


def test_as_tensor_copies_only_when_it_must(layouts):
    """The tensor shares a C-contiguous array's memory in the tensor's dtype; any
    other layout is one copy, C-contiguous, with the same values."""
    X = make_sparse_token_selection(5, 4, 3, 2, random_state=0)[0]
    for dtype in (torch.float32, torch.float64):
        same = X.astype(np.float32 if dtype == torch.float32 else np.float64)
        assert as_tensor(same, dtype).data_ptr() == same.ctypes.data
        for name, make in layouts.items():
            a = make(same)
            before = _contiguous_copy(a)
            t = as_tensor(_values(a), dtype)
            assert t.is_contiguous() and t.dtype == dtype, name
            np.testing.assert_array_equal(t.numpy(), before, err_msg=name)
            np.testing.assert_array_equal(_values(a), before, err_msg=name)  # not written
    memmap = layouts["memmap"](X)
    assert as_tensor(memmap, torch.float64).data_ptr() == memmap.ctypes.data  # no copy


# -- fitted models, one per estimator ------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (est, task) in ESTIMATORS.items():
            X, y = _DATA[task]()
            out[name] = _seeded(est).fit(X, y), X, y
    return out


def _outcome(call):
    """A call's result, or the type and message of its error (to compare two calls)."""
    try:
        return call()
    except ValueError as exc:
        return ("raised", type(exc).__name__, str(exc))


def _assert_same(a, b):
    if isinstance(a, tuple) and a and a[0] == "raised":
        assert a == b
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", IDS)
def test_predict_score_and_scorers_read_any_layout(fitted, layouts, name, layout):
    """predict and score give exactly the numbers of a contiguous copy; so do the
    length-shift scorers (shifted rows at 2T exercise the log length scale)."""
    model, X, y = fitted[name]
    Xl, yl = layouts[layout](X), layouts[layout](y)
    Xc, yc = _contiguous_copy(Xl), _contiguous_copy(yl)
    np.testing.assert_array_equal(model.predict(Xl), model.predict(Xc))
    assert model.score(Xl, yl) == model.score(Xc, yc)
    scorer = LengthShiftScorer(factor=2, random_state=0)
    _assert_same(_outcome(lambda: scorer(model, Xl, yl)), _outcome(lambda: scorer(model, Xc, yc)))
    scoring = length_shift_scoring((1, 2), metric="neg_relative_mse", random_state=0)
    for s in scoring.values():
        _assert_same(_outcome(lambda s=s: s(model, Xl, yl)), _outcome(lambda s=s: s(model, Xc, yc)))
    np.testing.assert_array_equal(Xl, X)  # the inputs are left as they were
    np.testing.assert_array_equal(yl, y)


def test_the_scorers_are_not_all_errors(fitted):
    """The scorer comparisons above compare numbers for every estimator at T (x1),
    and at 2T for every estimator that predicts at another length."""
    for name, (model, X, y) in fitted.items():
        at_t = length_shift_scoring((1,), random_state=0)["r2"](model, X, y)
        assert np.isfinite(at_t), name
        doubled = _outcome(lambda m=model, X=X, y=y: LengthShiftScorer(factor=2)(m, X, y))
        if name.startswith("fcn-"):
            assert doubled[0] == "raised", name  # an FCN's input layer has a fixed size
            assert "cannot predict at seq_len=12" in doubled[2]
        else:
            assert np.isfinite(doubled), name


def _fitted_numbers(est):
    """Everything a fit decides: weights, loss curve, fitted arrays."""
    out = {"loss_curve_": np.asarray(getattr(est, "loss_curve_", []), dtype=np.float64)}
    if hasattr(est, "net_"):
        # .cpu(): the weights of a fit on CUDA (device="auto" where there is one).
        out.update({k: v.cpu().numpy() for k, v in est.net_.module_.state_dict().items()})
    for key, value in vars(est).items():
        if key.endswith("_") and isinstance(value, np.ndarray):
            out[key] = value
    return out


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", IDS)
def test_fit_reads_any_layout(layouts, name, layout):
    est, task = ESTIMATORS[name]
    X, y = _DATA[task]()
    Xl, yl = layouts[layout](X), layouts[layout](y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_layout = _seeded(est).fit(Xl, yl)
        on_copy = _seeded(est).fit(_contiguous_copy(Xl), _contiguous_copy(yl))
    got, expected = _fitted_numbers(on_layout), _fitted_numbers(on_copy)
    assert got.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    np.testing.assert_array_equal(on_layout.predict(X), on_copy.predict(X))
    np.testing.assert_array_equal(Xl, X)
    np.testing.assert_array_equal(yl, y)


@pytest.mark.parametrize("name", IDS)
def test_fit_reads_a_non_contiguous_tensor(name):
    est, task = ESTIMATORS[name]
    X, y = _DATA[task]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_tensor = _seeded(est).fit(_tensor(X), _tensor(y))
        on_copy = _seeded(est).fit(X, y)
    np.testing.assert_array_equal(on_tensor.predict(_tensor(X)), on_copy.predict(X))


_LAYOUT_NAMES = [*LAYOUTS, "tensor"]


@pytest.mark.parametrize("name", IDS)
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    chain=st.lists(st.sampled_from(_LAYOUT_NAMES), min_size=1, max_size=3),
    dtype=st.sampled_from(["float32", "float64"]),
    rows=st.tuples(st.integers(0, 39), st.integers(1, 40), st.sampled_from([1, 2, -1, -3])),
)
def test_any_composition_of_layouts_predicts_as_a_copy(fitted, layouts, name, chain, dtype, rows):
    """A property: layouts composed (e.g. a big-endian memmap read backwards in
    Fortran order), any dtype, any slice of rows: predict equals predict on a copy."""
    model, X, _ = fitted[name]
    if name in _TOKEN_ROWS:  # token ids: integers of either width
        dtype = {"float32": "int32", "float64": "int64"}[dtype]
    start, stop, step = rows
    a = (
        X.astype(dtype)[start:stop:step]
        if step > 0
        else X.astype(dtype)[stop - 1 : start or None : step]
    )
    if len(a) == 0:
        a = X[:1].astype(dtype)
    for layout in chain:
        a = _tensor(_values(a)) if layout == "tensor" else layouts[layout](_values(a))
    np.testing.assert_array_equal(model.predict(a), model.predict(_contiguous_copy(a)))


def test_the_reported_reversed_views():
    """Issue 32, item 0, as reported: fit on X[::-1] and predict(X[::-1])."""
    X, y = make_sparse_token_selection(200, 6, 4, 2, random_state=0)
    model = SparseTokenSelector(width=16, max_iter=3, random_state=0)
    reversed_fit = clone(model).fit(X[::-1], y[::-1])
    copy_fit = clone(model).fit(X[::-1].copy(), y[::-1].copy())
    np.testing.assert_array_equal(reversed_fit.predict(X), copy_fit.predict(X))
    np.testing.assert_array_equal(
        reversed_fit.predict(X[::-1]), reversed_fit.predict(X[::-1].copy())
    )
    Xs, ys = make_single_location(200, seq_len=6, n_features=4, random_state=0)
    erf = ErfAttentionRegressor(max_iter=3, random_state=0).fit(Xs, ys)
    np.testing.assert_array_equal(erf.predict(Xs[::-1]), erf.predict(Xs[::-1].copy()))
    Xa, ya = make_sparse_averaging(120, 8, 3, 2, random_state=0)
    averager = SparseTokenAverager(width=8, max_iter=2, random_state=0).fit(Xa, ya)
    np.testing.assert_array_equal(averager.predict(Xa[::-1]), averager.predict(Xa[::-1].copy()))
