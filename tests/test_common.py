"""scikit-learn's estimator checks, and 3-D equivalents of the ones that cannot apply.

``estimator_checks_generator`` yields every check scikit-learn has for a regressor.
Most of them fit on 2-D arrays, which our estimators refuse by contract: they
declare ``three_d_array=True, two_d_array=False``. For such an estimator
scikit-learn generates only ``check_estimator_cloneable`` and skips every other
check with a ``SkipTestWarning`` ("Can't test estimator ..."). So the checks run
on test-only subclasses that differ from the public classes in one tag only,
``two_d_array=True`` (``test_checked_classes_differ_only_in_the_2d_tag``): the
checks that need no data, or that test how bad input is refused, then run for
real, and ``EXPECTED_FAILED_CHECKS`` lists, with a reason each, the ones that
cannot apply. Every check runs once: the unlisted ones in
``test_sklearn_checks``, the listed ones in
``test_listed_checks_fail_for_the_listed_reason``, which fails when a listed
check passes or fails for another reason than its stated one.

The behaviour the 2-D checks would have tested is tested below on 3-D data.
scikit-learn's two row-invariance checks run as they are, on estimators that
read each 2-D row of the check as a 3-D sequence (``_on_3d_data``).
"""

import pickle
from functools import partial

import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import estimator_checks_generator
from sklearn.utils.validation import check_is_fitted

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
    SoftmaxAttentionRegressor,
    SparseTokenAverager,
    SparseTokenClassifier,
    SparseTokenRetriever,
    SparseTokenSelector,
    TransformerCopier,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    registry,
)

ESTIMATORS = [
    SparseTokenSelector(width=8, max_iter=5),
    SparseTokenSelector(width=8, max_iter=5, positional_encoding="fixed"),
    FCNSelector(width=8, max_iter=5),
    SparseTokenAverager(width=8, max_iter=5),
    FCNAverager(width=8, max_iter=5),
    SparseTokenRetriever(width=8, n_heads=2, max_iter=5),
    FCNRetriever(width=8, max_iter=5),
    AttentionRegressor("averaging", width=8, n_heads=2, max_iter=5),
    FCNRegressor("retrieval", width=8, max_iter=5),
]
IDS = [
    "spe",
    "fixed",
    "fcn",
    "qsa-spe",
    "qsa-fcn",
    "retrieval-spe",
    "retrieval-fcn",
    "generic-spe",
    "generic-fcn",
]
_MAKE = {
    "selection": make_sparse_token_selection,
    "averaging": make_sparse_averaging,
    "retrieval": make_sparse_retrieval,
}


@pytest.fixture
def tiny_data(request):
    """120 rows, 6 tokens of 3 features, q = 2, of the estimator's task."""
    estimator = getattr(request.node, "callspec", None) and request.node.callspec.params.get(
        "estimator"
    )
    name = estimator._task_class().name if estimator is not None else "selection"
    return _MAKE[name](120, 6, 3, 2, random_state=0)


class _Claims2DInput:
    """Claim ``two_d_array`` so that scikit-learn generates all of its checks."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        return tags


def _checked_class(cls):
    """``cls`` as scikit-learn's checks see it: claiming 2-D input, nothing else changed."""
    doc = f":class:`{cls.__name__}` as scikit-learn's checks see it."
    return type(f"Checked{cls.__name__}", (_Claims2DInput, cls), {"__doc__": doc})


# Every registered estimator, as the checks see it.
_CHECKED = {cls: _checked_class(cls) for cls in registry.estimators()}
CHECKED_ESTIMATORS = [_CHECKED[type(est)](**est.get_params()) for est in ESTIMATORS]

# Single-location regression: rows of tokens only, one target per row.
SL_ESTIMATORS = [
    ErfAttentionRegressor(max_iter=5),
    ErfAttentionRegressor(solver="sgd", max_iter=5, batch_size=8),
    SoftmaxAttentionRegressor(max_iter=5),
]
SL_IDS = ["erf-pgd", "erf-sgd", "softmax"]

SL_CHECKED = [_CHECKED[type(est)](**est.get_params()) for est in SL_ESTIMATORS]

# Sparse-token classification: a binary classifier of rows of tokens only.
CLS_ESTIMATORS = [
    SparseTokenClassifier(max_iter=5),
    SparseTokenClassifier(solver="two_step", max_iter=5),
]
CLS_IDS = ["cls-adam", "cls-two-step"]
CLS_CHECKED = [_CHECKED[type(est)](**est.get_params()) for est in CLS_ESTIMATORS]

