"""The width separation by q: fits that stop at their target, bisection, the floor's widths."""

import copy
import json
import warnings

import figure_parts as fp
import joblib
import matplotlib
import numpy as np
import pytest
import torch
from sklearn.base import clone

from stsq_learn import SparseTokenSelectionTask, SparseTokenSelector, isotropic_floor
from stsq_learn.experiments import (
    PRESETS,
    SeparationByQResult,
    SeparationCurve,
    SeparationSettings,
    width_separation_by_q,
)
from stsq_learn.experiments import _width_search as ws
from stsq_learn.experiments._records import separation as record
from stsq_learn.experiments._width_search import (
    StopAtTarget,
    floor_widths,
    joint_law,
    search_bisect,
)

matplotlib.use("Agg")

TINY = PRESETS["tiny"]["separation"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def by_q():
    return width_separation_by_q(**TINY, device="cpu", random_state=0)


def _selector(**kw):
    params = dict(
        width=8,
        solver="sgd",
        learning_rate="constant",
        learning_rate_init=3.0,
        token_block_rate=1.0,
        batch_size=64,
        device="cpu",
        random_state=0,
    )
    return SparseTokenSelector(**{**params, **kw})


def _rows():
    task = SparseTokenSelectionTask(4, 2, 2)
    X, y = task.sample(200, random_state=1)
    return task, X, y


def test_stop_at_target_stops_at_the_first_check_that_reaches_it():
    task, X, y = _rows()
    est = _selector()
    stop = StopAtTarget(clone(est), task, X, y, target=0.2, every=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "interrupted" warning: the stop is recorded
        est.set_params(callbacks=[stop]).fit_online(task, n_steps=200)
    assert stop.stopped_at_ is not None and stop.stopped_at_ % 5 == 0
    assert est.n_iter_ == stop.stopped_at_ == len(est.loss_curve_)
    steps, scores = zip(*stop.checks_)
    assert list(steps) == list(range(5, stop.stopped_at_ + 1, 5))
    assert all(s < 0.2 for s in scores[:-1]) and scores[-1] >= 0.2
    # The score at the stop is the fitted model's own score on those rows, exactly.
    assert est.score(X, y) == scores[-1]
    assert est.net_.history[-1]["stop_reason"] == "target_reached"


def test_stop_at_target_never_reached_changes_nothing():
    task, X, y = _rows()
    plain = _selector().fit_online(task, n_steps=30)
    stop = StopAtTarget(clone(_selector()), task, X, y, target=2.0, every=7)
    watched = _selector(callbacks=[stop]).fit_online(task, n_steps=30)
    assert stop.stopped_at_ is None and [s for s, _ in stop.checks_] == [7, 14, 21, 28]
    assert watched.n_iter_ == 30
    np.testing.assert_array_equal(watched.key_query_, plain.key_query_)
    assert watched.score(X, y) == plain.score(X, y)


def test_stop_at_target_needs_an_integer_seed():
    task, X, y = _rows()
    est = _selector(random_state=None)
    stop = StopAtTarget(clone(est), task, X, y, target=0.5)
    with pytest.raises(ValueError, match=r"integer random_state.*got random_state=None"):
        est.set_params(callbacks=[stop]).fit_online(task, n_steps=3)


@pytest.mark.parametrize("threshold", [0, 1, 3, 5, 6, 7])  # 7: no width passes
@pytest.mark.parametrize("start", range(7))
def test_search_bisect_confirms_the_bracket(monkeypatch, threshold, start):
    grid = [2, 3, 4, 6, 8, 12, 16]
    tried = []

    def fake(estimator, width, task, n_steps, X_val, y_val, target=None, **_):
        tried.append(width)
        return (1.0 if grid.index(width) >= threshold else 0.0), n_steps

    monkeypatch.setattr(ws, "fit_and_score", fake)
    task = SparseTokenSelectionTask(4, 2, 2)
    scores, steps = search_bisect(None, task, grid, start, 9, 10, 0.5, 0, False, "t")
    assert tried[0] == grid[start] and len(tried) == len(set(tried))
    assert set(steps) == set(scores) and set(steps.values()) == {9}
    passed = sorted(w for w, s in scores.items() if s >= 0.5)
    if threshold < len(grid):
        assert passed[0] == grid[threshold]  # the minimal width, found
        if threshold > 0:
            assert scores[grid[threshold - 1]] == 0.0  # and its neighbour below, failing
    else:
        assert not passed and grid[-1] in scores  # the grid's top tried: a lower bound
    assert len(tried) <= 2 * int(np.ceil(np.log2(len(grid)))) + 1


@pytest.mark.parametrize("search", ["online", "bracket", "bisect"])
def test_searches_on_joblibs_backend_give_the_sequential_result(search):
    # The widths go to the active backend (here two threads) in batches; those past the
    # stopping one are dropped, so the scores found are the sequential search's.
    task = SparseTokenSelectionTask(4, 2, 2)
    est = SparseTokenSelector(solver="adam", learning_rate_init=0.1, random_state=0)
    grid = [2, 4, 8, 16]

    def run(parallel):
        if search == "online":
            return ws.search_online(est, task, grid, 30, 200, 0.5, True, 0, False, "t", parallel)
        if search == "bracket":
            return ws.search_bracket(est, task, grid, 1, 30, 200, 0.5, 0, False, "t", parallel)
        return ws.search_bisect(est, task, grid, 1, 30, 200, 0.5, 0, False, "t", parallel=parallel)

    with joblib.parallel_config(backend="threading", n_jobs=2):
        assert run(True) == run(False)


def test_floor_widths_is_the_smallest_width_of_the_grid_the_floor_allows():
    grid = (8, 16, 32, 64, 128, 256)
    got = floor_widths((16, 64), 3, grid, 0.85, n_samples=1000, random_state=0)
    for T, w in zip((16, 64), got):
        allows = [
            1 - isotropic_floor(T, 3, m, n_samples=1000, random_state=0).relative_mse >= 0.85
            for m in grid
        ]
        assert w == grid[allows.index(True)]
    assert floor_widths((64,), 3, (8, 16), 0.99, n_samples=500) == [None]


def test_width_separation_by_q_structure(by_q):
    res = by_q
    assert [c.config["n_selected"] for c in res.curves] == [2, 3]
    assert [c.config["n_features"] for c in res.curves] == [2, 4]
    assert res.labels[0].startswith("plain GD, the paper's algorithm")
    assert res.labels[1].startswith("SGD, ours")
    for curve in res.curves:
        assert curve.config["search"] == "bisect" and curve.config["stop_fits"] is True
        assert len(curve.floor_width) == len(curve.seq_lens)
        for T, w in zip(curve.seq_lens, curve.minimal_width["transformer"]):
            scores = curve.scores["transformer"][str(T)]
            if w is not None:  # passes, and its grid neighbour below was trained and failed
                grid = curve.config["widths"]["transformer"]
                assert scores[str(w)] >= 0.5
                if grid.index(w) > 0:
                    assert scores[str(grid[grid.index(w) - 1])] < 0.5
            assert set(curve.steps_run["transformer"][str(T)]) == set(scores)
    # The second curve searched no FCN.
    assert res.curves[1].scores["fcn"] == {"4": {}, "8": {}}
    d = json.loads(json.dumps(res.to_dict()))
    assert set(d) == {"curves", "labels", "law", "floor_law", "seconds"}
    fig = res.plot()
    assert len(fig.axes) == 2 and all(ax.get_legend() is not None for ax in fig.axes)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    # Long labels are wrapped to stay within the panel.
    assert all(len(line) <= 44 for t in labels for line in t.split("\n"))
    assert any("not reached within 20 steps (no width" in t.replace("\n", " ") for t in labels)
    matplotlib.pyplot.close(fig)


def test_headline_and_summary_mark_the_fcn_bounds(by_q):
    head = record.headline(by_q)
    assert all(isinstance(v, float) for v in head.values())
    assert head["q2.T4.floor_width"] == float(by_q.curves[0].floor_width[0])
    assert head["q3.T8.transformer_width"] == float(by_q.curves[1].minimal_width["transformer"][1])
    fcn = by_q.curves[0]
    for i, T in enumerate(fcn.seq_lens):
        if fcn.minimal_width["fcn"][i] is None and fcn.lower_bound["fcn"][i] is not None:
            assert head[f"q2.T{T}.fcn_width"] == float(fcn.lower_bound["fcn"][i])
            assert head[f"q2.T{T}.fcn_width_is_bound"] == 1.0
    assert {"law.slope", "law.r2", "floor_law.slope"} <= set(head)
    rows = []
    record.summary_rows(rows, by_q)
    text = "\n".join(rows)
    assert "the floor's minimal width" in text and "w = a + b q log2 T" in text
    assert "(not reached within 20 steps)" in text


def test_provenance_says_paper_or_ours():
    assert all(v.startswith(("paper: ", "ours: ")) for v in record.PROVENANCE.values())
    paper = {k for k, v in record.PROVENANCE.items() if v.startswith("paper: ")}
    assert paper == {"batch_size", "tokens", "subsets", "transformer_width_law", "fcn_width_law"}


def test_presets_train_the_transformer_as_labelled():
    for size in ("tiny", "quick", "full", "gpu"):
        for curve in PRESETS[size]["separation"]["curves"]:
            params = curve["transformer"].get_params()
            assert params["solver"] == "sgd" and params["learning_rate"] == "constant"
            assert params["batch_size"] == 256
            plain = curve["label"].startswith("plain GD, the paper's algorithm")
            assert plain == (params["token_block_rate"] == 1.0)
    quick = PRESETS["quick"]["separation"]["curves"]
    assert [c["n_selected"] for c in quick] == [2, 3] and quick[1]["n_features"] > 2


def test_work_counts_the_bisections():
    work = record.work(TINY)
    # Per curve: 3 + 2 transformer fits; the FCN's grid (4, 8) is below 4 T d at T=4 on
    # the first curve (its two top widths, then no search); no FCN on the second.
    assert sum(p.fits for p in work) == 12
    assert [p.label for p in work][-2:] == [
        "separation q=3: transformer T=4",
        "separation q=3: transformer T=8",
    ]


@pytest.mark.parametrize(
    "curves, match",
    [
        ((), "non-empty sequence"),
        ({"label": "x"}, "non-empty sequence"),
        ("curves", r"curves must be a non-empty sequence"),
        (
            ({"seq_lens": (4,)},),
            r"curves\[0\]: SeparationCurve: missing required settings \['label'\]",
        ),
        (({"label": 3},), r"curves\[0\] must have a str 'label', got 3"),
        (
            (TINY.curves[0], {"label": "x", "seq_len": (4,)}),
            r"curves\[1\]: \['seq_len'\] are not settings of SeparationCurve",
        ),
        # The target and the search are the experiment's, the same for every curve.
        (({"label": "x", "target_r2": 0.5},), r"\['target_r2'\] are not settings of Separ"),
    ],
)
def test_width_separation_by_q_rejects_bad_curves(curves, match):
    with pytest.raises(ValueError, match=match):
        width_separation_by_q(curves=curves)
    with pytest.raises(ValueError, match=match):  # where the settings are written
        SeparationSettings(curves=curves)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"widths": {"transformer": (0, 8)}}, r"widths\['transformer'\]\[i\] must be"),
        ({"seq_lens": ()}, "seq_lens must hold at least one length"),
        ({"floor_rows": 0}, "floor_rows must be an integer >= 1, got 0"),
    ],
)
def test_a_bad_curve_fails_before_any_curve_trains(monkeypatch, change, match):
    from stsq_learn.experiments import _separation

    def no_work(*args, **kwargs):
        raise AssertionError("a curve trained before every curve was checked")

    monkeypatch.setattr(_separation, "_search_all", no_work)
    monkeypatch.setattr(_separation, "floor_widths", no_work)
    curves = (TINY.curves[0], TINY.curves[1].replace(**change))
    with pytest.raises(ValueError, match=match):
        width_separation_by_q(TINY, curves=curves)


