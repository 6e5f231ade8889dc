"""One registration is a whole task: every list of the package reads it from the registry.

A throwaway task, written here as a user or a new task's folder would write it
(its law, a pair of estimators, a generator, an experiment), is registered
with one call of :func:`stsq_learn.registry.register` and then found in each
list: the package's exports, ``stsq_learn.datasets``, the task registry, the
classes model files hold, the CLI's choices and help, ``reproduce --only``
(and a run of it), the API page's lists and the estimators the common tests
check. The registry is restored afterwards.
"""

import importlib.util
import json
import numbers
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from sklearn.utils._param_validation import Interval
from user_tasks import PairMeanTask, make_test_pair_mean

import stsq_learn
import stsq_learn.datasets
import stsq_learn.experiments
from stsq_learn import AttentionRegressor, FCNRegressor, load_model, registry, save_model
from stsq_learn.experiments import Settings
from stsq_learn.experiments._record import SIZES, Experiment
from stsq_learn.studies import BandDisplay, sweep

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]


class PairMeanAttention(AttentionRegressor):
    """The attention model on the pair-mean task."""

    _task = PairMeanTask


class PairMeanFCN(FCNRegressor):
    """The fully-connected net on the pair-mean task."""

    _task = PairMeanTask


class PairMeanSettings(Settings):
    """The settings of :func:`pair_mean_study`.

    Attributes
    ----------
    n_steps : int
        Online steps.
    """

    _parameter_constraints = {"n_steps": [Interval(numbers.Integral, 1, None, closed="left")]}

    n_steps: int = 40


def _run(cfg, seeds, *, device, progress, n_jobs):
    """Train the attention model on the task and score it, every seed (the throwaway study)."""
    model = PairMeanAttention(width=16, **({} if device is None else {"device": device}))
    table = sweep(model, PairMeanTask(6, 3), seeds=seeds, n_steps=cfg.n_steps, n_test=200,
                  n_jobs=n_jobs, progress=progress)  # fmt: skip
    return {"fits": table}


def _figure(result, axes=None):
    return BandDisplay.from_table(result.tables["fits"], x="seed", y="score").figure_


RECORD = Experiment(
    name="test_pair_mean_study",
    function_name="pair_mean_study",
    doc="Train the attention model on the task and score it (the throwaway experiment).",
    settings=PairMeanSettings,
    presets={size: {} for size in SIZES},
    run=_run,
    figure=_figure,
    headline=lambda view: {"r2": float(view.tables["fits"]["score"][0])},
    aliases=("pair",),
)
pair_mean_study = RECORD.function


@pytest.fixture
def registered():
    """Register the throwaway task for one test, then restore the registry as it was."""
    from stsq_learn.tasks import TASKS

    saved = (dict(registry._REGISTRATIONS), dict(TASKS), list(stsq_learn.__all__))
    reg = registry.register(
        PairMeanTask,
        estimators=(PairMeanAttention, PairMeanFCN),
        make=make_test_pair_mean,
        experiments=(RECORD,),
    )
    yield reg
    registry._REGISTRATIONS.clear()
    registry._REGISTRATIONS.update(saved[0])
    TASKS.clear()
    TASKS.update(saved[1])
    stsq_learn.__all__[:] = saved[2]
    for name in reg.public():
        delattr(stsq_learn, name)


def test_one_registration_puts_the_task_in_every_list(registered, tmp_path, capsys):
    names = ("PairMeanTask", "PairMeanAttention", "PairMeanFCN", "make_test_pair_mean")
    # the package's exports and the datasets module
    for name in names:
        assert name in stsq_learn.__all__ and getattr(stsq_learn, name) is not None
    assert stsq_learn.datasets.make_test_pair_mean is make_test_pair_mean
    assert "make_test_pair_mean" in stsq_learn.datasets.__all__
    # the task registry: estimators take it by name
    from stsq_learn.tasks import TASKS, get_task

    assert TASKS["test_pair_mean"] is PairMeanTask is get_task("test_pair_mean")
    # the common tests' estimators and the API page's lists
    assert {PairMeanAttention, PairMeanFCN} <= set(registry.estimators())
    spec = importlib.util.spec_from_file_location("_registry", ROOT / "docs" / "_registry.py")
    lists = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lists)
    text = lists.api_lists()
    for name in names:
        assert f"   {name}\n" in text
    # the classes model files hold: a fitted estimator saves and loads
    X, y = make_test_pair_mean(200, random_state=0)
    model = PairMeanAttention(width=8, max_iter=3, random_state=0).fit(X, y)
    save_model(model, tmp_path / "m.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "m.stsq").predict(X), model.predict(X))
    # the experiments: reproduce --only, its presets, the functions of stsq_learn.experiments
    from stsq_learn import experiments
    from stsq_learn.experiments._reproduce import resolve_experiments

    assert resolve_experiments("pair") == ["test_pair_mean_study"]
    assert "test_pair_mean_study" in experiments.EXPERIMENTS
    assert experiments.PRESETS["tiny"]["test_pair_mean_study"] == {"n_steps": 40}
    assert experiments.pair_mean_study is pair_mean_study
    assert {"pair_mean_study", "PairMeanSettings"} <= set(experiments.__all__)
    results = experiments.reproduce("tiny", only="pair", out=tmp_path / "out", progress=False)
    (r2,) = results["test_pair_mean_study"].headline()["r2"]
    assert r2 > 0.3
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["experiments"]["test_pair_mean_study"]["headline"]["r2"]["values"] == [r2]
    assert (tmp_path / "out" / "test_pair_mean_study.png").exists()
    # the CLI's choices and help texts
    from stsq_learn.cli import main

    for argv in (["fit", "--help"], ["reproduce", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps at any space
    assert "test_pair_mean" in text and "test_pair_mean_study (or pair)" in text


def test_the_registry_is_restored_after_the_throwaway(registered):
    assert "test_pair_mean" in registry._REGISTRATIONS


def test_the_throwaway_is_gone_afterwards():
    from stsq_learn.tasks import TASKS

    assert "test_pair_mean" not in TASKS and "PairMeanTask" not in stsq_learn.__all__
    assert "test_pair_mean_study" not in stsq_learn.experiments.EXPERIMENTS


def test_a_registration_is_refused_before_anything_is_listed():
    from stsq_learn.tasks import TASKS

    before = (list(TASKS), list(stsq_learn.__all__))
    with pytest.raises(TypeError, match="estimators must be classes"):
        registry.register(PairMeanTask, estimators=(PairMeanAttention(),))
    with pytest.raises(ValueError, match="public name 'make_sparse_averaging' is already"):
        registry.register(PairMeanTask, make=_impostor())
    assert (list(TASKS), list(stsq_learn.__all__)) == before


def _impostor():
    def make_sparse_averaging():
        """Not the package's generator."""

    return make_sparse_averaging


def test_every_builtin_task_but_selection_is_named_by_two_files_at_most():
    """The count of ``tools/task_homes.py``: a task's code lives in its home."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "task_homes.py"), "--max", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    for task in ("averaging", "retrieval", "single_location"):
        assert int(counts[task].split()[0]) <= 2
