"""plot_bands of the task experiments (q-sparse averaging, classification) over seeds.

Small hand-made results: each curve's median over the seeds with its min-max
band, each width or threshold its median with min-max error bars, widths no
seed reached (None, NaN, inf) left out; one result draws plot()'s figure.
"""

import math
import warnings

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer

from stsq_learn.experiments import SeparationResult, SparseAveragingResult
from stsq_learn.experiments._width_search import fit_growth_law, growth_laws
from stsq_learn.tasks.classification.experiment import (
    SparseTokenClassificationResult,
    fit_laws,
)
from stsq_learn.tasks.classification.theory import pooled_error

NAN, INF = float("nan"), float("inf")
SEQ_LENS = [4, 8, 16]
# Per seed: the attention model's and the FCN's minimal widths, and their lower bounds.
# Seed 1 found no attention width at T=8 (bound 16); seed 2's at T=16 is NaN with an
# infinite bound (as a run read back from JSON may hold); no FCN width at T=16.
WIDTHS = {
    0: ([4, 8, 8], [8, 32, None]),
    1: ([4, None, 16], [16, 32, None]),
    2: ([8, 8, NAN], [8, 64, None]),
}
BOUNDS = {
    0: ([None, None, None], [None, None, 512]),
    1: ([None, 16, None], [None, None, 512]),
    2: ([None, None, INF], [None, None, 512]),
}
# The search against q (q = 1, 2, 4): minimal widths, lower bounds, the floor's widths.
BY_Q = {
    0: ([4, 8, None], [None, None, 64], [4, 4, 8]),
    1: ([4, 16, 32], [None, None, None], [4, 8, 8]),
    2: ([6, None, NAN], [None, 32, INF], [4, 4, 16]),
}
R2 = {  # the length part: R^2 of each encoding at N' = 8, 16
    0: {"stochastic": [0.9, 0.8], "fixed": [0.9, -0.3]},
    1: {"stochastic": [0.95, 0.7], "fixed": [0.8, -0.5]},
    2: {"stochastic": [0.85, NAN], "fixed": [0.7, -0.1]},
}
TRANSFER = {  # relative MSE of the three models, the floor
    0: ([0.30, 0.32, 0.28], 0.25),
    1: ([0.34, 0.35, 0.27], 0.27),
    2: ([0.31, 0.38, 0.29], 0.26),
}
MODELS = ["selector on STS_q", "selector on qSA", "averager on qSA"]


def _by_length(seed, task="q-sparse averaging"):
    transformer, fcn = WIDTHS[seed]
    minimal = {"transformer": list(transformer), "fcn": list(fcn)}
    found = {
        m: [None if w is None or math.isnan(w) else w for w in ws] for m, ws in minimal.items()
    }
    config = {"task": task, "n_features": 2, "n_selected": 2, "target_r2": 0.9}
    config |= {"n_steps": {"transformer": 300, "fcn": 500}, "random_state": seed}
    return SeparationResult(
        config=config,
        seq_lens=list(SEQ_LENS),
        scores={},
        minimal_width=minimal,
        growth_laws=growth_laws(SEQ_LENS, found, 2),
        lower_bound={"transformer": list(BOUNDS[seed][0]), "fcn": list(BOUNDS[seed][1])},
    )


def _length(seed):
    return {
        "eval_lengths": [8, 16],
        "seq_len": 8,
        "n_selected": 2,
        "width": 16,
        "r2": {k: list(v) for k, v in R2[seed].items()},
    }


