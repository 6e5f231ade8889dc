"""The study table, the seeds rule, the growth laws and the band display."""

import io
import json
import math

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stsq_learn.studies import (
    BandDisplay,
    StudyTable,
    check_seeds,
    compare_laws,
    fit_law,
    stream_seed,
)

matplotlib.use("Agg")


@pytest.fixture
def table():
    return StudyTable(
        {
            "model": ["att", "att", "att", "att", "fcn", "fcn"],
            "seed": [0, 1, 0, 1, 0, 1],
            "param_seq_len": [8, 8, 16, 16, 8, 8],
            "value": [4.0, 8.0, 8.0, None, 32.0, 64.0],
            "bound": [None, None, None, 16.0, None, None],
            "reached": [True, True, True, False, True, True],
            "shape": [(1, 2), (1, 2), (3,), (3,), (), ()],
        },
        meta={"study": "test", "grid": ("seq_len",)},
    )


# -- the table --------------------------------------------------------------------------
def test_columns_are_typed_and_read_only(table):
    assert table["value"].dtype == np.float64 and math.isnan(table["value"][3])
    assert table["seed"].dtype == np.int64
    assert table["reached"].dtype == bool
    assert table["model"].dtype == object and table["shape"][0] == (1, 2)
    with pytest.raises(ValueError):
        table["value"][0] = 1.0
    assert table["seq_len"] is table["param_seq_len"]  # a grid column without its prefix


def test_rows_slices_and_masks(table):
    assert len(table) == 6
    last = table[-1]
    assert math.isnan(last.pop("bound"))
    assert last == {
        "model": "fcn",
        "seed": 1,
        "param_seq_len": 8,
        "value": 64.0,
        "reached": True,
        "shape": (),
    }
    assert type(table[0]["seed"]) is int  # Python scalars, not NumPy's
    assert len(table[1:3]) == 2 and table[1:3]["seed"].tolist() == [1, 0]
    assert table[table["reached"]]["model"].tolist() == ["att"] * 3 + ["fcn"] * 2
    assert table[[5, 0]]["value"].tolist() == [64.0, 4.0]
    assert [row["seed"] for row in table] == [0, 1, 0, 1, 0, 1]
    with pytest.raises(IndexError, match="row 6 out of range"):
        table[6]
    with pytest.raises(IndexError, match="boolean mask must have shape"):
        table[np.ones(3, bool)]
    with pytest.raises(KeyError, match="no column 'width'"):
        table["width"]
    with pytest.raises(TypeError, match="indexed by a column name"):
        table[1.5]


def test_where_xy_groups_unique(table):
    assert table.where(model="att", seq_len=16)["seed"].tolist() == [0, 1]
    assert len(table.where(model=["att", "fcn"], seed=1)) == 3
    assert len(table.where(value=lambda v: v > 5)) == 4
    assert len(table.where(value=np.nan)) == 1  # a missing value matches NaN
    assert len(table.where(shape=(3,))) == 2  # a tuple is a value, not a set of them
    x, y = table.where(model="att").xy("seq_len", "value")
    assert x.tolist() == [8, 8, 16] and y.tolist() == [4, 8, 8]  # the unreached row left out
    assert len(table.xy("seq_len", "value", finite=False)[0]) == 6
    assert [key for key, _ in table.groups("model", "seq_len")] == [
        ("att", 8),
        ("att", 16),
        ("fcn", 8),
    ]
    assert table.unique("model") == ["att", "fcn"]
    with pytest.raises(ValueError, match="mask of shape"):
        table.where(seed=lambda s: s[:2] > 0)


def test_bands_over_seeds(table):
    bands = table.bands("seq_len", "value")
    assert bands.columns == ("model", "param_seq_len", "median", "min", "max", "n", "n_runs")
    att16 = bands.where(model="att", seq_len=16)[0]
    assert (att16["median"], att16["min"], att16["max"], att16["n"], att16["n_runs"]) == (
        8.0,
        8.0,
        8.0,
        1,
        2,
    )
    assert bands.where(model="fcn")[0]["median"] == 48.0
    one = table.where(seq_len=16, seed=1).bands("seq_len", "value")  # no seed reached
    assert math.isnan(one[0]["median"]) and one[0]["n"] == 0
    assert len(table.bands("seq_len", "value", by=())) == 2


