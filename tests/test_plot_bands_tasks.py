"""plot_bands of the task experiments (retrieval, classification) over seeds.

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
from matplotlib.container import ErrorbarContainer

from stsq_learn.experiments import SeparationResult, SparseRetrievalResult
from stsq_learn.experiments._width_search import growth_laws
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
R2 = {  # the length part: R^2 of each encoding at N' = 8, 16
    0: {"stochastic": [0.9, 0.8], "fixed": [0.9, -0.3]},
    1: {"stochastic": [0.95, 0.7], "fixed": [0.8, -0.5]},
    2: {"stochastic": [0.85, NAN], "fixed": [0.7, -0.1]},
}


def _by_length(seed, task="q-sparse token retrieval"):
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


HEADS = {  # relative MSE at H = 1, 2, 3 for q = 1, 2; the threshold of each q
    0: ({"1": [0.05, 0.04, None], "2": [0.6, 0.1, 0.05]}, {"1": 1, "2": 2}),
    1: ({"1": [0.03, 0.02, None], "2": [0.55, 0.3, 0.08]}, {"1": 1, "2": 3}),
    2: ({"1": [0.08, 0.01, None], "2": [0.7, NAN, 0.02]}, {"1": 1, "2": None}),
}


def _retrieval(seed):
    errors, threshold = HEADS[seed]
    heads = {
        "q_values": [1, 2],
        "n_heads": [1, 2, 3],
        "relative_mse": {q: list(v) for q, v in errors.items()},
        "bound": {"1": [0.0, 0.0, 0.0], "2": [0.5, 0.0, 0.0]},
        "threshold": dict(threshold),
        "threshold_level": {"1": 0.5, "2": 0.25},
        "seq_len": 16,
        "n_features": 4,
        "width": 16,
        "n_steps": 200,
        "solver": "sgd",
    }
    return SparseRetrievalResult(
        config={"random_state": seed},
        heads=heads,
        by_length=_by_length(seed, task="q-sparse token retrieval"),
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


# -- seeds that found nothing -------------------------------------------------------------
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
        res.heads["relative_mse"]["2"] = [None, NAN, None]
    return results


@pytest.mark.parametrize("make", [lambda s: _retrieval(s), lambda s: _classification(s)])
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


# -- q-sparse retrieval ----------------------------------------------------------------------
def test_retrieval_plot_bands_median_and_min_max_over_seeds():
    results = [_retrieval(seed) for seed in range(3)]
    one = results[0].plot()
    fig = SparseRetrievalResult.plot_bands(results)
    assert fp.suptitle(fig) == (
        "q-sparse retrieval, median over 3 seeds, band: min-max, error bars: min-max"
    )
    assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in one.axes]
    ax_h, ax_w, ax_len = fig.axes
    assert [t.get_text() for t in ax_h.get_legend().get_texts()] == [
        t.get_text() for t in one.axes[0].get_legend().get_texts()
    ]
    fills = fp.fills(ax_h)
    # q=1: H=3 was tried by no seed (left out); q=2: seed 2's NaN at H=2 left out.
    np.testing.assert_allclose(fp.line(ax_h, "q=1").get_xdata(), [1, 2])
    np.testing.assert_allclose(fp.line(ax_h, "q=1").get_ydata(), [0.05, 0.02])
    np.testing.assert_allclose(fp.band(fills[0], [1, 2]), [[0.03, 0.01], [0.08, 0.04]])
    np.testing.assert_allclose(fp.line(ax_h, "q=2").get_ydata(), [0.6, 0.2, 0.05])
    np.testing.assert_allclose(fp.band(fills[1], [1, 2, 3]), [[0.55, 0.1, 0.02], [0.7, 0.3, 0.08]])
    # q=2 missed its threshold at H = 2 in two of the three seeds.
    (note,) = ax_h.texts
    assert note.get_text().startswith("no threshold at H = q for q=2 (2 of 3 seeds) within")
    assert not one.axes[0].texts  # the first seed found both thresholds
    # Widths against T at H = q (from _by_length).
    assert fp.bars(ax_w, "transformer (SPE)")[16.0] == (12.0, 8.0, 16.0)
    assert ax_w.get_title() == "Retrieval: width against T (d=2, q=H=2)"
    values = np.array([R2[s]["fixed"] for s in range(3)])
    np.testing.assert_allclose(fp.line(ax_len, "fixed").get_ydata(), np.median(values, axis=0))
    plt.close(fig)
    plt.close(one)


def test_retrieval_plot_bands_of_one_result_is_plot():
    for seed in (1, 2):  # seed 1 misses q=2's threshold (a note), seed 2 has a NaN error
        res = _retrieval(seed)
        one, bands = res.plot(), SparseRetrievalResult.plot_bands([res])
        assert _elements(one) == _elements(bands)
        assert fp.suptitle(one) == "" and not any(map(_banded, one.axes))
        errors = HEADS[seed][0]["2"]
        assert _data(fp.line(one.axes[0], "q=2").get_ydata()) == _data(errors)
        assert one.axes[0].texts[0].get_text().startswith("no threshold at H = q for q=2 within")
        plt.close(one)
        plt.close(bands)


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
    (_retrieval, SparseRetrievalResult),
    (_classification, SparseTokenClassificationResult),
]


@pytest.mark.parametrize(("make", "cls"), CASES)
def test_task_plot_bands_names_bad_results(make, cls):
    fp.check_plot_bands_names_bad_results(cls, make(0))


def test_task_plot_bands_refuses_seeds_of_different_experiments():
    other = _retrieval(2)
    other.by_length.seq_lens = [4, 8, 32]
    with pytest.raises(ValueError, match=r"results\[2\]\.by_length\.seq_lens differs"):
        SparseRetrievalResult.plot_bands([_retrieval(0), _retrieval(1), other])
    other = _classification(1)
    del other.law["thresholds"]["flat"]
    with pytest.raises(ValueError, match=r"results\[1\]\.list\(law\['thresholds'\]\) differs"):
        SparseTokenClassificationResult.plot_bands([_classification(0), other])