# In-context regression: prompts of labelled examples, one target per prompt.
ICL_ESTIMATORS = [
    LinearAttentionRegressor(max_iter=5),
    LinearAttentionRegressor("full", solver="sgd", max_iter=5),
    PromptRidge(),
    PromptGradientStep(),
]
ICL_IDS = ["lsa", "lsa-full-sgd", "prompt-ridge", "prompt-gd"]
ICL_CHECKED = [_CHECKED[type(est)](**est.get_params()) for est in ICL_ESTIMATORS]

# Copying: 2-D rows of integer token ids, and strings of their shape to write.
COPY_ESTIMATORS = [
    TransformerCopier(width=16, n_heads=2, max_iter=2),
    LSTMCopier(hidden_size=8, max_iter=2),
    NGramCopier(),
    FixedStateCopier(),
]
COPY_IDS = ["transformer-copier", "lstm-copier", "ngram-copier", "fixed-state-copier"]
COPY_CHECKED = [_CHECKED[type(est)](**est.get_params()) for est in COPY_ESTIMATORS]


class _ReadsRowsAsSequences:
    """Read a 2-D row of k numbers as a 3-D sequence of k one-feature tokens, all selected."""

    @staticmethod
    def _lift(X):
        X = np.asarray(X, dtype=np.float64)
        return np.stack([X, np.ones_like(X)], axis=-1)

    def fit(self, X, y):
        return super().fit(self._lift(X), y)

    def predict(self, X):
        return super().predict(self._lift(X))


class SequenceSparseTokenSelector(_ReadsRowsAsSequences, SparseTokenSelector):
    """:class:`SparseTokenSelector` on the 3-D lift of scikit-learn's 2-D rows."""


class SequenceFCNSelector(_ReadsRowsAsSequences, FCNSelector):
    """:class:`FCNSelector` on the 3-D lift of scikit-learn's 2-D rows."""


class _ReadsRowsAsAveraging:
    """Read a 2-D row of k numbers as k one-feature tokens, each averaging itself (q = 1).

    The row's target is every position's; the prediction is the positions' mean.
    """

    @staticmethod
    def _lift(X):
        X = np.asarray(X, dtype=np.float64)
        return np.stack([X, np.broadcast_to(np.arange(X.shape[1], dtype=float), X.shape)], -1)

    def fit(self, X, y):
        y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)[:, 0]
        y = np.broadcast_to(y[:, None, None], (*np.shape(X), 1))
        return super().fit(self._lift(X), y)

    def predict(self, X):
        return super().predict(self._lift(X)).mean(axis=(1, 2))


class SequenceSparseTokenAverager(_ReadsRowsAsAveraging, SparseTokenAverager):
    """:class:`SparseTokenAverager` on the q = 1 lift of scikit-learn's 2-D rows."""


class SequenceFCNAverager(_ReadsRowsAsAveraging, FCNAverager):
    """:class:`FCNAverager` on the q = 1 lift of scikit-learn's 2-D rows."""


class _ReadsRowsAsRetrieval:
    """Read a 2-D row of k numbers as k one-feature tokens, the first named by role 1 (q = 1)."""

    @staticmethod
    def _lift(X):
        X = np.asarray(X, dtype=np.float64)
        roles = np.zeros_like(X)
        roles[:, 0] = 1.0
        return np.stack([X, roles], axis=-1)

    def fit(self, X, y):
        return super().fit(self._lift(X), y)

    def predict(self, X):
        return super().predict(self._lift(X))


class SequenceSparseTokenRetriever(_ReadsRowsAsRetrieval, SparseTokenRetriever):
    """:class:`SparseTokenRetriever` on the q = 1 lift of scikit-learn's 2-D rows."""


class SequenceFCNRetriever(_ReadsRowsAsRetrieval, FCNRetriever):
    """:class:`FCNRetriever` on the q = 1 lift of scikit-learn's 2-D rows."""


class SequenceAttentionRegressor(_ReadsRowsAsAveraging, AttentionRegressor):
    """:class:`AttentionRegressor` (on q-sparse averaging) on the q = 1 lift of 2-D rows."""


class SequenceFCNRegressor(_ReadsRowsAsRetrieval, FCNRegressor):
    """:class:`FCNRegressor` (on retrieval) on the q = 1 lift of 2-D rows."""


