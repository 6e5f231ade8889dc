"""The width separation on the study tools: the searches, the seeds, the laws, the figure."""

import json

import matplotlib
import numpy as np
import pytest
import torch

from stsq_learn import FCNSelector, SparseTokenSelectionTask, SparseTokenSelector
from stsq_learn.experiments import (
    PRESETS,
    SeparationCurve,
    SeparationResult,
    WidthSeparationSettings,
    width_separation,
)
from stsq_learn.experiments._records import separation as record
from stsq_learn.studies import fit_law
from stsq_learn.tasks.selection import separation as sep
from stsq_learn.tasks.selection.separation import (
    SeparationByQResult,
    SeparationSettings,
    floor_widths,
    joint_law,
    width_separation_by_q,
)

matplotlib.use("Agg")

TINY = PRESETS["tiny"]["separation"]
# One curve of the tiny preset's first (q = 2) as width_separation's settings.
CURVE = dict(
    seq_lens=(4, 8),
    n_features=2,
    n_selected=2,
    widths={"transformer": (4, 8), "fcn": (4, 8)},
    n_steps={"transformer": 20, "fcn": 20},
    n_val=200,
    target_r2=0.5,
    floor_rows=500,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def seeds3():
    return width_separation_by_q(TINY, device="cpu", seeds=[0, 1, 2])


def _no_seconds(data):
    if isinstance(data, dict):
        return {k: _no_seconds(v) for k, v in data.items() if k != "seconds"}
    if isinstance(data, list):
        return [_no_seconds(v) for v in data]
    return data


def test_tiny_numbers_of_three_seeds(seeds3):
    heads = [record.headline(r) for r in seeds3]
    # The q = 2 curve: the floor allows R^2 0.5 at width 4, the transformer reaches it at
    # 4 or 8; the FCN's grid tops out at 8, short of the target at T = 8 for every seed.
    assert [h["q2.T4.floor_width"] for h in heads] == [4.0, 4.0, 4.0]
    assert [h["q2.T4.transformer_width"] for h in heads] == [4.0, 8.0, 4.0]
    assert [h["q2.T8.transformer_width"] for h in heads] == [8.0, 8.0, 8.0]
    assert [h["q2.T8.fcn_width"] for h in heads] == [8.0, 8.0, 8.0]
    assert [h.get("q2.T8.fcn_width_is_bound") for h in heads] == [1.0, 1.0, 1.0]
    assert [h["q3.T8.transformer_width"] for h in heads] == [8.0, 8.0, 8.0]
    # The joint law a + b q log2 T through the 4 widths of seed 0 (4, 8 at q=2; 8, 8 at q=3).
    x = [4.0**2, 8.0**2, 4.0**3, 8.0**3]
    law = fit_law(x, [4, 8, 8, 8], "log2")
    assert heads[0]["law.slope"] == pytest.approx(law.params["b"])
    assert heads[0]["law.intercept"] == pytest.approx(law.params["a"])
    assert heads[0]["law.r2"] == pytest.approx(law.r2)
    assert law.params["b"] == pytest.approx(12 / 17)
    # Bisections from the floor's width 4: at T=4 it passes and is the grid's smallest (one
    # fit); at T=8 it fails, and 8 passes (two).
    table = seeds3[0].curves[0].table
    assert list(table.where(model="transformer")["n_fits"]) == [1, 2]
    assert set(table["seed"]) == {0}


def test_one_seed_is_the_same_as_that_seed_in_a_list(seeds3):
    one = width_separation_by_q(TINY, device="cpu", random_state=2)
    assert isinstance(one, SeparationByQResult)
    assert _no_seconds(one.to_dict()) == _no_seconds(seeds3[2].to_dict())
    with pytest.raises(ValueError, match=r"random_state .* or seeds .*, not both"):
        width_separation_by_q(TINY, random_state=1, seeds=[1])
    with pytest.raises(ValueError, match=r"seeds holds 1 twice"):
        width_separation_by_q(TINY, seeds=[1, 1])
    with pytest.raises(TypeError, match="seeds must be a list or tuple"):
        width_separation_by_q(TINY, seeds=3)


def test_to_dict_round_trip(seeds3):
    data = json.loads(json.dumps(seeds3[1].to_dict()))
    again = SeparationByQResult.from_dict(data)
    assert again.to_dict() == seeds3[1].to_dict()
    curve = again.curves[0]
    assert curve.minimal_width == seeds3[1].curves[0].minimal_width
    assert data["curves"][0]["table"]["columns"]["model"][0] == "transformer"
    assert data["law"]["name"] == "log2"


def test_width_separation_one_curve_and_its_laws():
    res = width_separation(**CURVE, device="cpu", random_state=0, search="scan")
    assert isinstance(res, SeparationResult)
    assert res.seq_lens == [4, 8] and res.config["search"] == "scan"
    # The scan tries the grid upwards: the transformer passes at 4, the FCN fails at 4 and 8
    # at T=4, and T=8 is not searched (skipped after the miss, its bound carried over).
    assert res.minimal_width == {"transformer": [4, 4], "fcn": [None, None]}
    assert res.lower_bound["fcn"] == [8, 8] and res.width_text("fcn") == ["> 8", "> 8"]
    assert list(res.table.where(model="fcn")["skipped"]) == [False, True]
    assert res.width_ratio() == [None, None]
    assert res.floor_width == floor_widths((4, 8), 2, (4, 8), 0.5, n_samples=500)
    # Two widths per model: too few for a law (3 points are the least).
    assert res.laws == {"transformer": None, "fcn": None}
    again = SeparationResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert again.to_dict() == res.to_dict()


def test_seeds_list_of_width_separation_matches_one_by_one():
    both = width_separation(**CURVE, device="cpu", seeds=(3, 5))
    alone = width_separation(**CURVE, device="cpu", random_state=5)
    assert _no_seconds(both[1].to_dict()) == _no_seconds(alone.to_dict())


def test_a_users_models_get_the_same_study():
    # Any estimator with a width: here the FCN in the transformer's place.
    res = width_separation(
        **{**CURVE, "seq_lens": (4,)},
        transformer=FCNSelector(solver="adam", learning_rate_init=0.01, batch_size=256),
        device="cpu",
        random_state=0,
    )
    assert "FCNSelector" in res.config["estimators"]["transformer"]
    assert len(res.table.where(model="transformer")) == 1
    # A user's task: its fields stand; a task field given twice must agree.
    task = SparseTokenSelectionTask(4, 3, 2)
    res = width_separation(**{**CURVE, "n_features": None}, task=task, max_seq_len={"fcn": 1})
    assert res.config["n_features"] == 3 and not res.searched("fcn")
    with pytest.raises(ValueError, match=r"n_features=2 differs from the task's n_features=3"):
        width_separation(**CURVE, task=task)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"search": "grid"}, ValueError, "search must be 'bracket', 'bisect' or 'scan', got"),
        ({"regime": "gridsearch"}, ValueError, "regime must be 'online' or 'finite'"),
        ({"target_r2": 1.0}, ValueError, "target_r2 must lie strictly between 0 and 1"),
        ({"seq_lens": ()}, ValueError, "seq_lens must hold at least one length"),
        ({"widths": {"fcn": (8, 4)}}, ValueError, r"widths\['fcn'\] must be increasing"),
        ({"widths": {"mlp": (4,)}}, ValueError, r"widths has unknown models \['mlp'\]"),
        ({"n_steps": {"fcn": 0}}, ValueError, r"n_steps\['fcn'\] must be an integer >= 1"),
        ({"floor_rows": 0}, ValueError, "floor_rows must be an integer >= 1, got 0"),
        ({"transformer": object()}, TypeError, "transformer must be a scikit-learn estimator"),
        ({"fcn": torch.nn.Linear(2, 2)}, TypeError, "fcn must be a scikit-learn estimator"),
        ({"stop_fits": True, "regime": "finite"}, ValueError, "stop_fits stops online fits"),
        ({"seq_len": (4,)}, ValueError, r"\['seq_len'\] are not settings"),
    ],
)
def test_bad_settings_are_refused_by_name_before_any_fit(monkeypatch, change, error, match):
    def no_work(*args, **kwargs):
        raise AssertionError("a fit ran before the settings were checked")

    monkeypatch.setattr(sep, "minimal_width", no_work)
    monkeypatch.setattr(sep, "floor_widths", no_work)
    with pytest.raises(error, match=match):
        width_separation(**{**CURVE, **change})


