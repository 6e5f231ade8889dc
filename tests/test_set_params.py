"""set_params checks every key before it sets any: a failed call leaves the model as it was."""

import copy
import inspect
import re
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

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
    SparseTokenClassificationTask,
    SparseTokenClassifier,
    SparseTokenRetriever,
    SparseTokenSelector,
    TransformerCopier,
    make_copying,
    make_in_context_regression,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    registry,
)
from stsq_learn.engine.params import check_param_keys


def _single_location(n, seq_len, d, q, random_state):
    return SingleLocationTask(seq_len, 2 * d, random_state=0).sample(n, random_state=random_state)


def _classification(n, seq_len, d, q, random_state):
    task = SparseTokenClassificationTask(seq_len, 2 * d, signal=3.0, random_state=0)
    return task.sample(n, random_state=random_state)


def _in_context(n, seq_len, d, q, random_state):
    return make_in_context_regression(n, seq_len - 1, d, random_state=random_state)


def _copying(n, seq_len, d, q, random_state):
    return make_copying(n, seq_len, vocab_size=d + 2, min_len=2, random_state=random_state)


_SMALL = {"max_iter": 1, "batch_size": 10, "random_state": 0}
# estimator, its data, and a valid change (the one of the report where the class has it)
ESTIMATORS = {
    "SparseTokenSelector": (
        lambda: SparseTokenSelector(4, **_SMALL),
        make_sparse_token_selection,
        {"length_scale": "log"},
    ),
    "FCNSelector": (lambda: FCNSelector(4, **_SMALL), make_sparse_token_selection, {"width": 7}),
    "SparseTokenAverager": (
        lambda: SparseTokenAverager(4, **_SMALL),
        make_sparse_averaging,
        {"length_scale": "log"},
    ),
    "FCNAverager": (lambda: FCNAverager(4, **_SMALL), make_sparse_averaging, {"width": 7}),
    "SparseTokenRetriever": (
        lambda: SparseTokenRetriever(4, n_heads=2, **_SMALL),
        make_sparse_retrieval,
        {"length_scale": "log"},
    ),
    "FCNRetriever": (lambda: FCNRetriever(4, **_SMALL), make_sparse_retrieval, {"width": 7}),
    "AttentionRegressor": (
        lambda: AttentionRegressor("selection", 4, **_SMALL),
        make_sparse_token_selection,
        {"length_scale": "log"},
    ),
    "FCNRegressor": (
        lambda: FCNRegressor("selection", 4, **_SMALL),
        make_sparse_token_selection,
        {"width": 7},
    ),
    "ErfAttentionRegressor": (
        lambda: ErfAttentionRegressor(max_iter=2, batch_size=10, random_state=0),
        _single_location,
        {"lambda_init": 0.5},
    ),
    "SoftmaxAttentionRegressor": (
        lambda: SoftmaxAttentionRegressor(max_iter=2, batch_size=10, random_state=0),
        _single_location,
        {"learning_rate_init": 0.5},
    ),
    "SparseTokenClassifier": (
        lambda: SparseTokenClassifier(max_iter=2, random_state=0),
        _classification,
        {"alpha": 0.5},
    ),
    "LinearAttentionRegressor": (
        lambda: LinearAttentionRegressor(**_SMALL),
        _in_context,
        {"learning_rate_init": 0.5},
    ),
    "PromptRidge": (PromptRidge, _in_context, {"alpha": 0.5}),
    "PromptGradientStep": (PromptGradientStep, _in_context, {"step": 0.5}),
    "TransformerCopier": (
        lambda: TransformerCopier(width=8, n_heads=2, **_SMALL),
        _copying,
        {"learning_rate_init": 0.5},
    ),
    "LSTMCopier": (lambda: LSTMCopier(hidden_size=8, **_SMALL), _copying, {"hidden_size": 7}),
    "NGramCopier": (NGramCopier, _copying, {"n": 2}),
    "FixedStateCopier": (FixedStateCopier, _copying, {"n_bits": 8}),
}
_FITTED = {}


