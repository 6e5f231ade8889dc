"""Benchmarks of stsq-learn against the plain-PyTorch reference loop.

One entry point::

    python benchmarks/run.py [--quick] [--only NAME] [--out FILE.json]
                             [--reference PATH] [--threads N] [--repeats N]

NAME is one of ``fit``, ``online``, ``memory``, ``accuracy``, ``gpu`` (repeat
``--only`` to run several). Every comparison runs the package and the
reference (``spe_reference.py``, imported by path, never copied) in the same
process, alternating the two within each repeat, with the same torch thread
count, and reports medians of the repeats and their ratio.

The reference is looked up at ``../shared/reference/spe_reference.py``
relative to the repository root, then in the same place relative to each
folder above it; ``--reference PATH`` overrides. If it is not found the
comparisons are skipped with a message and the package-only figures still run.

Run from the repository root (the package need not be installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector  # noqa: E402
from stsq_learn.nn import positional_alignment  # noqa: E402

BENCHMARKS = ("fit", "online", "memory", "accuracy", "gpu")
REFERENCE_RELPATH = Path("..") / "shared" / "reference" / "spe_reference.py"

# SPEC section 6: lowest relative MSE of an isotropic W, T=64, q=4.
SPEC_FLOOR_T64_Q4 = {32: 0.43, 64: 0.28, 128: 0.17, 256: 0.115, 512: 0.082, 1024: 0.050}

# Sizes of each benchmark: the full run, then what --quick changes.
CONFIG = {
    "fit": dict(
        seq_len=64,
        n_features=16,
        n_selected=4,
        width=256,
        n_samples=8192,
        batch_size=256,
        epochs=8,
        lr=0.01,
        n_test=4096,
        repeats=5,
        full_w=True,
    ),
    "online": dict(
        seq_len=64,
        n_features=16,
        n_selected=4,
        width=256,
        batch_size=256,
        n_steps=64,
        lr=0.01,
        repeats=5,
    ),
    "memory": dict(
        seq_lens=(256, 1024, 4096, 16384),
        n_features=8,
        n_selected=4,
        width=64,
        batch_size=32,
        n_samples=64,
    ),
    "accuracy": dict(
        seq_len=64,
        n_features=8,
        n_selected=4,
        widths=(64, 256, 1024),
        n_pe_samples=(1, 4, 16),
        pe_width=256,
        n_steps=3000,
        batch_size=256,
        lr=0.01,
        sgd_lr_per_width=1 / 64,
        learning_rate="cosine",
        recipes=("adam", "sgd"),
        finetune_recipe="adam",
        finetune_steps=400,
        finetune_pe_samples=16,
        finetune_lr=0.01,
        n_test=4096,
        floor_rows=4000,
    ),
    "gpu": dict(
        seq_len=1024,
        n_features=16,
        n_selected=4,
        width=1024,
        batch_size=4096,
        n_steps=20,
        warmup_steps=3,
        device="cuda",
    ),
}
QUICK = {
    "fit": dict(n_samples=4096, epochs=2, n_test=2048, repeats=3),
    "online": dict(n_steps=16, repeats=3),
    "memory": dict(seq_lens=(1024, 4096, 16384), batch_size=16, n_samples=32),
    "accuracy": dict(
        widths=(64, 256), n_steps=800, finetune_steps=100, floor_rows=2000, n_test=2048
    ),
    "gpu": dict(n_steps=5, warmup_steps=1),
}


# -- helpers -----------------------------------------------------------------
def find_reference(path=None):
    """Path of ``spe_reference.py``: ``path`` if given, else the default lookup."""
    if path is not None:
        p = Path(path).expanduser().resolve()
        return p if p.is_file() else None
    for base in (ROOT, *ROOT.parents):
        p = (base / REFERENCE_RELPATH).resolve()
        if p.is_file():
            return p
    return None


def load_reference(path):
    """Import the reference module from its file (it is run, never copied)."""
    spec = importlib.util.spec_from_file_location("spe_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median(xs):
    return float(statistics.median(xs))


def _ref_args(cfg, **over):
    a = dict(
        seq_len=cfg["seq_len"],
        n_features=cfg["n_features"],
        n_selected=cfg["n_selected"],
        width=cfg["width"],
        n_samples=cfg.get("n_samples", 0),
        batch_size=cfg["batch_size"],
        epochs=cfg.get("epochs", 1),
        lr=cfg["lr"],
        seed=0,
    )
    a.update(over)
    return SimpleNamespace(**a)


def _reference_data(X, y):
    """The package's (X, y) arrays as the reference's (tokens, mask, y) tensors."""
    Xt = torch.as_tensor(X, dtype=torch.float32)
    return Xt[..., :-1].contiguous(), Xt[..., -1].contiguous(), torch.as_tensor(y).float()


def _relative_mse(model, X, y):
    return float(np.mean(np.sum((model.predict(X) - y) ** 2, axis=1)) / np.mean(np.sum(y**2, 1)))


def _cfg(name, quick, **override):
    cfg = dict(CONFIG[name])
    if quick:
        cfg.update(QUICK[name])
    cfg.update(override)
    return cfg


# -- 1. fit overhead ----------------------------------------------------------
def bench_fit(ref, quick=False, **override):
    """SparseTokenSelector.fit vs the reference ``train`` on the same data.

    Two configurations of ours run, alternated with the reference in every
    repeat: ``learn_token_block=False``, the reference's own model (its W has
    no token rows), which is the like-for-like comparison; and the default,
    the paper's full W, whose d x m token block only adds Adam noise here.
    """
    cfg = _cfg("fit", quick, **override)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    X, y = task.sample(cfg["n_samples"], random_state=0)
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    data = _reference_data(X, y)
    epochs = cfg["epochs"]

    def ours_with(learn_token_block):
        def ours(seed):
            model = SparseTokenSelector(
                width=cfg["width"],
                learning_rate_init=cfg["lr"],
                batch_size=cfg["batch_size"],
                max_iter=epochs,
                n_iter_no_change=epochs,
                tol=0.0,
                learn_token_block=learn_token_block,
                random_state=seed,
            )
            t0 = time.perf_counter()
            model.fit(X, y)
            seconds = time.perf_counter() - t0
            # n_iter_no_change = max_iter: early stopping cannot trigger; check it did not.
            assert model.n_iter_ == epochs, (model.n_iter_, epochs)
            return seconds, _relative_mse(model, X_test, y_test)

        return ours

    def theirs(seed):
        r = ref.train(_ref_args(cfg, seed=seed), data=data)
        return r["fit_seconds"], r["test_relative_mse"]

    runners = {"ours": ours_with(False)}
    if cfg["full_w"]:
        runners["ours_full_w"] = ours_with(True)
    if ref:
        runners["reference"] = theirs
    rec = {"config": cfg, "early_stopping_off": True, "ours_learn_token_block": False}
    rec.update(_alternate(runners, cfg["repeats"]))
    rec["samples"] = cfg["n_samples"] * epochs
    if ref:
        for who in ("ours", "ours_full_w"):
            if who in runners:
                rec[f"{who}_mse_gap"] = rec[f"{who}_mse"] - rec["reference_mse"]
        rec["ratio"], rec["mse_gap"] = rec["ours_ratio"], rec["ours_mse_gap"]
    return rec


def _alternate(runners, repeats):
    """Run every runner ``repeats`` times, rotating which goes first; medians and ratios.

    ``runners`` maps a name to ``fn(seed) -> (seconds, relative_mse)``. Besides
    the median seconds and MSE of each, every runner but ``reference`` gets its
    ratio of median times to the reference's, its median of per-repeat time
    ratios and the ratio of the fastest runs.
    """
    names = list(runners)
    seconds = {n: [] for n in names}
    mses = {n: [] for n in names}
    for rep in range(repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            t, mse = runners[name](rep)
            seconds[name].append(t)
            mses[name].append(mse)
    out = {}
    for n in names:
        out.update(
            {
                f"{n}_seconds": median(seconds[n]),
                f"{n}_mse": median(mses[n]),
                f"{n}_all_seconds": seconds[n],
                f"{n}_all_mse": mses[n],
            }
        )
    if "reference" in names:
        ref_t = seconds["reference"]
        for n in names:
            if n != "reference":
                out[f"{n}_ratio"] = out[f"{n}_seconds"] / out["reference_seconds"]
                out[f"{n}_ratio_per_repeat_median"] = median(
                    [a / b for a, b in zip(seconds[n], ref_t)]
                )
                out[f"{n}_ratio_of_best"] = min(seconds[n]) / min(ref_t)
    return out


# -- 2. online throughput -----------------------------------------------------
def bench_online(ref, quick=False, **override):
    """fit_online samples/s vs the reference's samples/s on fixed data, same shapes."""
    cfg = _cfg("online", quick, **override)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    n_steps, bs = cfg["n_steps"], cfg["batch_size"]
    data = _reference_data(*task.sample(n_steps * bs, random_state=0))

    def ours(seed):
        model = SparseTokenSelector(
            width=cfg["width"], learning_rate_init=cfg["lr"], batch_size=bs, random_state=seed
        )
        t0 = time.perf_counter()
        model.fit_online(task, n_steps=n_steps)
        seconds = time.perf_counter() - t0
        return seconds, float(model.loss_curve_[-1])

    def theirs(seed):
        a = _ref_args(cfg, n_samples=n_steps * bs, epochs=1, seed=seed)
        r = ref.train(a, data=data)
        return r["fit_seconds"], r["test_relative_mse"]

    rec = {"config": cfg}
    res = _alternate({"ours": ours, **({"reference": theirs} if ref else {})}, cfg["repeats"])
    rec["ours_samples_per_second"] = n_steps * bs / res["ours_seconds"]
    if ref:
        rec["reference_samples_per_second"] = n_steps * bs / res["reference_seconds"]
        rec["ratio"] = rec["ours_samples_per_second"] / rec["reference_samples_per_second"]
    rec["seconds"] = {k: v for k, v in res.items() if "seconds" in k}
    return rec


