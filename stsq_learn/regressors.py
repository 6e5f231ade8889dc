"""The two model cores on any task, taken by name or class: for tasks of one's own.

:class:`AttentionRegressor` and :class:`FCNRegressor` are the estimators of
:mod:`stsq_learn.estimators` with the task as a hyperparameter, as skorch
takes a module by name or class: ``AttentionRegressor(task="averaging")``
is :class:`~stsq_learn.SparseTokenAverager`, and
``AttentionRegressor(task=MyTask)`` trains on a :class:`~stsq_learn.Task`
subclass of one's own (register it with
:func:`~stsq_learn.tasks.register_task` to save and load its models).
"""

from __future__ import annotations

from ._docstrings import ATTRIBUTES, Substitution, section
from .engine.cores import _AttentionCore, _FCNCore
from .tasks import Task
from .tasks.selection.estimators import FCNSelector, SparseTokenSelector

__all__ = ["AttentionRegressor", "FCNRegressor"]

_TASK = """\
task : str or Task subclass, default="selection"
    The task: a name of :data:`stsq_learn.tasks.TASKS` (``"selection"``,
    ``"averaging"``, ``"retrieval"``) or a :class:`~stsq_learn.Task`
    subclass (a task object stands for its class), which gives the data contract of :meth:`fit` and
    :meth:`predict`, the law :meth:`fit_online` draws from (an instance
    of it), and how the model reads a row. Resolved in :meth:`fit`."""

_TASK_ATTRIBUTES = """\
task_ : Task
    The data contract the model was fitted under, at its training length."""


def _task_parameter(constraints):
    return {**constraints, "task": [str, type, Task]}


@Substitution(
    task=_TASK,
    parameters=section(SparseTokenSelector, "Parameters"),
    attributes=ATTRIBUTES,
    task_attributes=_TASK_ATTRIBUTES,
)
class AttentionRegressor(_AttentionCore):
    """One-layer softmax attention with positional encodings, on any task.

    The model of :class:`~stsq_learn.SparseTokenSelector` (one or more
    heads, every encoding family, step sizes that follow the width) asked
    the queries of ``task``: its data contract, query structure and outputs.

    Parameters
    ----------
    {task}
    {parameters}

    Attributes
    ----------
    {task_attributes}
    {attributes}
    key_query_ : ndarray
        The learned W at one head, one per head with several.
    readout_ : ndarray or None
        The learned linear output map of the heads, if any.

    See Also
    --------
    SparseTokenSelector, SparseTokenAverager, SparseTokenRetriever :
        This model with the task fixed.
    FCNRegressor : The fully-connected baseline on any task.

    Examples
    --------
    >>> from stsq_learn import AttentionRegressor, make_sparse_averaging
    >>> X, y = make_sparse_averaging(300, seq_len=8, n_features=2,
    ...                              n_selected=2, random_state=0)
    >>> model = AttentionRegressor(task="averaging", width=16, random_state=0)
    >>> model = model.fit(X, y)
    >>> model.task_
    SparseAveragingTask(seq_len=8, n_features=2, n_selected=2)
    """

    _parameter_constraints: dict = _task_parameter(_AttentionCore._parameter_constraints)
    _first_format_version = 4  # model files hold it since format 4 (0.5)

    def __init__(
        self,
        task="selection",
        width=64,
        *,
        n_heads=1,
        length_scale=None,
        positional_encoding="stochastic",
        max_positions=None,
        pe_sampling="marginal",
        n_pe_samples=1,
        n_pe_samples_fit=1,
        learn_token_block=True,
        solver="auto",
        learning_rate_init="auto",
        token_block_rate="auto",
        learning_rate="cooldown",
        power_t=0.5,
        batch_size="auto",
        max_iter="auto",
        tol=1e-4,
        n_iter_no_change=None,
        alpha=0.0,
        momentum=0.0,
        dtype="float32",
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
        on_divergence="raise",
        callbacks=None,
    ):
        self.task = task
        super().__init__(
            width,
            n_heads=n_heads,
            length_scale=length_scale,
            positional_encoding=positional_encoding,
            max_positions=max_positions,
            pe_sampling=pe_sampling,
            n_pe_samples=n_pe_samples,
            n_pe_samples_fit=n_pe_samples_fit,
            learn_token_block=learn_token_block,
            solver=solver,
            learning_rate_init=learning_rate_init,
            token_block_rate=token_block_rate,
            learning_rate=learning_rate,
            power_t=power_t,
            batch_size=batch_size,
            max_iter=max_iter,
            tol=tol,
            n_iter_no_change=n_iter_no_change,
            alpha=alpha,
            momentum=momentum,
            dtype=dtype,
            device=device,
            random_state=random_state,
            verbose=verbose,
            warm_start=warm_start,
            on_divergence=on_divergence,
            callbacks=callbacks,
        )

    def _validate_params(self):
        super()._validate_params()
        self._task_class()  # a bad task name or object fails with the other parameters


@Substitution(
    task=_TASK,
    parameters=section(FCNSelector, "Parameters"),
    attributes=ATTRIBUTES,
    task_attributes=_TASK_ATTRIBUTES,
)
class FCNRegressor(_FCNCore):
    """The fully-connected baseline on any task: its flat row through ReLU layers.

    Parameters
    ----------
    {task}
    {parameters}

    Attributes
    ----------
    {task_attributes}
    {attributes}

    See Also
    --------
    FCNSelector, FCNAverager, FCNRetriever : This model with the task fixed.
    AttentionRegressor : The attention model on any task.

    Examples
    --------
    >>> from stsq_learn import FCNRegressor, make_sparse_retrieval
    >>> X, y = make_sparse_retrieval(300, seq_len=8, n_features=2,
    ...                              n_selected=2, random_state=0)
    >>> FCNRegressor(task="retrieval", width=32, max_iter=5,
    ...              random_state=0).fit(X, y).predict(X[:2]).shape
    (2, 4)
    """

    _parameter_constraints: dict = _task_parameter(_FCNCore._parameter_constraints)
    _first_format_version = 4  # model files hold it since format 4 (0.5)

    def __init__(
        self,
        task="selection",
        width=256,
        *,
        extra_hidden_layers=(),
        solver="adam",
        learning_rate_init="auto",
        learning_rate="auto",
        power_t=0.5,
        batch_size="auto",
        max_iter=200,
        tol=1e-4,
        n_iter_no_change=10,
        alpha=0.0,
        momentum=0.0,
        dtype="float32",
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
        on_divergence="raise",
        callbacks=None,
    ):
        self.task = task
        super().__init__(
            width,
            extra_hidden_layers=extra_hidden_layers,
            solver=solver,
            learning_rate_init=learning_rate_init,
            learning_rate=learning_rate,
            power_t=power_t,
            batch_size=batch_size,
            max_iter=max_iter,
            tol=tol,
            n_iter_no_change=n_iter_no_change,
            alpha=alpha,
            momentum=momentum,
            dtype=dtype,
            device=device,
            random_state=random_state,
            verbose=verbose,
            warm_start=warm_start,
            on_divergence=on_divergence,
            callbacks=callbacks,
        )

    def _validate_params(self):
        super()._validate_params()
        self._task_class()
