"""The record of q-sparse averaging: widths against N and q, zero-shot transfer, length."""

from __future__ import annotations

import math

from sklearn.base import clone

from ...experiments._common import planned_steps
from ...experiments._record import Experiment, Work
from ...experiments._records._format import fmt
from ...experiments._separation import width_texts
from ...experiments._task_parts import width_search_rows
from .. import SparseAveragingTask, SparseTokenSelectionTask
from ..selection.estimators import SparseTokenSelector
from .estimators import FCNAverager, SparseTokenAverager
from .experiment import SparseAveragingResult, SparseAveragingSettings, sparse_averaging

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

# Fits a search is expected to take (as the separation's record): a few at the first
# N, then about two.
_FITS_FIRST, _FITS_NEXT = 3, 2


def work(settings):
    """Expected fits of each part.

    Against N: 3 fits at the first N, then 2 per N; the FCN timed at the
    width a ``2 N^3`` law predicts (measured: 32 to 64 at N = 4, 512 to 1024
    at N = 8), at the grid's top widths once that passes the grid, then no
    longer searched. Against q: 2 fits per q at the width its isotropic floor
    allows (the bisection is run, with fewer rows). Transfer and length: two
    fits each.
    """
    from ...experiments._width_search import floor_widths

    s = settings
    out = []
    fcn_done = False
    for i, N in enumerate(sorted(s.seq_lens)):
        task = SparseAveragingTask(N, s.n_features, s.n_selected)
        fits = _FITS_FIRST if i == 0 else _FITS_NEXT
        grid = sorted(s.widths["transformer"])
        est = clone(s.transformer).set_params(width=grid[len(grid) // 3])
        out.append(
            Work(f"qsa: attention N={N}", fits, s.n_steps["transformer"], est, task, s.n_val)
        )
        if N > s.fcn_max_seq_len or fcn_done:
            continue
        grid = sorted(s.widths["fcn"])
        expected = [w for w in grid if w >= 2 * N**3][:1]
        fcn_done = not expected
        for w in expected * fits or grid[-_FITS_FIRST:]:
            est = clone(s.fcn).set_params(width=w)
            out.append(Work(f"qsa: fcn N={N} width={w}", 1, s.n_steps["fcn"], est, task, s.n_val))
    grid = sorted(s.q_widths)
    for q in sorted(s.q_values):
        task = SparseAveragingTask(s.q_seq_len, s.n_features, q)
        w = floor_widths([s.q_seq_len], q, grid, s.target_r2, n_samples=2000)[0] or grid[-1]
        est = clone(s.estimator).set_params(width=w)
        steps = planned_steps(est, s.q_steps)
        out.append(Work(f"qsa: q={q} width={w}", _FITS_NEXT, steps, est, task, s.n_val))
    N, d, q = s.transfer_task
    est = clone(s.estimator).set_params(width=s.transfer_width)
    sel = SparseTokenSelector(**est.get_params())
    rows = -(-s.n_test // N)
    sts = SparseTokenSelectionTask(N, d, q)
    steps = planned_steps(est, s.transfer_steps)
    out.append(Work("qsa: transfer, selector", 1, steps, sel, sts, s.n_test))
    qsa = SparseAveragingTask(N, d, q)
    out.append(Work("qsa: transfer, averager", 1, steps, est, qsa, 2 * rows))
    N, d, q = s.length_task
    task = SparseAveragingTask(N, d, q)
    steps = planned_steps(clone(s.estimator).set_params(width=s.length_width), s.length_steps)
    # All lengths as rows at the longest.
    rows = -(-s.n_test // N) * sum(s.factors) // max(s.factors)
    for pe in ("stochastic", "fixed"):
        est = clone(s.estimator).set_params(width=s.length_width, positional_encoding=pe)
        out.append(
            Work(f"qsa: length, {pe}", 1, steps, est, task, rows, predict_len=N * max(s.factors))
        )
    return out


def summary_rows(rows, res):
    """Summary rows of the qSA experiment: widths, laws, transfer, length."""
    cfg = res.by_length.config
    title = f"qSA widths (d={cfg['n_features']}, q={cfg['n_selected']}"
    width_search_rows(rows, res.by_length, title=title, symbol="N")
    by_q = res.by_q
    qs = ", ".join(map(str, by_q["q_values"]))
    text = " / ".join(width_texts(by_q["minimal_width"], by_q["lower_bound"]))
    rows.append(f"| | minimal width, attention at N={by_q['seq_len']}, q = {qs} | {text} |")
    floors = " / ".join("-" if w is None else str(w) for w in by_q["floor_width"])
    rows.append(f"| | width the isotropic floor allows, q = {qs} | {floors} |")
    tr = res.transfer
    where = f"N={tr['seq_len']}, d={tr['n_features']}, q={tr['n_selected']}, m={tr['width']}"
    rows.append(f"| qSA transfer ({where}) | isotropic floor (relative MSE) | {fmt(tr['floor'])} |")
    for name, value in tr["relative_mse"].items():
        ratio = tr["floor_ratio"][name]
        times = "" if ratio is None else f" ({ratio:.2f}x the floor)"
        rows.append(f"| | relative MSE, {name} | {fmt(value)}{times} |")
    ln = res.length
    lens = ", ".join(str(t) for t in ln["eval_lengths"])
    rows.append(
        f"| qSA length (trained at N={ln['seq_len']}, q={ln['n_selected']}, m={ln['width']}) "
        f"| R^2 at N' = {lens} | |"
    )
    for pe, values in ln["r2"].items():
        rows.append(f"| | {pe} | {' / '.join(fmt(v) for v in values)} |")


def headline(result):
    """The headline numbers of a q-sparse averaging result, by flat name.

    Minimal widths against N (``attention_width_N<N>``, ``fcn_width_N<N>``;
    NaN where none of the grid reached the target or N was not searched),
    the attention model's growth ratio and its law ``a + b log2 N``
    (``attention_log_law_a``, ``_b``, ``_r2``); against q
    (``attention_width_q<q>`` and the isotropic floor's ``floor_width_q<q>``);
    the transfer's relative MSEs and their ratios to the floor; the length
    part's R^2 (``length_<encoding>_r2_at_<k>N``).

    Parameters
    ----------
    result : SparseAveragingResult

    Returns
    -------
    dict of str to float
    """
    out = {}
    sep = result.by_length
    for model, label in (("transformer", "attention"), ("fcn", "fcn")):
        for N, w in zip(sep.seq_lens, sep.minimal_width[model]):
            out[f"{label}_width_N{N}"] = _float(w)
    out["attention_width_growth"] = _float(result.width_growth())
    law = sep.growth_laws["transformer"].get("log_T")
    if law is not None:
        out.update(
            attention_log_law_a=float(law["intercept"]),
            attention_log_law_b=float(law["slope"]),
            attention_log_law_r2=float(law["r2"]),
        )
    by_q = result.by_q
    for q, w, fw in zip(by_q["q_values"], by_q["minimal_width"], by_q["floor_width"]):
        out[f"attention_width_q{q}"] = _float(w)
        out[f"floor_width_q{q}"] = _float(fw)
    tr = result.transfer
    out["transfer_floor"] = float(tr["floor"])
    for name, value in tr["relative_mse"].items():
        key = name.replace(" ", "_").replace("on_", "").lower()
        out[f"transfer_{key}_relative_mse"] = float(value)
        out[f"transfer_{key}_floor_ratio"] = _float(tr["floor_ratio"][name])
    ln = result.length
    for pe, values in ln["r2"].items():
        for t, v in zip(ln["eval_lengths"], values):
            out[f"length_{pe}_r2_at_{t // ln['seq_len']}N"] = float(v)
    return out


def _float(value):
    """``value`` as a float, NaN for None."""
    return math.nan if value is None else float(value)


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
)
