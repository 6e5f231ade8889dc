"""The record of the width separation: minimal widths against T at q = 2 and q = 3.

The transformer's measured minimal widths are drawn beside the isotropic
floor's (:func:`~stsq_learn.isotropic_floor`), the theory's curve, and the
law ``w = a + b q log2 T`` is fitted to all of them; the FCN's widths grow
like a power of T, and where no width of its grid reached the target in
its steps its width is a lower bound.
"""

from __future__ import annotations

import dataclasses
import math

from sklearn.base import clone

from ...tasks.selection.estimators import FCNSelector, SparseTokenSelector
from ...tasks.selection.separation import (
    SeparationByQResult,
    SeparationCurve,
    SeparationSettings,
    separation_plans,
    width_separation_by_q,
)
from .._record import Experiment, Work
from ._format import fmt

# The paper's algorithm: plain gradient descent, a constant step, a fresh batch of 256 rows
# a step, every block of W (token rows too) at the same step. The step 3 is ours.
_PLAIN_GD = SparseTokenSelector(
    solver="sgd",
    learning_rate="constant",
    learning_rate_init=3.0,
    token_block_rate=1.0,
    batch_size=256,
)
_PLAIN_GD_LABEL = "plain GD, the paper's algorithm (every block at one step; step 3 ours)"
# Ours: SGD with the estimator's width-scaled step (the identity direction paced on its own,
# the token rows at lr / width), constant, 256 fresh rows a step. At q = 3 and widths
# 128-512, plain GD with every block at one step stays below the floor within our budgets
# (R^2 0.79 at T=64, width 256, 600 steps, floor 0.93), and Adam too (0.73 at step 0.03).
# This one leaves uniform attention late at long lengths (T=256, width 256: R^2 0.15 at
# step 1000, 0.88 at 1500, 0.899 from 2000 on, floor 0.904): the full preset stops at
# T=256 with 3000 steps; T=1024 is in the gpu preset only, with 8000.
_PACED_SGD = SparseTokenSelector(solver="sgd", learning_rate="constant", batch_size=256)
_PACED_LABEL = (
    "SGD, ours: width-scaled paced step (plain GD and Adam stay below the floor in budget)"
)
_FCN = FCNSelector(
    solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
)
_FCN_LONG = FCNSelector(
    solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
)
_Q2_GRID = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
_Q3_GRID = (32, 64, 128, 256, 512, 1024, 2048)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
_NO_FCN = {"fcn": 1}  # no FCN search on this curve (its lengths are all above 1)


PRESETS = {
    "tiny": SeparationSettings(
        curves=(
            SeparationCurve(
                label=_PLAIN_GD_LABEL,
                seq_lens=(4, 8),
                n_features=2,
                n_selected=2,
                transformer=_PLAIN_GD,
                fcn=_FCN,
                widths={"transformer": (4, 8), "fcn": (4, 8)},
                n_steps={"transformer": 20, "fcn": 20},
                floor_rows=500,
            ),
            SeparationCurve(
                label=_PACED_LABEL,
                seq_lens=(4, 8),
                n_features=4,
                n_selected=3,
                transformer=_PACED_SGD,
                widths={"transformer": (8, 16)},
                n_steps={"transformer": 20},
                max_seq_len=_NO_FCN,
                floor_rows=500,
            ),
        ),
        target_r2=0.5,
        n_val=200,
    ),
    "quick": SeparationSettings(
        curves=(
            SeparationCurve(
                label=_PLAIN_GD_LABEL,
                seq_lens=(4, 8, 16, 32),
                n_features=2,
                n_selected=2,
                transformer=_PLAIN_GD,
                fcn=_FCN,
                widths={"transformer": _Q2_GRID, "fcn": _FCN_GRID},
                n_steps={"transformer": 400, "fcn": 500},
            ),
            SeparationCurve(
                label=_PACED_LABEL,
                seq_lens=(16, 32, 64),
                n_features=4,
                n_selected=3,
                transformer=_PACED_SGD,
                widths={"transformer": _Q3_GRID},
                n_steps={"transformer": 300},
                max_seq_len=_NO_FCN,
            ),
        ),
        target_r2=0.9,
        n_val=1000,
    ),
    "full": SeparationSettings(
        curves=(
            SeparationCurve(
                label=_PLAIN_GD_LABEL,
                seq_lens=tuple(4 * 2**k for k in range(7)),
                n_features=2,
                n_selected=2,
                transformer=_PLAIN_GD,
                fcn=_FCN_LONG,
                widths={"transformer": _Q2_GRID, "fcn": (*_FCN_GRID, 2048, 4096)},
                n_steps={"transformer": 2000, "fcn": 2000},
                max_seq_len={"fcn": 64},
            ),
            SeparationCurve(
                label=_PACED_LABEL,
                seq_lens=(16, 32, 64, 128, 256),
                n_features=4,
                n_selected=3,
                transformer=_PACED_SGD,
                widths={"transformer": _Q3_GRID},
                n_steps={"transformer": 3000},
                max_seq_len=_NO_FCN,
            ),
        ),
        target_r2=0.9,
        n_val=1000,
    ),
    "gpu": SeparationSettings(
        curves=(
            SeparationCurve(
                label=_PLAIN_GD_LABEL,
                seq_lens=tuple(4 * 2**k for k in range(9)),
                n_features=2,
                n_selected=2,
                transformer=_PLAIN_GD,
                fcn=_FCN_LONG,
                widths={"transformer": _Q2_GRID, "fcn": (*_FCN_GRID, 2048, 4096, 8192)},
                n_steps={"transformer": 4000, "fcn": 4000},
                max_seq_len={"fcn": 128},
            ),
            SeparationCurve(
                label=_PACED_LABEL,
                seq_lens=(16, 64, 256, 1024),
                n_features=8,
                n_selected=3,
                transformer=_PACED_SGD,
                widths={"transformer": _Q3_GRID},
                n_steps={"transformer": 8000},
                max_seq_len=_NO_FCN,
            ),
        ),
        target_r2=0.9,
        n_val=4000,
    ),
}

