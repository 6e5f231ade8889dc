"""How a study's seeds become the seeds of its fits and of its rows: one rule, written once.

A study repeats every run over its seeds, as cross-validation repeats a fit
over its folds. Seed ``s`` (an int) decides everything random in its runs:

- every model of seed ``s`` is fitted with ``random_state=s`` (its initial
  weights, its batch stream, its training encodings and its prediction
  draws follow from it, as for any fit of the package). Two models of one
  seed and one batch size therefore read the same batches: the comparison
  between them is paired;
- rows drawn for the run (the held-out rows that score it, the training rows
  of a study on finite data, the places and tokens of a length shift) come
  from :func:`stream_seed` ``(s, name)``, one stream per use: ``"test"``,
  ``"train"``, ``"shift"``.

``seeds=3`` is the seeds ``(0, 1, 2)``; any sequence of distinct
non-negative ints may be given instead. Nothing else makes seeds: there are
no offsets at the call sites of the experiments. :func:`check_seeds` is the
one seed check of the package: the studies, the experiments and
``reproduce`` (``--seed``, ``--seeds``) all refuse a seed by it.
"""

from __future__ import annotations

import numbers
import zlib

import numpy as np

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

    Raises
    ------
    TypeError, ValueError
        For a count that is not a positive int, or a seed that is not an
        int in range, or given twice.

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
    >>> stream_seed(0, "test") == stream_seed(0, "test") != stream_seed(1, "test")
    True
    """
    key = zlib.crc32(str(name).encode())
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1)[0] % (2**31 - 1))


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
