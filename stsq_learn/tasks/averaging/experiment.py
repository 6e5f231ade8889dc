"""q-sparse averaging (qSA): widths against N and q, zero-shot transfer, length generalization.

The settings, the studies (tables ``by_length``, ``by_q``, ``transfer`` and ``length``, every
seed in each), the numbers, the figure and the record.
"""

import math
from dataclasses import field
from functools import partial

import numpy as np
from sklearn.base import clone

from ...encodings.floor import isotropic_floor
from ...engine.batch_reuse import reusing_batches
from ...experiments import Experiment, _widths
from ...experiments._common import new_axes
from ...experiments._result import fmt_band
from ...experiments._settings import COUNT, COUNTS, STEPS, SequenceOf, positive_ints
from ...studies import BandDisplay, StudyTable, minimal_width, stream_seed, sweep
from ...studies.fits import test_rows
from ..selection.estimators import SparseTokenSelector
from ..selection.separation import floor_widths
from ..selection.task import SparseTokenSelectionTask
from .estimators import FCNAverager, SparseTokenAverager
from .task import SparseAveragingTask

LAWS = {"attention": "log2", "fcn": "power"}
"""The law the theory gives each model's minimal width against N."""
TRANSFER = ("selector on STS_q", "selector on qSA", "averager on qSA")
"""The models of the transfer, in the table's order."""
_TRANSFER_KEYS = dict(zip(TRANSFER, ("selector_sts_q", "selector_qsa", "averager_qsa")))
_LAW_KEYS = {"attention": "attention_log_law_", "fcn": "fcn_power_law_"}
_FLOOR_SAMPLES = 20_000  # rows per isotropic floor of the search against q (s.e. about 0.001)