def test_concat_and_with_columns(table):
    other = StudyTable({"model": ["x"], "seed": [3], "extra": [1.5]})
    both = StudyTable.concat([table, other])
    assert len(both) == 7 and both.columns[-1] == "extra"
    assert math.isnan(both["extra"][0]) and both["extra"][-1] == 1.5
    assert math.isnan(both[-1]["param_seq_len"])  # ints with a missing one: floats
    assert both.meta == table.meta
    more = table.with_columns(rank=range(6))
    assert more["rank"].tolist() == list(range(6)) and "rank" not in table.columns
    with pytest.raises(TypeError, match=r"tables\[1\] must be a StudyTable"):
        StudyTable.concat([table, {"a": [1]}])


def test_json_and_csv_round_trips(table):
    data = json.loads(json.dumps(table.to_dict()))
    assert data["columns"]["value"][3] is None
    assert StudyTable.from_dict(data) == table
    text = table.to_csv()
    assert text.splitlines()[0] == "model,seed,param_seq_len,value,bound,reached,shape"
    back = StudyTable.from_csv(io.StringIO(text))
    assert back.columns == table.columns and back.meta == {}
    for name in table.columns:
        assert back[name].dtype == table[name].dtype, name
    assert StudyTable(
        dict(zip(back.columns, (back[c] for c in back.columns))), meta=table.meta
    ) == (table)


def test_csv_file_and_pandas_style_rows(table, tmp_path):
    path = tmp_path / "runs.csv"
    table.to_csv(path)
    assert StudyTable.from_csv(path)["value"][0] == 4.0
    records = list(table)  # what pandas.DataFrame(table) reads: row dicts in order
    assert records[2]["param_seq_len"] == 16 and len(records) == len(table)


def test_bad_tables_are_refused():
    with pytest.raises(TypeError, match="mapping of column name"):
        StudyTable([1, 2])
    with pytest.raises(ValueError, match="same length"):
        StudyTable({"a": [1, 2], "b": [1]})
    with pytest.raises(TypeError, match="column 'a' must be a sequence"):
        StudyTable({"a": 3})
    with pytest.raises(TypeError, match="non-empty strings"):
        StudyTable({"": [1]})
    with pytest.raises(ValueError, match="'columns' mapping"):
        StudyTable.from_dict({"rows": []})
    with pytest.raises(ValueError, match="line 3 of the CSV has 1 cells"):
        StudyTable.from_csv(io.StringIO("a,b\n1,2\n3\n"))


columns = st.one_of(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6),
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6),
    st.lists(st.booleans(), min_size=1, max_size=6),
    st.lists(st.text(alphabet="abcxyz_ ,\"'", min_size=1, max_size=6), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=6),
)


@settings(max_examples=60, deadline=None)
@given(columns)
def test_round_trips_keep_every_column(column):
    table = StudyTable({"c": column, "n": list(range(len(column)))}, meta={"k": [1, 2]})
    assert StudyTable.from_dict(json.loads(json.dumps(table.to_dict()))) == table
    back = StudyTable.from_csv(io.StringIO(table.to_csv()))
    if any(isinstance(c, str) and (c in ("True", "False") or _numeric(c)) for c in column):
        return  # text that reads as another type is typed back as that type
    assert back == StudyTable({"c": column, "n": list(range(len(column)))})


def _numeric(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- seeds ------------------------------------------------------------------------------
def test_seeds_rule():
    assert check_seeds(3) == (0, 1, 2)
    assert check_seeds(np.array([4, 2])) == (4, 2)
    assert stream_seed(5, "test") != stream_seed(5, "train") != stream_seed(6, "train")
    assert 0 <= stream_seed(2**31 - 2, "shift") < 2**31 - 1
    for bad, error, match in (
        (0, ValueError, "positive number of seeds"),
        ([1, 1], ValueError, "holds 1 twice"),
        ([1.5], TypeError, r"seeds\[0\] must be an int"),
        ([-1], ValueError, r"seeds\[0\] must lie in"),
        ("3", TypeError, "an int .how many."),
        ([], ValueError, "seeds is empty"),
        (True, TypeError, "an int .how many."),
    ):
        with pytest.raises(error, match=match):
            check_seeds(bad)


# -- laws -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("law", "truth"),
    [
        ("log2", lambda x: 3 + 2 * np.log2(x)),
        ("log", lambda x: 1 - 0.5 * np.log(x)),
        ("sqrt", lambda x: 2 + 4 * np.sqrt(x)),
        ("linear", lambda x: -1 + 0.25 * x),
        ("power", lambda x: 1.5 * x**0.7),
    ],
)
def test_fit_law_recovers_exact_laws(law, truth):
    x = np.array([4, 8, 16, 32, 64.0])
    fitted = fit_law(x, truth(x), law)
    assert fitted.r2 == pytest.approx(1.0) and fitted.rms < 1e-9
    assert np.allclose(fitted(x), truth(x)) and fitted.x_range == (4.0, 64.0)
    assert compare_laws(x, truth(x), laws=("log2", "sqrt", "linear", "power", "log"))[0](
        100
    ) == pytest.approx(truth(100.0))
    assert json.loads(json.dumps(fitted.to_dict()))["name"] == law


