"""Saving and loading fitted estimators in a format that runs no code on load.

``pickle`` and ``joblib`` work on the estimators, but unpickling a file runs
whatever code the file names, so a pickled model is only as safe as its
source. :func:`save_model` writes one zip file holding

- ``metadata.json``: the format name and version, the estimator's class name,
  its hyperparameters and its fitted scalars (JSON);
- ``history.json``: the skorch training history (JSON);
- ``weights.pt``: the module's ``state_dict``, written by :func:`torch.save`
  and read back with ``torch.load(weights_only=True)``, which refuses
  anything but tensors and plain containers.

:func:`load_model` rebuilds the estimator from its class name (one of this
package's estimators, nothing else), validates every hyperparameter, rebuilds
the torch module and checks that every stored tensor has the name, shape and
dtype kind the module expects before loading it.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
import warnings
import zipfile

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNetRegressor
from skorch.history import History

from ._base import _DTYPES
from ._validation import resolve_device
from .estimators import FCNSelector, SparseTokenSelector
from .nn import SquaredError

__all__ = ["load_model", "save_model"]

FORMAT_NAME = "stsq-learn-model"
FORMAT_VERSION = 1
_METADATA, _HISTORY, _WEIGHTS = "metadata.json", "history.json", "weights.pt"
_MAX_MEMBER_BYTES = 1 << 30  # refuse members that would unpack to more than 1 GiB
_CLASSES = {cls.__name__: cls for cls in (SparseTokenSelector, FCNSelector)}
# Fitted state besides net_ and device_: name -> (type check, description).
_FITTED = {
    "n_features_in_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "seq_len_": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "n_iter_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "t_": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "loss_curve_": (
        lambda v: isinstance(v, list) and all(_is_real(x) for x in v),
        "a list of numbers",
    ),
    "_predict_seed": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "_y_1d": (lambda v: isinstance(v, bool), "a boolean"),
}


# Hyperparameters added after format version 1 was first written (stsq-learn 0.1.0).
_ADDED_PARAMS = frozenset(
    {"learning_rate", "power_t", "warm_start", "n_pe_samples_fit", "learn_token_block"}
)


def _is_int(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_real(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_param(name, value):
    """A hyperparameter as JSON, or raise if it has no faithful JSON form."""
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_json_param(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if name == "random_state":
        warnings.warn(
            f"random_state={value!r} cannot be stored; it is saved as None. Predictions "
            "of the saved model are unaffected (its prediction seed is stored), but a "
            "refit of the loaded model will not reproduce this one.",
            UserWarning,
            stacklevel=3,
        )
        return None
    raise TypeError(f"Hyperparameter {name}={value!r} cannot be saved: it has no JSON form.")


def save_model(estimator, path):
    """Save a fitted estimator to one file that :func:`load_model` reads safely.

    The file is a zip archive of JSON (class name, hyperparameters, fitted
    scalars, training history) and a torch ``state_dict`` of the weights;
    loading it never unpickles code. The optimiser state is not saved: a
    loaded model predicts, scores and can be refitted from scratch.

    Parameters
    ----------
    estimator : SparseTokenSelector or FCNSelector
        A fitted estimator.
    path : str or os.PathLike
        Destination file (conventionally ``*.stsq``); an existing file is
        replaced atomically.

    Returns
    -------
    None
        The estimator is written to ``path``.

    Raises
    ------
    TypeError
        If ``estimator`` is not one of this package's estimators, ``path`` is
        not a path, or a hyperparameter has no JSON form.
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.

    See Also
    --------
    load_model : Read the file back.

    Examples
    --------
    >>> import os, tempfile
    >>> from stsq_learn import SparseTokenSelector, make_sparse_token_selection
    >>> from stsq_learn import load_model, save_model
    >>> X, y = make_sparse_token_selection(200, seq_len=8, n_features=2,
    ...                                    n_selected=2, random_state=0)
    >>> model = SparseTokenSelector(width=16, max_iter=5, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.stsq")
    >>> save_model(model, path)
    >>> loaded = load_model(path)
    >>> bool((loaded.predict(X) == model.predict(X)).all())
    True
    """
    if type(estimator).__name__ not in _CLASSES or not isinstance(
        estimator, _CLASSES[type(estimator).__name__]
    ):
        raise TypeError(
            "save_model saves a SparseTokenSelector or an FCNSelector, got "
            f"{type(estimator).__name__}."
        )
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}: {path!r}.")
    check_is_fitted(estimator)
    params = {k: _json_param(k, v) for k, v in estimator.get_params(deep=False).items()}
    fitted = {}
    for name in _FITTED:
        value = getattr(estimator, name)
        fitted[name] = [float(v) for v in value] if name == "loss_curve_" else value
        if isinstance(fitted[name], (np.integer, np.bool_)):
            fitted[name] = fitted[name].item()
    module = estimator.net_.module_
    fitted["device_"] = str(estimator.device_)
    fitted["module_seed"] = int(getattr(module, "encoding_seed", 0))
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "class": type(estimator).__name__,
        "params": params,
        "fitted": fitted,
    }
    weights = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, weights)
    history = json.dumps(list(estimator.net_.history), default=_json_default)

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".stsq-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(_METADATA, json.dumps(metadata, indent=1))
            zf.writestr(_HISTORY, history)
            zf.writestr(_WEIGHTS, weights.getvalue())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _json_default(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return str(value)


def load_model(path, *, device=None):
    """Load an estimator written by :func:`save_model`, running no code from the file.

    Parameters
    ----------
    path : str or os.PathLike
        File written by :func:`save_model`.
    device : str, torch.device or None, default=None
        Device to predict on. None uses the device the model was fitted on
        when this machine has it, else the CPU (with a warning); otherwise as
        the estimators' ``device`` parameter (``"auto"``, ``"cpu"``,
        ``"cuda"``, ...).

    Returns
    -------
    estimator : SparseTokenSelector or FCNSelector
        The fitted estimator, with the same hyperparameters, fitted
        attributes and weights. On the same device type it predicts exactly
        as the saved one did.

    Raises
    ------
    ValueError
        If the file is not a model file of this format, or was tampered with:
        bad JSON, an unknown class, unknown or invalid hyperparameters, a
        missing or ill-typed fitted attribute, weights that are not plain
        tensors (e.g. a pickled code object), or a missing, extra, misshapen
        or non-finite tensor.

    See Also
    --------
    save_model : Write the file.

    Examples
    --------
    See :func:`save_model`.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}: {path!r}.")
    where = os.fspath(path)
    try:
        zf = zipfile.ZipFile(where)
    except zipfile.BadZipFile:
        raise ValueError(
            f"{where!r} is not an stsq-learn model file (not a zip archive)."
        ) from None
    with zf:
        metadata = _read_json(zf, _METADATA, where)
        history = _read_json(zf, _HISTORY, where)
        weights = _read_member(zf, _WEIGHTS, where)
    estimator, fitted = _check_metadata(metadata, where)
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise ValueError(f"{where!r}: {_HISTORY} must be a list of per-epoch records.")

    target = _load_device(fitted["device_"], device)
    try:
        state = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(
            f"{where!r}: {_WEIGHTS} is not a plain tensor archive and was refused "
            f"(nothing in it was run): {str(exc).splitlines()[0]}"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(f"{where!r}: {_WEIGHTS} must hold a dict of named tensors.")
    fixed_pe = state.get("fixed_pe")
    if isinstance(fixed_pe, torch.Tensor) and fixed_pe.shape[:1] != (fitted["seq_len_"],):
        raise ValueError(
            f"{where!r}: weight 'fixed_pe' has shape {tuple(fixed_pe.shape)}, but the "
            f"metadata says seq_len_={fitted['seq_len_']}."
        )
    args = (fitted["seq_len_"], fitted["n_features_in_"], fitted["module_seed"])
    with torch.device("meta"):  # shapes only: a tampered size allocates nothing
        expected = estimator._make_module(*args).state_dict()
    _check_state_dict(state, expected, where)
    module = estimator._make_module(*args).to(dtype=_DTYPES[estimator.dtype])
    module.load_state_dict(state)
    module = module.to(device=target)

    net = NeuralNetRegressor(
        module=module,
        criterion=SquaredError,
        optimizer=torch.optim.SGD if estimator.solver == "sgd" else torch.optim.Adam,
        lr=estimator.learning_rate_init,
        train_split=None,
        device=target,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*already initialized.*")
        net.initialize()
    net.history = History(history)
    estimator.net_ = net
    estimator.device_ = target
    for name in _FITTED:
        setattr(estimator, name, fitted[name])
    return estimator


def _read_member(zf, name, where):
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ValueError(f"{where!r} is not a complete stsq-learn model file: no {name}.") from None
    if info.file_size > _MAX_MEMBER_BYTES:
        raise ValueError(f"{where!r}: {name} is {info.file_size} bytes, more than allowed.")
    return zf.read(info)


def _read_json(zf, name, where):
    raw = _read_member(zf, name, where)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where!r}: {name} is not valid JSON: {exc}") from None


def _check_metadata(metadata, where):
    """Validate metadata.json and build the (unfitted) estimator it describes."""
    if not isinstance(metadata, dict):
        raise ValueError(f"{where!r}: {_METADATA} must hold a JSON object.")
    if metadata.get("format") != FORMAT_NAME:
        raise ValueError(
            f"{where!r} is not an stsq-learn model file: format={metadata.get('format')!r}."
        )
    version = metadata.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{where!r} has format_version={version!r}; this stsq-learn reads version "
            f"{FORMAT_VERSION}."
        )
    name = metadata.get("class")
    if name not in _CLASSES:
        raise ValueError(
            f"{where!r}: class {name!r} is not an stsq-learn estimator; expected one of "
            f"{sorted(_CLASSES)}."
        )
    cls = _CLASSES[name]
    params = metadata.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{where!r}: 'params' must be a JSON object, got {params!r}.")
    defaults = cls().get_params(deep=False)
    expected = set(defaults)
    # Files from before these hyperparameters existed load with their defaults.
    params = {**{k: defaults[k] for k in _ADDED_PARAMS & (expected - set(params))}, **params}
    if set(params) != expected:
        missing, unknown = sorted(expected - set(params)), sorted(set(params) - expected)
        raise ValueError(
            f"{where!r}: the hyperparameters of {name} do not match: missing {missing}, "
            f"unknown {unknown}."
        )
    if isinstance(params.get("extra_hidden_layers"), list):
        params = {**params, "extra_hidden_layers": tuple(params["extra_hidden_layers"])}
    estimator = cls(**params)
    try:
        estimator._validate_params()
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where!r}: invalid hyperparameter: {exc}") from None

    fitted = metadata.get("fitted")
    if not isinstance(fitted, dict):
        raise ValueError(f"{where!r}: 'fitted' must be a JSON object, got {fitted!r}.")
    checks = {
        **_FITTED,
        "device_": (lambda v: isinstance(v, str), "a device string"),
        "module_seed": (lambda v: _is_int(v, 0), "an integer >= 0"),
    }
    for key, (ok, what) in checks.items():
        if key not in fitted:
            raise ValueError(f"{where!r}: the fitted attribute {key!r} is missing.")
        if not ok(fitted[key]):
            raise ValueError(f"{where!r}: fitted {key} must be {what}, got {fitted[key]!r}.")
    if not all(math.isfinite(v) for v in fitted["loss_curve_"]):
        raise ValueError(f"{where!r}: fitted loss_curve_ holds NaN or infinity.")
    return estimator, fitted


