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

from .. import __version__
from .._validation import check_positive_int, check_scheduler, resolve_device
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


def reproduce(
    preset="quick",
    *,
    out=None,
    device="auto",
    seed=0,
    only=None,
    n_threads=None,
    progress=True,
    log=None,
    scheduler=None,
):
    """Run the paper's experiments; optionally write figures and ``results.json``.

    Parameters
    ----------
    preset : {"tiny", "quick", "full", "gpu"}, default="quick"
        Sizes (see ``PRESETS``): ``"quick"`` takes a few minutes on 2 CPU
        cores, ``"full"`` about an hour on 2 CPU cores, ``"gpu"`` is sized
        for one GPU, ``"tiny"`` for tests. :func:`plan` estimates the time.
    out : str or path, default=None
        Directory to write ``<experiment>.png``, ``results.json`` and
        ``summary.md`` into (created if missing); None writes nothing.
    device : str, default="auto"
        Training device of every model.
    seed : int, default=0
        Seed of every experiment.
    only : str or sequence of str, default=None
        Run only these experiments (names of ``EXPERIMENTS``, or the aliases
        ``"length"``, ``"width"`` and ``"averaging"``).
    n_threads : int, default=None
        PyTorch intra-op CPU threads during the run (restored afterwards);
        None keeps the current setting. The models are small, so on a busy
        or small CPU one thread is often fastest: several threads competing
        with other processes can make each step many times slower.
    progress : bool, default=True
        Show tqdm progress bars (on stderr).
    log : callable, default=None
        Called with a line of text after each experiment (e.g. ``print``).
    scheduler : str, default=None
        Run the width-separation sweep on a dask cluster: ``"local:N"`` (a
        LocalCluster of N worker processes) or a scheduler address; see
        :func:`width_separation`. None runs everything in this process.

    Returns
    -------
    results : dict
        Experiment name to its result object, in ``EXPERIMENTS`` order.

    Examples
    --------
    >>> from stsq_learn.experiments import reproduce, summary_table
    >>> results = reproduce("tiny", only="convergence", progress=False)
    >>> list(results)
    ['convergence']
    """
    _check_preset(preset)
    names, resolved = check_run_options(
        out=out, device=device, seed=seed, only=only, n_threads=n_threads, scheduler=scheduler
    )
    threads_before = torch.get_num_threads()
    try:
        if n_threads is not None:
            torch.set_num_threads(n_threads)
        return _run(preset, names, resolved, seed, out, progress, log, scheduler)
    finally:
        torch.set_num_threads(threads_before)


def check_run_options(*, out, device, seed, only, n_threads, scheduler):
    """Check every option of :func:`reproduce` but the size; return ``(names, device)``.

    All of them are checked before any work, and the same way for a plan of
    the run (``stsq-learn reproduce --plan``) as for the run itself: a run
    that its plan accepts does not fail on its options.
    """
    names = resolve_experiments(only)
    resolved = resolve_device(device)
    check_seed(seed)
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


def _run(preset, names, resolved, seed, out, progress, log, scheduler=None):
    out_dir = None if out is None else Path(out)
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"out={str(out)!r} cannot be created: {exc.strerror or exc}."
            ) from None
    results, timings = {}, {}
    for name in names:
        start = time.perf_counter()
        function = RECORDS[name].function
        extra = {"scheduler": scheduler} if scheduler and _takes_scheduler(name) else {}
        results[name] = function(
            **RECORDS[name].presets[preset],
            device=str(resolved),
            random_state=seed,
            progress=progress,
            **extra,
        )
        timings[name] = round(time.perf_counter() - start, 1)
        if out_dir is not None:
            _save_figure(results[name], out_dir / f"{name}.png")
        if log is not None:
            log(f"{name}: done in {timings[name]} s")
    if out_dir is not None:
        payload = {
            "meta": {
                "stsq_learn": __version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
                "preset": preset,
                "device": str(resolved),
                "seed": seed,
                "torch_threads": torch.get_num_threads(),
                "seconds": timings,
            },
            **{name: res.to_dict() for name, res in results.items()},
        }
        (out_dir / "results.json").write_text(json.dumps(payload, indent=2) + "\n")
        (out_dir / "summary.md").write_text(summary_table(results) + "\n")
    return results


def _save_figure(result, path):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = result.plot()
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
        The Markdown table.
    """
    rows = ["| experiment | measure | value |", "|---|---|---|"]
    for name, record in RECORDS.items():
        if results.get(name) is not None:
            record.summary_rows(rows, results[name])
    return "\n".join(rows)


def _check_preset(preset):
    if preset not in SIZES:
        raise ValueError(f"preset must be one of {', '.join(SIZES)}, got {preset!r}.")


def plan(preset="quick", *, only=None, device="auto", n_threads=None):
    """The fits, steps and estimated seconds of :func:`reproduce`, from a few timed steps.

    Every part of every experiment is timed on this machine: two short
    ``fit_online`` runs of one of its models (2 and 6 steps) give a step's
    time and a fit's fixed cost, and a prediction on up to 256 rows the
    scoring's; the estimate scales them to the planned fits, steps and rows.
    Where a width search decides how many fits run, the record's expected
    number is used (see the experiment's record). Takes seconds to tens of
    seconds.

    Parameters
    ----------
    preset : {"tiny", "quick", "full", "gpu"}, default="quick"
        The size, as in :func:`reproduce`.
    only : str or sequence of str, default=None
        The experiments, as in :func:`reproduce`.
    device : str, default="auto"
        Device the steps are timed on.
    n_threads : int, default=None
        PyTorch CPU threads while timing (restored afterwards).

    Returns
    -------
    dict of str to dict
        Per experiment: ``fits``, ``steps`` and ``seconds`` (estimated), and
        ``parts``, the same per part.

    Examples
    --------
    >>> from stsq_learn.experiments import plan
    >>> est = plan("tiny", only="convergence")
    >>> est["convergence"]["fits"], est["convergence"]["steps"]
    (1, 30)
    """
    _check_preset(preset)
    names = resolve_experiments(only)
    resolved = str(resolve_device(device))
    threads_before = torch.get_num_threads()
    if n_threads is not None:
        torch.set_num_threads(check_positive_int(n_threads, "n_threads"))
    try:
        out = {}
        for name in names:
            record = RECORDS[name]
            parts = estimate(record.work(**record.presets[preset]), device=resolved)
            out[name] = {
                "fits": sum(p["fits"] for p in parts),
                "steps": sum(p["steps"] for p in parts),
                "seconds": round(sum(p["seconds"] for p in parts), 1),
                "parts": parts,
            }
        return out
    finally:
        torch.set_num_threads(threads_before)


def plan_table(estimates):
    """A Markdown table of :func:`plan`'s estimates, with the total.

    Parameters
    ----------
    estimates : dict
        As returned by :func:`plan`.

    Returns
    -------
    str
        The table.
    """
    rows = ["| experiment | fits | steps | estimated time |", "|---|---|---|---|"]
    for name, est in estimates.items():
        rows.append(f"| {name} | {est['fits']} | {est['steps']} | {_duration(est['seconds'])} |")
    total = sum(e["seconds"] for e in estimates.values())
    fits = sum(e["fits"] for e in estimates.values())
    steps = sum(e["steps"] for e in estimates.values())
    rows.append(f"| total | {fits} | {steps} | {_duration(total)} |")
    return "\n".join(rows)


def _duration(seconds):
    """``"42 s"``, ``"12 min"`` or ``"2.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