def test_a_curve_that_is_no_mapping_is_refused_by_type():
    with pytest.raises(
        TypeError, match=r"curves\[1\]: settings must be SeparationCurve.*got int: 3"
    ):
        SeparationSettings(curves=(TINY.curves[0], 3))
    with pytest.raises(TypeError, match=r"curves\[0\]: settings must be SeparationCurve \(or a"):
        SeparationSettings(curves=(TINY,))  # the experiment's settings, not a curve's


def test_separation_takes_its_settings_and_changes_to_them():
    assert type(TINY) is SeparationSettings
    assert all(type(curve) is SeparationCurve for curve in TINY.curves)
    # A curve given as a mapping is read as a SeparationCurve.
    as_dict = TINY.replace(curves=(dict(TINY.curves[1]),))
    assert as_dict.curves == (TINY.curves[1],) and type(as_dict.curves[0]) is SeparationCurve
    one = TINY.curves[1].replace(seq_lens=(4,), widths={"transformer": (8,)})
    res = width_separation_by_q(TINY, curves=(one,), n_val=50, device="cpu")
    assert res.labels == [one.label] and res.curves[0].seq_lens == [4]
    cfg = res.curves[0].config
    assert cfg["n_val"] == 50 and cfg["target_r2"] == 0.5 and cfg["search"] == "bisect"
    assert cfg["widths"]["transformer"] == [8] and cfg["stop_fits"] is True
    assert TINY.n_val == 200 and len(TINY.curves) == 2  # the preset is as it was
    with pytest.raises(ValueError, match=r"\['n_vals'\] are not settings of SeparationSettings"):
        width_separation_by_q(TINY, n_vals=50)
    with pytest.raises(TypeError, match="got tuple"):  # the old positional curves
        width_separation_by_q(TINY.curves)


