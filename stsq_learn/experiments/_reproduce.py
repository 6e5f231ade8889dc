"""Run the experiments at a named size; write figures, results.json and a summary."""

from __future__ import annotations

import inspect
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from .._validation import check_positive_int, check_scheduler, resolve_device
from .._version import __version__
from . import _seeds
from ._record import SIZES, estimate
from ._records import RECORDS


def experiment_names():
    """Names of the registered experiments, in run order (sections of ``results.json``)."""
    return tuple(RECORDS)


def experiment_aliases():
    """Alias to experiment name, for ``only`` and ``--only``."""
    return {alias: name for name, rec in RECORDS.items() for alias in rec.aliases}


def presets():
    """Size to experiment name to the arguments of its function, from the records."""
    return {size: {name: rec.presets[size] for name, rec in RECORDS.items()} for size in SIZES}


def __getattr__(name):
    # EXPERIMENTS and PRESETS are read from the registry when asked, so that an
    # experiment registered after import is in them.
    if name == "EXPERIMENTS":
        return experiment_names()
    if name == "PRESETS":
        return presets()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_experiments(only):
    """Experiment names from ``only`` (None, a name, or a sequence of names)."""
    names_known, aliases = experiment_names(), experiment_aliases()
    if only is None:
        return list(names_known)
    names = [only] if isinstance(only, str) else list(only)
    out = []
    for name in names:
        full = aliases.get(name, name)
        if full not in names_known:
            raise ValueError(
                f"Unknown experiment {name!r} in only={only!r}; choose from "
                f"{', '.join(names_known)} (aliases: {', '.join(aliases)})."
            )
        if full not in out:
            out.append(full)
    if not out:
        raise ValueError("only must name at least one experiment, got an empty sequence.")
    return out


