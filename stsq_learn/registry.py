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
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import nn
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
    """What one task brings to the package (what :func:`register` records).

    Parameters
    ----------
    task : type
        The :class:`~stsq_learn.Task` subclass.
    estimators : tuple of type, default=()
        Estimator classes made for the task (public, saved by name).
    make : callable or None, default=None
        Its ``make_*`` generator.
    experiments : tuple of str or object, default=()
        Its experiments, in the order ``reproduce`` runs them: the dotted
        path of a module holding a ``RECORD``, or an
        :class:`~stsq_learn.experiments._record.Experiment` itself.
    exports : tuple of callable, default=()
        Other public functions of the task (exported by their ``__name__``).
    modules : tuple of type, default=()
        Torch modules of the task, exported by :mod:`stsq_learn.nn`.
    moved : dict of str to module, default={}
        Module paths of an earlier release (relative to the package) that
        now live in the task's home: ``import stsq_learn.<path>`` keeps
        working and gives the module.
    """

    task: type
    estimators: tuple = ()
    make: object = None
    experiments: tuple = ()
    exports: tuple = ()
    modules: tuple = ()
    moved: dict = field(default_factory=dict)

    def public(self):
        """Name to object of everything the registration exports from ``stsq_learn``.

        Returns
        -------
        dict of str to object
            The task class, its estimators, its generator and its exports.
        """
        objects = [self.task, *self.estimators, *self.exports]
        if self.make is not None:
            objects.append(self.make)
        return {obj.__name__: obj for obj in objects}


class View(Mapping):
    """A read-only mapping built from the registry at every access: a list that stays live.

    Persistence's classes and the experiments' records are views, so that a
    task registered after import is in them. ``build()`` returns the mapping
    as the registry has it now (it may import lazily); ``name`` (what the
    view holds) is for its ``repr``.
    """

    def __init__(self, build, name):
        self._build, self._name = build, name

    def __getitem__(self, key):
        return self._build()[key]

    def __iter__(self):
        return iter(self._build())

    def __len__(self):
        return len(self._build())

    def __repr__(self):
        return f"{self._name}({list(self)})"


_REGISTRATIONS = {}  # task name -> Registration, in registration order
_ANY_TASK = []  # estimators that take any task


def register(task, *, estimators=(), make=None, experiments=(), exports=(), modules=(), moved=None):
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
    modules : sequence of type, default=()
        Torch modules of the task, exported by :mod:`stsq_learn.nn`.
    moved : dict of str to module, default=None
        Earlier module paths (relative to the package) of modules that now
        live in the task's home; importing them gives the module.

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
    registration = Registration(
        task,
        tuple(estimators),
        make,
        tuple(experiments),
        tuple(exports),
        tuple(modules),
        dict(moved or {}),
    )
    package = sys.modules.get(__package__)
    for name, obj in registration.public().items():
        known = getattr(package, name, obj)
        if known is not obj:
            raise ValueError(f"the public name {name!r} is already {known!r}; rename {obj!r}.")
    register_task(task)
    _REGISTRATIONS[task.name] = registration
    _publish(registration.public())
    _publish({m.__name__: m for m in registration.modules}, nn)
    for path, module in registration.moved.items():
        sys.modules[f"{__package__}.{path}"] = module
        if package is not None:
            setattr(package, path, module)
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


