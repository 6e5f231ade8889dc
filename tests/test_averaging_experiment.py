"""The q-sparse averaging experiment on the study tools: numbers, seeds, checks, figure."""

import json
import math

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest

from stsq_learn import FCNSelector, SparseTokenSelector, isotropic_floor
from stsq_learn.experiments import (
    PRESETS,
    ConvergenceSettings,
    SparseAveragingResult,
    SparseAveragingSettings,
    sparse_averaging,
)
from stsq_learn.studies import StudyTable, stream_seed
from stsq_learn.tasks.averaging import record
from stsq_learn.tasks.averaging.experiment import _FloorWidths

TINY = PRESETS["tiny"]["qsa"]


@pytest.fixture(scope="module")
def qsa():
    return sparse_averaging(TINY, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def two_seeds():
    return sparse_averaging(TINY, device="cpu", seeds=[1, 0])


def test_tiny_numbers(qsa):
    head = record.headline(qsa)
    # Seed 0 of the tiny preset: attention reaches R^2 0.5 at width 4 (N=4) and 8 (N=8);
    # the FCN at neither; q=1 and 2 at N=8 reach nothing at 20 steps, though the floor
    # allows width 4.
    assert [head["attention_width_N4"], head["attention_width_N8"]] == [4.0, 8.0]
    assert math.isnan(head["fcn_width_N4"]) and math.isnan(head["fcn_width_N8"])
    assert head["attention_width_growth"] == 2.0
    assert "attention_log_law_a" not in head  # a law needs widths at 3 lengths
    assert [head["floor_width_q1"], head["floor_width_q2"]] == [4.0, 4.0]
    assert math.isnan(head["attention_width_q1"]) and math.isnan(head["attention_width_q2"])
    assert head["transfer_floor"] == pytest.approx(0.1636, abs=1e-4)
    assert head["transfer_selector_qsa_relative_mse"] == pytest.approx(0.4682, abs=1e-3)
    assert head["transfer_averager_qsa_relative_mse"] == pytest.approx(0.4679, abs=1e-3)
    assert head["length_fixed_r2_at_1N"] == pytest.approx(0.6218, abs=1e-3)
    assert head["length_stochastic_r2_at_2N"] == pytest.approx(0.2864, abs=1e-3)
    # A width is the smallest that reached the target; a miss has the largest tried below.
    fcn = qsa.by_length.where(model="fcn")
    assert list(fcn["bound"]) == [8.0, 8.0] and list(fcn["skipped"]) == [False, True]


def test_transfer_rows(qsa):
    tr = qsa.transfer
    assert tr.unique("model") == ["selector on STS_q", "selector on qSA", "averager on qSA"]
    assert (tr.meta["seq_len"], tr.meta["n_selected"], tr.meta["width"]) == (8, 2, 8)
    floor = isotropic_floor(8, 2, 8, random_state=stream_seed(0, "floor")).relative_mse
    assert np.all(tr["floor"] == floor)
    assert np.allclose(tr["floor_ratio"], tr["relative_mse"] / floor)
    # 20 steps beat predicting 0; no model beats the floor by more than noise; the same W
    # answers both tasks alike (each qSA query is an STS_q query).
    assert np.all((0.9 * floor < tr["relative_mse"]) & (tr["relative_mse"] < 1))
    assert tr["relative_mse"][1] == pytest.approx(tr["relative_mse"][0], abs=0.1)
    ln = qsa.length
    assert ln.unique("model") == ["stochastic", "fixed"] and ln.unique("eval_seq_len") == [8, 16]


def test_seeds_run_together_give_each_seeds_own_run(qsa, two_seeds):
    one, zero = two_seeds
    assert [one.config["random_state"], zero.config["random_state"]] == [1, 0]
    # The transfer's and the length part's seeds train as one batched model: each seed's
    # numbers are its own fit's up to float32 rounding. The searches stop each fit at the
    # target, one seed after another: their widths are the same.
    assert record.headline(zero) == pytest.approx(record.headline(qsa), rel=1e-5, nan_ok=True)
    assert record.headline(one) != pytest.approx(record.headline(zero), nan_ok=True)
    for name in ("by_length", "by_q", "transfer", "length"):
        assert set(getattr(zero, name)["seed"]) == {0}
    for name in ("by_length", "by_q"):
        assert _rows(getattr(zero, name)) == _rows(getattr(qsa, name))


def _rows(table):
    """The table's columns but the seconds, without its meta."""
    return StudyTable({c: table[c] for c in table.columns if c != "seconds"})


def test_floor_widths_bisect_the_grid():
    floors = _FloorWidths(32, [4, 8, 16, 32, 64], 0.9)
    assert floors(2) == 16  # the floor at N=32, q=2: 0.08 at width 16, 0.46 at 8
    assert floors(8) is None  # q=8 needs about 1000
    # A search starts at the floor's width, or higher where the previous q needed more.
    assert floors.start({"n_selected": 2}, None) == 16
    assert floors.start({"n_selected": 2}, {"reached": True, "value": 32}) == 32
    assert floors.start({"n_selected": 8}, None) == 64


def test_to_dict_round_trip(qsa):
    payload = json.loads(json.dumps(qsa.to_dict()))
    assert set(payload) == {
        "config",
        "by_length",
        "by_q",
        "transfer",
        "length",
        "laws",
        "width_growth",
        "seconds",
    }
    for name in ("by_length", "by_q", "transfer", "length"):
        assert StudyTable.from_dict(payload[name]) == getattr(qsa, name)
    assert payload["laws"] == {"attention": None, "fcn": None} and payload["width_growth"] == 2
    assert set(payload["seconds"]) == {"by_length", "by_q", "transfer", "length"}
    assert payload["config"]["random_state"] == 0 and payload["config"]["seq_lens"] == [4, 8]


def _result(seed, widths):
    """A hand-made result of one seed: attention widths at N = 4, 8, 16 (NaN: none reached)."""
    lens = [4, 8, 16]
    by_length = StudyTable(
        {
            "model": ["attention"] * 3 + ["fcn"] * 2,
            "seed": [seed] * 5,
            "param_seq_len": [*lens, 4, 8],
            "value": [*widths, 32, None],
            "bound": [None if w == w else 4 for w in widths] + [None, 64],
        }
    )
    by_q = StudyTable(
        {
            "model": ["attention"] * 2,
            "seed": [seed] * 2,
            "param_n_selected": [1, 2],
            "value": [4, 8 + seed],
            "bound": [None, None],
            "floor_width": [4, 8],
        }
    )
    transfer = StudyTable(
        {
            "model": ["selector on STS_q", "selector on qSA", "averager on qSA"],
            "seed": [seed] * 3,
            "relative_mse": [0.3 + seed / 100, 0.32, 0.28],
            "floor": [0.25] * 3,
            "floor_ratio": [(0.3 + seed / 100) / 0.25, 0.32 / 0.25, 0.28 / 0.25],
        },
        meta={"seq_len": 32, "n_features": 8, "n_selected": 4, "width": 64},
    )
    length = StudyTable(
        {
            "model": ["stochastic"] * 2 + ["fixed"] * 2,
            "seed": [seed] * 4,
            "eval_seq_len": [8, 16, 8, 16],
            "score": [0.9, 0.8 - seed / 10, 0.9, -0.3],
        }
    )
    config = {"target_r2": 0.9, "n_features": 2, "n_selected": 2, "q_seq_len": 16}
    config |= {"seq_lens": lens, "q_values": [1, 2], "length_task": (8, 2, 2)}
    config |= {"length_width": 16, "random_state": seed}
    return SparseAveragingResult(config, by_length, by_q, transfer, length)


def test_laws_and_growth_where_they_describe_the_widths():
    res = _result(0, [4, 8, 12])
    law = res.law("attention")
    assert law.name == "log2" and law.params["b"] == pytest.approx(4.0)
    assert law.x_range == (4.0, 16.0) and res.law("fcn") is None  # the FCN: 1 width
    assert res.width_growth() == 3.0 and res.width_growth("fcn") is None
    head = record.headline(res)
    assert head["attention_log_law_b"] == pytest.approx(4.0) and head["attention_log_law_r2"] == 1
    assert _result(0, [4, float("nan"), 12]).law("attention") is None  # 2 lengths


def test_figure_panels_bands_and_laws():
    results = [_result(s, [4, 8, 12 + 4 * s]) for s in range(3)]
    fig = SparseAveragingResult.plot_bands(results)
    ax_n, ax_q, ax_tr, ax_len = fig.axes
    assert ax_n.get_xlabel() == "positions N (log scale)"
    assert ax_q.get_xlabel() == "subset size q (log scale)"
    assert ax_len.get_xlabel() == "evaluation positions N' (log scale)"
    assert "3 seeds" in fig._suptitle.get_text()
    # Widths against N: the attention law over the N it was fitted on (4 to 16), none for
    # the FCN (one width); the medians 4, 8, 16 with min-max error bars (12 to 20 at 16).
    law = next(ln for ln in ax_n.lines if "log2" in ln.get_label())
    assert (law.get_xdata().min(), law.get_xdata().max()) == (4, 16)
    assert not any("^" in ln.get_label() and "fcn" in ln.get_label() for ln in ax_n.lines)
    median = next(ln for ln in ax_n.lines if ln.get_label() == "attention (SPE)")
    assert list(median.get_ydata()) == [4, 8, 16]
    # Against q: the floor's widths beside the medians (q = 2: 8, 9, 10 -> 9).
    assert list(fp.line(ax_q, "isotropic floor allows").get_ydata()) == [4, 8]
    assert list(fp.line(ax_q, "trained: smallest width reaching").get_ydata()) == [4, 9]
    # The transfer: median bars with min-max error bars (the first: 0.30 .. 0.32).
    bars = [p.get_height() for p in ax_tr.patches]
    assert bars == pytest.approx([0.31, 0.32, 0.28])
    # The length: the stochastic median at 16 (0.8, 0.7, 0.6) and its band.
    stochastic = next(ln for ln in ax_len.lines if ln.get_label().startswith("stochastic"))
    assert list(stochastic.get_ydata()) == pytest.approx([0.9, 0.7])
    assert len(ax_len.collections) == 2  # both encodings' min-max bands
    plt.close(fig)


def test_plot_of_one_result_draws_its_numbers(qsa):
    fig = qsa.plot()
    assert len(fig.axes) == 4 and not fig._suptitle
    assert fig.axes[3].get_title() == "qSA: length generalization (q=2, m=8)"
    plt.close(fig)


def test_plot_bands_names_bad_results():
    fp.check_plot_bands_names_bad_results(SparseAveragingResult, _result(0, [4, 8, 12]))
    other = _result(1, [4, 8, 12])
    other.config["q_values"] = [1, 3]
    with pytest.raises(ValueError, match="same settings"):
        SparseAveragingResult.plot_bands([_result(0, [4, 8, 12]), other])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(target_r2=1.0), ValueError, "target_r2"),
        (dict(seq_lens=()), ValueError, "seq_lens"),
        (dict(factors=()), ValueError, "factors"),
        (dict(q_values=()), ValueError, "q_values"),
        (dict(q_values=(1, 99)), ValueError, "n_selected"),
        (dict(transfer_task=(8, 2)), ValueError, "transfer_task"),
        (dict(q_steps="many"), TypeError, "q_steps"),
        (dict(fcn_max_seq_len=0), ValueError, "fcn_max_seq_len"),
        (dict(widths={"attention": (4,)}), ValueError, "widths has models"),
        (dict(n_steps={"fcn": 0}), ValueError, "n_steps\\['fcn'\\]"),
        (dict(stop_at_target=1), TypeError, "stop_at_target must be True or False, got int"),
        (dict(transformer=SparseTokenSelector()), TypeError, "transformer must be a SparseTokenAv"),
        (dict(fcn=FCNSelector()), TypeError, "fcn must be a FCNAverager"),
        (dict(estimator=SparseTokenSelector()), TypeError, "estimator must be a SparseTokenAv"),
        (dict(random_state=0, seeds=[1]), ValueError, "random_state .* or seeds"),
        (dict(seeds=[1, 1]), ValueError, "twice"),
    ],
)
def test_bad_settings_are_refused_by_name_before_work(kwargs, error, match, monkeypatch):
    from stsq_learn.tasks.averaging import experiment

    def no_work(*args, **kw):
        raise AssertionError("a study ran")

    monkeypatch.setattr(experiment, "run_studies", no_work)
    with pytest.raises(error, match=match):
        sparse_averaging(TINY, **kwargs)


