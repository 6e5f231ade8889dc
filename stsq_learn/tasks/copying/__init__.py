"""Copying (Jelassi et al., ICML 2024): the task, its copiers (trained and built), the theory."""

from .estimators import LSTMCopier, TransformerCopier
from .task import CopyingTask, make_copying
from .theory import FixedStateCopier, NGramCopier, fixed_state_error_bound, ngram_error_bound

__all__ = [
    "CopyingTask",
    "FixedStateCopier",
    "LSTMCopier",
    "NGramCopier",
    "TransformerCopier",
    "fixed_state_error_bound",
    "make_copying",
    "ngram_error_bound",
]
