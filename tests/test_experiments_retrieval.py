"""The q-sparse token retrieval experiment: heads, widths against T, length (tiny sizes)."""

import json

import matplotlib
import pytest

from stsq_learn import FCNSelector, SparseTokenRetriever, SparseTokenSelector
from stsq_learn.experiments import (
    PRESETS,
    SparseRetrievalResult,
    reproduce,
    sparse_retrieval,
)
from stsq_learn.experiments._separation import SeparationResult  # retrieval's 0.6 result
from stsq_learn.tasks.retrieval import record
from stsq_learn.tasks.retrieval.experiment import threshold_heads

matplotlib.use("Agg")
TINY = PRESETS["tiny"]["retrieval"]


@pytest.fixture(scope="module")
def retrieval():
    return sparse_retrieval(TINY, device="cpu", random_state=0)


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
    res = sparse_retrieval(TINY, **small, random_state=0)
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
        (dict(stop_at_target=1), TypeError, "stop_at_target must be True or False, got int: 1"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, error, match):
    with pytest.raises(error, match=match):
        sparse_retrieval(**kwargs)


def test_reproduce_retrieval_section(tmp_path, retrieval):
    results = reproduce(
        "tiny", out=tmp_path, only="retrieval", device="cpu", progress=False, n_threads=1
    )
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
    heads = "| Retrieval heads (T=6, d=2, m=8, 20 SGD steps) | relative MSE at H = 1, 2 | |"
    assert heads in summary
    assert (
        "| | q=2: fewest H with relative MSE < 1/(2q) = 0.250 (theory: H = q) "
        "| not reached within this budget |" in summary
    )
    assert "| Retrieval widths (d=2, q=H=2, R^2 >= 0.5) | T = 4, 8 | |" in summary
    assert "| Retrieval length (trained at T=6, q=H=2, m=8) | R^2 at T' = 6, 12 | |" in summary


@pytest.mark.parametrize(
    ("errors", "q", "expected"),
    [
        ([0.69, 0.36, 0.048], 3, 3),  # the quick preset's budget: the threshold at H = q
        ([0.877, 0.620, 0.508], 3, None),  # the issue's: none below 1/6
        ([0.52, 0.03, 0.04], 2, 2),
        ([0.52, 0.26, 0.04], 2, 3),  # past q: too few steps for q heads
        ([0.9, None, 0.1], 3, 3),
        ([0.5, 0.25], 2, None),  # the level is strict: 0.25 is not below 1/(2*2)
        ([None, None], 1, None),
        ([0.1, 0.0], 1, 1),
    ],
)
def test_threshold_is_the_fewest_heads_below_half_the_bound_of_q_minus_one(errors, q, expected):
    assert threshold_heads([1, 2, 3][: len(errors)], errors, q) == expected


def test_heads_part_records_its_budget_and_threshold(retrieval):
    hd = retrieval.heads
    assert (hd["solver"], hd["learning_rate_init"]) == ("sgd", "auto")
    assert hd["threshold_level"] == {"2": 0.25}
    expected = threshold_heads(hd["n_heads"], hd["relative_mse"]["2"], 2)
    assert hd["threshold"] == {"2": expected}
    assert retrieval.config["heads_estimator"] == retrieval.config["estimator"]


def test_heads_estimator_trains_the_heads_part_alone(retrieval):
    # None is the estimator, with its seed: the same numbers as before it existed.
    same = sparse_retrieval(TINY, heads_estimator=TINY.estimator, device="cpu", random_state=0)
    assert same.heads["relative_mse"] == retrieval.heads["relative_mse"]
    adam = SparseTokenRetriever(solver="adam", learning_rate_init=0.05, learning_rate="cosine")
    res = sparse_retrieval(TINY, heads_estimator=adam, device="cpu", random_state=0)
    assert (res.heads["solver"], res.heads["learning_rate_init"]) == ("adam", 0.05)
    assert res.config["heads_estimator"]["solver"] == "adam"
    assert res.heads["relative_mse"] != retrieval.heads["relative_mse"]
    # The other parts keep the estimator: the length part's numbers do not move.
    assert res.length["r2"] == retrieval.length["r2"]


def test_heads_estimator_must_be_a_retriever():
    with pytest.raises(TypeError, match="heads_estimator must be a SparseTokenRetriever"):
        sparse_retrieval(heads_estimator=SparseTokenSelector())


def test_plot_names_the_q_whose_threshold_is_not_reached(retrieval):
    fig = retrieval.plot()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == [
        "no threshold at H = q for q=2 within this budget\n"
        "(relative MSE at H = q not below 1/(2q)): too few steps"
    ]
    assert "20 SGD steps" in fig.axes[0].get_title()
    matplotlib.pyplot.close(fig)


