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
    SparseAveragingResult,
    reproduce,
    sparse_averaging,
    summary_table,
    training_dynamics,
    width_separation_by_q,
)
from stsq_learn.experiments._common import StepProgress
from stsq_learn.experiments._reproduce import resolve_experiments

# q-sparse averaging still reports its widths in the 0.6 result (until its rewrite).
from stsq_learn.experiments._separation import SeparationResult
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
def qsa():
    return sparse_averaging(TINY["qsa"], device="cpu", random_state=0)


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


def test_sparse_averaging_structure(qsa):
    res = qsa
    assert isinstance(res, SparseAveragingResult)
    sep = res.by_length
    assert isinstance(sep, SeparationResult) and sep.seq_lens == [4, 8]
    assert sep.config["task"] == "q-sparse averaging" and sep.config["max_seq_len"]["fcn"] == 8
    assert sep.config["estimators"]["transformer"]["class"] == "SparseTokenAverager"
    assert sep.config["estimators"]["fcn"]["class"] == "FCNAverager"
    for model in ("transformer", "fcn"):
        for N, found, low in zip(sep.seq_lens, sep.minimal_width[model], sep.lower_bound[model]):
            scores = sep.scores[model][str(N)]
            assert all(-1.5 < r2 <= 1 for r2 in scores.values())
            # A minimal width is the smallest tried that reaches the target; else a bound.
            reached = sorted(int(w) for w, r2 in scores.items() if r2 >= 0.5)
            assert found == (reached[0] if reached else None)
            assert (low is None) == (found is not None)
    by_q = res.by_q
    assert by_q["seq_len"] == 8 and by_q["q_values"] == [1, 2]
    assert len(by_q["minimal_width"]) == len(by_q["floor_width"]) == 2
    # q = 1: the isotropic floor is 0 at every width, so the search starts at the bottom.
    assert by_q["floor_width"][0] == 4
    assert set(by_q["scores"]["1"]) <= {"4", "8"}


def test_sparse_averaging_transfer_and_length(qsa):
    tr = qsa.transfer
    assert (tr["seq_len"], tr["n_features"], tr["n_selected"], tr["width"]) == (8, 2, 2, 8)
    assert tr["n_steps"] == {"selector": 20, "averager": 20}
    rel = tr["relative_mse"]
    assert set(rel) == {"selector on STS_q", "selector on qSA", "averager on qSA"}
    floor = isotropic_floor(8, 2, 8, random_state=0).relative_mse
    assert tr["floor"] == pytest.approx(floor, abs=0.02)
    for name, value in rel.items():
        assert tr["floor_ratio"][name] == pytest.approx(value / tr["floor"])
        # Even 20 steps beat predicting 0; no model beats the floor by more than noise.
        assert 0.9 * tr["floor"] < value < 1
    # The same W answers both tasks alike: each qSA query is an STS_q query.
    assert rel["selector on qSA"] == pytest.approx(rel["selector on STS_q"], abs=0.1)
    ln = qsa.length
    assert ln["eval_lengths"] == [8, 16] and ln["n_test_rows"] == 50
    assert set(ln["r2"]) == {"stochastic", "fixed"}
    assert all(len(v) == 2 and all(-1 < r <= 1 for r in v) for v in ln["r2"].values())


def test_sparse_averaging_to_dict_and_plot(qsa):
    payload = json.loads(json.dumps(qsa.to_dict()))
    assert set(payload) >= {"config", "by_length", "by_q", "transfer", "length", "seconds"}
    assert payload["by_length"]["seq_lens"] == [4, 8]
    assert set(payload["seconds"]) == {"by_length", "by_q", "transfer", "length"}
    fig = qsa.plot()
    assert len(fig.axes) == 4
    assert fig.axes[0].get_xlabel() == "positions N (log scale)"
    assert fig.axes[1].get_xlabel() == "subset size q (log scale)"
    assert fig.axes[3].get_xlabel() == "evaluation positions N' (log scale)"
    matplotlib.pyplot.close(fig)


