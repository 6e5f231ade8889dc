"""A task checked against its own declared contract, before any model trains on it.

The estimators, :func:`~stsq_learn.tasks.register_task` and the registry call
these checks, so that a malformed task of one's own is refused by name
(its class, the member at fault, the offending shape or value) instead of
failing deep inside torch:

- :func:`check_task_class`: the class defines every required member of the
  protocol (the abstract ones of :class:`~stsq_learn.Task`), has a name, and
  its ``structure`` is a query structure or None;
- :func:`check_task`: an instance draws two rows from its own law whose
  shapes agree with what it declares (3-D ``X`` or 2-D integer token ids, a marker channel when a
  query structure reads one, ``y`` of :meth:`~stsq_learn.Task.output_shape`),
  its own ``from_data`` and ``check_rows`` accept them, and
  ``trivial_mse`` is a finite number above 0.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_task", "check_task_class"]

_STRUCTURE_MEMBERS = ("attention", "read", "elements_per_row")
_CHECKED = {}  # task instance -> None (the instances already checked)


def check_task_class(task_class):
    """Raise unless ``task_class`` defines the protocol's required members.

    Parameters
    ----------
    task_class : type
        A subclass of :class:`~stsq_learn.Task`.

    Returns
    -------
    task_class : type
        The class itself.

    Raises
    ------
    TypeError
        Naming the class and each required member it leaves undefined, or
        a ``structure`` that is not a query structure.
    """
    missing = sorted(getattr(task_class, "__abstractmethods__", ()))
    if missing:
        raise TypeError(
            f"{task_class.__name__} does not define {', '.join(missing)}: every task defines "
            "the law (_sample), the contract (from_data, check_rows) and the length shift "
            "(shift); see the protocol of stsq_learn.Task."
        )
    structure = task_class.structure
    if structure is not None and not (
        isinstance(structure, type) and all(hasattr(structure, m) for m in _STRUCTURE_MEMBERS)
    ):
        raise TypeError(
            f"{task_class.__name__}.structure must be a query structure of "
            "stsq_learn.queries (Selection, Subsets, Slots or a subclass) or None (a task "
            f"selected by content), got {structure!r}."
        )
    return task_class


def check_task(task):
    """Raise unless ``task`` samples rows that agree with its own contract.

    Draws two rows with ``random_state=0`` (the training draws are not
    touched) and checks them; an instance that passed is not checked again.

    Parameters
    ----------
    task : Task
        The task an estimator is about to train on.

    Returns
    -------
    task : Task
        The task itself.

    Raises
    ------
    ValueError, TypeError
        Naming the task's class, the method at fault and the offending
        shape or value.
    """
    try:
        if task in _CHECKED:
            return task
    except TypeError:  # an unhashable field: check every time
        pass
    cls = type(task)
    name = cls.__name__
    check_task_class(cls)
    trivial = task.trivial_mse
    if isinstance(trivial, (bool, np.bool_)) or not isinstance(trivial, numbers.Real):
        raise TypeError(f"{name}.trivial_mse must be a real number, got {trivial!r}.")
    if not (np.isfinite(trivial) and trivial > 0):
        raise ValueError(
            f"{name}.trivial_mse must be a finite number above 0 (the training loss of "
            f"predicting 0, which scales the losses and the step sizes), got {trivial!r}."
        )
    drawn = task.sample(2, random_state=0)
    if not (isinstance(drawn, tuple) and len(drawn) == 2):
        raise TypeError(f"{name}._sample must return a pair (X, y), got {type(drawn).__name__}.")
    X, y = (np.asarray(a) for a in drawn)
    for label, arr in (("X", X), ("y", y)):
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError(f"{name}._sample returned {label} of dtype {arr.dtype}; need reals.")
    lo, hi = task.length_range
    token_ids = X.ndim == 2 and np.issubdtype(X.dtype, np.integer)  # rows of integer tokens
    if (X.ndim != 3 and not token_ids) or len(X) != 2 or not lo <= X.shape[1] <= hi:
        raise ValueError(
            f"{name}._sample must return X of shape (n_samples, seq_len, n_channels), or "
            f"(n_samples, seq_len) of integer token ids; for 2 rows of seq_len="
            f"{task.seq_len!r} it returned shape {X.shape}."
        )
    if cls.structure is not None and (token_ids or X.shape[2] <= task.n_features):
        raise ValueError(
            f"{name}._sample returned X with {X.shape[2]} channels for n_features="
            f"{task.n_features}: the query structure {cls.structure.__name__} reads marker "
            "channels after the token features, and there are none."
        )
    expected = tuple(task.output_shape(2, X.shape[1]))
    if cls.targets_1d:
        expected = (2,)
    if y.shape != expected:
        raise ValueError(
            f"{name}._sample returned y of shape {y.shape}; {name}.output_shape says "
            f"{expected} for 2 rows of length {X.shape[1]}."
        )
    checks = getattr(cls.structure, "check_marks", None)
    problem = checks(X[..., task.n_features :]) if checks is not None else None
    if problem:
        raise ValueError(f"{name}._sample returned rows whose marker channels {problem}.")
    for method, call in (
        ("from_data", lambda: cls.from_data(X, y)),
        ("check_rows", lambda: task.check_rows(X)),
    ):
        try:
            out = call()
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{name}.{method} refuses two rows of the task's own law ({name}._sample): {exc}"
            ) from exc
        if method == "from_data" and not (isinstance(out, tuple) and len(out) == 3):
            raise TypeError(f"{name}.from_data must return (task, X, y), got {type(out).__name__}.")
    try:
        _CHECKED[task] = None
    except TypeError:
        pass
    return task
