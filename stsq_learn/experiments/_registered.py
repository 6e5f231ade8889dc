"""The registered experiments' records, read from the registry: ``RECORDS`` (apart from
:mod:`._record`, so that what reads them imports no experiment until one is read)."""

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
