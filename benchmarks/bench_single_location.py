"""Projected GD on single-location regression over seeds: ours batched, one after another, JAX.

At the paper's sizes (d=400, L=10, gamma^2 = 1/2, step 0.004, lambda_t =
1 / (1 + 1e-4 t), from the sphere), for each number of seeds S in
``seeds``, three runners alternate in one process (repeat r starts with
runner r mod 3), each timing ``n_steps`` steps of S runs on one thread:

* ``ours batched``: :func:`~stsq_learn.tasks.single_location.batch.fit_online_seeds`,
  the S runs as one batched NumPy computation (for S = 1, ``fit_online``
  itself), the whole call timed (validation, starts, the curves);
* ``ours one by one``: ``ErfAttentionRegressor.fit_online`` for each seed in
  turn, what 0.5 did;
* ``jax vmap``: the peer, ``single_location_jax.py`` beside this file (a
  reimplementation of the authors' update in JAX, float32, the S runs
  vmapped, one jitted call per step as their ``run.py`` drives it;
  ``jax_driver="scan"`` runs the steps under ``lax.scan`` instead). Its
  compilation is timed apart and not counted. When ``jax`` and ``quadax``
  import here it runs in this process; else in the interpreter
  ``jax_python`` (or ``$STSQ_BENCH_JAX_PYTHON``) names, started once per
  repeat with one XLA thread; with neither, the JAX part is skipped and says
  why.

Reported per S: the medians of seconds per step (the timed seconds /
``n_steps``), and the medians of the per-repeat ratios ours / JAX (below 1:
ours is faster) and batched / one by one. The authors' code pins
``jax==0.4.31`` and ``quadax==0.2.2``; later quadax releases make their
integral an order of magnitude slower, so use theirs for a fair peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import single_location_jax as peer
from _harness import compare

from stsq_learn import ErfAttentionRegressor, SingleLocationTask
from stsq_learn.tasks.single_location.batch import fit_online_seeds

HERE = Path(__file__).resolve().parent
BATCHED, ONE_BY_ONE, JAX = "ours batched", "ours one by one", "jax vmap"

CONFIG = dict(
    n_features=400,
    seq_len=10,
    n_steps=20_000,
    seeds=(1, 10),
    learning_rate=0.004,
    lambda_init=1.0,
    lambda_decay=1e-4,
    repeats=3,
    jax_python=None,
    jax_driver="loop",
)
QUICK = dict(n_steps=300, repeats=2)

_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _estimator(cfg):
    return ErfAttentionRegressor(
        learning_rate_init=cfg["learning_rate"],
        lambda_init=cfg["lambda_init"],
        lambda_decay=cfg["lambda_decay"],
        max_iter=cfg["n_steps"],
    )


def ours(cfg, n_seeds, batched):
    """A runner: ``n_seeds`` runs of ``n_steps``, batched or one after another."""
    task = SingleLocationTask(cfg["seq_len"], cfg["n_features"])
    est = _estimator(cfg)

    def run(rep):
        seeds = range(rep * n_seeds, (rep + 1) * n_seeds)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*worse than no model")
            t0 = time.perf_counter()
            if batched:
                fit_online_seeds(est, task, seeds)
            else:
                for seed in seeds:
                    est.set_params(random_state=seed).fit_online(task)
            seconds = time.perf_counter() - t0
        return {"seconds": seconds, "seconds_per_step": seconds / cfg["n_steps"]}

    return run


def jax_runner(cfg, n_seeds):
    """The JAX runner, in this process or in ``jax_python``; (None, why) when neither can."""
    args = dict(
        n_seeds=n_seeds,
        n_steps=cfg["n_steps"],
        d=cfg["n_features"],
        L=cfg["seq_len"],
        alpha=cfg["learning_rate"],
        lambda_init=cfg["lambda_init"],
        lambda_decay=cfg["lambda_decay"],
        driver=cfg["jax_driver"],
    )
    os.environ.setdefault("XLA_FLAGS", _XLA_ONE_THREAD)  # before jax is imported here
    python = cfg["jax_python"] or os.environ.get("STSQ_BENCH_JAX_PYTHON")
    if peer.available() is None and not python:

        def run_here(rep):
            return _per_step(peer.time_run(**args), cfg)

        return run_here, None
    if not python:
        return None, (
            f"{peer.available()}; set jax_python (--set single_location.jax_python=PATH) or "
            "$STSQ_BENCH_JAX_PYTHON to an interpreter that has them"
        )
    command = [python, str(HERE / "single_location_jax.py")]
    command += ["--seeds", str(n_seeds), "--steps", str(cfg["n_steps"])]
    command += ["--d", str(args["d"]), "--L", str(args["L"]), "--alpha", str(args["alpha"])]
    command += ["--lambda-init", str(args["lambda_init"])]
    command += ["--lambda-decay", str(args["lambda_decay"]), "--driver", args["driver"]]
    env = dict(os.environ, XLA_FLAGS=_XLA_ONE_THREAD, OMP_NUM_THREADS="1")
    env["JAX_PLATFORMS"] = "cpu"
    probe = subprocess.run(
        [python, "-c", "import jax, quadax"], env=env, capture_output=True, text=True
    )
    if probe.returncode:
        return None, f"{python} cannot import jax and quadax: {probe.stderr.strip()[-200:]}"

    def run_there(rep):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return _per_step(json.loads(done.stdout.strip().splitlines()[-1]), cfg)

    return run_there, None


def _per_step(rec, cfg):
    return {
        "seconds": rec["seconds"],
        "seconds_per_step": rec["seconds"] / cfg["n_steps"],
        "compile_seconds": rec["compile_seconds"],
        "jax": rec["jax"],
        "quadax": rec["quadax"],
    }


def run(cfg, ctx):
    out = {"per_seeds": {}}
    if ctx is not None and ctx.threads != 1:
        out["note"] = "the JAX side runs on one XLA thread whatever --threads says"
    for n_seeds in cfg["seeds"]:
        runners = {BATCHED: ours(cfg, n_seeds, True), ONE_BY_ONE: ours(cfg, n_seeds, False)}
        pairs = [(BATCHED, ONE_BY_ONE)]
        peer, why = jax_runner(cfg, n_seeds)
        if peer is None:
            out["jax_skipped"] = why
        else:
            runners[JAX] = peer
            pairs += [(BATCHED, JAX), (ONE_BY_ONE, JAX)]
        if ctx is not None:
            ctx.log(f"  {n_seeds} seed(s): {', '.join(runners)}")
        out["per_seeds"][str(n_seeds)] = compare(runners, pairs, cfg["repeats"])
    return out


def table(rec):
    rows = []
    for n_seeds, res in rec["per_seeds"].items():
        for name, r in res["runners"].items():
            rows.append((f"S={n_seeds} {name}", f"{1e6 * r['seconds_per_step']:.0f} us/step"))
        for c in res["comparisons"]:
            rows.append((f"S={n_seeds} {c['ours']} / {c['peer']}", f"x{c['time_ratio']:.2f}"))
    if "jax_skipped" in rec:
        rows.append(("jax vmap", f"skipped: {rec['jax_skipped']}"))
    return rows


if __name__ == "__main__":  # python benchmarks/bench_single_location.py [--quick]
    import _harness
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        cfg = _harness.merge_config(sys.modules[__name__], quick="--quick" in sys.argv)
        result = run(cfg, _harness.Context(quick="--quick" in sys.argv))
    for label, text in table(result):
        print(f"{label:40s} {text}")