PROVENANCE = {
    "batch_size": "paper: a fresh batch of 256 rows at every step",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: a uniform q-subset of the positions",
    "transformer_width_law": "paper: width O~(d + q log T) for the transformer",
    "fcn_width_law": "paper: width Omega~(T d) for fully-connected nets",
    "transformer_solver_q2": (
        "ours: plain gradient descent, the algorithm the paper's theory analyses, every "
        "block at one constant step (3.0, ours)"
    ),
    "transformer_solver_q3": (
        "ours: SGD with the width-scaled, identity-paced step (plain GD and Adam did not "
        "reach the floor within our budgets)"
    ),
    "fcn_solver": "ours: Adam (step 0.01 constant; 0.003 cosine in full and gpu)",
    "seq_lens": "ours: the lengths T of every curve",
    "n_features": "ours: d = 2 at q = 2, d = 4 (8 in gpu) at q = 3",
    "n_selected": "ours: q = 2 and q = 3",
    "width_grids": "ours: the width grids searched",
    "n_steps": "ours: the steps per width (an upper bound: fits stop at the target)",
    "target_r2": "ours: the R^2 a width must reach (0.9)",
    "n_val": "ours: the held-out rows scoring each width and stopping its fit",
    "search": "ours: bisection from the floor's minimal width (the FCN's: from T d scaling)",
    "floor": "ours: isotropic_floor's smallest width allowing the target, as the theory's curve",
    "pe_sampling": "ours: marginal encoding draws (the same law as full draws)",
}


def headline(result):
    """The record's headline numbers, flat: widths per (q, T), the law's slope and R^2.

    Keys, the same for every seed: ``"q{q}.T{T}.transformer_width"`` and
    ``"q{q}.T{T}.floor_width"`` (``inf`` where no width of the grid
    reached the target, or allows it), where the FCN was searched
    ``"q{q}.T{T}.fcn_width"`` (its lower bound where no width reached the
    target) and ``"q{q}.T{T}.fcn_width_is_bound"`` (1.0 for a bound, else
    0.0), and ``"law.intercept"``, ``"law.slope"``, ``"law.r2"`` (and
    ``"floor_law.*"``) of ``w = a + b q log2 T`` (NaN with too few widths).
    """
    out = {}
    for curve in result.curves:
        q = curve.config["n_selected"]
        widths, bounds = curve.minimal_width, curve.lower_bound
        fcn_lengths = set(curve.table.where(model="fcn")["param_seq_len"])
        for i, T in enumerate(curve.seq_lens):
            key = f"q{q}.T{T}"
            out[f"{key}.transformer_width"] = _number(widths["transformer"][i])
            out[f"{key}.floor_width"] = _number(curve.floor_width[i])
            if T in fcn_lengths:
                bound = widths["fcn"][i] is None
                out[f"{key}.fcn_width"] = _number(bounds["fcn"][i] if bound else widths["fcn"][i])
                out[f"{key}.fcn_width_is_bound"] = float(bound)
    for name in ("law", "floor_law"):
        law = getattr(result, name)
        for key, value in (("intercept", "a"), ("slope", "b"), ("r2", None)):
            number = math.nan if law is None else law.r2 if value is None else law.params[value]
            out[f"{name}.{key}"] = float(number)
    return out


