"""How a study's seeds become the seeds of its fits and of its rows: one rule, written once.

Seed ``s`` (an int) decides everything random in its runs, as a fold does in cross-validation.
Every model of seed ``s`` is fitted with ``random_state=s`` (two models of one seed and batch
size read the same batches: the comparison is paired); the rows drawn for the run come from
:func:`stream_seed` ``(s, name)``, one stream per use (``"test"``, ``"train"``, ``"shift"``).
``seeds=3`` is the seeds ``(0, 1, 2)``. Nothing else makes seeds, and :func:`check_seeds` is
the package's one seed check.
"""

from __future__ import annotations

import zlib

import numpy as np

from .table import _is_int

__all__ = ["check_seeds", "stream_seed"]

SEED_MAX = 2**31 - 2
"""The largest seed a study takes (every estimator and generator of the package takes it)."""
MAX_COUNT = 10_000
"""The most seeds a count makes (``seeds=n``): a larger count is a seed meant as a list."""


def check_seeds(seeds, *, name="seeds"):
    """The seeds of a study, from a count or a sequence, validated.

    Parameters
    ----------
    seeds : int or sequence of int
        ``n`` is the seeds ``0 .. n - 1``; a sequence gives them (distinct
        ints in ``[0, 2**31 - 2]``).
    name : str, default="seeds"
        The argument's name in the messages.

    Returns
    -------
    tuple of int
        The seeds, in order.

    Examples
    --------
    >>> from stsq_learn.studies.seeds import check_seeds
    >>> check_seeds(3), check_seeds([7, 1])
    ((0, 1, 2), (7, 1))
    """
    if _is_int(seeds):
        if not 1 <= seeds <= MAX_COUNT:
            raise ValueError(
                f"{name} must be a positive number of seeds (at most {MAX_COUNT}) or a list of "
                f"seeds, got {seeds!r}; a seed of its own is a list: [{seeds!r}]."
            )
        return tuple(range(int(seeds)))
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(
            f"{name} must be an int (how many) or a sequence of int seeds, got "
            f"{type(seeds).__name__}: {seeds!r}."
        )
    out = []
    for i, seed in enumerate(seeds):
        if not _is_int(seed):
            raise TypeError(f"{name}[{i}] must be an int, got {type(seed).__name__}: {seed!r}.")
        if not 0 <= seed <= SEED_MAX:
            raise ValueError(f"{name}[{i}] must lie in [0, {SEED_MAX}] (2**31 - 2), got {seed!r}.")
        if int(seed) in out:
            raise ValueError(f"{name} holds {seed!r} twice; give each seed once.")
        out.append(int(seed))
    if not out:
        raise ValueError(f"{name} is empty: give at least one seed.")
    return tuple(out)


def stream_seed(seed, name):
    """The seed of the draws named ``name`` (``"test"``, ``"train"``, ``"shift"``) of seed ``seed``.

    ``SeedSequence([seed, crc32(name)])``'s first word, below ``2**31 - 1``:
    independent of the fits' seed and of every other name's.

    Parameters
    ----------
    seed : int
        A study's seed.
    name : str
        What the draws are for.

    Returns
    -------
    int
        A seed for ``numpy.random.RandomState`` or a task's ``sample``.

    Examples
    --------
    >>> from stsq_learn.studies.seeds import stream_seed
    >>> a, b = stream_seed(0, "test"), stream_seed(1, "test")
    >>> stream_seed(0, "test") == a != b
    True
    """
    key = zlib.crc32(str(name).encode())
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1)[0] % (2**31 - 1))
