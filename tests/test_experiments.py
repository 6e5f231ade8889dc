"""The experiment layer: one result type, settings with declared constraints, one record.

Every registered experiment is checked against the same rules: one signature and
one set of defaults, its shared parameters documented once, every setting with a
constraint, presets made of changes, provenance saying paper or ours.
"""

import dataclasses
import importlib
import inspect
import json
import math
import numbers

import matplotlib
import numpy as np
import pytest
import seed_experiments as se
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions

import stsq_learn.experiments
from stsq_learn import SparseTokenSelector
from stsq_learn.experiments import (
    EXPERIMENTS,
    PRESETS,
    SIZES,
    ExperimentResult,
    MappingOf,
    SequenceOf,
    Settings,
    plan,
    reproduce,
)
from stsq_learn.experiments._registered import RECORDS
from stsq_learn.experiments._reproduce import resolve_experiments
from stsq_learn.experiments._settings import positive_ints, to_json
from stsq_learn.studies import StudyTable

matplotlib.use("Agg")


def _result(**changes):
    tables = {
        "curve": StudyTable(
            {
                "seed": [0, 0, 1, 1],
                "param_seq_len": [4, 8, 4, 8],
                "value": [1.0, math.inf, 1.5, math.nan],
            }
        ),
        "theory": StudyTable({"param_seq_len": [4, 8], "value": [1.2, 2.2]}),
    }
    fields = {"experiment": "test_level", "settings": {"level": 1.0}, "tables": tables}
    return ExperimentResult(**{**fields, "seconds": {"total": 0.5}, **changes})


# --- the result -------------------------------------------------------------------------


def test_a_result_holds_every_seed_and_a_seed_view_holds_one():
    result = _result()
    assert result.seeds == (0, 1)
    one = result.seed(1)
    assert one.seeds == (1,) and one.tables["curve"]["value"][0] == 1.5
    assert one.tables["theory"] == result.tables["theory"]  # what no seed changes, kept whole
    assert len(result.tables["curve"]) == 4  # the view left the result as it was
    with pytest.raises(
        ValueError, match=r"seed 7 is not a seed of this result; its seeds: \(0, 1\)"
    ):
        result.seed(7)
    assert "seeds [0, 1]" in repr(result)


def test_a_result_round_trips_through_json_infinities_and_missing_values_included():
    result = _result()
    again = ExperimentResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert again.tables["curve"]["value"][1] == math.inf and math.isnan(
        again.tables["curve"]["value"][3]
    )
    assert again != _result(settings={"level": 2.0}) and result != "a result"
    with pytest.raises(ValueError, match="experiment, settings, tables"):
        ExperimentResult.from_dict({"experiment": "x"})


@pytest.mark.parametrize(
    ("changes", "error", "fragment"),
    [
        ({"experiment": ""}, TypeError, "experiment must be a non-empty str"),
        ({"settings": [1]}, TypeError, "settings must be a dict (JSON), got list"),
        ({"tables": {"t": {"a": [1]}}}, TypeError, "tables['t'] must be a StudyTable, got dict"),
    ],
)
def test_a_result_refuses_what_it_cannot_hold(changes, error, fragment):
    with pytest.raises(error) as info:
        _result(**changes)
    assert fragment in str(info.value)


def test_a_result_of_an_unregistered_experiment_says_so():
    with pytest.raises(
        ValueError, match=r"no registered experiment is named 'mine' \(registered: "
    ):
        _result(experiment="mine").plot()


def test_headline_numbers_are_checked_seed_by_seed():
    record = dataclasses.replace(se.LEVEL, headline=lambda r: [1.0])
    with pytest.raises(TypeError, match="must return a dict of str to float, got list"):
        record.headline_numbers(_result())
    record = dataclasses.replace(se.LEVEL, headline=lambda r: {"x": "high"})
    with pytest.raises(TypeError, match=r"test_level\.x must be a real number, got 'high'"):
        record.headline_numbers(_result())


def test_a_seed_view_gives_a_one_seed_runs_numbers():
    three = se.level_study(seeds=[4, 5, 6])
    for s in (4, 5, 6):
        assert three.seed(s).bands() == se.level_study(seeds=[s]).bands()
    assert three.bands()["value"]["values"] == [1.0 + se.noise(s) for s in (4, 5, 6)]


# --- the record and its one call ----------------------------------------------------------


def test_a_record_needs_every_size_and_presets_made_of_settings():
    presets = {size: {} for size in SIZES[:-1]}
    with pytest.raises(ValueError, match=r"no preset for \['gpu'\]"):
        dataclasses.replace(se.LEVEL, presets=presets)
    with pytest.raises(ValueError, match=r"preset 'gpu': 'huge' names no size"):
        dataclasses.replace(se.LEVEL, presets={**presets, "gpu": "huge"})
    with pytest.raises(ValueError, match=r"preset 'tiny': \['levl'\] are not settings of"):
        dataclasses.replace(se.LEVEL, presets={**presets, "tiny": {"levl": 2}, "gpu": {}})
    with pytest.raises(ValueError, match=r"preset 'tiny': The 'level' parameter of LevelSettings"):
        dataclasses.replace(se.LEVEL, presets={**presets, "tiny": {"level": "2"}, "gpu": {}})
    shared = dataclasses.replace(
        se.LEVEL, presets={**presets, "quick": {"level": 3.0}, "gpu": "quick"}
    )
    assert shared.presets["gpu"] is shared.presets["quick"] and shared.presets["gpu"].level == 3.0
    assert shared.presets["tiny"] == se.LevelSettings()  # {}: the settings' defaults


