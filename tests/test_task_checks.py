"""A malformed task of one's own is refused before any training, naming class, member and value."""

from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from user_tasks import PairMeanTask

from stsq_learn import AttentionRegressor, FCNRegressor, SparseTokenSelectionTask, Task
from stsq_learn.nn.queries import Selection
from stsq_learn.tasks import register_task
from stsq_learn.tasks.checks import check_task, check_task_class

MeanTask = PairMeanTask  # a well-formed task of one's own (tests/user_tasks.py)


def _variant(name, **members):
    """A subclass of MeanTask with some members replaced (a dataclass, as tasks are)."""
    return dataclass(frozen=True)(type(name, (MeanTask,), {"name": f"test-{name}", **members}))


def _wide_y(self, n_samples, rng):
    X, y = MeanTask._sample(self, n_samples, rng)
    return X, np.concatenate([y, y], axis=1)


def _no_marks(self, n_samples, rng):
    X, y = MeanTask._sample(self, n_samples, rng)
    return X[..., :-1], y


def _flat_x(self, n_samples, rng):
    X, y = MeanTask._sample(self, n_samples, rng)
    return X.reshape(n_samples, -1), y


def _bad_marks(self, n_samples, rng):
    X, y = MeanTask._sample(self, n_samples, rng)
    X[..., -1] *= 0.5
    return X, y


MALFORMED = [
    ("WideY", {"_sample": _wide_y}, ValueError, ["WideY._sample", "(2, 8)", "(2, 4)"]),
    ("NoMarks", {"_sample": _no_marks}, ValueError, ["NoMarks._sample", "4 channels", "Selection"]),
    ("FlatX", {"_sample": _flat_x}, ValueError, ["FlatX._sample", "(2, 30)"]),
    ("HalfMarks", {"_sample": _bad_marks}, ValueError, ["HalfMarks._sample", "indicator"]),
    ("IntStructure", {"structure": int}, TypeError, ["IntStructure.structure", "<class 'int'>"]),
    ("ZeroMSE", {"trivial_mse": 0.0}, ValueError, ["ZeroMSE.trivial_mse", "got 0.0"]),
    ("NegativeMSE", {"trivial_mse": -1.0}, ValueError, ["NegativeMSE.trivial_mse", "got -1.0"]),
    ("NanMSE", {"trivial_mse": float("nan")}, ValueError, ["NanMSE.trivial_mse", "nan"]),
    ("TextMSE", {"trivial_mse": "1"}, TypeError, ["TextMSE.trivial_mse", "'1'"]),
]


@pytest.mark.parametrize(("name", "members", "error", "fragments"), MALFORMED)
@pytest.mark.parametrize("estimator", [AttentionRegressor, FCNRegressor])
def test_malformed_task_refused_before_online_training(name, members, error, fragments, estimator):
    cls = _variant(name, **members)
    model = estimator(cls, width=4, max_iter=1, random_state=0)
    with pytest.raises(error) as exc:
        model.fit_online(cls(6, 4), n_steps=1)
    for fragment in fragments:
        assert fragment in str(exc.value)
    with pytest.raises(NotFittedError):
        model.predict(MeanTask(6, 4).sample(2, random_state=0)[0])


@pytest.mark.parametrize(("name", "members", "error", "fragments"), MALFORMED)
def test_malformed_task_refused_before_fit(name, members, error, fragments):
    cls = _variant(name, **members)
    X, y = MeanTask(6, 4).sample(20, random_state=0)
    model = AttentionRegressor(cls, width=4, max_iter=1, random_state=0)
    with pytest.raises(error) as exc:
        model.fit(X, y)
    assert fragments[0] in str(exc.value)
    assert not hasattr(model, "task_")


def test_missing_required_members_named_at_registration_and_fit():
    @dataclass(frozen=True)
    class Partial(Task):
        seq_len: int
        n_features: int
        name = "test-partial"
        structure = Selection

        def _sample(self, n_samples, rng):
            return MeanTask._sample(self, n_samples, rng)

    with pytest.raises(TypeError, match=r"Partial does not define check_rows, from_data, shift"):
        register_task(Partial)
    X, y = MeanTask(6, 4).sample(20, random_state=0)
    with pytest.raises(TypeError, match=r"Partial does not define check_rows, from_data, shift"):
        AttentionRegressor(Partial, width=4, max_iter=1).fit(X, y)
    with pytest.raises(TypeError, match="Can't instantiate abstract class Partial"):
        Partial(6, 4)


def test_contract_refusing_its_own_law_is_named():
    def strict_rows(self, X, owner="the model"):
        raise ValueError("rows must be longer than 100 tokens")

    cls = _variant("Strict", check_rows=strict_rows)
    with pytest.raises(ValueError, match=r"Strict.check_rows refuses two rows of the task's own"):
        check_task(cls(6, 4))


def test_well_formed_tasks_pass_and_train():
    check_task_class(MeanTask)
    assert check_task(MeanTask(6, 4)) == MeanTask(6, 4)
    for task in (SparseTokenSelectionTask(8, 3, 2), SparseTokenSelectionTask((6, 9), 3, (1, 3))):
        check_task(task)
    model = AttentionRegressor(MeanTask, width=8, random_state=0).fit_online(MeanTask(6, 4), 3)
    assert model.predict(MeanTask(6, 4).sample(5, random_state=1)[0]).shape == (5, 4)


def test_builtin_tasks_pass_their_own_checks():
    from stsq_learn.tasks import TASKS

    for cls in TASKS.values():
        check_task_class(cls)
    from stsq_learn import SingleLocationTask, SparseAveragingTask, SparseRetrievalTask

    for task in (
        SparseAveragingTask(8, 3, 2),
        SparseRetrievalTask(8, 3, 2),
        SingleLocationTask(6, 4),
    ):
        check_task(task)


def test_floor_scale_derived_for_a_user_task_that_sums_encodings():
    """A task with the Selection structure gets length_scale='floor' without any flag."""
    model = AttentionRegressor(MeanTask, width=16, length_scale="floor", random_state=0)
    model.fit_online(MeanTask(6, 4), n_steps=30)
    X_long, _ = MeanTask(12, 4).sample(50, random_state=1)
    floor = model.predict(X_long)
    plain = model.set_params(length_scale=None).predict(X_long)
    assert floor.shape == plain.shape == (50, 4)
    assert not np.allclose(floor, plain)  # the scale acts at another length


def test_floor_flag_without_query_sizes_is_refused_by_name():
    from stsq_learn.queries import Slots

    def slot_queries(self, X):
        import torch

        return Slots(X, self.n_features, torch.zeros(len(X), 1, dtype=torch.long))

    cls = _variant("FlaggedSlots", structure=Slots, queries=slot_queries)
    cls.isotropic_floor_applies = True
    model = AttentionRegressor(cls, width=8, length_scale="floor", random_state=0)
    with pytest.raises(ValueError, match=r"FlaggedSlots.isotropic_floor_applies is True, but"):
        model.fit_online(cls(6, 4), n_steps=2)
    unflagged = _variant("PlainSlots", structure=Slots, queries=slot_queries)
    with pytest.raises(ValueError, match=r"queries of the task 'test-PlainSlots' are not sums"):
        AttentionRegressor(unflagged, width=8, length_scale="floor").fit_online(unflagged(6, 4), 2)
