"""
A task of one's own: the difference of two named tokens
=======================================================

A task is one :class:`~stsq_learn.Task` object: its law, its data
contract, how the attention model reads a row (which positions' encodings
form a query), and how rows move to another length. Here is a new one in a
few dozen lines: a row names two positions, ``a`` (role 1) and ``b``
(role 2), and the target is ``x_a - x_b``.

One attention head outputs an *average* of tokens, with non-negative
weights: it cannot subtract. Two heads, each retrieving one named token, and
a learned linear readout ``[o_1 ; o_2] -> o_1 - o_2`` can. The task reuses
the query structure of q-sparse token retrieval
(:class:`~stsq_learn.queries.Slots`: one slot per role).
"""

# %%
import os
import tempfile
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.model_selection import GridSearchCV
from stsq_learn import (
    AttentionRegressor,
    LengthShiftScorer,
    Task,
    load_model,
    save_model,
)
from stsq_learn.queries import Slots
from stsq_learn.tasks import register_task


@register_task
@dataclass(frozen=True)
class DifferenceTask(Task):
    """Rows of ``seq_len`` Gaussian tokens; target ``x_a - x_b`` (a, b named)."""

    seq_len: int
    n_features: int

    name = "difference"
    structure = (
        Slots  # a query holds the named positions' encodings, one slot per role
    )
    readout_required = (
        True  # the output is not one average: a readout is learned
    )
    n_slots = 2

    def __post_init__(self):
        self.check_sizes()

    @property
    def trivial_mse(self):  # E||x_a - x_b||^2
        return 2.0 * self.n_features

    def _sample(self, n_samples, rng):
        tokens = rng.standard_normal((n_samples, self.seq_len, self.n_features))
        named = rng.random_sample((n_samples, self.seq_len)).argsort(axis=1)[
            :, :2
        ]
        rows = np.arange(n_samples)
        roles = np.zeros((n_samples, self.seq_len, 1))
        roles[rows, named[:, 0]], roles[rows, named[:, 1]] = 1.0, 2.0
        y = tokens[rows, named[:, 0]] - tokens[rows, named[:, 1]]
        return np.concatenate([tokens, roles], axis=2), y

    @classmethod
    def from_data(cls, X, y):
        task = cls(np.shape(X)[1], np.shape(X)[2] - 1)
        X = task.check_rows(X)
        y = np.asarray(y, dtype=float)
        if y.shape != (len(X), task.n_features):
            raise ValueError(
                f"y must have shape {(len(X), task.n_features)}, got {y.shape}."
            )
        return task, X, y

    def check_rows(self, X, owner="the model"):
        X = np.asarray(X, dtype=float)
        roles = X[..., -1]
        once = ((roles == 1).sum(1) == 1) & ((roles == 2).sum(1) == 1)
        if X.shape[2] != self.n_features + 1 or not once.all():
            raise ValueError(
                f"{owner} reads rows of d + 1 channels naming roles 1 and 2 "
                "once."
            )
        return X

    def queries(self, X):
        where = torch.stack(
            [(X[..., -1] == j).float().argmax(1) for j in (1, 2)], dim=1
        )
        return Slots(X, self.n_features, where)

    def shift(
        self, X, y, seq_len, random_state=None
    ):  # insert unnamed tokens anywhere
        rng = np.random.default_rng(random_state)
        n, T, c = X.shape
        new = np.concatenate(
            [
                rng.standard_normal((n, seq_len - T, c - 1)),
                np.zeros((n, seq_len - T, 1)),
            ],
            axis=2,
        )
        rows = np.concatenate([X, new], axis=1)
        order = rng.random((n, seq_len)).argsort(
            axis=1
        )  # a random order of positions
        return np.take_along_axis(rows, order[..., None], axis=1), y


# %%
# Search over one and two heads (400 steps of 100 rows each). The estimator
# takes the task by name (or by class, ``DifferenceTask``);
# ``length_scale="log"`` sharpens the scores of longer rows by
# ``log T' / log T`` (see the user guide's "Length shift").
task = DifferenceTask(seq_len=8, n_features=2)
X, y = task.sample(1000, random_state=0)
X_test, y_test = task.sample(1000, random_state=1)
settings = dict(
    width=16, length_scale="log", batch_size=100, max_iter=40, random_state=0
)
search = GridSearchCV(
    AttentionRegressor("difference", **settings), {"n_heads": [1, 2]}, cv=2
)
best = search.fit(X, y).best_estimator_
errors = dict(zip((1, 2), (1 - search.cv_results_["mean_test_score"]).tolist()))
print("relative MSE by heads:", {h: round(e, 3) for h, e in errors.items()})
print("grid search picks", search.best_params_)

# %%
# The task's own length shift scores the chosen model on rows twice and four
# times longer, with and without the scale; the model file names the task,
# and loads where the task is registered.
for scale in ("log", None):
    best.set_params(length_scale=scale)
    r2 = [
        LengthShiftScorer(factor=f, random_state=0)(best, X_test, y_test)
        for f in (2, 4)
    ]
    print(
        f"length_scale={scale!r}: R^2 at 2x and 4x the length: "
        f"{r2[0]:.3f}, {r2[1]:.3f}"
    )
best.set_params(length_scale="log")
path = os.path.join(tempfile.mkdtemp(), "difference.stsq")
save_model(best, path)
same = np.array_equal(load_model(path).predict(X_test), best.predict(X_test))
print("the loaded model predicts the same:", same)

# %%
# The readout of the two-head model: one head's output with weight +1 and
# the other's with -1, up to which head took which role (and a factor that
# makes up for heads that are not quite one-hot).
print(np.round(best.readout_, 2))

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.bar([str(h) for h in errors], list(errors.values()), color=["C3", "C0"])
ax.set(xlabel="heads", ylabel="relative MSE (cross-validated)")
ax.set_title("$x_a - x_b$: one head cannot")
fig.tight_layout()
plt.show()
