"""The record of q-sparse averaging: widths against N and q, zero-shot transfer, length."""

from __future__ import annotations

import math

from ...experiments._record import Experiment
from ...experiments._records._format import fmt
from ...studies import planning
from .estimators import FCNAverager, SparseTokenAverager
from .experiment import (
    SparseAveragingResult,
    SparseAveragingSettings,
    checked_settings,
    run_studies,
    sparse_averaging,
)

# The search against N (q = 2): Adam at 0.1 decayed by a cosine; 256 queries a step
# (batch_size="auto": ceil(256 / N) rows). The FCN: the separation's, size for size.
_ATTENTION = SparseTokenAverager(
    solver="adam", learning_rate_init=0.1, learning_rate="cosine", batch_size="auto"
)
_FCN_QUICK = FCNAverager(
    solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
)
_FCN_LONG = FCNAverager(
    solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
)
# Against q, transfer and length: the estimators' width-following SGD, written out.
_SGD = SparseTokenAverager(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_Q_GRID = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

PRESETS = {
    "tiny": SparseAveragingSettings(
        seq_lens=(4, 8),
        n_features=2,
        n_selected=2,
        transformer=_ATTENTION,
        fcn=_FCN_QUICK,
        widths={"transformer": (4, 8), "fcn": (4, 8)},
        n_steps={"transformer": 20, "fcn": 20},
        fcn_max_seq_len=8,
        target_r2=0.5,
        n_val=100,
        estimator=_SGD,
        q_values=(1, 2),
        q_seq_len=8,
        q_widths=(4, 8),
        q_steps=20,
        transfer_task=(8, 2, 2),
        transfer_width=8,
        transfer_steps=20,
        length_task=(8, 2, 2),
        length_width=8,
        length_steps=20,
        factors=(1, 2),
        n_test=400,
    ),
    # About 25 s on one core: N to 32 (the FCN to 8), q to 3 at N = 16, small transfer.
    "quick": SparseAveragingSettings(
        seq_lens=(4, 8, 16, 32),
        n_features=2,
        n_selected=2,
        transformer=_ATTENTION,
        fcn=_FCN_QUICK,
        widths={
            "transformer": (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64),
            "fcn": (8, 32, 512),  # N = 8: 32 and 512 fail (no width reaches it)
        },
        n_steps={"transformer": 300, "fcn": 500},
        fcn_max_seq_len=8,
        target_r2=0.9,
        n_val=500,
        estimator=_SGD,
        q_values=(1, 2, 3),
        q_seq_len=16,
        q_widths=(4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256),
        # At q = 3 (width 96) as good as the planned 1470 steps; 300 left q = 1, 2 at 1.5x
        # their floor's width.
        q_steps=400,
        transfer_task=(32, 8, 4),
        transfer_width=64,
        transfer_steps=300,  # 1.01x the floor, as the planned 1200 steps
        length_task=(16, 8, 2),
        length_width=32,
        length_steps=400,  # the planned 960 steps took 2.4x the time for the same shape
        factors=(1, 2, 4),
        n_test=4000,
    ),
    # N = 4 ... 256 (the FCN to 32), q = 1, 2, 4, 8 at N = 32, the transfer at N = 64,
    # q = 4, width 256, the length part at N = 32.
    "full": SparseAveragingSettings(
        seq_lens=(4, 8, 16, 32, 64, 128, 256),
        n_features=2,
        n_selected=2,
        transformer=_ATTENTION,
        fcn=_FCN_LONG,
        widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID},
        n_steps={"transformer": 1000, "fcn": 2000},
        fcn_max_seq_len=32,
        target_r2=0.9,
        n_val=1000,
        estimator=_SGD,
        q_values=(1, 2, 4, 8),
        q_seq_len=32,
        q_widths=_Q_GRID,
        q_steps="auto",
        transfer_task=(64, 8, 4),
        transfer_width=256,
        transfer_steps="auto",
        length_task=(32, 8, 2),
        length_width=64,
        length_steps="auto",
        factors=(1, 2, 4),
        n_test=8000,
    ),
    "gpu": SparseAveragingSettings(
        seq_lens=(4, 8, 16, 32, 64, 128, 256, 512, 1024),
        n_features=2,
        n_selected=2,
        transformer=_ATTENTION,
        fcn=_FCN_LONG,
        widths={"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)},
        n_steps={"transformer": 2000, "fcn": 4000},
        fcn_max_seq_len=64,
        target_r2=0.9,
        n_val=4000,
        estimator=_SGD,
        q_values=(1, 2, 4, 8, 16),
        q_seq_len=64,
        q_widths=(*_Q_GRID, 1536, 2048),
        q_steps="auto",
        transfer_task=(64, 8, 4),
        transfer_width=1024,
        transfer_steps="auto",
        length_task=(64, 8, 2),
        length_width=128,
        length_steps="auto",
        factors=(1, 2, 4, 8),
        n_test=64000,
    ),
}


def work(settings):
    """The studies' work for one seed: their dry run (:func:`~stsq_learn.studies.planning`).

    Each search counts the fits it is expected to take (3 at the first
    point, then 2); the transfer and the length part fit two models each.
    """
    with planning() as plan:
        run_studies(checked_settings(settings), (0,))
    return list(plan)


def _widths(table, model):
    """``model``'s minimal widths in order, as text (``>b`` where none reached, above ``b``)."""
    out = []
    for row in table.where(model=model):
        value, bound = row["value"], row["bound"]
        out.append(
            str(int(value)) if value == value else f">{int(bound)}" if bound == bound else "-"
        )
    return " / ".join(out)


def summary_rows(rows, res):
    """Summary rows of the qSA experiment: widths, laws, transfer, length."""
    cfg = res.config
    lens = ", ".join(map(str, cfg["seq_lens"]))
    rows.append(
        f"| qSA widths (d={cfg['n_features']}, q={cfg['n_selected']}, "
        f"R^2 >= {cfg['target_r2']}) | N = {lens} | |"
    )
    for model, label in (("attention", "attention"), ("fcn", "FCN")):
        rows.append(f"| | minimal width, {label} | {_widths(res.by_length, model)} |")
    growth = res.width_growth()
    if growth is not None:
        rows.append(f"| | attention: minimal width, longest N over shortest | {growth:.2f} |")
    for model, law in (("attention", res.law("attention")), ("FCN", res.law("fcn"))):
        if law is not None:
            rows.append(f"| | {model}: w = {law.label('N')} | rms residual {law.rms:.2f} |")
    qs = ", ".join(map(str, cfg["q_values"]))
    rows.append(
        f"| | minimal width, attention at N={cfg['q_seq_len']}, q = {qs} "
        f"| {_widths(res.by_q, 'attention')} |"
    )
    floors = " / ".join("-" if w != w else str(int(w)) for w in res.by_q["floor_width"])
    rows.append(f"| | width the isotropic floor allows, q = {qs} | {floors} |")
    tr = res.transfer
    m = tr.meta
    where = f"N={m['seq_len']}, d={m['n_features']}, q={m['n_selected']}, m={m['width']}"
    rows.append(
        f"| qSA transfer ({where}) | isotropic floor (relative MSE) | {fmt(tr['floor'][0])} |"
    )
    for row in tr:
        ratio = row["floor_ratio"]
        times = "" if ratio != ratio else f" ({ratio:.2f}x the floor)"
        rows.append(f"| | relative MSE, {row['model']} | {fmt(row['relative_mse'])}{times} |")
    N, _, q = cfg["length_task"]
    lens = ", ".join(str(L) for L in res.length.unique("eval_seq_len"))
    rows.append(
        f"| qSA length (trained at N={N}, q={q}, m={cfg['length_width']}) | R^2 at N' = {lens} | |"
    )
    for pe in res.length.unique("model"):
        values = res.length.where(model=pe)["score"]
        rows.append(f"| | {pe} | {' / '.join(fmt(v) for v in values)} |")


def headline(result):
    """The headline numbers of a q-sparse averaging result, by flat name.

    Minimal widths against N (``attention_width_N<N>``, ``fcn_width_N<N>``;
    NaN where none of the grid reached the target or N was not searched),
    the attention model's growth ratio and its law ``a + b log2 N``
    (``attention_log_law_a``, ``_b``, ``_r2``, where fitted at 3 or more N);
    against q (``attention_width_q<q>`` and the isotropic floor's
    ``floor_width_q<q>``); the transfer's relative MSEs and their ratios to
    the floor; the length part's R^2 (``length_<encoding>_r2_at_<k>N``).

    Parameters
    ----------
    result : SparseAveragingResult
        One seed's result.

    Returns
    -------
    dict of str to float
        The numbers (NaN where there is none).
    """
    out = {}
    table = result.by_length
    for label in ("attention", "fcn"):
        for N in result.config["seq_lens"]:
            found = table.where(model=label, seq_len=N)["value"]
            out[f"{label}_width_N{N}"] = float(found[0]) if len(found) else math.nan
    growth = result.width_growth()
    out["attention_width_growth"] = math.nan if growth is None else growth
    law = result.law("attention")
    if law is not None:
        out.update(
            attention_log_law_a=law.params["a"],
            attention_log_law_b=law.params["b"],
            attention_log_law_r2=law.r2,
        )
    for row in result.by_q:
        q = row["param_n_selected"]
        out[f"attention_width_q{q}"] = float(row["value"])
        out[f"floor_width_q{q}"] = float(row["floor_width"])
    tr = result.transfer
    out["transfer_floor"] = float(tr["floor"][0])
    for row in tr:
        key = row["model"].replace(" ", "_").replace("on_", "").lower()
        out[f"transfer_{key}_relative_mse"] = float(row["relative_mse"])
        out[f"transfer_{key}_floor_ratio"] = float(row["floor_ratio"])
    N = result.config["length_task"][0]
    for row in result.length:
        out[f"length_{row['model']}_r2_at_{row['eval_seq_len'] // N}N"] = float(row["score"])
    return out


PROVENANCE = {
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets (one per position: Sanford, Hsu and Telgarsky, 2023)",
    "width_law": "paper: width O~(d + q log T) for attention against Omega~(T d) for the FCN",
    "batch_size": (
        "ours: 256 queries a step (ceil(256 / N) rows of qSA); the transfer's selector "
        "trains on the paper's fresh batch of 256 rows per step"
    ),
    "seq_lens": "ours: chosen for these presets",
    "n_features": "ours: chosen for these presets",
    "n_selected": "ours: chosen for these presets",
    "transformer": "ours: Adam at 0.1, decayed by a cosine",
    "fcn": "ours: Adam at 0.01 (quick) or 0.003 with a cosine (full, gpu)",
    "widths": "ours: the width grids",
    "n_steps": "ours: chosen for these presets",
    "fcn_max_seq_len": "ours: chosen for these presets",
    "target_r2": "ours: chosen for these presets",
    "n_val": "ours: chosen for these presets",
    "stop_at_target": "ours: a fit ends once it meets the target on the search's validation rows",
    "estimator": "ours: the estimators' width-following SGD",
    "q_values": "ours: chosen for these presets",
    "q_seq_len": "ours: chosen for these presets",
    "q_widths": "ours: chosen for these presets",
    "q_steps": "ours: chosen for these presets",
    "transfer_task": "ours: chosen for these presets",
    "transfer_width": "ours: chosen for these presets",
    "transfer_steps": "ours: chosen for these presets",
    "length_task": "ours: chosen for these presets",
    "length_width": "ours: chosen for these presets",
    "length_steps": "ours: chosen for these presets",
    "factors": "ours: the test lengths",
    "n_test": "ours: chosen for these presets",
    "metric": "ours: R^2 = 1 - relative MSE, and the relative MSE",
}
"""Setting by setting, whether it comes from the paper or is ours."""

RECORD = Experiment(
    name="qsa",
    function=sparse_averaging,
    settings=SparseAveragingSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    # Widths of grids whose neighbours are at most twice apart: one step either way.
    reference_rtol={
        "*width_N*": 0.5,
        "*width_q*": 0.5,
        "attention_width_growth": 0.5,
        "attention_log_law_*": 0.5,
    },
    aliases=("averaging",),
    result=SparseAveragingResult,
    seeds_batched=True,
)