def _seeds_of(by_q):
    """Three results of one experiment: ``by_q`` and two copies with other widths."""
    second, third = copy.deepcopy(by_q), copy.deepcopy(by_q)
    second.curves[0].minimal_width["transformer"] = [8, None]
    second.curves[0].lower_bound["transformer"] = [None, 16]
    third.curves[0].minimal_width["transformer"] = [16, 16]
    third.curves[1].floor_width = [4, 16]
    return [by_q, second, third]


def test_separation_plot_bands_median_and_min_max_over_seeds(by_q):
    results = _seeds_of(by_q)
    one = by_q.plot()
    fig = SeparationByQResult.plot_bands(results)
    assert len(fig.axes) == len(one.axes) == 2
    assert fp.suptitle(fig) == ("Width separation by q, median over 3 seeds, error bars: min-max")
    assert fig.axes[1].get_title() == one.axes[1].get_title() + ", the first seed"
    ax = fig.axes[0]
    # q=2: widths (4, 8, 16) at T=4; (8, 16) at T=8, the second seed found none there.
    measured = fp.bars(ax, f"q=2, d=2: measured ({by_q.labels[0]})")
    assert measured == {4.0: (8.0, 4.0, 16.0), 8.0: (12.0, 8.0, 16.0)}
    assert fp.bars(ax, "q=3: the floor's minimal width (isotropic_floor)") == {
        4.0: (8.0, 4.0, 8.0),
        8.0: (8.0, 8.0, 16.0),
    }
    # Every seed's lower bound, named once in the legend.
    bounds = [ln for ln in ax.get_lines() if ln.get_marker() == "^"]
    assert [(list(b.get_xdata()), list(b.get_ydata())) for b in bounds] == [([8], [16])]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(t.startswith("q=2: lower bound") for t in texts) == 1
    # The legend in the order of one seed's (the second seed's has the bound too).
    alone = results[1].plot()
    assert texts[:-1] == [t.get_text() for t in alone.axes[0].get_legend().get_texts()][:-1]
    matplotlib.pyplot.close(alone)
    (fit,) = [t for t in texts if t.startswith("fit: ")]
    assert fit.endswith(", over every seed's widths)")
    curves = [c for r in results for c in r.curves]
    law = joint_law(curves, lambda c: c.minimal_width["transformer"])
    assert f"{law['intercept']:.1f} + {law['slope']:.2f} q log" in fit
    matplotlib.pyplot.close(fig)
    matplotlib.pyplot.close(one)