def test_sparse_averaging_width_growth():
    res = SparseAveragingResult(
        config={},
        by_length=SeparationResult(
            config={},
            seq_lens=[16, 64, 256],
            scores={},
            minimal_width={"transformer": [14, None, 28], "fcn": [None, None, None]},
            growth_laws={},
        ),
        by_q={},
        transfer={},
        length={},
    )
    assert res.width_growth() == 2.0 and res.width_growth("fcn") is None


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


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(target_r2=1.0), ValueError, "target_r2"),
        (dict(seq_lens=()), ValueError, "seq_lens"),
        (dict(factors=()), ValueError, "factors"),
        (dict(q_values=()), ValueError, "q_values"),
        (dict(transfer_task=(8, 2)), ValueError, "transfer_task"),
        (dict(q_steps="many"), TypeError, "q_steps"),
        (dict(fcn_max_seq_len=0), ValueError, "fcn_max_seq_len"),
        (dict(transformer=SparseTokenSelector()), TypeError, "transformer must be a SparseTokenAv"),
        (dict(fcn=FCNSelector()), TypeError, "fcn must be a FCNAverager"),
        (dict(estimator=SparseTokenSelector()), TypeError, "estimator must be a SparseTokenAv"),
    ],
)
def test_sparse_averaging_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        sparse_averaging(**kwargs)


def test_sparse_averaging_settings_are_one_typed_object_presets_its_instances(qsa):
    from stsq_learn.experiments import ConvergenceSettings, SparseAveragingSettings
    from stsq_learn.tasks.averaging import record

    assert record.RECORD.settings is SparseAveragingSettings
    assert all(type(p) is SparseAveragingSettings for p in record.PRESETS.values())
    assert TINY["qsa"] is record.PRESETS["tiny"] and TINY["qsa"].q_seq_len == 8
    assert SparseAveragingSettings().stop_at_target is True  # the function's former default
    # A preset and keyword changes on top of it: the change is what runs (the same
    # numbers as the preset where the change does not reach).
    res = sparse_averaging(
        TINY["qsa"], seq_lens=(4,), q_values=(1,), factors=(1,), device="cpu", random_state=0
    )
    assert res.by_length.seq_lens == [4] and res.by_q["q_values"] == [1]
    assert res.length["eval_lengths"] == [8]
    assert res.transfer["relative_mse"] == qsa.transfer["relative_mse"]
    assert TINY["qsa"].seq_lens == (4, 8)  # the preset is not changed
    misspelt = r"\['q_value'\] are not settings of SparseAveragingSettings"
    with pytest.raises(ValueError, match=misspelt):
        sparse_averaging(TINY["qsa"], q_value=(1,))
    with pytest.raises(TypeError, match="settings must be SparseAveragingSettings"):
        sparse_averaging(ConvergenceSettings())


def test_reproduce_qsa_section(tmp_path, qsa):
    results = reproduce(
        "tiny", out=tmp_path, only="averaging", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["qsa"]
    assert (tmp_path / "qsa.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "qsa"}
    # Same seed, same numbers as calling the function directly.
    assert payload["qsa"]["transfer"]["relative_mse"] == pytest.approx(qsa.transfer["relative_mse"])
    assert payload["qsa"]["length"]["r2"]["fixed"] == pytest.approx(qsa.length["r2"]["fixed"])
    summary = (tmp_path / "summary.md").read_text()
    assert "| qSA widths (d=2, q=2, R^2 >= 0.5) | N = 4, 8 | |" in summary
    assert "| | minimal width, attention at N=8, q = 1, 2 |" in summary
    assert "| qSA transfer (N=8, d=2, q=2, m=8) | isotropic floor (relative MSE) |" in summary
    assert "| | relative MSE, selector on qSA |" in summary and "x the floor)" in summary
    assert "| qSA length (trained at N=8, q=2, m=8) | R^2 at N' = 8, 16 | |" in summary