@pytest.mark.parametrize(
    ("changes", "error", "fragment"),
    [
        ({"settings": dict}, TypeError, "settings must be a subclass of"),
        ({"run": 3}, TypeError, "run must be callable"),
        ({"headline": 3}, TypeError, "headline must be a callable or None"),
        ({"provenance": {"lr": "the paper's"}}, ValueError, "must start with 'paper:' or 'ours:'"),
        ({"reference_rtol": {"x": -1.0}}, ValueError, "reference_rtol maps number patterns"),
        ({"reference_atol": {"x": True}}, ValueError, "reference_atol maps number patterns"),
    ],
)
def test_a_record_refuses_a_bad_field(changes, error, fragment):
    with pytest.raises(error) as info:
        dataclasses.replace(se.LEVEL, **changes)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"seeds": 0}, ValueError, "seeds must be a positive number of seeds"),
        ({"seeds": [1, 1]}, ValueError, "seeds holds 1 twice"),
        ({"seeds": [2**31]}, ValueError, "seeds[0] must lie in [0, 2147483646]"),
        ({"device": "gpu"}, ValueError, "gpu"),
        ({"progress": 1}, TypeError, "progress must be True or False, got 1"),
        ({"n_jobs": 0}, ValueError, "n_jobs must be None, a positive int"),
        ({"level": "high"}, InvalidParameterError, "The 'level' parameter of LevelSettings"),
        ({"levl": 1.0}, ValueError, "['levl'] are not settings of LevelSettings"),
        ({"settings": "huge"}, ValueError, "settings='huge' names no size"),
        ({"settings": 3}, TypeError, "got int: 3"),
        ({"settings": se.FitSettings()}, TypeError, "settings must be LevelSettings"),
    ],
)
def test_every_argument_is_refused_by_name_before_any_work(monkeypatch, kwargs, error, fragment):
    def work(*args, **kwargs):
        raise AssertionError("work started")

    record = dataclasses.replace(se.LEVEL, run=work)
    with pytest.raises(error) as info:
        record(kwargs.pop("settings", None), kwargs, **{
            k: kwargs.pop(k) for k in ("seeds", "device", "progress", "n_jobs") if k in kwargs
        })  # fmt: skip
    assert fragment in str(info.value)


def test_a_run_returns_named_study_tables():
    record = dataclasses.replace(se.LEVEL, run=lambda cfg, seeds, **kw: [1])
    with pytest.raises(TypeError, match="run must return a dict of name to StudyTable, got list"):
        record(seeds=1)
    result = se.level_study("quick", seeds=2, level=2.0)
    assert result.settings == {"level": 2.0} and result.seeds == (0, 1)
    assert set(result.seconds) == {"total"}


def test_every_experiment_has_the_one_signature_and_its_shared_docs():
    expected = inspect.signature(se.level_study)
    assert list(expected.parameters) == [
        "settings", "seeds", "device", "progress", "n_jobs", "changes"
    ]  # fmt: skip
    for name, record in RECORDS.items():
        function = record.function
        module = importlib.import_module(function.__module__)
        assert inspect.signature(function) == expected, name
        assert getattr(module, function.__name__) is function, name  # bound in its module
        assert function.__globals__ is vars(module), name  # its examples run in its module
        assert function.__name__ in dir(stsq_learn.experiments), name
        doc = inspect.getdoc(function)
        assert "The experiment's settings: an instance of its settings class" in doc, name
        assert doc.index("Parameters") < doc.index("Returns") < doc.index("Examples"), name


def test_a_records_function_calls_it_and_pickles_by_its_name():
    import pickle

    cloudpickle = pytest.importorskip("cloudpickle")  # what sends a record to a worker

    assert se.level_study.__name__ == "level_study" and se.level_study.__module__ == se.__name__
    again = pickle.loads(cloudpickle.dumps(se.LEVEL))
    assert again.function is not se.level_study and again.function(seeds=[2]).seeds == (2,)
    assert pickle.loads(pickle.dumps(se.level_study)) is se.level_study
    with pytest.raises(ValueError, match="function_name must be a Python name, got 'a b'"):
        dataclasses.replace(se.LEVEL, function_name="a b")


def test_every_experiment_declares_its_settings_with_constraints():
    for name, record in RECORDS.items():
        cls = record.settings
        assert issubclass(cls, Settings), name
        assert set(cls._parameter_constraints) >= set(cls.field_names()), name
        for field in cls.field_names():  # every setting is documented on its class
            assert field in cls.__doc__, (name, field)
        for size in SIZES:
            assert type(record.presets[size]) is cls, (name, size)
            assert PRESETS[size][name] is record.presets[size]
        assert json.loads(json.dumps(record.presets["tiny"].to_json())) is not None


