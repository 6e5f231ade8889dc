"""Whatever a fit returns saves and loads; a forged or old file loads as its model or is refused."""

import copy
import json
import math
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

from stsq_learn import (
    AttentionRegressor,
    ErfAttentionRegressor,
    FCNAverager,
    FCNRegressor,
    FCNRetriever,
    FCNSelector,
    FixedStateCopier,
    LinearAttentionRegressor,
    LSTMCopier,
    NGramCopier,
    PromptGradientStep,
    PromptRidge,
    SingleLocationTask,
    SoftmaxAttentionRegressor,
    SparseTokenAverager,
    SparseTokenClassifier,
    SparseTokenRetriever,
    SparseTokenSelector,
    TransformerCopier,
    load_model,
    make_copying,
    make_in_context_regression,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_classification,
    make_sparse_token_selection,
    persistence,
    save_model,
)
from stsq_learn.io.archive import seal

_ATTENTION = {
    SparseTokenSelector: make_sparse_token_selection,
    SparseTokenAverager: make_sparse_averaging,
    SparseTokenRetriever: make_sparse_retrieval,
}
_FCN = {
    FCNSelector: make_sparse_token_selection,
    FCNAverager: make_sparse_averaging,
    FCNRetriever: make_sparse_retrieval,
}

attention = st.fixed_dictionaries(
    {
        "width": st.sampled_from([2, 5, 8]),
        "n_heads": st.integers(1, 3),
        "positional_encoding": st.sampled_from(["stochastic", "fixed", "randomized", "sinusoidal"]),
        "pe_sampling": st.sampled_from(["marginal", "full"]),
        "n_pe_samples": st.integers(1, 3),
        "learn_token_block": st.booleans(),
        "length_scale": st.sampled_from([None, "log"]),
        "dtype": st.sampled_from(["float32", "float64"]),
    }
)
fcn = st.fixed_dictionaries(
    {
        "width": st.sampled_from([2, 8]),
        "extra_hidden_layers": st.sampled_from([(), (3,)]),
        "dtype": st.sampled_from(["float32", "float64"]),
    }
)


