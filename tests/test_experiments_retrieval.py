"""The q-sparse token retrieval experiment: heads, widths against T, length (tiny sizes)."""

import json

import matplotlib
import pytest

from stsq_learn import FCNSelector, SparseTokenSelector
from stsq_learn.experiments import (
    PRESETS,
    SeparationResult,
    SparseRetrievalResult,
    reproduce,
    sparse_retrieval,
)

matplotlib.use("Agg")
TINY = PRESETS["tiny"]["retrieval"]


@pytest.fixture(scope="module")
def retrieval():
    return sparse_retrieval(**TINY, device="cpu", random_state=0)


def test_heads_part_tries_every_head_count_up_to_q_plus_one(retrieval):
    hd = retrieval.heads
    assert (hd["seq_len"], hd["n_features"], hd["width"], hd["n_steps"]) == (6, 2, 8, 20)
    assert hd["q_values"] == [2] and hd["n_heads"] == [1, 2]
    errors = hd["relative_mse"]["2"]
    assert len(errors) == 2 and all(0 < e < 1.5 for e in errors)  # 20 steps: barely moved
    assert hd["bound"]["2"] == [0.5, 0.0]


def test_heads_part_skips_more_than_q_plus_one_heads():
    small = dict(q_values=(1,), n_heads=(1, 2, 3), seq_lens=(4,))
    small["widths"] = {"transformer": (4,), "fcn": (8,)}
    res = sparse_retrieval(**{**TINY, **small}, random_state=0)
    assert res.heads["relative_mse"]["1"][2] is None
    assert all(e is not None for e in res.heads["relative_mse"]["1"][:2])
    assert res.heads["bound"]["1"] == [0.0, 0.0, 0.0]


def test_width_search_is_at_q_heads_for_both_models(retrieval):
    sep = retrieval.by_length
    assert isinstance(sep, SeparationResult) and sep.seq_lens == [4, 8]
    cfg = sep.config
    assert cfg["task"] == "q-sparse token retrieval" and cfg["n_heads"] == cfg["n_selected"] == 2
    assert cfg["estimators"]["transformer"]["class"] == "SparseTokenRetriever"
    assert cfg["estimators"]["transformer"]["n_heads"] == 2
    assert cfg["estimators"]["fcn"]["class"] == "FCNRetriever"
    for model in ("transformer", "fcn"):
        for T, found, low in zip(sep.seq_lens, sep.minimal_width[model], sep.lower_bound[model]):
            scores = sep.scores[model][str(T)]
            reached = sorted(int(w) for w, r2 in scores.items() if r2 >= 0.5)
            assert found == (reached[0] if reached else None)
            assert (low is None) == (found is not None)


def test_length_part_trains_q_heads_and_scores_longer_rows(retrieval):
    ln = retrieval.length
    assert ln["seq_len"] == 6 and ln["n_heads"] == ln["n_selected"] == 2
    assert ln["eval_lengths"] == [6, 12] and ln["n_test_rows"] == 200  # one query a row
    assert set(ln["r2"]) == {"stochastic", "fixed"}
    assert all(len(v) == 2 and all(-1 < r <= 1 for r in v) for v in ln["r2"].values())


def test_to_dict_and_plot(retrieval):
    payload = json.loads(json.dumps(retrieval.to_dict()))
    assert set(payload) >= {"config", "heads", "by_length", "length", "seconds", "width_growth"}
    assert set(payload["seconds"]) == {"heads", "by_length", "length"}
    fig = retrieval.plot()
    assert len(fig.axes) == 3
    assert fig.axes[0].get_xlabel() == "heads H"
    assert fig.axes[1].get_xlabel() == "sequence length T (log scale)"
    assert fig.axes[2].get_xlabel() == "evaluation length T' (log scale)"
    # Only the chosen lengths carry labels (no minor tick labels over them).
    fig.canvas.draw()
    minor = [t.get_text() for t in fig.axes[2].get_xticklabels(minor=True) if t.get_text()]
    assert minor == []
    matplotlib.pyplot.close(fig)


def test_width_growth():
    res = SparseRetrievalResult(
        config={},
        heads={},
        by_length=SeparationResult(
            config={},
            seq_lens=[16, 64, 256],
            scores={},
            minimal_width={"transformer": [12, None, 24], "fcn": [None, None, None]},
            growth_laws={},
        ),
        length={},
    )
    assert res.width_growth() == 2.0 and res.width_growth("fcn") is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(target_r2=0.0), ValueError, "target_r2"),
        (dict(q_values=()), ValueError, "q_values"),
        (dict(seq_len=4, q_values=(5,)), ValueError, "q_values name up to 5"),
        (dict(factors=()), ValueError, "factors"),
        (dict(length_task=(8, 2)), ValueError, "length_task"),
        (dict(heads_steps="many"), TypeError, "heads_steps"),
        (dict(heads_width=0), ValueError, "heads_width"),
        (dict(transformer=SparseTokenSelector()), TypeError, "transformer must be a SparseTokenRe"),
        (dict(fcn=FCNSelector()), TypeError, "fcn must be a FCNRetriever"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match):
    with pytest.raises(error, match=match):
        sparse_retrieval(**kwargs)


def test_reproduce_retrieval_section(tmp_path, retrieval):
    results = reproduce("tiny", out=tmp_path, only="retrieval", progress=False, n_threads=1)
    assert list(results) == ["retrieval"]
    assert (tmp_path / "retrieval.png").stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert set(payload) == {"meta", "retrieval"}
    # Same seed, same numbers as calling the function directly.
    assert payload["retrieval"]["heads"]["relative_mse"]["2"] == pytest.approx(
        retrieval.heads["relative_mse"]["2"]
    )
    assert payload["retrieval"]["length"]["r2"]["fixed"] == pytest.approx(
        retrieval.length["r2"]["fixed"]
    )
    summary = (tmp_path / "summary.md").read_text()
    assert "| Retrieval heads (T=6, d=2, m=8) | relative MSE at H = 1, 2 | |" in summary
    assert "| Retrieval widths (d=2, q=H=2, R^2 >= 0.5) | T = 4, 8 | |" in summary
    assert "| Retrieval length (trained at T=6, q=H=2, m=8) | R^2 at T' = 6, 12 | |" in summary