def _publish(objects, package=None):
    """Make ``objects`` attributes of ``package`` (None: the top one), named in its ``__all__``."""
    package = sys.modules.get(__package__) if package is None else package
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
        One per registered task.
    """
    return [_REGISTRATIONS[name] for name in TASKS if name in _REGISTRATIONS]


def estimators():
    """Every registered estimator class: each task's, then those that take any task.

    Returns
    -------
    list of type
        The estimator classes, each once.
    """
    return [est for reg in registrations() for est in reg.estimators] + list(_ANY_TASK)


def generators():
    """The ``make_*`` generators of the registered tasks, by name.

    Returns
    -------
    dict of str to callable
        Each generator by its ``__name__``.
    """
    return {reg.make.__name__: reg.make for reg in registrations() if reg.make is not None}


def experiments():
    """The registered experiments in run order, each its module path or record.

    Returns
    -------
    list of str or Experiment
        The module path of each record, or the record.
    """
    return [exp for reg in registrations() for exp in reg.experiments]


def task_exports():
    """Name to object of everything the registrations export from ``stsq_learn``.

    Returns
    -------
    dict of str to object
        Each public name and its object.
    """
    out = {}
    for reg in registrations():
        out.update(reg.public())
    out.update({cls.__name__: cls for cls in _ANY_TASK})
    return out


# -- the built-in tasks: one registration each ------------------------------------------
def _register_builtins():
    from .regressors import AttentionRegressor, FCNRegressor
    from .tasks.averaging import estimators as qsa
    from .tasks.averaging import modules
    from .tasks.averaging import task as qsa_law
    from .tasks.classification import baselines as stc_baselines
    from .tasks.classification import estimators as stc
    from .tasks.classification import modules as stc_modules
    from .tasks.classification import task as stc_law
    from .tasks.classification import theory as stc_theory
    from .tasks.copying import estimators as copy
    from .tasks.copying import modules as copy_modules
    from .tasks.copying import task as copy_law
    from .tasks.copying import theory as copy_theory
    from .tasks.in_context import baselines as icl_baselines
    from .tasks.in_context import estimators as icl
    from .tasks.in_context import modules as icl_modules
    from .tasks.in_context import task as icl_law
    from .tasks.in_context import theory as icl_theory
    from .tasks.retrieval import estimators as ret
    from .tasks.retrieval import task as ret_law
    from .tasks.selection import estimators as sts
    from .tasks.selection import task as sts_law
    from .tasks.single_location import estimators as sl
    from .tasks.single_location import task as sl_law
    from .tasks.single_location import theory

    register(
        sts_law.SparseTokenSelectionTask,
        estimators=(sts.SparseTokenSelector, sts.FCNSelector),
        make=sts_law.make_sparse_token_selection,
        experiments=(
            "stsq_learn.tasks.selection.convergence",
            "stsq_learn.tasks.selection.length",
            "stsq_learn.tasks.selection.separation",
            "stsq_learn.tasks.selection.encodings",
        ),
        exports=(sts_law.shift_length,),
        moved={"estimators": sts},
    )
    register(
        qsa_law.SparseAveragingTask,
        estimators=(qsa.SparseTokenAverager, qsa.FCNAverager),
        make=qsa_law.make_sparse_averaging,
        experiments=("stsq_learn.tasks.averaging.experiment",),
        exports=(qsa_law.shift_averaging, qsa_law.subset_means),
        modules=(modules.AttentionAverager, modules.FullyConnectedAverager),
        moved={"averaging": qsa},
    )
    register(
        ret_law.SparseRetrievalTask,
        estimators=(ret.SparseTokenRetriever, ret.FCNRetriever),
        make=ret_law.make_sparse_retrieval,
        experiments=("stsq_learn.tasks.retrieval.experiment",),
        moved={"retrieval": ret},
    )
    register(
        sl_law.SingleLocationTask,
        estimators=(sl.ErfAttentionRegressor, sl.SoftmaxAttentionRegressor),
        make=sl_law.make_single_location,
        experiments=("stsq_learn.tasks.single_location.experiment",),
        moved={"single_location": sl, "single_location_theory": theory},
    )
    register(
        stc_law.SparseTokenClassificationTask,
        estimators=(stc.SparseTokenClassifier,),
        make=stc_law.make_sparse_token_classification,
        experiments=("stsq_learn.tasks.classification.experiment",),
        exports=(
            stc_baselines.FlattenTokens,
            stc_baselines.MeanPoolTokens,
            stc_baselines.make_flat_logistic,
            stc_baselines.make_pooled_logistic,
            *stc_theory.PUBLIC,
        ),
        modules=(stc_modules.AttentionClassifier,),
    )
    register(
        icl_law.InContextRegressionTask,
        estimators=(
            icl.LinearAttentionRegressor,
            icl_baselines.PromptRidge,
            icl_baselines.PromptGradientStep,
        ),
        make=icl_law.make_in_context_regression,
        experiments=("stsq_learn.tasks.in_context.experiment",),
        exports=icl_theory.PUBLIC,
        modules=(icl_modules.LinearSelfAttention,),
    )
    register(
        copy_law.CopyingTask,
        estimators=(
            copy.TransformerCopier,
            copy.LSTMCopier,
            copy_theory.NGramCopier,
            copy_theory.FixedStateCopier,
        ),
        make=copy_law.make_copying,
        experiments=("stsq_learn.tasks.copying.experiment",),
        exports=copy_theory.PUBLIC,
        modules=(copy_modules.CausalTransformer, copy_modules.RecurrentCopier),
    )
    register_estimators(AttentionRegressor, FCNRegressor)


_register_builtins()
