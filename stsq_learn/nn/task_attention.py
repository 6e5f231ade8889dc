"""The attention module of sparse token selection, built from its sizes.

:class:`AttentionSelector` is :class:`Attention` with the task fixed: the
module of 0.1 to 0.4 under the same name, with the same parameters and
buffers. (Another task's module lives in its home, e.g.
``stsq_learn.tasks.averaging.modules``; :mod:`stsq_learn.nn` exports it.)
"""

from __future__ import annotations

from ..tasks.selection.task import SparseTokenSelectionTask
from .attention import Attention
from .queries import query_scores, softmax

__all__ = ["AttentionSelector"]


class AttentionSelector(Attention):
    """:class:`Attention` on sparse token selection, built from the task's sizes.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    width : int
        Dimension m of the positional encodings.
    positional_encoding : {"stochastic", "fixed", "randomized", "sinusoidal"}
        The encoding family.
    seq_len : int, default=1
        Training length; ``"fixed"`` keeps that many encodings as a buffer.
    encoding_seed : int, default=0
        Seed of the fixed encodings and of the codebook.
    learn_token_block : bool, default=True
        False keeps the token rows of W at 0 (the scores are then
        ``p_t^T W_pp s``, the limit the theory predicts).
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
        task = SparseTokenSelectionTask.from_fitted(seq_len, n_features, {})
        super().__init__(
            task,
            width,
            positional_encoding,
            encoding_seed,
            learn_token_block,
            max_positions,
            n_heads,
        )

    def attention(self, tokens, mask, P):
        """The first head's softmax attention weights (n, T) for given encodings ``P``.

        Forms ``u = W z_0`` once per row (n m^2 work), then the scores
        ``[x_t ; p_t]^T u`` (n T (d + m) work); ``W p_t`` is never formed.

        Parameters
        ----------
        tokens : Tensor of shape (n, T, d) or (n, T, d + 1)
            The tokens x_t, optionally followed by the selection channel (the
            whole X), which the scores ignore.
        mask : Tensor of shape (n, T)
            Selection indicator, 0.0 or 1.0.
        P : Tensor of shape (n, T, m) or (T, m)
            Positional encodings, per row or shared by all rows.

        Returns
        -------
        Tensor of shape (n, T)
            Attention weights; every row sums to 1.
        """
        d, Ws = self._score_rows()
        u, pos = query_scores(Ws[0], d, mask, P)
        return softmax(d, u, tokens, pos)
