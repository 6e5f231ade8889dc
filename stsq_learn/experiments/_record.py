"""One record per experiment, and the plan of a run: its fits, steps and estimated time.

An :class:`Experiment` holds everything :func:`~stsq_learn.experiments.reproduce`
needs to know about one experiment: its name and aliases, the function that
runs it, its arguments at each size, the rows it adds to the summary, and
the work an estimate times (:class:`Work`). The records live one module per
experiment in ``_records/``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone

from ._common import timing_run
from ._settings import Settings

SIZES = ("tiny", "quick", "full", "gpu")
"""The sizes every record defines, smallest first."""

RUN_OPTIONS = ("device", "random_state", "progress", "scheduler")
"""Arguments of an experiment function that :func:`reproduce` gives, not its presets."""


class _SignatureSettings(Mapping):
    """Base of settings made from a function's signature (:func:`settings_type`).

    :func:`settings_type` makes one class per experiment, its fields the
    keyword arguments of the experiment's function (less ``RUN_OPTIONS``),
    with their defaults. A preset is an instance: a misspelt or missing
    setting fails when the record is built. Every field is an attribute;
    as a mapping, a preset holds the settings it was given (so
    ``function(**preset, n_jobs=2)`` still sets what the preset leaves at
    its default, and ``dict(preset)`` is the preset as written).
    """

    def _given_keys(self):
        return getattr(self, "_given", None) or tuple(self.__dataclass_fields__)

    def __getitem__(self, key):
        if key not in self._given_keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._given_keys())

    def __len__(self):
        return len(self._given_keys())

    @classmethod
    def given(cls, settings):
        """An instance from the mapping ``settings``, which remembers the keys it was given.

        Parameters
        ----------
        settings : mapping
            Setting name to value.

        Returns
        -------
        Settings
            The instance (its other fields at their defaults).
        """
        out = cls(**settings)
        object.__setattr__(out, "_given", tuple(settings))
        return out


def settings_type(function, name):
    """The settings class of an experiment function: its keyword arguments as frozen fields.

    Parameters
    ----------
    function : callable
        The experiment's function.
    name : str
        The class's name.

    Returns
    -------
    type
        A frozen, keyword-only dataclass deriving from :class:`_SignatureSettings`;
        a field without a default is required.
    """
    fields = []
    for param in inspect.signature(function).parameters.values():
        if param.name in RUN_OPTIONS or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is param.empty:
            fields.append((param.name, object))
        else:
            default = param.default
            fields.append(
                (param.name, object, field(default_factory=lambda d=default: copy.deepcopy(d)))
            )
    kind = dataclasses.make_dataclass(
        name, fields, bases=(_SignatureSettings,), frozen=True, kw_only=True, eq=False
    )
    kind.__module__ = function.__module__
    kind.__doc__ = f"The settings of :func:`{function.__name__}` (its keyword arguments)."
    return kind


@dataclass(frozen=True)
class Work:
    """Part of an experiment's work: ``fits`` models trained ``steps`` online steps each.

    Attributes
    ----------
    label : str
        What the part is, for the plan's table.
    fits : int
        Models trained (an expected number where a search decides it).
    steps : int
        Online steps per model.
    estimator : BaseEstimator
        A model of the part as it trains (the estimate times a few of its steps).
    task : Task
        The task it trains on.
    predict_rows : int, default=0
        Rows each model predicts afterwards (all lengths and draws together).
    predict_len : int, default=None
        Length of the predicted rows (the task's when None).
    """

    label: str
    fits: int
    steps: int
    estimator: object
    task: object
    predict_rows: int = 0
    predict_len: int | None = None


@dataclass(frozen=True)
class Experiment:
    """The record of one experiment of :func:`~stsq_learn.experiments.reproduce`.

    Attributes
    ----------
    name : str
        Its name: a section of ``results.json`` and a value of ``only``.
    function : callable
        Runs it: ``function(settings, device=..., random_state=...,
        progress=...)``, ``settings`` an instance of :attr:`settings`;
        returns a result with ``to_dict()`` and ``plot()``.
    presets : dict of str to Settings
        The settings at each size of ``SIZES``, instances of
        :attr:`settings` (a mapping is made one when the record is built).
    summary_rows : callable
        ``summary_rows(rows, result)`` appends the result's lines of the
        Markdown summary to the list ``rows``.
    work : callable
        ``work(presets[size])``: the list of :class:`Work` the run does,
        for :func:`~stsq_learn.experiments.plan`.
    settings : type or None, default=None
        The experiment's settings, a subclass of
        :class:`~stsq_learn.experiments.Settings` declared beside its
        function; None makes one from the function's keyword arguments
        (an experiment registered before settings were typed).
    aliases : tuple of str, default=()
        Other names ``only`` accepts.
    result : type or None, default=None
        The class of ``function``'s result, exported with it by
        :mod:`stsq_learn.experiments` (the experiments of a task's home).
    headline : callable or None, default=None
        ``headline(result)``: the experiment's headline numbers for one
        seed, a flat dict of str to float. With it, :func:`reproduce` runs
        the experiment once per seed and reports each number's band (its
        values, min, median and max over the seeds), and ``--check``
        compares the medians with the shipped reference; without it, the
        experiment runs one seed.
    provenance : dict or None, default=None
        Setting name to where its value comes from: ``"paper: ..."`` (fixed
        by the paper) or ``"ours: ..."`` (a choice of this package), written
        to ``results.json``'s meta and summarised in ``summary.md``.
    seeds_inside : bool, default=False
        The experiment runs several seeds itself (its presets say how many)
        and its headline numbers are already over them (a mean, with its min
        and max): :func:`reproduce` runs it once, from the first seed.
    reference_rtol : dict of str to float or None, default=None
        Headline numbers that move in steps (a width of a grid, a number of
        heads) to the least relative tolerance a reference gives them, by
        pattern (``fnmatch``, e.g. ``"*_width": 0.5``: one step of a grid
        whose neighbours are at most twice apart). Seeds that agree leave
        such a number no spread, and another machine's rounding can move it
        one step.
    reference_atol : dict of str to float or None, default=None
        As ``reference_rtol``, the least absolute tolerance: for a number
        that moves in steps of a fixed size (a fraction of a few seeds).
    """

    name: str
    function: Callable
    presets: dict
    summary_rows: Callable
    work: Callable
    aliases: tuple = field(default=())
    result: type | None = None
    headline: Callable | None = None
    provenance: dict | None = None
    seeds_inside: bool = False
    reference_rtol: dict | None = None
    reference_atol: dict | None = None
    settings: type | None = None

    def __post_init__(self):
        missing = [size for size in SIZES if size not in self.presets]
        if missing:
            raise ValueError(f"experiment {self.name!r} has no preset for {missing}.")
        # The presets become instances of the experiment's settings type (a typo fails here).
        typed = self.settings is not None and not (
            isinstance(self.settings, type) and issubclass(self.settings, _SignatureSettings)
        )
        if typed and not (isinstance(self.settings, type) and issubclass(self.settings, Settings)):
            raise TypeError(
                f"experiment {self.name!r}: settings must be a subclass of Settings, "
                f"got {self.settings!r}."
            )
        title = "".join(part.title() for part in self.name.split("_")) + "Settings"
        kind = self.settings if typed else settings_type(self.function, title)
        presets = {}
        for size, preset in self.presets.items():
            if isinstance(preset, kind):
                presets[size] = preset
                continue
            if typed:
                try:
                    presets[size] = kind.resolve(preset)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"experiment {self.name!r}, preset {size!r}: {exc}") from None
                continue
            unknown = [k for k in preset if k not in kind.__dataclass_fields__]
            if unknown:
                raise ValueError(
                    f"experiment {self.name!r}, preset {size!r}: {unknown} are not settings of "
                    f"{self.function.__name__} (its settings: "
                    f"{', '.join(kind.__dataclass_fields__)})."
                )
            try:
                presets[size] = kind.given(preset)
            except TypeError as exc:
                raise ValueError(f"experiment {self.name!r}, preset {size!r}: {exc}") from None
        object.__setattr__(self, "settings", kind)
        object.__setattr__(self, "_by_keywords", not typed)
        if isinstance(self.presets, dict):
            # In place: the record module's PRESETS and the record's are one object.
            self.presets.update(presets)
        else:
            object.__setattr__(self, "presets", presets)
        if self.headline is not None and not callable(self.headline):
            raise TypeError(
                f"experiment {self.name!r}: headline must be a callable or None, "
                f"got {self.headline!r}."
            )
        for option in ("reference_rtol", "reference_atol"):
            for pattern, value in dict(getattr(self, option) or {}).items():
                if (
                    not isinstance(pattern, str)
                    or isinstance(value, bool)
                    or not (isinstance(value, (int, float)) and value >= 0)
                ):
                    raise ValueError(
                        f"experiment {self.name!r}: {option} maps number patterns to "
                        f"non-negative numbers, got {pattern!r}: {value!r}."
                    )
        if self.provenance is not None:
            if not isinstance(self.provenance, dict):
                raise TypeError(
                    f"experiment {self.name!r}: provenance must be a dict of setting to "
                    f"'paper: ...' or 'ours: ...', got {type(self.provenance).__name__}."
                )
            for key, source in self.provenance.items():
                if not isinstance(source, str) or not source.startswith(("paper:", "ours:")):
                    raise ValueError(
                        f"experiment {self.name!r}: the provenance of {key!r} must start "
                        f"with 'paper:' or 'ours:', got {source!r}."
                    )

    def arguments(self, size, **run_options):
        """The keyword arguments of ``function`` that run the preset ``size``.

        Parameters
        ----------
        size : str
            One of ``SIZES``.
        **run_options
            ``device``, ``random_state``, ``progress`` and the like.

        Returns
        -------
        dict
            ``{"settings": presets[size], **run_options}``.
        """
        preset = self.presets[size]
        if self._by_keywords:  # settings made from the signature: its keyword arguments
            return {**preset, **run_options}
        return {"settings": preset, **run_options}

    def planned_work(self, size):
        """The :class:`Work` of the preset ``size`` (``work(presets[size])``).

        Parameters
        ----------
        size : str
            One of ``SIZES``.

        Returns
        -------
        list of Work
            The run's parts.
        """
        preset = self.presets[size]
        return self.work(**preset) if self._by_keywords else self.work(preset)


def time_steps(estimator, task, *, device, probe_steps=(4, 12)):
    """Seconds per online step and per fit (set-up) of ``estimator`` on ``task``.

    Short ``fit_online`` runs of ``probe_steps`` steps, the shorter one
    twice (the first may hold one-off costs, the faster is kept): their
    difference gives the time of a step, the rest the fixed cost of a fit.
    """
    times = {}
    # A few steps time the model; their loss is not the run's (a short run
    # at a large step may rise before it falls), so divergence only warns.
    settings = {"device": device, "random_state": 0, "callbacks": None, "on_divergence": "warn"}
    own = estimator.get_params()
    for k in (probe_steps[0], *probe_steps):
        model = clone(estimator).set_params(**{p: v for p, v in settings.items() if p in own})
        with timing_run(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model.fit_online(task, n_steps=k)
            times[k] = min(times.get(k, math.inf), time.perf_counter() - start)
    short, long = (times[k] for k in probe_steps)
    per_step = max((long - short) / (probe_steps[1] - probe_steps[0]), long / probe_steps[1] / 2)
    return per_step, max(short - probe_steps[0] * per_step, 0.0), model


def time_predict(model, task, rows, length):
    """Seconds to predict ``rows`` rows of length ``length`` (timed on up to 256)."""
    n = int(min(rows, 256))
    X, y = task.sample(n, random_state=0)
    if length is not None and length != task.seq_len:
        X, _ = task.shift(X, y, length, random_state=0)
    start = time.perf_counter()
    model.predict(X)
    return (time.perf_counter() - start) * rows / n


def estimate(work, *, device):
    """Per :class:`Work`, a dict of its fits, steps and estimated seconds.

    Each distinct model and task is timed once (:func:`time_steps`), and its
    prediction on up to 256 rows when the part predicts.
    """
    out = []
    cache = {}
    for part in work:
        task = part.task
        key = (repr(part.estimator), task)  # a task compares by value: its class and sizes
        if key not in cache:
            cache[key] = time_steps(part.estimator, part.task, device=device)
        per_step, per_fit, model = cache[key]
        seconds = part.fits * (per_fit + part.steps * per_step)
        if part.predict_rows and part.fits:
            seconds += part.fits * time_predict(
                model, part.task, part.predict_rows, part.predict_len
            )
        out.append(
            {
                "label": part.label,
                "fits": part.fits,
                "steps": part.fits * part.steps,
                "seconds": float(np.round(seconds, 1)),
            }
        )
    return out
