"""The record of q-sparse token retrieval: error against heads, widths against T, length.

:data:`PROVENANCE` says, setting by setting, what comes from a paper and
what is ours; :func:`headline` gives the numbers a run is checked by.
"""

from __future__ import annotations

import math

from ...experiments._record import Experiment
from ...experiments._records._format import fmt
from ...studies import planning
from .estimators import FCNRetriever, SparseTokenRetriever
from .experiment import SparseRetrievalResult, SparseRetrievalSettings, sparse_retrieval

PROVENANCE = {
    "task": "paper: q-sparse token retrieval as Mousavi-Hosseini, Sanford, Wu and Erdogdu "
    "(2025) pose it (q positions named in order); the target, the named tokens side by "
    "side, is ours (their class takes any function of them)",
    "tokens": "paper: Gaussian tokens (the law of Wang et al.'s sparse token selection)",
    "subsets": "paper: a uniform q-subset of the T positions (here in a uniform order)",
    "batch": "ours: each estimator's batch size (a fresh batch at every step, as the paper trains)",
    "width_law": "paper: width O~(d + q log T) for the transformer, Omega~(T d) for "
    "fully-connected nets (Wang et al.'s separation; its law is fitted here)",
    "seq_len, n_features, q_values, n_heads": "ours: the heads part's T, d, q and H",
    "heads_width, heads_steps, heads_estimator": "ours: the heads part's budget (quick: "
    "Adam at 0.05 decayed by a cosine, width 32, 150 steps)",
    "threshold": "ours: the threshold level 1/(2q), half the bound 1 - (q - 1)/q of q - 1 "
    "heads, by which the fewest heads that retrieve every token is read off",
    "seq_lens, n_selected, fcn_max_seq_len": "ours: the width search's lengths and q",
    "widths, n_steps": "ours: the width grids and the steps per width",
    "transformer, fcn, estimator": "ours: the optimisers and step sizes (Adam for the "
    "search; the estimators' width-following SGD for the length part)",
    "target_r2": "ours: R^2 >= 0.9 defines a width's success",
    "stop_at_target": "ours: a fit of the width search ends once it meets the target on "
    "the search's validation rows",
    "length_task, length_width, length_steps, factors": "ours: the length part's sizes, "
    "budget and test lengths",
    "n_val, n_test": "ours: held-out rows scoring each width and each model",
    "metric": "ours: the relative MSE sum ||y_hat - y||^2 / sum ||y||^2, and R^2",
}
"""Each setting: ``"paper: ..."`` where a paper fixes it, else ``"ours: ..."``."""

# The width search: Adam at 0.05 decayed by a cosine (the heads' count set by the
# experiment); over a fixed number of steps the width-following SGD's scores are too
# noisy to bracket a width (measured at T=16: 0.89 at width 16, 0.58 at 24, 300 steps).
# The FCN: Adam, as the separation's. The heads and length parts: the estimators'
# width-following SGD, written out.
_SEARCH = SparseTokenRetriever(solver="adam", learning_rate_init=0.05, learning_rate="cosine")
_ATTENTION = SparseTokenRetriever(
    solver="sgd", learning_rate_init="auto", learning_rate="cooldown", batch_size="auto"
)
_FCN_QUICK = FCNRetriever(
    solver="adam", learning_rate_init=0.01, learning_rate="constant", batch_size=1024
)
_FCN_LONG = FCNRetriever(
    solver="adam", learning_rate_init=0.003, learning_rate="cosine", batch_size=256
)
_ATTENTION_GRID = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 128)
_FCN_GRID = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

