"""Copying: the law, the contract's errors, the shift, the copiers, the theory, the metrics."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV

from stsq_learn import (
    CopyingTask,
    FixedStateCopier,
    LengthShiftScorer,
    LSTMCopier,
    NGramCopier,
    TransformerCopier,
    fixed_state_error_bound,
    length_shift_scoring,
    load_model,
    make_copying,
    ngram_error_bound,
    save_model,
    string_accuracy,
    token_accuracy,
)
from stsq_learn.nn import SequenceCrossEntropy
from stsq_learn.tasks.copying.modules import CausalTransformer, RecurrentCopier, teacher_forced

SMALL = dict(width=16, n_heads=2, batch_size=16, random_state=0)
# A few steps of a cosine schedule leave the loss at log(D + 1), "no better than no model".
pytestmark = pytest.mark.filterwarnings("ignore:.*worse than no model:UserWarning")


def _fitted(cls=TransformerCopier, n_steps=5, **params):
    kwargs = {**SMALL, **params} if cls is TransformerCopier else {"hidden_size": 8, **params}
    kwargs.setdefault("random_state", 0)
    return cls(**kwargs).fit_online(CopyingTask(6, 4, min_len=2), n_steps=n_steps)


# -- the law -------------------------------------------------------------------------------
def test_the_law_draws_uniform_strings_of_uniform_lengths_padded_after_their_end():
    X, y = make_copying(20_000, 8, vocab_size=5, min_len=3, random_state=0)
    assert X.shape == (20_000, 8) and X.dtype == np.int64
    np.testing.assert_array_equal(X, y)
    assert y is not X
    lengths = (X >= 0).sum(1)
    np.testing.assert_array_equal(X[np.arange(8)[None] >= lengths[:, None]], -1)
    assert set(np.unique(lengths)) == set(range(3, 9))  # inclusive on both ends
    assert abs(np.bincount(lengths)[3:].min() / 20_000 - 1 / 6) < 0.01
    counts = np.bincount(X[X >= 0], minlength=5) / (X >= 0).sum()
    np.testing.assert_allclose(counts, 0.2, atol=0.01)
    full, _ = make_copying(10, 8, random_state=0)
    assert (full >= 0).all() and full.max() <= 9


def test_the_task_checks_its_fields_and_draws_on_a_device():
    assert CopyingTask(8, min_len=8) == CopyingTask(8)  # one length: no range
    with pytest.raises(ValueError, match=r"min_len=9 exceeds seq_len=8"):
        CopyingTask(8, min_len=9)
    with pytest.raises(ValueError, match=r"vocab_size must be an integer >= 2, got 1"):
        CopyingTask(8, 1)
    with pytest.raises(TypeError, match=r"seq_len must be an integer, got \(4, 8\)"):
        CopyingTask((4, 8))
    X, y = CopyingTask(7, 3, min_len=2).sample_torch(50, generator=torch.Generator().manual_seed(0))
    assert X.shape == (50, 7) and X.dtype == torch.float32 and torch.equal(X, y)
    assert ((X >= 0).sum(1) >= 2).all() and X.max() <= 2
    task = CopyingTask(10, 4, min_len=2)
    _, y = task.sample(50_000, random_state=0)
    assert task.trivial_mse == pytest.approx(np.square(y).sum(1).mean(), rel=0.02)


def test_the_shift_lengthens_each_string_by_the_factor_with_fresh_symbols():
    task = CopyingTask(6, 4, min_len=2)
    X, y = task.sample(300, random_state=0)
    X2, y2 = task.shift(X, y, 12, random_state=0)
    np.testing.assert_array_equal(X2, y2)
    np.testing.assert_array_equal((X2 >= 0).sum(1), 2 * (X >= 0).sum(1))
    np.testing.assert_array_equal(X2[:, :6][X >= 0], X[X >= 0])  # the string is kept first
    same, _ = task.shift(X, y, 6)
    np.testing.assert_array_equal(same, X)
    short, _ = task.shift(X, y, 3, random_state=0)
    assert short.shape == (300, 3) and ((short >= 0).sum(1) >= 1).all()


# -- the contract: bad input refused before any work -------------------------------------------
@pytest.mark.parametrize(
    ("X", "y", "error", "match"),
    [
        ([[1, 2], [3, -1]], [[1, 2], [3, -1]], None, None),
        ([[1.0, 2.0], [3.0, -1.0]], None, TypeError, r"X must hold integer token ids.*float64"),
        ([[1, 2], [3, -2]], None, ValueError, r"X\[1, 1\] = -2: tokens are ids >= 0"),
        ([[1, 2], [-1, 3]], None, ValueError, r"X\[1\] has padding inside: X\[1, 0\] = -1 but"),
        ([[1, 2], [-1, -1]], None, ValueError, r"X\[1\] holds no token"),
        (
            [[1, 2], [3, 4]],
            [[1, 2, 3], [3, 4, 5]],
            ValueError,
            r"y must have the shape of X, \(2, 2\)",
        ),
        ([[1, 2], [3, 4]], [[1, 2], [4.0, 3]], TypeError, r"y must hold integer token ids"),
        ([[[1], [2]]], None, ValueError, r"X must be 2-D, \(n_samples, seq_len\)"),
        ([[True, False]], None, TypeError, r"X has boolean dtype"),
        ([[1, 2**24]], None, ValueError, r"X\[0, 1\] = 16777216: token ids must be below 2\*\*24"),
        (np.zeros((0, 3), dtype=int), None, ValueError, r"X is empty"),
    ],
)
def test_the_contract_names_the_bad_value(X, y, error, match):
    y = X if y is None else y
    if error is None:
        task, X_checked, _ = CopyingTask.from_data(X, y)
        assert task == CopyingTask(2, 4, min_len=1) and X_checked.dtype == np.int64
        return
    with pytest.raises(error, match=match):
        CopyingTask.from_data(X, y)


def test_bad_input_leaves_a_fitted_model_as_it_was_and_predict_refuses_other_symbols():
    model = _fitted()
    weights = {k: v.clone() for k, v in model.net_.module_.state_dict().items()}
    state = dict(vars(model))
    X, y = make_copying(20, 6, vocab_size=4, min_len=2, random_state=1)
    bad = [
        (X.astype(float), y),
        (X, y[:, :5]),
        (np.where(X == 0, -1, X), y),  # padding inside rows
        (X - 2, y),
    ]
    for Xb, yb in bad:
        with pytest.raises((ValueError, TypeError)):
            model.fit(Xb, yb)
    assert vars(model).keys() == state.keys() and all(vars(model)[k] is v for k, v in state.items())
    for k, v in model.net_.module_.state_dict().items():
        assert torch.equal(v, weights[k])
    with pytest.raises(ValueError, match=r"X\[0, 0\] = 7 is outside \[0, 4\): TransformerCopier"):
        model.predict(np.full((1, 3), 7))
    with pytest.raises(ValueError, match=r"y\[.*is outside \[0, 4\)"):
        model.score(X, np.where(X >= 0, 9, -1))


def test_a_model_too_large_is_refused_before_any_work():
    with pytest.raises(ValueError, match=r"TransformerCopier with width=65536.*would need about"):
        TransformerCopier(width=2**16, n_heads=1).fit_online(CopyingTask(8), n_steps=1)
    X = np.array([[0, 10**7]])  # an alphabet of ten million symbols: its embedding
    with pytest.raises(ValueError, match=r"LSTMCopier with hidden_size=4096.*would need about"):
        LSTMCopier(hidden_size=4096).fit(X, X)


# -- the copiers -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [TransformerCopier, LSTMCopier])
def test_a_copier_writes_strings_padded_after_their_end_at_any_length(cls):
    model = _fitted(cls)
    assert model.n_features_in_ == 4 and model.seq_len_ == 6
    assert model.t_ == 5 * 16  # batch_size=16, or "auto"
    assert model.task_ == CopyingTask(6, 4, min_len=2) and len(model.loss_curve_) == 5
    for T in (6, 13):
        X, y = CopyingTask(T, 4, min_len=1).sample(30, random_state=0)
        out = model.predict(X)
        assert out.shape == X.shape and out.dtype == np.int64
        ended = np.cumsum(out < 0, axis=1) > 0
        np.testing.assert_array_equal(out[ended], -1)
        assert model.score(X, y) == string_accuracy(y, out)


def _greedy_without_cache(module, X, width):
    """Greedy decoding by a full teacher-forced pass per written token."""
    out = torch.full((len(X), width), -1)
    for j in range(width):
        logits = module(torch.cat([X, out], 1).float())
        out[:, j] = logits[:, j].argmax(-1)
    eos = module.vocab_size
    return torch.where((out == eos).cumsum(1) > 0, -1, out)


@pytest.mark.parametrize("encoding", ["hard_alibi", "alibi", "nope", "learned"])
def test_the_cached_decoding_writes_what_full_passes_write(encoding):
    torch.manual_seed(0)
    module = CausalTransformer(5, 16, 4, 2, encoding, max_positions=40).double().eval()
    for p in module.parameters():  # logits far apart: no ties between the two paths
        p.data.mul_(20 if p.dim() > 1 else 1)
    X = torch.as_tensor(CopyingTask(9, 5, min_len=1).sample(40, random_state=1)[0])
    with torch.no_grad():
        np.testing.assert_array_equal(module.generate(X, 9), _greedy_without_cache(module, X, 9))
    lstm = RecurrentCopier(5, 8, 2).double().eval()
    with torch.no_grad():
        np.testing.assert_array_equal(lstm.generate(X, 9), _greedy_without_cache(lstm, X, 9))


def test_the_loss_counts_each_string_and_its_end_only():
    y = torch.tensor([[1, 2, -1], [0, 0, 0]])
    logits = torch.zeros(2, 4, 5)
    losses = SequenceCrossEntropy.losses(logits, y)
    assert losses.shape == (3 + 4,)  # two tokens and the end; three tokens and the end
    np.testing.assert_allclose(losses, math.log(5), rtol=1e-6)
    stream, answer = teacher_forced(torch.cat([y, y], 1), 3)
    np.testing.assert_array_equal(stream[0], [4, 1, 2, 5, 1, 2, 3, 3])  # BOS x SEP y, EOS after
    np.testing.assert_array_equal(answer[0], [3, 4, 5, 6])


def test_save_load_warm_start_and_learned_positions(tmp_path):
    model = _fitted(positional_encoding="learned")
    X, _ = make_copying(20, 6, vocab_size=4, min_len=2, random_state=1)
    save_model(model, tmp_path / "m.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "m.stsq").predict(X), model.predict(X))
    with pytest.raises(ValueError, match=r"has 14 positions, and strings of length 7 need"):
        model.predict(np.zeros((1, 7), dtype=int))
    model.set_params(warm_start=True).fit_online(CopyingTask(6, 4), n_steps=3)
    assert model.n_iter_ == 8 and len(model.loss_curve_) == 8
    with pytest.raises(ValueError, match="another architecture"):
        model.set_params(width=32).fit_online(CopyingTask(6, 4), n_steps=1)
    lstm = _fitted(LSTMCopier)
    save_model(lstm, tmp_path / "l.stsq")
    np.testing.assert_array_equal(load_model(tmp_path / "l.stsq").predict(X), lstm.predict(X))


def test_the_parameters_are_checked():
    with pytest.raises(ValueError, match=r"width=10 must be a multiple of n_heads=8"):
        TransformerCopier(width=10).fit_online(CopyingTask(4), n_steps=1)
    with pytest.raises(ValueError, match="positional_encoding"):
        TransformerCopier(positional_encoding="rope").fit_online(CopyingTask(4), n_steps=1)
    with pytest.raises(TypeError, match="hidden_size"):
        LSTMCopier(hidden_size=True).fit_online(CopyingTask(4), n_steps=1)


# -- the constructions and the bounds --------------------------------------------------------
def test_the_ngram_copier_fails_as_the_monte_carlo_of_the_spec_below_its_bound():
    """D = 10, n = 4: 0.0061 / 0.032 / 0.149 at L = 16 / 32 / 64 (10,000 strings each)."""
    for L, expected in ((16, 0.0061), (32, 0.032), (64, 0.149)):
        X, y = make_copying(10_000, L, random_state=L)
        error = 1 - NGramCopier(4).fit(X, y).score(X, y)
        sigma = math.sqrt(expected * (1 - expected) / 10_000)
        assert abs(error - expected) < 4 * sigma, (L, error)
        assert error < ngram_error_bound(L, 10, 4) / 2
    X = np.array([[1, 2, 3, 1, 2, 4, -1]])
    np.testing.assert_array_equal(NGramCopier(2).fit(X, X).predict(X), [[1, 2, 3, 1, 2, 3, 1]])
    np.testing.assert_array_equal(NGramCopier(3).fit(X, X).predict(X), X)  # no repeated 3-gram


@pytest.mark.parametrize(("L", "D"), [(9, 4), (5, 10)])
def test_the_fixed_state_copier_meets_its_bound(L, D):
    X, y = make_copying(100_000, L, vocab_size=D, random_state=0)
    error = 1 - FixedStateCopier(16).fit(X, y).score(X, y)
    bound = fixed_state_error_bound(L, D, 16)
    assert abs(error - bound) < 4 * math.sqrt(bound * (1 - bound) / 100_000)


def test_the_fixed_state_copier_stores_the_shortest_strings_first():
    X = np.array([[0, -1], [3, -1], [0, 0], [1, 2]])  # D = 4, lengths 1 and 2
    model = FixedStateCopier(n_bits=3).fit(X, X)  # 7 strings stored: the 4 of length 1, 3 more
    np.testing.assert_array_equal(model.predict(X), [[0, -1], [3, -1], [0, 0], [0, 3]])
    assert fixed_state_error_bound(3, 2, 3) == 0.0 and fixed_state_error_bound(3, 2, 2) == 0.5
    assert ngram_error_bound(100, 10, 4) == 1.0
    with pytest.raises(ValueError, match=r"n_bits must be an int >= 1, got 0"):
        fixed_state_error_bound(3, 2, 0)


# -- the metrics and the scorers ---------------------------------------------------------------
def test_string_and_token_accuracy():
    y = [[1, 2, -1, -1], [3, 3, 3, 3]]
    assert string_accuracy(y, y) == 1.0
    assert string_accuracy(y, [[1, 2, 0, -1], [3, 3, 3, 3]]) == 0.5  # written too long
    assert token_accuracy(y, [[1, 2, 0, -1], [3, 0, 3, 3]]) == pytest.approx(5 / 7)
    assert string_accuracy(y, [[1, 2, -1, -1], [0, 3, 3, 3]], sample_weight=[3, 1]) == 0.75
    with pytest.raises(ValueError, match=r"of one shape"):
        string_accuracy(y, [[1, 2, -1]])
    with pytest.raises(ValueError, match="NaN"):
        token_accuracy(y, [[1, 2, -1, np.nan], [3, 3, 3, 3]])


def test_the_scorers_plug_into_grid_search_and_the_length_shift():
    X, y = make_copying(64, 6, vocab_size=4, min_len=2, random_state=0)
    search = GridSearchCV(
        NGramCopier(),
        {"n": [1, 3]},
        cv=2,
        scoring={"string": make_scorer(string_accuracy), "token": make_scorer(token_accuracy)},
        refit="string",
    ).fit(X, y)
    assert search.best_params_ == {"n": 3}
    model = NGramCopier(1).fit(X, y)
    long = LengthShiftScorer(factor=4, metric="string_accuracy", random_state=0)(model, X, y)
    assert long < string_accuracy(y, model.predict(X))  # unigrams repeat in longer strings
    scoring = length_shift_scoring((1, 2, 4), metric="token_accuracy", random_state=0)
    assert sorted(scoring) == ["token_accuracy", "x2", "x4"]
    assert all(0 <= s(model, X, y) <= 1 for s in scoring.values())


@settings(max_examples=25, deadline=None, derandomize=True)
@given(rows=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=7), min_size=1, max_size=6))
def test_string_accuracy_is_the_exact_match_of_the_strings(rows):
    T = max(map(len, rows))
    y = np.array([r + [-1] * (T - len(r)) for r in rows])
    pred = y.copy()
    pred[0, 0] = (pred[0, 0] + 1) % 6
    assert string_accuracy(y, y) == 1.0
    assert string_accuracy(y, pred) == (len(y) - 1) / len(y)
    assert string_accuracy(y, pred) <= token_accuracy(y, pred) < 1


# -- learning ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("cls", [TransformerCopier, LSTMCopier])
def test_the_defaults_learn_to_copy_short_strings(cls):
    X, y = make_copying(500, 8, vocab_size=4, min_len=2, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = cls(random_state=0).fit_online(CopyingTask(8, 4, min_len=2), n_steps=800)
    assert model.score(X, y) > 0.95
    assert clone(model).get_params() == model.get_params()
