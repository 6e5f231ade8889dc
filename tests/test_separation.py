"""The width separation: the tiny run beside the floor, its result, its settings, its record."""

import json
import math

import matplotlib
import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator

from stsq_learn import FCNSelector, SparseTokenSelectionTask
from stsq_learn.experiments import (
    PRESETS,
    ExperimentResult,
    SeparationCurve,
    SeparationSettings,
    width_separation,
    width_separation_by_q,
)
from stsq_learn.experiments._registered import RECORDS
from stsq_learn.studies import StudyTable, fit_law
from stsq_learn.tasks.selection import separation as sep

matplotlib.use("Agg")

TINY = PRESETS["tiny"]["separation"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's three seeds, in one call."""
    return width_separation_by_q("tiny", seeds=3, device="cpu")


def _without_seconds(result):
    """The result's JSON less what the clock measures (the run's and each search's seconds)."""
    out = json.loads(json.dumps(result.to_dict()))
    out.pop("seconds")
    for table in out["tables"].values():
        table["columns"].pop("seconds", None)
    return out


# -- the tiny run beside the theory ------------------------------------------------------------
def test_tiny_numbers_of_three_seeds(tiny):
    head = tiny.headline()
    # The q = 2 curve: the floor allows R^2 0.5 at width 4, the transformer reaches it at
    # 4 or 8; the FCN's grid tops out at 8, short of the target at T = 8 for every seed.
    assert head["q2.T4.floor_width"] == [4.0, 4.0, 4.0]
    assert head["q2.T4.transformer_width"] == [4.0, 8.0, 4.0]
    assert head["q2.T8.transformer_width"] == [8.0, 8.0, 8.0]
    assert head["q2.T8.fcn_width"] == [8.0, 8.0, 8.0]
    assert head["q2.T8.fcn_width_is_bound"] == [1.0, 1.0, 1.0]
    assert head["q3.T8.transformer_width"] == [8.0, 8.0, 8.0]
    assert "q3.T4.fcn_width" not in head  # the q = 3 curve searches no FCN
    # The joint law a + b q log2 T through the 4 widths of seed 0 (4, 8 at q=2; 8, 8 at q=3).
    law = fit_law([4.0**2, 8.0**2, 4.0**3, 8.0**3], [4, 8, 8, 8], "log2")
    assert head["law.slope"][0] == pytest.approx(law.params["b"])
    assert head["law.intercept"][0] == pytest.approx(law.params["a"])
    assert head["law.r2"][0] == pytest.approx(law.r2)
    assert law.params["b"] == pytest.approx(12 / 17)
    # Bisections from the floor's width 4: at T=4 it passes and is the grid's smallest (one
    # fit); at T=8 it fails, and 8 passes (two).
    rows = tiny.seed(0).tables["widths"].where(curve=0, model="transformer")
    assert list(rows["n_fits"]) == [1, 2]


def test_the_measured_widths_are_at_least_the_floors(tiny):
    floor = tiny.tables["floor"]
    assert "seed" not in floor.columns  # the theory's curve: one for every seed
    assert list(floor.where(curve=0)["floor_width"]) == sep.floor_widths(
        (4, 8), 2, (4, 8), 0.5, n_samples=500
    )
    for s in tiny.seeds:
        head = tiny.seed(s).headline()
        for q, T in [(2, 4), (2, 8), (3, 4), (3, 8)]:
            floor_width = head[f"q{q}.T{T}.floor_width"][0]
            assert head[f"q{q}.T{T}.transformer_width"][0] >= floor_width


def test_a_seed_view_is_a_one_seed_run(tiny):
    one = width_separation_by_q("tiny", seeds=[2], device="cpu")
    view = tiny.seed(2)
    assert view.headline() == one.headline()
    assert _without_seconds(view)["tables"] == _without_seconds(one)["tables"]


# -- the result --------------------------------------------------------------------------------
def _drawn(fig):
    return [
        (ax.get_title(), [(line.get_label(), line.get_xydata().tolist()) for line in ax.lines])
        for ax in fig.axes
    ]


def test_result_round_trips_and_draws_the_same_figure(tiny):
    again = ExperimentResult.from_dict(json.loads(json.dumps(tiny.to_dict())))
    assert again == tiny and again.bands() == tiny.bands()
    first, second = tiny.plot(), again.plot()
    assert _drawn(first) == _drawn(second)
    left, right = first.axes[:2]
    assert left.get_title().startswith("Transformer per q") and "Both models" in right.get_title()
    assert "median over 3 seeds" in first._suptitle.get_text()
    labels = [line.get_label() for line in right.get_lines()]
    assert "FCN: not reached, > bound" in labels
    matplotlib.pyplot.close("all")


def test_summary_marks_the_fcn_bounds_and_the_laws(tiny):
    text = "\n".join(tiny.summary())
    assert "| | minimal width, transformer | 4 [4, 8] / 8 |" in text
    assert "the floor's minimal width | 4 / 4 |" in text
    # Two seeds of three find no FCN width at T = 4; none does at T = 8.
    assert "| | minimal width, fcn | 8 (2 of 3 seeds: > bound) / > 8 (not reached within 20" in text
    assert "| | transformer, measured: w = a + b q log2 T | a=2.59 [2.59, 8]" in text
    assert "floor's: w = a + b q log2 T | a=1.1, b=0.784 (R^2 0.49)" in text


def test_floor_law_is_a_plus_b_q_log2_T(tiny):
    law = sep.floor_law(tiny)
    b, a = np.polyfit([2 * 2, 2 * 3, 3 * 2, 3 * 3], [4, 4, 8, 8], 1)
    assert law.params["b"] == pytest.approx(b) and law.params["a"] == pytest.approx(a)
    one_curve = ExperimentResult(
        "separation",
        {**tiny.settings, "curves": tiny.settings["curves"][:1]},
        {"widths": tiny.tables["widths"].where(curve=0), "floor": tiny.tables["floor"]},
    )
    assert sep.floor_law(one_curve) is None  # 2 widths: too few for a law
    assert math.isnan(one_curve.seed(0).headline()["floor_law.slope"][0])


def _quick_like(transformer_q2, seeds=(0, 1)):
    """A two-seed result of the quick preset's shape, its widths given (no training)."""
    Ts, Ts3 = [4, 8, 16, 32], [16, 32, 64]
    rows = {"curve": [], "model": [], "seed": [], "param_seq_len": [], "value": [], "bound": []}

    def add(curve, model, seed, lengths, values, bounds):
        for T, v, b in zip(lengths, values, bounds):
            for name, x in zip(rows, (curve, model, seed, T, v, b)):
                rows[name].append(x)

    for k, seed in enumerate(seeds):
        add(0, "transformer", seed, Ts, transformer_q2[k], [np.nan] * 4)
        add(0, "fcn", seed, Ts, [8.0, 32.0, 128.0, np.nan], [np.nan] * 3 + [256.0])
        add(1, "transformer", seed, Ts3, [128.0, 256.0, 512.0], [np.nan] * 3)
    floor = StudyTable(
        {
            "curve": [0] * 4 + [1] * 3,
            "param_seq_len": Ts + Ts3,
            "floor_width": [8.0, 12.0, 16.0, 16.0, 128.0, 128.0, 256.0],
        }
    )
    settings = SeparationSettings().to_json()
    return ExperimentResult("separation", settings, {"widths": StudyTable(rows), "floor": floor})


def test_figure_draws_each_curves_law_over_its_own_lengths():
    fig = _quick_like([[8, 12, 16, 24], [8, 12, 16, 32]]).plot()
    left, right = fig.axes[:2]
    assert "median over 2 seeds" in fig._suptitle.get_text()
    # One law per q, the median of its seeds' laws, drawn over that q's lengths.
    laws = [line for line in left.get_lines() if "log2(T)" in line.get_label()]
    assert len(laws) == 2 and all("median of 2 fits" in line.get_label() for line in laws)
    spans = sorted((line.get_xdata().min(), line.get_xdata().max()) for line in laws)
    assert spans == [(4.0, 32.0), (16.0, 64.0)]
    labels = [line.get_label() for line in left.get_lines()]
    assert sum("the floor's minimal width" in label for label in labels) == 2
    # The right panel: both models, the FCN's lower bound at T=32, its law over 4..16.
    assert any("not reached" in line.get_label() for line in right.get_lines())
    fcn_law = [line for line in right.get_lines() if " T (median of 2" in line.get_label()]
    assert [line.get_xdata().max() for line in fcn_law] == [16.0]
    matplotlib.pyplot.close(fig)


def test_a_law_that_does_not_describe_its_points_is_not_drawn():
    # Widths that do not grow like log T (R^2 of a + b log2 T below 0.8): no law drawn.
    fig = _quick_like([[16, 4, 16, 4]], seeds=(0,)).plot()
    laws = [line for line in fig.axes[0].get_lines() if "log2(T)" in line.get_label()]
    assert len(laws) == 1  # the q = 3 curve's only
    assert laws[0].get_xdata().min() == 16.0
    matplotlib.pyplot.close(fig)


# -- one curve, a user's models and task -------------------------------------------------------
def test_width_separation_runs_one_curve():
    res = width_separation("tiny", seeds=[0], search="scan", stop_fits=False, device="cpu")
    assert [c["n_selected"] for c in res.settings["curves"]] == [2]
    assert res.settings["search"] == "scan"
    # The scan tries the grid upwards: the transformer passes at 4 at T=4 (one fit), at 8 at
    # T=8 (two); the FCN fails at 4 and 8 at T=4, and T=8 is not searched (skipped after the
    # miss, its bound carried over).
    widths = res.tables["widths"]
    transformer = widths.where(model="transformer")
    assert list(transformer["value"]) == [4.0, 8.0] and list(transformer["n_fits"]) == [1, 2]
    fcn = widths.where(model="fcn")
    assert np.isnan(fcn["value"]).all() and list(fcn["bound"]) == [8.0, 8.0]
    assert list(fcn["skipped"]) == [False, True]
    head = res.headline()
    assert head["q2.T8.fcn_width"] == [8.0] and head["q2.T8.fcn_width_is_bound"] == [1.0]
    assert math.isnan(head["law.slope"][0])  # two widths: too few for a law


def test_a_users_models_and_task_get_the_same_study():
    # Any estimator with a width: here the FCN in the transformer's place.
    fcn = FCNSelector(solver="adam", learning_rate_init=0.01, batch_size=256)
    res = width_separation("tiny", seeds=1, seq_lens=(4,), transformer=fcn, device="cpu")
    assert "FCNSelector" in res.settings["curves"][0]["transformer"]
    assert len(res.tables["widths"].where(model="transformer")) == 1
    # A user's task: its sizes stand (and are the settings' JSON); only the models of
    # widths are searched.
    task = SparseTokenSelectionTask(4, 3, 2)
    curve = SeparationCurve(
        seq_lens=(4, 8), task=task, widths={"transformer": (4, 8)}, n_steps={"transformer": 20}
    )
    res = width_separation(curve, seeds=1, target_r2=0.5, n_val=200, floor_rows=500)
    assert res.settings["curves"][0]["n_features"] == 3 and res.settings["target_r2"] == 0.5
    assert res.tables["widths"].unique("model") == ["transformer"]
    assert "q2.T8.floor_width" in res.headline()


# -- settings refused by name before any work --------------------------------------------------
class _NoOnline(BaseEstimator):
    def __init__(self, width=4):
        self.width = width

    def fit(self, X, y):
        return self


@pytest.mark.parametrize(
    ("function", "change", "match"),
    [
        (width_separation_by_q, {"search": "grid"}, "'search' parameter"),
        (width_separation_by_q, {"regime": "gridsearch"}, "'regime' parameter"),
        (width_separation_by_q, {"target_r2": 1.0}, "'target_r2' parameter"),
        (width_separation_by_q, {"n_val": 0}, "'n_val' parameter"),
        (width_separation_by_q, {"n_train": 5}, "'n_train' parameter"),
        (width_separation_by_q, {"stop_fits": 1}, "'stop_fits' parameter"),
        (width_separation_by_q, {"regime": "finite"}, "stop_fits stops online fits"),
        (width_separation_by_q, {"curves": ()}, "'curves' parameter"),
        (width_separation_by_q, {"curves": ({"label": 3},)}, r"curves\[0\]: .*'label'"),
        (width_separation_by_q, {"curves": ({"target_r2": 0.5},)}, r"curves\[0\]: .*target_r2"),
        (width_separation_by_q, {"seq_len": (4,)}, r"\['seq_len'\] are not settings"),
        (width_separation_by_q, {"seeds": [1, 1]}, "seeds"),
        (width_separation_by_q, {"n_jobs": 0}, "n_jobs"),
        (width_separation, {"seq_lens": ()}, "'seq_lens' parameter"),
        (width_separation, {"seq_lens": (8, 4)}, "'seq_lens' parameter"),
        (width_separation, {"n_features": 0}, "'n_features' parameter"),
        (width_separation, {"task": "selection"}, "'task' parameter"),
        (width_separation, {"transformer": object()}, "'transformer' parameter"),
        (width_separation, {"fcn": torch.nn.Linear(2, 2)}, "'fcn' parameter"),
        (width_separation, {"widths": {"fcn": (8, 4)}}, "'widths' parameter"),
        (width_separation, {"widths": {"mlp": (4,)}}, "'widths' parameter"),
        (width_separation, {"widths": {}}, "widths must give the grid of at least one model"),
        (width_separation, {"n_steps": {"fcn": 0}}, "'n_steps' parameter"),
        (width_separation, {"n_steps": {"transformer": 20}}, "n_steps must give the steps"),
        (width_separation, {"max_seq_len": {"fcn": 0}}, "'max_seq_len' parameter"),
        (width_separation, {"floor_rows": 0}, "'floor_rows' parameter"),
        (width_separation, {"fcn": _NoOnline()}, r"fcn \(_NoOnline\) has no fit"),
        (width_separation, {"label": 3}, "'label' parameter"),
        (
            width_separation,
            {"task": SparseTokenSelectionTask(4, 3, 2), "n_features": 2},
            "n_features=2 differs from the task's n_features=3",
        ),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(monkeypatch, function, change, match):
    def no_work(*args, **kwargs):
        raise AssertionError("work ran before the settings were checked")

    monkeypatch.setattr(sep, "minimal_width", no_work)
    monkeypatch.setattr(sep, "floor_widths", no_work)
    with pytest.raises((ValueError, TypeError), match=match):
        function("tiny", **change)


def test_a_model_without_width_is_refused():
    from sklearn.linear_model import Ridge

    with pytest.raises(TypeError, match="fcn must have a 'width' parameter, got Ridge"):
        SeparationCurve(fcn=Ridge())


# -- the record --------------------------------------------------------------------------------
def test_the_plan_runs_no_fit_and_no_floor(monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the plan simulated the floor")

    monkeypatch.setattr(sep, "floor_widths", no_work)
    work = RECORDS["separation"].planned_work("tiny")
    labels = [part.label for part in work]
    assert labels[:4] == [f"search width: {m} seq_len={T}" for m in sep.MODELS for T in (4, 8)]
    assert len(work) == 6  # the q = 3 curve: the transformer at T = 4 and 8


def test_presets_set_solver_and_rates():
    assert PRESETS["quick"]["separation"] == SeparationSettings()
    for size in ("tiny", "quick", "full", "gpu"):
        for curve in PRESETS[size]["separation"].curves:
            params = curve.transformer.get_params()
            assert params["solver"] == "sgd" and params["learning_rate"] == "constant"
            assert params["batch_size"] == 256
            plain = curve.label.startswith("plain GD, the paper's algorithm")
            assert plain == (params["token_block_rate"] == 1.0)
            params = curve.fcn.get_params()
            assert params["solver"] == "adam" and params["learning_rate"] in ("constant", "cosine")
    full = PRESETS["full"]["separation"].curves
    assert [max(c.seq_lens) for c in full] == [256, 256]
    assert [c.searched() for c in full] == [("transformer", "fcn"), ("transformer",)]
    assert full[0].lengths("fcn") == [4, 8, 16, 32, 64]
    assert [c.sizes() for c in PRESETS["gpu"]["separation"].curves] == [(2, 2), (8, 3)]


def test_provenance_says_paper_or_ours():
    provenance = RECORDS["separation"].provenance
    assert all(v.startswith(("paper: ", "ours: ")) for v in provenance.values())
    paper = {k for k, v in provenance.items() if v.startswith("paper: ")}
    assert paper == {"batch_size", "tokens", "subsets", "transformer_width_law", "fcn_width_law"}