def fitted(name):
    """A fitted model of ``name`` (a copy) and rows at its training length and a longer one."""
    if name not in _FITTED:
        make, data, _ = ESTIMATORS[name]
        X, y = data(30, 6, 2, 2, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one epoch: "worse than no model" is expected
            _FITTED[name] = make().fit(X, y), X[:8], data(8, 9, 2, 2, random_state=1)[0]
    model, X, X_long = _FITTED[name]
    return copy.deepcopy(model), X, X_long


def predictions(model, X, X_long):
    out = [model.predict(X)]
    if hasattr(model, "key_query_") or isinstance(model, ErfAttentionRegressor):
        out.append(model.predict(X_long))  # where length_scale="log" would change them
    return out


def assert_unchanged(model, params, preds, X, X_long):
    after = model.get_params(deep=False)
    assert after == params
    assert all(type(after[k]) is type(v) for k, v in params.items())
    for got, want in zip(predictions(model, X, X_long), preds, strict=True):
        np.testing.assert_array_equal(got, want)


def test_every_public_estimator_is_covered():
    import stsq_learn

    public = {
        name
        for name in stsq_learn.__all__
        if isinstance(getattr(stsq_learn, name), type)
        and issubclass(getattr(stsq_learn, name), BaseEstimator)
        and hasattr(getattr(stsq_learn, name), "predict")
    }
    assert public <= set(ESTIMATORS)


@pytest.mark.parametrize("order", ["bogus last", "bogus first"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_failed_set_params_changes_nothing(name, order):
    """The report: set_params(length_scale="log", bogus=1) raised and kept length_scale."""
    model, X, X_long = fitted(name)
    change = ESTIMATORS[name][2]
    params, preds = model.get_params(deep=False), predictions(model, X, X_long)
    call = {**change, "bogus": 1} if order == "bogus last" else {"bogus": 1, **change}
    message = f"Invalid parameter 'bogus' for estimator {model}. Valid parameters are: "
    with pytest.raises(ValueError, match=re.escape(message)):
        model.set_params(**call)
    assert_unchanged(model, params, preds, X, X_long)
    # the valid part alone is applied (and, for length_scale, changes longer predictions)
    assert model.set_params(**change) is model
    assert {k: model.get_params()[k] for k in change} == change


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"bogus__width": 1}, "Invalid parameter 'bogus' for estimator "),
        (
            {"random_state__seed": 1},
            "(?s)Invalid parameter 'seed' of 'random_state' .*: random_state=0 has no",
        ),
        ({"callbacks__x": 1}, "(?s)Invalid parameter 'x' of 'callbacks' .*: callbacks=None has no"),
        ({"max_iter__x": 1}, "(?s)Invalid parameter 'x' of 'max_iter' .*: max_iter=[12] has no"),
    ],
    ids=["unknown-component", "under-a-seed", "under-none", "under-a-number"],
)
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_nested_invalid_key_changes_nothing(name, bad, match):
    model, X, X_long = fitted(name)
    if next(iter(bad)).partition("__")[0] not in {*model.get_params(), "bogus"}:
        pytest.skip(f"{name} has no {next(iter(bad))}")
    params, preds = model.get_params(deep=False), predictions(model, X, X_long)
    with pytest.raises(ValueError, match=match):  # scikit-learn: an AttributeError, half set
        model.set_params(**ESTIMATORS[name][2], **bad)
    assert_unchanged(model, params, preds, X, X_long)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_valid_call_is_scikit_learns(name):
    model = ESTIMATORS[name][0]()
    reference = ESTIMATORS[name][0]()
    change = dict(ESTIMATORS[name][2])
    if "random_state" in model.get_params():  # the per-prompt baselines draw nothing
        change["random_state"] = 3
    assert model.set_params(**change) is model
    BaseEstimator.set_params(reference, **change)
    assert model.get_params() == reference.get_params()
    assert model.set_params() is model  # no keys: nothing to do
    assert clone(model).get_params() == model.get_params()


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_inside_a_pipeline_a_failed_nested_call_changes_nothing(name):
    model = fitted(name)[0]
    change = ESTIMATORS[name][2]
    params = model.get_params(deep=False)
    pipe = Pipeline([("m", model)])
    with pytest.raises(ValueError, match="Invalid parameter 'bogus'"):
        pipe.set_params(**{f"m__{k}": v for k, v in change.items()}, m__bogus=1)
    assert model.get_params(deep=False) == params
    pipe.set_params(**{f"m__{k}": v for k, v in change.items()})
    assert {k: model.get_params()[k] for k in change} == change


def test_check_param_keys_follows_nested_components_and_their_replacements():
    pipe = Pipeline([("m", SparseTokenSelector())])
    check_param_keys(pipe, {"m__width": 3, "m__length_scale": "log"})
    with pytest.raises(
        ValueError, match="Invalid parameter 'bogus' for estimator SparseTokenSelector"
    ):
        check_param_keys(pipe, {"m__width": 3, "m__bogus": 1})
    # a component replaced in the same call: its keys are the new component's
    check_param_keys(pipe, {"m": FCNSelector(), "m__extra_hidden_layers": (3,)})
    with pytest.raises(ValueError, match="Invalid parameter 'n_heads' for estimator FCNSelector"):
        check_param_keys(pipe, {"m": FCNSelector(), "m__n_heads": 2})
    with pytest.raises(ValueError, match=r"Invalid parameter 'x' of 'width' .*width=64 has no"):
        check_param_keys(SparseTokenSelector(), {"width__x": 1})


def test_clone_and_grid_search_still_work():
    X, y = make_sparse_token_selection(40, 6, 2, 2, random_state=0)
    base = FCNSelector(4, **_SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(base, {"width": [3, 5], "alpha": [0.0, 0.1]}, cv=2).fit(X, y)
    assert search.best_estimator_.width in (3, 5)
    assert len(search.cv_results_["params"]) == 4
    with pytest.raises(ValueError, match="Invalid parameter 'bogus'"):
        GridSearchCV(base, {"bogus": [1, 2]}, cv=2, error_score="raise").fit(X, y)
    assert base.get_params() == FCNSelector(4, **_SMALL).get_params()


@pytest.mark.parametrize("cls", registry.estimators(), ids=lambda c: c.__name__)
def test_a_misspelt_parameter_names_the_public_class_and_the_valid_ones(cls):
    """``Cls(widht=3)``: a TypeError naming ``Cls`` (not its private core) and its parameters."""
    valid = repr(cls._get_param_names())
    with pytest.raises(TypeError) as info:
        cls(widht=3)
    assert str(info.value) == (
        f"{cls.__name__}() got an unexpected keyword argument 'widht'. "
        f"Valid parameters are: {valid}."
    )
    positional = [
        p for p in inspect.signature(cls).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD
    ]
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\(\) takes at most {len(positional)} "):
        cls(*[p.default for p in positional], 0)
    if positional:
        name = positional[0].name
        with pytest.raises(
            TypeError, match=rf"^{cls.__name__}\(\) got multiple values for argument '{name}'"
        ):
            cls(positional[0].default, **{name: positional[0].default})
    # A valid call is unchanged, and the signature scikit-learn reads is the estimator's.
    assert cls().get_params() == cls(**cls().get_params()).get_params()
    assert cls.__init__.__wrapped__.__name__ == "__init__"