class ReproduceResults(dict):
    """What :func:`reproduce` returns: experiment name to its first seed's result.

    A dict, as before seeds were added (``results["convergence"]`` is the
    result of the first seed), with every seed's runs and the bands of the
    headline numbers as attributes.

    Attributes
    ----------
    preset : str
        The size of the run.
    seeds : dict of str to list of int
        Per experiment, the seeds it ran (one for an experiment without
        headline numbers).
    runs : dict of str to list
        Per experiment, its result for each seed, in seed order.
    headline : dict of str to dict or None
        Per experiment, each headline number's band over the seeds
        (``{"values": [...], "min": ..., "median": ..., "max": ...}``), or
        None for an experiment without headline numbers.
    provenance : dict of str to dict
        Per experiment whose record says, each setting's source
        (``"paper: ..."`` or ``"ours: ..."``).
    meta : dict
        Versions, device, threads, processes and seconds of the run (as in
        ``results.json``).
    """

    def __init__(self, results, *, preset, seeds, runs, headline, provenance, meta):
        super().__init__(results)
        self.preset = preset
        self.seeds = seeds
        self.runs = runs
        self.headline = headline
        self.provenance = provenance
        self.meta = meta


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
    """Run the paper's experiments over seeds; optionally write figures and ``results.json``.

    Parameters
    ----------
    preset : {"tiny", "quick", "full", "gpu"}, default="quick"
        Sizes (see ``PRESETS``): ``"quick"`` takes a few minutes on 2 CPU
        cores, ``"full"`` about an hour on 2 CPU cores, ``"gpu"`` is sized
        for one GPU, ``"tiny"`` for tests. :func:`plan` estimates the time.
    out : str or path, default=None
        Directory to write ``<experiment>.png``, ``bands.png``,
        ``results.json`` and ``summary.md`` into (created if missing); None
        writes nothing.
    device : str, default="auto"
        Training device of every model.
    seed : int, default=0
        The first seed: an experiment runs with ``seed``, ``seed + 1``, ...
    n_seeds : int, default=None
        Seeds of each experiment with headline numbers (its record's
        ``headline``); an experiment without them runs ``seed`` only. None
        is the size's default: 1 at ``"tiny"``, 3 at the other sizes.
    only : str or sequence of str, default=None
        Run only these experiments (names of ``EXPERIMENTS``, or the aliases
        ``"length"``, ``"width"`` and ``"averaging"``).
    n_jobs : int, default=None
        Worker processes (joblib's process backend) the runs, one per
        experiment and seed, are spread over; never more than the runs.
        None is every usable core on a CPU and 1 on a GPU, -1 every usable
        core; 1 runs everything in this process. The numbers do not depend
        on it.
    n_threads : int, default=None
        PyTorch intra-op CPU threads of each run (restored afterwards);
        None is one. The models are small, so one thread per run, and runs
        on every core, is fastest: several threads competing with other
        processes can make each step many times slower.
    progress : bool, default=True
        Show tqdm progress bars (on stderr): each run's own in this process,
        one over the runs when they are spread over processes.
    log : callable, default=None
        Called with a line of text after each run (e.g. ``print``).
    scheduler : str, default=None
        Run the width-separation sweep on a dask cluster: ``"local:N"`` (a
        LocalCluster of N worker processes) or a scheduler address; see
        :func:`width_separation`. None runs everything in this process (or
        in ``n_jobs`` processes); an experiment given a scheduler runs its
        seeds in this process.

    Returns
    -------
    results : ReproduceResults
        Experiment name to its first seed's result, in ``EXPERIMENTS``
        order; its attributes hold every seed's results and the bands of the
        headline numbers.

    Notes
    -----
    ``results.json`` holds, per experiment, its first seed's result
    (``to_dict()``), the seeds (``"seeds"``) and the bands of its headline
    numbers (``"headline"``: per number, its per-seed ``values`` and their
    ``min``, ``median`` and ``max``; null without headline numbers), and in
    ``meta`` each experiment's ``provenance`` (setting to ``"paper: ..."`` or
    ``"ours: ..."``). :func:`check_reference` compares a run with the
    reference numbers the package ships.

    Examples
    --------
    >>> from stsq_learn.experiments import reproduce, summary_table
    >>> results = reproduce("tiny", only="convergence", progress=False)
    >>> list(results)
    ['convergence']
    >>> results.seeds
    {'convergence': [0]}
    """
    _check_preset(preset)
    names, resolved = check_run_options(
        out=out,
        device=device,
        seed=seed,
        only=only,
        n_threads=n_threads,
        scheduler=scheduler,
        n_seeds=n_seeds,
        n_jobs=n_jobs,
    )
    n_seeds = _seeds.resolve_n_seeds(n_seeds, preset)
    return _run(
        preset,
        names,
        resolved,
        seed,
        out,
        progress,
        log,
        scheduler,
        n_seeds=n_seeds,
        n_jobs=n_jobs,
        n_threads=1 if n_threads is None else n_threads,
    )


def check_run_options(*, out, device, seed, only, n_threads, scheduler, n_seeds=None, n_jobs=None):
    """Check every option of :func:`reproduce` but the size; return ``(names, device)``.

    All of them are checked before any work, and the same way for a plan of
    the run (``stsq-learn reproduce --plan``) as for the run itself: a run
    that its plan accepts does not fail on its options.
    """
    names = resolve_experiments(only)
    resolved = resolve_device(device)
    check_seed(seed)
    _seeds.check_n_seeds(n_seeds, seed)
    _seeds.check_n_jobs(n_jobs)
    if out is not None:
        check_out_dir(out)
    if n_threads is not None:
        check_positive_int(n_threads, "n_threads")
    if scheduler is not None:
        check_scheduler(scheduler)  # a bad specification fails before dask is imported
        takers = [n for n in experiment_names() if _takes_scheduler(n)]
        if not any(n in takers for n in names):
            raise ValueError(
                f"scheduler={scheduler!r} runs the sweeps of {', '.join(takers)} on a dask "
                f"cluster, and only={only!r} runs none of them: drop the scheduler or run "
                f"{' or '.join(takers)}."
            )
        from .. import distributed  # noqa: F401  (a missing extra fails here too)
    return names, resolved


def _takes_scheduler(name):
    """Whether experiment ``name`` can run its sweep on a dask scheduler."""
    return "scheduler" in inspect.signature(RECORDS[name].function).parameters


_SEED_MAX = 2**32 - 1
"""The largest seed NumPy's ``RandomState`` (and so every estimator's ``random_state``) takes."""


