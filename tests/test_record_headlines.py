"""The records' headline numbers and provenance (encodings, length)."""

import math

import pytest
import torch

from stsq_learn.experiments._records import encodings as enc_record
from stsq_learn.experiments._records import length_generalization as len_record


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("record", [enc_record, len_record])
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

    names = ["encodings", "length_generalization"]
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
