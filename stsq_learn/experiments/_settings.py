"""Typed settings of an experiment (:class:`Settings`) and the constraints of grids and
per-model values (:class:`SequenceOf`, :class:`MappingOf`), checked when an instance is made."""

from __future__ import annotations

import dataclasses
import itertools
import numbers
from collections.abc import Mapping

import numpy as np
from sklearn.utils._param_validation import (
    Interval,
    Options,
    StrOptions,
    make_constraint,
    validate_parameter_constraints,
)

from .._docstrings import inherit_docstrings
from ..studies.table import _plain

__all__ = ["Interval", "MappingOf", "SequenceOf", "Settings", "StrOptions"]


class SequenceOf(Options):
    """A constraint: a list or tuple whose every item meets one of ``items``.

    (An ``Options`` by descent only, so that ``validate_parameter_constraints`` takes it.)

    Parameters
    ----------
    *items : constraint
        The constraints an item may meet (as in ``_parameter_constraints``).
    min_len : int, default=1
        The fewest items.
    increasing : bool, default=False
        Whether the items must increase strictly.
    """

    def __init__(self, *items, min_len=1, increasing=False):
        self.hidden = False
        self.items = [make_constraint(c) for c in items]
        self.min_len = min_len
        self.increasing = increasing

    def is_satisfied_by(self, val):
        """Whether the value ``val`` meets the constraint.

        Parameters
        ----------
        val : object
            The value of a setting.

        Returns
        -------
        bool
            True where it does.
        """
        if not isinstance(val, (list, tuple)) or len(val) < self.min_len:
            return False
        if not all(any(c.is_satisfied_by(v) for c in self.items) for v in val):
            return False
        return not self.increasing or all(a < b for a, b in itertools.pairwise(val))

    def __str__(self):
        items = " or ".join(str(c) for c in self.items)
        order = ", strictly increasing" if self.increasing else ""
        return f"a list or tuple of at least {self.min_len} items, each {items}{order}"


@inherit_docstrings(SequenceOf)
class MappingOf(Options):
    """A constraint: a dict whose keys are among ``keys`` and values meet one of ``values``.

    Parameters
    ----------
    keys : set of str or None
        The keys allowed (None: any str).
    *values : constraint
        The constraints a value may meet.
    """

    def __init__(self, keys, *values):
        self.hidden = False
        self.keys = None if keys is None else set(keys)
        self.values = [make_constraint(c) for c in values]

    def is_satisfied_by(self, val):
        if not isinstance(val, Mapping):
            return False
        for key, value in val.items():
            if not isinstance(key, str) or (self.keys is not None and key not in self.keys):
                return False
            if not any(c.is_satisfied_by(value) for c in self.values):
                return False
        return True

    def __str__(self):
        keys = "str" if self.keys is None else " or ".join(map(repr, sorted(self.keys)))
        values = " or ".join(str(c) for c in self.values)
        return f"a dict of {keys} to {values}"


COUNT = Interval(numbers.Integral, 1, None, closed="left")
"""The constraint of a count: an int of at least 1."""
POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
"""The constraint of a positive real (a step size, a variance, a scale)."""
COUNTS = [COUNT]
"""The constraints of a count setting."""
STEPS = [COUNT, StrOptions({"auto"})]
"""The constraints of a number of online steps: a count or ``"auto"`` (the estimator's plan)."""


