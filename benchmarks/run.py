"""Benchmarks of stsq-learn against what a user would run instead, in one process.

One entry point, run from the repository root after ``pip install .``::

    python benchmarks/run.py [--quick] [--only NAME ...] [--out FILE.json]
                             [--threads N] [--repeats N] [--set NAME.KEY=VALUE ...]

The entries (``--only`` picks some, repeatable):

* ``fit``: ``SparseTokenSelector.fit`` against a plain PyTorch loop of the
  same model and against skorch's ``NeuralNetRegressor`` used directly;
* ``online``: ``fit_online`` against the plain loop drawing its own batches;
* ``sampler``: ``fit_online`` step time with the marginal and the full
  encoding sampler as the sequence grows, against drawing the batch itself;
* ``predict``: ``predict`` time with keyed draws against the streamed draws
  of 0.3.0 at T=64 and T=1024, with where the draws' time goes;
* ``fcn``: ``FCNSelector`` against scikit-learn's ``MLPRegressor``;
* ``memory``: peak memory of fit and predict as the sequence grows, and of
  ``fit_online`` at T=16384 as the width grows;
* ``online_memory``: the peak resident set of one ``fit_online`` call at
  T=16384, width 1024, marginal draws, in a fresh process, beside 0.4.0's;
* ``accuracy``: error after online training against ``isotropic_floor``;
* ``parity``: error of models trained with the marginal and the full sampler,
  at the large-width recipe against the floor, and the forward law of both;
* ``defaults``: the defaults' error against the floor as the width grows,
  with ``fit`` and ``fit_online``, and their time against 0.3.0's defaults;
* ``baseline_defaults``: the baselines' defaults against a sweep: each FCN's
  R^2 with its default step and with 5 step sizes, at 3 lengths and 3 budgets,
  and the linear classifiers' accuracy with C=1 and with 5 values of C;
* ``reuse``: a width search's fits and the encodings comparison's models with
  their batch stream drawn once (``reuse_batches``, as ``reproduce`` runs
  them) against each fit drawing its own, checked to end with the same weights;
* ``seeds``: S seeds of ``SparseTokenSelector`` and ``FCNSelector`` trained as
  one batched model (``fit_online_members``) against the same fits one after
  another, at S = 3 and 8;
* ``studies``: a width search whose fits stop at their target over 8 seeds
  and a training curve over 6 seeds, with ``batch_seeds=True`` against the
  same studies seed by seed, checked to give the same numbers;
* ``plan``: what ``dry_run=True`` (``StudyPlan.estimate``) says a study takes
  against what it takes, for a sweep, a length curve, a training curve and
  a stopping width search, with and without ``batch_seeds``;
* ``members``: the classifier's 8 seeds trained as one model against 8 fits
  (the classification experiment's settings), single-location's erf runs
  batched, per setting (the engine's members) and one after another, and the
  engine's cost of a step of the smallest model;
* ``single_location``: projected GD on single-location regression over 1
  and 10 seeds, batched and one after another, against the authors' update
  vmapped in JAX (skipped without jax and quadax);
* ``in_context``: ``LinearAttentionRegressor.fit_online`` at d=20, N=40 against a
  plain PyTorch loop of the same layer: time per step and time until its
  ``preconditioner_`` is within 5% of ``Gamma^{-1}`` (the peer code, a GPT-2
  on a GPU, is not runnable here);
* ``copying``: ``TransformerCopier()`` and an ``LSTMCopier`` of as many
  parameters trained on strings of lengths 5-20 for a wall-clock budget: their
  string accuracy at L = 20 against the training time and the strings seen,
  and at 2x and 4x the length at the end; the n-gram and fixed-state copiers'
  errors against a reference Monte Carlo and their bounds;
* ``gpu``: online throughput on CUDA with both samplers (skipped without it);
* ``distributed``: a grid search on 1 and 2 dask workers (skipped without
  the ``distributed`` extra).

The peers live in ``benchmarks/baselines.py``. Comparisons alternate the
runners within every repeat, with the same torch (and BLAS) thread count,
and report medians and the median of the per-repeat time ratios. ``--set
fit.repeats=5`` changes one size of one entry (the value is read as JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import time
import warnings

try:
    import torch
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    import stsq_learn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    sys.exit(f"{exc}: install the package first (pip install . from the repository root).")

import _harness

#: The registry: entry NAME lives in benchmarks/bench_NAME.py.
ENTRIES = [
    "fit",
    "online",
    "sampler",
    "predict",
    "fcn",
    "memory",
    "online_memory",
    "accuracy",
    "parity",
    "defaults",
    "baseline_defaults",
    "averaging",
    "reuse",
    "seeds",
    "studies",
    "plan",
    "members",
    "single_location",
    "in_context",
    "copying",
    "gpu",
    "distributed",
]

#: Entries that measure what a model learns: a fit there that ends worse than
#: predicting 0 is news, and its warning is shown. The others time short runs,
#: which are not there to learn: their "worse than no model" warning is silenced.
LEARNING_ENTRIES = {"accuracy", "parity", "defaults", "baseline_defaults", "copying"}


def load(name):
    """The module of entry ``name``."""
    if name not in ENTRIES:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {ENTRIES}")
    return importlib.import_module(f"bench_{name}")


def parse_settings(items):
    """``["fit.repeats=5", ...]`` as ``{"fit": {"repeats": 5}}`` (values read as JSON)."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        name, dot, setting = key.partition(".")
        if not (sep and dot and setting):
            raise ValueError(f"--set takes NAME.KEY=VALUE, got {item!r}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(name, {})[setting] = tuple(parsed) if isinstance(parsed, list) else parsed
    return out


def run(
    only=None, quick=False, threads=1, repeats=None, out=None, settings=None, log=print, argv=None
):
    """Run the entries; returns the report (also written to ``out`` as JSON).

    ``argv`` is recorded as the command line of the report.
    """
    names = list(only) if only else list(ENTRIES)
    modules = {name: load(name) for name in names}
    settings = settings or {}
    for name in settings:
        load(name)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    ctx = _harness.Context(quick=quick, threads=threads, log=log)
    try:
        results = _run_entries(modules, settings, quick, repeats, ctx)
    finally:
        torch.set_num_threads(threads_before)
    report = {
        "command": " ".join(["python", "benchmarks/run.py", *(argv or [])]),
        "quick": quick,
        "machine": _harness.machine_info(threads),
        "results": results,
    }
    log(_harness.format_table(results, modules))
    if out:
        _harness.write_report(out, report)
        log(f"wrote {out}")
    return report


def _run_entries(modules, settings, quick, repeats, ctx):
    """Merge each entry's sizes, warm every entry up, then run them in turn."""
    results = {}
    with threadpool_limits(limits=ctx.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        configs = {}
        for name, module in modules.items():
            overrides = dict(settings.get(name, {}))
            if repeats is not None and "repeats" in module.CONFIG:
                overrides.setdefault("repeats", repeats)
            configs[name] = _harness.merge_config(module, quick, overrides)
        for module in modules.values():
            if hasattr(module, "warm_up"):
                with _harness.timing_run():
                    module.warm_up()
        for name, module in modules.items():
            ctx.log(f"running {name} ...")
            t0 = time.perf_counter()
            with contextlib.nullcontext() if name in LEARNING_ENTRIES else _harness.timing_run():
                rec = module.run(configs[name], ctx)
            rec.setdefault("config", configs[name])
            rec["wall_seconds"] = time.perf_counter() - t0
            results[name] = rec
    return results


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (minutes)")
    p.add_argument("--only", action="append", choices=ENTRIES, help="run only this entry")
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (default 1)")
    p.add_argument("--repeats", type=int, help="repeats of every timed comparison")
    p.add_argument(
        "--set", action="append", metavar="NAME.KEY=VALUE", help="change one size of an entry"
    )
    a = p.parse_args(argv)
    try:
        settings = parse_settings(a.set)
    except ValueError as exc:
        p.error(str(exc))
    log = lambda message: print(message, flush=True)  # noqa: E731
    run(a.only, a.quick, a.threads, a.repeats, a.out, settings, log=log, argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
