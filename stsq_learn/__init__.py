"""stsq-learn: sparse token selection with transformers, the scikit-learn way.

Runs the result of Wang, Wei, Hsu and Lee (ICML 2024): a one-layer transformer
trained by gradient descent learns sparse token selection with width
O(d + q log T) and, with stochastic positional encodings, generalizes to longer
sequences, while fully-connected nets need width of order T d.
"""

from . import registry
from ._version import __version__
from .encodings.floor import IsotropicFloor, isotropic_floor
from .io.persistence import load_model, save_model
from .metrics import (
    averaging_accuracy,
    relative_mse,
    string_accuracy,
    token_accuracy,
    worst_position_error,
)
from .scoring import LengthShiftScorer, length_shift_scoring
from .tasks import Task

# Every task's classes and functions come from its registration (stsq_learn.registry).
globals().update(registry.task_exports())

__all__ = [
    "IsotropicFloor",
    "LengthShiftScorer",
    "Task",
    "__version__",
    "averaging_accuracy",
    "isotropic_floor",
    "length_shift_scoring",
    "load_model",
    "relative_mse",
    "save_model",
    "string_accuracy",
    "token_accuracy",
    "worst_position_error",
]
__all__ += list(registry.task_exports())
