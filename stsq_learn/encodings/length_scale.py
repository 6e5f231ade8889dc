"""Length-aware attention scales: the factor a row's scores are multiplied by at its length.

A model trained at length T learns a sharpness gamma (its W near
``gamma I``) that is best at T; at a longer T' the unselected positions are
more numerous and the best sharpness is larger (it grows about linearly in
``log T'``). A length scale multiplies every score of a row of length T' by
``f(T') / f(T_ref)``, with ``T_ref`` the length the model was trained at
(the longest of a training range), so that the same W is as sharp as T'
asks. Two rules, each an object of this module (the registry
:data:`LENGTH_SCALES` maps the estimators' ``length_scale`` names to them):

- :class:`LogScale` (``"log"``): ``f(T) = log T``, the log-length scaling of
  Chiang and Cholak (2022) and of Nakanishi's Scalable-Softmax (2025).
- :class:`FloorScale` (``"floor"``): ``f(T) = gamma*(T)``, the best gamma of
  the isotropic floor (:func:`~stsq_learn.isotropic_floor`) at length T for
  the row's number of summed encodings and the model's width, computed once
  per ``(T, q, width, draws)`` and cached (a length whose simulation would
  not fit in the available memory is refused first, with a ``ValueError``).
  Exact for ``W = gamma I``; it needs queries that sum encodings (sparse token selection, q-sparse
  averaging), and where the floor's best gamma is unbounded (one selected
  token at small widths) or 0 (every token selected) the log rule applies.
"""

from __future__ import annotations

import functools
import math

import torch

from .._resources import address_space_left, available_bytes, gib

__all__ = ["LENGTH_SCALES", "FloorScale", "LogScale", "cached_floor", "length_scale_rule"]

_FLOOR_ROWS = 20_000
"""Rows simulated for a length's best gamma (its standard error is a few thousandths)."""


class LogScale:
    """``f(T) = log T``: the scores of a row of length T are multiplied by ``log T / log T_ref``."""

    name = "log"
    needs_query_sizes = False

    def __repr__(self):
        return "LogScale()"

    def check(self, task):
        """Raise ``ValueError`` if the rule cannot scale ``task``'s queries (this one always can).

        Parameters
        ----------
        task : Task
            The estimator's task.
        """

    @staticmethod
    def ratio(seq_len, reference):
        """``log T / log T_ref`` (1 where the reference length is 1: no length to scale by).

        Parameters
        ----------
        seq_len, reference : int
            The rows' length T and the model's training length T_ref.

        Returns
        -------
        float
            The factor of every score of a row of length T.
        """
        return math.log(seq_len) / math.log(reference) if reference > 1 else 1.0

    def factors(self, seq_len, reference, query_sizes, width, n_draws):
        """The factor of every row of a batch of length ``seq_len``.

        Parameters
        ----------
        seq_len, reference : int
            The rows' length and the model's training length.
        query_sizes : Tensor of shape (n,) or None
            Encodings summed into each row's query (unused by this rule).
        width, n_draws : int
            The model's width and the encoding draws a prediction averages.

        Returns
        -------
        float
            One factor for all rows.
        """
        return self.ratio(seq_len, reference)


@functools.lru_cache(maxsize=4096)
def cached_floor(seq_len, n_selected, width, n_draws=1):
    """:func:`~stsq_learn.isotropic_floor` on 20,000 rows of seed 0, computed once per sizes.

    Parameters
    ----------
    seq_len, n_selected, width : int
        Length, summed encodings per query and width.
    n_draws : int, default=1
        Encoding draws a prediction averages.

    Returns
    -------
    IsotropicFloor
    """
    from .floor import isotropic_floor

    return isotropic_floor(
        seq_len, n_selected, width, n_samples=_FLOOR_ROWS, n_pe_samples=n_draws, random_state=0
    )


def check_floor_cost(seq_len, n_selected, width, n_draws=1):
    """Raise ``ValueError`` if the floor at these sizes would take more memory than is available.

    :func:`cached_floor` simulates 20,000 rows of length ``seq_len``
    (:func:`stsq_learn.floor.simulation_bytes`); a size already computed
    costs nothing and is not checked. The arguments are :func:`cached_floor`'s;
    the error names ``length_scale='floor'``, the length and the bytes.
    """
    from .floor import simulation_bytes

    if (seq_len, n_selected, width, n_draws) in _COMPUTED:
        return
    needed = simulation_bytes(seq_len, _FLOOR_ROWS, n_draws)
    limits = [available_bytes("cpu"), address_space_left()]
    limits = [x for x in limits if x is not None]
    limit = min(limits) if limits else None
    if limit is None or needed <= limit:
        return
    draws = f"{n_draws} encoding draw" + ("s" if n_draws > 1 else "")
    raise ValueError(
        f"length_scale='floor' at seq_len={seq_len} simulates {_FLOOR_ROWS:,} rows of that "
        f"length (q={n_selected}, width={width}, {draws}) to find its best gamma: about "
        f"{gib(needed)} ({needed:,} bytes), more than the {gib(limit)} available. Predict "
        "at a shorter length, or use length_scale='log', which simulates nothing."
    )


