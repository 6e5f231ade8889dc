"""The API page's lists written from stsq_learn's registry.

``conf.py`` writes :func:`api_lists` to ``api_lists.rst`` (the "Estimators"
and "Data" sections) and :func:`experiment_lists` to ``experiment_lists.rst``
(every registered experiment's function, settings and exports), beside it.
Both are left out of the documents Sphinx reads (``exclude_patterns``) and
included by ``api.rst``: each entry's page sits in the one toctree of the API
page, and a registered task's estimators, generator, class and experiments
are on the page without an edit of it. ``autosummary_generate`` names the
two files, so that autosummary writes their entries' pages.
"""

from pathlib import Path

from stsq_learn import registry

FILES = ("api_lists.rst", "experiment_lists.rst")
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


def _task_estimators():
    return {est for reg in registry.registrations() for est in reg.estimators}


def write(directory):
    """Write :func:`api_lists` and :func:`experiment_lists` into ``directory``.

    Returns
    -------
    list of Path
        The files written, as :data:`FILES` names them.
    """
    paths = []
    for name, text in zip(FILES, (api_lists(), experiment_lists())):
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # Rewritten only when it changes, so that Sphinx rereads api.rst only then.
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths
