"""Run the experiments at a named size; write results.json, its figures and a summary; plan a run.

Every figure is drawn from ``results.json`` as read back: :func:`plot_results` redraws a run's
PNGs pixel for pixel."""

from __future__ import annotations

import functools
import json
import numbers
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from .._validation import check_positive_int, check_scheduler, resolve_device
from .._version import __version__
from ..studies.fits import check_n_jobs
from ..studies.plan import StudyPlan
from ..studies.seeds import check_seeds
from . import _runs
from ._record import SIZES
from ._registered import RECORDS
from ._result import ExperimentResult, fmt_band

RESULTS_FORMAT = "stsq-learn results 2"
"""The ``format`` of the ``results.json`` this version writes and reads (0.8: every seed)."""

DEFAULT_SEEDS = {"tiny": 1, "quick": 3, "full": 3, "gpu": 3}
"""Seeds per experiment at each size when ``n_seeds`` is None."""


def resolve_experiments(only):
    """Experiment names from ``only`` (None, a name or alias, or a sequence of them)."""
    known = tuple(RECORDS)
    aliases = {alias: name for name, rec in RECORDS.items() for alias in rec.aliases}
    if only is None:
        return list(known)
    out = []
    for name in [only] if isinstance(only, str) else list(only):
        full = aliases.get(name, name)
        if full not in known:
            raise ValueError(
                f"Unknown experiment {name!r} in only={only!r}; choose from "
                f"{', '.join(known)} (aliases: {', '.join(aliases)})."
            )
        if full not in out:
            out.append(full)
    if not out:
        raise ValueError("only must name at least one experiment, got an empty sequence.")
    return out


class ReproduceResults(dict):
    """What :func:`reproduce` and :func:`load_results` give: a dict of experiment name to its
    :class:`~stsq_learn.experiments.ExperimentResult`, in ``EXPERIMENTS`` order.

    Attributes
    ----------
    preset : str
        The size of the run.
    meta : dict
        Versions, device, seeds, threads, processes, seconds and provenance
        of the run (as in ``results.json``).
    """

    def __init__(self, results, *, preset, meta):
        super().__init__(results)
        self.preset = preset
        self.meta = meta

    @property
    def seeds(self):
        """Experiment name to the list of its seeds."""
        return {name: list(result.seeds) for name, result in self.items()}

    @property
    def headline(self):
        """Experiment name to its headline numbers' bands (None without headline numbers)."""
        return {name: (result.bands() or None) for name, result in self.items()}

    @property
    def provenance(self):
        """Experiment name to its settings' sources, where its record says."""
        return dict(self.meta.get("provenance", {}))

    def to_dict(self):
        """``results.json``, JSON-ready: ``format``, ``meta`` and ``experiments`` (name to the
        result's ``to_dict()`` and its ``headline`` bands)."""
        headline = self.headline
        experiments = {
            name: {**r.to_dict(), "headline": headline[name]} for name, r in self.items()
        }
        return {"format": RESULTS_FORMAT, "meta": self.meta, "experiments": experiments}


def reproduce(
    preset="quick",
    *,
    out=None,
    device="auto",
    seed=0,
    n_seeds=None,
    only=None,
    n_jobs=None,
    n_threads=None,
    progress=True,
    log=None,
    scheduler=None,
):
    """Run the registered experiments over seeds; optionally write figures and ``results.json``.

    Each experiment runs once, with every seed, on a pool of worker processes.

    Parameters
    ----------
    preset : {"tiny", "quick", "full", "gpu"}, default="quick"
        The size (``PRESETS``): ``"quick"`` a few minutes on 2 CPU cores,
        ``"full"`` about an hour, ``"gpu"`` for one GPU, ``"tiny"`` for tests.
    out : str or path, default=None
        Directory to write ``<experiment>.png``, ``bands.png``,
        ``results.json`` and ``summary.md`` into; None writes nothing.
    device : str, default="auto"
        Training device of every model.
    seed : int, default=0
        The first seed: every experiment runs ``seed``, ``seed + 1``, ...
    n_seeds : int, default=None
        Seeds of every experiment (None: 1 at ``"tiny"``, 3 at the other sizes).
    only : str or sequence of str, default=None
        Run only these experiments (names of ``EXPERIMENTS`` or their aliases).
    n_jobs : int, default=None
        Worker processes, never more than the experiments: None is every
        usable core on a CPU and 1 on a GPU, -1 every usable core, 1 this
        process. The numbers do not depend on it.
    n_threads : int, default=None
        PyTorch CPU threads of each run; None is one (the models are small:
        one thread per run, and runs on every core, is fastest).
    progress : bool, default=True
        Show tqdm progress bars (on stderr).
    log : callable, default=None
        Called with a line of text after each experiment (e.g. ``print``).
    scheduler : str, default=None
        Fit on a dask cluster: ``"local:N"`` or a scheduler address
        (:func:`stsq_learn.distributed.dask_backend`); the experiments then
        run one after another in this process, their fits on the cluster.

    Returns
    -------
    results : ReproduceResults
        Experiment name to its :class:`ExperimentResult`, in ``EXPERIMENTS``
        order: what ``results.json`` holds (format :data:`RESULTS_FORMAT`),
        with the bands of the headline numbers (``values`` per seed, ``min``,
        ``median``, ``max``) beside each result.

    Examples
    --------
    >>> from stsq_learn.experiments import reproduce
    >>> results = reproduce("tiny", only="in_context_regression", progress=False)
    >>> list(results), results.seeds
    (['in_context_regression'], {'in_context_regression': [0]})
    """
    names, resolved, seeds = check_run_options(
        preset, out, device, seed, n_seeds, only, n_jobs, n_threads, scheduler
    )
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
    n_threads = 1 if n_threads is None else n_threads
    kwargs = {"settings": preset, "seeds": seeds, "device": str(resolved)}
    if scheduler is None:
        jobs = [(name, RECORDS[name], kwargs) for name in names]
        workers = _runs.resolve_n_jobs(n_jobs, len(jobs), device=resolved.type)
    else:  # one after another in this process, their fits on the cluster
        kwargs["n_jobs"] = -1
        jobs = [
            (name, functools.partial(_on_cluster, RECORDS[name], scheduler), kwargs)
            for name in names
        ]
        workers = 1

    def draw(name, result):  # while the other runs go on, from the result as JSON gives it back
        result = ExperimentResult.from_dict(json.loads(json.dumps(result.to_dict())))
        _save_figure(result.plot(), Path(out) / f"{name}.png")

    start = time.perf_counter()
    done = _runs.run_all(
        jobs,
        n_jobs=workers,
        n_threads=n_threads,
        progress=progress,
        log=log,
        when_done=None if out is None else draw,
    )
    meta = dict(stsq_learn=__version__, torch=torch.__version__, python=platform.python_version())
    meta |= dict(preset=preset, device=str(resolved), seed=seed, seeds=list(seeds), n_jobs=workers)
    meta |= dict(torch_threads=n_threads, seconds={n: round(done[n][1], 1) for n in names})
    meta["wall_seconds"] = round(time.perf_counter() - start, 1)
    meta["provenance"] = {n: dict(RECORDS[n].provenance) for n in names if RECORDS[n].provenance}
    results = ReproduceResults({name: done[name][0] for name in names}, preset=preset, meta=meta)
    if out is not None:
        (Path(out) / "results.json").write_text(json.dumps(results.to_dict(), indent=1) + "\n")
        _save_figure(_runs.plot_bands(results.headline), Path(out) / "bands.png")
        (Path(out) / "summary.md").write_text(summary_table(results) + "\n")
    return results


def _on_cluster(record, scheduler, **kwargs):
    """``record(**kwargs)`` with its studies' fits on the dask cluster ``scheduler``."""
    from ..distributed import dask_backend

    with dask_backend(scheduler):
        return record(**kwargs)


def check_run_options(preset, out, device, seed, n_seeds, only, n_jobs, n_threads, scheduler):
    """``(names, device, seeds)`` of :func:`reproduce`'s (and :func:`plan`'s) options, all
    checked before any work; the seeds ``seed, seed + 1, ...`` by :func:`check_seeds`."""
    if preset not in SIZES:
        raise ValueError(f"preset must be one of {', '.join(SIZES)}, got {preset!r}.")
    names = resolve_experiments(only)
    resolved = resolve_device(device)
    count = DEFAULT_SEEDS[preset] if n_seeds is None else check_positive_int(n_seeds, "n_seeds")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}.")
    try:
        seeds = check_seeds(list(range(int(seed), int(seed) + count)))
    except ValueError as exc:
        raise ValueError(
            f"seed={seed!r} and n_seeds={count} run the seeds {seed} to {seed + count - 1}: {exc}"
        ) from None
    check_n_jobs(n_jobs)
    if out is not None:
        check_out_dir(out)
    if n_threads is not None:
        check_positive_int(n_threads, "n_threads")
    if scheduler is not None:
        check_scheduler(scheduler)  # a bad specification fails before dask is imported
        from .. import distributed  # noqa: F401  (a missing extra fails here too)
    return names, resolved, seeds


