"""Online training throughput on CUDA with each encoding sampler, and the share spent drawing.

For every sampler of ``samplers`` (``pe_sampling``), ``fit_online`` runs
``warmup_steps`` steps, then ``n_steps`` timed steps (synchronised around
the call); the samplers alternate over ``repeats`` repeats and the medians
are reported, with the ratio of each sampler's step to the first's. The
time of drawing the batches alone (``task.sample_torch``) gives the share of
a step spent drawing them. At the default sizes the full sampler's
encodings take batch x T x width floats: 16 GiB, on a GPU that has it.
Skipped, saying so in the JSON, where CUDA is not available.
"""

from __future__ import annotations

import statistics
import time

import torch

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector

CONFIG = dict(
    seq_len=1024,
    n_features=16,
    n_selected=4,
    width=1024,
    batch_size=4096,
    n_steps=20,
    warmup_steps=3,
    samplers=("marginal", "full"),
    repeats=3,
    device="cuda",
)
QUICK = dict(n_steps=5, warmup_steps=1, repeats=1)


def run(cfg, ctx):
    device = torch.device(cfg["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        return {
            "skipped": "CUDA is not available on this machine",
            "samplers": list(cfg["samplers"]),
        }
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])

    def train(sampler, seed):
        model = SparseTokenSelector(
            width=cfg["width"],
            pe_sampling=sampler,
            batch_size=cfg["batch_size"],
            device=str(device),
            random_state=seed,
        )
        model.fit_online(task, n_steps=cfg["warmup_steps"])
        model.set_params(warm_start=True)
        sync()
        t0 = time.perf_counter()
        model.fit_online(task, n_steps=cfg["n_steps"])
        sync()
        return time.perf_counter() - t0

    samplers = list(cfg["samplers"])
    seconds = {s: [] for s in samplers}
    for rep in range(cfg["repeats"]):
        shift = rep % len(samplers)
        for s in samplers[shift:] + samplers[:shift]:
            seconds[s].append(train(s, rep))
    g = torch.Generator(device=device).manual_seed(0)
    task.sample_torch(cfg["batch_size"], generator=g, device=device)
    sync()
    t0 = time.perf_counter()
    for _ in range(cfg["n_steps"]):
        task.sample_torch(cfg["batch_size"], generator=g, device=device)
    sync()
    draw_s = time.perf_counter() - t0
    first = samplers[0]
    rec = {
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "draw_ms": 1e3 * draw_s / cfg["n_steps"],
        "samplers": {},
    }
    for s in samplers:
        train_s = statistics.median(seconds[s])
        rec["samplers"][s] = {
            "samples_per_second": cfg["n_steps"] * cfg["batch_size"] / train_s,
            "step_ms": 1e3 * train_s / cfg["n_steps"],
            "draw_share": draw_s / train_s,
            "all_seconds": seconds[s],
        }
    for s in samplers[1:]:
        ratios = [a / b for a, b in zip(seconds[first], seconds[s])]
        rec["samplers"][s][f"{first}_over_this"] = statistics.median(ratios)
    return rec


def table(rec):
    lines = [("device", rec["device_name"])]
    for s, r in rec["samplers"].items():
        ratio = [k for k in r if k.endswith("_over_this")]
        extra = f", {ratio[0].split('_over')[0]} / {s} {r[ratio[0]]:.3f}" if ratio else ""
        lines.append(
            (
                f"fit_online {s}",
                f"{r['samples_per_second']:.0f} samples/s, step {r['step_ms']:.1f} ms, "
                f"drawing {r['draw_share']:.3f} of it{extra}",
            )
        )
    lines.append(("sample_torch per batch", f"{rec['draw_ms']:.1f} ms"))
    return lines
