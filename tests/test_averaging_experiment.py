"""The q-sparse averaging experiment: the tiny run's numbers, seeds, checks, figure, record."""

import json
import math

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from stsq_learn import (
    FCNAverager,
    FCNSelector,
    SparseTokenAverager,
    SparseTokenSelector,
    isotropic_floor,
)
from stsq_learn.experiments import (
    PRESETS,
    ExperimentResult,
    InContextSettings,
    SparseAveragingSettings,
    sparse_averaging,
)
from stsq_learn.studies import StudyTable, planning, stream_seed
from stsq_learn.tasks.averaging.experiment import (
    PROVENANCE,
    RECORD,
    TRANSFER,
    FloorWidths,
    headline,
    summary,
)

TINY = PRESETS["tiny"]["qsa"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's seeds 1 and 0, in one call."""
    return sparse_averaging("tiny", seeds=(1, 0))


# -- the tiny run --------------------------------------------------------------------------
def test_tiny_numbers(tiny):
    head = headline(tiny.seed(0))
    # Seed 0: attention reaches R^2 0.5 at width 4 (N=4) and 8 (N=8); the FCN at neither;
    # q=1 and 2 at N=8 reach nothing at 20 steps, though the floor allows width 4.
    assert [head["attention_width_N4"], head["attention_width_N8"]] == [4.0, 8.0]
    assert math.isnan(head["fcn_width_N4"]) and math.isnan(head["fcn_width_N8"])
    assert head["attention_width_growth"] == 2.0
    assert math.isnan(head["attention_log_law_b"])  # a law needs widths at 3 lengths
    assert [head["floor_width_q1"], head["floor_width_q2"]] == [4.0, 4.0]
    assert math.isnan(head["attention_width_q1"]) and math.isnan(head["attention_width_q2"])
    assert head["transfer_floor"] == pytest.approx(0.1636, abs=1e-4)
    assert head["transfer_selector_qsa_relative_mse"] == pytest.approx(0.4682, abs=1e-3)
    assert head["transfer_averager_qsa_relative_mse"] == pytest.approx(0.4679, abs=1e-3)
    assert head["length_fixed_r2_at_1N"] == pytest.approx(0.6218, abs=1e-3)
    assert head["length_stochastic_r2_at_2N"] == pytest.approx(0.2864, abs=1e-3)
    # A width is the smallest that reached the target; a miss has the largest tried below.
    fcn = tiny.seed(0).tables["by_length"].where(model="fcn")
    assert list(fcn["bound"]) == [8.0, 8.0] and list(fcn["skipped"]) == [False, True]


def test_transfer_rows_beside_the_floor(tiny):
    tr = tiny.seed(0).tables["transfer"]
    assert tr.unique("model") == list(TRANSFER)
    floor = isotropic_floor(8, 2, 8, random_state=stream_seed(0, "floor")).relative_mse
    assert np.all(tr["floor"] == floor)
    head = headline(tiny.seed(0))
    assert head["transfer_selector_qsa_floor_ratio"] == tr["relative_mse"][1] / floor
    # 20 steps beat predicting 0; no model beats the floor by more than noise; the same W
    # answers both tasks alike (each qSA query is an STS_q query).
    assert np.all((0.9 * floor < tr["relative_mse"]) & (tr["relative_mse"] < 1))
    assert tr["relative_mse"][1] == pytest.approx(tr["relative_mse"][0], abs=0.1)
    ln = tiny.tables["length"]
    assert ln.unique("model") == ["stochastic", "fixed"] and ln.unique("eval_seq_len") == [8, 16]


def test_a_seed_of_a_run_is_the_one_seed_run(tiny):
    one = sparse_averaging("tiny", seeds=[0])
    assert tiny.seeds == (1, 0) and one.seeds == (0,)
    # The transfer's and the length part's seeds train as one batched model: each seed's
    # numbers are its own fit's up to float32 rounding. The searches stop each fit at the
    # target, one seed after another: their tables are the same.
    assert headline(tiny.seed(0)) == pytest.approx(headline(one), rel=1e-5, nan_ok=True)
    assert headline(tiny.seed(1)) != pytest.approx(headline(one), nan_ok=True)
    for name in ("by_length", "by_q"):
        assert _rows(tiny.seed(0).tables[name]) == _rows(one.tables[name])
    assert set(tiny.seed(0).tables["transfer"]["seed"]) == {0}


def _rows(table):
    """The table's columns but the seconds, without its meta."""
    return StudyTable({c: table[c] for c in table.columns if c != "seconds"})


def test_floor_widths_bisect_the_grid():
    floors = FloorWidths(32, [4, 8, 16, 32, 64], 0.9)
    assert floors(2) == 16  # the floor at N=32, q=2: 0.08 at width 16, 0.46 at 8
    assert floors(8) is None  # q=8 needs about 1000
    # A search starts at the floor's width, or higher where the previous q needed more.
    assert floors.start({"n_selected": 2}, None) == 16
    assert floors.start({"n_selected": 2}, {"reached": True, "value": 32}) == 32
    assert floors.start({"n_selected": 8}, None) == 64


# -- the result ----------------------------------------------------------------------------
def test_result_round_trips_through_json_and_draws_the_same_figure(tiny):
    back = ExperimentResult.from_dict(json.loads(json.dumps(tiny.to_dict())))
    assert back == tiny and sorted(back.tables) == ["by_length", "by_q", "length", "transfer"]
    assert back.settings["seq_lens"] == [4, 8] and back.settings["transfer_task"] == [8, 2, 2]
    np.testing.assert_equal(back.headline(), tiny.headline())
    one, two = tiny.plot(), back.plot()
    for a, b in zip(one.axes, two.axes):
        assert a.get_title() == b.get_title()
        assert [ln.get_label() for ln in a.lines] == [ln.get_label() for ln in b.lines]
        for la, lb in zip(a.lines, b.lines):
            np.testing.assert_array_equal(la.get_ydata(), lb.get_ydata())
    assert one.axes[3].get_title() == "qSA: length generalization (q=2, m=8)"
    plt.close("all")


def _result(widths_by_seed):
    """A hand-made run: attention widths at N = 4, 8, 16 per seed (NaN: none reached)."""
    lens, tables = [4, 8, 16], {"by_length": [], "by_q": [], "transfer": [], "length": []}
    for seed, widths in enumerate(widths_by_seed):
        tables["by_length"].append(
            StudyTable(
                {
                    "model": ["attention"] * 3 + ["fcn"] * 2,
                    "seed": [seed] * 5,
                    "param_seq_len": [*lens, 4, 8],
                    "value": [*widths, 32, None],
                    "bound": [None if w == w else 4 for w in widths] + [None, 64],
                }
            )
        )
        tables["by_q"].append(
            StudyTable(
                {
                    "model": ["attention"] * 2,
                    "seed": [seed] * 2,
                    "param_n_selected": [1, 2],
                    "value": [4, 8 + seed],
                    "bound": [None, None],
                    "floor_width": [4, 8],
                }
            )
        )
        tables["transfer"].append(
            StudyTable(
                {
                    "model": list(TRANSFER),
                    "seed": [seed] * 3,
                    "relative_mse": [0.3 + seed / 100, 0.32, 0.28],
                    "floor": [0.25] * 3,
                }
            )
        )
        tables["length"].append(
            StudyTable(
                {
                    "model": ["stochastic"] * 2 + ["fixed"] * 2,
                    "seed": [seed] * 4,
                    "eval_seq_len": [8, 16, 8, 16],
                    "score": [0.9, 0.8 - seed / 10, 0.9, -0.3],
                }
            )
        )
    settings = SparseAveragingSettings(
        seq_lens=tuple(lens), q_values=(1, 2), length_task=(8, 2, 2), factors=(1, 2)
    )
    tables = {name: StudyTable.concat(parts) for name, parts in tables.items()}
    return ExperimentResult("qsa", settings.to_json(), tables)


def test_laws_and_growth_per_seed():
    res = _result([[4, 8, 12], [4, math.nan, 12]])
    head = headline(res.seed(0))
    assert head["attention_log_law_b"] == pytest.approx(4.0) and head["attention_log_law_r2"] == 1
    assert head["attention_width_growth"] == 3.0
    assert math.isnan(head["fcn_power_law_c"])  # the FCN: 1 width
    assert math.isnan(headline(res.seed(1))["attention_log_law_b"])  # widths at 2 lengths
    assert headline(res.seed(1))["attention_width_growth"] == 3.0
    assert headline(res.seed(1))["transfer_selector_sts_q_floor_ratio"] == pytest.approx(1.24)


def test_figure_panels_bands_and_laws():
    res = _result([[4, 8, 12 + 4 * s] for s in range(3)])
    fig = res.plot()
    ax_n, ax_q, ax_tr, ax_len = fig.axes
    assert ax_n.get_xlabel() == "positions N (log scale)"
    assert ax_q.get_xlabel() == "subset size q (log scale)"
    assert ax_len.get_xlabel() == "evaluation positions N' (log scale)"
    # Widths against N: the median of the seeds' laws over the N they were fitted on (4 to
    # 16; b = 4, 6, 8 -> 6), none for the FCN (one width); the medians 4, 8, 16 with min-max
    # error bars (12 to 20 at 16).
    (law,) = [ln for ln in ax_n.lines if "log2(N)" in ln.get_label()]
    assert (law.get_xdata().min(), law.get_xdata().max()) == (4, 16)
    assert "-8.67 + 6 log2(N) (median of 3 fits, R^2 0.96)" in law.get_label()
    assert list(fp.line(ax_n, "attention (SPE)").get_ydata()) == [4, 8, 16]
    (segments,) = ax_n.containers[0].lines[2]
    assert segments.get_segments()[-1][:, 1].tolist() == [12, 20]
    # Against q: the floor's widths beside the medians (q = 2: 8, 9, 10 -> 9).
    assert list(fp.line(ax_q, "isotropic floor allows").get_ydata()) == [4, 8]
    assert list(fp.line(ax_q, "trained: smallest width reaching").get_ydata()) == [4, 9]
    # The transfer: median bars with min-max error bars (the first: 0.30 .. 0.32).
    assert [p.get_height() for p in ax_tr.patches] == pytest.approx([0.31, 0.32, 0.28])
    assert ax_tr.texts[0].get_text() == "0.310\n(1.24x)"
    # The length: the stochastic median at 16 (0.8, 0.7, 0.6) and both encodings' bands.
    stochastic = fp.line(ax_len, "stochastic encodings (trained at N=8)")
    assert list(stochastic.get_ydata()) == pytest.approx([0.9, 0.7])
    assert len(fp.fills(ax_len)) == 2
    plt.close(fig)


def test_summary_rows(tiny):
    rows = tiny.summary()
    assert rows == summary(tiny)
    assert rows[0] == "| qSA widths (d=2, q=2, R^2 >= 0.5) | N = 4, 8 | |"
    assert "| | minimal width, attention | 4 / 6 [4, 8] |" in rows
    assert "| | minimal width, FCN | >8 / >8 |" in rows
    assert "| | width the isotropic floor allows, q = 1, 2 | 4 / 4 |" in rows
    assert any(r.startswith("| | relative MSE, selector on qSA | 0.4") for r in rows)
    assert rows[-3] == "| qSA length (trained at N=8, q=2, m=8) | R^2 at N' = 8, 16 | |"
    assert not any("log2(N)" in r for r in rows)  # no law at 2 lengths
    hand = _result([[4, 8, 12 + 4 * s] for s in range(3)])
    assert (
        "| | attention: w = a + b log2(N), per seed | a -8.67 [-13.3, -4], b 6 [4, 8]"
        in "".join(hand.summary())
    )


# -- settings refused by name, before any work -----------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"target_r2": 1.0}, ValueError, "target_r2"),
        ({"seq_lens": ()}, ValueError, "seq_lens"),
        ({"seq_lens": (8, 4)}, ValueError, "seq_lens"),
        ({"factors": ()}, ValueError, "factors"),
        ({"q_values": ()}, ValueError, "q_values"),
        ({"q_values": (1, 99)}, ValueError, "n_selected"),
        ({"q_widths": (4, 0)}, ValueError, "q_widths"),
        ({"transfer_task": (8, 2)}, ValueError, "transfer_task"),
        ({"length_task": (8, 2, 2, 1)}, ValueError, "length_task must be"),
        ({"q_steps": "many"}, ValueError, "q_steps"),
        ({"n_val": 0}, ValueError, "n_val"),
        ({"fcn_max_seq_len": 0}, ValueError, "fcn_max_seq_len"),
        ({"widths": {"attention": (4,)}}, ValueError, "widths"),
        ({"n_steps": {"fcn": 0}}, ValueError, "n_steps"),
        ({"stop_at_target": 1}, ValueError, "stop_at_target"),
        ({"transformer": SparseTokenSelector()}, ValueError, "transformer"),
        ({"fcn": FCNSelector()}, ValueError, "fcn"),
        ({"estimator": SparseTokenSelector()}, ValueError, "estimator"),
        ({"fcn": FCNAverager(learning_rate_init=-1.0)}, ValueError, "learning_rate_init"),
        ({"q_value": (1,)}, ValueError, r"\['q_value'\] are not settings of SparseAveraging"),
    ],
)
def test_bad_settings_are_refused_by_name_before_work(change, error, match, monkeypatch):
    for cls in (SparseTokenAverager, FCNAverager, SparseTokenSelector):
        monkeypatch.setattr(cls, "fit_online", lambda *a, **k: pytest.fail("a model trained"))
    with planning() as plan, pytest.raises(error, match=match):
        sparse_averaging(TINY, **change)
    assert len(plan) == 0


