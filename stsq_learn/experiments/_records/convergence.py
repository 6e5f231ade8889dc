"""The record of the training dynamics (convergence): cos(W_pp, I) -> 1 under gradient descent.

Two runs at each size, the same seed: every block of W at one step (the
paper's algorithm, the headline) and the token rows at ``1 / width`` of it
(``token_block_rate="auto"``, the estimators' preconditioning, ours). The
record is ``seeds_batched``: one call of :func:`training_dynamics` runs
every seed (one :func:`~stsq_learn.studies.training_curve`), a result per
seed; the fits themselves run one after another, as the callback measuring
W acts on one net.
:data:`PROVENANCE` says, setting by setting, what comes from the paper and
what is ours; :func:`headline` gives the numbers a run is checked by.
"""

from __future__ import annotations

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.convergence import (
    ConvergenceResult,
    ConvergenceSettings,
    training_dynamics,
)
from ...tasks.selection.estimators import SparseTokenSelector
from .._record import Experiment, Work
from ._format import fmt

# Plain gradient descent at a constant step (the step, 1, is ours); batch size explicit.
_GD = dict(solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256)

# Every block at the same step (the paper's algorithm), then the preconditioned run.
_RATES = (1.0, "auto")

PROVENANCE = {
    "batch": "paper: a fresh batch of n = 256 rows at every step",
    "tokens": "paper: Gaussian tokens",
    "subsets": "paper: a uniform q-subset of the T positions",
    "algorithm": "paper: gradient descent from W = 0, every block of W at the same step "
    "(token_block_rate=1.0, the headline run)",
    "token_block_rate": "ours: the second run's 'auto' (token rows at 1/width of the step), "
    "the estimators' preconditioning, shown beside the paper's algorithm",
    "learning_rate_init": "ours: a constant step of 1.0",
    "solver": "ours: SGD without momentum (plain gradient descent on each batch)",
    "seq_len, n_features, n_selected": "ours: T, d and q of each preset",
    "width": "ours: each preset's width (the theory asks for O~(d + q log T))",
    "n_steps": "ours: each preset's steps",
    "n_test": "ours: fresh rows scoring the final R^2",
    "metric": "ours: cos(W_pp, I), gamma = tr(W_pp)/m, ||W_xp||_F and the test R^2 as reported",
}
"""Each setting: ``"paper: ..."`` where the paper fixes it, else ``"ours: ..."``."""

PRESETS = {
    "tiny": ConvergenceSettings(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(8, **_GD),
        n_steps=30,
        token_block_rates=_RATES,
        n_test=200,
    ),
    "quick": ConvergenceSettings(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=SparseTokenSelector(64, **_GD),
        n_steps=300,
        token_block_rates=_RATES,
    ),
    "full": ConvergenceSettings(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_GD),
        n_steps=5000,
        token_block_rates=_RATES,
        record_every=10,
    ),
    "gpu": ConvergenceSettings(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_GD),
        n_steps=10000,
        token_block_rates=_RATES,
        record_every=10,
    ),
}


def work(settings):
    """One model per token rows' step, each trained ``n_steps`` steps, scored on ``n_test`` rows."""
    s = settings
    task = SparseTokenSelectionTask(s.seq_len, s.n_features, s.n_selected)
    fits = 1 if s.token_block_rates is None else len(s.token_block_rates)
    return [Work("convergence", fits, s.n_steps, s.estimator, task, predict_rows=s.n_test)]


def headline(result):
    """The numbers a run is checked by: final cos, gamma and token norm of each run.

    Parameters
    ----------
    result : ConvergenceResult
        A run of :func:`~stsq_learn.experiments.training_dynamics`.

    Returns
    -------
    dict of str to float
        ``"<run>.cos"``, ``"<run>.gamma"`` and ``"<run>.token_norm"`` for
        each run (``same_step``, ``preconditioned``), flat.
    """
    out = {}
    for name, run in result.runs.items():
        final = run.final
        for key in ("cos", "gamma", "token_norm"):
            out[f"{name}.{key}"] = float(final[key])
    return out


def summary_rows(rows, conv):
    """Summary rows of the training dynamics: one block of rows per run, labelled."""
    cfg = conv.config
    where = f"T={cfg['seq_len']}, d={cfg['n_features']}, q={cfg['n_selected']}, m={cfg['width']}"
    solver = "SGD" if cfg["solver"] == "sgd" else "Adam"
    for run in conv.runs.values():
        f = run.final
        title = f"convergence ({where}; {run.label})"
        rows.append(f"| {title} | final cos(W_pp, I) | {fmt(f['cos'])} |")
        rows.append(f"| | final gamma = tr(W_pp)/m | {fmt(f['gamma'], 2)} |")
        rows.append(f"| | final token-block norm | {fmt(f['token_norm'], 3)} |")
        rows.append(f"| | test R^2 after {cfg['n_steps']} {solver} steps | {fmt(f['test_r2'])} |")


RECORD = Experiment(
    name="convergence",
    function=training_dynamics,
    settings=ConvergenceSettings,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    headline=headline,
    provenance=PROVENANCE,
    seeds_batched=True,
    result=ConvergenceResult,
)
