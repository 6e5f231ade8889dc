"""``predict`` time with keyed draws, against the streamed draws of 0.3.0, by length.

At every length T of ``seq_lens`` (d=16, q=4, width 256, marginal sampler,
one thread), one ``SparseTokenSelector`` is trained online for
``train_steps`` steps at that length; then two runners alternate in one
process on the same ``n_rows`` rows (repeat r starts with runner r mod 2):

* ``keyed``: ``model.predict(X)``, every draw computed from the row's key
  (prediction seed, the row's bytes, draw, position);
* ``streamed``: the algorithm of stsq-learn 0.3.0, written out here
  (:func:`streamed_predict`): the same module, chunks and sampler, the
  draws taken in turn from a ``torch.Generator`` seeded with the prediction
  seed, so a row's draws depend on its place in X.

Reported per T: microseconds per row of both (medians), the median of the
per-repeat ratios keyed / streamed, both R^2 (same law: they agree within
sampling noise), and a breakdown of one chunk of keyed draws: the row keys
(hashing the rows), the selected positions' unit vectors, the unselected
positions' coordinates, against the streamed draws of the same numbers.

The length-aware scales (``length_scale``) act at other lengths only: the
same rows moved to 2T are predicted by three more runners, alternated in
the same way, ``plain_2T`` (no scale), ``log_2T`` and ``floor_2T``; reported
are the ratios to ``plain_2T`` and, for ``"floor"``, the one-off seconds of
its first call at a new length (the floor's best gammas at 2T and T,
computed once and cached).
"""

from __future__ import annotations

import copy
import statistics
import time

import numpy as np
import torch
from _harness import accuracy, compare

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector, shift_length
from stsq_learn.encodings.families import KeyedDraws, StreamedDraws
from stsq_learn.encodings.keyed import row_keys
from stsq_learn.encodings.length_scale import cached_floor
from stsq_learn.engine.memory import PREDICT_ELEMENTS

KEYED, STREAMED = "keyed", "streamed"

CONFIG = dict(
    seq_lens=(64, 1024),
    n_rows=20000,
    n_features=16,
    n_selected=4,
    width=256,
    train_steps=150,
    batch_size=256,
    lr=0.01,
    breakdown_repeats=5,
    repeats=5,
)
QUICK = dict(n_rows=4000, train_steps=60, repeats=3, breakdown_repeats=3)


@torch.inference_mode()
def streamed_predict(model, X):
    """``model.predict(X)`` as stsq-learn 0.3.0 computed it: streamed draws.

    The same module and forward pass, 0.3.0's chunk size (for the marginal
    sampler), and every draw taken in turn from one ``torch.Generator``
    seeded with the prediction seed.
    """
    module = model.net_.module_
    kwargs = {"n_pe_samples": model.n_pe_samples, "pe_sampling": model.pe_sampling}
    draws = StreamedDraws(torch.Generator().manual_seed(model._predict_seed))
    T, d, m = X.shape[1], X.shape[2] - 1, module.width
    chunk = max(1, PREDICT_ELEMENTS // (T * (d + 4) + m * (m + 4)))  # 0.3.0's chunks
    device = next(module.parameters()).device  # the CPU generator's draws are moved there
    module.eval()
    out = []
    for start in range(0, len(X), chunk):
        xb = torch.as_tensor(X[start : start + chunk], dtype=torch.float32, device=device)
        out.append(module(xb, generator=draws, **kwargs))
    return torch.cat(out).cpu().numpy().astype(np.float64)


def train(cfg, seq_len):
    """The model every runner predicts with, and the rows it predicts."""
    task = SparseTokenSelectionTask(seq_len, cfg["n_features"], cfg["n_selected"])
    model = SparseTokenSelector(
        width=cfg["width"],
        solver="adam",  # the plain loop's optimiser (the default "auto" resolves to SGD)
        learning_rate="constant",
        learning_rate_init=cfg["lr"],
        batch_size=cfg["batch_size"],
        device="cpu",
        random_state=0,
    ).fit_online(task, n_steps=cfg["train_steps"])
    X, y = task.sample(cfg["n_rows"], random_state=1)
    return model, X.astype(np.float32), y


def runners(model, X, y):
    def timed(fn):
        def run(seed):
            t0 = time.perf_counter()
            y_pred = fn(model, X)
            return {"seconds": time.perf_counter() - t0, **accuracy(y, y_pred)}

        return run

    return {KEYED: timed(lambda m, rows: m.predict(rows)), STREAMED: timed(streamed_predict)}


def scaled_runners(model, X, y):
    """Predict ``X`` moved to twice its length with no scale, the log rule and the floor rule."""
    X_long = shift_length(X, 2 * X.shape[1], random_state=0)
    # Shallow copies share the fitted model; each predicts with its own rule.
    models = {rule: copy.copy(model).set_params(length_scale=rule) for rule in ("log", "floor")}
    cached_floor.cache_clear()
    t0 = time.perf_counter()
    models["floor"].predict(X_long[:1])  # the floor's gammas at 2T and T: once, cached
    first_call = time.perf_counter() - t0

    def timed(m):
        def run(seed):
            t = time.perf_counter()
            y_pred = m.predict(X_long)
            return {"seconds": time.perf_counter() - t, **accuracy(y, y_pred)}

        return run

    runs = {"plain_2T": timed(model), "log_2T": timed(models["log"])}
    runs["floor_2T"] = timed(models["floor"])
    return runs, first_call


def _median_us(fn, repeats, n_rows):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times) / n_rows


