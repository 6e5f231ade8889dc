"""The API page's lists of estimators and data, written from stsq_learn's registry.

``conf.py`` writes :func:`api_lists` to ``api_lists.rst`` beside it (an orphan
page, so that autosummary makes the stub pages of its entries), which
``api.rst`` includes: a registered task's estimators, generator and class are
on the page without an edit of it.
"""

from pathlib import Path

from stsq_learn import registry


def _block(names, indent="   "):
    return [".. autosummary::", f"{indent}:toctree: generated/", ""] + [
        f"{indent}{name}" for name in names
    ]


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


def _task_estimators():
    return {est for reg in registry.registrations() for est in reg.estimators}


def write(directory):
    """Write :func:`api_lists` to ``directory/api_lists.rst``; return the path.

    The file starts with ``:orphan:`` and a blank line (two lines ``api.rst``'s
    include skips).
    """
    path = Path(directory) / "api_lists.rst"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(":orphan:\n\n" + api_lists())
    return path
