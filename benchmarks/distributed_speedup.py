"""Speed-up of the gallery's grid search on a LocalCluster: 2 workers vs 1.

Runs the search of ``examples/plot_distributed_grid_search.py`` (12 fits:
width in {8, 32, 128} x stochastic/fixed encodings x 2 folds, length-shift
scoring at T and 4T) in three ways, ``--repeats`` times each:

- ``sequential``: in this process, joblib's default backend, one torch thread;
- ``1 worker`` and ``2 workers``: :func:`stsq_learn.distributed.dask_backend`
  with ``"local:1"`` / ``"local:2"`` (single-threaded worker processes, one
  torch thread each), a fresh cluster per repeat.

For the clusters it times the start-up, the first search on the fresh
cluster (``cold``: workers import torch and the package) and a second search
on the same cluster (``warm``). It prints medians and the 1-worker / 2-worker
ratios, and checks that every run gave the sequential scores exactly.

Usage::

    python benchmarks/distributed_speedup.py            # 3 repeats
    python benchmarks/distributed_speedup.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from stsq_learn import SparseTokenSelector, length_shift_scoring, make_sparse_token_selection
from stsq_learn.distributed import dask_backend


def make_search():
    """The example's search (keep in step with examples/plot_distributed_grid_search.py)."""
    return GridSearchCV(
        SparseTokenSelector(max_iter=50, learning_rate_init=0.03, random_state=0),
        {"width": [8, 32, 128], "positional_encoding": ["stochastic", "fixed"]},
        scoring=length_shift_scoring((1, 4), random_state=0),
        cv=KFold(2, shuffle=True, random_state=0),
        refit=False,
    )


def scores(search):
    return np.concatenate(
        [v for k, v in sorted(search.cv_results_.items()) if k.startswith("split")]
    )


def timed_fit(X, y):
    search = make_search()
    start = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - start, scores(search)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    torch.set_num_threads(1)
    X, y = make_sparse_token_selection(1000, seq_len=16, n_features=4, n_selected=3, random_state=0)

    times = {"sequential": []}
    for n in (1, 2):
        for phase in ("start-up", "cold", "warm"):
            times[f"{n} worker(s) {phase}"] = []
    reference = None
    for repeat in range(args.repeats):
        seconds, ref = timed_fit(X, y)
        times["sequential"].append(seconds)
        if reference is None:
            reference = ref
        assert np.array_equal(ref, reference), "sequential run not reproducible"
        for n in (1, 2):
            start = time.perf_counter()
            with dask_backend(f"local:{n}"):
                times[f"{n} worker(s) start-up"].append(time.perf_counter() - start)
                for phase in ("cold", "warm"):
                    seconds, got = timed_fit(X, y)
                    times[f"{n} worker(s) {phase}"].append(seconds)
                    assert np.array_equal(got, reference), f"{n} workers, {phase}: other scores"
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)

    load = os.getloadavg()
    print(f"\n{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(f"medians of {args.repeats} repeats (seconds; all runs gave identical scores)\n")
    print(f"{'run':28s} {'median':>8s}   all")
    for name, values in times.items():
        runs = " ".join(f"{v:.1f}" for v in values)
        print(f"{name:28s} {statistics.median(values):8.2f}   {runs}")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\nspeed-up 2 workers vs 1, warm search:      "
        f"{med['1 worker(s) warm'] / med['2 worker(s) warm']:.2f}x"
    )
    print(
        f"speed-up 2 workers vs 1, cold search:      "
        f"{med['1 worker(s) cold'] / med['2 worker(s) cold']:.2f}x"
    )
    end_to_end = {n: med[f"{n} worker(s) start-up"] + med[f"{n} worker(s) cold"] for n in (1, 2)}
    print(
        f"speed-up 2 workers vs 1, start-up + cold:  {end_to_end[1] / end_to_end[2]:.2f}x "
        f"({end_to_end[1]:.1f} s vs {end_to_end[2]:.1f} s)"
    )
    print(
        f"2 workers (warm) vs sequential in-process: "
        f"{med['sequential'] / med['2 worker(s) warm']:.2f}x"
    )


if __name__ == "__main__":
    main()