class _ReadsRowsAsTokens:
    """Read a 2-D row of k numbers as k tokens of two features, the number and 1."""

    @staticmethod
    def _lift(X):
        X = np.asarray(X, dtype=np.float64)
        return np.stack([X, np.ones_like(X)], axis=-1)

    def fit(self, X, y):
        return super().fit(self._lift(X), y)

    def predict(self, X):
        return super().predict(self._lift(X))


class SequenceErfAttentionRegressor(_ReadsRowsAsTokens, ErfAttentionRegressor):
    """:class:`ErfAttentionRegressor` on the 3-D lift of scikit-learn's 2-D rows."""


class SequenceSoftmaxAttentionRegressor(_ReadsRowsAsTokens, SoftmaxAttentionRegressor):
    """:class:`SoftmaxAttentionRegressor` on the 3-D lift of scikit-learn's 2-D rows."""


class _ReadsRowsAsPrompts:
    """Read a 2-D row of k numbers as a prompt: k examples ``[x_t; x_t]``, the query ``[1; 0]``."""

    @staticmethod
    def _lift(X):
        X = np.asarray(X, dtype=np.float64)
        examples = np.stack([X, X], axis=-1)
        query = np.broadcast_to([[[1.0, 0.0]]], (len(X), 1, 2))
        return np.concatenate([examples, query], axis=1)

    def fit(self, X, y):
        return super().fit(self._lift(X), y)

    def predict(self, X):
        return super().predict(self._lift(X))


class SequenceLinearAttentionRegressor(_ReadsRowsAsPrompts, LinearAttentionRegressor):
    """:class:`LinearAttentionRegressor` on prompts lifted from scikit-learn's 2-D rows."""


class SequencePromptRidge(_ReadsRowsAsPrompts, PromptRidge):
    """:class:`PromptRidge` on prompts lifted from scikit-learn's 2-D rows."""


class SequencePromptGradientStep(_ReadsRowsAsPrompts, PromptGradientStep):
    """:class:`PromptGradientStep` on prompts lifted from scikit-learn's 2-D rows."""


class _ReadsRowsAsTokenIds:
    """Read a 2-D row of k numbers as k token ids (its numbers, floored, modulo 4), to copy."""

    @staticmethod
    def _lift(X):
        return (np.floor(np.abs(np.asarray(X, dtype=np.float64)) * 3) % 4).astype(np.int64)

    def fit(self, X, y):
        X = self._lift(X)
        return super().fit(X, X)

    def predict(self, X):
        return super().predict(self._lift(X))


class SequenceTransformerCopier(_ReadsRowsAsTokenIds, TransformerCopier):
    """:class:`TransformerCopier` copying token ids read from scikit-learn's 2-D rows."""


class SequenceLSTMCopier(_ReadsRowsAsTokenIds, LSTMCopier):
    """:class:`LSTMCopier` copying token ids read from scikit-learn's 2-D rows."""


class SequenceNGramCopier(_ReadsRowsAsTokenIds, NGramCopier):
    """:class:`NGramCopier` copying token ids read from scikit-learn's 2-D rows."""


class SequenceFixedStateCopier(_ReadsRowsAsTokenIds, FixedStateCopier):
    """:class:`FixedStateCopier` copying token ids read from scikit-learn's 2-D rows."""


class SequenceSparseTokenClassifier(SparseTokenClassifier):
    """:class:`SparseTokenClassifier` on the 3-D lift of scikit-learn's 2-D rows.

    Every method of its goes through ``decision_function``, which lifts the rows.
    """

    def fit(self, X, y):
        return super().fit(_ReadsRowsAsTokens._lift(X), y)

    def decision_function(self, X):
        return super().decision_function(_ReadsRowsAsTokens._lift(X))