def check_out_dir(out):
    """Raise ``ValueError``, naming ``out``, unless it is or can be made a writable directory
    (a file at or above it refused; a probe that leaves nothing behind), before any work."""
    if not os.fspath(out).strip():
        raise ValueError(f"out={os.fspath(out)!r} names no directory; give a path such as '.'.")
    path = os.path.abspath(os.fspath(out))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"out={os.fspath(out)!r} is a file, not a directory.")
    ancestor = path
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(f"out={os.fspath(out)!r} cannot be a directory: {ancestor!r} is a file.")
    try:  # a probe, which leaves nothing behind (permissions alone miss read-only places)
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise ValueError(
            f"out={os.fspath(out)!r} cannot be written: {ancestor!r}: {exc.strerror or exc}."
        ) from None


# -- results.json and its figures ------------------------------------------------------------
def load_results(path):
    """A run read back from its ``results.json`` (or the directory holding it).

    Parameters
    ----------
    path : str or path
        The file, or the ``out`` directory of :func:`reproduce`.

    Returns
    -------
    ReproduceResults
        Experiment name to its :class:`ExperimentResult`, with the run's meta.
        A 0.7 ``results.json`` (one seed's tables) is refused, naming it.
    """
    data = _read_results_json(path)
    results = {
        name: ExperimentResult.from_dict(section) for name, section in data["experiments"].items()
    }
    return ReproduceResults(results, preset=data["meta"].get("preset"), meta=data["meta"])


