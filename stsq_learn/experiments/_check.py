"""Reference numbers of each size (``references/<preset>.json``: every headline number's median
over a reference run's seeds and a tolerance from their spread), and the check of a run: a number
matches when ``|measured median - median| <= tolerance`` (a non-finite one when equal)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import sys
from importlib import resources
from pathlib import Path

from .._version import __version__
from ._record import SIZES

FORMAT = "stsq-learn reference 1"
"""The ``format`` of the reference files this version writes and reads."""

FACTOR, RTOL, ATOL = 3.0, 0.05, 1e-3
"""The default tolerance: ``max(FACTOR x (max - min), RTOL x |median|, ATOL)``."""


def shipped_references():
    """The presets with a ``references/<preset>.json`` in the package, in ``SIZES`` order."""
    folder = resources.files(__package__) / "references"
    return tuple(p for p in SIZES if (folder / f"{p}.json").is_file())


def load_reference(reference):
    """A reference: the one shipped for a preset, or one read from a file.

    Parameters
    ----------
    reference : str, path or dict
        A preset name (``"tiny"``, ``"quick"``, ...: the shipped reference),
        the path of a reference file, or a reference already read.

    Returns
    -------
    dict
        ``format`` (``"stsq-learn reference 1"``), ``preset``, ``made`` (the
        run's provenance: versions, date, command, machine, device, seeds),
        ``tolerance_rule`` and ``experiments``: per experiment, number to its
        ``median`` and ``tolerance`` (and the run's ``min``, ``max``, ``values``).
    """
    if isinstance(reference, dict):
        return _checked(reference, "the reference given")
    if isinstance(reference, str) and reference in SIZES:
        if reference not in shipped_references():
            shipped = ", ".join(shipped_references()) or "none"
            raise ValueError(
                f"no reference numbers are shipped for preset {reference!r} (shipped: "
                f"{shipped}); write one from a run with write_reference(results, path) or "
                f"`stsq-learn reproduce --{reference} --write-reference PATH`, and check "
                "against it with reference=PATH (--reference PATH)."
            )
        text = (resources.files(__package__) / "references" / f"{reference}.json").read_text()
        return _checked(json.loads(text), f"the shipped reference of {reference!r}")
    if not isinstance(reference, (str, os.PathLike)):
        raise TypeError(
            f"reference must be a preset name, a path or a dict, got {type(reference).__name__}."
        )
    what = f"reference={os.fspath(reference)!r}"
    if not Path(reference).is_file():
        raise ValueError(f"{what} is neither a preset ({', '.join(SIZES)}) nor a file.")
    try:
        return _checked(json.loads(Path(reference).read_text()), what)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not JSON: {exc}.") from None


def _checked(data, what):
    """``data`` if it is a reference of this format, else a ``ValueError`` naming ``what``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{what} is not a reference of format {FORMAT!r} (format: {got!r}).")
    for key in ("preset", "experiments"):
        if key not in data:
            raise ValueError(f"{what} has no {key!r}.")
    for name, numbers in data["experiments"].items():
        for number, entry in numbers.items():
            if not isinstance(entry, dict) or not {"median", "tolerance"} <= set(entry):
                raise ValueError(f"{what}: {name}.{number} needs a median and a tolerance.")
    return data


def _read_run(results):
    """``(preset, meta, bands, seeds)`` of a run: a :class:`ReproduceResults`, or the path
    of its ``results.json`` or of the directory holding it."""
    from ._reproduce import ReproduceResults, load_results

    if isinstance(results, dict) and not isinstance(results, ReproduceResults):
        raise TypeError(
            "results must be what reproduce() returns (a ReproduceResults) or the path of a "
            "run's results.json or directory, got a plain dict."
        )
    if not isinstance(results, ReproduceResults):
        results = load_results(results)
    return results.preset, results.meta, results.headline, results.seeds


def _finite(value):
    return value if math.isfinite(value) else 0.0


def tolerance(band, *, factor=FACTOR, rtol=RTOL, atol=ATOL):
    """``max(factor x (max - min), rtol x |median|, atol)`` of a band (non-finite terms: 0)."""
    spread, scale = _finite(band["max"] - band["min"]), _finite(abs(band["median"]))
    return float(max(factor * spread, rtol * scale, atol))


def write_reference(
    results, path=None, *, command=None, factor=FACTOR, rtol=RTOL, atol=ATOL, floors=None
):
    """The reference numbers of a run: each headline number's median and tolerance.

    Parameters
    ----------
    results : ReproduceResults or path
        What :func:`reproduce` returned, or the path of a run's
        ``results.json`` (or its directory).
    path : str or path, default=None
        File to write the reference to (JSON); None writes nothing. The
        package's own are ``stsq_learn/experiments/references/<preset>.json``.
    command : str, default=None
        The command that made the run, kept as ``made.command``; None says
        the Python call.
    factor, rtol, atol : float, default=3.0, 0.05, 0.001
        Each number's tolerance is ``max(factor x (max - min), rtol x |median|,
        atol)``: three times its spread over the seeds (the range of a few
        seeds understates it), never below a floor. A number that moves in
        steps gets at least its record's ``reference_rtol`` and
        ``reference_atol`` (:class:`~stsq_learn.experiments.Experiment`).
    floors : dict of str to float, default=None
        ``"experiment.number"`` to a floor of its own, in place of
        ``max(rtol x |median|, atol)``.

    Returns
    -------
    dict
        The reference, as written (see :func:`load_reference`).
    """
    from ._registered import RECORDS

    preset, meta, bands, seeds = _read_run(results)
    for name, value in (("factor", factor), ("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"{name} must be a non-negative number, got {value!r}.")
    floors = dict(floors or {})
    own_floors = bool(floors)
    experiments = {}
    for name, numbers in bands.items():
        for number, band in (numbers or {}).items():
            key = f"{name}.{number}"
            if key in floors:
                tol = max(factor * _finite(band["max"] - band["min"]), float(floors.pop(key)))
            else:
                tol = tolerance(band, factor=factor, rtol=rtol, atol=atol)
            step = RECORDS[name].step_tolerance(number) if name in RECORDS else (0, 0)
            tol = max(tol, step[0] * _finite(abs(band["median"])), step[1])
            entry = {"median": band["median"], "tolerance": tol}
            entry |= {k: band[k] for k in ("min", "max", "values")}
            experiments.setdefault(name, {})[number] = entry
    if floors:
        raise ValueError(f"floors names no headline number of the run: {', '.join(floors)}.")
    if not experiments:
        raise ValueError(
            "the run has no headline numbers (no experiment of it has a record with a "
            "headline): there is nothing to write a reference of."
        )
    made = {key: meta.get(key) for key in ("torch", "device", "torch_threads", "n_jobs")}
    reference = {
        "format": FORMAT,
        "preset": preset,
        "made": {
            "stsq_learn": meta.get("stsq_learn", __version__),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command or f"stsq_learn.experiments.reproduce({preset!r}) + write_reference",
            "machine": machine(),
            "python": meta.get("python", platform.python_version()),
            **made,
            "seeds": {name: seeds[name] for name in experiments},
            "wall_seconds": meta.get("wall_seconds"),
        },
        "tolerance_rule": (
            f"max({factor:g} x (max - min), {rtol:g} x |median|, {atol:g})"
            + (" (or the floor given for the number)" if own_floors else "")
            + "; a number that moves in steps at least its record's reference_rtol x |median|"
        ),
        "experiments": experiments,
    }
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(reference, indent=2) + "\n")
    return reference


def machine():
    """This machine, for a reference's provenance: system, processor, cores, torch's CPU kind."""
    import torch

    from ._runs import usable_cores

    return {
        "system": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cores": usable_cores(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


@dataclasses.dataclass
class ReferenceCheck:
    """The check of a run against reference numbers (see :func:`check_reference`).

    Attributes
    ----------
    preset : str
        The size of the run and of the reference.
    rows : list of dict
        One per reference number: ``experiment``, ``number``, ``reference``
        (its median), ``tolerance``, ``measured`` (the run's median, None
        when the run has no such number) and ``ok``.
    not_run : list of str
        The reference's experiments the run did not run (not compared).
    not_referenced : list of str
        ``experiment.number`` the run measured and the reference has not.
    made : dict
        The reference's provenance.
    differences : list of str
        How the run was made otherwise than the reference (another kind of
        device, other seeds): the first place to look at a mismatch.
    """

    preset: str
    rows: list
    not_run: list = dataclasses.field(default_factory=list)
    not_referenced: list = dataclasses.field(default_factory=list)
    made: dict = dataclasses.field(default_factory=dict)
    differences: list = dataclasses.field(default_factory=list)

    @property
    def ok(self):
        """Whether every compared number matched (and at least one was compared)."""
        return bool(self.rows) and all(row["ok"] for row in self.rows)

    @property
    def mismatches(self):
        """``experiment.number`` of every number that did not match."""
        return [f"{r['experiment']}.{r['number']}" for r in self.rows if not r["ok"]]

    def table(self):
        """A Markdown table: number, reference, tolerance, measured, ok; then the notes."""
        lines = ["| number | reference | tolerance | measured | ok |", "|---|---|---|---|---|"]
        lines += [
            f"| {r['experiment']}.{r['number']} | {_num(r['reference'])} | "
            f"{_num(r['tolerance'])} | {_num(r['measured'])} | {'yes' if r['ok'] else 'NO'} |"
            for r in self.rows
        ]
        if self.not_run:
            lines.append(f"\nNot run, not compared: {', '.join(self.not_run)}.")
        if self.not_referenced:
            lines.append(f"\nMeasured, not in the reference: {', '.join(self.not_referenced)}.")
        if not self.rows:
            lines.append("\nNo number compared: the run has none of the reference's experiments.")
        lines += [f"\nMade otherwise than the reference: {d}." for d in self.differences]
        return "\n".join(lines)

    def message(self):
        """One line: whether the run matched, naming every number that did not."""
        if not self.rows:
            return (
                f"no number compared: the reference of {self.preset!r} has "
                f"{', '.join(self.not_run) or 'no experiment'}, and the run none of them."
            )
        if self.ok:
            return (
                f"every one of the {len(self.rows)} reference numbers of {self.preset!r} matched."
            )
        bad = [
            f"{r['experiment']}.{r['number']} (measured {_num(r['measured'])}, reference "
            f"{_num(r['reference'])} +- {_num(r['tolerance'])})"
            for r in self.rows
            if not r["ok"]
        ]
        otherwise = "".join(
            f" The run was made otherwise than the reference: {d}." for d in self.differences
        )
        return (
            f"{len(bad)} of {len(self.rows)} numbers outside the reference of "
            f"{self.preset!r}: {', '.join(bad)}.{otherwise}"
        )

    def to_dict(self):
        """The check, JSON-ready (its fields, ``ok`` and ``mismatches``)."""
        out = {"preset": self.preset, "ok": self.ok, "mismatches": self.mismatches}
        return {**out, **dataclasses.asdict(self)}


def _num(v):
    if v is None:
        return "missing"
    return f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v)


def _matches(measured, reference, tol):
    if measured is None:
        return False
    if not (math.isfinite(measured) and math.isfinite(reference)):
        return measured == reference or (math.isnan(measured) and math.isnan(reference))
    return abs(measured - reference) <= tol * (1 + 1e-9) + 1e-12


def check_reference(results, reference=None):
    """Whether a run matched the reference numbers, number by number.

    Parameters
    ----------
    results : ReproduceResults or path
        The run, as :func:`write_reference` takes it.
    reference : str, path or dict, default=None
        The reference (see :func:`load_reference`); None is the one the
        package ships for the run's preset.

    Returns
    -------
    ReferenceCheck
        Its ``ok`` says whether every number matched, ``mismatches`` names
        those that did not, ``table()`` gives the table.

    Examples
    --------
    >>> from stsq_learn.experiments import check_reference, reproduce
    >>> run = reproduce(  # doctest: +SKIP
    ...     "tiny", only="convergence", progress=False)
    >>> check_reference(run).ok  # doctest: +SKIP
    True
    """
    preset, meta, bands, seeds = _read_run(results)
    ref = load_reference(preset if reference is None else reference)
    if ref["preset"] != preset:
        raise ValueError(
            f"the reference is of preset {ref['preset']!r} and the run of {preset!r}: "
            "check a run against the reference of its own size."
        )
    rows = []
    for name, numbers in ref["experiments"].items():
        if name not in bands:
            continue
        for number, entry in numbers.items():
            measured = (bands[name] or {}).get(number)
            value = None if measured is None else float(measured["median"])
            reference_value, tol = float(entry["median"]), float(entry["tolerance"])
            row = dict(experiment=name, number=number, reference=reference_value, tolerance=tol)
            rows.append(row | {"measured": value, "ok": _matches(value, reference_value, tol)})
    not_run = [name for name in ref["experiments"] if name not in bands]
    not_referenced = [
        f"{name}.{number}"
        for name, numbers in bands.items()
        for number in numbers or {}
        if number not in ref["experiments"].get(name, {})
    ]
    made = dict(ref.get("made", {}))
    differences = _differences(meta, seeds, made, [r["experiment"] for r in rows])
    return ReferenceCheck(preset, rows, not_run, not_referenced, made, differences)


def _differences(meta, seeds, made, compared):
    """How a run (its ``meta`` and ``seeds``) was made otherwise than a reference (``made``):
    the kind of device, and the seeds of each compared experiment."""
    out = []
    run_device, ref_device = (
        None if device is None else str(device).split(":")[0]
        for device in (meta.get("device"), made.get("device"))
    )
    if run_device and ref_device and run_device != ref_device:
        out.append(
            f"the run trained on {meta.get('device')}, the reference on {made.get('device')} "
            "(float arithmetic differs between devices, and so may a number near its tolerance)"
        )
    ref_seeds = made.get("seeds") or {}
    other = [
        f"{name} {list(seeds[name])} (reference {list(ref_seeds[name])})"
        for name in dict.fromkeys(compared)
        if seeds.get(name) is not None
        and ref_seeds.get(name) is not None
        and list(seeds[name]) != list(ref_seeds[name])
    ]
    if other:
        out.append(f"other seeds: {', '.join(other)}")
    return out


def command_line(argv=None):
    """``"stsq-learn "`` and the arguments ``argv`` (None: ``sys.argv[1:]``), for a
    reference's provenance; None when there are none (no ``argv``, an empty ``sys.argv``)."""
    if argv is None:
        if not sys.argv:
            return None
        argv = sys.argv[1:]
    return " ".join(["stsq-learn", *argv])
