"""scikit-learn's data-free estimator checks, and our 3-D equivalents of the rest.

scikit-learn's data checks feed 2-D arrays, which our estimators reject by
contract (they declare ``three_d_array`` input), so the checks that need no
data are called one by one and the behaviour the others check is tested here
on 3-D data.
"""

import pickle

import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils import estimator_checks as ec

from stsq_learn import FCNSelector, SparseTokenSelector

ESTIMATORS = [
    SparseTokenSelector(width=8, max_iter=5),
    SparseTokenSelector(width=8, max_iter=5, positional_encoding="fixed"),
    FCNSelector(width=8, max_iter=5),
]
IDS = ["spe", "fixed", "fcn"]

DATA_FREE_CHECKS = [
    ec.check_estimator_cloneable,
    ec.check_estimator_tags_renamed,
    ec.check_valid_tag_types,
    ec.check_estimator_repr,
    ec.check_no_attributes_set_in_init,
    ec.check_do_not_raise_errors_in_init_or_set_params,
    ec.check_mixin_order,
    ec.check_parameters_default_constructible,
    ec.check_get_params_invariance,
    ec.check_set_params,
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("check", DATA_FREE_CHECKS, ids=lambda c: c.__name__)
def test_sklearn_data_free_checks(estimator, check):
    check(type(estimator).__name__, clone(estimator))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_tags_declare_3d_multioutput_regressor(estimator):
    tags = estimator.__sklearn_tags__()
    assert tags.input_tags.three_d_array and not tags.input_tags.two_d_array
    assert tags.target_tags.multi_output and is_regressor(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_fit_returns_self_and_sets_fitted_attributes(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0)
    assert est.fit(X, y) is est
    assert est.n_features_in_ == 3 and est.seq_len_ == 6
    assert len(est.loss_curve_) == est.n_iter_ <= 5
    assert est.t_ == est.n_iter_ * 120
    assert est.predict(X).shape == y.shape and est.predict(X).dtype == np.float64


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_unfitted_raises_not_fitted(estimator, tiny_data):
    with pytest.raises(NotFittedError):
        clone(estimator).predict(tiny_data[0])


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_fit_does_not_mutate_params_or_data(estimator, tiny_data):
    X, y = tiny_data
    X0, y0 = X.copy(), y.copy()
    est = clone(estimator).set_params(random_state=0)
    params = {k: (v.copy() if hasattr(v, "copy") else v) for k, v in est.get_params().items()}
    X.setflags(write=False)
    y.setflags(write=False)
    try:
        est.fit(X, y).predict(X)
    finally:
        X.setflags(write=True)
        y.setflags(write=True)
    assert est.get_params() == params
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_pickle_round_trip_predicts_the_same(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0).fit(X, y)
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(restored.predict(X), est.predict(X))
    np.testing.assert_array_equal(restored.loss_curve_, est.loss_curve_)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_idempotent_fit_with_int_seed(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=3)
    first = est.fit(X, y).predict(X)
    curve = list(est.loss_curve_)
    second = est.fit(X, y).predict(X)
    np.testing.assert_array_equal(first, second)
    assert est.loss_curve_ == curve
    np.testing.assert_array_equal(clone(est).fit(X, y).predict(X), first)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_clone_is_unfitted_with_same_params(estimator, tiny_data):
    est = clone(estimator).set_params(random_state=0).fit(*tiny_data)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "net_")