# scikit-learn's row-invariance checks run on 3-D data: the estimator reads every
# 2-D row of the check as a sequence (3-D X), in float64 because the checks'
# absolute tolerances (1e-7 and 1e-9) are below float32's rounding.
_ON_3D = {"check_methods_subset_invariance", "check_methods_sample_order_invariance"}
_SEQUENCE = {
    SparseTokenSelector: SequenceSparseTokenSelector,
    FCNSelector: SequenceFCNSelector,
    SparseTokenAverager: SequenceSparseTokenAverager,
    FCNAverager: SequenceFCNAverager,
    SparseTokenRetriever: SequenceSparseTokenRetriever,
    FCNRetriever: SequenceFCNRetriever,
    AttentionRegressor: SequenceAttentionRegressor,
    FCNRegressor: SequenceFCNRegressor,
    ErfAttentionRegressor: SequenceErfAttentionRegressor,
    SoftmaxAttentionRegressor: SequenceSoftmaxAttentionRegressor,
    SparseTokenClassifier: SequenceSparseTokenClassifier,
    LinearAttentionRegressor: SequenceLinearAttentionRegressor,
    PromptRidge: SequencePromptRidge,
    PromptGradientStep: SequencePromptGradientStep,
    TransformerCopier: SequenceTransformerCopier,
    LSTMCopier: SequenceLSTMCopier,
    NGramCopier: SequenceNGramCopier,
    FixedStateCopier: SequenceFixedStateCopier,
}


def test_every_registered_estimator_is_checked():
    """The checks run on every estimator the registry lists, whatever its task."""
    checked = {
        type(est)
        for est in ESTIMATORS + SL_ESTIMATORS + CLS_ESTIMATORS + ICL_ESTIMATORS + COPY_ESTIMATORS
    }
    assert checked == set(registry.estimators()) == set(_CHECKED)
    assert set(_SEQUENCE) == set(registry.estimators())


def _on_3d_data(estimator):
    public = next(c for c in type(estimator).__mro__ if c in _SEQUENCE)
    sequence = _SEQUENCE[public](**estimator.get_params())
    if "dtype" not in sequence.get_params():  # single-location models, baselines: float64
        return sequence
    return sequence.set_params(dtype="float64")


# The text every failure at the 3-D contract carries (stsq_learn/_validation.py).
NOT_3D = "must be 3-D"

