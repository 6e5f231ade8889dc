import json

import matplotlib
import numpy as np
import pytest
import torch

from stsq_learn.experiments import (
    EXPERIMENTS,
    PRESETS,
    ConvergenceResult,
    LengthGeneralizationResult,
    SeparationResult,
    length_generalization,
    reproduce,
    summary_table,
    training_dynamics,
    width_separation,
)
from stsq_learn.experiments._common import _SteppingTask
from stsq_learn.experiments._reproduce import resolve_experiments
from stsq_learn.experiments._separation import _fit_growth_law

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
    return training_dynamics(**TINY["convergence"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def length():
    return length_generalization(**TINY["length_generalization"], device="cpu", random_state=0)


@pytest.fixture(scope="module")
def separation():
    return width_separation(**TINY["separation"], device="cpu", random_state=0)


def _axis_labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_training_dynamics_records_every_step(convergence):
    res = convergence
    n = TINY["convergence"]["n_steps"]
    assert isinstance(res, ConvergenceResult)
    assert res.steps == list(range(n + 1))
    assert len(res.loss) == len(res.cos) == len(res.gamma) == len(res.token_norm) == n + 1
    # W starts at 0: no alignment, no scale.
    assert res.cos[0] == 0.0 and res.gamma[0] == 0.0 and res.token_norm[0] == 0.0
    # Plain gradient descent aligns W_pp with the identity, with a growing scale.
    assert res.cos[-1] > 0.9
    assert res.gamma[-1] > res.gamma[n // 2] > 0
    assert res.loss[-1] < res.loss[0]
    m = TINY["convergence"]["width"]
    assert res.positional_block.shape == (m, m)
    assert res.token_block.shape == (TINY["convergence"]["n_features"], m)
    assert -1 <= res.test_r2 <= 1
    assert res.config["solver"] == "sgd"


def test_training_dynamics_record_every():
    res = training_dynamics(
        seq_len=6, n_features=2, n_selected=2, width=4, n_steps=10, record_every=4, n_test=50
    )
    assert res.steps == [0, 4, 8, 10]


def test_convergence_to_dict_and_plot(convergence):
    d = json.loads(json.dumps(convergence.to_dict()))
    assert {"config", "steps", "loss", "cos", "gamma", "final"} <= set(d)
    assert "positional_block" not in d
    assert d["final"]["cos"] == pytest.approx(convergence.cos[-1])
    fig = convergence.plot()
    assert len(_axis_labels(fig)) == 4
    assert all(x and y for x, y in _axis_labels(fig))
    assert fig.axes[0].get_yscale() == "log"
    matplotlib.pyplot.close(fig)


def test_length_generalization_structure(length):
    res = length
    assert isinstance(res, LengthGeneralizationResult)
    assert res.eval_lengths == [8, 16]
    assert res.models == ["stochastic", "stochastic, 4 draws", "fixed"]
    assert set(res.r2) == {"val_128", "val_large"}
    for curves in res.r2.values():
        assert set(curves) == set(res.models)
        assert all(len(v) == 2 and all(np.isfinite(v)) for v in curves.values())
    assert res.at("fixed", 2) == res.r2["val_large"]["fixed"][1]
    assert set(res.train_r2) == {"stochastic", "fixed"}
    d = json.loads(json.dumps(res.to_dict()))
    assert d["eval_lengths"] == [8, 16]
    fig = res.plot()
    assert len(fig.axes) == 2
    assert all(ax.get_xscale() == "log" and ax.get_legend() is not None for ax in fig.axes)
    matplotlib.pyplot.close(fig)


def test_length_generalization_is_reproducible():
    kwargs = {**TINY["length_generalization"], "n_steps": 5, "n_val_large": 100}
    first = length_generalization(**kwargs, device="cpu", random_state=3)
    again = length_generalization(**kwargs, device="cpu", random_state=3)
    assert again.r2 == first.r2


def test_width_separation_structure(separation):
    res = separation
    assert isinstance(res, SeparationResult)
    assert res.seq_lens == [4, 8]
    for model in ("transformer", "fcn"):
        assert set(res.scores[model]) == {"4", "8"}
        assert len(res.minimal_width[model]) == 2
        for T, w in zip(res.seq_lens, res.minimal_width[model]):
            scores = res.scores[model][str(T)]
            if w is None:
                assert max(scores.values()) < res.config["target_r2"]
            else:
                # The smallest width tried that reaches the target.
                assert scores[str(w)] >= res.config["target_r2"]
                assert all(s < res.config["target_r2"] for k, s in scores.items() if int(k) < w)
        assert set(res.growth_laws[model]) == {"log_T", "T_d"}
    d = json.loads(json.dumps(res.to_dict()))
    assert len(d["width_ratio"]) == 2
    fig = res.plot()
    ax_w = fig.axes[0]
    assert ax_w.get_xscale() == "log" and ax_w.get_yscale() == "log"
    assert all(ax.get_legend() is not None for ax in fig.axes)
    matplotlib.pyplot.close(fig)


def test_width_separation_gridsearch_regime():
    res = width_separation(
        seq_lens=(4,),
        n_features=2,
        n_selected=2,
        target_r2=0.5,
        transformer_widths=(2, 8),
        fcn_widths=(4, 16),
        regime="gridsearch",
        n_train=300,
        max_iter=3,
        device="cpu",
        random_state=0,
    )
    # GridSearchCV scores every width of the grid.
    assert set(res.scores["transformer"]["4"]) == {"2", "8"}
    assert set(res.scores["fcn"]["4"]) == {"4", "16"}
    assert res.config["regime"] == "gridsearch"
    assert res.growth_laws["fcn"]["log_T"] is None  # one length: no law


def test_monotone_search_starts_from_previous_minimum():
    res = width_separation(
        seq_lens=(4, 8),
        n_features=2,
        n_selected=2,
        target_r2=0.01,
        transformer_widths=(4, 8),
        fcn_widths=(4, 8),
        transformer_steps=5,
        fcn_steps=5,
        n_val=100,
        device="cpu",
    )
    for model in ("transformer", "fcn"):
        first = res.minimal_width[model][0]
        if first is not None:
            assert min(int(w) for w in res.scores[model]["8"]) >= first


def test_fit_growth_law_recovers_exact_laws():
    law = _fit_growth_law(np.log2([4, 8, 16, 32]), [7.0, 10.0, 13.0, 16.0])
    assert law["intercept"] == pytest.approx(1.0) and law["slope"] == pytest.approx(3.0)
    assert law["r2"] == pytest.approx(1.0)
    law = _fit_growth_law([8, 16, 32], [16.0, 32.0, 64.0], intercept=False)
    assert law == {"intercept": 0.0, "slope": pytest.approx(2.0), "r2": pytest.approx(1.0)}
    assert _fit_growth_law([3.0], [5.0]) is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"regime": "bogus"}, "regime"),
        ({"target_r2": 1.5}, "target_r2"),
        ({"seq_lens": ()}, "seq_lens"),
        ({"fcn_widths": ()}, "fcn_widths"),
        ({"transformer_widths": (0, 4)}, "transformer_widths"),
        ({"transformer_steps": 0}, "transformer_steps"),
    ],
)
def test_width_separation_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        width_separation(**kwargs)


