import numpy as np
import pytest
import torch

from stsq_learn import make_sparse_token_selection

torch.set_num_threads(min(2, torch.get_num_threads()))

# Importing it registers a task and an experiment (what `stsq-learn --import` loads in
# test_cli): --doctest-modules must not import it, and so register them, for every test.
collect_ignore = ["cli_user_task.py"]


@pytest.fixture(scope="session")
def small_data():
    """Train and test rows at T=16, d=8, q=3 (the acceptance setting)."""
    X, y = make_sparse_token_selection(2000, 16, 8, 3, random_state=0)
    X_test, y_test = make_sparse_token_selection(1000, 16, 8, 3, random_state=1)
    return X, y, X_test, y_test


@pytest.fixture(scope="session")
def tiny_data():
    X, y = make_sparse_token_selection(120, 6, 3, 2, random_state=0)
    return X, y


@pytest.fixture
def rng():
    return np.random.default_rng(0)
