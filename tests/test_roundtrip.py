"""Whatever a fit returns saves and loads: a property over the configurations fit accepts."""

import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stsq_learn import (
    FCNAverager,
    FCNRetriever,
    FCNSelector,
    SparseTokenAverager,
    SparseTokenRetriever,
    SparseTokenSelector,
    load_model,
    make_sparse_averaging,
    make_sparse_retrieval,
    make_sparse_token_selection,
    save_model,
)

_ATTENTION = {
    SparseTokenSelector: make_sparse_token_selection,
    SparseTokenAverager: make_sparse_averaging,
    SparseTokenRetriever: make_sparse_retrieval,
}
_FCN = {
    FCNSelector: make_sparse_token_selection,
    FCNAverager: make_sparse_averaging,
    FCNRetriever: make_sparse_retrieval,
}

attention = st.fixed_dictionaries(
    {
        "width": st.sampled_from([2, 5, 8]),
        "n_heads": st.integers(1, 3),
        "positional_encoding": st.sampled_from(["stochastic", "fixed", "randomized", "sinusoidal"]),
        "pe_sampling": st.sampled_from(["marginal", "full"]),
        "n_pe_samples": st.integers(1, 3),
        "learn_token_block": st.booleans(),
        "length_scale": st.sampled_from([None, "log"]),
        "dtype": st.sampled_from(["float32", "float64"]),
    }
)
fcn = st.fixed_dictionaries(
    {
        "width": st.sampled_from([2, 8]),
        "extra_hidden_layers": st.sampled_from([(), (3,)]),
        "dtype": st.sampled_from(["float32", "float64"]),
    }
)


@st.composite
def configurations(draw):
    cls, make = draw(st.sampled_from([*_ATTENTION.items(), *_FCN.items()]))
    params = draw(attention if cls in _ATTENTION else fcn)
    first, second = draw(st.sampled_from([4, 6])), draw(st.sampled_from([4, 6, 9]))
    warm_width = draw(st.sampled_from([None, params["width"] + 1]))
    return cls, make, params, first, second, warm_width


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configurations())
def test_whatever_fit_returns_saves_and_loads(config):
    cls, make, params, first, second, warm_width = config
    X, y = make(30, first, 2, 2, random_state=0)
    model = cls(max_iter=1, batch_size=10, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one epoch: "worse than no model" is expected
        model.fit(X, y)
        # A warm start at another length (and perhaps width): kept if fit accepts it.
        X2, y2 = make(30, second, 2, 2, random_state=1)
        change = {"warm_start": True}
        if warm_width is not None:
            change["width"] = warm_width
        try:
            model.set_params(**change).fit(X2, y2)
        except ValueError:  # refused before any work (another architecture, or length)
            model.set_params(warm_start=False, width=params["width"])
    rows = [X] if cls in _FCN else [X, make(10, 9, 2, 2, random_state=2)[0]]
    rows = [r for r in rows if r.shape[1] == model.seq_len_ or cls in _ATTENTION]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.stsq"
        save_model(model, path)
        loaded = load_model(path)
    assert loaded.get_params() == model.get_params()
    for r in rows:
        np.testing.assert_array_equal(loaded.predict(r), model.predict(r))
