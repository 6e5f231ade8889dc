"""Step time of ``fit_online`` with the marginal and the full encoding sampler, by length.

At every length T of ``seq_lens`` (d=16, q=4, width 256, batch 256, Adam at
0.01, one thread), three runners alternate in one process (repeat r starts
with runner r mod 3):

* ``marginal`` and ``full``: ``SparseTokenSelector(pe_sampling=...)
  .fit_online(task, n_steps)`` through the estimator. A callback stamps the
  end of every step; a step's time is the gap between two stamps (drawing
  the batch with ``task.sample_torch``, forward, backward, the optimiser and
  skorch's per-batch work). The first ``warmup_steps`` gaps are dropped and a
  run's time is the median of the rest, so the set-up of ``fit_online``
  (validation, building the net) is not counted;
* ``sample_torch``: drawing one batch of the task, ``task.sample_torch(256)``,
  median of ``sample_draws`` draws: the floor of online training.

Reported per T: the medians per runner, and the median of the per-repeat
ratios marginal / full and marginal / sample_torch. ``full`` runs only
where it fits: ``T <= full_max_seq_len`` and its encodings buffer (batch x T
x width floats) within half the memory available (``skipped_full`` says
why not). At ``T >= long_seq_len`` the full sampler's step takes seconds,
so it runs ``long_timed_steps`` timed steps after one warm-up step.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch
from _harness import compare
from skorch.callbacks import Callback

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

MARGINAL, FULL, SAMPLING = "marginal", "full", "sample_torch"

CONFIG = dict(
    seq_lens=(64, 256, 1024, 4096, 16384),
    n_features=16,
    n_selected=4,
    width=256,
    batch_size=256,
    lr=0.01,
    warmup_steps=2,
    timed_steps=8,
    long_seq_len=4096,
    long_timed_steps=3,
    sample_draws=10,
    full_max_seq_len=16384,
    sampling_ratio_seq_len=1024,
    repeats=5,
)
QUICK = dict(timed_steps=5, long_timed_steps=2, sample_draws=5, full_max_seq_len=4096, repeats=3)


class StepClock(Callback):
    """Stamps the end of every training step (``perf_counter``)."""

    def initialize(self):
        self.stamps_ = []
        return self

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.stamps_.append(time.perf_counter())


def step_seconds(estimator, task, warmup_steps, timed_steps):
    """Median seconds of a step of ``estimator.fit_online(task)``, and the wall time per step.

    Runs ``1 + warmup_steps + timed_steps`` steps; the gaps between the ends
    of consecutive steps, the first ``warmup_steps`` dropped, are the steps.
    """
    clock = StepClock()
    estimator.set_params(callbacks=[("step_clock", clock)])
    n_steps = 1 + warmup_steps + timed_steps
    t0 = time.perf_counter()
    estimator.fit_online(task, n_steps=n_steps)
    wall = time.perf_counter() - t0
    stamps = clock.stamps_
    if len(stamps) != n_steps:
        raise RuntimeError(f"expected {n_steps} steps, the clock saw {len(stamps)}")
    gaps = [b - a for a, b in itertools.pairwise(stamps)][warmup_steps:]
    return statistics.median(gaps), wall / n_steps


def sampling_seconds(task, batch_size, draws, seed):
    """Median seconds of ``task.sample_torch(batch_size)`` over ``draws`` draws (after one)."""
    g = torch.Generator().manual_seed(seed)
    task.sample_torch(batch_size, generator=g)
    times = []
    for _ in range(draws):
        t0 = time.perf_counter()
        task.sample_torch(batch_size, generator=g)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _available_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def full_skip_reason(cfg, seq_len):
    """Why the full sampler does not run at ``seq_len`` (None: it runs)."""
    if seq_len > cfg["full_max_seq_len"]:
        return f"T={seq_len} > full_max_seq_len={cfg['full_max_seq_len']}"
    need = 4 * cfg["batch_size"] * seq_len * cfg["width"]
    avail = _available_bytes()
    if avail is not None and need > avail / 2:
        return (
            f"its encodings buffer ({need / 2**30:.1f} GiB) is more than half the "
            f"available memory ({avail / 2**30:.1f} GiB)"
        )
    return None


def runners(cfg, seq_len, with_full):
    task = SparseTokenSelectionTask(seq_len, cfg["n_features"], cfg["n_selected"])
    long = seq_len >= cfg["long_seq_len"]

    def fit(pe_sampling):
        slow = long and pe_sampling == FULL
        warmup = 1 if slow else cfg["warmup_steps"]
        timed = cfg["long_timed_steps"] if slow else cfg["timed_steps"]

        def run(seed):
            model = SparseTokenSelector(
                width=cfg["width"],
                pe_sampling=pe_sampling,
                solver="adam",  # the plain loop's optimiser (the default "auto" resolves to SGD)
                learning_rate="constant",
                learning_rate_init=cfg["lr"],
                batch_size=cfg["batch_size"],
                device="cpu",
                random_state=seed,
            )
            seconds, wall = step_seconds(model, task, warmup, timed)
            return {"seconds": seconds, "wall_seconds_per_step": wall}

        return run

    def sample(seed):
        return {"seconds": sampling_seconds(task, cfg["batch_size"], cfg["sample_draws"], seed)}

    out = {MARGINAL: fit(MARGINAL)}
    if with_full:
        out[FULL] = fit(FULL)
    out[SAMPLING] = sample
    return out


def warm_up():
    small = dict(CONFIG, n_features=2, n_selected=2, width=8, batch_size=16, timed_steps=1)
    for fn in runners(small, 8, with_full=True).values():
        fn(0)


def run(cfg, ctx):
    rows = []
    for T in cfg["seq_lens"]:
        skip = full_skip_reason(cfg, T)
        pairs = [(MARGINAL, SAMPLING)] + ([] if skip else [(MARGINAL, FULL)])
        rec = compare(runners(cfg, T, with_full=skip is None), pairs, repeats=cfg["repeats"])
        ratios = {c["peer"]: c for c in rec["comparisons"]}
        row = {
            "seq_len": T,
            "marginal_ms": 1e3 * rec["runners"][MARGINAL]["seconds"],
            "sampling_ms": 1e3 * rec["runners"][SAMPLING]["seconds"],
            "marginal_over_sampling": ratios[SAMPLING]["time_ratio"],
            **rec,
        }
        if skip:
            row["skipped_full"] = skip
        else:
            row["full_ms"] = 1e3 * rec["runners"][FULL]["seconds"]
            row["marginal_over_full"] = ratios[FULL]["time_ratio"]
        rows.append(row)
        ctx.log(
            f"  T={T}: marginal {row['marginal_ms']:.1f} ms, "
            + (
                f"full {row['full_ms']:.1f} ms (x{row['marginal_over_full']:.3f}), "
                if not skip
                else ""
            )
            + f"sampling {row['sampling_ms']:.1f} ms (x{row['marginal_over_sampling']:.2f})"
        )
    out = {"rows": rows}
    at = {r["seq_len"]: r for r in rows}
    T0 = cfg["sampling_ratio_seq_len"]
    if T0 in at:
        out["marginal_over_sampling_at"] = {
            "seq_len": T0,
            "ratio": at[T0]["marginal_over_sampling"],
        }
    return out


def table(rec):
    lines = []
    for r in rec["rows"]:
        full = (
            f"full {r['full_ms']:.1f} ms, ratio {r['marginal_over_full']:.3f}"
            if "full_ms" in r
            else "full skipped"
        )
        lines.append(
            (
                f"T={r['seq_len']} step",
                f"marginal {r['marginal_ms']:.1f} ms, {full}; sample_torch {r['sampling_ms']:.1f} "
                f"ms (marginal / sampling {r['marginal_over_sampling']:.2f})",
            )
        )
    if "marginal_over_sampling_at" in rec:
        at = rec["marginal_over_sampling_at"]
        lines.append((f"marginal step / sample_torch at T={at['seq_len']}", f"{at['ratio']:.2f}"))
    return lines
