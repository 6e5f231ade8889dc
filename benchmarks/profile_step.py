"""Where a training step of an estimator goes: the batch, the model, the optimiser, the engine.

Run from the repository root after ``pip install .``::

    python benchmarks/profile_step.py TASK [--steps N] [--members S] [--profile]

``TASK`` is one of ``selection``, ``fcn``, ``averaging``, ``retrieval``,
``in_context`` (at the sizes of ``benchmarks/run.py``'s entries: T=64,
d=16, q=4, width 256 for the selection models; d=20, N=40, batch 1000 for
in-context regression). The script runs ``fit_online`` (one thread, 3 runs
of ``--steps`` steps, the median run reported) and measures, in the
same run, the process seconds spent in each part of the steps:

* ``batch``: drawing the step's batch (``task.sample_torch``: building the
  prompts or rows);
* ``model``: the module's forward (with its encoding draws), the loss and
  the backward (skorch's ``train_step_single``);
* ``optimiser``: the optimiser's step and ``zero_grad``;
* ``engine``: the rest of a step: skorch's loop, the history, the
  callbacks, the checks (the step's time less the three parts).

``--members S`` times ``fit_online_members`` of S seeds instead.
``--profile`` adds ``torch.profiler``'s table of the operators of a run, and
cProfile's 25 costliest Python functions. The figures move with the load of
the machine: compare parts of one run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings

import torch
from sklearn.base import clone

from stsq_learn import (
    FCNSelector,
    InContextRegressionTask,
    LinearAttentionRegressor,
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenAverager,
    SparseTokenRetriever,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.engine.members import fit_online_members

TASKS = {
    "selection": lambda: (SparseTokenSelector(256), SparseTokenSelectionTask(64, 16, 4)),
    "fcn": lambda: (FCNSelector(256), SparseTokenSelectionTask(64, 16, 4)),
    "averaging": lambda: (SparseTokenAverager(256), SparseAveragingTask(64, 16, 4)),
    "retrieval": lambda: (SparseTokenRetriever(64, n_heads=2), SparseRetrievalTask(64, 16, 2)),
    "in_context": lambda: (
        LinearAttentionRegressor(learning_rate_init=0.005, batch_size=1000),
        InContextRegressionTask(41, 20),
    ),
}


class _Clock:
    """Process seconds spent in some methods during a run, by name (the calls nest)."""

    def __init__(self):
        self.seconds = {}

    def wrap(self, owner, method, name):
        original = getattr(owner, method)
        seconds = self.seconds

        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.process_time() - start

        setattr(owner, method, timed)
        return original


def profile(name, steps=100, members=1, repeats=3, deep=False, out=print):
    """Per step, in milliseconds: the whole step and its parts (see the module)."""
    from skorch import NeuralNet

    from stsq_learn.engine.training import OnlineData

    est, task = TASKS[name]()
    est.set_params(device="cpu", dtype="float32", random_state=0)

    def fit():
        models = [clone(est).set_params(random_state=s) for s in range(members)]
        if members > 1:
            fit_online_members(models, task, n_steps=steps)
        else:
            models[0].fit_online(task, n_steps=steps)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit()  # warm: lazy imports, first kernels
        runs = []
        for _ in range(repeats):
            clock = _Clock()
            patched = [
                (OnlineData, "draw", "batch"),
                (NeuralNet, "train_step_single", "model"),
                (NeuralNet, "_step_optimizer", "optimiser and model"),
                (NeuralNet, "run_single_epoch", "step"),
            ]
            originals = [clock.wrap(o, m, n) for o, m, n in patched]
            try:
                fit()
            finally:
                for (owner, method, _), original in zip(patched, originals):
                    setattr(owner, method, original)
            runs.append(clock.seconds)
    run = sorted(runs, key=lambda r: r["step"])[len(runs) // 2]  # the median run
    step = run["step"] / steps
    rows = {
        "step": step,
        "batch": run.get("batch", 0.0) / steps,
        "model": run["model"] / steps,
        "optimiser": (run["optimiser and model"] - run["model"]) / steps,
    }
    rows["engine"] = step - rows["batch"] - rows["model"] - rows["optimiser"]
    size = est._rows_per_step(task.reference_length)
    out(f"{name}: {type(est).__name__}, {members} member(s), {steps} steps, batch {size}")
    for key, value in rows.items():
        share = f"{100 * value / step:5.1f} %" if key != "step" else ""
        out(f"  {key:<10} {value * 1e3:8.3f} ms {share}")
    if deep:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                fit()
            out(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
            stats = cProfile.Profile()
            stats.runcall(fit)
        buffer = io.StringIO()
        pstats.Stats(stats, stream=buffer).sort_stats("tottime").print_stats(25)
        out(buffer.getvalue())
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=sorted(TASKS))
    p.add_argument("--steps", type=int, default=100, help="steps of each timed run")
    p.add_argument("--members", type=int, default=1, help="seeds trained as one model")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--profile", action="store_true", help="operator and Python profiles")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    profile(a.task, a.steps, a.members, deep=a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
