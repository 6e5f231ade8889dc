import json

import matplotlib
import numpy as np
import pytest
import torch
from sklearn.base import clone

from stsq_learn import (
    FCNSelector,
    SparseTokenSelectionTask,
    SparseTokenSelector,
    isotropic_floor,
)
from stsq_learn.experiments import (
    EXPERIMENTS,
    PRESETS,
    reproduce,
    summary_table,
    training_dynamics,
    width_separation_by_q,
)
from stsq_learn.experiments._common import StepProgress
from stsq_learn.experiments._reproduce import resolve_experiments
from stsq_learn.experiments._width_search import fit_growth_law, fit_power_law

matplotlib.use("Agg")

TINY = PRESETS["tiny"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # The experiments' models are tiny: one thread avoids oversubscribing a busy CPU.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def convergence():
    return training_dynamics(TINY["convergence"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def separation_by_q():
    return width_separation_by_q(**TINY["separation"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def _axis_labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_bracket_search_goes_down_while_the_target_is_reached():
    from stsq_learn.experiments._width_search import search_bracket

    task = SparseTokenSelectionTask(4, 2, 2)
    est = SparseTokenSelector(
        solver="adam", learning_rate_init=0.1, batch_size=64, device="cpu", random_state=0
    )
    # Target 0.0 is reached by every width: from index 2 down to the grid's start.
    found = search_bracket(est, task, [2, 3, 4, 6], 2, 3, 100, -10.0, 0, False, "t")
    assert list(found) == [4, 3, 2]
    # An unreachable target: from index 1 up to the grid's end.
    found = search_bracket(est, task, [2, 3, 4, 6], 1, 3, 100, 0.9999, 0, False, "t")
    assert list(found) == [3, 4, 6]


def test_fit_growth_law_recovers_exact_laws():
    law = fit_growth_law(np.log2([4, 8, 16, 32]), [7.0, 10.0, 13.0, 16.0])
    assert law["intercept"] == pytest.approx(1.0) and law["slope"] == pytest.approx(3.0)
    assert law["r2"] == pytest.approx(1.0)
    assert law["residuals"] == pytest.approx([0, 0, 0, 0], abs=1e-9)
    law = fit_growth_law([8, 16, 32], [16.0, 32.0, 64.0], intercept=False)
    assert law["intercept"] == 0.0 and law["slope"] == pytest.approx(2.0)
    assert law["r2"] == pytest.approx(1.0) and law["rms_residual"] == pytest.approx(0, abs=1e-9)
    assert fit_growth_law([3.0], [5.0]) is None
    # A fit needs more points than parameters: two points say nothing of a law.
    assert fit_growth_law([3.0, 4.0], [5.0, 6.0]) is None
    assert fit_growth_law([3.0], [5.0], intercept=False) is None


def test_fit_power_law_recovers_the_exponent():
    Ts = np.array([4, 16, 64, 256, 1024, 4096], float)
    law = fit_power_law(Ts, 3.0 + 2.0 * Ts**0.5)
    assert law["exponent"] == pytest.approx(0.5, abs=0.01)
    assert law["intercept"] == pytest.approx(3.0, abs=0.5) and law["r2"] > 0.9999
    law = fit_power_law(Ts, 5.0 * Ts**1.2, offset=False)
    assert law["exponent"] == pytest.approx(1.2) and law["slope"] == pytest.approx(5.0)
    # A logarithm needs a small exponent, and fits worse than the log law itself.
    widths = 4.0 + 3.0 * np.log2(Ts)
    power, log = fit_power_law(Ts, widths), fit_growth_law(np.log2(Ts), widths)
    assert power["exponent"] < 0.2 and log["rms_residual"] <= power["rms_residual"] + 1e-9
    assert fit_power_law(Ts[:3], widths[:3]) is None  # three parameters need four points
    assert fit_power_law(Ts[:2], widths[:2], offset=False) is None  # two need three


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: training_dynamics(estimator=FCNSelector()), "estimator must be a Sparse"),
    ],
)
def test_experiments_refuse_the_wrong_estimator(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_experiments_clone_the_estimators_they_are_given():
    given = SparseTokenSelector(6, solver="sgd", learning_rate_init=1.0, random_state=123)
    before = given.get_params()
    res = training_dynamics(seq_len=6, n_features=2, n_selected=2, estimator=given, n_steps=4)
    assert given.get_params() == before and not hasattr(given, "net_")
    assert res.config["width"] == 6 and res.config["learning_rate_init"] == 1.0


def test_experiments_reject_bad_sizes():
    with pytest.raises(ValueError, match="n_steps"):
        training_dynamics(n_steps=0)


def test_step_progress_counts_training_steps_and_leaves_a_picklable_model():
    import pickle

    bar = StepProgress(7, "test", enabled=True)
    model = SparseTokenSelector(4, batch_size=8, callbacks=[bar], random_state=0)
    model.fit_online(SparseTokenSelectionTask(6, 2, 2), n_steps=7)
    assert bar.steps_ == 7 and bar.bar_ is None  # closed at the end of training
    copy = pickle.loads(pickle.dumps(model))
    assert copy.n_iter_ == 7
    counted = StepProgress(5, "test", enabled=False)
    clone(model).set_params(callbacks=[counted]).fit_online(SparseTokenSelectionTask(6, 2, 2), 5)
    assert counted.steps_ == 5


def test_resolve_experiments():
    assert resolve_experiments(None) == list(EXPERIMENTS)
    assert resolve_experiments("length") == ["length_generalization"]
    assert resolve_experiments(["separation", "convergence", "separation"]) == [
        "separation",
        "convergence",
    ]
    with pytest.raises(ValueError, match="bogus"):
        resolve_experiments("bogus")


def test_reproduce_writes_results(tmp_path, convergence, separation_by_q):
    results = reproduce(
        "tiny", out=tmp_path, only="convergence", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["convergence"]
    assert (tmp_path / "convergence.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "convergence"}
    assert payload["meta"]["preset"] == "tiny"
    # Same seed, same numbers as calling the function directly.
    assert payload["convergence"]["table"] == json.loads(json.dumps(convergence.to_dict()["table"]))
    table = summary_table(
        {
            "convergence": convergence,
            "separation": separation_by_q,
        }
    )
    assert table.startswith("| experiment |")
    assert "cos(W_pp, I)" in table and "minimal width, fcn" in table
    assert "the floor's minimal width" in table


def test_reproduce_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        reproduce("huge", progress=False)
    with pytest.raises(ValueError, match="bogus"):
        reproduce("tiny", only="bogus", progress=False)
    with pytest.raises(ValueError, match="seed"):
        reproduce("tiny", seed=-1, progress=False)
    with pytest.raises(ValueError, match="n_threads"):
        reproduce("tiny", n_threads=0, progress=False)
    assert not any(tmp_path.iterdir())


def test_floor_width_is_the_smallest_width_the_floor_allows():
    # The averaging searches' start (the separation's floor_widths, one length).
    from stsq_learn.experiments._width_search import floor_widths

    grid = [4, 8, 16, 32, 64]
    (got,) = floor_widths([32], 2, grid, 0.9, n_samples=4000)
    direct = [
        w
        for w in grid
        if isotropic_floor(32, 2, w, n_samples=4000, random_state=0).relative_mse <= 0.1
    ]
    assert got == direct[0] == 16  # the floor at N=32, q=2: 0.08 at width 16, 0.46 at 8
    assert floor_widths([32], 8, grid, 0.9, n_samples=4000) == [None]  # q=8 needs ~1000
