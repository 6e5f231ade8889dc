"""Peak memory of one ``fit_online`` call at T=16384 with marginal draws, beside 0.4.0's.

The call (issue 31)::

    SparseTokenSelector(width=1024, pe_sampling="marginal", batch_size=32,
                        random_state=0).fit_online(
        SparseTokenSelectionTask(16384, 16, 4), n_steps=2)

runs in a fresh process (this file run as a script), ``repeats`` times; the
figure is the median of the processes' resident-set high-water marks
(``ru_maxrss``: imports included, what ``/usr/bin/time -v`` reports), next
to :data:`BASELINE_0_4`, the same measurement of stsq-learn 0.4.0 on the
machine it names. Marginal draws hold no batch x T x width array, so a step
costs about as much as the batch's rows: 0.5.0 peaked at 1915 MiB on that
machine, because the start-loss probe put 1,024 rows of length 16,384
through the model at once (0.6.0 takes them a chunk at a time). The baseline
applies only at the sizes of :data:`CONFIG`; at others the record says so.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import warnings

CONFIG = dict(
    seq_len=16384,
    n_features=16,
    n_selected=4,
    width=1024,
    pe_sampling="marginal",
    batch_size=32,
    n_steps=2,
    random_state=0,
    repeats=3,
)
QUICK = dict(repeats=1)

#: The sizes the baseline was measured at (everything in CONFIG but the repeats).
CALL_KEYS = ("seq_len", "n_features", "n_selected", "width", "pe_sampling", "batch_size")
CALL_KEYS += ("n_steps", "random_state")

#: stsq-learn 0.4.0 (commit 9e2380f) running the call above, measured as
#: :func:`run` measures it (median of 3 fresh processes, one torch thread),
#: with 0.5.0 (33aca62) and the fix beside it on the same machine the same day.
BASELINE_0_4 = {
    "version": "0.4.0",
    "peak_mib": 536,
    "peak_mib_0_5": 1915,
    "measured": "2026-12-04",
    "machine": (
        "Linux x86_64, Intel Xeon @ 2.80GHz, 2 cores, 24 GiB RAM; Python 3.11.7, "
        "torch 2.13.0+cpu, one torch thread"
    ),
}


def child(cfg):
    """Run the call here and return this process's peak resident set (MiB) and seconds."""
    import resource

    import torch

    from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

    torch.set_num_threads(cfg.get("threads", 1))
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(
        width=cfg["width"],
        pe_sampling=cfg["pe_sampling"],
        batch_size=cfg["batch_size"],
        random_state=cfg["random_state"],
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two steps do not learn: no verdict wanted here
        model.fit_online(task, n_steps=cfg["n_steps"])
    seconds = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"peak_mib": peak_kib / 1024, "seconds": seconds}


def _in_child(cfg, threads):
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), json.dumps(dict(cfg, threads=threads))],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"online_memory child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(cfg, ctx):
    if not sys.platform.startswith("linux"):
        return {"skipped": f"ru_maxrss is in KiB on Linux only, not on {sys.platform}"}
    call = {k: cfg[k] for k in CALL_KEYS}
    runs = [_in_child(call, ctx.threads) for _ in range(cfg["repeats"])]
    peak = statistics.median(r["peak_mib"] for r in runs)
    applies = all(cfg[k] == CONFIG[k] for k in CALL_KEYS)
    rec = {
        "call": call,
        "runs": runs,
        "peak_mib": peak,
        "seconds": statistics.median(r["seconds"] for r in runs),
        "baseline": dict(BASELINE_0_4, applies=applies),
    }
    if applies:
        rec["ratio_to_0_4"] = peak / BASELINE_0_4["peak_mib"]
    return rec


def table(rec):
    c = rec["call"]
    label = f"fit_online T={c['seq_len']} width {c['width']} {c['pe_sampling']} peak RSS"
    lines = [(label, f"{rec['peak_mib']:.0f} MiB ({rec['seconds']:.1f} s)")]
    base = rec["baseline"]
    if base["applies"]:
        lines.append(
            (
                f"  {base['version']} (measured {base['measured']}; machine in the JSON)",
                f"{base['peak_mib']} MiB; this / 0.4.0 = {rec['ratio_to_0_4']:.2f}x",
            )
        )
    else:
        lines.append(("  0.4.0 baseline", "not comparable: other sizes than CONFIG"))
    return lines


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))
