"""
A study of one's own task: minimal width against T, over seeds, beside the FCN
==============================================================================

The package's experiments are compositions of :mod:`stsq_learn.studies`,
and so is this one, on a task that is not the package's: the target is the
mean of the two tokens a row marks. The study asks the question of the paper
about it: how wide must an attention layer be to reach R^2 = 0.9 as the
sequences grow, and how wide a fully-connected net? Three seeds, trained
together as one batched model; the medians with their min-max bands, a
``log2 T`` law fitted to the attention's widths, the FCN beside it.

The task takes 32 lines (a :class:`~stsq_learn.Task` as the user guide's
:ref:`tasks` page writes one); the study, its law and its figure take 20.
"""

# %%
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from stsq_learn import AttentionRegressor, FCNRegressor, Task
from stsq_learn.queries import Selection
from stsq_learn.studies import BandDisplay, fit_law, minimal_width


@dataclass(frozen=True)
class MarkedPairMean(Task):
    """The mean of the two tokens marked 1 in the last channel."""

    seq_len: int
    n_features: int
    name = "marked_pair_mean"
    structure = Selection  # a query averages the marked positions' encodings
    trivial_mse = property(lambda self: self.n_features / 2)  # E||y||^2

    def _sample(self, n, rng):
        tokens = rng.standard_normal((n, self.seq_len, self.n_features))
        marked = rng.random_sample((n, self.seq_len)).argsort(1)[:, :2]
        marks = np.zeros((n, self.seq_len, 1))
        np.put_along_axis(marks[..., 0], marked, 1.0, axis=1)
        target = (tokens * marks).sum(1) / 2
        return np.concatenate([tokens, marks], axis=2), target

    @classmethod
    def from_data(cls, X, y):
        task = cls(np.shape(X)[1], np.shape(X)[2] - 1)
        return task, task.check_rows(X), np.asarray(y, dtype=float)

    def check_rows(self, X, owner="the model"):
        X = np.asarray(X, dtype=float)
        if X.ndim != 3 or X.shape[2] != self.n_features + 1:
            raise ValueError(
                f"{owner} reads rows of {self.n_features + 1} channels."
            )
        return X

    def shift(self, X, y, seq_len, random_state=None):  # unmarked tokens added
        rng = np.random.default_rng(random_state)
        n, T, c = X.shape
        new = rng.standard_normal((n, seq_len - T, c))
        new[..., -1] = 0.0
        order = rng.random((n, seq_len)).argsort(axis=1)
        longer = np.concatenate([X, new], axis=1)
        return np.take_along_axis(longer, order[..., None], 1), y


# %%
# The study: for T = 4 to 32, the least width of a grid reaching R^2 = 0.9
# after 300 online steps, per seed; each search starts where the previous
# length's ended.
table = minimal_width(
    {
        "attention": AttentionRegressor(MarkedPairMean),
        "fcn": FCNRegressor(MarkedPairMean),
    },
    MarkedPairMean(seq_len=4, n_features=2),
    widths=[2, 4, 8, 16, 32, 64, 128, 256, 512],
    grid={"seq_len": [4, 8, 16, 32]},
    target=0.9,
    seeds=3,
    n_steps=300,
    batch_seeds=True,
)
# One row per model and T: the median width and its range over the seeds; where
# no seed reached R^2 = 0.9, the width is above the largest one that failed.
bounds = table.bands("seq_len", "bound")
for band, bound in zip(table.bands("seq_len", "value"), bounds):
    if band["n"]:
        width = f"{band['median']:4.0f} [{band['min']:.0f}, {band['max']:.0f}]"
    else:
        width = f"> {bound['max']:.0f} (no seed reached it)"
    if 0 < band["n"] < band["n_runs"]:
        width += f" ({band['n']} of {band['n_runs']} seeds reached it)"
    print(f"{band['model']:9} T={band['param_seq_len']:2}: width {width}")

# %%
# The attention's widths against ``log2 T``, fitted to every seed's point; the
# FCN's input grows like ``T d`` and its width with it.
law = fit_law(*table.where(model="attention").xy("seq_len", "value"), "log2")
print(law.label("T"))
display = BandDisplay.from_table(
    table,
    x="seq_len",
    y="value",
    laws={"attention": law},
    bound="bound",
    logx=True,
    logy=True,
)
display.ax_.set(
    xlabel="sequence length T", ylabel="least width reaching R^2 = 0.9"
)
plt.show()