# -- 3. memory vs length ------------------------------------------------------
def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak():
    """Reset the process's peak RSS (Linux); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(cfg):
    """Peak extra memory (MiB) of one fit and one predict at cfg['seq_len'], in this process."""
    device = cfg["device"]
    cuda = device.startswith("cuda")
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    small = SparseTokenSelectionTask(16, cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(
        width=cfg["width"],
        batch_size=cfg["batch_size"],
        max_iter=1,
        device=device,
        random_state=0,
    )
    model.fit(*small.sample(cfg["batch_size"], random_state=0)).predict(small.sample(4)[0])
    X, y = task.sample(cfg["n_samples"], random_state=0)
    X = X.astype(np.float32)
    y = y.astype(np.float32)
    out = {"seq_len": cfg["seq_len"], "device": device}
    for phase in ("fit", "predict"):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        else:
            exact = _reset_peak()
            base = _rss_kib("VmRSS") if exact else 0
        if phase == "fit":
            model.fit(X, y)
        else:
            model.predict(X)
        if cuda:
            torch.cuda.synchronize()
            out[f"{phase}_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        else:
            out[f"{phase}_peak_mib"] = (_rss_kib("VmHWM") - base) / 1024
            out["method"] = "VmHWM - VmRSS (clear_refs)" if exact else "VmHWM (absolute)"
    return out


def bench_memory(ref, quick=False, threads=1, **override):
    """Peak memory of fit and predict per seq_len, each in a fresh subprocess."""
    cfg = _cfg("memory", quick, **override)
    cfg.setdefault("device", "cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for T in cfg["seq_lens"]:
        child = {k: v for k, v in cfg.items() if k != "seq_lens"}
        child["seq_len"] = T
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--threads",
                str(threads),
                "--memory-child",
                json.dumps(child),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"memory child at seq_len={T} failed:\n{proc.stderr}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rec = {"config": cfg, "rows": rows}
    by_T = {r["seq_len"]: r for r in rows}

    def ratio(a, b):
        return a / b if b > 0 else None

    if 4096 in by_T and 16384 in by_T:
        for phase in ("fit", "predict"):
            key = f"{phase}_peak_mib"
            rec[f"{phase}_growth_4096_to_16384"] = ratio(by_T[16384][key], by_T[4096][key])
    # Log-log slope of peak vs T over the two largest lengths: 1 = linear, 2 = quadratic.
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        for phase in ("fit", "predict"):
            r = ratio(b[f"{phase}_peak_mib"], a[f"{phase}_peak_mib"])
            rec[f"{phase}_loglog_slope"] = (
                float(np.log(r) / np.log(b["seq_len"] / a["seq_len"])) if r else None
            )
    return rec


# -- 4. accuracy at width -----------------------------------------------------
def _recipe(name, cfg, width):
    """Estimator settings of a training recipe of the ``accuracy`` entry.

    ``"adam"``: Adam at ``lr`` with the ``learning_rate`` schedule, the
    paper's full W. ``"sgd"``: plain gradient descent at ``sgd_lr_per_width *
    width`` (the step a diagonal entry of W takes shrinks like 1/width, so the
    rate grows with it) with the same schedule and the token block held at 0
    (at such rates its steps, which shrink only like 1/sqrt(width), diverge).
    """
    if name == "adam":
        return dict(solver="adam", learning_rate_init=cfg["lr"])
    if name == "sgd":
        return dict(
            solver="sgd",
            learning_rate_init=cfg["sgd_lr_per_width"] * width,
            learn_token_block=False,
        )
    raise ValueError(f"unknown recipe {name!r}; expected 'adam' or 'sgd'")


def bench_accuracy(ref, quick=False, **override):
    """Relative MSE after online training vs the isotropic floor of SPEC section 6.

    Training: ``fit_online`` for ``n_steps`` under each recipe of
    ``recipes`` (see :func:`_recipe`) and the ``learning_rate`` schedule
    (cosine by default). At ``pe_width`` the model is scored with
    ``n_pe_samples`` = 1, 4, 16 draws; then, when ``finetune_steps`` > 0, the
    ``finetune_recipe`` model is fine-tuned (``warm_start=True``) with
    ``n_pe_samples_fit = finetune_pe_samples``, the attention averaged over
    that many draws in the training forward too, and scored again: a W
    trained on one draw settles at the gamma that is best for one draw,
    smaller than the gamma that is best for averaged draws.
    """
    cfg = _cfg("accuracy", quick, **override)
    task = SparseTokenSelectionTask(cfg["seq_len"], cfg["n_features"], cfg["n_selected"])
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    rows = []
    for m in sorted(set(cfg["widths"]) | {cfg["pe_width"]}):
        floor = None
        if ref:
            a = _ref_args({**cfg, "width": m}, n_samples=cfg["floor_rows"], seed=0)
            floor = ref.floor(a)
        for recipe in cfg["recipes"]:
            model = SparseTokenSelector(
                width=m,
                batch_size=cfg["batch_size"],
                learning_rate=cfg["learning_rate"],
                random_state=0,
                **_recipe(recipe, cfg, m),
            )
            t0 = time.perf_counter()
            model.fit_online(task, n_steps=cfg["n_steps"])
            row = {
                "width": m,
                "recipe": recipe,
                "learning_rate_init": model.learning_rate_init,
                "train_seconds": time.perf_counter() - t0,
                "spec_floor": SPEC_FLOOR_T64_Q4.get(m),
            }
            ks = cfg["n_pe_samples"] if m == cfg["pe_width"] else (1,)
            row.update(_scores(model, ks, X_test, y_test))
            if floor:
                row["floor_relative_mse"] = floor["floor_relative_mse"]
                row["floor_gamma"] = floor["gamma"]  # the best gamma of the isotropic W
                row["ratio_to_floor"] = row["relative_mse_k1"] / row["floor_relative_mse"]
            rows.append(row)
            if (
                m == cfg["pe_width"]
                and recipe == cfg["finetune_recipe"]
                and cfg["finetune_steps"] > 0
            ):
                k_train = cfg["finetune_pe_samples"]
                model.set_params(
                    warm_start=True,
                    n_pe_samples_fit=k_train,
                    learning_rate_init=cfg["finetune_lr"],
                    learning_rate="cosine",
                )
                t0 = time.perf_counter()
                model.fit_online(task, n_steps=cfg["finetune_steps"])
                ft = {
                    "width": m,
                    "recipe": recipe,
                    "finetuned_with_pe_samples": k_train,
                    "train_seconds": time.perf_counter() - t0,
                }
                ft.update(_scores(model, ks, X_test, y_test))
                rows.append(ft)
    return {"config": cfg, "rows": rows}


def _scores(model, ks, X_test, y_test):
    """Relative MSE with each ``n_pe_samples`` in ``ks``, then the trained W's shape.

    The shape is gamma, cos(W_pp, I) and the token-block norm.
    """
    out = {}
    for k in ks:
        model.set_params(n_pe_samples=k)
        out[f"relative_mse_k{k}"] = _relative_mse(model, X_test, y_test)
    align = positional_alignment(model.key_query_, model.n_features_in_)
    out.update(gamma=align["gamma"], cos_identity=align["cos"], token_norm=align["token_norm"])
    return out


# -- 5. GPU -------------------------------------------------------------------
def bench_gpu(ref, quick=False, **override):
    """Online training samples/s on CUDA and the share of step time spent drawing batches."""
    cfg = _cfg("gpu", quick, **override)
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
        "config": cfg,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "samples_per_second": cfg["n_steps"] * cfg["batch_size"] / train_s,
        "step_ms": 1e3 * train_s / cfg["n_steps"],
        "draw_ms": 1e3 * draw_s / cfg["n_steps"],
        "draw_share": draw_s / train_s,
    }


# -- driver -------------------------------------------------------------------
def _warm_up(ref):
    """Pay one-time costs (lazy imports, first kernels) outside every timing."""
    task = SparseTokenSelectionTask(8, 2, 2)
    X, y = task.sample(32, random_state=0)
    model = SparseTokenSelector(width=8, batch_size=16, max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y).predict(X)
    model.fit_online(task, n_steps=2)
    if ref:
        cfg = dict(seq_len=8, n_features=2, n_selected=2, width=8, batch_size=16, lr=0.01)
        ref.train(_ref_args(cfg, n_samples=32, epochs=1), data=_reference_data(X, y))


RUNNERS = {
    "fit": bench_fit,
    "online": bench_online,
    "memory": bench_memory,
    "accuracy": bench_accuracy,
    "gpu": bench_gpu,
}


def machine_info(threads):
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def format_table(results):
    """The results as a plain-text table, one line per figure."""
    lines = [f"{'benchmark':<10} {'figure':<44} {'value':>12}"]
    lines.append("-" * len(lines[0]))

    def row(name, label, value, fmt="{:.3f}"):
        lines.append(f"{name:<10} {label:<44} {fmt.format(value):>12}")

    for name, rec in results.items():
        if "skipped" in rec:
            lines.append(f"{name:<10} skipped: {rec['skipped']}")
            continue
        if name == "fit":
            for who, what in (("ours", "ours (ref. model)"), ("ours_full_w", "ours (full W)")):
                if f"{who}_seconds" not in rec:
                    continue
                row(name, f"{what}: fit seconds", rec[f"{who}_seconds"])
                row(name, f"{what}: test relative MSE", rec[f"{who}_mse"], "{:.4f}")
                if f"{who}_ratio" in rec:
                    row(name, f"{what}: time ratio to reference", rec[f"{who}_ratio"])
                    row(
                        name,
                        "  median of per-repeat ratios",
                        rec[f"{who}_ratio_per_repeat_median"],
                    )
                    row(name, "  ratio of the fastest runs", rec[f"{who}_ratio_of_best"])
                    row(name, f"{what}: relative-MSE gap", rec[f"{who}_mse_gap"], "{:+.4f}")
            if "reference_seconds" in rec:
                row(name, "reference: train seconds", rec["reference_seconds"])
                row(name, "reference: test relative MSE", rec["reference_mse"], "{:.4f}")
        elif name == "online":
            row(name, "ours fit_online samples/s", rec["ours_samples_per_second"], "{:.0f}")
            if "ratio" in rec:
                row(name, "reference samples/s", rec["reference_samples_per_second"], "{:.0f}")
                row(name, "throughput ratio ours / reference", rec["ratio"])
        elif name == "memory":
            for r in rec["rows"]:
                row(name, f"T={r['seq_len']} fit / predict peak MiB", r["fit_peak_mib"], "{:.1f}")
                lines[-1] += f" / {r['predict_peak_mib']:.1f}"
            for key in ("fit_growth_4096_to_16384", "predict_growth_4096_to_16384"):
                if rec.get(key) is not None:
                    row(name, key.replace("_", " "), rec[key], "{:.2f}x")
            for key in ("fit_loglog_slope", "predict_loglog_slope"):
                if rec.get(key) is not None:
                    row(name, key.replace("_", " "), rec[key], "{:.2f}")
        elif name == "accuracy":
            for r in rec["rows"]:
                ks = sorted(int(k[14:]) for k in r if k.startswith("relative_mse_k"))
                tag = f"width {r['width']} {r['recipe']}"
                if "finetuned_with_pe_samples" in r:
                    tag += f" +{r['finetuned_with_pe_samples']}-draw tune"
                for k in ks:
                    row(
                        name,
                        f"{tag} rel. MSE, n_pe_samples={k}",
                        r[f"relative_mse_k{k}"],
                        "{:.4f}",
                    )
                row(name, f"{tag} trained gamma / cos(W_pp, I)", r["gamma"], "{:.2f}")
                lines[-1] += f" / {r['cos_identity']:.2f}"
                if "floor_relative_mse" in r:
                    row(name, f"{tag} floor (reference)", r["floor_relative_mse"], "{:.4f}")
                    row(name, f"{tag} ratio to floor", r["ratio_to_floor"])
        elif name == "gpu":
            row(name, "fit_online samples/s", rec["samples_per_second"], "{:.0f}")
            row(name, "step ms / draw ms", rec["step_ms"], "{:.1f}")
            lines[-1] += f" / {rec['draw_ms']:.1f}"
            row(name, "share of step time drawing the batch", rec["draw_share"])
    return "\n".join(lines)


def run(
    only=None,
    quick=False,
    reference=None,
    threads=1,
    repeats=None,
    out=None,
    log=print,
    overrides=None,
):
    """Run the benchmarks; returns the results dict (also written to ``out`` as JSON)."""
    torch.set_num_threads(threads)
    names = list(only) if only else list(BENCHMARKS)
    ref_path = find_reference(reference)
    ref = None
    if ref_path is None:
        where = reference or f"{REFERENCE_RELPATH} from {ROOT} or a folder above it"
        log(f"reference not found ({where}): skipping the comparisons with it.")
    else:
        ref = load_reference(ref_path)
        log(f"reference: {ref_path}")
    _warm_up(ref)
    results = {}
    for name in names:
        kwargs = dict((overrides or {}).get(name, {}))
        if repeats is not None and name in ("fit", "online"):
            kwargs["repeats"] = repeats
        if name == "memory":
            kwargs["threads"] = threads
        log(f"running {name} ...")
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            results[name] = RUNNERS[name](ref, quick=quick, **kwargs)
        results[name]["wall_seconds"] = time.perf_counter() - t0
    report = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "quick": quick,
        "reference": str(ref_path) if ref_path else None,
        "machine": machine_info(threads),
        "results": results,
    }
    log(format_table(results))
    if out:
        Path(out).write_text(json.dumps(report, indent=2, default=str))
        log(f"wrote {out}")
    return report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    p.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this one")
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--reference", help="path of spe_reference.py")
    p.add_argument("--threads", type=int, default=1, help="torch threads, both sides (default 1)")
    p.add_argument("--repeats", type=int, help="repeats of the timed comparisons")
    p.add_argument("--memory-child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.memory_child:
        torch.set_num_threads(a.threads)
        warnings.simplefilter("ignore", ConvergenceWarning)
        print(json.dumps(memory_child(json.loads(a.memory_child))))
        return 0
    run(a.only, a.quick, a.reference, a.threads, a.repeats, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