def test_settings_are_one_typed_object_and_presets_its_instances(qsa):
    assert record.RECORD.settings is SparseAveragingSettings
    assert all(type(p) is SparseAveragingSettings for p in record.PRESETS.values())
    assert TINY is record.PRESETS["tiny"] and TINY.q_seq_len == 8
    res = sparse_averaging(TINY, seq_lens=(4,), q_values=(1,), factors=(1,), random_state=0)
    assert res.by_length.unique("param_seq_len") == [4] and res.by_q.unique("n_selected") == [1]
    assert res.length.unique("eval_seq_len") == [8]
    # The transfer does not depend on the other parts' settings.
    assert res.transfer == qsa.transfer
    assert TINY.seq_lens == (4, 8)  # the preset is not changed
    with pytest.raises(ValueError, match=r"\['q_value'\] are not settings of SparseAveraging"):
        sparse_averaging(TINY, q_value=(1,))
    with pytest.raises(TypeError, match="settings must be SparseAveragingSettings"):
        sparse_averaging(ConvergenceSettings())


def test_plan_is_the_studies_work():
    parts = record.work(TINY)
    labels = [p.label for p in parts]
    assert labels[-2:] == ["length_curve: stochastic", "length_curve: fixed"]
    # Searches: 3 fits expected at the first point, 2 after; transfer and length 1 each.
    assert sum(p.fits for p in parts) == (3 + 2) * 3 + 2 + 2


def test_summary_rows(qsa):
    rows = []
    record.summary_rows(rows, qsa)
    assert rows[0] == "| qSA widths (d=2, q=2, R^2 >= 0.5) | N = 4, 8 | |"
    assert "| | minimal width, attention | 4 / 8 |" in rows
    assert "| | minimal width, FCN | >8 / >8 |" in rows
    assert "| | width the isotropic floor allows, q = 1, 2 | 4 / 4 |" in rows
    assert any(r.startswith("| | relative MSE, selector on qSA | 0.468 (2.86x") for r in rows)
    assert rows[-3] == "| qSA length (trained at N=8, q=2, m=8) | R^2 at N' = 8, 16 | |"
