"""The speed machinery of the encodings, length and averaging experiments (issue 33).

Searches whose fits stop once their held-out rows meet the target, worker processes that
do not change the numbers, validation rows moved to each length once, and the
records' headline numbers and provenance.
"""

import math

import pytest
import torch

from stsq_learn import (
    LengthShiftScorer,
    SparseAveragingTask,
    SparseTokenAverager,
    SparseTokenSelectionTask,
    SparseTokenSelector,
)
from stsq_learn.experiments._common import ShiftedRows, n_workers, run_jobs
from stsq_learn.experiments._records import encodings as enc_record
from stsq_learn.experiments._records import length_generalization as len_record
from stsq_learn.experiments._width_search import fit_and_score, search_bracket
from stsq_learn.tasks.averaging import record as qsa_record

_ADAM = dict(solver="adam", learning_rate_init=0.1, learning_rate="cosine", random_state=0)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "estimator, task",
    [
        (SparseTokenSelector, SparseTokenSelectionTask(8, 2, 2)),
        (SparseTokenAverager, SparseAveragingTask(8, 2, 2)),
    ],
)
def test_a_search_fit_stops_once_its_held_out_rows_meet_the_target(estimator, task):
    # The averaging searches stop their fits as the separation's do (StopAtTarget on the
    # search's held-out rows): the score at the stop is the width's score.
    X, y = task.sample(500, random_state=1)
    model = estimator(**_ADAM)
    full, full_steps = fit_and_score(model, 16, task, 300, X, y)
    early, early_steps = fit_and_score(model, 16, task, 300, X, y, target=0.9)
    assert full_steps == 300 and full >= 0.9
    assert early_steps < 150 and early >= 0.9


def test_bracket_search_with_stopped_fits_finds_the_same_minimal_width():
    task = SparseAveragingTask(8, 2, 2)
    est = SparseTokenAverager(**_ADAM)
    args = (task, (4, 8, 16), 2, 200, 400, 0.9, 3, False, "t")
    full = search_bracket(est, *args)
    early = search_bracket(est, *args, stop_fits=True)
    assert sorted(full) == sorted(early)
    passing = [w for w in sorted(full) if full[w] >= 0.9]
    assert passing == [w for w in sorted(early) if early[w] >= 0.9]


@pytest.mark.parametrize(
    "n_jobs, n_tasks, expected", [(None, 5, 1), (1, 5, 1), (4, 2, 2), (2, 5, 2), (-1, 1, 1)]
)
def test_n_workers(n_jobs, n_tasks, expected):
    assert n_workers(n_jobs, n_tasks) == expected


@pytest.mark.parametrize(
    "n_jobs, error, fragment",
    [
        (0, ValueError, "n_jobs must be None, a positive int or a negative one"),
        (1.5, TypeError, "n_jobs must be None or an int, got float: 1.5"),
        ("2", TypeError, "n_jobs must be None or an int, got str: '2'"),
        (True, TypeError, "n_jobs must be None or an int, got bool: True"),
    ],
)
def test_n_workers_refuses_bad_n_jobs(n_jobs, error, fragment):
    with pytest.raises(error, match=fragment):
        n_workers(n_jobs, 3)


def test_run_jobs_in_one_process_keeps_the_order():
    assert run_jobs(divmod, [(7, 2), (9, 4), (1, 1)], None) == [(3, 1), (2, 1), (1, 0)]


@pytest.mark.parametrize("lengths", [(8,), (8, 16, 32)])
def test_shifted_rows_score_as_the_length_shift_scorer(lengths):
    task = SparseTokenSelectionTask(8, 2, 2)
    model = SparseTokenSelector(8, **_ADAM).fit_online(task, 20)
    X, y = task.sample(64, random_state=1)
    shifted = ShiftedRows(model.task_, X, y, lengths, 11)
    for t in lengths:
        assert shifted.score(model, t) == LengthShiftScorer(t, random_state=11)(model, X, y)


@pytest.mark.parametrize("record", [enc_record, len_record, qsa_record])
def test_provenance_says_paper_or_ours_for_every_setting(record):
    assert record.PROVENANCE
    for name, origin in record.PROVENANCE.items():
        assert isinstance(name, str)
        assert origin.startswith(("paper: ", "ours"))
    papers = {k for k, v in record.PROVENANCE.items() if v.startswith("paper")}
    assert {"tokens", "subsets"} <= papers
    # Sizes, steps and optimisers are ours in every record.
    for name in ("n_steps", "solver", "learning_rate_init", "n_features", "metric"):
        if name in record.PROVENANCE:
            assert record.PROVENANCE[name].startswith("ours")


def test_length_provenance_names_the_paper_validation_set():
    assert len_record.PROVENANCE["n_val_128"].startswith("paper: a fixed 128-row")
    assert len_record.PROVENANCE["batch_size"].startswith("paper: a fresh batch of 256 rows")


@pytest.fixture(scope="module")
def tiny_results():
    from stsq_learn.experiments import reproduce

    names = ["encodings", "length_generalization", "qsa"]
    return reproduce("tiny", only=names, progress=False, n_threads=1)


@pytest.mark.parametrize(
    "record, name, keys",
    [
        (
            enc_record,
            "encodings",
            ["stochastic_r2_at_2T", "fixed_r2_at_1T", "codebook_L16_r2_at_2T"],
        ),
        (len_record, "length_generalization", ["stochastic_r2_at_2T", "fixed_r2_at_1T"]),
        (qsa_record, "qsa", ["attention_width_N4", "transfer_floor", "length_stochastic_r2_at_2N"]),
    ],
)
def test_headline_is_flat_names_to_floats(tiny_results, record, name, keys):
    head = record.headline(tiny_results[name])
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in head.items())
    for key in keys:
        assert key in head


def test_length_headline_reads_the_result(tiny_results):
    res = tiny_results["length_generalization"]
    head = len_record.headline(res)
    assert head["stochastic_r2_at_2T"] == res.at("stochastic", 2)
    assert head["fixed_r2_at_1T"] == res.at("fixed", 1)
    assert not any("floor_ratio" in k for k in head)  # the tiny preset computes no floor


def test_encodings_headline_reads_the_result(tiny_results):
    res = tiny_results["encodings"]
    head = enc_record.headline(res)
    assert head["stochastic_r2_at_2T"] == res.at("stochastic", 2)
    assert head["codebook_L16_r2_at_2T"] == res.codebook_at(16, 2)
    assert math.isnan(head["codebook_L8_r2_at_2T"])  # a codebook of 8 cannot score at 16