def test_separation_plot_bands_of_one_result_is_plot(by_q):
    one, bands = by_q.plot(), SeparationByQResult.plot_bands([by_q])
    for a, b in zip(one.axes, bands.axes):
        assert [(ln.get_label(), list(ln.get_ydata())) for ln in a.get_lines()] == [
            (ln.get_label(), list(ln.get_ydata())) for ln in b.get_lines()
        ]
        assert a.get_title() == b.get_title() and not b.containers
    assert fp.suptitle(bands) == ""
    measured = one.axes[0].get_lines()[0]
    assert list(measured.get_ydata()) == by_q.curves[0].minimal_width["transformer"]
    matplotlib.pyplot.close(one)
    matplotlib.pyplot.close(bands)


def test_separation_plot_bands_refuses_other_experiments(by_q):
    other = copy.deepcopy(by_q)
    other.curves[1].seq_lens = [4, 16]
    with pytest.raises(
        ValueError, match=r"results\[1\] searched the lengths \[\[4, 8\], \[4, 16\]\]"
    ):
        SeparationByQResult.plot_bands([by_q, other])
    with pytest.raises(TypeError, match=r"got one SeparationByQResult: pass \[result\]"):
        SeparationByQResult.plot_bands(by_q)


def test_floor_widths_are_computed_once_per_process_and_the_same():
    from stsq_learn import isotropic_floor
    from stsq_learn.experiments import _width_search as ws

    ws._seeded_floor.cache_clear()
    first = ws.floor_widths((8, 16), 2, (4, 8, 16, 32), 0.9, n_samples=500)
    computed = ws._seeded_floor.cache_info()
    assert computed.currsize >= 2
    assert ws.floor_widths((8, 16), 2, (4, 8, 16, 32), 0.9, n_samples=500) == first
    again = ws._seeded_floor.cache_info()
    assert again.misses == computed.misses and again.currsize == computed.currsize  # none redone
    for T in (8, 16):
        for w in (4, 8, 16, 32):
            expected = isotropic_floor(T, 2, w, n_samples=500, random_state=0).relative_mse
            assert ws._floor_relative_mse(T, 2, w, 500, 0) == expected
    # A seed that is not an integer draws afresh: not cached.
    ws._seeded_floor.cache_clear()
    ws.floor_widths((8,), 2, (4, 8), 0.9, n_samples=200, random_state=None)
    assert ws._seeded_floor.cache_info().currsize == 0