def _read_results_json(path):
    """The JSON of a run's ``results.json``, its format checked."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"results must be the path of a run's results.json or directory, got "
            f"{type(path).__name__}."
        )
    file = Path(path) / "results.json" if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise ValueError(f"{os.fspath(path)!r}: no results.json there.")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{os.fspath(file)!r} is not JSON: {exc}.") from None
    got = data.get("format") if isinstance(data, dict) else None
    if got == RESULTS_FORMAT:
        return data
    if isinstance(data, dict) and got is None and "meta" in data:
        version = data["meta"].get("stsq_learn", "0.7 or earlier")
        raise ValueError(
            f"{os.fspath(file)!r} is a results.json of stsq-learn {version}, written without "
            "a format (0.7 and earlier: one seed's tables per experiment), and this version "
            f"reads format {RESULTS_FORMAT!r} (every seed's tables): rerun reproduce to "
            "redraw its figures."
        )
    raise ValueError(
        f"{os.fspath(file)!r} is not a results.json of format {RESULTS_FORMAT!r} (format: {got!r})."
    )


def plot_results(results, out):
    """Draw every figure of a run into ``out``: ``<experiment>.png`` and ``bands.png``.

    No training: drawn from the tables of ``results.json``, equal pixel for
    pixel to the run's own PNGs on the same machine (``stsq-learn plot``).

    Parameters
    ----------
    results : str or path
        The run's ``results.json``, or its directory.
    out : str or path
        The directory to write the PNGs into (created if missing).

    Returns
    -------
    list of Path
        The files written.
    """
    results = load_results(results)
    check_out_dir(out)
    Path(out).mkdir(parents=True, exist_ok=True)
    written = [_save_figure(r.plot(), Path(out) / f"{name}.png") for name, r in results.items()]
    return [*written, _save_figure(_runs.plot_bands(results.headline), Path(out) / "bands.png")]


def _save_figure(fig, path):
    import matplotlib

    matplotlib.use("Agg", force=False)  # a no-op where pyplot already runs another backend
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def summary_table(results):
    """A Markdown summary of a run: each experiment's rows, then its headline bands.

    Parameters
    ----------
    results : ReproduceResults or dict
        Experiment name to its :class:`ExperimentResult`.

    Returns
    -------
    str
        The summary rows, the headline bands (median [min, max] over the
        seeds) and the settings each record calls its own (not the paper's).
    """
    rows = ["| experiment | measure | value |", "|---|---|---|"]
    for result in results.values():
        rows += result.summary()
    bands = [(name, result.bands(), len(result.seeds)) for name, result in results.items()]
    if any(numbers for _, numbers, _ in bands):
        head = "| experiment | headline number | median [min, max] | seeds |"
        rows += ["", "Headline numbers over seeds:", "", head, "|---|---|---|---|"]
        for name, numbers, n_seeds in bands:
            for i, (key, b) in enumerate(numbers.items()):  # name and seeds on the first row
                first = (name, n_seeds) if i == 0 else ("", "")
                rows.append(f"| {first[0]} | {key} | {fmt_band(b)} | {first[1]} |")
    ours = {
        name: [key for key, where in prov.items() if str(where).startswith("ours")]
        for name, prov in getattr(results, "provenance", {}).items()
    }
    if any(ours.values()):
        head = "Settings that are ours, not the paper's (sources: results.json, meta.provenance):"
        rows += ["", head, ""]
        rows += [f"- {name}: {', '.join(keys)}" for name, keys in ours.items() if keys]
    return "\n".join(rows)


# -- the plan of a run -----------------------------------------------------------------------
class Plan(dict):
    """What :func:`plan` returns: experiment name to its estimate, with the worker processes
    (``n_jobs``) and the run's estimated wall-clock seconds (``wall_seconds``: :func:`wall_time`).
    """

    def __init__(self, estimates, *, n_jobs, wall_seconds):
        super().__init__(estimates)
        self.n_jobs = n_jobs
        self.wall_seconds = wall_seconds


_WORKER_START_S = 5.0
"""Estimated seconds to start a worker process (Python, torch and the package imported)."""


def wall_time(run_seconds, n_jobs, *, cores=None):
    """Estimated wall-clock seconds of runs of ``run_seconds`` on ``n_jobs`` processes: longest
    first to the least loaded (as a pool hands out work), sharing the usable ``cores``."""
    cores = _runs.usable_cores() if cores is None else cores
    if n_jobs <= 1 or not run_seconds:
        return float(sum(run_seconds))
    loads = [0.0] * n_jobs
    for seconds in sorted(run_seconds, reverse=True):
        loads[loads.index(min(loads))] += seconds
    share = max(1.0, n_jobs / max(cores, 1))  # more processes than cores: they share them
    return float(max(loads) * share + _WORKER_START_S)


def plan(preset="quick", *, only=None, device="auto", n_threads=None, n_seeds=None, n_jobs=None):
    """The fits, steps and estimated seconds of :func:`reproduce`, from a few timed steps.

    Each experiment's studies record their work in a plan instead of
    training (:func:`~stsq_learn.studies.planning`), and every part is timed
    on this machine (:meth:`~stsq_learn.studies.StudyPlan.estimate`). Takes
    seconds to tens of seconds.

    Parameters
    ----------
    preset, only, device, n_threads, n_seeds, n_jobs
        As in :func:`reproduce` (``device`` and ``n_threads``: those the steps
        are timed with).

    Returns
    -------
    Plan
        Per experiment: ``fits``, ``steps``, ``seconds`` (all its seeds),
        ``seeds`` and ``parts``; ``wall_seconds`` and ``n_jobs`` the run's.

    Examples
    --------
    >>> from stsq_learn.experiments import plan
    >>> est = plan("tiny", only="in_context_regression")
    >>> one = est["in_context_regression"]
    >>> one["seeds"], one["fits"] > 0
    (1, True)
    """
    names, resolved, seeds = check_run_options(  # no out, no scheduler; the seeds from 0
        preset, None, device, 0, n_seeds, only, n_jobs, n_threads, None
    )
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1 if n_threads is None else n_threads)
    try:
        out = {}
        for name in names:
            work = StudyPlan(RECORDS[name].planned_work(preset, n_seeds=len(seeds)))
            parts = work.estimate(device=str(resolved))
            seconds = round(sum(p["seconds"] for p in parts), 1)
            out[name] = dict(fits=work.fits, steps=work.steps, seconds=seconds, seeds=len(seeds))
            out[name]["parts"] = parts
        workers = _runs.resolve_n_jobs(n_jobs, len(out), device=resolved.type)
        wall = wall_time([est["seconds"] for est in out.values()], workers)
        return Plan(out, n_jobs=workers, wall_seconds=round(wall, 1))
    finally:
        torch.set_num_threads(threads_before)


def plan_table(estimates):
    """A Markdown table of :func:`plan`'s estimates, with the total and the wall time.

    Parameters
    ----------
    estimates : dict
        As returned by :func:`plan`.

    Returns
    -------
    str
        The table (all seeds of an experiment together), then a plan's wall time.
    """
    rows = ["| experiment | fits | steps | estimated time | seeds |", "|---|---|---|---|---|"]
    rows += [
        f"| {name} | {e['fits']} | {e['steps']} | {_duration(e['seconds'])} | {e.get('seeds', 1)} |"
        for name, e in estimates.items()
    ]
    total = {key: sum(e[key] for e in estimates.values()) for key in ("fits", "steps", "seconds")}
    rows.append(f"| total | {total['fits']} | {total['steps']} | {_duration(total['seconds'])} | |")
    if getattr(estimates, "wall_seconds", None) is not None:
        where = "in this process" if estimates.n_jobs == 1 else f"on {estimates.n_jobs} processes"
        rows.append(f"\nEstimated wall time {where}: {_duration(estimates.wall_seconds)}.")
    return "\n".join(rows)


def _duration(seconds):
    """``"42 s"``, ``"12 min"`` or ``"2.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
