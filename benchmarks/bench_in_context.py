"""In-context regression: ``LinearAttentionRegressor.fit_online`` against the plain PyTorch loop.

The peer code of the literature, Garg, Tsipras, Liang and Valiant
(NeurIPS 2022, ``dtsip/in-context-learning``), trains a 9.5M-parameter GPT-2
(12 layers, 8 heads, width 256) on prompts of up to 40 examples in d = 20,
batch 64, Adam at 1e-4, for 500k steps (32M prompts) on a GPU: not runnable
here, and not the model of the theory. Scaled to a CPU, the comparison is
with what a user of the theory would otherwise write: the same one-layer
linear self-attention as a plain PyTorch loop (``baselines.plain_lsa_online``:
the value scalar and the key-query block, the paper's initialisation, fresh
prompts at every step, Adam, the same schedule), at the peer's sizes d = 20,
N = 40 (prompts of 40 examples, ``Lambda = I``).

Two runners alternate in one process, ``repeats`` times, each training
``n_steps`` steps of ``batch_size`` prompts (Adam at ``lr``, constant then
linearly to 0 over the last fifth, float32, one thread) and taking, after
every step, the relative Frobenius distance of ``u U^T`` to
``Gamma^{-1}`` (``in_context_preconditioner``) and the time since the call
began:

* ``stsq-learn``: ``LinearAttentionRegressor(...).fit_online(task, n_steps)``,
  the whole call (validation, memory check, the starting model's loss, the
  skorch net), the distance taken by a skorch callback;
* ``plain torch loop``: ``baselines.plain_lsa_online``.

Reported: the medians of the seconds per step, of the seconds and steps
until the distance first falls below ``target`` (5%), and of the final
distance; the median of the per-repeat time ratios ours / plain.
"""

from __future__ import annotations

import statistics
import time

import baselines
import numpy as np
from _harness import compare
from skorch.callbacks import Callback

from stsq_learn import InContextRegressionTask, LinearAttentionRegressor, in_context_preconditioner

OURS = "stsq-learn"

CONFIG = dict(
    n_features=20,
    n_examples=40,
    batch_size=1000,
    n_steps=1000,
    lr=0.005,
    target=0.05,
    repeats=3,
)
QUICK = dict(n_features=5, n_examples=20, batch_size=256, n_steps=500, lr=0.01, repeats=2)


class _Distance(Callback):
    """After every training step: the distance of ``u U^T`` to the target and the time."""

    def __init__(self, target, start):
        self.target, self.start = target, start

    def initialize(self):
        self.errors_, self.times_ = [], []
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            A = net.module_.preconditioner().detach().numpy()
            self.errors_.append(
                float(np.linalg.norm(A - self.target) / np.linalg.norm(self.target))
            )
            self.times_.append(time.perf_counter() - self.start[0])


def _record(seconds, errors, times, cfg):
    """Seconds per step, the first step below the target and its time, the final distance."""
    below = [i for i, e in enumerate(errors) if e < cfg["target"]]
    return {
        "seconds": seconds,
        "seconds_per_step": seconds / cfg["n_steps"],
        "steps_to_target": below[0] + 1 if below else None,
        "seconds_to_target": times[below[0]] if below else None,
        "final_distance": errors[-1],
    }


def runners(cfg):
    d, m = cfg["n_features"], cfg["n_examples"]
    task = InContextRegressionTask(m + 1, d)
    target = in_context_preconditioner(m, np.ones(d))
    gamma_norm = float(np.linalg.norm(np.linalg.inv(target), 2))
    init_scale = 1 / np.sqrt(gamma_norm * np.sqrt(d))  # the estimator's "auto"

    def ours(seed):
        start = [0.0]
        distance = _Distance(target, start)
        model = LinearAttentionRegressor(
            learning_rate_init=cfg["lr"],
            batch_size=cfg["batch_size"],
            device="cpu",
            random_state=seed,
            callbacks=[distance],
        )
        start[0] = time.perf_counter()
        model.fit_online(task, n_steps=cfg["n_steps"])
        seconds = time.perf_counter() - start[0]
        return _record(seconds, distance.errors_, distance.times_, cfg)

    def plain(seed):
        out = baselines.plain_lsa_online(
            n_examples=m,
            n_features=d,
            batch_size=cfg["batch_size"],
            n_steps=cfg["n_steps"],
            lr=cfg["lr"],
            init_scale=init_scale,
            seed=seed,
            target=target,
        )
        return _record(out["seconds"], out["errors"], out["times"], cfg)

    return {OURS: ours, baselines.PLAIN_LOOP: plain}


def warm_up():
    small = dict(n_features=2, n_examples=3, batch_size=8, n_steps=2)
    for fn in runners({**CONFIG, **small}).values():
        fn(0)


def run(cfg, ctx):
    rec = compare(runners(cfg), pairs=[(OURS, baselines.PLAIN_LOOP)], repeats=cfg["repeats"])
    for r in rec["runners"].values():  # None (not reached) is not a number: medians by hand
        for key in ("steps_to_target", "seconds_to_target"):
            values = [v for v in r.get(f"all_{key}", [r[key]]) if v is not None]
            r[key] = statistics.median(values) if values else None
    return rec


def table(rec):
    lines = []
    for name, r in rec["runners"].items():
        reach = (
            f"{r['seconds_to_target']:.2f} s ({r['steps_to_target']:.0f} steps)"
            if r["seconds_to_target"] is not None
            else "not reached"
        )
        lines.append(
            (
                name,
                f"{r['seconds_per_step'] * 1e3:.2f} ms/step, to 5% of Gamma^-1: {reach}, "
                f"final {r['final_distance']:.4f}",
            )
        )
    c = rec["comparisons"][0]
    lines.append((f"{c['ours']} / {c['peer']}", f"time x{c['time_ratio']:.2f}"))
    return lines