PRESETS = {
    "tiny": SparseRetrievalSettings(
        seq_len=6,
        n_features=2,
        q_values=(2,),
        n_heads=(1, 2),
        heads_width=8,
        heads_steps=20,
        seq_lens=(4, 8),
        n_selected=2,
        transformer=_SEARCH,
        fcn=_FCN_QUICK,
        widths={"transformer": (4, 8), "fcn": (8, 16)},
        n_steps={"transformer": 20, "fcn": 20},
        fcn_max_seq_len=8,
        target_r2=0.5,
        n_val=100,
        estimator=_ATTENTION,
        length_task=(6, 2, 2),
        length_width=8,
        length_steps=20,
        factors=(1, 2),
        n_test=200,
    ),
    # q = 2, 3 and H to 3 at T=16. The heads part trains Adam at 0.05 decayed by a
    # cosine: the width-following SGD's 200 steps at width 32 gave 0.88 / 0.62 / 0.51 at
    # q = 3 (no threshold), Adam's 150 give 0.69 / 0.36 / 0.05 at about the same time.
    "quick": SparseRetrievalSettings(
        seq_len=16,
        n_features=4,
        q_values=(2, 3),
        n_heads=(1, 2, 3),
        heads_width=32,
        heads_steps=150,
        heads_estimator=_SEARCH,
        # Four lengths for the attention model's law (three gave R^2 0.75 from widths
        # 8 / 16 / 16), the FCN at three; T = 64 is out of this budget (no width to 64
        # reached R^2 0.9 there in 150 steps).
        seq_lens=(4, 8, 16, 32),
        n_selected=2,
        transformer=_SEARCH,
        fcn=_FCN_QUICK,
        widths={"transformer": (4, 6, 8, 12, 16, 24, 32, 48, 64), "fcn": (8, 32, 128, 512)},
        n_steps={"transformer": 150, "fcn": 300},
        fcn_max_seq_len=16,
        target_r2=0.9,
        n_val=500,
        estimator=_ATTENTION,
        length_task=(16, 4, 2),
        length_width=32,
        length_steps=200,
        factors=(1, 2, 4),
        n_test=3000,
    ),
    # The sizes: q and H to 4 at T=16, d=4, width 64 with the planned steps; the
    # search T = 8 ... 256 (the FCN to 32); the length part at T=16, width 64.
    "full": SparseRetrievalSettings(
        seq_len=16,
        n_features=4,
        q_values=(1, 2, 3, 4),
        n_heads=(1, 2, 3, 4, 5),
        heads_width=64,
        heads_steps="auto",
        seq_lens=(8, 16, 32, 64, 128, 256),
        n_selected=2,
        transformer=_SEARCH,
        fcn=_FCN_LONG,
        widths={"transformer": _ATTENTION_GRID, "fcn": _FCN_GRID},
        n_steps={"transformer": 600, "fcn": 2000},
        fcn_max_seq_len=32,
        target_r2=0.9,
        n_val=1000,
        estimator=_ATTENTION,
        length_task=(16, 4, 2),
        length_width=64,
        length_steps="auto",
        factors=(1, 2, 4, 8),
        n_test=8000,
    ),
    "gpu": SparseRetrievalSettings(
        seq_len=32,
        n_features=4,
        q_values=(1, 2, 3, 4, 6),
        n_heads=(1, 2, 3, 4, 5, 6, 7),
        heads_width=128,
        heads_steps="auto",
        seq_lens=(8, 16, 32, 64, 128, 256, 512, 1024),
        n_selected=2,
        transformer=_SEARCH,
        fcn=_FCN_LONG,
        widths={"transformer": _ATTENTION_GRID, "fcn": (*_FCN_GRID, 8192, 16384)},
        n_steps={"transformer": 1000, "fcn": 4000},
        fcn_max_seq_len=64,
        target_r2=0.9,
        n_val=4000,
        estimator=_ATTENTION,
        length_task=(32, 4, 2),
        length_width=128,
        length_steps="auto",
        factors=(1, 2, 4, 8),
        n_test=32000,
    ),
}


def work(settings):
    """The studies' work for one seed, as they plan it (:func:`~stsq_learn.studies.planning`).

    Heads: one fit per (q, H) with H <= q + 1. Widths: the searches'
    expected fits (3 at the first T, then 2 per T), for both models (the
    FCN up to ``fcn_max_seq_len``). Length: one fit per encoding, scored at
    every evaluation length.
    """
    with planning() as plan:
        sparse_retrieval(settings)
    return list(plan)


