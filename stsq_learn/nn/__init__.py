"""The models as torch modules: the math, and nothing else.

:class:`Attention` is the one-layer softmax attention of Wang, Wei, Hsu and Lee
(2024), with one or more heads, over any task's queries. Token t is embedded
as ``z_t = [x_t ; p_t]`` with a positional encoding ``p_t`` in ``R^m``; a
query ``z_0`` is made of encodings (the task's query structure,
:mod:`stsq_learn.queries`: for sparse token selection
``z_0 = [0 ; sum_{t in S} p_t]``); head h scores ``a_t = z_t^T W_h z_0`` and
outputs ``o_h = sum_t softmax(a)_t x_t``. One head whose query's average is
the output is the paper's model; several heads (or a task whose output is
not one average, like retrieval) add a learned linear readout of
``[o_1 ; ... ; o_H]``. Only the columns of ``W_h`` that meet the query's
positional part matter, so ``W_h`` is stored as ``(d + m, n_slots * m)``
(rows: token part, then positional part).

:class:`FullyConnected` is the baseline: the task's flat row through ReLU
layers. :class:`AttentionSelector` is the module of sparse token selection
built from its sizes; a task's own modules (q-sparse averaging's
:class:`AttentionAverager` and :class:`FullyConnectedAverager`, the
classification task's :class:`AttentionClassifier`) live in its home and are
registered with it: the registry (:mod:`stsq_learn.registry`) adds them
here, so they are importable from here too. :class:`SquaredError`,
:class:`LogisticLoss` and :class:`SequenceCrossEntropy` are the training
losses of the regressors, the classifiers and the sequence-to-sequence
models.
"""

from __future__ import annotations

from .attention import Attention as Attention
from .attention import positional_alignment as positional_alignment
from .fully_connected import FullyConnected as FullyConnected
from .losses import LogisticLoss as LogisticLoss
from .losses import SequenceCrossEntropy as SequenceCrossEntropy
from .losses import SquaredError as SquaredError
from .task_attention import AttentionSelector as AttentionSelector

__all__ = [
    "Attention",
    "AttentionSelector",
    "FullyConnected",
    "LogisticLoss",
    "SequenceCrossEntropy",
    "SquaredError",
    "positional_alignment",
]
# The registry (stsq_learn.registry) adds each registered task's modules to this
# module and to __all__: nn itself imports nothing above it.