def _averaging(seed):
    minimal, bounds, floors = BY_Q[seed]
    errors, floor = TRANSFER[seed]
    by_q = {
        "q_values": [1, 2, 4],
        "minimal_width": list(minimal),
        "lower_bound": list(bounds),
        "floor_width": list(floors),
        "seq_len": 16,
        "n_features": 2,
    }
    transfer = {
        "relative_mse": dict(zip(MODELS, errors)),
        "floor": floor,
        "floor_ratio": {n: e / floor for n, e in zip(MODELS, errors)},
        "seq_len": 32,
        "n_features": 8,
        "n_selected": 4,
        "width": 64,
    }
    return SparseAveragingResult(
        config={"target_r2": 0.9, "random_state": seed},
        by_length=_by_length(seed),
        by_q=by_q,
        transfer=transfer,
        length=_length(seed),
    )


CLS_LENS = [4, 8, 16]
THRESHOLDS = {  # per seed and classifier: the minimal theta at each L (None: none found)
    0: {"attention": [2.0, 2.5, 3.0], "flat": [3.0, 6.0, None], "pooled": [3.0, 4.0, 5.0]},
    1: {"attention": [2.2, None, 3.4], "flat": [3.5, 7.0, None], "pooled": [2.8, 4.2, 5.5]},
    2: {"attention": [1.8, 2.7, NAN], "flat": [4.0, 8.0, None], "pooled": [3.1, 4.1, 6.0]},
}
COSINES = {  # per seed, d -> per ratio n/d: the draws' cosines
    0: {"8": [[0.2, 0.4], [0.7, 0.8]], "16": [[0.1, 0.3], [0.6, 0.9]]},
    1: {"8": [[0.3, 0.5], [0.75, 0.85]], "16": [[0.0, 0.2], []]},
    2: {"8": [[0.1, 0.2], [0.6, 0.95]], "16": [[0.2, 0.6], [0.5, 0.7]]},
}
ERRORS = {  # per seed, classifier -> test error at theta = 1, 2, 4; the share-1/2 signal
    0: (dict(attention=[0.4, 0.2, 0.05], flat=[0.45, 0.3, 0.2], pooled=[0.42, 0.25, 0.1]), 2.0),
    1: (dict(attention=[0.38, 0.25, 0.02], flat=[0.47, 0.35, 0.15], pooled=[0.4, 0.2, 0.12]), 2.6),
    2: (dict(attention=[0.41, 0.15, 0.0], flat=[0.46, 0.32, 0.25], pooled=[0.43, 0.3, 0.1]), None),
}


def _classification(seed):
    thresholds = {k: list(v) for k, v in THRESHOLDS[seed].items()}
    law = {
        "seq_lens": list(CLS_LENS),
        "target_error": 0.2,
        "thresholds": thresholds,
        "fits": {k: fit_laws(CLS_LENS, v) for k, v in thresholds.items()},
        "pooled_oracle": [3.3, 4.7, 6.7],
    }
    cosine = {d: [list(c) for c in v] for d, v in COSINES[seed].items()}
    mean = {d: [float(np.mean(c)) if c else None for c in v] for d, v in cosine.items()}
    alignment = {
        "n_features": [8, 16],
        "ratios": [1.0, 4.0],
        "cosine": cosine,
        "mean": mean,
        "theory": [0.55, 0.88],
        "seq_len": 8,
        "signal": 3.0,
    }
    errors, share = ERRORS[seed]
    error = {
        "seq_len": 8,
        "signals": [1.0, 2.0, 4.0],
        "test_error": {k: list(v) for k, v in errors.items()},
        "attention_threshold": share,
    }
    return SparseTokenClassificationResult(
        config={"seed": seed}, law=law, alignment=alignment, error=error, seconds={}
    )


def _banded(ax):
    """Whether ``ax`` holds a band or error bars (a figure over seeds does, one seed's not)."""
    return bool(fp.fills(ax)) or any(isinstance(c, ErrorbarContainer) for c in ax.containers)


def _bounds(ax, color):
    """``(xs, ys)`` of every lower-bound line (open triangles) of ``color`` on ``ax``."""
    return [
        (list(ln.get_xdata()), list(ln.get_ydata()))
        for ln in ax.get_lines()
        if ln.get_marker() == "^" and to_rgba(ln.get_color()) == to_rgba(color)
    ]


