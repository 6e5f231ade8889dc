"""Positional encodings: where the vectors p_t of the attention model come from.

Four families, all unit vectors in ``R^width``, each an object that gives a
batch's positional scores, its length limit and its draws:

- :class:`StochasticEncoding` (the paper's): i.i.d. uniform on the sphere,
  drawn afresh for every row at every call (:func:`sphere_encodings`). For
  the positions outside the selected set only one number per position
  matters, the projection ``p_t^T u`` on the query direction, whose law is
  that of one coordinate of a uniform unit vector times ``||u||``
  (:func:`sphere_coordinates`): the *marginal* sampler draws that number
  instead of the whole vector.
- :class:`FixedEncoding`: one vector per position, deterministic in the
  seed and prefix-stable (:func:`fixed_encodings`).
- :class:`RandomizedEncoding` (after Ruoss et al., ACL 2023): a codebook of
  ``max_positions`` fixed vectors; each row takes the vectors of a sorted
  uniform random subset of the codebook's positions
  (:func:`randomized_positions`).
- :class:`SinusoidalEncoding` (Vaswani et al., 2017): sines and cosines of
  the position at geometric frequencies, scaled to unit norm
  (:func:`sinusoidal_encodings`).

The drawn families take their randomness from a draw source:
:class:`StreamedDraws` (a ``torch.Generator``, for training) or
:class:`KeyedDraws` (every number from the row's content, for prediction).
"""

from __future__ import annotations

import torch

from .._docstrings import inherit_docstrings
from .draws import KeyedDraws, StreamedDraws
from .sampling import (
    check_codebook_length,
    fixed_encodings,
    randomized_positions,
    sinusoidal_encodings,
    sphere_coordinates,
    sphere_encodings,
)

__all__ = [
    "POSITIONAL_ENCODINGS",
    "FixedEncoding",
    "KeyedDraws",
    "RandomizedEncoding",
    "SinusoidalEncoding",
    "StochasticEncoding",
    "StreamedDraws",
    "encoding_family",
    "fixed_encodings",
    "randomized_positions",
    "sinusoidal_encodings",
    "sphere_coordinates",
    "sphere_encodings",
]


# -- the families ------------------------------------------------------------------------
class _Family:
    """What every family shares: scores from its encodings, no length limit.

    Each family documents its parameters (``width``, ``seed``, ``max_positions``).
    """

    name = None
    drawn = False  #: whether the encodings are drawn for every row at every call
    marginal = False  #: whether unread encodings can be drawn by their scores' law (stochastic)
    table_name = None  #: the module buffer holding the family's vectors, if any
    max_length = None  #: the longest sequence the family encodes (None: any)

    def __init__(self, width, seed=0, max_positions=None):
        self.width = int(width)
        self.seed = int(seed)

    def __repr__(self):
        return f"{type(self).__name__}(width={self.width})"

    def initial_table(self, seq_len):
        """The vectors the module keeps as its buffer :attr:`table_name`.

        Parameters
        ----------
        seq_len : int
            The training length.

        Returns
        -------
        Tensor of shape (n_positions, width) or None
            The fixed encodings of the training length, the codebook, or
            None for the families that keep no vectors.
        """
        return None

    def check_length(self, seq_len):
        """Raise ``ValueError`` if the family cannot encode ``seq_len`` positions.

        Parameters
        ----------
        seq_len : int
            A sequence length, at training or at predict time.

        Raises
        ------
        ValueError
            If ``seq_len`` exceeds :attr:`max_length` (a codebook's size).
        """

    def encodings(self, n_samples, seq_len, draws, table, device, dtype):  # pragma: no cover
        """The encodings of a batch: per row if drawn, else one table shared by all rows.

        A ``table`` with a leading member axis (S, ...) is the tables of the
        members of a batched fit, whose rows come in S equal blocks: each
        block reads its member's table (the encodings are then per row).

        Parameters
        ----------
        n_samples : int
            Number of rows n.
        seq_len : int
            Number of positions T.
        draws : StreamedDraws or KeyedDraws
            Source of the draws (ignored by the deterministic families).
        table : Tensor or None
            The module's buffer named :attr:`table_name` (S, ...) with members.
        device : str or torch.device
            Device of the result.
        dtype : torch.dtype
            Floating dtype of the result.

        Returns
        -------
        Tensor of shape (n_samples, seq_len, width) or (seq_len, width)
            Unit vectors.
        """
        raise NotImplementedError

    def elements_per_row(self, seq_len, n_features, sampling="marginal", n_selected=None):
        """An upper estimate of the floats a forward pass holds per row.

        Parameters
        ----------
        seq_len : int
            Length T of the rows.
        n_features : int
            Token dimension d.
        sampling : {"marginal", "full"}, default="marginal"
            The sampler of stochastic encodings (ignored by the others).
        n_selected : int or None, default=None
            The largest number of selected positions in a row (None: unknown).

        Returns
        -------
        int
            Floats per row, which sizes the chunks of a prediction.
        """
        return seq_len * (self.width + n_features + 1)


