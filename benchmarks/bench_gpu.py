"""Online training throughput on CUDA, and the share of a step spent drawing the batch."""

from __future__ import annotations

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
    device="cuda",
)
QUICK = dict(n_steps=5, warmup_steps=1)


def run(cfg, ctx):
    device = torch.device(cfg["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        return {"skipped": "CUDA is not available on this machine"}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(
        width=cfg["width"], batch_size=cfg["batch_size"], device=str(device), random_state=0
    )
    model.fit_online(task, n_steps=cfg["warmup_steps"])
    sync()
    t0 = time.perf_counter()
    model.fit_online(task, n_steps=cfg["n_steps"])
    sync()
    train_s = time.perf_counter() - t0
    g = torch.Generator(device=device).manual_seed(0)
    sync()
    t0 = time.perf_counter()
    for _ in range(cfg["n_steps"]):
        task.sample_torch(cfg["batch_size"], generator=g, device=device)
    sync()
    draw_s = time.perf_counter() - t0
    return {
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "samples_per_second": cfg["n_steps"] * cfg["batch_size"] / train_s,
        "step_ms": 1e3 * train_s / cfg["n_steps"],
        "draw_ms": 1e3 * draw_s / cfg["n_steps"],
        "draw_share": draw_s / train_s,
    }


def table(rec):
    return [
        (f"fit_online samples/s ({rec['device_name']})", f"{rec['samples_per_second']:.0f}"),
        ("step ms / draw ms", f"{rec['step_ms']:.1f} / {rec['draw_ms']:.1f}"),
        ("share of step time drawing the batch", f"{rec['draw_share']:.3f}"),
    ]
