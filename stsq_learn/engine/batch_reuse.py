"""Drawing an online batch stream once for the fits that read it: :func:`reuse_batches`.

An online fit's batches depend only on the task (a frozen dataclass, equal
by value), the batch size, the state of the generator they are drawn from
(its seed), the device and the dtype: every fit with the same five reads
the same stream, whatever its
width, its encodings or its optimiser. A width search fits one task at
several widths from one seed, and an experiment trains several models on
one task and seed; inside :func:`reuse_batches`, the first such fit draws
the batches and keeps them, and the next replay them, then draw on from the
generator state where the kept ones end. The numbers are the same bit for
bit as without it (the same draws, in the same order); only the sampling's
time is saved.

The kept batches take memory: ``max_bytes`` bounds them per context. When a
new stream would go over it, the streams used longest ago are dropped; a
stream that alone reaches the bound keeps the batches it has and draws the
rest afresh at every fit.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict

import torch

from .._validation import check_positive_int

__all__ = ["active_reuse", "reuse_batches", "reusing_batches"]

DEFAULT_MAX_BYTES = 2**28
"""Batches kept by default per :func:`reuse_batches` context (256 MiB)."""

_ACTIVE = None  # the BatchReuse of the innermost reuse_batches() context, if any


class _Stream:
    """The kept batches of one stream and the generator state just after the last."""

    __slots__ = ("batches", "nbytes", "state")

    def __init__(self, state):
        self.batches, self.state, self.nbytes = [], state, 0


def _nbytes(batch):
    return sum(t.element_size() * t.nelement() for t in batch)


class BatchReuse:
    """The kept streams of one :func:`reuse_batches` context (thread-safe).

    Parameters
    ----------
    max_bytes : int
        Bytes of kept batches, over all streams.
    """

    def __init__(self, max_bytes):
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._streams = OrderedDict()  # key -> _Stream, least recently used first
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._streams)

    def stream(self, key, n_steps, generator, draw):
        """Iterate over ``n_steps`` batches of the stream ``key``: kept ones, then new ones.

        ``generator`` (seeded, not yet drawn from) is where a new stream
        starts; ``draw(generator)`` draws one batch. A key that cannot be
        hashed (a task holding an array) is not kept: its batches are drawn
        from ``generator`` as usual.
        """
        try:
            hash(key)
        except TypeError:
            return (draw(generator) for _ in range(n_steps))
        return self._replay(key, n_steps, generator, draw)

    def _replay(self, key, n_steps, generator, draw):
        with self._lock:
            entry = self._streams.get(key)
            if entry is None:
                entry = self._streams[key] = _Stream(generator.get_state())
            self._streams.move_to_end(key)
        own = None  # this fit's generator once it draws past the kept batches
        for step in range(n_steps):
            with self._lock:
                if step < len(entry.batches):
                    batch, own = entry.batches[step], None
                else:
                    if own is None:  # step is the entry's end: start from its state
                        own = _generator_at(entry.state, generator.device)
                    batch = draw(own)
                    if step == len(entry.batches):  # own is at the end: keep it there
                        self._keep(key, entry, batch, own)
            yield batch

    def _keep(self, key, entry, batch, own):
        """Keep ``batch`` at the end of ``entry`` if the bound allows (dropping old streams)."""
        if self._streams.get(key) is not entry:
            return  # dropped by another stream meanwhile: this fit draws on without it
        size = _nbytes(batch)
        for old in list(self._streams):
            if self.nbytes + size <= self.max_bytes or old == key:
                break
            self.nbytes -= self._streams.pop(old).nbytes
        if self.nbytes + size > self.max_bytes:
            return  # the entry keeps its batches; later steps are drawn afresh
        entry.batches.append(batch)
        entry.state = own.get_state()
        entry.nbytes += size
        self.nbytes += size


def _generator_at(state, device):
    generator = torch.Generator(device=device)
    generator.set_state(state)
    return generator


def active_reuse():
    """The kept streams of the innermost :func:`reuse_batches` context, or None.

    Returns
    -------
    BatchReuse or None
        What the active context keeps; None outside every context.

    Examples
    --------
    >>> from stsq_learn.engine.batch_reuse import active_reuse, reuse_batches
    >>> with reuse_batches() as kept:
    ...     active_reuse() is kept
    True
    >>> active_reuse() is None
    True
    """
    return _ACTIVE


@contextlib.contextmanager
def reuse_batches(max_bytes=DEFAULT_MAX_BYTES):
    """Draw each online batch stream once for every fit inside the context.

    ``fit_online`` of any estimator inside the context replays the batches
    an earlier fit of the same task, batch size, batch seed, device and
    dtype drew, and draws the rest from where they end: the same numbers as
    without it, without drawing them again. The experiments open one
    (:func:`reusing_batches`) where none is active, and ``reproduce`` one
    per run: a width search fits one stream at several widths.

    Parameters
    ----------
    max_bytes : int, default=2**28
        Most bytes of batches kept at once (256 MiB); the streams used
        longest ago are dropped first.

    Yields
    ------
    BatchReuse
        The kept streams (``len`` is their number, ``nbytes`` their size).

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
    >>> from stsq_learn.engine.batch_reuse import reuse_batches
    >>> task = SparseTokenSelectionTask(seq_len=8, n_features=2, n_selected=2)
    >>> with reuse_batches() as kept:
    ...     for width in (8, 16):
    ...         model = SparseTokenSelector(width, random_state=0)
    ...         _ = model.fit_online(task, n_steps=5)
    >>> len(kept)
    1
    """
    global _ACTIVE
    max_bytes = check_positive_int(max_bytes, "max_bytes", minimum=0)
    outer, _ACTIVE = _ACTIVE, BatchReuse(max_bytes)
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = outer


def reusing_batches(function):
    """Decorate an experiment: its fits run inside :func:`reuse_batches`.

    Unless a context is already active (``reproduce`` opens one per run,
    whose bound then holds), ``function`` runs in a fresh one, closed when
    it returns: the experiments called directly reuse their streams as
    ``reproduce`` does.

    Parameters
    ----------
    function : callable
        The experiment (any function whose fits should share their streams).

    Returns
    -------
    callable
        ``function`` with the same name, docstring and signature.

    Examples
    --------
    >>> from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector
    >>> from stsq_learn.engine.batch_reuse import active_reuse, reusing_batches
    >>> @reusing_batches
    ... def two_widths(task):
    ...     for width in (8, 16):
    ...         model = SparseTokenSelector(width, random_state=0)
    ...         _ = model.fit_online(task, n_steps=5)
    ...     return len(active_reuse())
    >>> two_widths(SparseTokenSelectionTask(8, n_features=2, n_selected=2))
    1
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if _ACTIVE is not None:
            return function(*args, **kwargs)
        with reuse_batches():
            return function(*args, **kwargs)

    return wrapper