def _data(values):
    return [None if v is None or not np.isfinite(v) else float(v) for v in np.ravel(values)]


def _elements(fig):
    """Everything drawn on the figure, element by element, comparable with ``==``."""
    fig.canvas.draw()
    out = []
    for ax in fig.axes:
        out.append(
            {
                "labels": (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()),
                "limits": (_data(ax.get_xlim()), _data(ax.get_ylim())),
                "scales": (ax.get_xscale(), ax.get_yscale()),
                "ticks": ([t.get_text() for t in ax.get_xticklabels()], _data(ax.get_xticks())),
                "lines": [
                    (
                        ln.get_label(),
                        _data(ln.get_xdata()),
                        _data(ln.get_ydata()),
                        to_rgba(ln.get_color()),
                        ln.get_linestyle(),
                        ln.get_marker(),
                        ln.get_markersize(),
                    )
                    for ln in ax.get_lines()
                ],
                "collections": [
                    (type(c).__name__, [_data(p.vertices) for p in c.get_paths()])
                    for c in ax.collections
                ],
                "patches": [
                    (_data(p.get_extents().bounds), to_rgba(p.get_facecolor())) for p in ax.patches
                ],
                "texts": [(t.get_text(), _data(t.get_position())) for t in ax.texts],
                "legend": [t.get_text() for t in ax.get_legend().get_texts()]
                if ax.get_legend()
                else None,
            }
        )
    return out, fp.suptitle(fig)


# -- q-sparse averaging ----------------------------------------------------------------------
def test_averaging_plot_bands_median_and_min_max_over_seeds():
    results = [_averaging(seed) for seed in range(3)]
    one = results[0].plot()
    fig = SparseAveragingResult.plot_bands(results)
    assert fp.suptitle(fig) == (
        "q-sparse averaging, median over 3 seeds, band: min-max, error bars: min-max"
    )
    assert len(fig.axes) == len(one.axes) == 4
    assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in one.axes]
    ax_n, ax_q, ax_tr, ax_len = fig.axes
    # Widths against N: each from the seeds that found one (None, NaN left out).
    assert fp.bars(ax_n, "transformer (SPE)") == {
        4.0: (4.0, 4.0, 8.0),
        8.0: (8.0, 8.0, 8.0),
        16.0: (12.0, 8.0, 16.0),
    }
    assert fp.bars(ax_n, "FCN") == {4.0: (8.0, 8.0, 16.0), 8.0: (32.0, 32.0, 64.0)}
    # Every seed's finite lower bounds (the infinite one left out), named once each model.
    assert _bounds(ax_n, "C0") == [([8], [16])]
    assert _bounds(ax_n, "C1") == [([16], [512])] * 3
    texts = [t.get_text() for t in ax_n.get_legend().get_texts()]
    assert sum(t.startswith("FCN: lower bound") for t in texts) == 1
    # The log law is fitted to every seed's widths (the FCN's span two lengths: no law).
    pairs = [(4, 4), (8, 8), (16, 8), (4, 4), (16, 16), (4, 8), (8, 8)]
    law = fit_growth_law([math.log2(T) for T, _ in pairs], [w for _, w in pairs])
    (fit,) = [ln for ln in ax_n.get_lines() if ln.get_label().startswith("fit")]
    grid = fit.get_xdata()
    np.testing.assert_allclose(
        fit.get_ydata(), np.clip(law["intercept"] + law["slope"] * np.log2(grid), 0.5, None)
    )
    (text,) = [t for t in texts if t.startswith("fit")]
    assert text.startswith(f"fit, every seed's widths: {law['intercept']:.1f} + ")
    assert "log$_2$ N" in text  # the averaging's names
    # Widths against q, and the widths the floor allows.
    assert fp.bars(ax_q, "trained: smallest width reaching") == {
        1.0: (4.0, 4.0, 6.0),
        2.0: (12.0, 8.0, 16.0),
        4.0: (32.0, 32.0, 32.0),
    }
    assert fp.bars(ax_q, "isotropic floor allows") == {
        1.0: (4.0, 4.0, 4.0),
        2.0: (4.0, 4.0, 8.0),
        4.0: (8.0, 8.0, 16.0),
    }
    assert _bounds(ax_q, "C0") == [([4.0], [64]), ([2.0], [32])]
    assert [t.get_text() for t in ax_q.get_legend().get_texts()] == [
        "trained: smallest width reaching",
        "lower bound",
        "isotropic floor allows",
    ]
    # Transfer: the median bars, min-max error bars, the median floor.
    errors = np.array([TRANSFER[s][0] for s in range(3)])
    heights = [p.get_height() for p in ax_tr.patches]
    np.testing.assert_allclose(heights, np.median(errors, axis=0))
    (container,) = [c for c in ax_tr.containers if isinstance(c, BarContainer)]
    (segments,) = container.errorbar.lines[2]
    ends = np.array([[seg[0][1], seg[1][1]] for seg in segments.get_segments()])
    np.testing.assert_allclose(ends, np.c_[errors.min(axis=0), errors.max(axis=0)])
    floor = fp.line(ax_tr, "isotropic floor 0.260 (median)")
    assert list(floor.get_ydata()) == [0.26, 0.26]
    ratios = np.median(errors / np.array([[TRANSFER[s][1]] for s in range(3)]), axis=0)
    assert [t.get_text() for t in ax_tr.texts] == [
        f"{m:.3f}\n({r:.2f}x)" for m, r in zip(np.median(errors, axis=0), ratios)
    ]
    # Length part: the median R^2 from the seeds that have one, their min-max shaded.
    for k, pe in enumerate(("stochastic", "fixed")):
        values = np.array([R2[s][pe] for s in range(3)])
        np.testing.assert_allclose(fp.line(ax_len, pe).get_ydata(), np.nanmedian(values, axis=0))
        lo, hi = fp.band(fp.fills(ax_len)[k], [8, 16])
        np.testing.assert_allclose(lo, np.nanmin(values, axis=0))
        np.testing.assert_allclose(hi, np.nanmax(values, axis=0))
    assert ax_len.get_ylim()[0] == pytest.approx(-0.55)
    plt.close(fig)
    plt.close(one)


