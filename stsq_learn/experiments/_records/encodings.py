"""The record of the encodings comparison: four families and a codebook sweep at longer lengths."""

from __future__ import annotations

import math

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.encodings import (
    EncodingsResult,
    EncodingsSettings,
    encoding_families,
    planned_models,
)
from ...tasks.selection.estimators import SparseTokenSelector
from .._record import Experiment, Work
from ._format import finite, fmt

# Adam at a constant step of 0.01, 256 rows a step: set here, not left to the defaults.
_ADAM = dict(solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=256)

PRESETS = {
    "tiny": EncodingsSettings(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(8, **_ADAM),
        n_steps=30,
        factors=(1, 2),
        codebook_factors=(1, 2, 4),
        sweep_factor=2,
        n_val=200,
    ),
    # 7 models per seed (4 families, 3 more codebooks), each with its seeds batched
    # (1500 steps moved no curve's shape, only its level).
    "quick": EncodingsSettings(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=SparseTokenSelector(64, **_ADAM),
        # 500 steps left stochastic and the randomized codebook level at 4T and 8T; at 400 they
        # are within 0.04 of each other, far above fixed and sinusoidal.
        n_steps=400,
        factors=(1, 2, 4, 8),
        max_positions=128,
        codebook_factors=(1, 4, 16),  # fixed (L = T) to stochastic-like (L = 16 T)
        sweep_factor=4,
        n_val=1000,
    ),
    "full": EncodingsSettings(
        seq_len=32,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(128, **_ADAM),
        n_steps=2000,
        factors=(1, 2, 4, 8, 16),
        max_positions=512,
        codebook_factors=(1, 2, 4, 8, 16, 32),
        sweep_factor=4,
        n_val=2000,
    ),
    "gpu": EncodingsSettings(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_ADAM),
        n_steps=5000,
        factors=(1, 2, 4, 8, 16),
        max_positions=1024,
        codebook_factors=(1, 2, 4, 8, 16, 32, 64),
        sweep_factor=4,
        n_val=10000,
    ),
}


def work(settings):
    """Every family and extra codebook, trained once per seed; each scored at every length."""
    s = settings
    task = SparseTokenSelectionTask(s.seq_len, s.n_features, s.n_selected)
    longest = s.seq_len * max(s.factors)
    max_positions = s.max_positions or longest
    sizes = [c * s.seq_len for c in s.codebook_factors]
    rows = int(s.n_val * sum(s.factors) / max(s.factors))  # about rows x length, at the longest
    return [
        Work(
            f"encodings: {label}",
            1,
            s.n_steps,
            est,
            task,
            predict_rows=rows,
            predict_len=min(longest, est.max_positions or longest),  # a codebook's longest
        )
        for label, est in planned_models(s.estimator, max_positions, sizes).items()
    ]


def summary_rows(rows, enc):
    """Summary rows of the encodings experiment (one seed's numbers)."""
    cfg = enc.config
    T = cfg["seq_len"]
    lens = ", ".join(f"{t // T}T" for t in enc.eval_lengths)
    rows.append(
        f"| encodings (T={T}, m={cfg['width']}, {cfg['n_steps']} steps, seed "
        f"{cfg['random_state']}, {cfg['n_val']} rows) | R^2 at {lens} | |"
    )
    for family in enc.families:
        label = f"randomized, L={cfg['max_positions']}" if family == "randomized" else family
        rows.append(f"| | {label} | {' / '.join(fmt(finite(v)) for v in enc.r2[family])} |")
    sizes = ", ".join(map(str, enc.codebook_sizes))
    i = enc.eval_lengths.index(enc.sweep_length)
    vals = " / ".join(fmt(finite(enc.sweep_r2[str(L)][i])) for L in enc.codebook_sizes)
    rows.append(
        f"| | randomized at {enc.sweep_length // T}T, L = {sizes} "
        f"(n/a: L < {enc.sweep_length}) | {vals} |"
    )


def headline(result):
    """The headline numbers of an encodings result (one seed), by flat name.

    ``<family>_r2_at_<k>T``: the R^2 at ``k`` times the training length;
    ``codebook_L<L>_r2_at_<k>T``: the sweep's codebook of L positions at
    its length. NaN where a codebook cannot score (L below the length).

    Parameters
    ----------
    result : EncodingsResult

    Returns
    -------
    dict of str to float
    """
    T = result.config["seq_len"]
    out = {}
    for family in result.families:
        for t, value in zip(result.eval_lengths, result.r2[family]):
            out[f"{family}_r2_at_{t // T}T"] = _float(value)
    k = result.sweep_length // T
    i = result.eval_lengths.index(result.sweep_length)
    for L in result.codebook_sizes:
        out[f"codebook_L{L}_r2_at_{k}T"] = _float(result.sweep_r2[str(L)][i])
    return out


def _float(value):
    """``value`` as a float, NaN for None."""
    return math.nan if value is None else float(value)


PROVENANCE = {
    "batch_size": "paper: a fresh batch of 256 rows per step (online training)",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets",
    "positional_encoding": (
        "paper: stochastic encodings; ours: the comparison with fixed, randomized "
        "(Ruoss et al., 2023) and sinusoidal (Vaswani et al., 2017) ones"
    ),
    "seq_len": "ours: the training length",
    "n_features": "ours: chosen for these presets",
    "n_selected": "ours: chosen for these presets",
    "width": "ours: chosen for these presets",
    "n_steps": "ours: chosen for these presets",
    "solver": "ours: Adam at a constant step of 0.01",
    "learning_rate_init": "ours: chosen for these presets",
    "factors": "ours: the test lengths",
    "max_positions": "ours: chosen for these presets",
    "codebook_factors": "ours: the codebook sweep",
    "sweep_factor": "ours: chosen for these presets",
    "n_val": "ours: chosen for these presets",
    "metric": "ours: R^2 = 1 - relative MSE",
}
"""Setting by setting, whether it comes from the paper or is ours."""

RECORD = Experiment(
    name="encodings",
    function=encoding_families,
    result=EncodingsResult,
    settings=EncodingsSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    seeds_batched=True,
)