# Adam for the search against N (q = 2): the width-following SGD keeps gamma's travel fixed,
# and q=2's best gamma is infinite: at N=256 it needs width 40 where Adam needs 24 (measured,
# 1000 steps). The FCN: the separation's, size for size.
_ATTENTION = SparseTokenAverager(
    solver="adam", learning_rate_init=0.1, learning_rate="cosine", batch_size="auto"
)
_FCN = FCNAverager(**_widths.FCN_ADAM)
_SGD = SparseTokenAverager(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_WIDTHS = {
    "transformer": (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64),
    "fcn": (8, 32, 512),
}


class SparseAveragingSettings(_widths.WidthsAndLengthSettings):
    """The settings of :func:`sparse_averaging` (the defaults are the quick size's).

    Attributes
    ----------
    seq_lens, n_selected, transformer, fcn, widths, n_steps, fcn_max_seq_len, target_r2, \
n_val, stop_at_target, length_task, length_width, length_steps, factors
        The search against N and the length part (:class:`WidthsAndLengthSettings`);
        ``n_val`` and ``stop_at_target`` of the search against q too.
    n_features : int
        Token dimension d of both searches, small so that the FCN reaches the target.
    estimator : SparseTokenAverager
        The attention model against q, of the transfer (its hyperparameters
        the selector's too) and of the length part.
    q_values, q_seq_len, q_widths, q_steps
        The search against q: the q (increasing), N, the width grid, the
        steps of a fit (``"auto"``: the estimator's plan).
    transfer_task, transfer_width, transfer_steps
        (N, d, q), width and steps of both transfer models.
    n_test : int
        Held-out queries of the transfer and the length part (``ceil(n_test / N)`` rows of qSA).

    Examples
    --------
    >>> from stsq_learn.experiments import SparseAveragingSettings
    >>> SparseAveragingSettings(widths={"fcn": (8, 16)}).widths["fcn"]
    (8, 16)
    """

    _parameter_constraints = {
        **_widths.WidthsAndLengthSettings._parameter_constraints,
        **{key: [SparseTokenAverager] for key in ("transformer", "estimator")},
        **dict.fromkeys(("n_features", "q_seq_len", "transfer_width", "n_test"), COUNTS),
        **{key: [positive_ints(increasing=True)] for key in ("q_values", "q_widths")},
        **dict.fromkeys(("q_steps", "transfer_steps"), STEPS),
        "fcn": [FCNAverager],
        "transfer_task": [SequenceOf(COUNT, min_len=3)],
    }

    seq_lens: tuple = (4, 8, 16, 32)
    n_selected: int = 2
    transformer: SparseTokenAverager = _ATTENTION
    fcn: FCNAverager = _FCN
    widths: dict = field(default_factory=_WIDTHS.copy)
    n_steps: dict = field(default_factory=lambda: {"transformer": 300, "fcn": 500})
    fcn_max_seq_len: int = 8
    length_task: tuple = (16, 8, 2)
    length_width: int = 32
    length_steps: int | str = 400  # the planned 960 steps took 2.4x the time, same shape
    factors: tuple = (1, 2, 4)
    n_features: int = 2
    estimator: SparseTokenAverager = _SGD
    q_values: tuple = (1, 2, 3)
    q_seq_len: int = 16
    q_widths: tuple = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    q_steps: int | str = 400  # q = 3 (width 96) as good as the planned 1470 steps
    transfer_task: tuple = (32, 8, 4)
    transfer_width: int = 64
    transfer_steps: int | str = 300  # 1.01x the floor, as the planned 1200 steps
    n_test: int = 4000

    def _validate(self):
        super()._validate()
        # Every task made once: a bad (N, d, q) is refused by its task before any fit.
        SparseAveragingTask(self.seq_lens[0], self.n_features, self.n_selected)
        SparseAveragingTask(self.q_seq_len, self.n_features, self.q_values[-1])
        SparseTokenSelectionTask(*self.transfer_task)
        SparseAveragingTask(*self.transfer_task)
        SparseAveragingTask(*self.length_task)


class FloorWidths:
    """Per q, the smallest width of ``grid`` whose isotropic floor at N allows the target R^2.

    Simulated once, on fixed draws: it sets where every seed's search against q starts.
    """

    def __init__(self, seq_len, grid, target):
        self.seq_len, self.grid, self.target, self.found = seq_len, grid, target, {}

    def __call__(self, q):
        """The width (None if the grid's largest does not allow the target), by bisection."""
        if q not in self.found:
            kw = dict(n_samples=_FLOOR_SAMPLES)
            (self.found[q],) = floor_widths([self.seq_len], q, self.grid, self.target, **kw)
        return self.found[q]

    def start(self, params, previous):
        """Where q's search starts: the larger of its floor's width and the previous q's."""
        width = self(params["n_selected"])
        if width is None:
            return self.grid[-1]
        return max(width, previous["value"]) if previous and previous["reached"] else width


def _transferred(task, n_rows, selector, X, y):
    """A scorer's end: R^2 of a fitted selector's W on the seed's held-out qSA rows, untrained."""
    X_qsa, y_qsa = test_rows(task, selector.random_state, n_rows)
    averager = SparseTokenAverager.from_selector(selector, n_selected=task.n_selected)
    return averager.score(X_qsa, y_qsa)


@reusing_batches
def run(cfg, seeds, *, device=None, progress=False, n_jobs=None):
    """The studies over every seed (the seeds of a model train as one where they move alike)."""
    common = dict(seeds=seeds, device=device, progress=progress, n_jobs=n_jobs, batch_seeds=True)
    task = SparseAveragingTask(cfg.seq_lens[0], cfg.n_features, cfg.n_selected)
    models = {"attention": cfg.transformer, "fcn": cfg.fcn}
    by_length = _widths.search_widths(cfg, models, task, **common)
    floors = FloorWidths(cfg.q_seq_len, cfg.q_widths, cfg.target_r2)
    kw = dict(grid={"n_selected": list(cfg.q_values)}, start=floors.start, n_steps=cfg.q_steps)
    kw.update(target=cfg.target_r2, stop_at_target=cfg.stop_at_target, n_test=cfg.n_val)
    task = SparseAveragingTask(cfg.q_seq_len, cfg.n_features, cfg.q_values[0])
    by_q = minimal_width({"attention": cfg.estimator}, task, cfg.q_widths, **kw, **common)
    by_q = by_q.with_columns(floor_width=[floors(int(q)) for q in by_q["param_n_selected"]])

    N, d, q = cfg.transfer_task
    averager = clone(cfg.estimator).set_params(width=cfg.transfer_width)
    qsa, rows = SparseAveragingTask(N, d, q), -(-cfg.n_test // N)
    scoring = {"sts_q": SparseTokenSelector.score, "qsa": partial(_transferred, qsa, rows)}
    selector = {"selector": SparseTokenSelector(**averager.get_params())}
    kw = dict(scoring=scoring, n_steps=cfg.transfer_steps, n_test=cfg.n_test)
    selector = sweep(selector, SparseTokenSelectionTask(N, d, q), **kw, **common)
    trained = sweep({"averager": averager}, qsa, n_steps=cfg.transfer_steps, n_test=rows, **common)
    transfer = {"model": [], "seed": [], "relative_mse": [], "floor": []}
    for seed in selector.unique("seed"):
        own, other = selector.where(seed=seed)[0], trained.where(seed=seed)[0]
        floor = isotropic_floor(N, q, cfg.transfer_width, random_state=stream_seed(seed, "floor"))
        transfer["model"] += TRANSFER
        transfer["seed"] += [seed] * 3
        transfer["relative_mse"] += [1.0 - own["sts_q"], 1.0 - own["qsa"], 1.0 - other["score"]]
        transfer["floor"] += [floor.relative_mse] * 3

    model = clone(cfg.estimator).set_params(width=cfg.length_width)
    task = SparseAveragingTask(*cfg.length_task)
    length = _widths.encodings_curve(cfg, model, task, -(-cfg.n_test // task.seq_len), **common)
    transfer = StudyTable(transfer)
    return {"by_length": by_length, "by_q": by_q, "transfer": transfer, "length": length}


def headline(result):
    """The numbers one seed's run is judged by, flat (a width none reached: NaN)."""
    c, tables = result.settings, result.tables
    widths, out = tables["by_length"], {}
    for label in LAWS:
        for N in c["seq_lens"]:
            found = widths.where(model=label, seq_len=N)["value"]
            out[f"{label}_width_N{N}"] = found[0] if len(found) else math.nan
    _, found = widths.where(model="attention").xy("seq_len", "value")
    out["attention_width_growth"] = found[-1] / found[0] if len(found) >= 2 else math.nan
    for label, key in _LAW_KEYS.items():
        for p, value in _widths.law_numbers(widths, label, LAWS[label]).items():
            out[f"{key}{p}"] = value
    for row in tables["by_q"]:
        out[f"attention_width_q{row['param_n_selected']}"] = row["value"]
        out[f"floor_width_q{row['param_n_selected']}"] = row["floor_width"]
    out["transfer_floor"] = tables["transfer"]["floor"][0]
    for row in tables["transfer"]:
        key = _TRANSFER_KEYS[row["model"]]
        out[f"transfer_{key}_relative_mse"] = row["relative_mse"]
        out[f"transfer_{key}_floor_ratio"] = row["relative_mse"] / row["floor"]
    N = c["length_task"][0]
    for row in tables["length"]:
        out[f"length_{row['model']}_r2_at_{row['eval_seq_len'] // N}N"] = row["score"]
    return out


def summary(result):
    """Summary rows: widths and laws against N, widths against q, the transfer, the length."""
    c, bands, tables = result.settings, result.bands(), result.tables
    b = {key: fmt_band(value) for key, value in bands.items()}
    lens, qs = ", ".join(map(str, c["seq_lens"])), ", ".join(map(str, c["q_values"]))
    (N, d, q), (n, _, q_len) = c["transfer_task"], c["length_task"]
    rows = [
        f"| qSA widths (d={c['n_features']}, q={c['n_selected']}, R^2 >= {c['target_r2']}) "
        f"| N = {lens} | |",
        *_widths.search_rows(tables["by_length"], bands, LAWS, _LAW_KEYS, "N"),
        f"| | attention: minimal width, longest N over shortest | {b['attention_width_growth']} |",
        f"| | minimal width, attention at N={c['q_seq_len']}, q = {qs} "
        f"| {_widths.widths_text(tables['by_q'], 'n_selected')} |",
        f"| | width the isotropic floor allows, q = {qs} "
        f"| {' / '.join(b[f'floor_width_q{q}'] for q in c['q_values'])} |",
        f"| qSA transfer (N={N}, d={d}, q={q}, m={c['transfer_width']}) "
        f"| isotropic floor (relative MSE) | {b['transfer_floor']} |",
    ]
    for model, key in _TRANSFER_KEYS.items():
        mse, ratio = b[f"transfer_{key}_relative_mse"], b[f"transfer_{key}_floor_ratio"]
        rows.append(f"| | relative MSE, {model} | {mse} ({ratio}x the floor) |")
    head = f"| qSA length (trained at N={n}, q={q_len}, m={c['length_width']}) | R^2 at N' ="
    return rows + _widths.length_rows(tables["length"], head, n, c["factors"])


def figure(result, axes=None):
    """Widths against N and q, the transfer beside the floor, the length (``axes``: 4 Axes)."""
    fig, (ax_n, ax_q, ax_tr, ax_len) = new_axes(axes, 4)
    c, tables, d = result.settings, result.tables, result.settings["n_features"]
    kw = dict(ylabel=f"smallest width reaching $R^2 \\geq {c['target_r2']}$")
    title = f"qSA: width against N (d={d}, q={c['n_selected']})"
    _widths.widths_panel(ax_n, tables["by_length"], LAWS, "N", "positions", title=title, **kw)
    floors = tables["by_q"].where(seed=result.seeds[0]).xy("n_selected", "floor_width")
    kw.update(_widths.WIDTHS_STYLE, labels={"attention": "trained: smallest width reaching"})
    kw.update(xlabel="subset size q (log scale)", theory={"isotropic floor allows": floors})
    title = f"qSA: width against q (N={c['q_seq_len']}, d={d})"
    BandDisplay.from_table(tables["by_q"], x="n_selected", ax=ax_q, title=title, **kw)
    # The transfer: median relative MSE per model, min-max error bars, beside the floor.
    table = tables["transfer"]
    bands = table.bands("model", "relative_mse", by=())
    med, lo, hi = (np.asarray(bands[k], float) for k in ("median", "min", "max"))
    yerr = [med - lo, hi - med] if len(table) > len(TRANSFER) else None
    bars = ax_tr.bar(range(3), med, yerr=yerr, capsize=4, color=["C1", "C0", "C2"])
    floor = float(np.median(table["floor"]))
    ax_tr.axhline(floor, color="k", ls="--", lw=1, label=f"isotropic floor {floor:.3f}")
    for bar, top, value, model in zip(bars, hi, med, TRANSFER):
        rows = table.where(model=model)
        ratio = float(np.median(rows["relative_mse"] / rows["floor"]))
        text, x = f"{value:.3f}\n({ratio:.2f}x)", bar.get_x() + bar.get_width() / 2
        ax_tr.annotate(text, (x, top), ha="center", va="bottom", fontsize="small")
    ax_tr.set_xticks(range(3), [n.replace(" on ", "\non ") for n in TRANSFER])
    ax_tr.set_ylim(0, 1.45 * max([*hi, floor]))
    ax_tr.set_ylabel("relative MSE (1 - $R^2$)")
    (N, d, q), m = c["transfer_task"], c["transfer_width"]
    ax_tr.set_title(f"Zero-shot transfer STS$_q$ -> qSA (N={N}, d={d}, q={q}, m={m})")
    ax_tr.legend(fontsize="small", loc="upper center")
    N, _, q = c["length_task"]
    labels = {pe: f"{pe} encodings (trained at N={N})" for pe in _widths.ENCODINGS}
    title = f"qSA: length generalization (q={q}, m={c['length_width']})"
    kw = dict(xlabel="evaluation positions N' (log scale)", ylabel="$R^2$ over every position")
    _widths.length_panel(ax_len, tables["length"], labels=labels, title=title, **kw)
    return fig


PROVENANCE = {
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: uniform q-subsets (one per position: Sanford, Hsu and Telgarsky, 2023)",
    "width_law": "paper: width O~(d + q log N) for attention against Omega~(N d) for the FCN; "
    "fitted here per seed (a + b log2 N, b N^c)",
    "batch_size": "ours: 256 queries a step (ceil(256 / N) rows of qSA); the transfer's "
    "selector trains on the paper's fresh batch of 256 rows per step",
    "transformer, fcn, estimator": "ours: Adam at 0.1 with a cosine decay; Adam at 0.01 "
    "(quick) or 0.003 with a cosine (full, gpu); the estimators' width-following SGD",
    "seq_lens, n_features, n_selected, fcn_max_seq_len, widths, n_steps, target_r2, n_val, "
    "stop_at_target": "ours: the search against N, a fit ending at the target",
    "q_values, q_seq_len, q_widths, q_steps": "ours: the search against q, each q starting at "
    "the width its isotropic floor allows",
    "transfer_*, length_*, factors, n_test": "ours: the transfer's and the length part's "
    "sizes, budgets, test lengths and held-out queries",
    "metric": "ours: R^2 = 1 - relative MSE, and the relative MSE",
}
"""Setting -> ``"paper: ..."`` or ``"ours: ..."``: where each setting comes from."""

_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_Q_GRID = (4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
_FCN_COSINE = FCNAverager(**_widths.FCN_COSINE)
# A line a part: the search against N, against q, the transfer, the length part.
_FULL = (
    dict(seq_lens=(4, 8, 16, 32, 64, 128, 256), fcn=_FCN_COSINE, fcn_max_seq_len=32, n_val=1000)
    | dict(widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID})
    | dict(n_steps={"transformer": 1000, "fcn": 2000})
    | dict(q_values=(1, 2, 4, 8), q_seq_len=32, q_widths=_Q_GRID, q_steps="auto")
    | dict(transfer_task=(64, 8, 4), transfer_width=256, transfer_steps="auto", n_test=8000)
    | dict(length_task=(32, 8, 2), length_width=64, length_steps="auto")
)

RECORD = Experiment(
    name="qsa",
    function_name="sparse_averaging",
    aliases=("averaging",),
    doc="""Widths against N and q, zero-shot transfer and length generalization on qSA.

    One attention layer of width O~(d + q log N) represents q-sparse
    averaging, where a fully-connected net needs Omega~(N d) (see
    :mod:`stsq_learn.tasks.averaging.experiment`; the settings:
    :class:`SparseAveragingSettings`).

    Examples
    --------
    >>> from stsq_learn.experiments import sparse_averaging
    >>> result = sparse_averaging("tiny", seeds=2)
    >>> sorted(result.tables)
    ['by_length', 'by_q', 'length', 'transfer']
    >>> result.seed(1).tables["transfer"]["model"].tolist()[0]
    'selector on STS_q'
    """,
    settings=SparseAveragingSettings,
    provenance=PROVENANCE,
    presets={
        "tiny": dict(_widths.TINY_SEARCH, widths={"transformer": (4, 8), "fcn": (4, 8)})
        | dict(q_values=(1, 2), q_seq_len=8, q_widths=(4, 8), q_steps=20, n_test=400)
        | dict(transfer_task=(8, 2, 2), transfer_width=8, transfer_steps=20, length_task=(8, 2, 2)),
        "quick": {},  # N to 32 (the FCN to 8), q to 3 at N = 16
        "full": _FULL,
        "gpu": _FULL
        | dict(seq_lens=(4, 8, 16, 32, 64, 128, 256, 512, 1024), fcn_max_seq_len=64, n_val=4000)
        | dict(widths={"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)})
        | dict(n_steps={"transformer": 2000, "fcn": 4000})
        | dict(q_values=(1, 2, 4, 8, 16), q_seq_len=64, q_widths=(*_Q_GRID, 1536, 2048))
        | dict(transfer_width=1024, n_test=64000)
        | dict(length_task=(64, 8, 2), length_width=128, factors=(1, 2, 4, 8)),
    },
    # Widths of grids whose neighbours are at most twice apart: one step either way.
    reference_rtol={"*width_[Nq]*": 0.5, "attention_width_growth": 0.5, "*_law_*": 0.5},
)
sparse_averaging = RECORD.function