def test_averaging_plot_bands_of_one_result_is_plot():
    res = _averaging(1)
    one, bands = res.plot(), SparseAveragingResult.plot_bands([res])
    assert _elements(one) == _elements(bands)
    assert fp.suptitle(one) == "" and not any(map(_banded, one.axes))
    # plot() draws the result's own numbers.
    ax_n, ax_q, ax_tr, ax_len = one.axes
    assert list(fp.line(ax_n, "transformer (SPE)").get_ydata()) == [4, 16]
    assert list(fp.line(ax_q, "trained: smallest width reaching").get_ydata()) == [4, 16, 32]
    assert [p.get_height() for p in ax_tr.patches] == TRANSFER[1][0]
    assert list(fp.line(ax_len, "fixed").get_ydata()) == R2[1]["fixed"]
    plt.close(one)
    plt.close(bands)


def test_averaging_plot_bands_with_no_width_found_in_any_seed():
    results = [_averaging(seed) for seed in range(2)]
    for res in results:
        res.by_length.minimal_width = {"transformer": [None, NAN, None], "fcn": [None] * 3}
        res.by_q["minimal_width"] = [None, None, NAN]
        res.by_q["floor_width"] = [None] * 3
    fig = SparseAveragingResult.plot_bands(results)
    ax_n, ax_q = fig.axes[:2]
    # The legend keeps both models (an empty line each), no law, no floor.
    assert list(fp.line(ax_n, "transformer (SPE)").get_ydata()) == []
    assert not ax_n.containers and not any(ln.get_label().startswith("fit") for ln in ax_n.lines)
    assert not ax_q.containers
    assert [t.get_text() for t in ax_q.get_legend().get_texts()] == ["lower bound"]
    plt.close(fig)