def positive_ints(*, min_len=1, increasing=False, low=1):
    """The constraint of a grid of ints of at least ``low``: ``SequenceOf(Interval(...))``."""
    return SequenceOf(
        Interval(numbers.Integral, low, None, closed="left"),
        min_len=min_len,
        increasing=increasing,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings(Mapping):
    """Base of an experiment's settings: a frozen, keyword-only dataclass read like a mapping.

    A subclass declares the experiment's settings as typed fields with
    their defaults, and a constraint for every one of them in
    ``_parameter_constraints``; a subclass without a constraint for a field
    is refused when it is defined. As a mapping it holds every field, so
    ``dict(settings)`` is the whole configuration; :meth:`replace` gives a
    changed copy, :meth:`resolve` reads a function's arguments into an
    instance, :meth:`to_json` the JSON of it. Lists are kept as tuples.

    Examples
    --------
    >>> from stsq_learn.experiments import InContextSettings
    >>> preset = InContextSettings(n_steps=30)
    >>> preset.n_steps, preset["n_features"]
    (30, 5)
    >>> preset.replace(n_steps=60).n_steps
    60
    >>> try:
    ...     InContextSettings(n_steps=0)
    ... except ValueError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    The 'n_steps' parameter of InContextSettings must be an int in the range ...
    """

    _parameter_constraints = {}  # setting name to its constraints (not a field)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)
        missing = [f for f in cls.__dataclass_fields__ if f not in cls._parameter_constraints]
        if missing:
            raise TypeError(
                f"{cls.__name__} declares no constraint for the settings {missing}: every "
                "setting has one in _parameter_constraints."
            )

    def __post_init__(self):
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        validate_parameter_constraints(
            self._parameter_constraints, dict(self), caller_name=type(self).__name__
        )
        self._validate()

    def _validate(self):
        """Checks between settings, after each one's constraint (raise ``ValueError``)."""

    def __getitem__(self, key):
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self.__dataclass_fields__)

    def __len__(self):
        return len(self.__dataclass_fields__)

    def __eq__(self, other):
        if isinstance(other, Settings):
            return type(self) is type(other) and dict(self) == dict(other)
        return Mapping.__eq__(self, other)

    __hash__ = None  # a mapping of (possibly unhashable) values

    @classmethod
    def field_names(cls):
        """The settings' names, in declaration order.

        Returns
        -------
        tuple of str
        """
        return tuple(cls.__dataclass_fields__)

    def replace(self, **changes):
        """A copy with ``changes`` applied, checked as a new instance is.

        Parameters
        ----------
        **changes
            Setting name to its new value.

        Returns
        -------
        Settings
            A new instance of this class.
        """
        _check_names(type(self), changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def resolve(cls, settings=None, changes=None):
        """An instance from ``settings``, with ``changes`` made on it.

        Parameters
        ----------
        settings : Settings, mapping or None, default=None
            An instance of this class, a mapping of setting to value, or
            None: the defaults.
        changes : mapping or None, default=None
            Setting name to the value that replaces its own.

        Returns
        -------
        Settings
            An instance of this class, checked.
        """
        changes = dict(changes or {})
        settings = {} if settings is None else settings
        if not isinstance(settings, Mapping) or (
            isinstance(settings, Settings) and not isinstance(settings, cls)
        ):
            raise TypeError(
                f"settings must be {cls.__name__}, a mapping of setting to value or None, "
                f"got {type(settings).__name__}: {settings!r}."
            )
        if isinstance(settings, cls):
            return settings.replace(**changes) if changes else settings
        merged = {**settings, **changes}
        _check_names(cls, merged)
        fields = cls.__dataclass_fields__.items()  # no default: default, default_factory MISSING
        missing = [n for n, f in fields if n not in merged and f.default is f.default_factory]
        if missing:
            raise ValueError(f"{cls.__name__}: missing required settings {missing}.")
        return cls(**merged)

    def to_json(self):
        """The settings as JSON values: what a result records of them.

        Estimators and tasks are written as their ``repr``, nested settings
        as their own JSON, tuples as lists, an infinity as ``"inf"``.

        Returns
        -------
        dict
            Setting name to its JSON value.
        """
        return {name: to_json(value) for name, value in self.items()}


def to_json(value):
    """A JSON value of a setting or a number: see :meth:`Settings.to_json`."""
    if isinstance(value, Settings):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    value = _plain(value)  # a NumPy scalar as Python's; NaN as None, an infinity as "inf"
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def _check_names(cls, mapping):
    unknown = [name for name in mapping if name not in cls.__dataclass_fields__]
    if unknown:
        raise ValueError(
            f"{unknown} are not settings of {cls.__name__} "
            f"(its settings: {', '.join(cls.__dataclass_fields__)})."
        )
