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
    PRESETS,
    reproduce,
    summary_table,
    training_dynamics,
    width_separation_by_q,
)
from stsq_learn.experiments._reproduce import resolve_experiments

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
