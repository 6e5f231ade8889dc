"""The record of the length generalization: stochastic encodings keep R^2 on longer sequences."""

from __future__ import annotations

from ...estimators import SparseTokenSelector
from ...tasks import SparseTokenSelectionTask
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
    **_,
):
    """Two models (stochastic, fixed) trained; each scored at every length, with its draws."""
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    # Predicting costs about rows x length: all lengths as rows at the longest.
    rows = int((128 + n_val_large) * sum(factors) / max(factors))
    out = []
    for pe, draws in (("stochastic", 1 + n_pe_samples), ("fixed", 1)):
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
