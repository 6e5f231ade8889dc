"""Which of scikit-learn's tools take token rows (3-D ``X``): one test per tool.

The docs list them (user guide, "Estimators", section "Which scikit-learn tools
take token rows"): the tools here that pass work with the package's estimators;
those at the end refuse 3-D ``X`` (or multi-output targets) by their own checks,
before any of our code runs, and the test pins the message they give.
"""

import warnings

import numpy as np
import pytest
from scipy.stats import loguniform
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import BaggingRegressor, VotingClassifier, VotingRegressor
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.inspection import permutation_importance
from sklearn.model_selection import (
    GridSearchCV,
    HalvingGridSearchCV,
    KFold,
    RandomizedSearchCV,
    StratifiedKFold,
    cross_val_predict,
    cross_validate,
    learning_curve,
    validation_curve,
)
from sklearn.multioutput import RegressorChain
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from stsq_learn import (
    ErfAttentionRegressor,
    FCNSelector,
    SingleLocationTask,
    SoftmaxAttentionRegressor,
    SparseTokenClassifier,
    SparseTokenSelector,
    make_sparse_token_classification,
    make_sparse_token_selection,
)

CV = KFold(2, shuffle=True, random_state=0)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps: "worse than no model" is expected
        yield


@pytest.fixture(scope="module")
def rows():
    """Selection rows (2 outputs a row) and classification rows."""
    X, y = make_sparse_token_selection(60, 6, 2, 2, random_state=0)
    Xc, yc = make_sparse_token_classification(60, 6, 3, signal=4.0, random_state=0)
    return X, y, Xc, yc


def _selector(**params):
    return SparseTokenSelector(width=8, max_iter=2, random_state=0, **params)


def _classifier(**params):
    return SparseTokenClassifier(max_iter=10, batch_size="full", random_state=0, **params)


# -- the tools that take token rows ------------------------------------------------------
def test_grid_search(rows):
    X, y, _, _ = rows
    grid = GridSearchCV(_selector(), {"width": [4, 8]}, cv=CV).fit(X, y)
    assert grid.best_params_["width"] in (4, 8) and grid.predict(X).shape == y.shape
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()


def test_randomized_search(rows):
    X, y, _, _ = rows
    search = RandomizedSearchCV(
        FCNSelector(width=8, max_iter=2, random_state=0),
        {"learning_rate_init": loguniform(1e-3, 1e-1)},
        n_iter=2,
        cv=CV,
        random_state=0,
    ).fit(X, y)
    assert 1e-3 <= search.best_params_["learning_rate_init"] <= 1e-1


def test_cross_validate(rows):
    _, _, Xc, yc = rows
    res = cross_validate(
        _classifier(), Xc, yc, cv=StratifiedKFold(2), scoring=["accuracy", "roc_auc"]
    )
    assert res["test_accuracy"].shape == res["test_roc_auc"].shape == (2,)


def test_cross_val_predict(rows):
    X, y, Xc, yc = rows
    proba = cross_val_predict(_classifier(), Xc, yc, cv=StratifiedKFold(2), method="predict_proba")
    assert proba.shape == (60, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert cross_val_predict(_selector(), X, y, cv=CV).shape == y.shape


def test_learning_curve(rows):
    X, y, _, _ = rows
    sizes, train, test = learning_curve(_selector(), X, y, train_sizes=[0.5, 1.0], cv=CV)
    assert sizes.tolist() == [15, 30] and train.shape == test.shape == (2, 2)


def test_validation_curve(rows):
    _, _, Xc, yc = rows
    train, test = validation_curve(
        _classifier(), Xc, yc, param_name="max_iter", param_range=[1, 10], cv=StratifiedKFold(2)
    )
    assert train.shape == test.shape == (2, 2)


def test_successive_halving(rows):
    _, _, Xc, yc = rows
    search = HalvingGridSearchCV(
        _classifier(),
        {"learning_rate_init": [0.01, 0.1, 0.3]},
        cv=StratifiedKFold(2),
        factor=2,
        min_resources=20,
        random_state=0,
    ).fit(Xc, yc)
    assert search.n_resources_[0] == 20 and search.best_estimator_.classes_.tolist() == [0, 1]


def test_transformed_target_regressor(rows):
    X, y, _, _ = rows
    model = TransformedTargetRegressor(
        _selector(), func=lambda v: 2 * v, inverse_func=lambda v: v / 2
    )
    pred = model.fit(X, y).predict(X)
    np.testing.assert_allclose(pred, model.regressor_.predict(X) / 2)


def test_calibrated_classifier(rows):
    _, _, Xc, yc = rows
    calibrated = CalibratedClassifierCV(_classifier(), cv=StratifiedKFold(2), method="sigmoid")
    proba = calibrated.fit(Xc, yc).predict_proba(Xc)
    assert proba.shape == (60, 2) and calibrated.classes_.tolist() == [0, 1]


def test_pipeline(rows):
    _, _, Xc, yc = rows
    scale = FunctionTransformer(lambda X: 0.5 * X)  # any transformer of token rows
    pipe = make_pipeline(scale, _classifier()).fit(Xc, yc)
    alone = _classifier().fit(0.5 * Xc, yc)
    np.testing.assert_array_equal(pipe.decision_function(Xc), alone.decision_function(0.5 * Xc))


def test_voting_takes_token_rows_with_one_output_a_row(rows):
    """VotingRegressor does not check X; it needs one target a row (column_or_1d)."""
    X, y = SingleLocationTask(6, 4, random_state=0).sample(40, random_state=0)
    voting = VotingRegressor(
        [
            ("erf", ErfAttentionRegressor(max_iter=2)),
            ("softmax", SoftmaxAttentionRegressor(max_iter=2)),
        ]
    )
    assert voting.fit(X, y).predict(X).shape == (40,)
    _, _, Xc, yc = rows
    votes = VotingClassifier([("a", _classifier()), ("b", _classifier(alpha=1e-2))], voting="soft")
    assert votes.fit(Xc, yc).predict_proba(Xc).shape == (60, 2)


# -- the tools that refuse: their own checks, before any fit of ours ----------------------


def _dim_3(by):
    """scikit-learn's refusal of 3-D rows, in its wording before and since 1.6."""
    since = rf"\. {by or None} expected <= 2"
    return rf"Found array with dim 3(, while dim <= 2 is required{by and ' by ' + by}|{since})\."


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda X, y: BaggingRegressor(_selector(), n_estimators=2).fit(X, y),
            _dim_3("BaggingRegressor"),
        ),
        (lambda X, y: RegressorChain(_selector()).fit(X, y), _dim_3("RegressorChain")),
        (
            lambda X, y: permutation_importance(_selector().fit(X, y), X, y, n_repeats=2),
            _dim_3(""),
        ),
        (
            lambda X, y: VotingRegressor([("a", _selector())]).fit(X, y),
            r"y should be a 1d array, got an array of shape \(60, 2\) instead.",
        ),
    ],
    ids=[
        "BaggingRegressor",
        "RegressorChain",
        "permutation_importance",
        "VotingRegressor-2-outputs",
    ],
)
def test_tools_that_refuse_token_rows_say_so_themselves(rows, make, match):
    X, y, _, _ = rows
    with pytest.raises(ValueError, match=match):
        make(X, y)
