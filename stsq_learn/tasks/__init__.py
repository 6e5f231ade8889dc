"""Tasks as objects: one class per task of the provable-attention family, and their registry.

Each task owns its law (a generator), its data contract, its query structure,
its length shift and what it adds to a fitted model (:class:`Task` lists the
protocol). The registry below names every task, one line each; the
estimators take a task by name or by class, and model files name their task.
A task of one's own is a :class:`Task` subclass passed to
:func:`register_task`.
"""

from __future__ import annotations

from .averaging.task import (
    SparseAveragingTask,
    make_sparse_averaging,
    shift_averaging,
    subset_means,
)
from .checks import check_task_class
from .retrieval.task import SparseRetrievalTask, make_sparse_retrieval
from .selection.task import SparseTokenSelectionTask, make_sparse_token_selection, shift_length
from .single_location.task import SingleLocationTask, make_single_location
from .task import Task

__all__ = [
    "TASKS",
    "SingleLocationTask",
    "SparseAveragingTask",
    "SparseRetrievalTask",
    "SparseTokenSelectionTask",
    "Task",
    "get_task",
    "make_single_location",
    "make_sparse_averaging",
    "make_sparse_retrieval",
    "make_sparse_token_selection",
    "register_task",
    "shift_averaging",
    "shift_length",
    "subset_means",
]

TASKS = {}
"""Task name to its class: the tasks estimators take by name and model files may name.

Filled by :func:`register_task`: for the built-in tasks, by their
registrations in :mod:`stsq_learn.registry`."""


def register_task(task_class):
    """Add a task class to the registry under its ``name`` (usable as a class decorator).

    Registered, a task is taken by name by the estimators' ``task``
    parameter, and model files of estimators fitted on it load (the class
    must be registered again, by importing the module that defines it, in
    the session that loads them).

    Parameters
    ----------
    task_class : type
        A subclass of :class:`Task` with a string ``name`` not already
        registered to another class.

    Returns
    -------
    task_class : type
        The class itself.

    Raises
    ------
    TypeError
        If ``task_class`` is not a :class:`Task` subclass, has no string
        name, leaves a required member of the protocol undefined (each is
        named) or has a ``structure`` that is not a query structure.
    ValueError
        If its name is taken by another class.
    """
    if not (isinstance(task_class, type) and issubclass(task_class, Task)):
        raise TypeError(f"register_task takes a subclass of Task, got {task_class!r}.")
    if not isinstance(task_class.name, str) or not task_class.name:
        raise TypeError(
            f"{task_class.__name__}.name must be a non-empty string, got {task_class.name!r}."
        )
    check_task_class(task_class)
    known = TASKS.get(task_class.name)
    if known is not None and known is not task_class:
        raise ValueError(
            f"the task name {task_class.name!r} is already registered to {known.__module__}."
            f"{known.__qualname__}; give {task_class.__name__} another name."
        )
    TASKS[task_class.name] = task_class
    return task_class


def get_task(task):
    """The task class of ``task``: a registered name, a :class:`Task` subclass, or an instance.

    Parameters
    ----------
    task : str, type or Task
        A name of :data:`TASKS`, a task class (registered or not), or a task
        object (which stands for its class).

    Returns
    -------
    type
        The :class:`Task` subclass.

    Raises
    ------
    ValueError
        If ``task`` is a name that is not registered.
    TypeError
        If it is neither a name nor a task class or object.

    Examples
    --------
    >>> from stsq_learn.tasks import get_task
    >>> get_task("averaging").__name__
    'SparseAveragingTask'
    """
    if isinstance(task, str):
        try:
            return TASKS[task]
        except KeyError:
            raise ValueError(
                f"task={task!r} is not a registered task; choose one of {sorted(TASKS)} or "
                "register your own with stsq_learn.tasks.register_task."
            ) from None
    if isinstance(task, Task):
        return type(task)
    if isinstance(task, type) and issubclass(task, Task):
        return task
    raise TypeError(
        f"task must be a task name, a Task subclass or a Task object, got {task!r} of type "
        f"{type(task).__name__}."
    )
