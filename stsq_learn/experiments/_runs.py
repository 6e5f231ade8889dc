"""The worker processes of a run (its numbers the same whatever ``n_jobs``), and the figure
of how far its seeds agree."""

from __future__ import annotations

import math
import os
import time
import warnings

import numpy as np

_WORKER_STOPPED = "A worker stopped while some jobs were given to the executor"
"""The start of loky's warning when it replaced a worker (see :func:`release_memory`)."""


def usable_cores():
    """The CPU cores this process may run on (its affinity where the system says)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def resolve_n_jobs(n_jobs, n_runs, *, device="cpu"):
    """Worker processes for ``n_runs`` runs, never more: None is every usable core on a CPU
    and one on a GPU (the runs share it), -1 every usable core."""
    if n_jobs is None:
        n_jobs = usable_cores() if str(device) == "cpu" else 1
    elif n_jobs == -1:
        n_jobs = usable_cores()
    return max(1, min(n_jobs, n_runs))


def run_one(function, kwargs, n_threads):
    """``(result, seconds)`` of ``function(**kwargs)`` on ``n_threads`` torch threads, each
    batch stream drawn once (:func:`~stsq_learn.engine.batch_reuse.reuse_batches`)."""
    import torch

    from ..engine.batch_reuse import reuse_batches

    before = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        start = time.perf_counter()
        with reuse_batches():
            result = function(**kwargs)
        return result, time.perf_counter() - start
    finally:
        torch.set_num_threads(before)
        release_memory()


def release_memory():
    """Hand the memory a finished run freed back to the system: ``gc``, then ``malloc_trim``.

    glibc keeps a freed heap (300 MB after the quick separation run), which loky reads as a
    leak: it replaces the worker, warning :data:`_WORKER_STOPPED`. Trimmed, a worker stays at
    its real size (822 MB untrimmed, 537 MB trimmed).
    """
    import gc

    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


def run_all(jobs, *, n_jobs, n_threads, progress, log, when_done=None):
    """``{key: (result, seconds)}`` of every job ``(key, function, kwargs)`` on ``n_jobs``
    processes (1: this one; ``progress``: the runs' own bars here, else one over the runs);
    after each, ``log(line)`` and ``when_done(key, result)`` where given, in this process."""
    done = {}

    def finished(key, result, seconds):
        done[key] = (result, seconds)
        if log is not None:
            log(f"{key}: done in {seconds:.1f} s")
        if when_done is not None:
            when_done(key, result)

    if n_jobs <= 1:
        for key, function, kwargs in jobs:
            finished(key, *run_one(function, {**kwargs, "progress": progress}, n_threads))
        return done
    from joblib import Parallel, delayed, parallel_config
    from tqdm.auto import tqdm

    calls = (
        delayed(_keyed)(key, function, {**kwargs, "progress": False}, n_threads)
        for key, function, kwargs in jobs
    )
    bar = tqdm(
        total=len(jobs), desc=f"runs on {n_jobs} processes", leave=False, disable=not progress
    )
    with (
        parallel_config(backend="loky", inner_max_num_threads=n_threads),
        warnings.catch_warnings(),
        bar,
    ):
        # A worker loky replaced (see release_memory): the new one runs the remaining runs.
        warnings.filterwarnings("ignore", message=_WORKER_STOPPED, category=UserWarning)
        for key, result, seconds in Parallel(n_jobs=n_jobs, **_unordered())(calls):
            finished(key, result, seconds)
            bar.update()
    return done


def _keyed(key, function, kwargs, n_threads):
    """:func:`run_one` with the run's key, so that results may come back in any order."""
    return key, *run_one(function, kwargs, n_threads)


def _unordered():
    """Results as they finish where joblib can (1.4 and later), in order otherwise."""
    import joblib

    major, minor = (int(p) for p in joblib.__version__.split(".")[:2])
    return {"return_as": "generator_unordered"} if (major, minor) >= (1, 4) else {}


def plot_bands(bands):
    """``bands.png`` of experiment to its bands (or None): per number a dot at its spread over
    the seeds, ``(max - min) / |median|`` in % (absolute where the median is 0), on a log axis
    with a spread of 0 at the left edge; a bar at the median spread."""
    import matplotlib.pyplot as plt

    shown = [(name, nums) for name, nums in bands.items() if nums]
    if not shown:
        fig, ax = plt.subplots(figsize=(4, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no headline numbers in this run", ha="center", va="center")
        return fig
    floor = 0.01  # % : where a spread of 0 is drawn
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.42 * len(shown)))
    labels = []
    for row, (name, nums) in enumerate(shown):
        spreads = []
        for b in nums.values():
            values = np.asarray(b["values"], dtype=float)
            values = values[np.isfinite(values)]
            med = b["median"]
            if values.size == 0 or not math.isfinite(med):
                continue
            width = float(values.max() - values.min())
            spreads.append(width / abs(med) * 100.0 if med != 0 else width * 100.0)
        drawn = np.maximum(np.asarray(spreads, dtype=float), floor)
        jitter = np.linspace(-0.18, 0.18, drawn.size) if drawn.size > 1 else np.zeros(1)
        if drawn.size:
            ax.scatter(drawn, row + jitter[: drawn.size], s=9, color="C0", alpha=0.6, zorder=3)
            med = float(np.median(drawn))
            ax.plot([med, med], [row - 0.3, row + 0.3], color="C3", lw=2, zorder=4)
        seeds = max(len(b["values"]) for b in nums.values())
        agree = sum(1 for v in spreads if v == 0)
        labels.append(f"{name}\n{len(nums)} numbers, {seeds} seeds, {agree} agree")
    ax.set_xscale("log")
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.axvline(floor, color="0.8", lw=0.8, zorder=1)
    ax.set_xlabel(
        "spread over the seeds, (max - min) / |median| in % (left edge: the seeds agree; "
        "red: the median number)",
        fontsize=7,
    )
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(
        "Headline numbers: how far the seeds agree (bands in each experiment's figure)", fontsize=9
    )
    fig.tight_layout()
    return fig
