"""The study table: one long table of runs, stored by column, that pandas reads directly.

A study (:func:`~stsq_learn.studies.sweep`, :func:`~stsq_learn.studies.length_curve`,
:func:`~stsq_learn.studies.search_threshold`, ...) returns a :class:`StudyTable`:
one row per run (a model, a point of the grid, a seed), in the spirit of
benchopt's results table and of scikit-learn's ``cv_results_``. The grid's
values are the ``param_*`` columns, the seed is the ``seed`` column (the
repetition, as a fold is in cross-validation), then what was measured.

The table is a sequence of rows (``table[0]`` is a dict) whose columns are
NumPy arrays (``table["score"]``), so ``pandas.DataFrame(table)`` reads it as
it is, without pandas being a dependency. It is immutable: selections
(:meth:`~StudyTable.where`) and summaries (:meth:`~StudyTable.bands`) return
new tables. It round-trips through JSON (:meth:`~StudyTable.to_dict`,
:meth:`~StudyTable.from_dict`) and CSV (:meth:`~StudyTable.to_csv`,
:meth:`~StudyTable.from_csv`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import os
from collections.abc import Sequence

import numpy as np

__all__ = ["StudyTable"]

_KINDS = {"b": "bool", "i": "int64", "u": "int64", "f": "float64"}


def _column(values):
    """A read-only 1-D array of ``values``: bool, int64, float64, or object for the rest."""
    values = list(values)
    if values and all(isinstance(v, (bool, np.bool_)) for v in values):
        arr = np.array(values, dtype=bool)
    elif values and all(_is_int(v) for v in values):
        arr = np.array(values, dtype=np.int64)
    elif (
        values
        and all(_is_real(v) or v is None for v in values)
        and any(_is_real(v) for v in values)
    ):
        arr = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = [tuple(v) if isinstance(v, list) else v for v in values]
    arr.flags.writeable = False
    return arr


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _typed(values, kind):
    """``values`` (from JSON) as a column of the stored ``kind``."""
    if kind == "float64":
        arr = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    elif kind in ("int64", "bool"):
        arr = np.array(values, dtype=kind)
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = [tuple(v) if isinstance(v, list) else v for v in values]
    arr.flags.writeable = False
    return arr


def _plain(value):
    """A JSON value from a cell: Python scalars, lists for tuples, None for NaN.

    An infinity is written as the string ``"inf"`` or ``"-inf"`` (JSON has no
    number for it), which a float column reads back as the infinity.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _cell(text):
    """A CSV cell read back: int, float, bool, None (empty), a tuple (JSON list) or str."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if text.startswith("["):
        try:
            return tuple(json.loads(text))
        except ValueError:
            pass
    return text


class StudyTable(Sequence):
    """The runs of a study: a tidy table stored by column, one row per run.

    Parameters
    ----------
    columns : mapping of str to sequence
        Column name to its values, every column of the same length. A
        column of numbers (None standing for a missing one) is stored as
        float64 (None as NaN), of integers as int64, of booleans as bool;
        anything else (labels, tuples) as an object array.
    meta : dict, default=None
        What the study was (its kind, target, grid, settings): JSON values,
        kept by :meth:`to_dict`.

    Attributes
    ----------
    columns : tuple of str
        The column names, in order.
    meta : dict
        The study's description.

    Notes
    -----
    Indexing: ``table["score"]`` is a column (a read-only NumPy array),
    ``table[i]`` the row ``i`` as a dict, ``table[mask]`` or
    ``table[1:3]`` a new table of those rows. A name of :meth:`where`,
    :meth:`xy` and :meth:`bands` may leave out the ``param_`` prefix of a
    grid column (``"seq_len"`` for ``"param_seq_len"``).

    Examples
    --------
    >>> from stsq_learn.studies import StudyTable
    >>> table = StudyTable({"model": ["a", "a", "b"], "seed": [0, 1, 0],
    ...                     "param_seq_len": [8, 8, 8], "score": [0.9, 0.8, None]})
    >>> len(table), table.columns
    (3, ('model', 'seed', 'param_seq_len', 'score'))
    >>> table[0]
    {'model': 'a', 'seed': 0, 'param_seq_len': 8, 'score': 0.9}
    >>> table.where(model="a", seq_len=8)["score"]
    array([0.9, 0.8])
    >>> StudyTable.from_dict(table.to_dict()) == table
    True
    """

    def __init__(self, columns, *, meta=None):
        if not hasattr(columns, "items"):
            raise TypeError(
                f"columns must be a mapping of column name to values, got {type(columns).__name__}."
            )
        stored = {}
        lengths = set()
        for name, values in columns.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"column names must be non-empty strings, got {name!r}.")
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
                raise TypeError(
                    f"column {name!r} must be a sequence of values, got {type(values).__name__}."
                )
            arr = values if _is_stored(values) else _column(values)
            stored[name] = arr
            lengths.add(len(arr))
        if len(lengths) > 1:
            sizes = {name: len(arr) for name, arr in stored.items()}
            raise ValueError(f"every column must have the same length, got {sizes}.")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict or None, got {type(meta).__name__}.")
        self._columns = stored
        self._n = lengths.pop() if lengths else 0
        self.meta = _plain_meta(dict(meta or {}))

    # -- reading ----------------------------------------------------------------------
    @property
    def columns(self):
        """The column names, in order (``model``, ``seed``, ``param_*``, the values).

        Returns
        -------
        tuple of str
            The names.
        """
        return tuple(self._columns)

    def __len__(self):
        return self._n

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._columns[self._name(key)]
        if _is_int(key):
            i = int(key)
            if not -self._n <= i < self._n:
                raise IndexError(f"row {i} out of range for a table of {self._n} rows.")
            return {name: _scalar(arr[i]) for name, arr in self._columns.items()}
        if isinstance(key, slice):
            index = np.arange(self._n)[key]
        else:
            index = np.asarray(key)
            if index.dtype == bool:
                if index.shape != (self._n,):
                    raise IndexError(
                        f"a boolean mask must have shape ({self._n},), got {index.shape}."
                    )
                index = np.flatnonzero(index)
            elif index.dtype.kind not in "iu":
                raise TypeError(
                    "a table is indexed by a column name, a row number, a slice, a boolean "
                    f"mask or row numbers, got {key!r}."
                )
        return self._take(index)

    def __iter__(self):
        for i in range(self._n):
            yield self[i]

    def __eq__(self, other):
        if not isinstance(other, StudyTable):
            return NotImplemented
        if self.columns != other.columns or len(self) != len(other):
            return False
        return self.meta == other.meta and all(
            _same(self._columns[c], other._columns[c]) for c in self.columns
        )

    __hash__ = None

    def __repr__(self):
        head = ", ".join(self.columns)
        return f"StudyTable({self._n} rows: {head})"

    def _name(self, name):
        """``name``, or ``param_<name>`` where only that is a column; KeyError otherwise."""
        if name in self._columns:
            return name
        if f"param_{name}" in self._columns:
            return f"param_{name}"
        raise KeyError(f"no column {name!r} in this table; its columns are {list(self.columns)}.")

    def _take(self, index):
        columns = {}
        for name, arr in self._columns.items():
            part = arr[index]
            part.flags.writeable = False
            columns[name] = part
        return StudyTable(columns, meta=self.meta)

    @property
    def param_names(self):
        """The grid's columns (``param_*``), in order."""
        return tuple(c for c in self.columns if c.startswith("param_"))

    def unique(self, column):
        """The distinct values of ``column``, in order of first appearance.

        Parameters
        ----------
        column : str
            A column name (or a grid column's name without ``param_``).

        Returns
        -------
        list
            Its values, each once.
        """
        seen = []
        for value in self[column]:
            value = _scalar(value)
            if not any(_equal(value, s) for s in seen):
                seen.append(value)
        return seen

    # -- selecting ---------------------------------------------------------------------
    def where(self, **conditions):
        """The rows where every column named meets its condition.

        Parameters
        ----------
        **conditions
            Column name (or a grid column's name without ``param_``) to a
            value (rows equal to it), a list or set of values (rows equal
            to one of them), or a callable taking the column and returning a
            boolean mask.

        Returns
        -------
        StudyTable
            The selected rows, in order.
        """
        mask = np.ones(self._n, dtype=bool)
        for name, condition in conditions.items():
            column = self[name]
            if callable(condition):
                hit = np.asarray(condition(column), dtype=bool)
                if hit.shape != (self._n,):
                    raise ValueError(
                        f"the condition on {name!r} returned a mask of shape {hit.shape}, "
                        f"not ({self._n},)."
                    )
            elif isinstance(condition, (list, set, frozenset)):
                hit = np.array([any(_equal(v, c) for c in condition) for v in column], bool)
            else:
                hit = np.array([_equal(v, condition) for v in column], dtype=bool)
            mask &= hit
        return self[mask]

    def xy(self, x, y, *, finite=True):
        """Two columns as float arrays, for a law or a plot.

        Parameters
        ----------
        x, y : str
            Column names (a grid column's name may leave out ``param_``).
        finite : bool, default=True
            Leave out the rows where either is not a finite number (a
            threshold not reached, a failed fit).

        Returns
        -------
        x, y : ndarray of float64
            The two columns' values, row by row.
        """
        xs = np.array([_as_float(v) for v in self[x]], dtype=np.float64)
        ys = np.array([_as_float(v) for v in self[y]], dtype=np.float64)
        if finite:
            keep = np.isfinite(xs) & np.isfinite(ys)
            xs, ys = xs[keep], ys[keep]
        return xs, ys

    def groups(self, *by):
        """The table split by the values of the columns ``by``.

        Parameters
        ----------
        *by : str
            Column names.

        Returns
        -------
        list of (tuple, StudyTable)
            Each distinct combination of values (in order of first
            appearance) and its rows.
        """
        names = [self._name(b) for b in by]
        keys = []
        for i in range(self._n):
            key = tuple(_scalar(self._columns[n][i]) for n in names)
            if not any(all(_equal(a, b) for a, b in zip(key, k)) for k in keys):
                keys.append(key)
        return [(key, self.where(**dict(zip(names, key)))) for key in keys]

    def bands(self, x, y, *, by=("model",)):
        """Median, min and max of ``y`` over the seeds at each ``x``, per group of ``by``.

        Each band is taken over the rows whose ``y`` is a finite number (a
        seed whose search reached no value, or whose fit failed, is left
        out); ``n`` says how many there were, ``n_runs`` how many rows in all.

        Parameters
        ----------
        x : str
            The column along which the bands run (a grid column).
        y : str
            The measured column.
        by : sequence of str, default=("model",)
            Columns that tell the curves apart (present ones only).

        Returns
        -------
        StudyTable
            Columns ``*by, x, "median", "min", "max", "n", "n_runs"``, one
            row per curve and ``x``.
        """
        by = [b for b in by if b in self.columns or f"param_{b}" in self.columns]
        x_name = self._name(x)
        out = {name: [] for name in (*[self._name(b) for b in by], x_name)}
        stats = {"median": [], "min": [], "max": [], "n": [], "n_runs": []}
        for key, part in self.groups(*by) if by else [((), self)]:
            for (xv,), rows in part.groups(x_name):
                values = np.array([_as_float(v) for v in rows[y]], dtype=np.float64)
                found = values[np.isfinite(values)]
                for name, value in zip(out, (*key, xv)):
                    out[name].append(value)
                stats["median"].append(float(np.median(found)) if len(found) else None)
                stats["min"].append(float(found.min()) if len(found) else None)
                stats["max"].append(float(found.max()) if len(found) else None)
                stats["n"].append(len(found))
                stats["n_runs"].append(len(rows))
        columns = {**out, **stats}
        for name in ("median", "min", "max"):
            columns[name] = _typed(columns[name], "float64")
        return StudyTable(columns, meta={"bands_of": y, "along": x_name, **self.meta})

    # -- making ------------------------------------------------------------------------
    @classmethod
    def concat(cls, tables, *, meta=None):
        """The rows of several tables, one after another.

        A column that a table lacks is missing (NaN or None) in its rows.

        Parameters
        ----------
        tables : sequence of StudyTable
            The tables.
        meta : dict, default=None
            The result's ``meta`` (None: the first table's).

        Returns
        -------
        StudyTable
        """
        tables = list(tables)
        for i, t in enumerate(tables):
            if not isinstance(t, StudyTable):
                raise TypeError(f"tables[{i}] must be a StudyTable, got {type(t).__name__}.")
        names = []
        for t in tables:
            names += [c for c in t.columns if c not in names]
        columns = {
            name: [
                _scalar(v)
                for t in tables
                for v in (t._columns[name] if name in t._columns else [None] * len(t))
            ]
            for name in names
        }
        if meta is None:
            meta = tables[0].meta if tables else {}
        return cls(columns, meta=meta)

    def with_columns(self, **columns):
        """A copy with columns added or replaced (each as long as the table).

        Parameters
        ----------
        **columns : sequence
            Column name to its values.

        Returns
        -------
        StudyTable
            A new table; this one is left as it was.
        """
        return StudyTable({**self._columns, **columns}, meta=self.meta)

    # -- saving ------------------------------------------------------------------------
    def to_dict(self):
        """A JSON-ready dict: the columns (lists; NaN as null), their types and ``meta``.

        Returns
        -------
        dict
            ``{"columns": {name: list}, "dtypes": {name: str}, "meta": dict}``.
        """
        return {
            "columns": {n: [_plain(v) for v in arr] for n, arr in self._columns.items()},
            "dtypes": {n: _KINDS.get(arr.dtype.kind, "object") for n, arr in self._columns.items()},
            "meta": _plain_meta(self.meta),
        }

    @classmethod
    def from_dict(cls, data):
        """The table :meth:`to_dict` described.

        Parameters
        ----------
        data : dict
            As :meth:`to_dict` returns it (or as JSON read it back).

        Returns
        -------
        StudyTable
        """
        if not isinstance(data, dict) or not isinstance(data.get("columns"), dict):
            raise ValueError(
                "data must be a dict with a 'columns' mapping, as StudyTable.to_dict() gives."
            )
        dtypes = data.get("dtypes", {})
        columns = {}
        for name, values in data["columns"].items():
            kind = dtypes.get(name)
            columns[name] = _typed(values, kind) if kind else values
        return cls(columns, meta=data.get("meta"))

    def to_csv(self, path_or_buffer=None):
        """Write the rows as CSV (a header of column names, then a line per row).

        Numbers are written in full precision, a missing value as an empty
        cell, a tuple as a JSON list. ``meta`` is not written (JSON keeps it).

        Parameters
        ----------
        path_or_buffer : str, path or file-like, default=None
            Where to write; None returns the text.

        Returns
        -------
        str or None
            The CSV text when ``path_or_buffer`` is None.
        """
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        for i in range(self._n):
            writer.writerow(_csv_cell(self._columns[c][i]) for c in self.columns)
        text = buffer.getvalue()
        if path_or_buffer is None:
            return text
        if hasattr(path_or_buffer, "write"):
            path_or_buffer.write(text)
        else:
            with open(os.fspath(path_or_buffer), "w", encoding="utf-8", newline="") as f:
                f.write(text)
        return None

    @classmethod
    def from_csv(cls, path_or_buffer):
        """Read a table :meth:`to_csv` wrote (numbers, booleans, tuples and labels typed back).

        Parameters
        ----------
        path_or_buffer : str, path or file-like
            The CSV file.

        Returns
        -------
        StudyTable
        """
        if hasattr(path_or_buffer, "read"):
            text = path_or_buffer.read()
        else:
            with open(os.fspath(path_or_buffer), encoding="utf-8", newline="") as f:
                text = f.read()
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            raise ValueError("the CSV holds no header row: it is not a study table.")
        header, body = rows[0], rows[1:]
        for k, row in enumerate(body, start=2):
            if len(row) != len(header):
                raise ValueError(
                    f"line {k} of the CSV has {len(row)} cells, the header {len(header)}."
                )
        return cls({name: [_cell(row[j]) for row in body] for j, name in enumerate(header)})


def _is_stored(values):
    return isinstance(values, np.ndarray) and values.ndim == 1 and not values.flags.writeable


def _scalar(value):
    return value.item() if isinstance(value, np.generic) else value


def _as_float(value):
    if value is None or isinstance(value, (bool, np.bool_)):
        return np.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _equal(a, b):
    """Equality of cells, NaN equal to NaN and None."""
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (
            isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and tuple(a) == tuple(b)
        )
    return bool(a == b)


def _same(a, b):
    return len(a) == len(b) and all(_equal(_scalar(x), _scalar(y)) for x, y in zip(a, b))


def _csv_cell(value):
    value = _plain(_scalar(value))
    if value is None:
        return ""
    if isinstance(value, list):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    return value


def _plain_meta(meta):
    if isinstance(meta, dict):
        return {str(k): _plain_meta(v) for k, v in meta.items()}
    if isinstance(meta, (list, tuple)):
        return [_plain_meta(v) for v in meta]
    return _plain(meta)