def test_record_headline_and_provenance(retrieval):
    numbers = record.headline(retrieval)
    errors = retrieval.heads["relative_mse"]["2"]
    assert numbers == {
        "relative_mse.q=2.H=1": errors[0],
        "relative_mse.q=2.H=2": errors[1],
        "threshold.q=2": pytest.approx(float("nan"), nan_ok=True),
    }
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    assert record.PROVENANCE["metric"].startswith("ours: the relative MSE")
    assert record.PROVENANCE["tokens"] == (
        "paper: Gaussian tokens (the law of Wang et al.'s sparse token selection)"
    )


def test_quick_preset_gives_the_heads_part_a_budget_that_reaches_the_threshold():
    quick = PRESETS["quick"]["retrieval"]
    params = quick["heads_estimator"].get_params()
    assert (params["solver"], params["learning_rate_init"]) == ("adam", 0.05)
    assert (quick["heads_width"], quick["heads_steps"]) == (32, 150)
    # The attention model's law over four lengths, the FCN's over three.
    assert quick["seq_lens"] == (4, 8, 16, 32) and quick["fcn_max_seq_len"] == 16


@pytest.mark.slow
def test_quick_heads_part_shows_the_threshold_at_q():
    quick = PRESETS["quick"]["retrieval"]
    small = dict(seq_lens=(4,), widths={"transformer": (4,), "fcn": (8,)})
    small.update(n_steps={"transformer": 2, "fcn": 2}, length_steps=2, n_test=1000)
    res = sparse_retrieval(quick, **small, q_values=(3,), device="cpu", random_state=0)
    errors = res.heads["relative_mse"]["3"]
    assert errors[2] < 1 / 6 < 0.3 < errors[1] < errors[0]
    assert res.heads["threshold"] == {"3": 3}


def test_settings_are_one_typed_object_presets_its_instances(retrieval):
    from stsq_learn.experiments import ConvergenceSettings, SparseRetrievalSettings

    assert record.RECORD.settings is SparseRetrievalSettings
    assert all(type(p) is SparseRetrievalSettings for p in record.PRESETS.values())
    assert SparseRetrievalSettings().n_test == 4000  # the function's former default
    assert TINY.heads_width == 8 and TINY.widths == {"transformer": (4, 8), "fcn": (8, 16)}
    # A preset and keyword changes on top of it: the change is what runs (the same
    # numbers as the preset where the change does not reach).
    res = sparse_retrieval(TINY, seq_lens=(4,), factors=(1,), random_state=0)
    assert res.by_length.seq_lens == [4] and res.length["eval_lengths"] == [6]
    assert res.heads["relative_mse"] == retrieval.heads["relative_mse"]
    assert TINY.factors == (1, 2)  # the preset is not changed
    misspelt = r"\['n_head'\] are not settings of SparseRetrievalSettings"
    with pytest.raises(ValueError, match=misspelt):
        sparse_retrieval(TINY, n_head=(1,))
    with pytest.raises(TypeError, match="settings must be SparseRetrievalSettings"):
        sparse_retrieval(ConvergenceSettings())


def test_width_search_fits_stop_at_the_target_unless_told_not_to(monkeypatch):
    # Widths that reach the target within their budget stop at the first check (every
    # 25 steps) that meets it; those that do not run every step. Same minimal widths.
    from stsq_learn.experiments import _width_search

    ran = []
    original = _width_search.fit_and_score

    def spy(estimator, width, *args, **kwargs):
        score, steps = original(estimator, width, *args, **kwargs)
        ran.append((type(estimator).__name__, width, score, steps))
        return score, steps

    monkeypatch.setattr(_width_search, "fit_and_score", spy)
    small = dict(
        q_values=(2,),
        n_heads=(2,),
        seq_lens=(4,),
        fcn_max_seq_len=4,
        target_r2=0.6,
        widths={"transformer": (4, 8), "fcn": (8, 32)},
        n_steps={"transformer": 100, "fcn": 100},
    )
    stopped = sparse_retrieval(TINY, **small, random_state=0)
    with_stops = list(ran)
    ran.clear()
    full = sparse_retrieval(TINY, **small, stop_at_target=False, random_state=0)
    assert stopped.config["stop_at_target"] is True and full.config["stop_at_target"] is False
    # The width search's own record says so too.
    assert stopped.by_length.config["stop_fits"] is True
    assert full.by_length.config["stop_fits"] is False
    assert all(steps == 100 for *_, steps in ran)
    assert any(score >= 0.6 and steps < 100 for _, _, score, steps in with_stops)
    for _, _, score, steps in with_stops:
        assert (steps < 100) == (score >= 0.6) or (steps == 100 and score >= 0.6)
    assert stopped.by_length.minimal_width == full.by_length.minimal_width
