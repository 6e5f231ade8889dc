"""The pages' lists written from stsq_learn's registry.

``conf.py`` writes :func:`api_lists` to ``api_lists.rst`` (the "Estimators"
and "Data" sections) and :func:`experiment_lists` to ``experiment_lists.rst``
(every registered experiment's function, settings and exports), beside it;
and for the reproduce page, :func:`experiments_run` (what ``reproduce``
runs) and :func:`reference_run` (the reference run of ``--full``: every
experiment's figure and numbers, from ``references/full.json`` and
``_static/reference_full/``) to ``user_guide/reproduce_*.rst``.
Both are left out of the documents Sphinx reads (``exclude_patterns``) and
included by ``api.rst``: each entry's page sits in the one toctree of the API
page, and a registered task's estimators, generator, class and experiments
are on the page without an edit of it. ``autosummary_generate`` names the
two files, so that autosummary writes their entries' pages.
"""

from pathlib import Path

from stsq_learn import registry

FILES = (
    "api_lists.rst",
    "experiment_lists.rst",
    "user_guide/reproduce_experiments.rst",
    "user_guide/reproduce_reference.rst",
)
"""The files :func:`write` writes beside ``conf.py``, relative to it."""


def _block(names, indent="   ", template=None):
    options = [f"{indent}:toctree: generated/"]
    if template:
        options.append(f"{indent}:template: {template}")
    return [".. autosummary::", *options, ""] + [f"{indent}{name}" for name in names]


def api_lists():
    """The reStructuredText of the "Estimators" and "Data" sections.

    Returns
    -------
    str
    """
    lines = ["Estimators", "==========", "", ".. currentmodule:: stsq_learn", ""]
    for reg in registry.registrations():
        if not reg.estimators:
            continue
        task = reg.task
        lines += [f"Made for the task ``{task.name}`` (:class:`{task.__name__}`):", ""]
        lines += [*_block([est.__name__ for est in reg.estimators]), ""]
    any_task = [est for est in registry.estimators() if est not in _task_estimators()]
    if any_task:
        lines += ["The models with the task as a parameter, for a task of one's own", ""]
        lines[-1:] = ["(:ref:`tasks`):", ""]
        lines += [*_block([est.__name__ for est in any_task]), ""]
    lines += ["Data", "====", ""]
    lines += [*_block(list(registry.generators())), ""]
    lines += [*_block([reg.task.__name__ for reg in registry.registrations()] + ["Task"]), ""]
    exports = [obj.__name__ for reg in registry.registrations() for obj in reg.exports]
    if exports:
        lines += ["Each task's other functions:", ""]
        lines += [*_block(exports), ""]
    return "\n".join(lines)


def experiment_lists():
    """The reStructuredText of every registered experiment's entries.

    One paragraph per experiment, in run order: its name (what ``--only``
    takes), its task, the module it lives in (a target of ``:mod:``), and an
    autosummary of its function, its settings class and its other exports.

    Returns
    -------
    str
    """
    from stsq_learn.experiments._registered import RECORDS

    tasks = {
        path: reg.task
        for reg in registry.registrations()
        for path in reg.experiments
        if isinstance(path, str)
    }
    lines = [".. currentmodule:: stsq_learn.experiments", ""]
    for record in RECORDS.values():
        module = record.function.__module__
        task = tasks.get(module)
        on = f", on the task ``{task.name}``" if task is not None else ""
        aliases = ", ".join(f"``{alias}``" for alias in record.aliases)
        also = f" (also ``--only`` {aliases})" if aliases else ""
        lines += [
            f".. module:: {module}",
            "   :no-index-entry:",
            "",
            ".. currentmodule:: stsq_learn.experiments",
            "",
            f"``{record.name}``{also}{on}: ``{module}``.",
            "",
        ]
        names = [record.function.__name__, record.settings.__name__]
        names += [obj.__name__ for obj in record.exports]
        lines += [*_block(names), ""]
    return "\n".join(lines)


def _summary_line(record):
    """The first line of an experiment's ``doc``: what it measures, in one sentence."""
    return record.doc.strip().splitlines()[0].strip()


def experiments_run():
    """The reStructuredText list of what ``reproduce`` runs: every registered experiment.

    Returns
    -------
    str
    """
    from stsq_learn.experiments._registered import RECORDS

    lines = []
    for record in RECORDS.values():
        aliases = ", ".join(f"``{alias}``" for alias in record.aliases)
        also = f" (alias {aliases})" if aliases else ""
        function = f"stsq_learn.experiments.{record.function.__name__}"
        lines += [f"* **{record.name}**{also}: {_summary_line(record)}", f"  (:func:`{function}`)."]
    return "\n".join(lines) + "\n"


def _number(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def reference_run(here):
    """The reference run of ``--full``: its provenance, then every experiment's figure and numbers.

    Parameters
    ----------
    here : path
        The docs folder (``_static/reference_full/<experiment>.png`` below it).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If a registered experiment has no section in the shipped ``full``
        reference or no figure: the page shows every experiment's.
    """
    from stsq_learn.experiments import load_reference
    from stsq_learn.experiments._registered import RECORDS

    reference = load_reference("full")
    made = reference["made"]
    machine = made.get("machine", {})
    lines = [
        f"Made by stsq-learn {made['stsq_learn']} on {made['date']}: ``{made['command']}``,",
        f"on {machine.get('cores', '?')} CPU cores ({machine.get('cpu_capability', '?')}),",
        f"torch {made.get('torch')}, {made.get('torch_threads')} torch thread per run,",
        f"{made.get('n_jobs')} worker processes: {made.get('wall_seconds', 0) / 60:.0f} minutes.",
        "",
    ]
    for record in RECORDS.values():
        numbers = reference["experiments"].get(record.name)
        figure = Path(here) / "_static" / "reference_full" / f"{record.name}.png"
        if numbers is None or not figure.is_file():
            raise ValueError(
                f"the reproduce page shows every experiment's full run: {record.name!r} has "
                f"{'no section in references/full.json' if numbers is None else 'no figure'}; "
                "run `stsq-learn reproduce --full --write-reference ...` (see CONTRIBUTING.md)."
            )
        seeds = made.get("seeds", {}).get(record.name, [])
        lines += [
            f".. _reference-full-{record.name}:",
            "",
            record.name,
            "-" * len(record.name),
            "",
            f"{_summary_line(record)} Seeds {', '.join(map(str, seeds))}; the figure at full",
            "size is a click away.",
            "",
            f".. figure:: /_static/reference_full/{record.name}.png",
            f"   :target: ../_static/reference_full/{record.name}.png",
            "   :width: 100%",
            f"   :alt: the figure of {record.name}'s full-size reference run",
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 60 40",
            "",
            "   * - headline number",
            "     - median [min, max]",
        ]
        for name, entry in numbers.items():
            band = _number(entry["median"])
            if entry.get("min") != entry.get("max"):
                band += f" [{_number(entry['min'])}, {_number(entry['max'])}]"
            lines += [f"   * - ``{name}``", f"     - {band}"]
        lines.append("")
    return "\n".join(lines)


def _task_estimators():
    return {est for reg in registry.registrations() for est in reg.estimators}


def write(directory):
    """Write every list of :data:`FILES` into ``directory`` (the docs folder).

    Returns
    -------
    list of Path
        The files written.
    """
    texts = (api_lists(), experiment_lists(), experiments_run(), reference_run(directory))
    paths = []
    for name, text in zip(FILES, texts):
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # Rewritten only when it changes, so that Sphinx rereads the pages only then.
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths
