"""The torch modules of q-sparse averaging, built from its sizes (exported by :mod:`stsq_learn.nn`).

:class:`AttentionAverager` is :class:`~stsq_learn.nn.Attention` with one query
per position; :class:`FullyConnectedAverager` the fully-connected baseline on
the same rows. Both are the modules of 0.1 to 0.4 under the same names, with
the same parameters and buffers.
"""

from __future__ import annotations

from ...nn.attention import Attention
from ...nn.fully_connected import FullyConnected
from .task import SparseAveragingTask

__all__ = ["AttentionAverager", "FullyConnectedAverager"]


class AttentionAverager(Attention):
    """:class:`Attention` on q-sparse averaging: one query per position, the same W.

    Row ``X`` of shape (N, d + q) holds the tokens and, for every position
    i, the indices of its subset y_i. Query i is ``[0 ; s_i]`` with
    ``s_i = sum_{j in y_i} p_j``; output i is ``sum_j softmax_j(a_i.) x_j``.
    Every query is a sparse token selection query over the same tokens and
    encodings, so a W trained on either task serves both (same parameters
    and buffers as :class:`AttentionSelector`).

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}, default="stochastic"
        The encoding family.
    seq_len : int, default=1
        Training length N (sizes the fixed encodings).
    encoding_seed : int, default=0
        Seed of the fixed encodings and of the codebook.
    learn_token_block : bool, default=True
        False keeps the token rows of W at 0.
    max_positions : int or None, default=None
        Codebook size of ``"randomized"``.
    n_heads : int, default=1
        Number of heads.
    """

    def __init__(
        self,
        n_features,
        width,
        positional_encoding="stochastic",
        seq_len=1,
        encoding_seed=0,
        learn_token_block=True,
        max_positions=None,
        n_heads=1,
    ):
        # The structure reads each subset's size from the rows; 1 is a placeholder.
        task = SparseAveragingTask(seq_len, n_features, 1)
        super().__init__(
            task,
            width,
            positional_encoding,
            encoding_seed,
            learn_token_block,
            max_positions,
            n_heads,
        )


class FullyConnectedAverager(FullyConnected):
    """The fully-connected baseline on q-sparse averaging.

    Each position contributes its token and its subset as an N-long 0/1
    indicator (the form the selection channel has in sparse token
    selection; raw indices would make the net decode integers), so the
    flattened input has ``N (d + N)`` numbers. Then ReLU layers and a linear
    output of ``N d`` numbers, one row per position. Sanford, Hsu and
    Telgarsky prove such a net needs first-layer width about ``N d / 2``.

    Parameters
    ----------
    seq_len, n_features : int
        Number of positions N and token dimension d.
    width : int
        Units of the first hidden layer (ReLU).
    extra_hidden_layers : tuple of int, default=()
        Sizes of further ReLU hidden layers.
    """

    def __init__(self, seq_len, n_features, width, extra_hidden_layers=()):
        task = SparseAveragingTask(seq_len, n_features, 1)  # any subset size: a placeholder
        super().__init__(seq_len, n_features, width, extra_hidden_layers, task=task)