@st.composite
def configurations(draw):
    cls, make = draw(st.sampled_from([*_ATTENTION.items(), *_FCN.items()]))
    params = draw(attention if cls in _ATTENTION else fcn)
    first, second = draw(st.sampled_from([4, 6])), draw(st.sampled_from([4, 6, 9]))
    warm_width = draw(st.sampled_from([None, params["width"] + 1]))
    return cls, make, params, first, second, warm_width


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations())
def test_whatever_fit_returns_saves_and_loads(config):
    cls, make, params, first, second, warm_width = config
    X, y = make(30, first, 2, 2, random_state=0)
    # on_divergence="warn": one epoch at the automatic step may diverge; whatever fit returns
    # (a finite model) must save and load.
    model = cls(max_iter=1, batch_size=10, random_state=0, on_divergence="warn", **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one epoch: "worse than no model" is expected
        model.fit(X, y)
        # A warm start at another length (and perhaps width): kept if fit accepts it.
        X2, y2 = make(30, second, 2, 2, random_state=1)
        change = {"warm_start": True}
        if warm_width is not None:
            change["width"] = warm_width
        try:
            model.set_params(**change).fit(X2, y2)
        except ValueError:  # refused before any work (another architecture, or length)
            model.set_params(warm_start=False, width=params["width"])
    rows = [X] if cls in _FCN else [X, make(10, 9, 2, 2, random_state=2)[0]]
    rows = [r for r in rows if r.shape[1] == model.seq_len_ or cls in _ATTENTION]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.stsq"
        save_model(model, path)
        loaded = load_model(path)
    assert loaded.get_params() == model.get_params()
    for r in rows:
        np.testing.assert_array_equal(loaded.predict(r), model.predict(r))


# -- forged and old files: load exactly, or one ValueError naming the file -------------------


def _single_location(n, seq_len, d, q, random_state):
    return SingleLocationTask(seq_len, 2 * d, random_state=0).sample(n, random_state=random_state)


def _in_context(n, seq_len, d, q, random_state):
    return make_in_context_regression(n, seq_len - 1, d, random_state=random_state)


def _copying(n, seq_len, d, q, random_state):
    return make_copying(n, seq_len, vocab_size=3, min_len=2, random_state=random_state)


_SMALL = {"max_iter": 1, "batch_size": 10, "random_state": 0}
SAVED = {  # one small model of every class save_model may save, and its data
    "SparseTokenSelector": (lambda: SparseTokenSelector(4, **_SMALL), make_sparse_token_selection),
    "FCNSelector": (lambda: FCNSelector(4, **_SMALL), make_sparse_token_selection),
    "SparseTokenAverager": (lambda: SparseTokenAverager(4, **_SMALL), make_sparse_averaging),
    "FCNAverager": (
        lambda: FCNAverager(4, extra_hidden_layers=(3,), **_SMALL),
        make_sparse_averaging,
    ),
    "SparseTokenRetriever": (
        lambda: SparseTokenRetriever(4, n_heads=2, **_SMALL),
        make_sparse_retrieval,
    ),
    "FCNRetriever": (lambda: FCNRetriever(4, **_SMALL), make_sparse_retrieval),
    "AttentionRegressor": (
        lambda: AttentionRegressor("retrieval", 4, n_heads=2, **_SMALL),
        make_sparse_retrieval,
    ),
    "FCNRegressor": (lambda: FCNRegressor("selection", 4, **_SMALL), make_sparse_token_selection),
    "ErfAttentionRegressor": (
        lambda: ErfAttentionRegressor(max_iter=2, batch_size=10, random_state=0),
        _single_location,
    ),
    "SoftmaxAttentionRegressor": (
        lambda: SoftmaxAttentionRegressor(max_iter=2, batch_size=10, random_state=0),
        _single_location,
    ),
    "SparseTokenClassifier": (
        lambda: SparseTokenClassifier(max_iter=2, random_state=0),
        make_sparse_token_classification,
    ),
    "LinearAttentionRegressor": (
        lambda: LinearAttentionRegressor("full", **_SMALL),
        _in_context,
    ),
    "PromptRidge": (lambda: PromptRidge(alpha=0.1), _in_context),
    "PromptGradientStep": (PromptGradientStep, _in_context),
    "TransformerCopier": (
        lambda: TransformerCopier(width=8, n_heads=2, max_iter=1, batch_size=10, random_state=0),
        _copying,
    ),
    "LSTMCopier": (
        lambda: LSTMCopier(hidden_size=4, max_iter=1, batch_size=10, random_state=0),
        _copying,
    ),
    "NGramCopier": (lambda: NGramCopier(n=2), _copying),
    "FixedStateCopier": (lambda: FixedStateCopier(n_bits=4), _copying),
}
SAVED_CLASSES = sorted(persistence._CLASSES)
_FITTED = {}


def test_every_class_save_model_saves_is_covered():
    assert set(SAVED_CLASSES) <= set(SAVED)
    for name in _WEIGHTLESS:
        assert not _fitted(name)[0].get_fitted_state()["weights"]


def _fitted(name):
    """A fitted model of class ``name``, its rows at the training length and longer, its file."""
    if name not in _FITTED:
        make_model, make_data = SAVED[name]
        X, y = make_data(30, 6, 2, 2, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one epoch: "worse than no model" is expected
            model = make_model()
            if "device" in model.get_params():  # the files load on the CPU: fit there too
                model.set_params(device="cpu")
            model.fit(X, y)
        long = make_data(5, 9, 2, 2, random_state=1)[0]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.stsq"
            save_model(model, path)
            with zipfile.ZipFile(path) as zf:
                members = {n: zf.read(n) for n in zf.namelist()}
        _FITTED[name] = model, [X[:10], long], members
    return _FITTED[name]


def _migrated(meta):
    meta = copy.deepcopy(meta)
    while meta["format_version"] != persistence.FORMAT_VERSION:
        meta = persistence.MIGRATIONS[meta["format_version"]](meta)
    return meta


def _as_version(meta, version):
    """The metadata of a file of ``version`` that migrates to ``meta``: what the release wrote.

    Version 1 named three fitted fields otherwise; every key a migration restores
    with the same value is left out, as the release that wrote it never had it.
    """
    old = copy.deepcopy(meta)
    old["format_version"] = version
    if version == persistence.FORMAT_VERSION or version < persistence._first_version(meta["class"]):
        return old  # the current file, or one of a class that version cannot hold
    if version == 1:
        for new, was in (
            ("predict_seed", "_predict_seed"),
            ("y_1d", "_y_1d"),
            ("device", "device_"),
        ):
            old["fitted"][was] = old["fitted"].pop(new)
    for section in ("params", "fitted"):
        for key in list(old[section]):
            trial = copy.deepcopy(old)
            del trial[section][key]
            if _migrated(trial) == meta:
                old = trial
    assert _migrated(old) == meta
    return old


_NAN = float("nan")
# Values of a hyperparameter: valid ones and invalid ones (out of range, wrong types);
# the keys not named here draw from _ANY.
_ANY = [-1, 0, 3, 2.5, _NAN, math.inf, True, None, "", "bogus", "auto", [1], {"a": 1}]
_VALUES = {
    "length_scale": [None, "log", "floor", "bogus", 1, True, ["log"]],
    "pe_sampling": ["full", "marginal", "bogus", None, 1],
    "n_pe_samples": [1, 3, 0, -1, 2.5, True, "2", None],
    "n_pe_samples_fit": [1, 3, 0, 2.5, False],
    "device": ["cpu", "auto", "cuda", "cuda:x", "bogus", "", 3, None],
    "callbacks": [None, [], [1], ["x"], "x", {"a": 1}],
    "dtype": ["float32", "float64", "float16", "bogus", None, 32],
    "on_divergence": ["raise", "warn", "bogus", None],
    "solver": ["auto", "sgd", "adam", "bogus", None],
    "learning_rate": ["constant", "cooldown", "bogus", 1],
    "random_state": [None, 0, 7, -1, "x", 2.5],
    "verbose": [0, 1, -1, "x"],
    "warm_start": [True, False, 1, "yes", None],
    # Hyperparameters that fix the module: a value that keeps the weights' shapes but
    # not the predictions would describe another valid model (a forger's, not the one
    # the file came from), so these draw invalid values and shape-changing ones only.
    "width": [-1, 0, 2.5, True, None, "4", 3, 5, _NAN, 2**40, 10**30],
    "n_heads": [-1, 0, 2.5, False, None, "2", 3, 2**40],
    "positional_encoding": [None, "bogus", "", 1, [], "fixed"],
    "max_positions": [-1, 0, 2.5, True, "bogus", [3], 10**30],
    "learn_token_block": [None, 1, 0, "yes", []],
    "extra_hidden_layers": [
        None,
        3,
        "3",
        [-1],
        [0],
        [2.5],
        [True],
        [[1]],
        {"a": 1},
        [5, 5],
        [10**30],
    ],
    "task": ["bogus", "", None, 3, [], {"a": 1}, "averaging", "single_location"],
}
# Fitted fields draw wrong types and out-of-range values (a valid other seed or length
# would be another model); the fields no prediction reads also draw valid values.
_FITTED_VALUES = [-1, 2.5, "6", None, True, [], [1.0], {"a": 1}, _NAN, 10**30, "cuda:x"]
_FITTED_VALUES += [
    2**31,
    2**40,
    2**62,
    2**63,
    10**400,
    [10**400],
    1e308,
]  # overflow torch or floats
_HARMLESS_FITTED = {
    "n_iter_": [0, 7],
    "t_": [0, 7],
    "loss_curve_": [[], [0.5, 0.25]],
    "solver": ["sgd", "adam"],
    "learning_rate_init": [0.5],
    "token_block_rate": [None, 2.0],
    "planned_steps": [None, 5],
}
_KINDS = ["none", "set", "set", "set", "drop", "extra"]
_KINDS += ["set fitted", "drop fitted", "extra fitted", "section"]


@st.composite
def forgeries(draw):
    """(class, format version, change, key, value, sealed): a file of that version, changed."""
    name = draw(st.sampled_from(SAVED_CLASSES))
    version = draw(st.integers(1, persistence.FORMAT_VERSION))
    kind = draw(st.sampled_from(_KINDS))
    key = value = None
    current = json.loads(_fitted(name)[2]["metadata.json"])
    old = _as_version(current, version)
    if kind == "set":  # any hyperparameter of the class, in the file or added by a migration
        key = draw(st.sampled_from(sorted(current["params"])))
        value = draw(st.sampled_from(_VALUES.get(key, _ANY)))
    elif kind == "drop":
        key = draw(st.sampled_from(sorted(old["params"])))
    elif kind == "extra":
        key, value = draw(st.sampled_from(["bogus", "n_selected", "_predict_seed"])), 1
    elif kind == "set fitted":
        key = draw(st.sampled_from(sorted(old["fitted"])))
        value = draw(st.sampled_from(_FITTED_VALUES + _HARMLESS_FITTED.get(key, [])))
    elif kind == "drop fitted":
        key = draw(st.sampled_from(sorted(old["fitted"])))
    elif kind == "extra fitted":
        key, value = draw(st.sampled_from(["bogus", "n_selected", "width"])), 2
    elif kind == "section":
        key = draw(st.sampled_from(["params", "fitted"]))
        value = draw(st.sampled_from([[1], None, "x"]))
    sealed = version == persistence.FORMAT_VERSION or draw(st.booleans())
    return name, version, kind, key, value, sealed


def _write(path, members, meta, sealed=True):
    """A model file at ``path``: ``members`` with ``meta`` as their metadata, resealed."""
    with zipfile.ZipFile(path, "w") as zf:
        for member, blob in members.items():
            zf.writestr(member, json.dumps(meta) if member == "metadata.json" else blob)
    if sealed:
        seal(path)


def _load(path):
    """``load_model(path)`` on the CPU, its warnings (a CUDA device, a short fit) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(path, device="cpu")


def _forge(name, version, kind, key, value):
    """The metadata of a file of ``version`` written for ``name``'s model, with one change."""
    meta = _as_version(json.loads(_fitted(name)[2]["metadata.json"]), version)
    section = "fitted" if "fitted" in kind else "params"
    if kind in ("set", "extra", "set fitted", "extra fitted"):
        meta[section][key] = value
    elif kind in ("drop", "drop fitted"):
        del meta[section][key]
    elif kind == "section":
        meta[key] = value
    return meta


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forgeries())
# The reported cases: a 0.5 class in a version-1 file (was KeyError from the migration);
# a length_scale fit refuses for the task (loaded, then failed at predict).
@example(("SparseTokenRetriever", 1, "none", None, None, False))
@example(("SparseTokenRetriever", persistence.FORMAT_VERSION, "set", "length_scale", "floor", True))
@example(("AttentionRegressor", persistence.FORMAT_VERSION, "set", "length_scale", "floor", True))
@example(("SparseTokenSelector", 2, "set", "length_scale", "floor", False))  # a selector may
@example(("SparseTokenAverager", 3, "set", "callbacks", [1], False))
@example(("FCNSelector", 1, "set", "dtype", "float64", True))
@example(("FCNRegressor", persistence.FORMAT_VERSION, "set", "device", "bogus", True))
@example(("SparseTokenRetriever", persistence.FORMAT_VERSION, "set fitted", "y_1d", True, True))
@example(("FCNRegressor", persistence.FORMAT_VERSION, "set", "task", "retrieval", True))
# Found by the random search: a huge fitted size (was torch's overflow TypeError or
# RuntimeError), and a forged lambda_ of ErfAttentionRegressor (loaded as another model).
@example(
    ("SparseTokenSelector", persistence.FORMAT_VERSION, "set fitted", "n_features_in_", 2**62, True)
)
@example(("FCNSelector", 1, "set fitted", "seq_len_", 10**30, False))
# A fixed-state copier's file without its min_len (loaded as another code of the strings).
@example(("FixedStateCopier", 5, "drop fitted", "min_len", None, True))
# An alignment curve of a number beyond float64 (was NumPy's OverflowError on loading).
@example(("ErfAttentionRegressor", 5, "set fitted", "alignment_curve_", [10**400], True))
@example(("SparseTokenRetriever", 3, "set fitted", "n_features_in_", 2**40, True))
@example(
    (
        "SparseTokenClassifier",
        persistence.FORMAT_VERSION,
        "set fitted",
        "n_features_in_",
        2**63,
        True,
    )
)
@example(
    (
        "SoftmaxAttentionRegressor",
        persistence.FORMAT_VERSION,
        "set fitted",
        "n_features_in_",
        10**30,
        True,
    )
)
@example(("ErfAttentionRegressor", persistence.FORMAT_VERSION, "set fitted", "lambda_", 2.5, True))
@example(
    ("ErfAttentionRegressor", persistence.FORMAT_VERSION, "set fitted", "lambda_", 10**30, True)
)
@example(
    (
        "ErfAttentionRegressor",
        persistence.FORMAT_VERSION,
        "set fitted",
        "lambda_curve_",
        [1.0],
        True,
    )
)
@example(("ErfAttentionRegressor", persistence.FORMAT_VERSION, "set", "lambda_init", 2.5, True))
@example(("SparseTokenSelector", persistence.FORMAT_VERSION, "set", "width", 2**40, True))
# Found by --hypothesis-seed=9: a seed no fit draws (loaded as another model).
@example(("SparseTokenSelector", 2, "set fitted", "predict_seed", 10**30, False))
# Found by CI: a forged step_ of the gradient step (a valid model of its own).
@example(("PromptGradientStep", 5, "set fitted", "step_", -1, True))
@example(("PromptGradientStep", 5, "section", "fitted", None, True))
def test_a_forged_or_old_file_loads_as_its_model_or_is_one_value_error_naming_it(forgery):
    """Over format versions, every saved class and hyperparameters valid and invalid.

    A file either loads as the model it came from (that model, with the
    hyperparameters the file names) and predicts exactly as it does, at the
    training length and at another, or ``load_model`` raises a ``ValueError``
    naming the file: never another exception, never a model that ``fit`` would
    refuse or that fails only at ``predict``.
    """
    name, version, kind, key, value, sealed = forgery
    if name not in SAVED_CLASSES:
        return  # an example of a class save_model does not save (yet)
    model, rows, members = _fitted(name)
    meta = _forge(name, version, kind, key, value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forged.stsq"
        _write(path, members, meta, sealed)
        try:
            loaded = _load(path)
        except ValueError as exc:
            assert repr(str(path)) in str(exc), str(exc)
            return
    assert type(loaded).__name__ == name
    params = loaded.get_params(deep=False)
    expected = model.get_params(deep=False)
    if kind == "set":
        expected[key] = tuple(value) if key == "extra_hidden_layers" else value
    if kind == "drop":  # restored by a migration with the value the release trained with
        expected[key] = params[key]
    assert params.keys() == expected.keys()
    for k, v in expected.items():
        same = v == params[k] or (v != v and params[k] != params[k])
        assert same and type(v) is type(params[k]), (k, v, params[k])
    if kind == "section" and key == "fitted" and value is None:
        # The file of an unfitted model: a weightless model's file has nothing else to refuse.
        with pytest.raises(NotFittedError):
            loaded.predict(rows[0])
        return
    reference = copy.deepcopy(model).set_params(**params)
    if kind == "set fitted" and key in getattr(type(model), "_FITTED", {}):
        # A weightless model's fitted value (a baseline's step_) is the model itself, as a
        # network's weights are: any valid value loads as the model with that value.
        setattr(reference, key, getattr(loaded, key))
    for i, X in enumerate(rows if hasattr(model, "key_query_") else rows[:1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if i == 0:  # a model that loads predicts at its training length
                np.testing.assert_array_equal(loaded.predict(X), reference.predict(X))
                continue
            try:
                want = reference.predict(X)
            except ValueError:
                with pytest.raises(ValueError):
                    loaded.predict(X)
                continue
            np.testing.assert_array_equal(loaded.predict(X), want)


# -- the reported forgeries, as plain tests with variations -----------------------------------


def _load_forged(name, changes):
    """Load the file of ``name``'s model with ``changes`` ((section, key) -> value) made."""
    members = _fitted(name)[2]
    meta = json.loads(members["metadata.json"])
    for (section, key), value in changes.items():
        meta[section][key] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forged.stsq"
        _write(path, members, meta)
        return _load(path), repr(str(path))


@pytest.mark.parametrize("name", SAVED_CLASSES)
@pytest.mark.parametrize("key", ["n_features_in_", "seq_len_"])
@pytest.mark.parametrize("value", [2**31, 2**40, 2**62, 2**63, 10**30])
def test_a_huge_fitted_size_is_one_value_error_naming_it(name, key, value):
    """Was torch's overflow TypeError or RuntimeError (from the rebuilt module's shapes)."""
    with pytest.raises(ValueError) as info:
        _load_forged(name, {("fitted", key): value})
    single_location = name in ("ErfAttentionRegressor", "SoftmaxAttentionRegressor")
    low = 2 if key == "n_features_in_" and single_location else 1
    assert f"fitted {key} must be an integer from {low} to 2147483647, got {value}." in str(
        info.value
    )


_WEIGHTLESS = {  # per-prompt solves and the copying constructions: no size is not theirs
    "PromptRidge",
    "PromptGradientStep",
    "NGramCopier",
    "FixedStateCopier",
}


@pytest.mark.parametrize("name", [n for n in SAVED_CLASSES if n not in _WEIGHTLESS])
def test_a_fitted_size_larger_than_the_weights_is_refused_before_a_shape_is_built(name):
    with pytest.raises(ValueError) as info:
        _load_forged(name, {("fitted", "n_features_in_"): 2**31 - 1})
    largest = max(
        n for w in _fitted(name)[0].get_fitted_state()["weights"].values() for n in w.shape
    )
    assert (
        "fitted n_features_in_=2147483647 does not fit the weights: a model of "
        "n_features_in_=2147483647 has a weight dimension of at least 2147483647, and the "
        f"largest in this file is {largest}."
    ) in str(info.value)


@pytest.mark.parametrize("name", ["FCNSelector", "FCNAverager", "FCNRetriever", "FCNRegressor"])
def test_a_fully_connected_models_seq_len_must_fit_its_input_layer(name):
    with pytest.raises(ValueError, match=r"fitted seq_len_=100000 does not fit the weights"):
        _load_forged(name, {("fitted", "seq_len_"): 10**5})


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("SparseTokenSelector", "width", 2**40),  # torch: "Storage size calculation overflowed"
        ("SparseTokenSelector", "width", 10**30),  # torch: "Overflow when unpacking long long"
        ("SparseTokenRetriever", "width", 10**30),
        ("FCNSelector", "width", 10**30),
        ("FCNAverager", "extra_hidden_layers", [10**30]),
    ],
)
def test_hyperparameters_whose_model_overflows_torchs_shapes_are_one_value_error(name, key, value):
    with pytest.raises(ValueError) as info:
        _load_forged(name, {("params", key): value})
    message = str(info.value)
    shown = tuple(value) if key == "extra_hidden_layers" else value
    assert "of seq_len_=6, n_features_in_=2, " in message and f"{key}={shown!r}" in message
    assert "and the other hyperparameters is too large for torch" in message
    assert "these are not the sizes of its weights." in message


@pytest.mark.parametrize(
    ("name", "key", "value", "match"),
    [
        ("SparseTokenSelector", "loss_curve_", [10**400], "fitted loss_curve_ must be a list of"),
        ("SparseTokenSelector", "learning_rate_init", 10**400, "fitted learning_rate_init must"),
        ("ErfAttentionRegressor", "loss_curve_", [1, 10**400], "fitted loss_curve_ must be a list"),
        ("ErfAttentionRegressor", "lambda_", 10**400, "fitted lambda_ must be a number > 0, got 1"),
        ("ErfAttentionRegressor", "lambda_curve_", [1, 10**400], "fitted lambda_curve_ must be a"),
        ("SparseTokenClassifier", "loss_curve_", [10**400] * 2, "fitted loss_curve_ must be a"),
    ],
)
def test_a_fitted_number_too_large_for_a_float64_is_one_value_error(name, key, value, match):
    """Was OverflowError: int too large to convert to float (JSON integers are unbounded)."""
    with pytest.raises(ValueError, match=match):
        _load_forged(name, {("fitted", key): value})


def test_an_integer_of_more_digits_than_python_converts_is_refused_naming_the_file():
    _, _, members = _fitted("SparseTokenSelector")
    text = (
        members["metadata.json"]
        .decode()
        .replace('"planned_steps": 3', '"planned_steps": 3' + "0" * 5000)
    )
    assert text != members["metadata.json"].decode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "forged.stsq"
        with zipfile.ZipFile(path, "w") as zf:
            for member, blob in members.items():
                zf.writestr(member, text if member == "metadata.json" else blob)
        seal(path)
        with pytest.raises(ValueError, match=r"metadata\.json is not valid JSON") as info:
            load_model(path)
    assert repr(str(path)) in str(info.value)


_ERF_LAMBDA = _fitted("ErfAttentionRegressor")[0].lambda_  # 1 / (1 + 1e-4 * 2)


@pytest.mark.parametrize(
    "value",
    [2.5, 1, 1.0, 10**30, 1e308, 1e-300, 1 / (1 + 1e-4), np.nextafter(_ERF_LAMBDA, 2.0)],
)
def test_a_forged_lambda_of_the_erf_regressor_is_refused_naming_it(value):
    """Was loaded as another model (predictions at another temperature)."""
    with pytest.raises(ValueError) as info:
        _load_forged("ErfAttentionRegressor", {("fitted", "lambda_"): float(value)})
    assert (
        f"fitted lambda_={float(value)!r} is not the temperature of this model: lambda_init=1.0, "
        "lambda_schedule='decay' and lambda_decay=0.0001 give lambda_=0.9998000399920016 after "
        "n_iter_=2 steps."
    ) in str(info.value)


@pytest.mark.parametrize(("step", "value"), [(0, 0.5), (1, 2.5), (1, 1.0)])
def test_a_forged_lambda_curve_of_the_erf_regressor_is_refused_naming_the_step(step, value):
    curve = _fitted("ErfAttentionRegressor")[0].lambda_curve_.tolist()  # [1.0, 1 / 1.0001]
    right = curve[step]
    curve[step] = value
    with pytest.raises(ValueError) as info:
        _load_forged("ErfAttentionRegressor", {("fitted", "lambda_curve_"): curve})
    assert (
        f"fitted lambda_curve_ holds {value!r} at step {step}, but lambda_init=1.0, "
        f"lambda_schedule='decay' and lambda_decay=0.0001 give {right!r} there."
    ) in str(info.value)


def test_a_forged_lambda_init_no_longer_describes_the_fitted_temperature():
    with pytest.raises(ValueError, match=r"fitted lambda_=0.9998000399920016 is not the temp"):
        _load_forged("ErfAttentionRegressor", {("params", "lambda_init"): 2.5})
    # A file whose hyperparameters were set after fitting is the same case: refused, not
    # loaded with a temperature its hyperparameters do not give.
    model = copy.deepcopy(_fitted("ErfAttentionRegressor")[0]).set_params(lambda_decay=0.5)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.stsq"
        save_model(model, path)
        with pytest.raises(ValueError, match=r"lambda_decay=0.5 give lambda_=0.5 after n_iter_=2"):
            load_model(path)


@pytest.mark.parametrize(
    ("params", "how"),
    [
        ({}, "fit"),
        ({"lambda_schedule": "constant", "lambda_init": 3.0}, "fit"),
        ({"lambda_decay": 3e-3, "solver": "sgd"}, "fit"),
        ({"lambda_decay": 3e-3}, "fit_online"),
        ({"lambda_init": 0.7, "lambda_decay": 0.1}, "batch"),
        ({"lambda_schedule": "constant", "lambda_init": 0.3}, "batch"),
    ],
)
def test_every_erf_regressor_fit_loads_as_itself(params, how):
    """The temperature check is exact: fit, fit_online and the batch record the schedule's."""
    from stsq_learn.tasks.single_location.batch import fit_online_batch

    task = SingleLocationTask(5, 6, random_state=0)
    X, y = task.sample(40, random_state=1)
    models = [
        ErfAttentionRegressor(max_iter=7, batch_size=10, random_state=s, **params) for s in (0, 1)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "fit":
            models = [m.fit(X, y) for m in models]
        elif how == "fit_online":
            models = [m.fit_online(task) for m in models]
        else:
            models = fit_online_batch(models, task)
    for model in models:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.stsq"
            save_model(model, path)
            loaded = load_model(path)
        assert loaded.lambda_ == model.lambda_
        np.testing.assert_array_equal(loaded.lambda_curve_, model.lambda_curve_)
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("key", ["predict_seed", "module_seed"])
@pytest.mark.parametrize("value", [2**31 - 1, 2**40, 10**30])
def test_a_seed_no_fit_draws_is_refused(key, value):
    """Seeds are drawn in [0, 2**31 - 1): a larger one loaded as another model."""
    with pytest.raises(ValueError) as info:
        _load_forged("SparseTokenRetriever", {("fitted", key): value})
    expected = f"fitted {key} must be an integer from 0 to 2147483646 (a seed fit draws)"
    assert f"{expected}, got {value}." in str(info.value)


# -- every numeric field of every estimator's file, forged ------------------------------------
_INF = float("inf")
_ADVERSARIAL = st.one_of(
    st.sampled_from([0, 1, -1, 2, 2**31 - 1, 2**31, 2**53 + 1, 2**63, -(2**63), 10**30]),
    st.sampled_from([10**400, 0.5, -0.0, 1e-300, 1e308, -1e308, _NAN, _INF, -_INF]),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
# A forged value of these is another valid model, not a different reading of the weights:
# the reference takes it from the loaded model (another prediction seed, other label names;
# a field of the task, such as q-sparse averaging's n_selected, is another contract for the
# same weights: the task the model checks its rows against).
_FREE = {"predict_seed": "_predict_seed", "classes_": "classes_"}


def _outcome(predict, X):
    """``predict(X)``, or the text of the ``ValueError`` it raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return predict(X)
        except ValueError as exc:
            return str(exc)


# Any number of encoding draws is a valid model: one of 2**31 draws loads, and predicts as
# slowly as it asks (a loop over the draws); the test does not wait for it.
_DRAWS_PREDICTED = 64


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numeric_fields(meta):
    """``(section, key, index)`` of every number of the metadata (index None: a scalar)."""
    for section in ("params", "fitted"):
        for key, value in meta[section].items():
            if _is_number(value):
                yield section, key, None
            elif isinstance(value, list) and value and all(map(_is_number, value)):
                yield from ((section, key, i) for i in range(len(value)))


@pytest.mark.parametrize("name", SAVED_CLASSES)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_numeric_field_forged_is_refused_naming_it_or_loads_as_the_weights_say(name, data):
    """Every number of the metadata of every registered estimator's file (hyperparameters,
    fitted values, each entry of a list), one at a time, set to an adversarial value (huge
    and tiny integers and floats, NaN, infinities, off by one or a rounding from the true
    one): ``load_model`` raises one ``ValueError`` naming the file and the field, or the
    model loads and predicts exactly as the original with the loaded hyperparameters (and,
    for the fields that choose among valid models, the loaded prediction seed or labels; for
    a model without weights, such as the in-context baselines, every fitted value)."""
    model, rows, members = _fitted(name)
    meta = json.loads(members["metadata.json"])
    fields = list(_numeric_fields(meta))
    assert fields, name
    for section, key, index in fields:
        true = meta[section][key] if index is None else meta[section][key][index]
        near = [true + 1, true - 1, 2 * true, float(np.nextafter(true, _INF))]
        value = data.draw(st.one_of(_ADVERSARIAL, st.sampled_from(near)), label=key)
        forged = copy.deepcopy(meta)
        if index is None:
            forged[section][key] = value
        else:
            forged[section][key][index] = value
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "forged.stsq"
            _write(path, members, forged)
            try:
                loaded = _load(path)
            except ValueError as exc:
                assert repr(str(path)) in str(exc), str(exc)
                assert key in str(exc), (key, value, str(exc))
                continue
        params = loaded.get_params(deep=False)
        if params.get("n_pe_samples", 1) > _DRAWS_PREDICTED:
            assert params["n_pe_samples"] == value
            continue
        reference = copy.deepcopy(model).set_params(**params)
        free = [*_FREE.values(), *(["task_"] if key in type(model.task_).fitted_keys else [])]
        if not model.get_fitted_state()["weights"]:  # no weights: its fitted values (a
            free += [*meta["fitted"], "task_"]  # step size, its sizes) are the model
        for attribute in free:
            if hasattr(loaded, attribute):
                setattr(reference, attribute, getattr(loaded, attribute))
        got, want = _outcome(loaded.predict, rows[0]), _outcome(reference.predict, rows[0])
        np.testing.assert_array_equal(got, want, err_msg=f"{key}={value!r}")


@pytest.mark.parametrize("name", ["TransformerCopier", "LSTMCopier"])
@pytest.mark.parametrize("n_layers", [17_284_343, 10**30])
def test_a_layer_count_larger_than_the_file_is_refused_before_a_module_is_built(name, n_layers):
    # Building the module of a forged count first took minutes and gigabytes (meta device).
    with pytest.raises(ValueError, match=rf"invalid hyperparameter n_layers={n_layers}: a model"):
        _load_forged(name, {("params", "n_layers"): n_layers})