def _nothing_found(make):
    """Two seeds of ``make`` where no seed has a number (None, NaN, inf) anywhere it may miss."""
    results = [make(seed) for seed in range(2)]
    for res in results:
        if isinstance(res, SparseTokenClassificationResult):
            res.law["thresholds"] = {k: [None, NAN, INF] for k in res.law["thresholds"]}
            res.alignment["mean"] = {d: [None, None] for d in res.alignment["mean"]}
            res.alignment["cosine"] = {d: [[], []] for d in res.alignment["cosine"]}
            res.error["attention_threshold"] = None
            continue
        res.by_length.minimal_width = {"transformer": [None, NAN, None], "fcn": [None] * 3}
        res.by_length.lower_bound = {"transformer": [INF, NAN, None], "fcn": [None] * 3}
        res.length["r2"] = {"stochastic": [NAN, NAN], "fixed": [NAN, NAN]}
        res.by_q |= {"minimal_width": [None, None, NAN], "lower_bound": [None, INF, NAN]}
        res.by_q["floor_width"] = [None, NAN, None]
        res.transfer["relative_mse"] = dict.fromkeys(MODELS, NAN)
        res.transfer["floor"] = NAN
        res.transfer["floor_ratio"] = dict.fromkeys(MODELS)
    return results


@pytest.mark.parametrize("make", [lambda s: _averaging(s), lambda s: _classification(s)])
def test_task_plot_bands_draw_seeds_that_found_nothing(make):
    results = _nothing_found(make)
    with warnings.catch_warnings():
        # No "mean of empty slice", no "All-NaN" slice (the libraries' own deprecation
        # warnings, such as old matplotlib's on new pyparsing, are not the figure's).
        warnings.simplefilter("error", RuntimeWarning)
        fig = type(results[0]).plot_bands(results)
        fig.canvas.draw()
    for ax in fig.axes:
        # No point drawn (the transfer's bars are empty, without error bars).
        points = [c.lines[0] for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert all(line is None for line in points)
        assert all(np.isfinite(ax.get_ylim()))
    plt.close(fig)


# -- sparse-token classification -------------------------------------------------------------
def test_classification_plot_bands_median_and_min_max_over_seeds():
    results = [_classification(seed) for seed in range(3)]
    one = results[0].plot()
    fig = SparseTokenClassificationResult.plot_bands(results)
    assert fp.suptitle(fig) == (
        "Sparse-token classification, median over 3 seeds, band: min-max, error bars: min-max"
    )
    assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in one.axes]
    ax_l, ax_a, ax_e = fig.axes
    # Thresholds: median of the seeds that found one; the laws fitted to every seed's.
    pooled = [(L, t) for s in range(3) for L, t in zip(CLS_LENS, THRESHOLDS[s]["attention"])]
    pooled = [(L, t) for L, t in pooled if t is not None and not math.isnan(t)]
    fit = fit_laws([L for L, _ in pooled], [t for _, t in pooled])
    label = f"attention (every seed's: R$^2$ log {fit['log_r2']:.2f}, sqrt {fit['sqrt_r2']:.2f})"
    got = fp.bars(ax_l, label)
    assert list(got) == [4.0, 8.0, 16.0]
    np.testing.assert_allclose(
        list(got.values()), [(2.0, 1.8, 2.2), (2.6, 2.5, 2.7), (3.2, 3.0, 3.4)]
    )
    grid = np.geomspace(4, 16, 100)
    log_line = next(ln for ln in ax_l.get_lines() if ln.get_linestyle() == "-")
    np.testing.assert_allclose(log_line.get_ydata(), fit["log_a"] + fit["log_b"] * np.log(grid))
    # The flat classifier's thresholds span two lengths: no law, its points with no R^2.
    assert fp.bars(ax_l, "flattened logistic") == {4.0: (3.5, 3.0, 4.0), 8.0: (7.0, 6.0, 8.0)}
    assert list(fp.line(ax_l, "pooled oracle (theory)").get_ydata()) == [3.3, 4.7, 6.7]
    # Cosines: the median of the seeds' means, every seed's draws' min-max shaded.
    d8 = fp.line(ax_a, "two steps, d=8")
    np.testing.assert_allclose(d8.get_ydata(), [0.3, 0.775])
    np.testing.assert_allclose(fp.band(fp.fills(ax_a)[0], [1.0, 4.0]), [[0.1, 0.6], [0.5, 0.95]])
    # d=16 at n/d=4: seed 1 drew none there (left out of the median and the band).
    np.testing.assert_allclose(fp.line(ax_a, "two steps, d=16").get_ydata(), [0.2, 0.675])
    np.testing.assert_allclose(fp.band(fp.fills(ax_a)[1], [1.0, 4.0]), [[0.0, 0.5], [0.6, 0.9]])
    assert list(fp.line(ax_a, "theory (d, n -> inf)").get_ydata()) == [0.55, 0.88]
    # Test error: the median with the min-max shaded; the share's line at the median.
    values = np.array([ERRORS[s][0]["attention"] for s in range(3)])
    np.testing.assert_allclose(fp.line(ax_e, "attention").get_ydata(), np.median(values, axis=0))
    np.testing.assert_allclose(
        fp.band(fp.fills(ax_e)[0], [1, 2, 4]), [values.min(axis=0), values.max(axis=0)]
    )
    share = fp.line(ax_e, "informative share 1/2 (theory, fitted query; median over seeds)")
    assert list(share.get_xdata()) == [2.3, 2.3]
    oracle = fp.line(ax_e, "pooled oracle (exact)")
    np.testing.assert_allclose(oracle.get_ydata(), pooled_error(oracle.get_xdata(), 8))
    plt.close(fig)
    plt.close(one)


