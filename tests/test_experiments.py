import json

import matplotlib
import pytest
import torch

from stsq_learn import (
    FCNSelector,
    SparseTokenSelector,
)
from stsq_learn.experiments import (
    EXPERIMENTS,
    ExperimentResult,
    reproduce,
    summary_table,
    training_dynamics,
    width_separation_by_q,
)
from stsq_learn.experiments._reproduce import resolve_experiments

matplotlib.use("Agg")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # The experiments' models are tiny: one thread avoids oversubscribing a busy CPU.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def convergence():
    return training_dynamics("tiny", seeds=1, device="cpu")


@pytest.fixture(scope="module")
def separation_by_q():
    return width_separation_by_q("tiny", seeds=1, device="cpu")


@pytest.fixture(scope="module")
def _axis_labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_label() != "<colorbar>"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: training_dynamics(estimator=FCNSelector()), "'estimator' parameter"),
    ],
)
def test_experiments_refuse_the_wrong_estimator(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_experiments_clone_the_estimators_they_are_given():
    given = SparseTokenSelector(6, solver="sgd", learning_rate_init=1.0, random_state=123)
    before = given.get_params()
    res = training_dynamics(
        seq_len=6, n_features=2, n_selected=2, estimator=given, n_steps=4, seeds=1
    )
    assert given.get_params() == before and not hasattr(given, "net_")
    assert res.tables["dynamics"].unique("width") == [6]
    assert "learning_rate_init=1.0" in res.settings["estimator"]


def test_experiments_reject_bad_sizes():
    with pytest.raises(ValueError, match="n_steps"):
        training_dynamics(n_steps=0)


def test_resolve_experiments():
    assert resolve_experiments(None) == list(EXPERIMENTS)
    assert resolve_experiments("length") == ["length_generalization"]
    assert resolve_experiments(["separation", "convergence", "separation"]) == [
        "separation",
        "convergence",
    ]
    with pytest.raises(ValueError, match="bogus"):
        resolve_experiments("bogus")


def test_reproduce_writes_results(tmp_path, convergence):
    results = reproduce(
        "tiny", out=tmp_path, only="convergence", device="cpu", progress=False, n_threads=1
    )
    assert list(results) == ["convergence"]
    assert (tmp_path / "convergence.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload["experiments"]) == {"convergence"}
    assert payload["meta"]["preset"] == "tiny"
    # Same seed, same numbers as calling the function directly.
    section = ExperimentResult.from_dict(payload["experiments"]["convergence"])
    assert section.tables == convergence.tables
    table = summary_table(results)
    assert table.startswith("| experiment |") and "cos(W_pp, I)" in table


def test_the_separation_summary_rows(separation_by_q):
    rows = "\n".join(separation_by_q.summary())
    assert "minimal width, fcn" in rows and "the floor's minimal width" in rows


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