# check name -> (reason, text its failure must contain).
_LISTED = {
    "check_fit_score_takes_y": ("fits 2-D X to inspect fit/score/predict signatures", NOT_3D),
    "check_estimators_overwrite_params": (
        "fits 2-D X; 3-D: test_fit_does_not_mutate_params_or_data",
        NOT_3D,
    ),
    "check_dont_overwrite_parameters": (
        "fits 2-D X; 3-D: test_fit_adds_only_underscored_attributes",
        NOT_3D,
    ),
    "check_estimators_fit_returns_self": (
        "fits 2-D X; 3-D: test_fit_returns_self_and_sets_fitted_attributes",
        NOT_3D,
    ),
    "check_readonly_memmap_input": (
        "fits 2-D X; 3-D read-only input: test_fit_does_not_mutate_params_or_data",
        NOT_3D,
    ),
    "check_n_features_in_after_fitting": (
        "fits 2-D X; 3-D: test_other_token_features_at_predict_are_refused",
        NOT_3D,
    ),
    "check_positive_only_tag_during_fit": (
        "fits 2-D iris; 3-D Gaussian tokens are negative half the time in every test",
        NOT_3D,
    ),
    "check_estimators_dtypes": (
        "fits 2-D X; 3-D: test_robustness.py::test_integer_and_float64_inputs_work",
        NOT_3D,
    ),
    "check_estimators_empty_data_messages": (
        "2-D empty X, 2-D wording; 3-D: test_validation.py::test_empty_or_featureless",
        NOT_3D,
    ),
    "check_pipeline_consistency": (
        "fits 2-D X; 3-D: test_one_step_pipeline_predicts_the_same",
        NOT_3D,
    ),
    "check_estimators_nan_inf": (
        "2-D X; 3-D: test_validation.py::test_nan_or_inf_anywhere_is_reported_at_its_position",
        NOT_3D,
    ),
    "check_estimators_pickle": (
        "fits 2-D X; 3-D: test_pickle_round_trip_predicts_the_same",
        NOT_3D,
    ),
    "check_f_contiguous_array_estimator": (
        "fits 2-D X; 3-D: test_memory_layout_does_not_change_the_model",
        NOT_3D,
    ),
    "check_regressors_train": (
        "learns a 2-D regression; 3-D learning: tests/test_estimators.py",
        NOT_3D,
    ),
    "check_regressor_data_not_an_array": (
        "2-D X as lists; 3-D: test_robustness.py::test_nested_lists_and_tensors_are_accepted",
        NOT_3D,
    ),
    "check_regressor_multioutput": (
        "fits 2-D X; 3-D multi-output y is the data contract (every fit here)",
        NOT_3D,
    ),
    "check_regressors_no_decision_function": (
        "fits 2-D X; 3-D: test_tags_declare_3d_multioutput_regressor",
        NOT_3D,
    ),
    "check_regressors_int": (
        "2-D integer X; 3-D: test_robustness.py::test_integer_and_float64_inputs_work",
        NOT_3D,
    ),
    "check_non_transformer_estimators_n_iter": (
        "fits 2-D X; 3-D: test_fit_returns_self_and_sets_fitted_attributes",
        NOT_3D,
    ),
    "check_fit2d_1sample": ("2-D X of one row; 3-D: test_fit_on_one_row", NOT_3D),
    "check_fit2d_1feature": (
        "2-D X of one column; 3-D, one token feature: test_estimators.py (1-D tokens)",
        NOT_3D,
    ),
    "check_dict_unchanged": (
        "fits 2-D X; 3-D: test_fit_does_not_mutate_params_or_data",
        NOT_3D,
    ),
    "check_fit_idempotent": ("fits 2-D X; 3-D: test_idempotent_fit_with_int_seed", NOT_3D),
    "check_fit_check_is_fitted": (
        "fits 2-D X; 3-D: test_fit_returns_self_and_sets_fitted_attributes",
        NOT_3D,
    ),
    "check_n_features_in": (
        "fits 2-D X; 3-D: test_fit_returns_self_and_sets_fitted_attributes",
        NOT_3D,
    ),
    "check_fit2d_predict1d": (
        "fits 2-D X, predicts 1-D rows; 3-D: test_validation.py::test_wrong_number_of_dimensions",
        NOT_3D,
    ),
    "check_requires_y_none": (
        "fits 2-D X; on 3-D X, y=None raises 'y is required ... got None', not sklearn's wording",
        NOT_3D,
    ),
    # Not about 3-D input: stsq_learn/_validation.py refuses these dtypes on purpose
    # (tests/test_validation.py::test_non_numeric_inputs).
    "check_complex_data": (
        "deliberate: complex X is a TypeError, where the check wants a ValueError",
        "must hold real numbers, got an array of dtype complex128",
    ),
    "check_dtype_object": (
        "deliberate: object X is a TypeError, where the check wants it cast to float",
        "must hold real numbers, got an array of dtype object",
    ),
}
EXPECTED_FAILED_CHECKS = {name: reason for name, (reason, _) in _LISTED.items()}
# The single-location models predict one number per row: scikit-learn adds its
# single-output check, which fits 2-D X as well.
_SL_LISTED = {
    **_LISTED,
    "check_supervised_y_2d": (
        "fits 2-D X; 3-D: test_single_location.py::test_data_contract_errors (a column y)",
        NOT_3D,
    ),
}
SL_EXPECTED_FAILED_CHECKS = {name: reason for name, (reason, _) in _SL_LISTED.items()}
# The per-prompt baselines of in-context regression train nothing (no max_iter): the
# check of n_iter_ passes for them.
_BASELINE_LISTED = {
    k: v for k, v in _SL_LISTED.items() if k != "check_non_transformer_estimators_n_iter"
}
# The classifier's own checks fit 2-D X too; the 3-D equivalents are in
# tests/test_classification.py.
_CLS_LISTED = {
    **_SL_LISTED,
    "check_classifier_data_not_an_array": (
        "2-D X as lists; 3-D: test_classification.py::test_lists_and_tensors_are_accepted",
        NOT_3D,
    ),
    "check_classifiers_classes": (
        "fits 2-D X; 3-D labels of any type: test_classification.py::test_labels_of_any_type",
        NOT_3D,
    ),
    "check_classifiers_train": (
        "learns a 2-D classification; 3-D learning: test_classification.py::test_it_learns",
        NOT_3D,
    ),
    "check_classifiers_regression_target": (
        "2-D X; 3-D continuous y: test_classification.py::test_continuous_y_is_refused",
        NOT_3D,
    ),
    "check_decision_proba_consistency": (
        "fits 2-D X; 3-D: test_classification.py::test_proba_agrees_with_the_decision",
        NOT_3D,
    ),
    "check_classifier_not_supporting_multiclass": (
        "fits 2-D X; 3-D three classes: test_classification.py::test_multiclass_is_refused",
        NOT_3D,
    ),
}
CLS_EXPECTED_FAILED_CHECKS = {name: reason for name, (reason, _) in _CLS_LISTED.items()}
# The copiers read integer token ids: every check that fits float X fails at the contract.
NOT_TOKENS = "must hold integer token ids"
_FLOAT_X = (
    "check_fit_score_takes_y",
    "check_estimators_overwrite_params",
    "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self",
    "check_readonly_memmap_input",
    "check_n_features_in_after_fitting",
    "check_estimators_dtypes",
    "check_pipeline_consistency",
    "check_estimators_pickle",
    "check_f_contiguous_array_estimator",
    "check_fit2d_1sample",
    "check_fit2d_1feature",
    "check_dict_unchanged",
    "check_fit_idempotent",
    "check_fit_check_is_fitted",
    "check_n_features_in",
    "check_fit1d",
    "check_fit2d_predict1d",
)
_COPY_LISTED = {
    **{
        name: ("fits float X; tokens are integer ids: test_copying.py", NOT_TOKENS)
        for name in _FLOAT_X
    },
    "check_positive_only_tag_during_fit": (
        "fits float iris; integer tokens: test_copying.py::test_the_contract_names_the_bad_value",
        NOT_TOKENS,
    ),
    "check_estimators_empty_data_messages": (
        "empty float X is refused as floats first: test_copying.py (an empty int X)",
        NOT_TOKENS,
    ),
    "check_estimators_nan_inf": (
        "float X with NaN is refused as floats first: integer tokens hold no NaN",
        NOT_TOKENS,
    ),
    "check_complex_data": _LISTED["check_complex_data"],
    "check_dtype_object": _LISTED["check_dtype_object"],
}


