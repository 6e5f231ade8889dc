"""The record of an experiment (:class:`Experiment`), which makes its public function (its module
binds ``name = RECORD.function``): one signature, its Parameters and Returns written once here."""

from __future__ import annotations

import fnmatch
import inspect
import numbers
import sys
import textwrap
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from .._validation import resolve_device
from ..studies import StudyTable, planning
from ..studies.fits import check_n_jobs
from ..studies.plan import Work as Work  # the part of a run a plan times
from ..studies.seeds import check_seeds
from ._result import ExperimentResult
from ._settings import Settings

SIZES = ("tiny", "quick", "full", "gpu")
"""The sizes every record defines, smallest first."""
_PARTS = ("run", "figure", "headline", "summary")

_PARAMETERS = """\
Parameters
----------
settings : Settings, mapping, str or None, default=None
    The experiment's settings: an instance of its settings class, a
    mapping of setting to value, the name of a size of ``SIZES`` (its
    preset), or None (the defaults). Every setting is checked against its
    constraints before any fit.
seeds : int or sequence of int, default=3
    The seeds (``3`` is ``(0, 1, 2)``). Seed ``s`` fits every model with
    ``random_state=s`` and draws its rows from
    :func:`~stsq_learn.studies.stream_seed`, so a run of several seeds gives,
    seed by seed, the numbers of one-seed runs (trained together where the
    models batch them).
device : str or None, default=None
    Training device of every model (``"auto"``, ``"cpu"``, ``"cuda"``);
    None keeps each estimator's own.
progress : bool, default=False
    Show progress bars over each study's fits.
n_jobs : int or None, default=None
    Fits each study runs at once on joblib's active backend (loky
    processes, or a dask cluster: :func:`stsq_learn.distributed.dask_backend`);
    the numbers do not depend on it.
**changes
    Settings to change (``n_steps=200``).

Returns
-------
ExperimentResult
    The settings and every study's table, every seed in them; its
    ``plot()`` draws the figure, ``bands()`` the headline numbers over
    the seeds, ``seed(s)`` one seed's view.
"""


def _calling(record):
    """The one experiment signature, calling ``record``: the code of every public function."""

    def experiment(settings=None, *, seeds=3, device=None, progress=False, n_jobs=None, **changes):
        return record(
            settings, changes, seeds=seeds, device=device, progress=progress, n_jobs=n_jobs
        )

    return experiment


def _document(doc):
    """``doc`` with the shared Parameters and Returns before its first section (See Also,
    Notes, Examples), as numpydoc orders them."""
    doc = inspect.cleandoc(doc)
    cut = min(
        (doc.find(f"\n{name}\n") for name in ("See Also", "Notes", "References", "Examples")),
        key=lambda i: len(doc) if i < 0 else i,
    )
    cut = len(doc) if cut < 0 else cut
    body = f"{doc[:cut].rstrip()}\n\n{_PARAMETERS}{doc[cut:]}"
    first, _, rest = body.partition("\n")
    return f"{first}\n{textwrap.indent(rest, '    ')}\n    "


def document_experiment(function):
    """Add the one experiment signature's Parameters and Returns to ``function``'s docstring.

    For a function of one's own with the experiments' signature (a record's
    function has them already).

    Parameters
    ----------
    function : callable
        Its docstring has no Parameters or Returns section.

    Returns
    -------
    callable
        ``function``, its docstring completed.
    """
    function.__doc__ = _document(function.__doc__ or "")
    return function


