"""The registered experiments' records, read from the registry: ``RECORDS``.

Apart from the record's class (:mod:`._record`), so that what reads the records
(a result finding its figure, ``reproduce``, the reference check) imports
neither the other nor the experiments themselves: each is imported by the
dotted path the registry holds, when first read.
"""

from __future__ import annotations

import importlib

from .. import registry


def _registered_records():
    """Experiment name to its record, in run order, as the registry lists them now."""
    out = {}
    for entry in registry.experiments():
        record = importlib.import_module(entry).RECORD if isinstance(entry, str) else entry
        out[record.name] = record
    return out


RECORDS = registry.View(_registered_records, "RECORDS")
"""Experiment name to its :class:`~stsq_learn.experiments.Experiment`, in run order."""
