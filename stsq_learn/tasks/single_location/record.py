"""The record of single-location regression: projected GD on the erf predictor, the baselines."""

from __future__ import annotations

from ...experiments._record import Experiment, Work
from ...experiments._records._format import fmt
from .. import SingleLocationTask
from .estimators import ErfAttentionRegressor, SoftmaxAttentionRegressor
from .experiment import INITS, SCHEDULES, SingleLocationResult, single_location

PRESETS = {
    "tiny": dict(seq_len=5, n_features=20, n_steps=200, n_seeds=1, n_softmax_steps=20, n_test=500),
    "quick": dict(
        seq_len=5,
        n_features=50,
        n_steps=3000,
        n_seeds=2,
        learning_rate=0.02,
        lambda_decay=3e-3,
        n_softmax_steps=300,
        n_test=5000,
    ),
    # The paper's sizes: d = 400, L = 10, gamma^2 = 1/2, 120k steps from lambda_0 = 1.
    "full": dict(
        seq_len=10,
        n_features=400,
        n_steps=120_000,
        n_seeds=10,
        learning_rate=0.004,
        lambda_decay=1e-4,
        n_softmax_steps=3000,
        n_test=20_000,
        n_linear=40_000,
        record_every=100,
    ),
}
PRESETS["gpu"] = dict(PRESETS["full"])  # NumPy runs: the same work on any machine


def work(seq_len, n_features, n_steps, n_seeds, n_softmax_steps, **_):
    """The erf runs (2 initialisations x 2 schedules x seeds), then the softmax model."""
    task = SingleLocationTask(seq_len, n_features)
    runs = len(INITS) * len(SCHEDULES) * n_seeds
    return [
        Work("single_location: erf, projected GD", runs, n_steps, ErfAttentionRegressor(), task),
        Work("single_location: softmax", 1, n_softmax_steps, SoftmaxAttentionRegressor(), task),
    ]


def summary_rows(rows, res):
    """Summary rows of single-location regression."""
    c, b = res.config, res.baselines
    where = f"d={c['n_features']}, L={c['seq_len']}, {c['n_steps']} steps"
    rows.append(
        f"| single_location ({where}) | reached the oracle, sphere / manifold, lambda decay | "
        f"{fmt(res.reached('sphere', 'decay'), 2)} / {fmt(res.reached('manifold', 'decay'), 2)} |"
    )
    rows.append(
        f"| | reached the oracle, sphere / manifold, lambda {c['constant_lambda']} | "
        f"{fmt(res.reached('sphere', 'constant'), 2)} / "
        f"{fmt(res.reached('manifold', 'constant'), 2)} |"
    )
    rows.append(f"| | oracle risk at the final lambda | {fmt(b['oracle']['decay'], 4)} |")
    rows.append(
        f"| | best linear risk (closed form / fitted) | {fmt(b['linear'], 4)} / "
        f"{fmt(b['linear_fitted'], 4)} |"
    )
    rows.append(f"| | softmax attention test MSE | {fmt(res.softmax['test_mse'], 4)} |")


RECORD = Experiment(
    name="single_location",
    function=single_location,
    presets=PRESETS,
    summary_rows=summary_rows,
    work=work,
    aliases=("content",),
    result=SingleLocationResult,
)
