"""The registry: one registration per task, and every list of the package derived from it.

A task enters the package with one call of :func:`register`: its task class,
the estimators made for it, its ``make_*`` generator, its experiments and any
other public function of its own. Every list the package keeps is read from
here, never written by hand:

- the package's exports (``stsq_learn.__all__``) and ``stsq_learn.datasets``;
- the task names estimators take (:data:`stsq_learn.tasks.TASKS`) and the
  CLI's ``fit --task`` choices and help;
- the estimator classes model files may hold (:mod:`stsq_learn.persistence`),
  the API page's lists and the common estimator tests;
- the experiments ``reproduce`` runs, in order, and ``--only``'s choices,
  aliases and help.

The estimators that take any task (:class:`~stsq_learn.AttentionRegressor`,
:class:`~stsq_learn.FCNRegressor`) are registered once, without a task.
A task of one's own registered here is everywhere a built-in one is.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .tasks import TASKS, register_task

__all__ = [
    "Registration",
    "estimators",
    "experiments",
    "generators",
    "register",
    "register_estimators",
    "registrations",
    "task_exports",
]


@dataclass(frozen=True)
class Registration:
    """What one task brings to the package.

    Attributes
    ----------
    task : type
        The :class:`~stsq_learn.Task` subclass.
    estimators : tuple of type
        Estimator classes made for the task (public, saved by name).
    make : callable or None
        Its ``make_*`` generator.
    experiments : tuple of str or object
        Its experiments, in the order ``reproduce`` runs them: the dotted
        path of a module holding a ``RECORD``, or an
        :class:`~stsq_learn.experiments._record.Experiment` itself.
    exports : tuple of callable
        Other public functions of the task (exported by their ``__name__``).
    """

    task: type
    estimators: tuple = ()
    make: object = None
    experiments: tuple = ()
    exports: tuple = ()

    def public(self):
        """Name to object of everything the registration exports from ``stsq_learn``."""
        objects = [self.task, *self.estimators, *self.exports]
        if self.make is not None:
            objects.append(self.make)
        return {obj.__name__: obj for obj in objects}


_REGISTRATIONS = {}  # task name -> Registration, in registration order
_ANY_TASK = []  # estimators that take any task


def register(task, *, estimators=(), make=None, experiments=(), exports=()):
    """Register a task and what it brings: the one line a task adds to the package.

    The task class goes to :data:`stsq_learn.tasks.TASKS` (checked by
    :func:`~stsq_learn.tasks.register_task`), and its estimators, generator
    and exports become attributes of ``stsq_learn`` listed in its
    ``__all__``.

    Parameters
    ----------
    task : type
        A :class:`~stsq_learn.Task` subclass with a name not registered yet.
    estimators : sequence of type, default=()
        Estimator classes made for the task.
    make : callable, default=None
        The task's ``make_*`` generator.
    experiments : sequence of str or Experiment, default=()
        Its experiments, in run order (see :class:`Registration`).
    exports : sequence of callable, default=()
        Other public functions of the task.

    Returns
    -------
    registration : Registration
        What was registered.

    Raises
    ------
    TypeError, ValueError
        As :func:`~stsq_learn.tasks.register_task`; or if an estimator is not
        a class, or a public name is already another object's.
    """
    for est in estimators:
        if not isinstance(est, type):
            raise TypeError(f"estimators must be classes, got {est!r} for task {task!r}.")
    registration = Registration(task, tuple(estimators), make, tuple(experiments), tuple(exports))
    package = sys.modules.get(__package__)
    for name, obj in registration.public().items():
        known = getattr(package, name, obj)
        if known is not obj:
            raise ValueError(f"the public name {name!r} is already {known!r}; rename {obj!r}.")
    register_task(task)
    _REGISTRATIONS[task.name] = registration
    _publish(registration.public())
    return registration


def register_estimators(*classes):
    """Register estimators that take any task (exported, saved, tested like the others).

    Parameters
    ----------
    *classes : type
        The estimator classes.
    """
    for cls in classes:
        if cls not in _ANY_TASK:
            _ANY_TASK.append(cls)
    _publish({cls.__name__: cls for cls in classes})


def _publish(objects):
    """Make ``objects`` attributes of the package and names of its ``__all__``."""
    package = sys.modules.get(__package__)
    if not hasattr(package, "__all__"):  # the package is importing: it reads task_exports()
        return
    for name, obj in objects.items():
        setattr(package, name, obj)
        if name not in package.__all__:
            package.__all__.append(name)


def registrations():
    """Every registration, in registration order.

    Returns
    -------
    list of Registration
    """
    return [_REGISTRATIONS[name] for name in TASKS if name in _REGISTRATIONS]


def estimators():
    """Every registered estimator class: each task's, then those that take any task.

    Returns
    -------
    list of type
    """
    return [est for reg in registrations() for est in reg.estimators] + list(_ANY_TASK)


def generators():
    """The ``make_*`` generators of the registered tasks, by name.

    Returns
    -------
    dict of str to callable
    """
    return {reg.make.__name__: reg.make for reg in registrations() if reg.make is not None}


def experiments():
    """The registered experiments in run order, each its module path or record.

    Returns
    -------
    list of str or Experiment
    """
    return [exp for reg in registrations() for exp in reg.experiments]


def task_exports():
    """Name to object of everything the registrations export from ``stsq_learn``.

    Returns
    -------
    dict of str to object
    """
    out = {}
    for reg in registrations():
        out.update(reg.public())
    out.update({cls.__name__: cls for cls in _ANY_TASK})
    return out


# -- the built-in tasks: one registration each ------------------------------------------
def _register_builtins():
    from .averaging import FCNAverager, SparseTokenAverager
    from .estimators import FCNSelector, SparseTokenSelector
    from .regressors import AttentionRegressor, FCNRegressor
    from .retrieval import FCNRetriever, SparseTokenRetriever
    from .single_location import ErfAttentionRegressor, SoftmaxAttentionRegressor
    from .tasks import averaging, retrieval, selection, single_location

    records = "stsq_learn.experiments._records."
    register(
        selection.SparseTokenSelectionTask,
        estimators=(SparseTokenSelector, FCNSelector),
        make=selection.make_sparse_token_selection,
        experiments=tuple(
            records + name
            for name in ("convergence", "length_generalization", "separation", "encodings")
        ),
        exports=(selection.shift_length,),
    )
    register(
        averaging.SparseAveragingTask,
        estimators=(SparseTokenAverager, FCNAverager),
        make=averaging.make_sparse_averaging,
        experiments=(records + "qsa",),
        exports=(averaging.shift_averaging, averaging.subset_means),
    )
    register(
        retrieval.SparseRetrievalTask,
        estimators=(SparseTokenRetriever, FCNRetriever),
        make=retrieval.make_sparse_retrieval,
        experiments=(records + "retrieval",),
    )
    register(
        single_location.SingleLocationTask,
        estimators=(ErfAttentionRegressor, SoftmaxAttentionRegressor),
        make=single_location.make_single_location,
        experiments=(records + "single_location",),
    )
    register_estimators(AttentionRegressor, FCNRegressor)


_register_builtins()
