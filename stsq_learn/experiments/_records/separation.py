"""The record of the width separation: the transformer's width ~ log T, the FCN's ~ T d."""

from __future__ import annotations

from sklearn.base import clone

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.estimators import FCNSelector, SparseTokenSelector
from .._record import Experiment, Work
from .._separation import (
    _DEFAULT_ESTIMATORS,
    _DEFAULT_STEPS,
    _DEFAULT_WIDTHS,
    width_separation,
)
from .._width_search import checked_grids
from ._format import fmt

# The quick size: Adam at constant steps (0.1 and 0.01), 256 and 1024 rows a step.
_QUICK = {
    "transformer": SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, learning_rate="constant", batch_size=256
    ),
    "fcn": FCNSelector(
        solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
    ),
}
# The long run: a cosine-decayed Adam step; 64 rows a step for the transformer (a step
# at T=4096 costs ~15 ms on one core), 256 for the FCN; marginal encoding draws.
_LONG = {
    "transformer": SparseTokenSelector(
        solver="adam",
        learning_rate_init=0.1,
        learning_rate="cosine",
        batch_size=64,
        pe_sampling="marginal",
    ),
    "fcn": FCNSelector(
        solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
    ),
}
_TRANSFORMER_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

PRESETS = {
    "tiny": dict(
        seq_lens=(4, 8),
        n_features=2,
        n_selected=2,
        target_r2=0.5,
        transformer=_QUICK["transformer"],
        fcn=_QUICK["fcn"],
        widths={"transformer": (4, 8), "fcn": (4, 8)},
        n_steps={"transformer": 20, "fcn": 20},
        n_val=200,
    ),
    "quick": dict(
        seq_lens=(4, 8, 16, 32, 64),
        n_features=2,
        n_selected=2,
        target_r2=0.9,
        transformer=_QUICK["transformer"],
        fcn=_QUICK["fcn"],
        widths={
            "transformer": (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
            "fcn": (
                *(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512),
                *(768, 1024, 1536, 2048),
            ),
        },
        n_steps={"transformer": 300, "fcn": 500},
        n_val=2000,
    ),
    # T = 4 ... 4096 for the transformer (~6 min on one busy core), the FCN to T = 128.
    "full": dict(
        seq_lens=tuple(4 * 2**k for k in range(11)),
        n_features=2,
        n_selected=2,
        target_r2=0.9,
        transformer=_LONG["transformer"],
        fcn=_LONG["fcn"],
        widths={"transformer": _TRANSFORMER_GRID, "fcn": _FCN_GRID},
        n_steps={"transformer": 2000, "fcn": 2000},
        n_val=1000,
        max_seq_len={"fcn": 128},
    ),
    "gpu": dict(
        seq_lens=tuple(4 * 2**k for k in range(13)),
        n_features=2,
        n_selected=2,
        target_r2=0.9,
        transformer=_LONG["transformer"],
        fcn=_LONG["fcn"],
        widths={"transformer": _TRANSFORMER_GRID, "fcn": (*_FCN_GRID, 8192, 16384)},
        n_steps={"transformer": 4000, "fcn": 4000},
        n_val=10000,
        max_seq_len={"fcn": 256},
    ),
}

# Fits a search is expected to take: at the first T, a few up the grid; then about two,
# bracketing around the previous T's minimal width.
_FITS_FIRST, _FITS_NEXT = 3, 2


def work(
    seq_lens,
    n_features,
    n_selected,
    *,
    widths=None,
    n_steps=None,
    n_val=2000,
    transformer=None,
    fcn=None,
    max_seq_len=None,
    **_,
):
    """Expected searches: 3 fits at the first T, then 2 per T; the FCN timed at ~4 T d.

    The transformer's step time barely depends on its width; the FCN's does, so
    its fits are timed at the width a ``4 T d`` law predicts. Where that passes
    the grid's top, the FCN is expected to fail at the grid's top widths and to
    skip the longer lengths.
    """
    grids, steps = checked_grids(widths, n_steps, _DEFAULT_WIDTHS, _DEFAULT_STEPS)
    models = {"transformer": transformer, "fcn": fcn}
    models = {m: _DEFAULT_ESTIMATORS[m] if e is None else e for m, e in models.items()}
    limits = {"transformer": max(seq_lens), "fcn": max(seq_lens), **(max_seq_len or {})}
    out, fcn_done = [], False
    for i, T in enumerate(sorted(seq_lens)):
        task = SparseTokenSelectionTask(T, n_features, n_selected)
        fits = _FITS_FIRST if i == 0 else _FITS_NEXT
        grid = grids["transformer"]
        est = clone(models["transformer"]).set_params(width=grid[len(grid) // 3])
        label = f"separation: transformer T={T}"
        out.append(Work(label, fits, steps["transformer"], est, task, predict_rows=n_val))
        if T > limits["fcn"] or fcn_done:
            continue
        grid = grids["fcn"]
        expected = [w for w in grid if w >= 4 * T * n_features][:1]
        fcn_done = not expected  # past the grid: fails at its top widths, then skips
        for w in expected * fits or grid[-_FITS_FIRST:]:
            est = clone(models["fcn"]).set_params(width=w)
            label = f"separation: fcn T={T} width={w}"
            out.append(Work(label, 1, steps["fcn"], est, task, predict_rows=n_val))
    return out


def _law_text(law, kind):
    if law is None:
        return None
    quality = f"fit R^2 {law['r2']:.3f}, rms residual {law['rms_residual']:.2f}"
    a, b = law["intercept"], law["slope"]
    if kind == "log_T":
        return f"a={a:.1f}, b={b:.2f} ({quality})"
    if kind == "power":
        c = law["exponent"]
        edge = " (c at the grid's lower edge: the log law)" if c <= 0.0011 else ""
        return f"a={a:.1f}, b={b:.2f}, c={c:.3f}{edge} ({quality})"
    if kind == "power_0":
        return f"b={b:.2f}, c={law['exponent']:.3f} ({quality})"
    return f"b={b:.2f} ({quality})"


_LAWS = (
    ("transformer", "log_T", "transformer: w = a + b log2 T"),
    ("transformer", "power", "transformer: w = a + b T^c"),
    ("transformer", "power_0", "transformer: w = b T^c"),
    ("fcn", "power_0", "FCN: w = b T^c"),
    ("fcn", "T_d", "FCN: w = b T d"),
)


def summary_rows(rows, sep):
    """Summary rows of the width separation: widths (or lower bounds), ratio, laws."""
    d = sep.config["n_features"]
    rows.append(
        f"| width separation (d={d}, q={sep.config['n_selected']}, "
        f"R^2 >= {sep.config['target_r2']}, {sep.config['regime']}) | "
        f"T = {', '.join(map(str, sep.seq_lens))} | |"
    )
    for model in ("transformer", "fcn"):
        rows.append(f"| | minimal width, {model} | {' / '.join(sep.width_text(model))} |")
    ratio = " / ".join(fmt(r, 1) for r in sep.width_ratio())
    rows.append(f"| | FCN / transformer width | {ratio} |")
    for model, kind, label in _LAWS:
        text = _law_text(sep.growth_laws[model].get(kind), kind)
        if text is not None:
            rows.append(f"| | {label} | {text} |")
    if sep.seconds:
        spent = ", ".join(f"{m} {s:.0f} s" for m, s in sep.seconds.items())
        rows.append(f"| | search time | {spent} |")


RECORD = Experiment(
    name="separation",
    function=width_separation,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    aliases=("width",),
)
