"""The task protocol and registry: tasks by name or class, a task of one's own end to end."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from stsq_learn import (
    AttentionRegressor,
    FCNRegressor,
    LengthShiftScorer,
    SparseAveragingTask,
    SparseRetrievalTask,
    SparseTokenSelectionTask,
    Task,
    load_model,
    save_model,
)
from stsq_learn.nn.queries import Slots
from stsq_learn.tasks import TASKS, get_task, register_task
from stsq_learn.tasks._shift import move_marked_rows


@dataclass(frozen=True)
class DifferenceTask(Task):
    """y = x_a - x_b for the positions of roles 1 and 2 (a task defined outside the package)."""

    seq_len: int
    n_features: int

    name = "test-difference"
    structure = Slots
    readout_required = True

    def __post_init__(self):
        self.check_sizes()

    n_slots = 2  # the two roles' encodings side by side

    @property
    def trivial_mse(self):
        return 2.0 * self.n_features

    def _sample(self, n_samples, rng):
        T, d = self.seq_len, self.n_features
        tokens = rng.standard_normal((n_samples, T, d))
        named = rng.random_sample((n_samples, T)).argsort(axis=1)[:, :2]
        rows = np.arange(n_samples)[:, None]
        roles = np.zeros((n_samples, T))
        roles[rows, named] = (1.0, 2.0)
        y = tokens[rows, named[:, :1]][:, 0] - tokens[rows, named[:, 1:]][:, 0]
        return np.concatenate([tokens, roles[..., None]], axis=2), y

    @classmethod
    def from_data(cls, X, y):
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if X.ndim != 3 or y.shape != (len(X), X.shape[2] - 1):
            raise ValueError(f"bad shapes {X.shape}, {y.shape}")
        return cls(X.shape[1], X.shape[2] - 1), X, y

    def check_rows(self, X, owner="the model"):
        X = np.asarray(X, dtype=float)
        if X.ndim != 3 or X.shape[2] != self.n_features + 1:
            raise ValueError(f"{owner} reads rows of {self.n_features + 1} channels")
        return X

    def shift(self, X, y, seq_len, random_state=None):
        return move_marked_rows(X, X[..., -1] != 0, seq_len, random_state), y

    def queries(self, X):
        roles = X[..., -1]
        where = torch.stack([roles.eq(1).float().argmax(1), roles.eq(2).float().argmax(1)], 1)
        return Slots(X, self.n_features, where)

    @property
    def n_outputs(self):
        return self.n_features


def test_check_sizes_is_public_and_the_old_name_still_works():
    """A subclass validates its sizes with Task.check_sizes; 0.6's _check_sizes still does."""
    assert DifferenceTask((8, 8), np.int64(2)) == DifferenceTask(8, 2)
    with pytest.raises(ValueError, match=r"^n_features must be an integer >= 1, got 0\.$"):
        DifferenceTask(8, 0)

    @dataclass(frozen=True)
    class OldStyle(DifferenceTask):
        def __post_init__(self):
            self._check_sizes()

    assert OldStyle((5, 5), 2).seq_len == 5
    with pytest.raises(ValueError, match="seq_len"):
        OldStyle(0, 2)


def test_the_registry_names_the_three_tasks_and_resolves_names_classes_objects():
    assert TASKS["selection"] is SparseTokenSelectionTask
    assert TASKS["averaging"] is SparseAveragingTask
    assert TASKS["retrieval"] is SparseRetrievalTask
    task = SparseAveragingTask(8, 2, 2)
    assert get_task("averaging") is get_task(SparseAveragingTask) is get_task(task)
    with pytest.raises(ValueError, match=r"task='nope' is not a registered task.*register_task"):
        get_task("nope")
    with pytest.raises(TypeError, match="task must be a task name"):
        get_task(3)
    with pytest.raises(TypeError, match="subclass of Task"):
        register_task(int)


def test_a_name_taken_by_another_class_is_refused():
    @dataclass(frozen=True)
    class Impostor(SparseTokenSelectionTask):
        name = "selection"

    with pytest.raises(ValueError, match="'selection' is already registered"):
        register_task(Impostor)
    assert register_task(SparseTokenSelectionTask) is SparseTokenSelectionTask