@inherit_docstrings(_Family)
class StochasticEncoding(_Family):
    """I.i.d. encodings uniform on the unit sphere, drawn for every row and call (the paper's).

    With ``sampling="full"`` all T vectors of a row are drawn. With
    ``"marginal"`` only the selected positions' vectors are (``q`` per row,
    padded to the batch's largest ``q`` and masked), which gives the query
    ``s`` and ``u = W z_0``; an unselected encoding is independent of ``s``
    and uniform on the sphere, so its score ``p_t^T u_p`` has exactly the
    law of ``||u_p|| c_t`` with ``c_t`` one coordinate of a uniform unit
    vector: one number per position instead of ``m``. Same law of the
    scores; autograd through it gives the full gradient's expectation given
    these draws. Work O(n (T d + q m + m^2)), no n T m term.

    Parameters
    ----------
    width : int
        Dimension m of an encoding.
    seed, max_positions : int, int or None
        Unused (no vectors are kept).
    """

    name = "stochastic"
    drawn = True
    marginal = True

    def encodings(self, n_samples, seq_len, draws, table, device, dtype):
        positions = torch.arange(seq_len, device=device).expand(n_samples, seq_len)
        return draws.sphere(positions, self.width, device, dtype, full=True)

    def elements_per_row(self, seq_len, n_features, sampling="marginal", n_selected=None):
        if sampling != "marginal":
            return super().elements_per_row(seq_len, n_features, sampling)
        if n_selected is None:  # as many selected vectors as the width, at most
            return seq_len * (n_features + 4) + self.width * (self.width + 4)
        # The selected vectors and their draws (about 4 floats per number), the
        # coordinates' draws and the scores (about 12 per position), and u.
        return seq_len * (n_features + 12) + self.width * (4 * n_selected + 4) + n_features


@inherit_docstrings(_Family)
class FixedEncoding(_Family):
    """One vector per position, the same for every row (:func:`fixed_encodings`).

    The module keeps the training length's vectors as its ``fixed_pe``
    buffer; longer sequences get further positions, prefix-stably.

    Parameters
    ----------
    width : int
        Dimension m of an encoding.
    seed : int, default=0
        Seed of the vectors.
    max_positions : int or None
        Unused.
    """

    name = "fixed"
    table_name = "fixed_pe"

    def initial_table(self, seq_len):
        return _table(seq_len, self.width, self.seed)

    def encodings(self, n_samples, seq_len, draws, table, device, dtype):
        if table.dim() == 3:  # members of a batched fit, a table each: per row
            return table[:, :seq_len].repeat_interleave(n_samples // table.shape[0], dim=0)
        if seq_len <= table.shape[0]:
            return table[:seq_len]
        return fixed_encodings(seq_len, self.width, self.seed, device=device, dtype=dtype)


@inherit_docstrings(_Family)
class RandomizedEncoding(_Family):
    """Each row reads a sorted uniform random subset of a codebook (Ruoss et al., 2023).

    The codebook holds ``max_positions`` fixed vectors (the first
    ``max_positions`` :func:`fixed_encodings` of the seed), kept as the
    module's ``codebook`` buffer; a sequence longer than it is refused.

    Parameters
    ----------
    width : int
        Dimension m of an encoding.
    seed : int, default=0
        Seed of the codebook.
    max_positions : int
        Codebook size L.
    """

    name = "randomized"
    drawn = True
    table_name = "codebook"

    def __init__(self, width, seed=0, max_positions=None):
        super().__init__(width, seed)
        self.max_length = int(max_positions)

    def __repr__(self):
        return f"RandomizedEncoding(width={self.width}, max_positions={self.max_length})"

    def initial_table(self, seq_len):
        return _table(self.max_length, self.width, self.seed)

    def check_length(self, seq_len):
        check_codebook_length(seq_len, self.max_length)

    def encodings(self, n_samples, seq_len, draws, table, device, dtype):
        positions = draws.subsets(n_samples, seq_len, self.max_length, device)
        if table.dim() == 3:  # members of a batched fit: each member's rows read its codebook
            S = table.shape[0]
            member = torch.arange(S, device=positions.device).repeat_interleave(n_samples // S)
            return table[member[:, None], positions]
        return table[positions]


@inherit_docstrings(_Family)
class SinusoidalEncoding(_Family):
    """The deterministic sine/cosine encodings (:func:`sinusoidal_encodings`).

    Parameters
    ----------
    width : int
        Dimension m of an encoding.
    seed, max_positions : int, int or None
        Unused.
    """

    name = "sinusoidal"

    def encodings(self, n_samples, seq_len, draws, table, device, dtype):
        return sinusoidal_encodings(seq_len, self.width, device=device, dtype=dtype)


_FAMILIES = {
    cls.name: cls
    for cls in (StochasticEncoding, FixedEncoding, RandomizedEncoding, SinusoidalEncoding)
}

POSITIONAL_ENCODINGS = tuple(_FAMILIES)
"""Names of the encoding families, as ``positional_encoding`` takes them."""


def encoding_family(name):
    """The family class of a ``positional_encoding`` name.

    Parameters
    ----------
    name : {"stochastic", "fixed", "randomized", "sinusoidal"}
        The family's name.

    Returns
    -------
    type
        :class:`StochasticEncoding`, :class:`FixedEncoding`,
        :class:`RandomizedEncoding` or :class:`SinusoidalEncoding`.

    Raises
    ------
    ValueError
        If ``name`` is not one of them.

    Examples
    --------
    >>> from stsq_learn.encodings import encoding_family
    >>> encoding_family("randomized")(8, max_positions=32)
    RandomizedEncoding(width=8, max_positions=32)
    """
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"positional_encoding must be one of {POSITIONAL_ENCODINGS}, got {name!r}."
        ) from None


def _table(n_positions, width, seed):
    """``fixed_encodings`` as a buffer; under ``torch.device("meta")`` only its shape."""
    pe = torch.empty(n_positions, width)
    if pe.device.type != "meta":
        pe = fixed_encodings(n_positions, width, seed)
    return pe
