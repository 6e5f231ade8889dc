"""A task of one's own, as a user (or a new task's folder) writes it, for the tests.

The mean of two marked Gaussian tokens: selected by position, with the
``Selection`` query structure, a strict contract and a length shift.
"""

from dataclasses import dataclass

import numpy as np

from stsq_learn import Task
from stsq_learn.queries import Selection


@dataclass(frozen=True)
class PairMeanTask(Task):
    """The mean of two marked Gaussian tokens (a position-selected task of one's own)."""

    seq_len: int
    n_features: int

    name = "test_pair_mean"
    structure = Selection

    def __post_init__(self):
        self.check_sizes()

    @property
    def trivial_mse(self):
        return self.n_features / 2

    def _sample(self, n_samples, rng):
        T, d = self.seq_len, self.n_features
        tokens = rng.standard_normal((n_samples, T, d))
        marks = np.zeros((n_samples, T, 1))
        chosen = rng.random_sample((n_samples, T)).argsort(1)[:, :2]
        np.put_along_axis(marks[..., 0], chosen, 1.0, axis=1)
        return np.concatenate([tokens, marks], axis=2), (tokens * marks).sum(1) / 2

    @classmethod
    def from_data(cls, X, y):
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if X.ndim != 3 or y.shape != (len(X), X.shape[2] - 1):
            raise ValueError(f"X {X.shape} and y {y.shape} are not pair-mean rows.")
        return cls(X.shape[1], X.shape[2] - 1), X, y

    def check_rows(self, X, owner="the model"):
        X = np.asarray(X, dtype=float)
        if X.ndim != 3 or X.shape[2] != self.n_features + 1:
            raise ValueError(f"{owner} reads rows of {self.n_features + 1} channels.")
        return X

    def shift(self, X, y, seq_len, random_state=None):
        rng = np.random.default_rng(random_state)
        n, T, c = X.shape
        new = np.concatenate(
            [rng.standard_normal((n, seq_len - T, c - 1)), np.zeros((n, seq_len - T, 1))], axis=2
        )
        order = rng.random((n, seq_len)).argsort(axis=1)
        return np.take_along_axis(np.concatenate([X, new], axis=1), order[..., None], 1), y


def make_test_pair_mean(n_samples=100, seq_len=6, n_features=3, *, random_state=None):
    """Rows of the pair-mean task."""
    return PairMeanTask(seq_len, n_features).sample(n_samples, random_state=random_state)
