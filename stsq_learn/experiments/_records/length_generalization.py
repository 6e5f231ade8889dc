"""The record of the length generalization: stochastic encodings keep R^2 on longer sequences."""

from __future__ import annotations

import math

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.estimators import SparseTokenSelector
from ...tasks.selection.length import (
    LengthGeneralizationResult,
    LengthGeneralizationSettings,
    length_generalization,
)
from .._record import Experiment, Work
from ._format import fmt

# Adam at a constant step of 0.01, 256 rows a step: set here, not left to the defaults.
_ADAM = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=256)

PRESETS = {
    "tiny": LengthGeneralizationSettings(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(8, **_ADAM),
        n_steps=30,
        factors=(1, 2),
        n_pe_samples=4,
        n_val_large=200,
        train_range=(4, 8),
        floor=False,
    ),
    "quick": LengthGeneralizationSettings(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=SparseTokenSelector(64, **_ADAM),
        n_steps=500,  # 1500 took twice the time for the same curves' shape
        factors=(1, 2, 4, 8, 16),
        n_pe_samples=16,
        n_val_large=1000,
        train_range=(4, 16),
    ),
    "full": LengthGeneralizationSettings(
        seq_len=32,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(128, **_ADAM),
        n_steps=4000,
        factors=(1, 2, 4, 8, 16, 32),
        n_pe_samples=16,
        n_val_large=2000,
        train_range=(8, 32),
        range_scale="floor",
    ),
    "gpu": LengthGeneralizationSettings(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_ADAM),
        n_steps=5000,
        factors=(1, 2, 4, 8, 16, 32, 64),
        n_pe_samples=64,
        n_val_large=10000,
        train_range=(16, 64),
        range_scale="floor",
    ),
}


def work(settings):
    """Two models (stochastic, fixed), and one over a range, trained; each scored at every
    length, with its draws and scales."""
    s = settings
    task = SparseTokenSelectionTask(s.seq_len, s.n_features, s.n_selected)
    # Predicting costs about rows x length: all lengths as rows at the longest.
    rows = int((128 + s.n_val_large) * sum(s.factors) / max(s.factors))
    out = []
    scales = len(s.length_scales)
    for pe, draws in (("stochastic", 1 + s.n_pe_samples + scales), ("fixed", 1 + min(scales, 1))):
        out.append(
            Work(
                f"length: {pe}",
                1,
                s.n_steps,
                _with_pe(s.estimator, pe),
                task,
                predict_rows=rows * draws,
                predict_len=s.seq_len * max(s.factors),
            )
        )
    if s.train_range is not None:
        est = _with_pe(s.estimator, "stochastic").set_params(length_scale=s.range_scale)
        out.append(
            Work(
                f"length: trained over {s.train_range[0]}..{s.train_range[1]}",
                1,
                s.n_steps,
                est,
                SparseTokenSelectionTask(tuple(s.train_range), s.n_features, s.n_selected),
                predict_rows=rows,
                predict_len=s.seq_len * max(s.factors),
            )
        )
    return out


def _with_pe(estimator, pe):
    from sklearn.base import clone

    return clone(estimator).set_params(positional_encoding=pe)


def summary_rows(rows, length):
    """Summary rows of the length experiment."""
    T = length.config["seq_len"]
    lens = ", ".join(f"{t // T}T" for t in length.eval_lengths)
    rows.append(
        f"| length generalization (T={T}, {length.config['n_val_large']} rows) | R^2 at {lens} | |"
    )
    if length.floor_r2 is not None:
        floor = " / ".join(fmt(v) for v in length.floor_r2)
        rows.append(
            f"| | floor at T' (best W = gamma I of width {length.config['width']}) | {floor} |"
        )
    for model in length.models:
        vals = " / ".join(fmt(v) for v in length.r2["val_large"][model])
        rows.append(f"| | {model} | {vals} |")


def _slug(text):
    """``text`` as a flat name: lowercase words joined by ``_``."""
    return "_".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def headline(result):
    """The headline numbers of a length-generalization result, by flat name.

    ``<model>_r2_at_<k>T``: R^2 on the large validation set at ``k`` times
    the training length, for every curve; ``<model>_floor_ratio_at_<k>T``:
    its relative MSE over the isotropic floor's there (where the floor was
    computed and is above 0). NaN where a number is missing.

    Parameters
    ----------
    result : LengthGeneralizationResult

    Returns
    -------
    dict of str to float
    """
    T = result.config["seq_len"]
    out = {}
    floor = result.floor_r2
    for model in result.models:
        for i, t in enumerate(result.eval_lengths):
            r2 = result.r2["val_large"][model][i]
            r2 = math.nan if r2 is None else float(r2)
            out[f"{_slug(model)}_r2_at_{t // T}T"] = r2
            if floor is not None and floor[i] is not None and floor[i] < 1:
                out[f"{_slug(model)}_floor_ratio_at_{t // T}T"] = (1 - r2) / (1 - floor[i])
    return out


PROVENANCE = {
    "batch_size": "paper: a fresh batch of 256 rows per step (online training)",
    "n_val_128": "paper: a fixed 128-row out-of-distribution validation set",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets",
    "positional_encoding": "paper: stochastic positional encodings against fixed ones",
    "seq_len": "ours: the training length",
    "n_features": "ours: chosen for these presets",
    "n_selected": "ours: chosen for these presets",
    "width": "ours: chosen for these presets",
    "n_steps": "ours: chosen for these presets",
    "solver": "ours: Adam at a constant step of 0.01",
    "learning_rate_init": "ours: chosen for these presets",
    "factors": "ours: the test lengths",
    "n_val_large": "ours: a larger validation set, for less noise",
    "n_pe_samples": "ours: encoding draws averaged at predict time",
    "length_scales": "ours: length-aware score scales",
    "train_range": "ours: a model trained over a range of lengths",
    "range_scale": "ours: chosen for these presets",
    "floor": "ours: the isotropic floor W = gamma I of the width, as the reference",
    "metric": "ours: R^2 = 1 - relative MSE",
}
"""Setting by setting, whether it comes from the paper or is ours."""

RECORD = Experiment(
    name="length_generalization",
    function=length_generalization,
    result=LengthGeneralizationResult,
    settings=LengthGeneralizationSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    seeds_batched=True,
    aliases=("length",),
)