def _number(width):
    """A width as a float, ``inf`` where there is none."""
    return math.inf if width is None else float(width)


# Fits a bisection from a good prediction takes per (T, model): the predicted width and
# its neighbour below (three at the first T, where the prediction is coarser).
_FITS_FIRST, _FITS_NEXT = 3, 2


def _curve_work(plan):
    """Expected fits of one checked curve: 3 at the first T, then 2; the FCN timed at ~4 T d.

    The transformer's step time barely depends on its width; the FCN's does,
    so its fits are timed at the width a ``4 T d`` law predicts. Where that
    passes the grid's top, the FCN is expected to fail at the grid's top
    widths and to skip the longer lengths. About half the fits reach the
    target and stop there, about half-way through their steps: every fit
    is counted at 3/4 of its steps.
    """
    steps = {m: max(1, 3 * k // 4) for m, k in plan.n_steps.items()}
    d = plan.task.n_features
    tag = f"separation q={plan.task.n_selected}"
    out, fcn_done = [], False
    for i, T in enumerate(plan.seq_lens):
        task = dataclasses.replace(plan.task, seq_len=T)
        fits = _FITS_FIRST if i == 0 else _FITS_NEXT
        grid = plan.widths["transformer"]
        est = clone(plan.models["transformer"]).set_params(width=grid[len(grid) // 2])
        label = f"{tag}: transformer T={T}"
        out.append(Work(label, fits, steps["transformer"], est, task, predict_rows=plan.n_val))
        if T not in plan.lengths["fcn"] or fcn_done:
            continue
        grid = plan.widths["fcn"]
        expected = [w for w in grid if w >= 4 * T * d][:1]
        fcn_done = not expected  # past the grid: fails at its top widths, then skips
        for w in expected * fits or grid[-2:]:
            est = clone(plan.models["fcn"]).set_params(width=w)
            label = f"{tag}: fcn T={T} width={w}"
            out.append(Work(label, 1, steps["fcn"], est, task, predict_rows=plan.n_val))
    return out


def work(settings):
    """Expected work of one seed: every curve's (:func:`_curve_work`)."""
    return [part for plan in separation_plans(settings) for part in _curve_work(plan)]


def _law_text(law):
    if law is None:
        return None
    a, b = law.params["a"], law.params["b"]
    return f"a={a:.1f}, b={b:.2f} (fit R^2 {law.r2:.3f}, rms residual {law.rms:.2f})"


def _fcn_text(curve):
    steps = curve.config["n_steps"]["fcn"]
    return " / ".join(
        t if not t.startswith(">") else f"{t} (not reached within {steps} steps)"
        for t in curve.width_text("fcn")
    )


def summary_rows(rows, res):
    """Summary rows: per curve the measured and floor widths (FCN bounds marked), the laws."""
    for curve, label in zip(res.curves, res.labels):
        cfg = curve.config
        rows.append(
            f"| width separation (d={cfg['n_features']}, q={cfg['n_selected']}, "
            f"R^2 >= {cfg['target_r2']}, transformer: {label}) | "
            f"T = {', '.join(map(str, curve.seq_lens))} | |"
        )
        rows.append(
            f"| | minimal width, transformer | {' / '.join(curve.width_text('transformer'))} |"
        )
        floors = " / ".join("-" if w is None else str(w) for w in curve.floor_width)
        rows.append(f"| | the floor's minimal width | {floors} |")
        if curve.searched("fcn"):
            rows.append(f"| | minimal width, fcn | {_fcn_text(curve)} |")
            ratio = " / ".join(fmt(r, 1) for r in curve.width_ratio())
            rows.append(f"| | FCN / transformer width | {ratio} |")
            law = curve.laws.get("fcn")
            if law is not None:
                d = cfg["n_features"]
                rows.append(
                    f"| | FCN: w = a + b T d | a={law.params['a']:.1f}, "
                    f"b={law.params['b'] / d:.2f} (fit R^2 {law.r2:.3f}) |"
                )
        if curve.seconds:
            spent = ", ".join(f"{m} {s:.0f} s" for m, s in curve.seconds.items())
            rows.append(f"| | search time | {spent} |")
    for name, label in (("law", "measured"), ("floor_law", "floor's")):
        text = _law_text(getattr(res, name))
        if text is not None:
            rows.append(f"| | transformer, {label}: w = a + b q log2 T | {text} |")


RECORD = Experiment(
    name="separation",
    function=width_separation_by_q,
    settings=SeparationSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    # Widths of grids whose neighbours are at most twice apart: one step either way; the
    # laws fitted to them move with them.
    reference_rtol={"*_width": 0.5, "law.*": 0.5},
    aliases=("width",),
    result=SeparationByQResult,
    seeds_batched=True,
)
