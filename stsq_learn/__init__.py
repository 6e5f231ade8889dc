"""stsq-learn: sparse token selection with transformers, the scikit-learn way.

Runs the result of Wang, Wei, Hsu and Lee (ICML 2024): a one-layer transformer
trained by gradient descent learns sparse token selection with width
O(d + q log T) and, with stochastic positional encodings, generalizes to longer
sequences, while fully-connected nets need width of order T d.
"""

from .averaging import FCNAverager, SparseTokenAverager
from .estimators import FCNSelector, SparseTokenSelector
from .floor import IsotropicFloor, isotropic_floor
from .persistence import load_model, save_model
from .regressors import AttentionRegressor, FCNRegressor
from .retrieval import FCNRetriever, SparseTokenRetriever
from .scoring import (
    LengthShiftScorer,
    averaging_accuracy,
    length_shift_scoring,
    relative_mse,
    worst_position_error,
)
from .single_location import ErfAttentionRegressor, SoftmaxAttentionRegressor
from .tasks import (
    SingleLocationTask,
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenSelectionTask,
    Task,
    make_single_location,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    shift_averaging,
    shift_length,
)

__version__ = "0.4.0"

__all__ = [
    "AttentionRegressor",
    "ErfAttentionRegressor",
    "FCNAverager",
    "FCNRegressor",
    "FCNRetriever",
    "FCNSelector",
    "IsotropicFloor",
    "LengthShiftScorer",
    "SingleLocationTask",
    "SoftmaxAttentionRegressor",
    "SparseAveragingTask",
    "SparseRetrievalTask",
    "SparseTokenAverager",
    "SparseTokenRetriever",
    "SparseTokenSelectionTask",
    "SparseTokenSelector",
    "Task",
    "__version__",
    "averaging_accuracy",
    "isotropic_floor",
    "length_shift_scoring",
    "load_model",
    "make_single_location",
    "make_sparse_averaging",
    "make_sparse_retrieval",
    "make_sparse_token_selection",
    "relative_mse",
    "save_model",
    "shift_averaging",
    "shift_length",
    "worst_position_error",
]