@pytest.mark.parametrize(
    "task",
    [
        SparseTokenSelectionTask(8, 3, 2),
        SparseAveragingTask(8, 3, 2),
        SparseRetrievalTask(8, 3, 2),
        DifferenceTask(8, 3),
    ],
    ids=lambda t: t.name,
)
def test_every_task_keeps_its_contract(task):
    X, y = task.sample(50, random_state=0)
    assert y.shape == task.output_shape(50, 8)
    fitted, X2, y2 = type(task).from_data(X, y)
    assert (fitted.seq_len, fitted.n_features) == (8, 3)
    np.testing.assert_array_equal(X2, X)
    X_long, y_long = fitted.shift(X2, y2, 16, random_state=0)
    assert X_long.shape == (50, 16, X.shape[2]) and y_long.shape == fitted.output_shape(50, 16)
    if y.shape == fitted.output_shape(50, 16):  # one answer per row: the targets stay
        np.testing.assert_array_equal(y_long, y2)
    Xt, yt = task.sample_torch(4, generator=torch.Generator().manual_seed(0))
    assert Xt.shape == (4, 8, X.shape[2]) and tuple(yt.shape) == task.output_shape(4, 8)
    assert task.trivial_mse > 0
    assert fitted.fcn_input_size() == int(task.fcn_inputs(torch.as_tensor(X)).shape[1])


def test_a_range_of_lengths_draws_each_call_at_one_length_of_it():
    task = SparseTokenSelectionTask((8, 12), 2, 2)
    assert task.length_range == (8, 12) and task.reference_length == 12
    lengths = {task.sample(3, random_state=s)[0].shape[1] for s in range(30)}
    assert lengths <= set(range(8, 13)) and len(lengths) > 2
    g = torch.Generator().manual_seed(0)
    lengths = {task.sample_torch(3, generator=g)[0].shape[1] for _ in range(30)}
    assert lengths <= set(range(8, 13)) and len(lengths) > 2
    assert task.at_length(9) == SparseTokenSelectionTask(9, 2, 2)
    with pytest.raises(ValueError, match="shortest <= longest"):
        SparseTokenSelectionTask((12, 8), 2, 2)
    with pytest.raises(ValueError, match="cannot exceed seq_len=4"):
        SparseTokenSelectionTask((4, 12), 2, 5)


def test_an_estimator_takes_a_task_by_name_class_or_object():
    X, y = SparseAveragingTask(6, 2, 2).sample(80, random_state=0)
    by_name = AttentionRegressor("averaging", width=4, max_iter=2, random_state=0).fit(X, y)
    for task in (SparseAveragingTask, SparseAveragingTask(6, 2, 2)):
        other = AttentionRegressor(task, width=4, max_iter=2, random_state=0).fit(X, y)
        np.testing.assert_array_equal(other.predict(X), by_name.predict(X))
    with pytest.raises(ValueError, match="'nope' is not a registered task"):
        AttentionRegressor("nope").fit(X, y)
    with pytest.raises(TypeError, match="task must be a SparseAveragingTask"):
        clone(by_name).fit_online(SparseTokenSelectionTask(6, 2, 2), n_steps=2)


@pytest.mark.slow
def test_a_task_of_ones_own_trains_searches_shifts_and_saves(tmp_path):
    task = DifferenceTask(6, 2)
    X, y = task.sample(1200, random_state=0)
    X_test, y_test = task.sample(500, random_state=1)
    model = AttentionRegressor(DifferenceTask, width=12, n_heads=2, random_state=0)
    assert model.fit(X, y).score(X_test, y_test) > 0.9
    one_head = clone(model).set_params(n_heads=1).fit(X, y).score(X_test, y_test)
    assert one_head < 0.5  # one head averages: it cannot take a difference
    assert LengthShiftScorer(factor=2, random_state=0)(model, X_test, y_test) > 0.8
    short = clone(model).set_params(batch_size=100, max_iter=80)  # 240 steps a fit
    search = GridSearchCV(short, {"n_heads": [1, 2]}, cv=2).fit(X[:600], y[:600])
    assert search.best_params_ == {"n_heads": 2}
    with pytest.raises(TypeError, match="DifferenceTask is not registered"):
        save_model(model, tmp_path / "m.stsq")
    register_task(DifferenceTask)
    try:
        save_model(model, tmp_path / "m.stsq")
        loaded = load_model(tmp_path / "m.stsq")
        np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
        assert loaded.task == "test-difference"
    finally:
        del TASKS[DifferenceTask.name]
    with pytest.raises(ValueError, match="'test-difference' is not a registered task"):
        load_model(tmp_path / "m.stsq")
    fcn = FCNRegressor(DifferenceTask, width=32, max_iter=5, random_state=0).fit(X, y)
    assert fcn.predict(X_test).shape == y_test.shape
