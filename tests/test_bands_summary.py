"""bands.png: one readable panel of how far the seeds agree, a row per experiment."""

import matplotlib
import numpy as np
import pytest

from stsq_learn.experiments._result import band
from stsq_learn.experiments._runs import plot_bands

matplotlib.use("Agg")


def _bands(n_experiments, n_numbers):
    out = {}
    for e in range(n_experiments):
        nums = {f"n{k}": band([10.0, 10.0 + k, 10.0 + 2 * k]) for k in range(n_numbers)}
        out[f"exp{e}"] = nums
    out["no_headline"] = None
    return out


def test_the_summary_stays_a_page_whatever_the_numbers():
    fig = plot_bands(_bands(9, 120))  # 0.6's strip was 38 inches tall for fewer numbers
    width, height = fig.get_size_inches()
    assert height < 6 and width < 9
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 9 and labels[0].startswith("exp0\n120 numbers, 3 seeds, 1 agree")
    assert ax.get_xscale() == "log"


def test_each_number_is_a_dot_at_its_relative_spread():
    fig = plot_bands({"e": {"a": band([1.0, 1.1, 1.3]), "b": band([5.0, 5.0, 5.0])}})
    (ax,) = fig.axes
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    # a: (1.3 - 1.0) / 1.1 = 27.3 %; b: the seeds agree, drawn at the floor 0.01 %
    assert sorted(np.round(xs, 2)) == pytest.approx([0.01, 27.27])


def test_a_run_without_headline_numbers_says_so():
    fig = plot_bands({"x": None})
    assert "no headline numbers" in fig.axes[0].texts[0].get_text()
