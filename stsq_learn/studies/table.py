"""The study table (:class:`StudyTable`): one row per run (a model, a grid point, a seed), by
column, as benchopt's results table and scikit-learn's ``cv_results_``."""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["StudyTable"]

_KINDS = {"b": "bool", "i": "int64", "u": "int64", "f": "float64"}


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _kind(values):
    """The stored type of ``values``: bool, int64, float64 (None as NaN), else object."""
    if values and all(isinstance(v, (bool, np.bool_)) for v in values):
        return "bool"
    if values and all(_is_int(v) for v in values):
        return "int64"
    reals = [isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in values]
    if any(reals) and all(r or v is None for r, v in zip(reals, values)):
        return "float64"
    return "object"


def _column(values, kind=None):
    """A read-only 1-D array of ``values``, of ``kind`` (None: the values' own)."""
    values = list(values)
    kind = kind or _kind(values)
    if kind == "float64":
        arr = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    elif kind in ("int64", "bool"):
        arr = np.array(values, dtype=kind)
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = [tuple(v) if isinstance(v, list) else v for v in values]
    return _frozen(arr)


def _frozen(arr):
    arr.flags.writeable = False
    return arr


def _plain(value):
    """A JSON value: Python scalars, lists for tuples, None for NaN, "inf" for an infinity."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    value = _scalar(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _cell(text):
    """A CSV cell read back: int, float, bool, None (empty), a tuple (JSON list) or str."""
    if text in ("", "True", "False"):
        return None if text == "" else text == "True"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    try:
        return tuple(json.loads(text)) if text.startswith("[") else text
    except ValueError:
        return text


class StudyTable(Sequence):
    """The runs of a study: a tidy table stored by column, one row per run.

    ``pandas.DataFrame(table)`` reads it as it is. ``table["score"]`` is a column
    (a read-only array; a grid column may leave out its ``param_``), ``table[i]``
    a row as a dict, ``table[mask]`` or ``table[1:3]`` a new table.

    Parameters
    ----------
    columns : mapping of str to sequence
        Column name to its values, all of one length: numbers (None for a missing one) as float64,
        integers as int64, booleans as bool, the rest (labels, tuples) as objects.
    meta : dict, default=None
        What the study was (kind, target, grid, settings), as JSON values.

    Attributes
    ----------
    columns : tuple of str
        The column names, in order.
    meta : dict
        The study's description.

    Examples
    --------
    >>> from stsq_learn.studies import StudyTable
    >>> table = StudyTable({"model": ["a", "a", "b"], "seed": [0, 1, 0],
    ...                     "param_seq_len": [8, 8, 8],
    ...                     "score": [0.9, 0.8, None]})
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
        for name, values in columns.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"column names must be non-empty strings, got {name!r}.")
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
                raise TypeError(
                    f"column {name!r} must be a sequence of values, got {type(values).__name__}."
                )
            read_only = isinstance(values, np.ndarray) and not values.flags.writeable
            stored[name] = values if read_only and values.ndim == 1 else _column(values)
        lengths = {len(arr) for arr in stored.values()}
        if len(lengths) > 1:
            sizes = {name: len(arr) for name, arr in stored.items()}
            raise ValueError(f"every column must have the same length, got {sizes}.")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict or None, got {type(meta).__name__}.")
        self._columns = stored
        self._n = lengths.pop() if lengths else 0
        self.meta = _plain(dict(meta or {}))

    @property
    def columns(self):
        """The column names, in order (``model``, ``seed``, ``param_*``, the values)."""
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
        index = np.arange(self._n)[key] if isinstance(key, slice) else np.asarray(key)
        if index.dtype == bool:
            if index.shape != (self._n,):
                raise IndexError(f"a boolean mask must have shape ({self._n},), got {index.shape}.")
            index = np.flatnonzero(index)
        elif index.dtype.kind not in "iu":
            raise TypeError(
                "a table is indexed by a column name, a row number, a slice, a boolean "
                f"mask or row numbers, got {key!r}."
            )
        columns = {name: _frozen(arr[index]) for name, arr in self._columns.items()}
        return StudyTable(columns, meta=self.meta)

    def __eq__(self, other):
        if not isinstance(other, StudyTable):
            return NotImplemented
        if (self.columns, len(self), self.meta) != (other.columns, len(other), other.meta):
            return False
        pairs = (zip(self._columns[c], other._columns[c]) for c in self.columns)
        return all(_equal(_scalar(a), _scalar(b)) for pair in pairs for a, b in pair)

    def __repr__(self):
        return f"StudyTable({self._n} rows: {', '.join(self.columns)})"

    def _name(self, name):
        """``name``, or ``param_<name>`` where only that is a column; KeyError otherwise."""
        if name in self._columns:
            return name
        if f"param_{name}" in self._columns:
            return f"param_{name}"
        raise KeyError(f"no column {name!r} in this table; its columns are {list(self.columns)}.")

    @property
    def param_names(self):
        """The grid's columns (``param_*``), in order."""
        return tuple(c for c in self.columns if c.startswith("param_"))

    def unique(self, column):
        """The distinct values of ``column``, in order of first appearance.

        Parameters
        ----------
        column : str
            A column name.

        Returns
        -------
        list
            Its values, each once.
        """
        seen = []
        for value in map(_scalar, self[column]):
            if not any(_equal(value, s) for s in seen):
                seen.append(value)
        return seen

    def where(self, **conditions):
        """The rows where every column named meets its condition.

        Parameters
        ----------
        **conditions
            Column name to a value (rows equal to it), a list or set of values
            (equal to one of them), or a callable from the column to a mask.

        Returns
        -------
        StudyTable
            The rows selected.
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
            else:
                wanted = condition if isinstance(condition, (list, set, frozenset)) else [condition]
                hit = np.array([any(_equal(v, c) for c in wanted) for v in column], dtype=bool)
            mask &= hit
        return self[mask]

    def xy(self, x, y, *, finite=True):
        """Two columns as float arrays, for a law or a plot.

        Parameters
        ----------
        x, y : str
            Column names.
        finite : bool, default=True
            Leave out the rows where either is not a finite number.

        Returns
        -------
        x, y : ndarray of float64
            The two columns' values, row by row.
        """
        xs, ys = (np.array([_as_float(v) for v in self[c]], dtype=np.float64) for c in (x, y))
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
            Each distinct combination of values, in order, and its rows.
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

        Parameters
        ----------
        x, y : str
            The column along which the bands run, and the measured one.
        by : sequence of str, default=("model",)
            Columns that tell the curves apart (present ones only).

        Returns
        -------
        StudyTable
            Columns ``*by, x, "median", "min", "max", "n", "n_runs"``, a row
            per curve and ``x``: ``n`` rows had a finite ``y``, of ``n_runs``.
        """
        by = [self._name(b) for b in by if b in self.columns or f"param_{b}" in self.columns]
        x_name = self._name(x)
        out = {name: [] for name in (*by, x_name)}
        stats = {name: [] for name in ("median", "min", "max", "n", "n_runs")}
        for key, part in self.groups(*by) if by else [((), self)]:
            for (xv,), rows in part.groups(x_name):
                values = np.array([_as_float(v) for v in rows[y]], dtype=np.float64)
                found = values[np.isfinite(values)]
                row = [float(f(found)) if len(found) else None for f in (np.median, np.min, np.max)]
                for name, value in zip(out, (*key, xv)):
                    out[name].append(value)
                for name, value in zip(stats, (*row, len(found), len(rows))):
                    stats[name].append(value)
        for name in ("median", "min", "max"):
            stats[name] = _column(stats[name], "float64")
        return StudyTable({**out, **stats}, meta={"bands_of": y, "along": x_name, **self.meta})

    @classmethod
    def concat(cls, tables, *, meta=None):
        """The rows of several tables, one after another (a column a table lacks is missing).

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
        names = list(dict.fromkeys(c for t in tables for c in t.columns))
        columns = {
            name: [_scalar(v) for t in tables for v in t._columns.get(name, [None] * len(t))]
            for name in names
        }
        return cls(columns, meta=(tables[0].meta if tables else {}) if meta is None else meta)

    def with_columns(self, **columns):
        """A copy with columns added or replaced (each as long as the table).

        Parameters
        ----------
        **columns : sequence
            Column name to its values.

        Returns
        -------
        StudyTable
            A new table.
        """
        return StudyTable({**self._columns, **columns}, meta=self.meta)

    def to_dict(self):
        """A JSON-ready dict: the columns (lists; NaN as null), their types and ``meta``.

        Returns
        -------
        dict
            ``{"columns": {name: list}, "dtypes": {name: str}, "meta": dict}``
        """
        return {
            "columns": {n: [_plain(v) for v in arr] for n, arr in self._columns.items()},
            "dtypes": {n: _KINDS.get(arr.dtype.kind, "object") for n, arr in self._columns.items()},
            "meta": _plain(self.meta),
        }

    @classmethod
    def from_dict(cls, data):
        """The table :meth:`to_dict` described (or JSON read back).

        Parameters
        ----------
        data : dict
            As :meth:`to_dict` returns it.

        Returns
        -------
        StudyTable
        """
        if not isinstance(data, dict) or not isinstance(data.get("columns"), dict):
            raise ValueError(
                "data must be a dict with a 'columns' mapping, as StudyTable.to_dict() gives."
            )
        dtypes = data.get("dtypes", {})
        columns = {
            name: _column(values, dtypes[name]) if dtypes.get(name) else values
            for name, values in data["columns"].items()
        }
        return cls(columns, meta=data.get("meta"))

    def to_csv(self, path_or_buffer=None):
        """Write the rows as CSV (a missing value empty, a tuple as a JSON list; no ``meta``).

        Parameters
        ----------
        path_or_buffer : str, path or file-like, default=None
            Where to write; None returns the text.

        Returns
        -------
        str or None
            The text, when ``path_or_buffer`` is None.
        """
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(map(_csv_cell, row.values()) for row in self)
        if path_or_buffer is None:
            return buffer.getvalue()
        if hasattr(path_or_buffer, "write"):
            path_or_buffer.write(buffer.getvalue())
        else:
            Path(path_or_buffer).write_text(buffer.getvalue(), encoding="utf-8", newline="")

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
            rows = list(csv.reader(io.StringIO(path_or_buffer.read())))
        else:
            with open(os.fspath(path_or_buffer), encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f))
        if not rows:
            raise ValueError("the CSV holds no header row: it is not a study table.")
        header, body = rows[0], rows[1:]
        for k, row in enumerate(body, start=2):
            if len(row) != len(header):
                raise ValueError(
                    f"line {k} of the CSV has {len(row)} cells, the header {len(header)}."
                )
        return cls({name: [_cell(row[j]) for row in body] for j, name in enumerate(header)})


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
    """Equality of cells, NaN equal to NaN and None, a tuple to a list."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    if any(missing):
        return all(missing)
    sequences = [isinstance(v, (tuple, list)) for v in (a, b)]
    if any(sequences):
        return all(sequences) and tuple(a) == tuple(b)
    return bool(a == b)


def _csv_cell(value):
    value = _plain(value)
    if isinstance(value, list):
        return json.dumps(value)
    return "" if value is None else repr(value) if isinstance(value, float) else value