def _listed_for(estimator):
    if isinstance(estimator, tuple(map(type, COPY_CHECKED))):
        return _COPY_LISTED
    if isinstance(estimator, tuple(map(type, CLS_CHECKED))):
        return _CLS_LISTED
    if "max_iter" not in estimator.get_params():
        return _BASELINE_LISTED
    one_target = tuple(map(type, SL_CHECKED + ICL_CHECKED))
    return _SL_LISTED if isinstance(estimator, one_target) else _LISTED


def _check_name(check):
    return check.func.__name__ if isinstance(check, partial) else check.__name__


def _checks(listed):
    """scikit-learn's checks of every estimator: the listed ones, or all the others.

    Each check runs once: the listed ones in
    ``test_listed_checks_fail_for_the_listed_reason`` (which also checks why
    they fail), the others in ``test_sklearn_checks``.
    """
    pairs = [
        *zip(CHECKED_ESTIMATORS, IDS, strict=True),
        *zip(SL_CHECKED, SL_IDS, strict=True),
        *zip(CLS_CHECKED, CLS_IDS, strict=True),
        *zip(ICL_CHECKED, ICL_IDS, strict=True),
        *zip(COPY_CHECKED, COPY_IDS, strict=True),
    ]
    for est, est_id in pairs:
        for _, check in estimator_checks_generator(est, legacy=True):
            name = _check_name(check)
            if (name in _listed_for(est)) == listed:
                yield pytest.param(est, check, name, id=f"{est_id}-{name}")


@pytest.mark.parametrize(("estimator", "check", "name"), list(_checks(listed=False)))
def test_sklearn_checks(estimator, check, name):
    if name in _ON_3D:
        estimator = _on_3d_data(estimator)
    check(estimator)


def _failure_text(exc):
    """The messages of ``exc`` and of the exceptions it was raised from or during."""
    messages = []
    while exc is not None and len(messages) < 10:
        messages.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(messages)


def test_every_listed_check_exists():
    checks = estimator_checks_generator(CHECKED_ESTIMATORS[0], legacy=True)
    generated = {_check_name(check) for _, check in checks}
    assert set(_LISTED) <= generated, set(_LISTED) - generated


@pytest.mark.parametrize(("estimator", "check", "name"), list(_checks(listed=True)))
def test_listed_checks_fail_for_the_listed_reason(estimator, check, name):
    with pytest.raises((ValueError, TypeError, AssertionError)) as info:
        check(estimator)
    assert _listed_for(estimator)[name][1] in _failure_text(info.value)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_checked_classes_differ_only_in_the_2d_tag(estimator):
    checked = _CHECKED[type(estimator)](**estimator.get_params())
    tags, checked_tags = estimator.__sklearn_tags__(), checked.__sklearn_tags__()
    assert checked_tags.input_tags.two_d_array and not tags.input_tags.two_d_array
    checked_tags.input_tags.two_d_array = False
    assert checked_tags == tags
    assert checked.get_params() == estimator.get_params()