@pytest.mark.parametrize("name", SparseAveragingSettings.field_names())
def test_every_setting_is_checked_by_its_constraint(name):
    with planning() as plan, pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        sparse_averaging(TINY, **{name: "bad"})
    assert len(plan) == 0


def test_bad_seeds_and_settings_are_refused():
    with pytest.raises(ValueError, match="twice"):
        sparse_averaging(TINY, seeds=[1, 1])
    with pytest.raises(TypeError, match="settings must be SparseAveragingSettings"):
        sparse_averaging(InContextSettings())


# -- the settings and the record -------------------------------------------------------------
def test_presets_are_changes_from_the_quick_defaults():
    assert RECORD.settings is SparseAveragingSettings and RECORD.aliases == ("averaging",)
    assert all(type(p) is SparseAveragingSettings for p in RECORD.presets.values())
    assert RECORD.presets["quick"] == SparseAveragingSettings()
    assert TINY is RECORD.presets["tiny"] and TINY.q_seq_len == 8
    assert RECORD.presets["gpu"].transfer_steps == "auto"
    # A model left out of widths or n_steps keeps its default.
    changed = SparseAveragingSettings(widths={"fcn": (8, 16)})
    assert changed.widths == {
        "transformer": SparseAveragingSettings().widths["transformer"],
        "fcn": (8, 16),
    }
    assert all(v.startswith(("paper: ", "ours: ")) for v in PROVENANCE.values())
    assert {k for k, v in PROVENANCE.items() if v.startswith("paper")} >= {"tokens", "subsets"}


def test_a_change_reaches_its_part_only(tiny):
    res = sparse_averaging(TINY, seeds=[0], seq_lens=(4,), q_values=(1,), factors=(1,))
    assert res.tables["by_length"].unique("param_seq_len") == [4]
    assert res.tables["by_q"].unique("n_selected") == [1]
    assert res.tables["length"].unique("eval_seq_len") == [8]
    transfer = tiny.seed(0).tables["transfer"]  # trained beside seed 1: float32 rounding
    np.testing.assert_allclose(
        res.tables["transfer"]["relative_mse"], transfer["relative_mse"], rtol=1e-6
    )
    assert TINY.seq_lens == (4, 8)  # the preset is not changed


def test_plan_is_the_studies_work():
    parts = RECORD.planned_work("tiny")
    assert [p.label for p in parts][-2:] == ["length_curve: stochastic", "length_curve: fixed"]
    # Searches: 3 fits expected at the first point, 2 after; transfer and length 1 each.
    assert sum(p.fits for p in parts) == (3 + 2) * 3 + 2 + 2