def check_seed(seed):
    """Raise ``ValueError`` unless ``seed`` is an int in ``[0, 2**32 - 1]`` (the seed of a run)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _SEED_MAX:
        raise ValueError(
            f"seed must be a non-negative integer at most 2**32 - 1 = {_SEED_MAX}, got {seed!r}."
        )


def check_out_dir(out):
    """Raise ``ValueError``, naming ``out``, unless it is or can be made a writable directory.

    Nothing is left behind: a file at ``out`` or above it, or a directory
    that cannot be written to (probed with a temporary file), is refused
    before any work.
    """
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


def _run(
    preset,
    names,
    resolved,
    seed,
    out,
    progress,
    log,
    scheduler=None,
    *,
    n_seeds=1,
    n_jobs=1,
    n_threads=1,
):
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"out={str(out)!r} cannot be created: {exc.strerror or exc}."
            ) from None
    seeds = {name: _seeds.seeds_of(RECORDS[name], seed, n_seeds) for name in names}
    jobs = []
    for name in names:
        record = RECORDS[name]
        local = bool(scheduler) and _takes_scheduler(name)
        extra = {"scheduler": scheduler} if local else {}
        if record.seeds_batched:  # one run trains every seed, a result per seed
            batch = tuple(seeds[name])
            kwargs = record.arguments(preset, device=str(resolved), seeds=batch, **extra)
            jobs.append(((name, batch), record.function, kwargs, local))
            continue
        for s in seeds[name]:
            kwargs = record.arguments(preset, device=str(resolved), random_state=s, **extra)
            jobs.append(((name, s), record.function, kwargs, local))
    workers = _seeds.resolve_n_jobs(
        n_jobs, sum(1 for job in jobs if not job[3]), device=resolved.type
    )
    # An experiment's figure is drawn as soon as its last seed is done, while the
    # other runs go on (the drawing fills the cores the last runs leave idle).
    finished = {name: {} for name in names}
    sections = {}  # experiment name -> its first seed's to_dict(), once its seeds are done

    def when_done(key, result):
        name, s = key
        if isinstance(s, tuple):  # a batched run: its results, seed by seed
            finished[name].update(zip(s, _seeds.batched_results(name, s, result)))
        else:
            finished[name][s] = result
        if out_dir is not None and len(finished[name]) == len(seeds[name]):
            results_of = [finished[name][s] for s in seeds[name]]
            sections[name] = _check_section(name, results_of[0])
            _use_agg()
            _save_figure(_figure(results_of), out_dir / f"{name}.png")

    start = time.perf_counter()
    done = _seeds.run_all(
        jobs,
        n_jobs=workers,
        n_threads=n_threads,
        progress=progress,
        log=log,
        when_done=when_done,
    )
    wall = round(time.perf_counter() - start, 1)
    done = _seeds.split_batched(done)
    runs = {name: [done[(name, s)][0] for s in seeds[name]] for name in names}
    timings = {name: round(sum(done[(name, s)][1] for s in seeds[name]), 1) for name in names}
    bands = {
        name: None if RECORDS[name].headline is None else _seeds.bands_of(RECORDS[name], runs[name])
        for name in names
    }
    provenance = {
        name: dict(RECORDS[name].provenance)
        for name in names
        if RECORDS[name].provenance is not None
    }
    meta = {
        "stsq_learn": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "preset": preset,
        "device": str(resolved),
        "seed": seed,
        "n_seeds": n_seeds,
        "n_jobs": workers,
        "torch_threads": n_threads,
        "seconds": timings,
        "wall_seconds": wall,
        "provenance": provenance,
    }
    results = ReproduceResults(
        {name: runs[name][0] for name in names},
        preset=preset,
        seeds=seeds,
        runs=runs,
        headline=bands,
        provenance=provenance,
        meta=meta,
    )
    if out_dir is not None:
        payload = {"meta": meta}
        for name in names:
            payload[name] = {**sections[name], "seeds": seeds[name], "headline": bands[name]}
        _use_agg()
        _save_figure(_seeds.plot_bands(bands), out_dir / "bands.png")
        (out_dir / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
        (out_dir / "summary.md").write_text(summary_table(results) + "\n")
    return results


def _check_section(name, result):
    """``result.to_dict()``, or raise if it holds the keys results.json adds to it."""
    section = result.to_dict()
    clash = {"seeds", "headline"} & set(section)
    if clash:
        raise ValueError(
            f"the result of experiment {name!r} has its own {sorted(clash)} in "
            "to_dict(), which results.json keeps for the seeds and their bands: "
            "rename them in the result."
        )
    return section


def _figure(results):
    """The figure of an experiment: ``plot_bands(results)`` where its result has it, else
    the first seed's ``plot()``."""
    first = results[0]
    if hasattr(first, "plot_bands"):
        return first.plot_bands(results)
    return first.plot()