def test_fit_law_quality_and_refusals():
    x = [8, 8, 16, 16, 32, np.nan]
    y = [10, 12, 13, 15, 19, 40]  # the NaN point is left out
    law = fit_law(x, y, "log2")
    assert law.n_points == 5 and 0 < law.r2 < 1 and len(law.residuals) == 5
    assert "log2(T)" in law.label("T") and "R^2" in law.label("T")
    with pytest.raises(ValueError, match="at least 3 finite points at 2 distinct x"):
        fit_law([8, 16], [1, 2])
    with pytest.raises(ValueError, match="at least 3 finite points at 2 distinct x"):
        fit_law([8, 8, 8], [1, 2, 3])
    with pytest.raises(ValueError, match="law must be one of"):
        fit_law([1, 2, 3], [1, 2, 3], "cubic")
    with pytest.raises(ValueError, match="needs x > 0"):
        fit_law([0, 1, 2], [1, 2, 3], "log2")
    with pytest.raises(ValueError, match="needs y > 0"):
        fit_law([1, 2, 3], [1, -2, 3], "power")
    with pytest.raises(ValueError, match="as many values"):
        fit_law([1, 2, 3], [1, 2])
    assert [law.name for law in compare_laws([1, 2, 4], [1, -1, 3])] == ["linear", "sqrt", "log2"]
    with pytest.raises(ValueError, match="laws must name"):
        compare_laws([1, 2, 3], [1, 2, 3], laws=("cubic",))


# -- the display ------------------------------------------------------------------------
def test_band_display_draws_bands_laws_theory_and_bounds(table):
    law = fit_law([8, 16, 32], [4, 8, 12], "log2")
    display = BandDisplay.from_table(
        table,
        x="seq_len",
        y="value",
        laws={"att": law},
        theory={"att": lambda x: 2 * np.log2(x)},
        bound="bound",
        logx=True,
        style="errorbar",
        labels={"fcn": "fully connected"},
    )
    ax = display.ax_
    assert display.figure_ is ax.figure and ax.get_xscale() == "log"
    assert set(display.lines_) == {"att", "fcn"} and set(display.bands_) == {"att", "fcn"}
    law_x = display.law_lines_["att"].get_xdata()
    assert law_x.min() == 8 and law_x.max() == 32  # drawn only where it was fitted
    assert display.theory_lines_["att"].get_linestyle() == "--"
    assert display.bound_lines_["att"].get_xydata().tolist() == [[16.0, 16.0]]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fully connected" in labels and any("not reached" in t for t in labels)


def test_band_display_one_curve_and_styles(table):
    fcn = table.where(model="fcn")
    display = BandDisplay.from_table(
        fcn, x="seq_len", y="value", hue=None, theory=([8, 16], [1, 2])
    )
    assert list(display.lines_) == [None] and len(display.bands_) == 1
    one = BandDisplay.from_table(fcn.where(seed=0), x="seq_len", y="value", style=None)
    assert one.bands_ == {}
    again = display.plot(style=None)  # redraw on new axes
    assert again.ax_ is not display.ax_ or again is display
    with pytest.raises(ValueError, match="style must be one of"):
        display.plot(style="violin")
    with pytest.raises(TypeError, match="table must be a StudyTable"):
        BandDisplay.from_table({"a": [1]}, x="a", y="a")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'colour'"):
        BandDisplay.from_table(fcn, x="seq_len", y="value", colour="r")
