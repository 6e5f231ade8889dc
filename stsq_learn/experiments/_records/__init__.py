"""The experiments' records, one module per experiment (its ``RECORD``).

To add an experiment, write its module here (name, aliases, function,
presets per size, summary rows, work) and add the module's name to
``ENTRIES``, in the order ``reproduce`` runs them.
"""

from __future__ import annotations

import importlib

ENTRIES = (
    "convergence",
    "length_generalization",
    "separation",
    "encodings",
    "qsa",
    "retrieval",
    "single_location",
)
"""The record modules, in the order :func:`~stsq_learn.experiments.reproduce` runs them."""

RECORDS = {name: importlib.import_module(f"{__name__}.{name}").RECORD for name in ENTRIES}
"""Experiment name to its :class:`~stsq_learn.experiments._record.Experiment`."""