def _use_agg():
    """Draw without a display (a no-op where pyplot already runs another backend)."""
    import matplotlib

    matplotlib.use("Agg", force=False)


def _save_figure(fig, path):
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(results):
    """A short Markdown table of the headline numbers of ``results``.

    Parameters
    ----------
    results : dict
        As returned by :func:`reproduce`.

    Returns
    -------
    str
        The Markdown table of the first seed's numbers; for the results of
        :func:`reproduce`, then the bands of the headline numbers over the
        seeds (median [min, max]), the experiments that ran one seed, and
        the settings each record calls its own (not the paper's).
    """
    rows = ["| experiment | measure | value |", "|---|---|---|"]
    for name, record in RECORDS.items():
        if results.get(name) is not None:
            record.summary_rows(rows, results[name])
    bands = getattr(results, "headline", None)
    if bands is None:
        return "\n".join(rows)
    seeds = results.seeds
    if any(b is not None for b in bands.values()):
        rows += ["", "Headline numbers over seeds:", "", *_seeds.band_rows(bands, seeds)]
    inside = [name for name in bands if bands[name] is not None and RECORDS[name].seeds_inside]
    if inside:
        rows += [
            "",
            "Run once over seeds of their own (their numbers are means over those seeds, "
            f"with _min and _max): {', '.join(inside)}.",
        ]
    single = [name for name, b in bands.items() if b is None]
    if single:
        rows += [
            "",
            f"One seed ({seeds[single[0]][0]}), no headline numbers to band: {', '.join(single)}.",
        ]
    ours = {
        name: [key for key, where in prov.items() if str(where).startswith("ours")]
        for name, prov in results.provenance.items()
    }
    if any(ours.values()):
        rows += [
            "",
            "Settings that are ours, not the paper's (sources: results.json, meta.provenance):",
            "",
        ]
        rows += [f"- {name}: {', '.join(keys)}" for name, keys in ours.items() if keys]
    return "\n".join(rows)


def _check_preset(preset):
    if preset not in SIZES:
        raise ValueError(f"preset must be one of {', '.join(SIZES)}, got {preset!r}.")


class Plan(dict):
    """What :func:`plan` returns: experiment name to its estimate, with the run's wall time.

    Attributes
    ----------
    n_jobs : int
        Worker processes the runs are spread over.
    wall_seconds : float
        Estimated wall-clock seconds of the whole run: the runs (one per
        experiment and seed) placed longest first on the processes, each
        process on a core of its own where there are enough, plus the start
        of the processes.
    """

    def __init__(self, estimates, *, n_jobs, wall_seconds):
        super().__init__(estimates)
        self.n_jobs = n_jobs
        self.wall_seconds = wall_seconds


_WORKER_START_S = 5.0
"""Estimated seconds to start a worker process (Python, torch and the package imported)."""


def wall_time(run_seconds, n_jobs, *, cores=None):
    """Estimated wall-clock seconds of runs of ``run_seconds`` on ``n_jobs`` processes.

    The runs go longest first to the least loaded process (as a pool hands
    out work); processes beyond the usable cores share them. One process runs
    in this process, with no start-up.
    """
    cores = _seeds.usable_cores() if cores is None else cores
    if n_jobs <= 1 or not run_seconds:
        return float(sum(run_seconds))
    loads = [0.0] * n_jobs
    for seconds in sorted(run_seconds, reverse=True):
        loads[loads.index(min(loads))] += seconds
    share = max(1.0, n_jobs / max(cores, 1))  # more processes than cores: they share them
    return float(max(loads) * share + _WORKER_START_S)