def headline(result):
    """The numbers a run is checked by: the error per head count and the threshold.

    Parameters
    ----------
    result : SparseRetrievalResult
        A run of :func:`~stsq_learn.experiments.sparse_retrieval` (one seed).

    Returns
    -------
    dict of str to float
        ``"relative_mse.q=<q>.H=<H>"`` for every (q, H) tried and
        ``"threshold.q=<q>"``, the fewest heads whose relative MSE is below
        ``1 / (2q)`` (NaN where none got there), flat.
    """
    hd = result.heads
    out = {
        f"relative_mse.q={q}.H={h}": float(e)
        for q, h, e in zip(hd["n_selected"], hd["n_heads"], hd["relative_mse"])
    }
    for q, found in result.threshold.items():
        out[f"threshold.q={q}"] = math.nan if found is None else float(found)
    return out


def summary_rows(rows, res):
    """Summary rows of the retrieval experiment: heads and threshold, widths, laws, length."""
    cfg, hd = res.config, res.heads
    heads = hd.unique("n_heads")
    budget = cfg["heads_budget"]
    rows.append(
        f"| Retrieval heads (T={cfg['seq_len']}, d={cfg['n_features']}, "
        f"m={cfg['heads_width']}, {budget['n_steps']} {budget['solver'].upper()} steps) "
        f"| relative MSE at H = {', '.join(map(str, heads))} | |"
    )
    for q in res.threshold:
        part = hd.where(n_selected=int(q))
        errors = dict(zip(part["n_heads"], part["relative_mse"]))
        text = " / ".join("-" if h not in errors else fmt(errors[h]) for h in heads)
        rows.append(f"| | q={q} | {text} |")
    for q, found in res.threshold.items():
        text = f"H = {found}" if found is not None else "not reached within this budget"
        if found is not None and found != int(q):
            text += f" (not at H = q: {'too few steps' if found > int(q) else 'below q'})"
        rows.append(
            f"| | q={q}: fewest H with relative MSE < 1/(2q) = {1 / (2 * int(q)):.3f} "
            f"(theory: H = q) | {text} |"
        )
    wd = res.widths
    rows.append(
        f"| Retrieval widths (d={cfg['n_features']}, q=H={cfg['n_selected']}, "
        f"R^2 >= {cfg['target_r2']}) | T = {', '.join(map(str, wd.unique('seq_len')))} | |"
    )
    for model, label in (("transformer", "attention"), ("fcn", "FCN")):
        part = wd.where(model=model)
        found = [
            f"{w:g}" if math.isfinite(w) else f"> {b:g}" if math.isfinite(b) else "-"
            for w, b in zip(part["value"], part["bound"])
        ]
        rows.append(f"| | minimal width, {label} | {' / '.join(found) or '-'} |")
        for law in res.laws[model].values():
            rows.append(
                f"| | {label}: w = {law['formula'].replace('x', 'T')} "
                f"| fit R^2 {law['r2']:.3f}, rms residual {law['rms']:.2f} |"
            )
    ln = res.length
    T, _, q = cfg["length_task"]
    lens = ln.unique("eval_seq_len")
    rows.append(
        f"| Retrieval length (trained at T={T}, q=H={q}, m={cfg['length_width']}) "
        f"| R^2 at T' = {', '.join(map(str, lens))} | |"
    )
    for pe in ln.unique("model"):
        rows.append(f"| | {pe} | {' / '.join(fmt(v) for v in ln.where(model=pe)['score'])} |")


RECORD = Experiment(
    name="retrieval",
    function=sparse_retrieval,
    settings=SparseRetrievalSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    # The threshold is a number of heads: one head either way.
    reference_rtol={"threshold.*": 0.5},
    aliases=("sparse_retrieval",),
    seeds_batched=True,
    result=SparseRetrievalResult,
)
