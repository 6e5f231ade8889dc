"""Input checks shared by every public entry point.

Every check raises a ``ValueError`` or ``TypeError`` that names the argument
and the offending value, before any work starts, and never modifies its input.
"""

from __future__ import annotations

import numbers
import re
import warnings

import numpy as np
import torch
from sklearn.utils._param_validation import validate_parameter_constraints

_CHECK_BLOCK = 1 << 20  # values checked at once when a sum is not finite (1 MiB of bools)


def as_real_array(X, name, expected):
    """``X`` as a NumPy array of real numbers (bool, complex, object and str refused)."""
    if X is None:
        raise ValueError(f"{name} is required: an array of shape {expected}, got None.")
    if hasattr(X, "tocsr") or hasattr(X, "todense"):
        raise TypeError(
            f"{name} is a sparse matrix ({type(X).__name__}); pass a dense array of shape "
            f"{expected}."
        )
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu()
        # NumPy has no bfloat16: widen it (exactly) to float32.
        X = (X.float() if X.dtype == torch.bfloat16 else X).numpy()
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged nested lists and the like
        raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    if arr.dtype.kind == "b":
        raise TypeError(
            f"{name} has boolean dtype; it must hold real numbers (tokens and a 0.0/1.0 "
            f"indicator). Cast it explicitly, e.g. {name}.astype(float), if that is intended."
        )
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must hold real numbers, got an array of dtype {arr.dtype} "
            f"(kind {arr.dtype.kind!r}) from {type(X).__name__}."
        )
    if not arr.dtype.isnative:  # big-endian data on a little-endian machine: torch refuses it
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def tensor_view_of(array, dtype):
    """Whether a CPU tensor of ``dtype`` can share ``array``'s memory (:func:`as_tensor`).

    It can when the array is C-contiguous, of ``dtype`` in native byte order,
    with no negative stride (NumPy calls an array with a negative stride on
    an axis of length 1 C-contiguous; torch refuses any negative stride).
    """
    target = torch.empty(0, dtype=dtype).numpy().dtype  # native byte order
    # A misaligned array (a byte off its elements' alignment) is copied too: torch's
    # kernels round otherwise on it.
    layout = array.flags.c_contiguous and array.flags.aligned
    return array.dtype == target and layout and min(array.strides, default=0) >= 0


def as_tensor(array, dtype, device="cpu"):
    """A tensor of ``dtype`` on ``device`` holding a NumPy array's values; the array is
    never written.

    The one place the package turns users' arrays into tensors. Any layout is
    accepted: negative strides (``X[::-1]``), Fortran order, strided slices,
    read-only and memory-mapped arrays, either byte order. The tensor is
    C-contiguous and holds exactly the values a contiguous copy would give, so
    the layout never changes a result. It shares the array's memory on the CPU
    when the array already is C-contiguous, aligned, in the tensor's dtype and
    native byte order; otherwise the cast and the reordering are one copy.
    """
    array = np.asarray(array)
    if not tensor_view_of(array, dtype):
        array = np.array(array, dtype=torch.empty(0, dtype=dtype).numpy().dtype, order="C")
    with warnings.catch_warnings():  # torch warns that a read-only array is shared
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(array, device=device)


def distinct_values(arr):
    """``arr`` with every broadcast axis (stride 0) taken once: the same values, no repeats.

    A read-only broadcast view (``np.broadcast_to``) may stand for far more
    numbers than memory holds; a check of its values reads this view instead,
    whose indices are also indices of ``arr``.
    """
    if arr.ndim == 0 or 0 not in arr.strides:
        return arr
    return arr[tuple(slice(0, 1) if st == 0 else slice(None) for st in arr.strides)]