def test_experiments_reject_bad_sizes():
    with pytest.raises(ValueError, match="n_steps"):
        training_dynamics(n_steps=0)
    with pytest.raises(ValueError, match="factors"):
        length_generalization(factors=())
    with pytest.raises(ValueError, match="n_selected"):
        length_generalization(seq_len=2, n_selected=3)


def test_stepping_task_is_the_same_law():
    from stsq_learn import SparseTokenSelectionTask

    calls = []
    task = _SteppingTask(SparseTokenSelectionTask(8, 2, (1, 3)), lambda: calls.append(1))
    assert isinstance(task, SparseTokenSelectionTask)
    assert (task.seq_len, task.n_features, task.q_range) == (8, 2, (1, 3))
    import torch

    task.sample_torch(4, generator=torch.Generator().manual_seed(0))
    assert calls == [1]


def test_resolve_experiments():
    assert resolve_experiments(None) == list(EXPERIMENTS)
    assert resolve_experiments("length") == ["length_generalization"]
    assert resolve_experiments(["separation", "convergence", "separation"]) == [
        "separation",
        "convergence",
    ]
    with pytest.raises(ValueError, match="bogus"):
        resolve_experiments("bogus")


def test_reproduce_writes_results(tmp_path, convergence, length, separation):
    results = reproduce("tiny", out=tmp_path, only="convergence", progress=False, n_threads=1)
    assert list(results) == ["convergence"]
    assert (tmp_path / "convergence.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "convergence"}
    assert payload["meta"]["preset"] == "tiny"
    # Same seed, same numbers as calling the function directly.
    assert payload["convergence"]["cos"] == pytest.approx(convergence.cos)
    table = summary_table(
        {"convergence": convergence, "length_generalization": length, "separation": separation}
    )
    assert table.startswith("| experiment |")
    assert "cos(W_pp, I)" in table and "minimal width, fcn" in table and "fixed" in table


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