def test_every_provenance_says_paper_or_ours():
    for name, record in RECORDS.items():
        for key, where in (record.provenance or {}).items():
            assert where.startswith(("paper: ", "ours: ")), (name, key)


def test_experiment_names_and_aliases():
    assert EXPERIMENTS == tuple(RECORDS)
    assert list(PRESETS) == list(SIZES) == ["tiny", "quick", "full", "gpu"]
    assert EXPERIMENTS[-2:] == ("in_context_regression", "copying")
    assert resolve_experiments(None) == list(EXPERIMENTS)
    for name, record in RECORDS.items():
        for alias in record.aliases:
            assert resolve_experiments([alias, name]) == [name]
    with pytest.raises(ValueError, match="bogus"):
        resolve_experiments("bogus")
    with pytest.raises(ValueError, match="preset must be one of"):
        plan("huge")
    with pytest.raises(ValueError, match="n_threads"):
        reproduce("tiny", n_threads=0, progress=False)


# --- settings: declared constraints, checked when made ------------------------------------


class _Grid(Settings):
    """Settings of a test.

    Attributes
    ----------
    widths, rate, solver, per_model, model
        What the test checks.
    """

    _parameter_constraints = {
        "widths": [positive_ints(min_len=2, increasing=True)],
        "rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "solver": [StrOptions({"sgd", "adam"})],
        "per_model": [
            MappingOf({"transformer", "fcn"}, Interval(numbers.Integral, 1, None, closed="left")),
            None,
        ],
        "model": [object],
    }

    widths: tuple = (4, 8)
    rate: float = 0.1
    solver: str = "adam"
    per_model: dict | None = None
    model: object = None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        (
            {"widths": (8, 4)},
            "The 'widths' parameter of _Grid must be a list or tuple of at least "
            "2 items, each an int in the range [1, inf), strictly increasing. "
            "Got (8, 4) instead.",
        ),
        ({"widths": (4,)}, "Got (4,) instead."),
        ({"widths": "48"}, "Got '48' instead."),
        ({"widths": (4, 8.0)}, "Got (4, 8.0) instead."),
        ({"rate": 0}, "The 'rate' parameter of _Grid must be a float in the range ("),
        ({"rate": math.nan}, "Got nan instead."),
        ({"solver": "lbfgs"}, "The 'solver' parameter of _Grid must be a str among"),
        ({"per_model": {"cnn": 3}}, "must be a dict of 'fcn' or 'transformer' to an int"),
        ({"per_model": {"fcn": 0}}, "Got {'fcn': 0} instead."),
    ],
)
def test_a_bad_setting_is_refused_naming_it_and_its_value(changes, fragment):
    with pytest.raises(InvalidParameterError) as info:
        _Grid(**changes)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_settings_keep_tuples_copy_on_replace_and_write_json():
    grid = _Grid(widths=[2, 4, 8], per_model={"fcn": 2}, model=SparseTokenSelector(8))
    assert grid.widths == (2, 4, 8)  # a list is kept as a tuple
    assert grid.replace(rate=0.5).rate == 0.5 and grid.rate == 0.1
    with pytest.raises(dataclasses.FrozenInstanceError):
        grid.rate = 1.0
    out = grid.to_json()
    assert out["widths"] == [2, 4, 8] and out["per_model"] == {"fcn": 2}
    assert out["model"] == "SparseTokenSelector(width=8)"
    assert to_json([math.inf, -math.inf, math.nan, np.float32(0.5)]) == ["inf", "-inf", None, 0.5]
    assert grid == {**dict(grid)}  # compares with a mapping by its items
    with pytest.raises(ValueError, match=r"\['rte'\] are not settings of _Grid"):
        grid.replace(rte=1)


def test_a_setting_without_a_constraint_is_refused_when_its_class_is_defined():
    with pytest.raises(TypeError, match=r"_Bare declares no constraint for the settings \['n'\]"):

        class _Bare(Settings):
            n: int = 1


def test_cross_setting_checks_run_after_each_settings_own():
    class _Pair(Settings):
        _parameter_constraints = {"low": [int], "high": [int]}
        low: int = 1
        high: int = 2

        def _validate(self):
            if self.low >= self.high:
                raise ValueError(f"low={self.low} must be below high={self.high}.")

    with pytest.raises(ValueError, match="low=3 must be below high=2"):
        _Pair(low=3)
    with pytest.raises(InvalidParameterError, match="'low' parameter"):
        _Pair(low="3")  # each setting's own constraint first


def test_sequence_and_mapping_constraints_read_as_text():
    assert str(SequenceOf(str)) == "a list or tuple of at least 1 items, each an instance of 'str'"
    assert np.all([SequenceOf(int).is_satisfied_by(v) for v in ([1], (1, 2))])
    assert not SequenceOf(int).is_satisfied_by([]) and not SequenceOf(int).is_satisfied_by({1})
    assert MappingOf(None, int).is_satisfied_by({"a": 1}) and not MappingOf(
        None, int
    ).is_satisfied_by({1: 1})