def test_classification_plot_bands_of_one_result_is_plot():
    for seed in (1, 2):  # a threshold None (seed 1), a NaN one and no share (seed 2)
        res = _classification(seed)
        one, bands = res.plot(), SparseTokenClassificationResult.plot_bands([res])
        assert _elements(one) == _elements(bands)
        assert fp.suptitle(one) == "" and not any(ax.containers for ax in one.axes)
        flat = THRESHOLDS[seed]["flat"]
        label = [t.get_text() for t in one.axes[0].get_legend().get_texts()][1]
        assert list(fp.line(one.axes[0], label).get_ydata()) == flat[:2]
        plt.close(one)
        plt.close(bands)


# -- bad results -----------------------------------------------------------------------------
CASES = [
    (_averaging, SparseAveragingResult),
    (_classification, SparseTokenClassificationResult),
]


@pytest.mark.parametrize(("make", "cls"), CASES)
def test_task_plot_bands_names_bad_results(make, cls):
    fp.check_plot_bands_names_bad_results(cls, make(0))


def test_task_plot_bands_refuses_seeds_of_different_experiments():
    other = _averaging(1)
    other.by_q["q_values"] = [1, 2, 3]
    with pytest.raises(
        ValueError,
        match=r"results\[1\]\.by_q\['q_values'\] differs from results\[0\]\.by_q\['q_values'\] "
        r"\(\[1, 2, 3\] != \[1, 2, 4\]\): the seeds of one experiment share it",
    ):
        SparseAveragingResult.plot_bands([_averaging(0), other])
    other = _classification(1)
    del other.law["thresholds"]["flat"]
    with pytest.raises(ValueError, match=r"results\[1\]\.list\(law\['thresholds'\]\) differs"):
        SparseTokenClassificationResult.plot_bands([_classification(0), other])
