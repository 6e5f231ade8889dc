"""Typed settings of an experiment: one frozen dataclass per experiment, presets its instances.

Each experiment declares its settings once, as a subclass of
:class:`Settings` with typed fields and their defaults, beside its
function. The function takes an instance (or nothing: the defaults) and
keyword changes to it; its record's presets are instances; the plan reads
the same instance. A misspelt setting fails where it is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings(Mapping):
    """Base of an experiment's settings: a frozen, keyword-only dataclass read like a mapping.

    A subclass declares the experiment's settings as typed fields with
    their defaults. As a mapping it holds every field, so
    ``dict(settings)`` is the whole configuration and ``function(**settings)``
    runs it; :meth:`replace` gives a changed copy, :meth:`resolve` reads a
    function's arguments into an instance.

    A subclass is made a frozen, keyword-only dataclass when it is defined
    (no decorator to repeat); it compares with another mapping by its items.

    Examples
    --------
    >>> from stsq_learn.experiments import ConvergenceSettings
    >>> preset = ConvergenceSettings(seq_len=8, n_steps=30)
    >>> preset.n_steps, preset["seq_len"]
    (30, 8)
    >>> preset.replace(n_steps=60).n_steps
    60
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)

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
            The field names.
        """
        return tuple(cls.__dataclass_fields__)

    def replace(self, **changes):
        """A copy with ``changes`` applied.

        Parameters
        ----------
        **changes
            Setting name to its new value.

        Returns
        -------
        Settings
            The changed copy (this instance is not changed).

        Raises
        ------
        ValueError
            If a name is not one of the settings (the message lists them).
        """
        _check_names(type(self), changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def resolve(cls, settings=None, changes=None):
        """An instance from ``settings`` (an instance, a mapping or None) and keyword changes.

        Parameters
        ----------
        settings : Settings, mapping or None, default=None
            The base: an instance of this class, a mapping of setting name
            to value, or None for the defaults.
        changes : mapping or None, default=None
            Settings to change on top of the base.

        Returns
        -------
        Settings
            An instance of this class.

        Raises
        ------
        TypeError
            If ``settings`` is an instance of another experiment's settings,
            or neither a mapping nor None.
        ValueError
            If a name is not one of the settings, or a required one is missing.
        """
        changes = dict(changes or {})
        if settings is None:
            settings = {}
        elif isinstance(settings, Settings) and not isinstance(settings, cls):
            raise TypeError(
                f"settings must be {cls.__name__} (or a mapping, or None), "
                f"got {type(settings).__name__}."
            )
        elif not isinstance(settings, Mapping):
            raise TypeError(
                f"settings must be {cls.__name__}, a mapping of setting to value or None, "
                f"got {type(settings).__name__}: {settings!r}."
            )
        if isinstance(settings, cls):
            return settings.replace(**changes) if changes else settings
        merged = {**settings, **changes}
        _check_names(cls, merged)
        missing = [
            name
            for name, f in cls.__dataclass_fields__.items()
            if name not in merged
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"{cls.__name__}: missing required settings {missing}.")
        return cls(**merged)


def _check_names(cls, mapping):
    unknown = [name for name in mapping if name not in cls.__dataclass_fields__]
    if unknown:
        raise ValueError(
            f"{unknown} are not settings of {cls.__name__} "
            f"(its settings: {', '.join(cls.__dataclass_fields__)})."
        )
