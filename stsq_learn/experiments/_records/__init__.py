"""The experiments' records, one module per experiment (its ``RECORD``), read from the registry.

An experiment is registered with its task (:func:`stsq_learn.registry.register`,
``experiments=``): the dotted path of a module holding its ``RECORD`` (name,
aliases, function, presets per size, summary rows, work), or the record
itself. :data:`RECORDS` lists them in the order ``reproduce`` runs them.
"""

from __future__ import annotations

import importlib

from ... import registry


def _registered_records():
    """Experiment name to its record, in run order, as the registry lists them now."""
    out = {}
    for entry in registry.experiments():
        record = importlib.import_module(entry).RECORD if isinstance(entry, str) else entry
        out[record.name] = record
    return out


RECORDS = registry.View(_registered_records, "RECORDS")
"""Experiment name to its :class:`~stsq_learn.experiments._record.Experiment`."""


def __getattr__(name):
    if name == "ENTRIES":  # the record names, in run order
        return tuple(RECORDS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