def _load_device(saved, requested):
    if requested is not None:
        return resolve_device(requested)
    try:
        device = torch.device(saved)
    except RuntimeError:
        raise ValueError(f"The saved device_ {saved!r} is not a device.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        warnings.warn(
            f"The model was fitted on {saved}, which this machine does not have; it is "
            "loaded on the CPU. Stochastic-encoding predictions then use the CPU random "
            "stream and differ from those drawn on the GPU.",
            UserWarning,
            stacklevel=3,
        )
        return torch.device("cpu")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"The saved device_ {saved!r} is not supported; use 'cpu' or 'cuda'.")
    return resolve_device(str(device)) if device.type == "cuda" else device


def _check_state_dict(state, expected, where):
    missing, unknown = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unknown:
        raise ValueError(
            f"{where!r}: the weights do not match the model: missing {missing}, unknown {unknown}."
        )
    for key, ref in expected.items():
        value = state[key]
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{where!r}: weight {key!r} is a {type(value).__name__}, not a tensor."
            )
        if value.shape != ref.shape:
            raise ValueError(
                f"{where!r}: weight {key!r} has shape {tuple(value.shape)}, but the model "
                f"described by the metadata needs {tuple(ref.shape)}."
            )
        if not value.is_floating_point():
            raise ValueError(f"{where!r}: weight {key!r} has dtype {value.dtype}, not a float.")
        if not torch.isfinite(value).all():
            raise ValueError(f"{where!r}: weight {key!r} holds NaN or infinity.")
