"""Relative MSE after online training against the isotropic floor of each width.

``fit_online`` for ``n_steps`` steps of fresh rows (T=64, d=8, q=4) under
each recipe of ``recipes`` and the ``learning_rate`` schedule (cosine), then
the relative MSE on held-out rows next to :func:`stsq_learn.isotropic_floor`,
the lowest relative MSE any ``W = gamma I`` reaches at that width (where
training with stochastic encodings converges), and the trained W's gamma and
``cos(W_pp, I)``.

* ``"adam"``: Adam at ``lr``, the paper's full W (the defaults but the schedule).
* ``"sgd"``: plain gradient descent at ``sgd_lr_per_width * width`` (the
  step a diagonal entry of W takes shrinks like 1/width, so the rate grows
  with it), the token rows held at 0 (at such rates their steps diverge).

At ``pe_width`` the models are also scored with ``n_pe_samples`` draws, next
to the floor for that many draws; then the ``finetune_recipe`` model is
fine-tuned (``warm_start=True``) with ``n_pe_samples_fit=finetune_pe_samples``
and scored again.
"""

from __future__ import annotations

import time

from _harness import accuracy

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector, isotropic_floor
from stsq_learn.nn import positional_alignment

CONFIG = dict(
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
    floor_samples=100_000,
)
QUICK = dict(widths=(64, 256), n_steps=800, finetune_steps=100, floor_samples=30_000, n_test=2048)


def recipe(name, cfg, width):
    """Estimator settings of a training recipe."""
    if name == "adam":
        return dict(solver="adam", learning_rate_init=cfg["lr"])
    if name == "sgd":
        return dict(
            solver="sgd",
            learning_rate_init=cfg["sgd_lr_per_width"] * width,
            learn_token_block=False,
        )
    raise ValueError(f"unknown recipe {name!r}; expected 'adam' or 'sgd'")


def scores(model, ks, X_test, y_test):
    """Relative MSE with each number of draws in ``ks``, then the trained W's shape."""
    out = {}
    for k in ks:
        model.set_params(n_pe_samples=k)
        out[f"relative_mse_k{k}"] = accuracy(y_test, model.predict(X_test))["relative_mse"]
    align = positional_alignment(model.key_query_, model.n_features_in_)
    out.update(gamma=align["gamma"], cos_identity=align["cos"], token_norm=align["token_norm"])
    return out


def run(cfg, ctx):
    for name in cfg["recipes"]:
        recipe(name, cfg, 1)  # unknown recipes fail before any training
    T, q = cfg["seq_len"], cfg["n_selected"]
    task = SparseTokenSelectionTask(T, cfg["n_features"], q)
    X_test, y_test = task.sample(cfg["n_test"], random_state=1)
    rows, floors = [], []
    for m in sorted(set(cfg["widths"]) | {cfg["pe_width"]}):
        ks = tuple(cfg["n_pe_samples"]) if m == cfg["pe_width"] else (1,)
        floor = {}
        for k in ks:
            t0 = time.perf_counter()
            f = isotropic_floor(
                T, q, m, n_samples=cfg["floor_samples"], n_pe_samples=k, random_state=0
            )
            floor[k] = f
            floors.append(
                {
                    "width": m,
                    "n_pe_samples": k,
                    "relative_mse": f.relative_mse,
                    "gamma": f.gamma,
                    "std_error": f.std_error,
                    "seconds": time.perf_counter() - t0,
                }
            )
        for name in cfg["recipes"]:
            model = SparseTokenSelector(
                width=m,
                batch_size=cfg["batch_size"],
                learning_rate=cfg["learning_rate"],
                device="cpu",
                random_state=0,
                **recipe(name, cfg, m),
            )
            t0 = time.perf_counter()
            model.fit_online(task, n_steps=cfg["n_steps"])
            row = {
                "width": m,
                "recipe": name,
                "learning_rate_init": model.learning_rate_init,
                "train_seconds": time.perf_counter() - t0,
            }
            row.update(scores(model, ks, X_test, y_test))
            row["floor_relative_mse"] = floor[1].relative_mse
            row["floor_gamma"] = floor[1].gamma
            row["ratio_to_floor"] = row["relative_mse_k1"] / floor[1].relative_mse
            rows.append(row)
            ctx.log(
                f"  width {m} {name}: relative MSE {row['relative_mse_k1']:.4f}, "
                f"{row['ratio_to_floor']:.2f} x the floor"
            )
            if m == cfg["pe_width"] and name == cfg["finetune_recipe"] and cfg["finetune_steps"]:
                model.set_params(
                    warm_start=True,
                    n_pe_samples_fit=cfg["finetune_pe_samples"],
                    learning_rate_init=cfg["finetune_lr"],
                    learning_rate="cosine",
                )
                t0 = time.perf_counter()
                model.fit_online(task, n_steps=cfg["finetune_steps"])
                tuned = {
                    "width": m,
                    "recipe": name,
                    "finetuned_with_pe_samples": cfg["finetune_pe_samples"],
                    "train_seconds": time.perf_counter() - t0,
                }
                tuned.update(scores(model, ks, X_test, y_test))
                rows.append(tuned)
    return {"rows": rows, "floors": floors}


def table(rec):
    lines = []
    for f in rec["floors"]:
        draws = f", {f['n_pe_samples']} draws" if f["n_pe_samples"] > 1 else ""
        lines.append(
            (
                f"width {f['width']} isotropic floor{draws}",
                f"{f['relative_mse']:.4f} at gamma {f['gamma']:.2f} ({f['seconds']:.1f} s)",
            )
        )
    for r in rec["rows"]:
        tag = f"width {r['width']} {r['recipe']}"
        if "finetuned_with_pe_samples" in r:
            tag += f" +{r['finetuned_with_pe_samples']}-draw tune"
        ks = sorted(int(k[14:]) for k in r if k.startswith("relative_mse_k"))
        mses = " / ".join(f"{r[f'relative_mse_k{k}']:.4f}" for k in ks)
        label = "rel. MSE" + (f" ({'/'.join(map(str, ks))} draws)" if len(ks) > 1 else "")
        lines.append((f"{tag} {label}", mses))
        if "ratio_to_floor" in r:
            lines.append((f"{tag} ratio to floor", f"{r['ratio_to_floor']:.2f}"))
        lines.append((f"{tag} gamma / cos(W_pp, I)", f"{r['gamma']:.2f} / {r['cos_identity']:.2f}"))
    return lines
