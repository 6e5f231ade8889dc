"""One record per experiment, and the plan of a run: its fits, steps and estimated time.

An :class:`Experiment` holds everything :func:`~stsq_learn.experiments.reproduce`
needs to know about one experiment: its name and aliases, the function that
runs it, its settings (one typed object, :mod:`._settings`) and their
instance at each size, the rows it adds to the summary, and the work an
estimate times (:class:`Work`). The records live one module per experiment,
in ``_records/`` or in the experiment's task's home (``record.py``).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone

from ..studies.plan import Work as Work  # the part of a run a plan times
from ._common import timing_run
from ._settings import Settings

SIZES = ("tiny", "quick", "full", "gpu")
"""The sizes every record defines, smallest first."""


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
    settings : type
        The experiment's settings, a subclass of
        :class:`~stsq_learn.experiments.Settings` declared beside its
        function, of which every preset is an instance.
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
    seeds_batched : bool, default=False
        The experiment trains its seeds together (as one batched model,
        :mod:`stsq_learn.engine.members`, wherever they move in lockstep):
        :func:`reproduce` calls it once, ``function(settings,
        seeds=(s0, s1, ...), device=..., progress=...)`` without
        ``random_state``, and it returns a list of results, one per seed in
        that order, each what a call with ``random_state=s`` returns. The
        bands, figures and checks read them as the results of separate runs.
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
    settings: type
    aliases: tuple = field(default=())
    result: type | None = None
    headline: Callable | None = None
    provenance: dict | None = None
    seeds_inside: bool = False
    seeds_batched: bool = False
    reference_rtol: dict | None = None
    reference_atol: dict | None = None

    def __post_init__(self):
        if self.seeds_inside and self.seeds_batched:
            raise ValueError(
                f"experiment {self.name!r}: seeds_inside and seeds_batched exclude each other "
                "(one runs seeds of its own and reports over them, the other returns a result "
                "per seed it is given)."
            )
        missing = [size for size in SIZES if size not in self.presets]
        if missing:
            raise ValueError(f"experiment {self.name!r} has no preset for {missing}.")
        # The presets become instances of the experiment's settings (a typo fails here).
        if not (isinstance(self.settings, type) and issubclass(self.settings, Settings)):
            raise TypeError(
                f"experiment {self.name!r}: settings must be a subclass of "
                f"stsq_learn.experiments.Settings, got {self.settings!r}."
            )
        presets = {}
        for size, preset in self.presets.items():
            try:
                presets[size] = self.settings.resolve(preset)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"experiment {self.name!r}, preset {size!r}: {exc}") from None
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
        return {"settings": self.presets[size], **run_options}

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
        return self.work(self.presets[size])


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
