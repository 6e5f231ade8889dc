"""The convergence experiment (training_dynamics) on studies.training_curve: numbers, seeds,
refusals, to_dict round trip, its record and its figure."""

import json

import figure_parts as fp
import matplotlib
import numpy as np
import pytest

from stsq_learn import SparseTokenSelector
from stsq_learn.experiments import PRESETS, ConvergenceResult, ConvergenceRun, training_dynamics
from stsq_learn.studies import StudyTable

matplotlib.use("Agg")

TINY = PRESETS["tiny"]["convergence"]

# A few seconds' run: two rates, ten steps, measured every other step.
SMALL = dict(
    seq_len=6,
    n_features=2,
    n_selected=2,
    estimator=SparseTokenSelector(4, solver="sgd", learning_rate_init=1.0),
    n_steps=10,
    record_every=2,
    n_test=50,
)


@pytest.fixture(scope="module")
def tiny():
    return training_dynamics(TINY, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def two_seeds():
    return training_dynamics(SMALL, device="cpu", seeds=[3, 5])


def test_tiny_run_numbers(tiny):
    res = tiny
    n = TINY.n_steps
    assert isinstance(res, ConvergenceResult) and isinstance(res.table, StudyTable)
    assert res.steps == list(range(n + 1))
    assert len(res.table) == 2 * (n + 1) and res.table.unique("seed") == [0]
    same, pre = res.runs["same_step"], res.runs["preconditioned"]
    # W starts at 0: no alignment, no scale, no token block; no loss before the first step.
    assert same.cos[0] == same.gamma[0] == same.token_norm[0] == 0.0
    assert np.isnan(same.loss[0])
    # The reference numbers of seed 0 (those of 0.6, unchanged by the rewrite).
    assert same.final["cos"] == pytest.approx(0.998887, abs=1e-5)
    assert same.final["gamma"] == pytest.approx(1.147910, abs=1e-5)
    assert same.final["token_norm"] == pytest.approx(0.165962, abs=1e-5)
    assert pre.final["gamma"] == pytest.approx(1.147574, abs=1e-5)
    assert pre.final["token_norm"] == pytest.approx(0.046595, abs=1e-5)
    assert same.gamma[-1] > same.gamma[n // 2] > 0
    assert same.loss[-1] < same.loss[1]
    # The test R^2 at about 20 steps and the last; NaN between.
    r2 = np.array(same.table["test_r2"])
    assert np.isfinite(r2[-1]) and 0.3 < same.test_r2 < 1
    assert 15 <= np.isfinite(r2).sum() <= n + 1
    assert res.final == {"step": n, **same.final}


def test_the_papers_algorithm_beside_the_preconditioned(tiny):
    m = TINY.estimator.width
    assert list(tiny.runs) == ["same_step", "preconditioned"]
    same, pre = tiny.runs["same_step"], tiny.runs["preconditioned"]
    assert (same.token_block_rate, same.token_block_rate_) == (1.0, 1.0)
    assert (pre.token_block_rate, pre.token_block_rate_) == ("auto", 1.0 / m)
    assert same.label == "every block at the same step (the paper's algorithm)"
    assert pre.label == f"token rows at 1/{m} of the step (preconditioned, ours)"
    assert tiny.headline is same
    # One seed for both: the same first batch from W = 0, then different token rows.
    assert same.loss[1] == pre.loss[1]
    assert same.token_norm[-1] > 2 * pre.token_norm[-1] > 0
    assert tiny.config["token_block_rates"] == [1.0, "auto"]
    assert tiny.config["random_state"] == 0 and tiny.config["width"] == m


def test_a_list_of_seeds_is_the_seeds_one_by_one(two_seeds):
    assert [r.config["random_state"] for r in two_seeds] == [3, 5]
    one = training_dynamics(SMALL, device="cpu", random_state=5)
    assert one.table == two_seeds[1].table
    assert one.to_dict() == two_seeds[1].to_dict()
    assert two_seeds[0].table.unique("seed") == [3]
    assert two_seeds[0].runs["same_step"].cos != two_seeds[1].runs["same_step"].cos
    # The last step is measured: record_every divides n_steps.
    assert one.steps == [0, 2, 4, 6, 8, 10]


def test_one_run_with_the_estimators_own_rate():
    est = SparseTokenSelector(4, solver="sgd", learning_rate_init=1.0, token_block_rate=0.5)
    res = training_dynamics(
        {**SMALL, "estimator": est, "n_steps": 4, "token_block_rates": None}, device="cpu"
    )
    assert list(res.runs) == ["token_rate_0.5"]
    assert res.runs["token_rate_0.5"].label == "token rows at 0.5 times the step"
    assert res.runs["token_rate_0.5"].token_block_rate_ == 0.5
    assert res.config["token_block_rates"] == [0.5]


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"token_block_rates": 1.0}, TypeError, "token_block_rates must be a sequence .* 1.0"),
        ({"token_block_rates": "auto"}, TypeError, "token_block_rates must be .* got 'auto'"),
        ({"token_block_rates": ()}, ValueError, "at least one rate, got an empty sequence"),
        ({"token_block_rates": (1.0, 0.0)}, ValueError, r"token_block_rates\[1\] .* got 0.0"),
        ({"token_block_rates": (-1,)}, ValueError, r"token_block_rates\[0\] .* got -1"),
        ({"token_block_rates": (float("nan"),)}, ValueError, r"token_block_rates\[0\] .* nan"),
        ({"token_block_rates": (True,)}, ValueError, r"token_block_rates\[0\] .* got True"),
        ({"token_block_rates": ("fast",)}, ValueError, r"token_block_rates\[0\] .* 'fast'"),
        ({"token_block_rates": (1.0, 1)}, ValueError, r"must not repeat a rate, got \(1.0, 1\)"),
        ({"record_every": 3}, ValueError, r"record_every must divide n_steps \(10\).* got 3"),
        ({"record_every": 0}, ValueError, "record_every"),
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"n_test": -1}, ValueError, "n_test"),
        ({"estimator": "net"}, TypeError, "estimator must be a SparseTokenSelector, got str"),
        ({"seeds": [1, 1]}, ValueError, "seeds holds 1 twice"),
        ({"seeds": "0"}, TypeError, "seeds must be an int"),
        ({"random_state": -1}, ValueError, r"random_state must lie in"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(changes, error, match, monkeypatch):
    from stsq_learn.tasks.selection import convergence

    def no_fit(*args, **kwargs):
        raise AssertionError("trained before refusing a bad setting")

    monkeypatch.setattr(convergence, "training_curve", no_fit)
    changes = dict(changes)
    call = {k: changes.pop(k) for k in ("seeds", "random_state") if k in changes}
    with pytest.raises(error, match=match):
        training_dynamics({**SMALL, **changes}, **call)


def test_to_dict_round_trip(two_seeds):
    res = two_seeds[0]
    d = json.loads(json.dumps(res.to_dict()))
    assert set(d) == {"config", "final", "runs", "table"}
    assert d["final"]["step"] == 10 and d["final"]["cos"] == pytest.approx(res.final["cos"])
    pre = d["runs"]["preconditioned"]
    assert pre["token_block_rate"] == "auto" and pre["token_block_rate_"] == 0.25
    back = ConvergenceResult.from_dict(d)
    assert back.table == res.table and back.to_dict() == res.to_dict()
    assert isinstance(back.runs["same_step"], ConvergenceRun)
    assert back.runs["same_step"].cos == res.runs["same_step"].cos


def test_record_headline_provenance_and_summary(tiny):
    from stsq_learn.experiments._records import convergence as record

    numbers = record.headline(tiny)
    assert list(numbers) == [
        f"{run}.{key}"
        for run in ("same_step", "preconditioned")
        for key in ("cos", "gamma", "token_norm")
    ]
    assert numbers["same_step.token_norm"] == tiny.runs["same_step"].token_norm[-1]
    assert numbers["preconditioned.gamma"] == tiny.runs["preconditioned"].gamma[-1]
    assert all(type(v) is float for v in numbers.values())
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    for setting in ("learning_rate_init", "width", "n_steps", "token_block_rate"):
        assert record.PROVENANCE[setting].startswith("ours: ")
    rows = []
    record.summary_rows(rows, tiny)
    assert len(rows) == 8
    assert rows[0].startswith("| convergence (T=8, d=2, q=2, m=8; every block at the same step")
    assert "token rows at 1/8 of the step (preconditioned, ours)" in rows[4]


def test_the_figure_panels(tiny):
    fig = tiny.plot()
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0] == "Loss" and titles[1] == "Positional block aligns with I"
    assert titles[3] == "Fresh rows at the training length" and len(fig.axes) == 4
    assert fig.axes[0].get_yscale() == "log"
    assert fig.axes[0].get_legend_handles_labels()[1] == [r.label for r in tiny.runs.values()]
    assert fig.axes[1].get_legend_handles_labels()[1] == [
        "same step (paper's)",
        "preconditioned (ours)",
        "identity direction",
    ]
    assert all(ax.get_xlabel() == "gradient step" and ax.get_ylabel() for ax in fig.axes)
    assert not any(fp.fills(ax) for ax in fig.axes)  # one seed: its curves alone
    assert fp.suptitle(fig).endswith("; one seed)")
    line = fp.line(fig.axes[1], "same step (paper's)")
    np.testing.assert_allclose(line.get_ydata(), tiny.runs["same_step"].cos)
    matplotlib.pyplot.close(fig)