def breakdown(model, X, repeats):
    """Microseconds per row of each kind of draw, keyed and streamed, on one predict chunk."""
    module = model.net_.module_
    n, T = X.shape[:2]
    q = int(X[..., -1].sum(axis=1).max())
    chunk = min(n, max(1, PREDICT_ELEMENTS // module.elements_per_row(T, "marginal", q)))
    xb = torch.as_tensor(X[:chunk])
    where = xb[..., -1].topk(q, dim=1).indices
    m = module.width
    keyed = KeyedDraws(model._predict_seed).for_rows(xb)
    streamed = StreamedDraws(torch.Generator().manual_seed(0))
    f32 = torch.float32
    with torch.inference_mode():
        parts = {
            "row_keys": lambda: row_keys(xb, model._predict_seed),
            "keyed_vectors": lambda: keyed.sphere(where, m, "cpu", f32),
            "streamed_vectors": lambda: streamed.sphere(where, m, "cpu", f32),
            "keyed_coordinates": lambda: keyed.coordinates(chunk, T, m, "cpu", f32),
            "streamed_coordinates": lambda: streamed.coordinates(chunk, T, m, "cpu", f32),
        }
        return {k: _median_us(fn, repeats, chunk) for k, fn in parts.items()}


def warm_up():
    small = dict(CONFIG, n_features=2, n_selected=2, width=8, train_steps=2, n_rows=50)
    model, X, y = train(small, 8)
    for fn in runners(model, X, y).values():
        fn(0)


def run(cfg, ctx):
    rows = []
    for T in cfg["seq_lens"]:
        model, X, y = train(cfg, T)
        rec = compare(runners(model, X, y), [(KEYED, STREAMED)], repeats=cfg["repeats"])
        (c,) = rec["comparisons"]
        n = cfg["n_rows"]
        row = {
            "seq_len": T,
            "keyed_us_per_row": 1e6 * c["ours_seconds"] / n,
            "streamed_us_per_row": 1e6 * c["peer_seconds"] / n,
            "keyed_over_streamed": c["time_ratio"],
            "keyed_r2": c["ours_r2"],
            "streamed_r2": c["peer_r2"],
            "breakdown_us_per_row": breakdown(model, X, cfg["breakdown_repeats"]),
            **rec,
        }
        scaled, first_call = scaled_runners(model, X, y)
        pairs = [("log_2T", "plain_2T"), ("floor_2T", "plain_2T")]
        srec = compare(scaled, pairs, repeats=cfg["repeats"])
        log_c, floor_c = srec["comparisons"]
        row["scale_at_2T"] = {
            "log_over_plain": log_c["time_ratio"],
            "floor_over_plain": floor_c["time_ratio"],
            "floor_first_call_seconds": first_call,
            "r2": {"plain": log_c["peer_r2"], "log": log_c["ours_r2"], "floor": floor_c["ours_r2"]},
            **srec,
        }
        rows.append(row)
        ctx.log(
            f"  T={T}: keyed {row['keyed_us_per_row']:.1f} us/row, streamed "
            f"{row['streamed_us_per_row']:.1f} us/row (x{row['keyed_over_streamed']:.2f}); "
            f"R^2 {row['keyed_r2']:.4f} vs {row['streamed_r2']:.4f}"
        )
        s = row["scale_at_2T"]
        ctx.log(
            f"  at 2T={2 * T}: log scale x{s['log_over_plain']:.3f}, floor scale "
            f"x{s['floor_over_plain']:.3f} the time of no scale (floor's first call "
            f"{s['floor_first_call_seconds']:.1f} s)"
        )
    return {"rows": rows}


def table(rec):
    lines = []
    for r in rec["rows"]:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in r["breakdown_us_per_row"].items())
        lines.append(
            (
                f"T={r['seq_len']} predict",
                f"keyed {r['keyed_us_per_row']:.1f} us/row, streamed "
                f"{r['streamed_us_per_row']:.1f} us/row, ratio {r['keyed_over_streamed']:.2f}; "
                f"R^2 {r['keyed_r2']:.4f} vs {r['streamed_r2']:.4f}",
            )
        )
        lines.append((f"T={r['seq_len']} draws (us/row)", parts))
        s = r.get("scale_at_2T")
        if s:
            lines.append(
                (
                    f"T={r['seq_len']} predict at 2T with a length scale",
                    f"log x{s['log_over_plain']:.3f}, floor x{s['floor_over_plain']:.3f} the "
                    f"time of no scale; floor's first call {s['floor_first_call_seconds']:.1f} s; "
                    f"R^2 {s['r2']['plain']:.3f} / {s['r2']['log']:.3f} / {s['r2']['floor']:.3f}",
                )
            )
    return lines