def finite_floats(arr, name):
    """``arr`` as floats (integers become float64), or raise naming its first NaN or infinity.

    The common case costs one sum and no array of ``arr``'s size: only when
    the sum is not finite (a NaN or infinity, or finite values whose sum
    overflows) are the values checked one by one, a block of rows at a time.
    A broadcast axis is read once (:func:`distinct_values`).
    """
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    values = distinct_values(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        total = values.sum(dtype=np.float64)
    if np.isfinite(total):
        return arr
    flat = values.reshape(len(values), -1) if values.ndim else values.reshape(1, 1)
    rows = max(1, _CHECK_BLOCK // max(1, flat.shape[1]))
    for start in range(0, len(flat), rows):
        bad = ~np.isfinite(flat[start : start + rows])
        if bad.any():
            i, j = np.argwhere(bad)[0]
            where = np.unravel_index(int(j), values.shape[1:]) if arr.ndim > 1 else ()
            index = (start + int(i), *(int(k) for k in where)) if arr.ndim else ()
            text = ", ".join(map(str, index))
            raise ValueError(
                f"{name} contains NaN or infinity, e.g. {name}[{text}] = {arr[index]}."
            )
    return arr


def finite_targets(arr, name="y"):
    """Targets as :func:`finite_floats`, in C order (a copy only when they are not).

    The reductions over targets (the loss of predicting 0 that ``fit`` starts
    from, R^2 and the other scores) then round alike whatever the layout ``y``
    came in; targets are small next to ``X``.
    """
    return np.ascontiguousarray(finite_floats(arr, name))


def check_float_range(arr, dtype, *, name="X"):
    """Raise if ``arr`` holds values that overflow to infinity when cast to ``dtype``.

    ``dtype`` is a torch floating dtype; the check is a no-op for float64. It
    allocates nothing of ``arr``'s size and reads a broadcast axis once.
    """
    info = torch.finfo(dtype)
    if info.max >= np.finfo(np.float64).max or arr.size == 0:
        return
    values = distinct_values(arr)
    peak = float(max(values.max(), -values.min()))
    if peak > info.max:
        raise ValueError(
            f"{name} holds values up to {peak:.3g} in absolute value, beyond the range of "
            f"{str(dtype).replace('torch.', '')} ({info.max:.3g}): they would become "
            "infinite. Rescale the data or use dtype='float64'."
        )


def check_positive_int(value, name, *, minimum=1):
    """Return ``value`` as an int, or raise if it is not an integer >= minimum."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def check_random_state_param(random_state, caller):
    """Refuse a ``random_state`` scikit-learn does not take, as ``caller``'s parameter."""
    validate_parameter_constraints(
        {"random_state": ["random_state"]}, {"random_state": random_state}, caller_name=caller
    )


def _int_or_range(value, name, pair, order):
    """``(lo, hi)`` of an int >= 1 or an inclusive range of two (``pair``, ``order``: its words)."""
    if not isinstance(value, (tuple, list, np.ndarray)):
        value = check_positive_int(value, name)
        return value, value
    if len(value) != 2:
        raise ValueError(f"{name} must be an int or a {pair}, got {value!r}.")
    lo = check_positive_int(value[0], f"{name}[0]")
    hi = check_positive_int(value[1], f"{name}[1]")
    if lo > hi:
        raise ValueError(f"{name} range must have {order}, got {value!r}.")
    return lo, hi


def check_n_selected(n_selected, seq_len):
    """Check a subset size q (an int or an inclusive range) against seq_len."""
    lo, hi = _int_or_range(n_selected, "n_selected", "pair (q_min, q_max)", "q_min <= q_max")
    if hi > seq_len:
        raise ValueError(
            f"n_selected={n_selected!r} cannot exceed seq_len={seq_len}: a row holds "
            "only seq_len tokens to select from."
        )
    return lo, hi


def check_seq_len(seq_len, name="seq_len"):
    """A sequence length: an int >= 1, or an inclusive range ``(shortest, longest)`` of them."""
    lo, hi = _int_or_range(seq_len, name, "range (shortest, longest)", "shortest <= longest")
    return lo if lo == hi else (lo, hi)


def check_marker_channel(X, n_features, owner, marker, is_marker):
    """Refuse rows that are not ``n_features`` token features then one ``marker`` channel.

    For ``predict`` of a model fitted with ``n_features``: rows of exactly
    ``n_features`` channels whose last channel is no marker channel
    (``is_marker(X[..., -1])`` is false) are the tokens without their marker,
    and are said to be so; with a marker last, they lack a token feature.
    """
    c = X.shape[2]
    if c == n_features and not is_marker(X[..., -1]):
        raise ValueError(
            f"X has {c} channels, as many as the token features {owner} was fitted with "
            f"(n_features={n_features}), and no {marker} after them: the {marker} looks "
            f"missing. Rows are (n_samples, seq_len, n_features + 1), the {marker} last."
        )
    if c - 1 != n_features:
        raise ValueError(
            f"X has {c - 1} token features per token, but {owner} "
            f"was fitted with n_features={n_features}."
        )


def missing_marker_hint(any_valid, name, marker):
    """The end of a bad-marker message: a hint unless ``any_valid`` (a value was a marker).

    A marker channel none of whose values is a marker (a Gaussian token has
    no 0.0 and no 1.0) is most likely a token feature: the rows lack the
    marker channel. Otherwise the empty string.
    """
    if any_valid:
        return ""
    return (
        f" None of its values is one: it looks like a token feature, as if the {marker} "
        f"were missing ({name} must have shape (n_samples, seq_len, n_features + 1), the "
        f"{marker} last)."
    )


def _is_binary(values):
    return bool(np.isin(values, (0.0, 1.0)).all())


def check_sequences(X, *, name="X", n_features=None, owner="the model"):
    """Validate a batch of sequences against the data contract.

    Returns a floating NumPy array of shape (n_samples, seq_len, n_features + 1)
    (the input itself when it already is one; never modified). With
    ``n_features`` (a fitted model's, named ``owner``), the channels are
    checked against it first (:func:`check_marker_channel`).
    """
    arr = as_real_array(X, name, f"(n_samples, seq_len, n_features + 1) for {name}")
    if arr.ndim != 3:
        raise ValueError(
            f"{name} must be 3-D, (n_samples, seq_len, n_features + 1), got an "
            f"array of shape {arr.shape}."
        )
    n, T, c = arr.shape
    if n == 0 or T == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need at least one row and token.")
    if c < 2:
        raise ValueError(
            f"{name} has {c} channel(s) on its last axis; need the token features "
            "and the selection indicator (n_features + 1 >= 2)."
        )
    if n_features is not None:
        check_marker_channel(arr, n_features, owner, "selection indicator channel", _is_binary)
    arr = finite_floats(arr, name)
    mask = arr[..., -1]
    not_binary = (mask != 0.0) & (mask != 1.0)
    if not_binary.any():
        i, t = np.argwhere(not_binary)[0]
        hint = missing_marker_hint(not not_binary.all(), name, "selection indicator channel")
        raise ValueError(
            f"The selection indicator {name}[..., -1] must be exactly 0.0 or 1.0; "
            f"{name}[{i}, {t}, -1] = {mask[i, t]!r}.{hint}"
        )
    empty = mask.sum(axis=1) == 0
    if empty.any():
        rows = np.flatnonzero(empty)
        raise ValueError(
            f"Every row of {name} must select at least one token; "
            f"{len(rows)} row(s) select none, e.g. row {rows[0]}."
        )
    return arr


def check_targets(y, n_samples, n_features, *, name="y"):
    """Validate targets for ``n_samples`` rows of ``n_features``-dimensional tokens.

    Returns ``(y2d, was_1d)``; a 1-D ``y`` is accepted when ``n_features == 1``.
    """
    arr = as_real_array(y, name, f"({n_samples}, {n_features}) for {name}")
    was_1d = arr.ndim == 1
    if was_1d and n_features == 1:
        arr = arr[:, None]
    if arr.shape != (n_samples, n_features):
        raise ValueError(
            f"{name} must have shape (n_samples, n_features) = ({n_samples}, {n_features}) "
            f"to match X, got shape {arr.shape}."
        )
    return finite_targets(arr, name), was_1d


def check_target_shape(y, shape, *, name="y"):
    """``y`` as finite floats of exactly ``shape``; a 1-D ``y`` stands for ``(n, 1)``."""
    shape = tuple(int(s) for s in shape)
    arr = as_real_array(y, name, f"{shape} for {name}")
    if arr.ndim == 1 and len(shape) == 2 and shape[1] == 1:
        arr = arr[:, None]
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape} to match X, got shape {arr.shape}.")
    return finite_targets(arr, name)


def resolve_device(device):
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a torch.device into a device."""
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'auto', 'cpu' or 'cuda', got {device!r}.")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device={device!r} is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'."
        ) from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this "
                "machine; use device='auto' or 'cpu'."
            )
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} does not exist: this machine has "
                f"{torch.cuda.device_count()} CUDA device(s)."
            )
    elif resolved.type != "cpu":
        raise ValueError(f"device={device!r} is not supported; use 'auto', 'cpu' or 'cuda'.")
    return resolved


def check_callbacks(callbacks):
    """``callbacks`` as a list of skorch callbacks or ``(name, callback)`` pairs."""
    from skorch.callbacks import Callback

    if callbacks is None:
        return []
    for i, cb in enumerate(callbacks):
        named = isinstance(cb, tuple) and len(cb) == 2 and isinstance(cb[0], str)
        if not isinstance(cb[1] if named else cb, Callback):
            raise TypeError(
                f"callbacks[{i}] must be a skorch callback (an instance of "
                f"skorch.callbacks.Callback) or a (name, callback) pair, got {cb!r}."
            )
    return list(callbacks)


_LOCAL_SCHEDULER = re.compile(r"local(?::(.*))?")


def check_scheduler(scheduler):
    """Read a dask scheduler specification without importing dask.

    A bad specification fails here, before any work and whether or not the
    ``distributed`` extra is installed; :func:`stsq_learn.distributed.parse_scheduler`
    documents the accepted forms and returns the same ``(kind, value)`` pair.
    """
    if not isinstance(scheduler, str):
        raise TypeError(
            "scheduler must be a string: 'local', 'local:N' or a scheduler address such as "
            f"'tcp://host:8786', got {scheduler!r} of type {type(scheduler).__name__}."
        )
    spec = scheduler.strip()
    match = _LOCAL_SCHEDULER.fullmatch(spec)
    if match:
        if match.group(1) is None:
            return "local", None
        try:
            n_workers = int(match.group(1))
        except ValueError:
            raise ValueError(
                f"scheduler={scheduler!r}: the number of workers after 'local:' must be a "
                "positive integer, e.g. 'local:4'."
            ) from None
        if n_workers < 1:
            raise ValueError(
                f"scheduler={scheduler!r}: a local cluster needs at least one worker, "
                "e.g. 'local:4'."
            )
        return "local", n_workers
    if not spec or any(c.isspace() for c in spec) or ":" not in spec:
        raise ValueError(
            f"scheduler={scheduler!r} is neither 'local', 'local:N' nor a scheduler address "
            "such as 'tcp://host:8786' or 'host:8786'."
        )
    return "address", spec