def test_the_figure_over_seeds_draws_medians_and_min_max(two_seeds):
    fig = ConvergenceResult.plot_bands(two_seeds)
    assert fp.suptitle(fig).endswith("median over 2 seeds, band: min-max)")
    cos = np.array([r.runs["same_step"].cos for r in two_seeds])
    np.testing.assert_allclose(
        fp.line(fig.axes[1], "same step (paper's)").get_ydata(), np.median(cos, axis=0)
    )
    lo, hi = fp.band(fp.fills(fig.axes[1])[0], two_seeds[0].steps)
    np.testing.assert_allclose(lo, cos.min(axis=0), atol=1e-12)
    np.testing.assert_allclose(hi, cos.max(axis=0), atol=1e-12)
    assert len(fp.fills(fig.axes[2])) == 4  # gamma and the token norm, per run
    matplotlib.pyplot.close(fig)


def test_the_figure_refuses_bad_results(two_seeds):
    fp.check_plot_bands_names_bad_results(ConvergenceResult, two_seeds[0])
    lone = ConvergenceResult(
        two_seeds[1].config, two_seeds[1].table, {"same_step": two_seeds[1].runs["same_step"]}
    )
    with pytest.raises(ValueError, match=r"results\[1\] has the runs \['same_step'\]"):
        ConvergenceResult.plot_bands([two_seeds[0], lone])


@pytest.mark.slow
def test_token_norm_under_the_papers_algorithm():
    # The case: T=16, d=8, q=3, width 64, 300 steps at step 1. Every block at
    # the same step ends with a token block 8x larger than the preconditioned run's.
    res = training_dynamics(PRESETS["quick"]["convergence"], n_test=200, device="cpu")
    same, pre = res.runs["same_step"].final, res.runs["preconditioned"].final
    assert same["token_norm"] == pytest.approx(0.535, abs=0.01)
    assert pre["token_norm"] == pytest.approx(0.067, abs=0.005)
    for f in (same, pre):
        assert f["cos"] > 0.998 and f["gamma"] == pytest.approx(2.63, abs=0.02)


def test_the_task_module_imports_first_in_a_fresh_interpreter():
    # The experiment lives in the selection task's home and is exported lazily by
    # stsq_learn.experiments: importing either first goes round no circle.
    import subprocess
    import sys

    code = (
        "import stsq_learn.tasks.selection.convergence as c\n"
        "from stsq_learn.experiments import ConvergenceRun, training_dynamics\n"
        "assert training_dynamics is c.training_dynamics and ConvergenceRun is c.ConvergenceRun"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
