"""The record of the length generalization: stochastic encodings keep R^2 on longer sequences."""

from __future__ import annotations

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.estimators import SparseTokenSelector
from .._length import length_generalization
from .._record import Experiment, Work
from ._format import fmt

# Adam at a constant step of 0.01, 256 rows a step: set here, not left to the defaults.
_ADAM = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=256)

PRESETS = {
    "tiny": dict(
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
    "quick": dict(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=SparseTokenSelector(64, **_ADAM),
        n_steps=1500,
        factors=(1, 2, 4, 8, 16),
        n_pe_samples=16,
        n_val_large=1000,
        train_range=(4, 16),
    ),
    "full": dict(
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
    "gpu": dict(
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


def work(
    seq_len,
    n_features,
    n_selected,
    estimator,
    n_steps,
    factors,
    n_pe_samples=16,
    n_val_large=10000,
    length_scales=("log", "floor"),
    train_range=None,
    range_scale="log",
    **_,
):
    """Two models (stochastic, fixed), and one over a range, trained; each scored at every
    length, with its draws and scales."""
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    # Predicting costs about rows x length: all lengths as rows at the longest.
    rows = int((128 + n_val_large) * sum(factors) / max(factors))
    out = []
    scales = len(length_scales)
    for pe, draws in (("stochastic", 1 + n_pe_samples + scales), ("fixed", 1 + min(scales, 1))):
        out.append(
            Work(
                f"length: {pe}",
                1,
                n_steps,
                _with_pe(estimator, pe),
                task,
                predict_rows=rows * draws,
                predict_len=seq_len * max(factors),
            )
        )
    if train_range is not None:
        est = _with_pe(estimator, "stochastic").set_params(length_scale=range_scale)
        out.append(
            Work(
                f"length: trained over {train_range[0]}..{train_range[1]}",
                1,
                n_steps,
                est,
                SparseTokenSelectionTask(tuple(train_range), n_features, n_selected),
                predict_rows=rows,
                predict_len=seq_len * max(factors),
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


RECORD = Experiment(
    name="length_generalization",
    function=length_generalization,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    aliases=("length",),
)