@pytest.mark.parametrize("estimator", SL_ESTIMATORS + ICL_ESTIMATORS, ids=SL_IDS + ICL_IDS)
def test_one_target_checked_classes_and_tags(estimator):
    checked = _CHECKED[type(estimator)](**estimator.get_params())
    tags, checked_tags = estimator.__sklearn_tags__(), checked.__sklearn_tags__()
    assert checked_tags.input_tags.two_d_array and not tags.input_tags.two_d_array
    checked_tags.input_tags.two_d_array = False
    assert checked_tags == tags and checked.get_params() == estimator.get_params()
    assert tags.input_tags.three_d_array and tags.target_tags.single_output
    assert not tags.target_tags.multi_output and is_regressor(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_tags_declare_3d_multioutput_regressor(estimator):
    tags = estimator.__sklearn_tags__()
    assert tags.input_tags.three_d_array and not tags.input_tags.two_d_array
    assert tags.target_tags.multi_output and is_regressor(estimator)
    for method in ("decision_function", "predict_proba", "transform"):
        assert not hasattr(estimator, method)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_fit_returns_self_and_sets_fitted_attributes(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0)
    assert est.fit(X, y) is est
    check_is_fitted(est)
    assert est.n_features_in_ == 3 and est.seq_len_ == 6
    assert 1 <= len(est.loss_curve_) == est.n_iter_ <= 5
    assert est.t_ == est.n_iter_ * 120
    assert est.predict(X).shape == y.shape and est.predict(X).dtype == np.float64


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_fit_adds_only_underscored_attributes(estimator, tiny_data):
    est = clone(estimator).set_params(random_state=0)
    before = set(vars(est))
    est.fit(*tiny_data)
    added = set(vars(est)) - before
    assert added and all(a.startswith("_") or a.endswith("_") for a in added), added


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
        est.fit(X, y)
        state = dict(vars(est))
        est.predict(X)
    finally:
        X.setflags(write=True)
        y.setflags(write=True)
    assert est.get_params() == params
    assert vars(est).keys() == state.keys()
    assert all(vars(est)[k] is v for k, v in state.items())
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_other_token_features_at_predict_are_refused(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0).fit(X, y)
    if est._task_class().name == "averaging":  # tokens of 2 features, then the 2 indices
        with pytest.raises(ValueError, match=r"4 channels per position.*n_features=3"):
            est.predict(np.concatenate([X[..., :2], X[..., 3:]], axis=-1))
        return
    with pytest.raises(ValueError, match=r"2 token features per token.*n_features=3"):
        est.predict(np.concatenate([X[..., :2], X[..., -1:]], axis=-1))


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
def test_memory_layout_does_not_change_the_model(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0)
    expected = est.fit(X, y).predict(X)
    X_f, y_f = np.asfortranarray(X), np.asfortranarray(y)
    np.testing.assert_allclose(est.fit(X_f, y_f).predict(X_f), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_one_step_pipeline_predicts_the_same(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0)
    pipe = make_pipeline(clone(est))
    np.testing.assert_array_equal(pipe.fit(X, y).predict(X), est.fit(X, y).predict(X))
    assert pipe.score(X, y) == est.score(X, y)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_fit_on_one_row(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0).fit(X[:1], y[:1])
    assert est.predict(X[:4]).shape == y[:4].shape


# Every draw of a prediction is keyed by its row: a row's prediction does not
# depend on the other rows, their order or the chunks predict cuts X into.
ROW_WISE = [pytest.param(est, id=name) for est, name in zip(ESTIMATORS, IDS)]


@pytest.mark.parametrize("estimator", ROW_WISE)
def test_predict_does_not_depend_on_row_order(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0).fit(X, y)
    order = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_allclose(est.predict(X[order]), est.predict(X)[order], atol=1e-6)


@pytest.mark.parametrize("estimator", ROW_WISE)
def test_predict_on_a_subset_is_the_subset_of_predict(estimator, tiny_data):
    X, y = tiny_data
    est = clone(estimator).set_params(random_state=0).fit(X, y)
    batches = np.concatenate([est.predict(X[i : i + 7]) for i in range(0, len(X), 7)])
    np.testing.assert_allclose(batches, est.predict(X), atol=1e-6)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_clone_is_unfitted_with_same_params(estimator, tiny_data):
    est = clone(estimator).set_params(random_state=0).fit(*tiny_data)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "net_")