_COMPUTED = set()
"""Sizes whose floor :func:`floor_gamma` has computed (cached: no cost to check)."""


def floor_gamma(seq_len, n_selected, width, n_draws=1):
    """The floor's best gamma at these sizes (:func:`cached_floor`), or None if unbounded or 0."""
    gamma = cached_floor(seq_len, n_selected, width, n_draws).gamma
    _COMPUTED.add((seq_len, n_selected, width, n_draws))
    return gamma if 0.0 < gamma < math.inf else None


class FloorScale:
    """``f(T) = gamma*(T)``, the isotropic floor's best gamma at length T, per row's q."""

    name = "floor"
    needs_query_sizes = True

    def __repr__(self):
        return "FloorScale()"

    def check(self, task):
        """Raise ``ValueError`` unless ``task``'s queries are sums of encodings (the floor's model).

        Parameters
        ----------
        task : Task
            The estimator's task.
        """
        from ..tasks._reading import ModelReading

        cls = type(task)
        sizes = (
            cls.query_sizes is not ModelReading.query_sizes
            or getattr(cls.structure, "query_sizes", None) is not None
        )
        applies = sizes if task.isotropic_floor_applies is None else task.isotropic_floor_applies
        if not applies:
            raise ValueError(
                f"length_scale='floor' takes the isotropic floor's best gamma for each row's "
                f"number of summed encodings, and the queries of the task {task.name!r} are "
                "not sums of encodings; use length_scale='log'."
            )
        if not sizes:
            raise ValueError(
                f"{cls.__name__}.isotropic_floor_applies is True, but the task gives no "
                "query_sizes (each row's number of summed encodings), which length_scale="
                f"'floor' needs: define {cls.__name__}.query_sizes or use a query structure "
                "that sums encodings (Selection)."
            )

    def factors(self, seq_len, reference, query_sizes, width, n_draws):
        """The factor of every row of a batch of length ``seq_len``.

        Parameters
        ----------
        seq_len, reference : int
            The rows' length and the model's training length.
        query_sizes : Tensor of shape (n,)
            Encodings summed into each row's query (its q).
        width, n_draws : int
            The model's width and the encoding draws a prediction averages.

        Returns
        -------
        Tensor of shape (n,)
            ``gamma*(T) / gamma*(T_ref)`` for each row's q, or the log rule's
            factor where a floor's best gamma is unbounded or 0.

        Raises
        ------
        ValueError
            If a floor not yet computed would take more memory than is
            available (:func:`check_floor_cost`), before any is simulated.
        """
        fallback = LogScale.ratio(seq_len, reference)
        out = torch.full(query_sizes.shape, fallback, dtype=torch.float64)
        sizes = [int(q) for q in torch.unique(query_sizes).tolist()]
        sizes = [q for q in sizes if q <= min(seq_len, reference)]
        for q in sizes:  # every size's cost before any simulation
            for length in (seq_len, reference):
                check_floor_cost(length, q, width, n_draws)
        for q in sizes:
            at = floor_gamma(seq_len, q, width, n_draws)
            ref = floor_gamma(reference, q, width, n_draws)
            if at is not None and ref is not None:
                out[query_sizes == q] = at / ref
        return out


LENGTH_SCALES = {rule.name: rule for rule in (LogScale(), FloorScale())}
"""``length_scale`` name to its rule."""


def length_scale_rule(name):
    """The rule of a ``length_scale`` value (None: no scale, the paper's model).

    Parameters
    ----------
    name : {"log", "floor"} or None
        The estimators' ``length_scale``.

    Returns
    -------
    LogScale, FloorScale or None
        The rule's object (its ``factors`` give each row's factor).

    Raises
    ------
    ValueError
        If ``name`` is not a rule.
    """
    if name is None:
        return None
    try:
        return LENGTH_SCALES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"length_scale must be None or one of {sorted(LENGTH_SCALES)}, got {name!r}."
        ) from None
