"""The length shift of tasks whose rows mark the positions they read (selection, retrieval).

Rows move to another length ``T'`` with every target unchanged: for
``T' > T`` fresh unmarked tokens, i.i.d. standard Gaussian (the token law),
are inserted at uniformly random positions, the original tokens keeping
their order; for ``T' < T`` unmarked tokens are deleted at random. The marked
tokens, their order and hence the targets stay as they are. Vectorised over
rows (``argpartition`` on random keys, no per-row loop).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_positive_int


def move_marked_rows(X, marked, seq_len, random_state, what="selects", noun="selected"):
    """Move every row of ``X`` to length ``seq_len``, keeping its marked tokens in place.

    ``marked`` (bool, ``(n, T)``) says which tokens a row's target reads; the
    last channel of ``X`` is the marker, 0.0 on the inserted tokens. ``what``
    and ``noun`` are the words of the error message ("row 3 selects 4
    tokens", "the selected tokens"). Returns a new array of ``X``'s dtype.
    """
    seq_len = check_positive_int(seq_len, "seq_len")
    n, T, c = X.shape
    q = marked.sum(axis=1)
    if seq_len < q.max():
        row = int(np.argmax(q))
        raise ValueError(
            f"seq_len={seq_len} cannot hold the {noun} tokens: row {row} of X {what} "
            f"{int(q[row])} tokens (the most of any row; X has T={T}). Use seq_len >= "
            f"{int(q.max())}."
        )
    rng = check_random_state(random_state)
    if seq_len == T:
        return X.copy()
    rows = np.arange(n)[:, None]
    if seq_len > T:
        # The T slots with the smallest random keys (a uniform T-subset of the
        # seq_len slots) receive the original tokens, in order; every other
        # slot holds a fresh unmarked Gaussian token.
        keys = rng.random_sample((n, seq_len))
        slots = np.sort(np.argpartition(keys, T - 1, axis=1)[:, :T], axis=1)
        out = np.empty((n, seq_len, c), dtype=X.dtype)
        out[..., :-1] = rng.standard_normal((n, seq_len, c - 1))
        out[..., -1] = 0.0
        out[rows, slots] = X
        return out
    # Deletion: keep the seq_len positions with the largest keys. Marked
    # tokens get a key above every unmarked one, so they are always kept
    # (q <= seq_len) and the deleted T - seq_len tokens are a uniform choice
    # among each row's unmarked ones.
    keys = rng.random_sample((n, T))
    keys[marked] = 2.0
    kept = np.sort(np.argpartition(keys, T - seq_len, axis=1)[:, T - seq_len :], axis=1)
    return X[rows, kept]
