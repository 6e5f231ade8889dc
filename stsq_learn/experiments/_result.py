"""The one result of every experiment (:class:`ExperimentResult`), and the bands of a number
over seeds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..studies import StudyTable

__all__ = ["ExperimentResult", "band"]


def band(values):
    """The band of one number over seeds: ``{"values": [...], "min", "median", "max"}`` (NumPy's
    median; non-finite values, a bound not reached, kept)."""
    values = [float(v) for v in values]
    arr = np.asarray(values, dtype=float)
    return {
        "values": values,
        "min": float(np.min(arr)),
        "median": float(np.median(arr)),
        "max": float(np.max(arr)),
    }


def fmt_band(b, digits=3):
    """``"median [min, max]"`` of a :func:`band` to ``digits`` significant digits (the
    median alone where the seeds agree)."""

    def one(v):
        return f"{v:.{digits}g}" if math.isfinite(v) else str(v)

    if len(b["values"]) == 1 or b["min"] == b["max"]:
        return one(b["median"])
    return f"{one(b['median'])} [{one(b['min'])}, {one(b['max'])}]"


def band_text(bands, key, digits=3):
    """:func:`fmt_band` of ``bands[key]``; ``"n/a"`` where it is missing or its median NaN."""
    if key not in bands or math.isnan(bands[key]["median"]):
        return "n/a"
    return fmt_band(bands[key], digits)


def last_step(rows):
    """The rows of a training curve at its last ``step``."""
    return rows.where(step=int(np.max(rows["step"])))


@dataclass(frozen=True)
class ExperimentResult:
    """An experiment's run over its seeds: its settings and its studies' tables (every number
    derived, and the figure, a function of them; :meth:`seed` gives one seed's view).

    Attributes
    ----------
    experiment : str
        The name of the experiment's record, which knows its figure,
        headline numbers and summary.
    settings : dict
        The settings of the run, as JSON (:meth:`Settings.to_json`).
    tables : dict of str to StudyTable
        Each study's table, every seed's rows in it (the ``seed`` column;
        a table without one holds what no seed changes).
    seconds : dict of str to float
        Wall-clock seconds of the run (``"total"``).

    Examples
    --------
    >>> from stsq_learn.experiments import ExperimentResult
    >>> from stsq_learn.studies import StudyTable
    >>> table = StudyTable({"model": ["a"] * 4, "seed": [0, 0, 1, 1],
    ...                     "param_seq_len": [4, 8, 4, 8],
    ...                     "value": [1.0, 2.0, 1.5, 2.5]})
    >>> result = ExperimentResult("my_study", {"target": 0.9}, {"widths": table})
    >>> result.seeds, len(result.seed(1).tables["widths"])
    ((0, 1), 2)
    >>> ExperimentResult.from_dict(result.to_dict()) == result
    True
    """

    experiment: str
    settings: dict
    tables: dict
    seconds: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.experiment, str) or not self.experiment:
            raise TypeError(f"experiment must be a non-empty str, got {self.experiment!r}.")
        if not isinstance(self.settings, dict):
            raise TypeError(f"settings must be a dict (JSON), got {type(self.settings).__name__}.")
        if not isinstance(self.tables, dict):
            raise TypeError(f"tables must be a dict of name to StudyTable, got {self.tables!r}.")
        for name, table in self.tables.items():
            if not isinstance(table, StudyTable):
                raise TypeError(
                    f"tables[{name!r}] must be a StudyTable, got {type(table).__name__}."
                )

    __hash__ = None  # equal when every field is (dataclass equality): not hashable

    def __repr__(self):
        tables = ", ".join(f"{k} ({len(t)} rows)" for k, t in self.tables.items())
        return f"ExperimentResult({self.experiment!r}, seeds {list(self.seeds)}: {tables})"

    @property
    def seeds(self):
        """The seeds of the run (a tuple of int), in order of first appearance in the tables."""
        seen = []
        for table in self.tables.values():
            if "seed" in table.columns:
                seen += [int(s) for s in table.unique("seed") if int(s) not in seen]
        return tuple(seen)

    def seed(self, seed):
        """A view of one seed: the same result with only that seed's rows.

        Tables without a ``seed`` column (what no seed changes) are kept
        whole. Every function of a result applies to the view, so a number
        derived from it is that seed's alone.

        Parameters
        ----------
        seed : int
            One of :attr:`seeds`.

        Returns
        -------
        ExperimentResult
            The view, its seeds ``(seed,)``.
        """
        if seed not in self.seeds:
            raise ValueError(
                f"seed {seed!r} is not a seed of this result; its seeds: {self.seeds}."
            )
        tables = {
            name: table.where(seed=seed) if "seed" in table.columns else table
            for name, table in self.tables.items()
        }
        view = ExperimentResult(self.experiment, self.settings, tables, dict(self.seconds))
        return view.made_by(self.__dict__.get("_record"))

    def made_by(self, record):
        """This result, knowing the record that made it (its figure, headline and summary).

        Parameters
        ----------
        record : Experiment or None
            None: the registered one of :attr:`experiment`.

        Returns
        -------
        ExperimentResult
            ``self``.
        """
        object.__setattr__(self, "_record", record)
        return self

    @property
    def record(self):
        """The :class:`~stsq_learn.experiments.Experiment` whose call made the result, else
        the registered one of its name (a result read back from JSON)."""
        from ._registered import RECORDS

        made_by = self.__dict__.get("_record")  # the record whose call made this result
        if made_by is not None:
            return made_by
        if self.experiment not in RECORDS:
            raise ValueError(
                f"no registered experiment is named {self.experiment!r} (registered: "
                f"{', '.join(RECORDS)}): register its record to draw or summarise it."
            )
        return RECORDS[self.experiment]

    def headline(self):
        """Each headline number of the record, seed by seed.

        Returns
        -------
        dict of str to list of float
            Number to its value for each of :attr:`seeds`.
        """
        record = self.record
        if record.headline is None:
            return {}
        per_seed = [record.headline_numbers(self.seed(s)) for s in self.seeds]
        names = list(per_seed[0]) if per_seed else []
        for s, numbers in zip(self.seeds[1:], per_seed[1:]):
            if list(numbers) != names:
                raise ValueError(
                    f"the headline of experiment {self.experiment!r} gives other numbers for "
                    f"seed {s} ({', '.join(numbers)}) than for seed {self.seeds[0]} "
                    f"({', '.join(names)})."
                )
        return {name: [numbers[name] for numbers in per_seed] for name in names}

    def bands(self):
        """Each headline number's band over the seeds.

        Returns
        -------
        dict of str to dict
            Number to ``{"values", "min", "median", "max"}``.
        """
        return {name: band(values) for name, values in self.headline().items()}

    def summary(self):
        """The record's rows of the Markdown summary.

        Returns
        -------
        list of str
            Markdown table rows (``| experiment | measure | value |``).
        """
        summary = self.record.summary
        return [] if summary is None else list(summary(self))

    def plot(self, axes=None):
        """The experiment's figure, drawn from the tables alone.

        Parameters
        ----------
        axes : sequence of matplotlib Axes, default=None
            One per panel; None makes a new figure.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        return self.record.figure(self, axes)

    def to_dict(self):
        """The whole result, JSON-ready.

        Returns
        -------
        dict
            ``experiment``, ``settings``, ``tables`` and ``seconds``.
        """
        return {
            "experiment": self.experiment,
            "settings": self.settings,
            "tables": {name: table.to_dict() for name, table in self.tables.items()},
            "seconds": dict(self.seconds),
        }

    @classmethod
    def from_dict(cls, data):
        """The result whose :meth:`to_dict` is ``data``.

        Parameters
        ----------
        data : dict
            What :meth:`to_dict` returned, read back from JSON or not.

        Returns
        -------
        ExperimentResult
            The result, its tables :class:`~stsq_learn.studies.StudyTable`.
        """
        if not isinstance(data, dict) or not {"experiment", "settings", "tables"} <= set(data):
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(
                "data must be an ExperimentResult.to_dict(): experiment, settings, tables "
                f"(and seconds), got {got}."
            )
        return cls(
            experiment=data["experiment"],
            settings=dict(data["settings"]),
            tables={name: StudyTable.from_dict(t) for name, t in data["tables"].items()},
            seconds=dict(data.get("seconds", {})),
        )