@dataclass(frozen=True)
class Experiment:
    """The record of one experiment of :func:`~stsq_learn.experiments.reproduce`.

    Registered with its task, it makes the experiment's public function
    (:attr:`function`) and tells ``reproduce`` how to run, draw and judge it.

    Attributes
    ----------
    name : str
        Its name: a section of ``results.json`` and a value of ``only``.
    function_name : str
        The name of its public function (:attr:`function`).
    doc : str
        That function's docstring less the shared Parameters and Returns.
    settings : type
        Its settings, a subclass of :class:`~stsq_learn.experiments.Settings`.
    presets : dict
        Size of :data:`SIZES` to the changes from the settings' defaults
        (a dict), or to the name of another size whose preset it shares.
    run : callable or None, default=None
        ``run(settings, seeds, *, device, progress, n_jobs)``: its studies
        over every seed, returning a dict of name to
        :class:`~stsq_learn.studies.StudyTable`; inside
        :func:`~stsq_learn.studies.planning`, no other heavy work.
    figure : callable or None, default=None
        ``figure(result, axes=None)``: the figure, from the tables alone.
    headline : callable or None, default=None
        ``headline(result)`` of a one-seed view: the numbers a run is judged
        by (their bands over the seeds), a flat dict of str to float.
    summary : callable or None, default=None
        ``summary(result)``: the experiment's rows of the Markdown summary
        (``| experiment | measure | value |``).
    provenance : dict or None, default=None
        Setting name to where its value comes from: ``"paper: ..."`` or
        ``"ours: ..."``, written to ``results.json``'s meta.
    aliases : tuple of str, default=()
        Other names ``only`` accepts.
    reference_rtol, reference_atol : dict of str to float or None, default=None
        Headline numbers that move in steps (a width of a grid, a fraction
        of a few seeds) to the least relative or absolute tolerance a
        reference gives them, by ``fnmatch`` pattern (``"*_width": 0.5``).
    exports : tuple, default=()
        Other public functions and classes of the experiment's module that
        :mod:`stsq_learn.experiments` exports by their ``__name__``.

    Notes
    -----
    An experiment's module defines its parts as functions named ``run``,
    ``figure``, ``headline`` and ``summary``: the record takes those of the
    module of its settings class where it is not given them (an experiment
    without headline numbers defines no ``headline``).
    """

    name: str
    function_name: str
    doc: str
    settings: type
    presets: dict
    run: Callable | None = None
    figure: Callable | None = None
    headline: Callable | None = None
    summary: Callable | None = None
    provenance: dict | None = None
    aliases: tuple = field(default=())
    reference_rtol: dict | None = None
    reference_atol: dict | None = None
    exports: tuple = field(default=())

    def __post_init__(self):
        who = f"experiment {self.name!r}"
        if not (isinstance(self.settings, type) and issubclass(self.settings, Settings)):
            raise TypeError(
                f"{who}: settings must be a subclass of stsq_learn.experiments.Settings, "
                f"got {self.settings!r}."
            )
        module = sys.modules.get(self.settings.__module__)
        for part in _PARTS:  # the module's functions of those names, where not given
            if getattr(self, part) is None and callable(getattr(module, part, None)):
                object.__setattr__(self, part, getattr(module, part))
        for part in ("run", "figure"):
            if not callable(getattr(self, part)):
                raise TypeError(
                    f"{who}: {part} must be callable (given, or a function named {part!r} in "
                    f"the module of its settings, {self.settings.__module__})."
                )
        missing = [size for size in SIZES if size not in self.presets]
        if missing:
            raise ValueError(f"{who} has no preset for {missing}.")
        presets = {}
        for size in sorted(SIZES, key=lambda size: isinstance(self.presets[size], str)):
            preset = self.presets[size]
            if isinstance(preset, str):  # another size's preset, the same instance
                if preset not in SIZES or isinstance(self.presets[preset], str):
                    raise ValueError(
                        f"{who}, preset {size!r}: {preset!r} names no size with settings of its "
                        "own."
                    )
                presets[size] = presets[preset]
                continue
            try:
                presets[size] = self.settings.resolve(preset)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{who}, preset {size!r}: {exc}") from None
        object.__setattr__(self, "presets", {size: presets[size] for size in SIZES})
        if not (isinstance(self.function_name, str) and self.function_name.isidentifier()):
            raise ValueError(
                f"{who}: function_name must be a Python name, got {self.function_name!r}."
            )
        if not isinstance(self.doc, str) or not self.doc.strip():
            raise TypeError(f"{who}: doc must be the function's docstring.")
        for name in ("headline", "summary"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise TypeError(f"{who}: {name} must be a callable or None.")
        for option in ("reference_rtol", "reference_atol"):
            for pattern, value in dict(getattr(self, option) or {}).items():
                if not isinstance(pattern, str) or not _non_negative(value):
                    raise ValueError(
                        f"{who}: {option} maps number patterns to non-negative numbers, got "
                        f"{pattern!r}: {value!r}."
                    )
        for key, source in dict(self.provenance or {}).items():
            if not isinstance(source, str) or not source.startswith(("paper:", "ours:")):
                raise ValueError(
                    f"{who}: the provenance of {key!r} must start with 'paper:' or 'ours:', got "
                    f"{source!r}."
                )

    @property
    def function(self):
        """The experiment's public function: the one signature, calling this record.

        Made once, in the module of :attr:`run` (its examples run there),
        its docstring :attr:`doc` with the shared Parameters and Returns.
        """
        made = self.__dict__.get("_function")
        if made is None:
            template = _calling(self)
            run = inspect.unwrap(self.run)  # its globals: those of a doctest where defined there
            scope = getattr(run, "__globals__", None) or vars(
                sys.modules.get(getattr(run, "__module__", None), sys.modules[__name__])
            )
            code, defaults, closure = template.__code__, template.__defaults__, template.__closure__
            made = types.FunctionType(code, scope, self.function_name, defaults, closure)
            made.__kwdefaults__ = dict(template.__kwdefaults__)
            made.__qualname__ = self.function_name
            made.__module__ = scope.get("__name__")
            made.__doc__ = _document(self.doc)
            object.__setattr__(self, "_function", made)
        return made

    def __getstate__(self):  # the function is made again where the record is unpickled
        return {k: v for k, v in self.__dict__.items() if k != "_function"}

    def __setstate__(self, state):
        for key, value in state.items():
            object.__setattr__(self, key, value)

    def __call__(
        self, settings=None, changes=None, *, seeds=3, device=None, progress=False, n_jobs=None
    ):
        """Run the experiment, every argument checked before any fit: what its function does."""
        cfg = self.resolve(settings, changes)
        seeds = check_seeds(seeds)
        if device is not None:
            resolve_device(device)
        if not isinstance(progress, bool):
            raise TypeError(f"progress must be True or False, got {progress!r}.")
        check_n_jobs(n_jobs)
        start = time.perf_counter()
        tables = self.run(cfg, seeds, device=device, progress=progress, n_jobs=n_jobs)
        seconds = {"total": round(time.perf_counter() - start, 2)}
        if not isinstance(tables, dict) or not all(
            isinstance(t, StudyTable) for t in tables.values()
        ):
            raise TypeError(
                f"experiment {self.name!r}: run must return a dict of name to StudyTable, "
                f"got {type(tables).__name__}."
            )
        return ExperimentResult(self.name, cfg.to_json(), tables, seconds).made_by(self)

    def resolve(self, settings=None, changes=None):
        """The settings of a call: :meth:`Settings.resolve`, or a size's preset and changes.

        Parameters
        ----------
        settings : Settings, mapping, str or None, default=None
            A size's name is its preset.
        changes : mapping or None, default=None
            Setting name to the value that replaces the preset's.

        Returns
        -------
        Settings
            An instance of :attr:`settings`, checked.
        """
        if isinstance(settings, str):
            if settings not in SIZES:
                raise ValueError(
                    f"settings={settings!r} names no size; the sizes: {', '.join(SIZES)}."
                )
            settings = self.presets[settings]
        return self.settings.resolve(settings, changes)

    def headline_numbers(self, result):
        """``headline(result)``, checked.

        Parameters
        ----------
        result : ExperimentResult
            A one-seed view.

        Returns
        -------
        dict of str to float
            Each headline number's name to its value.
        """
        numbers_ = self.headline(result)
        if not isinstance(numbers_, dict):
            raise TypeError(
                f"the headline of experiment {self.name!r} must return a dict of str to float, "
                f"got {type(numbers_).__name__}."
            )
        out = {}
        for key, value in numbers_.items():
            if not isinstance(key, str):
                raise TypeError(f"the headline of experiment {self.name!r} has a key {key!r}.")
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                raise TypeError(
                    f"the headline number {self.name}.{key} must be a real number, got {value!r}."
                ) from None
        return out

    def planned_work(self, size, *, n_seeds=1):
        """The parts of a preset's run, from one pass of ``run`` in a plan.

        Parameters
        ----------
        size : str
            One of :data:`SIZES`.
        n_seeds : int, default=1
            Seeds (a batched run plans every seed's fits).

        Returns
        -------
        list of Work
            One per part of the run, in order.
        """
        with planning() as plan:
            self.run(
                self.presets[size], check_seeds(n_seeds), device=None, progress=False, n_jobs=None
            )
        return list(plan)

    def step_tolerance(self, number):
        """The least tolerances the record gives a headline number.

        Parameters
        ----------
        number : str
            A headline number's name.

        Returns
        -------
        rtol, atol : float
            The largest ``reference_rtol`` and ``reference_atol`` of the
            patterns it matches (0 where none does).
        """

        def most(patterns):
            matching = (v for p, v in (patterns or {}).items() if fnmatch.fnmatchcase(number, p))
            return float(max(matching, default=0))

        return most(self.reference_rtol), most(self.reference_atol)


def _non_negative(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= 0
