"""The record of the training dynamics (convergence): cos(W_pp, I) -> 1 under gradient descent."""

from __future__ import annotations

from ...tasks import SparseTokenSelectionTask
from ...tasks.selection.estimators import SparseTokenSelector
from .._convergence import training_dynamics
from .._record import Experiment, Work
from ._format import fmt

# Plain gradient descent at a constant step, the paper's; batch size explicit.
_GD = dict(solver="sgd", learning_rate_init=1.0, learning_rate="constant", batch_size=256)

PRESETS = {
    "tiny": dict(
        seq_len=8,
        n_features=2,
        n_selected=2,
        estimator=SparseTokenSelector(8, **_GD),
        n_steps=30,
        n_test=200,
    ),
    "quick": dict(
        seq_len=16,
        n_features=8,
        n_selected=3,
        estimator=SparseTokenSelector(64, **_GD),
        n_steps=300,
    ),
    "full": dict(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_GD),
        n_steps=5000,
        record_every=10,
    ),
    "gpu": dict(
        seq_len=64,
        n_features=16,
        n_selected=4,
        estimator=SparseTokenSelector(256, **_GD),
        n_steps=10000,
        record_every=10,
    ),
}


def work(seq_len, n_features, n_selected, estimator, n_steps, n_test=2000, **_):
    """One model trained ``n_steps`` steps, then scored on ``n_test`` rows."""
    task = SparseTokenSelectionTask(seq_len, n_features, n_selected)
    return [Work("convergence", 1, n_steps, estimator, task, predict_rows=n_test)]


def summary_rows(rows, conv):
    """Summary rows of the training dynamics."""
    f = conv.final
    cfg = conv.config
    where = f"T={cfg['seq_len']}, d={cfg['n_features']}, q={cfg['n_selected']}, m={cfg['width']}"
    rows.append(f"| convergence ({where}) | final cos(W_pp, I) | {fmt(f['cos'])} |")
    rows.append(f"| | final gamma = tr(W_pp)/m | {fmt(f['gamma'], 2)} |")
    rows.append(f"| | final token-block norm | {fmt(f['token_norm'], 2)} |")
    solver = "SGD" if cfg["solver"] == "sgd" else "Adam"
    rows.append(f"| | test R^2 after {cfg['n_steps']} {solver} steps | {fmt(f['test_r2'])} |")


RECORD = Experiment(
    name="convergence",
    function=training_dynamics,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
)