def plan(preset="quick", *, only=None, device="auto", n_threads=None, n_seeds=None, n_jobs=None):
    """The fits, steps and estimated seconds of :func:`reproduce`, from a few timed steps.

    Every part of every experiment is timed on this machine: two short
    ``fit_online`` runs of one of its models (2 and 6 steps) give a step's
    time and a fit's fixed cost, and a prediction on up to 256 rows the
    scoring's; the estimate scales them to the planned fits, steps and rows,
    times the seeds the experiment runs. Where a width search decides how
    many fits run, the record's expected number is used (see the
    experiment's record). The wall time of the whole run places the runs
    (one per experiment and seed) on ``n_jobs`` processes (:func:`wall_time`).
    Takes seconds to tens of seconds.

    Parameters
    ----------
    preset : {"tiny", "quick", "full", "gpu"}, default="quick"
        The size, as in :func:`reproduce`.
    only : str or sequence of str, default=None
        The experiments, as in :func:`reproduce`.
    device : str, default="auto"
        Device the steps are timed on.
    n_threads : int, default=None
        PyTorch CPU threads while timing (restored afterwards); None is
        one, as each run of :func:`reproduce`.
    n_seeds : int, default=None
        Seeds per experiment with headline numbers, as in :func:`reproduce`.
    n_jobs : int, default=None
        Worker processes, as in :func:`reproduce`.

    Returns
    -------
    Plan
        Per experiment (a dict): ``fits``, ``steps`` and ``seconds``
        (estimated, all its seeds together), ``seeds`` (how many),
        ``seconds_per_seed``, and ``parts``, one seed's fits, steps and
        seconds per part; its ``wall_seconds`` and ``n_jobs`` give the
        whole run's.

    Examples
    --------
    >>> from stsq_learn.experiments import plan
    >>> est = plan("tiny", only="convergence")
    >>> est["convergence"]["fits"], est["convergence"]["steps"], est["convergence"]["seeds"]
    (2, 60, 1)
    """
    _check_preset(preset)
    names = resolve_experiments(only)
    resolved = resolve_device(device)
    seed_count = _seeds.resolve_n_seeds(_seeds.check_n_seeds(n_seeds), preset)
    _seeds.check_n_jobs(n_jobs)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1 if n_threads is None else check_positive_int(n_threads, "n_threads"))
    try:
        out, runs = {}, []
        for name in names:
            record = RECORDS[name]
            k = len(_seeds.seeds_of(record, 0, seed_count))
            parts = estimate(record.planned_work(preset), device=str(resolved))
            per_seed = round(sum(p["seconds"] for p in parts), 1)
            out[name] = {
                "fits": k * sum(p["fits"] for p in parts),
                "steps": k * sum(p["steps"] for p in parts),
                "seconds": round(k * per_seed, 1),
                "seeds": k,
                "seconds_per_seed": per_seed,
                "parts": parts,
            }
            runs += [per_seed] * k
        workers = _seeds.resolve_n_jobs(n_jobs, len(runs), device=resolved.type)
        return Plan(out, n_jobs=workers, wall_seconds=round(wall_time(runs, workers), 1))
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
        The table (time: all seeds of an experiment together), then, for a
        :class:`Plan`, the estimated wall time on its processes.
    """
    rows = ["| experiment | fits | steps | estimated time | seeds |", "|---|---|---|---|---|"]
    for name, est in estimates.items():
        rows.append(
            f"| {name} | {est['fits']} | {est['steps']} | {_duration(est['seconds'])} | "
            f"{est.get('seeds', 1)} |"
        )
    total = sum(e["seconds"] for e in estimates.values())
    fits = sum(e["fits"] for e in estimates.values())
    steps = sum(e["steps"] for e in estimates.values())
    rows.append(f"| total | {fits} | {steps} | {_duration(total)} | |")
    wall = getattr(estimates, "wall_seconds", None)
    if wall is not None:
        n_jobs = estimates.n_jobs
        where = "in this process" if n_jobs == 1 else f"on {n_jobs} processes"
        rows.append(f"\nEstimated wall time {where}: {_duration(wall)}.")
    return "\n".join(rows)


def _duration(seconds):
    """``"42 s"``, ``"12 min"`` or ``"2.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