def test_a_model_without_width_is_refused():
    from sklearn.linear_model import Ridge

    with pytest.raises(TypeError, match="fcn must have a 'width' parameter, got Ridge"):
        width_separation(**CURVE, fcn=Ridge())


@pytest.mark.parametrize(
    "curves, match",
    [
        ((), "non-empty sequence"),
        ({"label": "x"}, "non-empty sequence"),
        (({"label": 3},), r"curves\[0\] must have a str 'label', got 3"),
        (({"label": "x", "target_r2": 0.5},), r"\['target_r2'\] are not settings of Separ"),
    ],
)
def test_width_separation_by_q_rejects_bad_curves(curves, match):
    with pytest.raises(ValueError, match=match):
        SeparationSettings(curves=curves)


def test_a_bad_curve_fails_before_any_curve_trains(monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("a curve trained before every curve was checked")

    monkeypatch.setattr(sep, "minimal_width", no_work)
    curves = (TINY.curves[0], TINY.curves[1].replace(widths={"transformer": (0, 8)}))
    with pytest.raises(ValueError, match=r"widths\['transformer'\]\[i\] must be"):
        width_separation_by_q(TINY, curves=curves)


def test_headline_and_summary_mark_the_fcn_bounds(seeds3):
    res = seeds3[0]
    head = record.headline(res)
    assert all(isinstance(v, float) for v in head.values())
    assert head["q2.T8.fcn_width"] == 8.0 and head["q2.T8.fcn_width_is_bound"] == 1.0
    assert "q3.T4.fcn_width" not in head  # the q = 3 curve searches no FCN
    rows = []
    record.summary_rows(rows, res)
    text = "\n".join(rows)
    assert "the floor's minimal width | 4 / 4 |" in text
    assert "> 8 (not reached within 20 steps)" in text and "w = a + b q log2 T" in text


def test_work_counts_the_bisections():
    work = record.work(TINY)
    # Per curve: 3 + 2 transformer fits; the FCN's grid (4, 8) is below 4 T d at T=4 on
    # the first curve (its two top widths, then no search); no FCN on the second.
    assert sum(p.fits for p in work) == 12
    assert [p.label for p in work][-2:] == [
        "separation q=3: transformer T=4",
        "separation q=3: transformer T=8",
    ]
    assert all(p.steps == 15 for p in work)  # 3/4 of the 20 steps: fits stop at the target


def test_joint_law_is_a_plus_b_q_log2_T(seeds3):
    curves = seeds3[0].curves
    law = joint_law(curves, lambda c: c.floor_width)
    ws = [4, 4, 8, 8]
    qs_logs = [2 * 2, 2 * 3, 3 * 2, 3 * 3]
    b, a = np.polyfit(qs_logs, ws, 1)
    assert law.params["b"] == pytest.approx(b) and law.params["a"] == pytest.approx(a)
    assert joint_law(curves[:1], lambda c: c.floor_width) is None  # 2 points


def _quick_like_result(widths_q2, floors_q2, seed):
    """A one-seed result with the widths given (no training: the figure's inputs)."""
    from stsq_learn.studies import StudyTable

    Ts = [4, 8, 16, 32]
    table = StudyTable(
        {
            "model": ["transformer"] * 4 + ["fcn"] * 4,
            "seed": [seed] * 8,
            "param_seq_len": Ts * 2,
            "value": [float(w) for w in widths_q2] + [8.0, 32.0, 128.0, np.nan],
            "bound": [np.nan] * 7 + [256.0],
        }
    )
    cfg = {"n_features": 2, "n_selected": 2, "target_r2": 0.9, "n_steps": {"fcn": 500}}
    q2 = SeparationResult(cfg, Ts, table, floor_width=floors_q2)
    table3 = StudyTable(
        {
            "model": ["transformer"] * 3,
            "seed": [seed] * 3,
            "param_seq_len": [16, 32, 64],
            "value": [128.0, 256.0, 512.0],
            "bound": [np.nan] * 3,
        }
    )
    cfg3 = {"n_features": 4, "n_selected": 3, "target_r2": 0.9}
    q3 = SeparationResult(cfg3, [16, 32, 64], table3, floor_width=[128, 128, 256])
    return SeparationByQResult([q2, q3], ["plain GD", "paced SGD"], None, None)


def test_figure_draws_bands_and_each_law_only_over_its_own_q():
    results = [
        _quick_like_result([8, 12, 16, 24], [8, 12, 16, 16], 0),
        _quick_like_result([8, 12, 16, 32], [8, 12, 16, 16], 1),
    ]
    fig = SeparationByQResult.plot_bands(results)
    left, right = fig.axes[:2]
    assert "per q" in left.get_title() and "Both models" in right.get_title()
    assert "median over 2 seeds" in fig._suptitle.get_text()
    labels = [line.get_label() for line in left.get_lines()]
    # One law per q, fitted to that q's widths only, drawn over that q's lengths.
    laws = [line for line in left.get_lines() if "log2(T)" in line.get_label()]
    assert len(laws) == 2
    spans = sorted((line.get_xdata().min(), line.get_xdata().max()) for line in laws)
    assert spans == [(4.0, 32.0), (16.0, 64.0)]
    assert sum("the floor's minimal width" in label for label in labels) == 2
    # The right panel: both models, the FCN's lower bound at T=32, its law over 4..16.
    right_labels = [line.get_label() for line in right.get_lines()]
    assert any("not reached" in label for label in right_labels)
    fcn_law = [line for line in right.get_lines() if line.get_label().endswith(")")]
    assert any(line.get_xdata().max() == 16.0 for line in fcn_law)
    matplotlib.pyplot.close(fig)


def test_a_law_that_does_not_describe_its_points_is_not_drawn():
    # Widths that do not grow like log T (R^2 of a + b log2 T below 0.8): no law drawn.
    results = [_quick_like_result([16, 4, 16, 4], [8, 12, 16, 16], 0)]
    fig = results[0].plot()
    laws = [line for line in fig.axes[0].get_lines() if "log2(T)" in line.get_label()]
    assert len(laws) == 1  # the q = 3 curve's only
    assert laws[0].get_xdata().min() == 16.0
    matplotlib.pyplot.close(fig)


def test_plot_bands_refuses_other_results(seeds3):
    with pytest.raises(TypeError, match="results must be a non-empty sequence of Separa"):
        SeparationByQResult.plot_bands([seeds3[0], {"curves": []}])
    short = _quick_like_result([8, 12, 16, 24], [8, 12, 16, 16], 0)
    with pytest.raises(ValueError, match=r"results\[1\] searched other lengths"):
        SeparationByQResult.plot_bands([seeds3[0], short])


def test_settings_classes_and_presets():
    assert type(TINY) is SeparationSettings
    assert all(type(curve) is SeparationCurve for curve in TINY.curves)
    as_dict = TINY.replace(curves=(dict(TINY.curves[1]),))
    assert type(as_dict.curves[0]) is SeparationCurve
    assert WidthSeparationSettings().search == "bracket"
    for size in ("tiny", "quick", "full", "gpu"):
        for curve in PRESETS[size]["separation"]["curves"]:
            params = curve["transformer"].get_params()
            assert params["solver"] == "sgd" and params["batch_size"] == 256
            plain = curve["label"].startswith("plain GD, the paper's algorithm")
            assert plain == (params["token_block_rate"] == 1.0)
    assert isinstance(TINY.curves[0].transformer, SparseTokenSelector)


def test_provenance_says_paper_or_ours():
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    paper = {k for k, v in record.PROVENANCE.items() if v.startswith("paper: ")}
    assert paper == {"batch_size", "tokens", "subsets", "transformer_width_law", "fcn_width_law"}
