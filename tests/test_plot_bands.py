"""plot_bands of the experiments' results: the median of every seed's curve, its min-max band."""

import matplotlib

matplotlib.use("Agg")

import figure_parts as fp
import matplotlib.pyplot as plt
import numpy as np
import pytest

from stsq_learn.experiments._convergence import ConvergenceResult, ConvergenceRun

STEPS = [0, 1, 2, 3]


def _run(name, label, seed, shift):
    rng = np.random.default_rng(seed)
    curve = lambda base: [float(v) for v in base + shift + rng.uniform(0, 0.1, len(STEPS))]  # noqa: E731
    return ConvergenceRun(
        name=name,
        label=label,
        token_block_rate=1.0,
        token_block_rate_=1.0,
        loss=curve(np.array([1.0, 0.5, 0.3, 0.2])),
        cos=curve(np.array([0.0, 0.5, 0.8, 0.9])),
        gamma=curve(np.array([0.0, 1.0, 2.0, 2.5])),
        token_norm=curve(np.array([0.0, 0.1, 0.2, 0.2])),
        test_r2=0.9,
        positional_block=np.eye(3) * (seed + 1),
        token_block=np.full((2, 3), 0.1 * seed),
    )


def _convergence(seed):
    runs = {
        "same_step": _run("same_step", "every block at the same step", seed, 0.0),
        "preconditioned": _run("preconditioned", "token rows at 1/3 (ours)", seed + 100, 0.05),
    }
    return ConvergenceResult(config={"random_state": seed}, steps=list(STEPS), runs=runs)


@pytest.mark.parametrize("n_seeds", [2, 3])
def test_convergence_plot_bands_median_and_min_max_of_every_seed(n_seeds):
    results = [_convergence(seed) for seed in range(n_seeds)]
    one = results[0].plot()
    fig = ConvergenceResult.plot_bands(results)
    assert len(fig.axes) == len(one.axes) == 5  # four panels and W's colour bar
    assert [ax.get_title() for ax in fig.axes[:3]] == [ax.get_title() for ax in one.axes[:3]]
    for i in range(3):
        assert (
            fig.axes[i].get_legend_handles_labels()[1] == one.axes[i].get_legend_handles_labels()[1]
        )
    assert fp.suptitle(fig) == f"Training dynamics, median over {n_seeds} seeds, band: min-max"
    assert fig.axes[3].get_title().startswith("Final W (same_step, seed 0)")
    ax_loss, ax_cos, ax_gamma = fig.axes[:3]
    cases = [(ax_loss, "label", "loss"), (ax_cos, "short_label", "cos")]
    for ax, label_key, key in cases:
        for i, (name, run) in enumerate(results[0].runs.items()):
            values = np.array([getattr(r.runs[name], key) for r in results])
            line = fp.line(ax, getattr(run, label_key))
            np.testing.assert_allclose(line.get_ydata(), np.median(values, axis=0))
            lo, hi = fp.band(fp.fills(ax)[i], STEPS)
            np.testing.assert_allclose(lo, values.min(axis=0))
            np.testing.assert_allclose(hi, values.max(axis=0))
    assert len(fp.fills(ax_gamma)) == 4  # gamma and the token norm, per run
    plt.close(fig)
    plt.close(one)


def test_convergence_plot_bands_of_one_result_is_plot():
    res = _convergence(0)
    one, bands = res.plot(), res.plot_bands([res])
    for a, b in zip(one.axes, bands.axes):
        assert [ln.get_label() for ln in a.get_lines()] == [ln.get_label() for ln in b.get_lines()]
        for la, lb in zip(a.get_lines(), b.get_lines()):
            np.testing.assert_array_equal(la.get_ydata(), lb.get_ydata())
        assert a.get_title() == b.get_title() and not fp.fills(a) and not fp.fills(b)
    assert fp.suptitle(one) == ""
    # plot() draws each run's own curves.
    np.testing.assert_array_equal(
        fp.line(one.axes[0], res.runs["same_step"].label).get_ydata(), res.runs["same_step"].loss
    )
    plt.close(one)
    plt.close(bands)


@pytest.mark.parametrize(("make", "cls"), [(_convergence, ConvergenceResult)])
def test_plot_bands_names_bad_results(make, cls):
    fp.check_plot_bands_names_bad_results(cls, make(0))


def test_plot_bands_refuses_seeds_of_different_experiments():
    short = _convergence(1)
    short.steps = [0, 1, 2]
    with pytest.raises(ValueError, match=r"results\[1\]\.steps differs from results\[0\]\.steps"):
        ConvergenceResult.plot_bands([_convergence(0), short])
    lone = _convergence(1)
    del lone.runs["preconditioned"]
    with pytest.raises(ValueError, match=r"results\[1\] has the runs \['same_step'\]"):
        ConvergenceResult.plot_bands([_convergence(0), lone])
