"""Saving and loading fitted estimators in a format that runs no code on load.

``pickle`` and ``joblib`` work on the estimators, but unpickling a file runs
whatever code the file names, so a pickled model is only as safe as its
source. :func:`save_model` writes one zip file holding

- ``metadata.json``: the format name and version, the estimator's class name,
  its hyperparameters and its fitted scalars (JSON);
- ``history.json``: the skorch training history (JSON);
- ``weights.pt``: the module's ``state_dict``, written by :func:`torch.save`
  and read back with ``torch.load(weights_only=True)``, which refuses
  anything but tensors and plain containers;

and ends with a checksum of every byte before it (the zip's comment,
``stsq_learn.io.archive``), so a corrupted file is refused before it is
parsed. :func:`load_model` checks the checksum, reads the file, checks its
structure, brings files of earlier format versions up to date with explicit migrations
(:data:`MIGRATIONS`), builds the estimator from its class name (one of this
package's estimators, nothing else) and hands the fitted state to the
estimator's :meth:`~stsq_learn.SparseTokenSelector.set_fitted_state`, which
validates the hyperparameters and checks every stored tensor against the
module they describe. This module is file I/O and validation; the estimator
owns its fitted state.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import warnings

import numpy as np
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._version import __version__
from ..registry import View
from ..tasks import TASKS, Task, get_task
from . import archive as _archive

__all__ = ["MIGRATIONS", "load_model", "save_model"]

FORMAT_NAME = "stsq-learn-model"
FORMAT_VERSION = 5
_METADATA, _HISTORY, _WEIGHTS = "metadata.json", "history.json", "weights.pt"
_MAX_MEMBER_BYTES = 1 << 30  # refuse members that would unpack to more than 1 GiB


def _registered_classes():
    """Class name to class of every estimator a model file may hold: the registry's."""
    from .. import registry

    return {cls.__name__: cls for cls in registry.estimators()}


_CLASSES = View(_registered_classes, "_CLASSES")


def _first_version(name):
    """The first format version that could hold class ``name`` (its ``_first_format_version``;
    a class that does not say: the current one)."""
    first = getattr(_CLASSES.get(name), "_first_format_version", None)
    return FORMAT_VERSION if first is None else first


def _saveable():
    """The classes :func:`save_model` saves, by name, for its messages."""
    names = list(_CLASSES)
    return ", ".join(names[:-1]) + " or " + names[-1]


# -- migrations: the metadata of format version v -> that of version v + 1 --------------
_ADDED_IN_0_2 = {
    "SparseTokenSelector": {
        "learning_rate": "constant",
        "power_t": 0.5,
        "warm_start": False,
        "n_pe_samples_fit": 1,
        "learn_token_block": True,
    },
    "FCNSelector": {"learning_rate": "constant", "power_t": 0.5, "warm_start": False},
}


def _from_v1(meta):
    """Version 1, written by stsq-learn 0.1 and 0.2, to version 2 (0.3).

    - 0.1 wrote none of the hyperparameters 0.2 added: they get the values
      0.1 trained with (a constant rate, no warm start, one draw, the full W).
    - ``callbacks`` (0.3) was not a hyperparameter: None.
    - ``pe_sampling`` (0.3) is ``"full"``, the sampler 0.1 and 0.2 had, so a
      loaded model predicts exactly as it did; ``max_positions`` (0.3) None.
    - The fitted section named private attributes (``_predict_seed``,
      ``_y_1d``, ``device_``); version 2 names the fields of
      :meth:`~stsq_learn.SparseTokenSelector.get_fitted_state`.
    """
    params, fitted = meta["params"], meta["fitted"]
    for name, value in _ADDED_IN_0_2[meta["class"]].items():
        params.setdefault(name, value)
    params.setdefault("callbacks", None)
    if meta["class"] == "SparseTokenSelector":
        # 0.3's encoding options: the codebook is unused by these families, and
        # "full" draws every encoding, as 0.1 and 0.2 did (the same predictions).
        params.setdefault("max_positions", None)
        params.setdefault("pe_sampling", "full")
    for old, new in (("_predict_seed", "predict_seed"), ("_y_1d", "y_1d"), ("device_", "device")):
        if old in fitted:
            fitted[new] = fitted.pop(old)
    meta["format_version"] = 2
    return meta


def _from_v2(meta):
    """Version 2, written by stsq-learn 0.3, to version 3 (0.4).

    - ``token_block_rate`` (0.4, SparseTokenSelector) is 1.0: 0.3 stepped the
      token rows at the rate of the rest of W. The other hyperparameters were
      all written with the values they trained with (0.3 had no ``"auto"``),
      so a loaded model keeps them, and a refit trains as 0.3 did.
    - The fitted section gains what 0.4 records of the run: the solver and
      the rate it used (the saved hyperparameters, which were explicit), the
      token rows' rate (1.0 for the selector when they were learned), and
      ``planned_steps`` (None: 0.3 did not record it).
    """
    params, fitted = meta["params"], meta["fitted"]
    selector = meta["class"] == "SparseTokenSelector"
    if selector:
        params.setdefault("token_block_rate", 1.0)
    fitted.setdefault("solver", params.get("solver"))
    fitted.setdefault("learning_rate_init", params.get("learning_rate_init"))
    learned = selector and params.get("learn_token_block", True)
    fitted.setdefault("token_block_rate", 1.0 if learned else None)
    fitted.setdefault("planned_steps", None)
    meta["format_version"] = 3
    return meta


def _from_v3(meta):
    """Version 3, written by stsq-learn 0.4, to version 4 (0.5).

    - ``n_heads`` (0.5, the attention estimators) is 1: 0.4's model had one
      head, and a one-head model has the same weights and predictions;
      ``length_scale`` (0.5) is None, the unscaled scores 0.4 computed.
    - ``on_divergence`` (0.5, every estimator) is ``"raise"``, what 0.4 did
      with a run it judged diverged.
    - The fitted section holds what the task adds to it (q-sparse averaging:
      ``n_selected``) and nothing else: sparse token selection's
      ``n_selected: null`` is dropped.
    """
    params, fitted = meta["params"], meta["fitted"]
    params.setdefault("on_divergence", "raise")
    cls = _CLASSES.get(meta["class"])
    if cls is not None and "n_heads" in inspect.signature(cls).parameters:
        params.setdefault("n_heads", 1)
        params.setdefault("length_scale", None)
    if fitted.get("n_selected", 0) is None:
        del fitted["n_selected"]
    meta["format_version"] = 4
    return meta


# What stsq-learn 0.6 trained SparseTokenClassifier with: plain loops of full-batch steps on
# the CPU in float64, no schedule, no early stopping.
_CLASSIFIER_0_6 = {
    "learning_rate": "constant",
    "power_t": 0.5,
    "batch_size": "full",
    "tol": 1e-4,
    "n_iter_no_change": None,
    "momentum": 0.0,
    "dtype": "float64",
    "device": "cpu",
    "warm_start": False,
    "on_divergence": "raise",
    "callbacks": None,
}


def _from_v4(meta):
    """Version 4, written by stsq-learn 0.5 and 0.6, to version 5 (0.7).

    Only :class:`~stsq_learn.SparseTokenClassifier` changed: 0.7 runs it on
    the estimators' engine. A file of 0.6 gets the engine's hyperparameters
    with what 0.6 trained with (full-batch steps, float64 on the CPU, a
    constant rate; ``solver="gd"`` is ``"sgd"`` on all rows), and the
    engine's fitted fields: the solver and rate it ran, no draws (the
    classifier draws nothing: seeds 0), ``t_`` 0 and ``planned_steps``
    None (0.6 did not record them). Its weights (``query``, ``readout``,
    ``intercept``, float64) are those of 0.7's two-class module. A 0.6
    ``"two_step"`` model fitted its readout by L-BFGS; 0.7 refits it by
    gradient steps, and predicts exactly as the file's weights say.
    """
    if meta["class"] == "SparseTokenClassifier":
        params, fitted = meta["params"], meta["fitted"]
        if params.get("solver") == "gd":
            params["solver"] = "sgd"
        for name, value in _CLASSIFIER_0_6.items():
            params.setdefault(name, value)
        if fitted is not None:
            solver = params.get("solver")
            fitted.setdefault("t_", 0)
            fitted.setdefault("predict_seed", 0)
            fitted.setdefault("y_1d", True)
            fitted.setdefault("device", "cpu")
            fitted.setdefault("module_seed", 0)
            fitted.setdefault("solver", "adam" if solver == "adam" else "sgd")
            fitted.setdefault("learning_rate_init", params.get("learning_rate_init"))
            fitted.setdefault("token_block_rate", None)
            fitted.setdefault("planned_steps", None)
    meta["format_version"] = 5
    return meta


MIGRATIONS = {1: _from_v1, 2: _from_v2, 3: _from_v3, 4: _from_v4}
"""Format version -> the function that brings its metadata to the next version."""


def _json_param(name, value):
    """A hyperparameter as JSON, or raise if it has no faithful JSON form."""
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if name == "task" and isinstance(value, (type, Task)):
        cls = get_task(value)
        if TASKS.get(cls.name) is not cls:
            raise TypeError(
                f"task={cls.__name__} cannot be saved: a model file names its task, and "
                f"{cls.__name__} is not registered; register it with "
                "stsq_learn.tasks.register_task (and again before loading)."
            )
        return cls.name
    if name == "callbacks" and value is not None:
        warnings.warn(
            "callbacks are not saved: the loaded model has callbacks=None.",
            UserWarning,
            stacklevel=3,
        )
        return None
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
    """Save an estimator to one file that :func:`load_model` reads safely.

    The file is a zip archive of JSON (class name, hyperparameters, fitted
    scalars, training history) and a torch ``state_dict`` of the weights;
    loading it never unpickles code. The optimiser state is not saved: a
    loaded model predicts, scores and can be refitted from scratch. An
    unfitted estimator is saved with its hyperparameters alone, and loads
    unfitted.

    Parameters
    ----------
    estimator : estimator
        An estimator of this package, fitted or not (any other object is
        refused with a ``TypeError`` that names the classes saved).
    path : str or os.PathLike
        Destination file (conventionally ``*.stsq``); an existing file is
        replaced atomically. The file ends with a SHA-256 checksum of its
        contents, which :func:`load_model` checks.

    Returns
    -------
    None
        The estimator is written to ``path``.

    Raises
    ------
    TypeError
        If ``estimator`` is not one of this package's estimators, ``path`` is
        not a path, or a hyperparameter has no JSON form.
    ValueError
        If ``path`` cannot be written (a directory, under a file or a
        missing directory, not writable), naming it, before any work; or if
        an unfitted estimator has a hyperparameter ``fit`` would refuse.

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
    >>> model = SparseTokenSelector(width=16, max_iter=5, random_state=0)
    >>> model = model.fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.stsq")
    >>> save_model(model, path)
    >>> loaded = load_model(path)
    >>> bool((loaded.predict(X) == model.predict(X)).all())
    True
    """
    if type(estimator).__name__ not in _CLASSES or not isinstance(
        estimator, _CLASSES[type(estimator).__name__]
    ):
        raise TypeError(f"save_model saves a {_saveable()}; got {type(estimator).__name__}.")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}: {path!r}.")
    path = os.fspath(path)
    _archive.check_destination(path)  # before any work
    try:
        check_is_fitted(estimator)
    except NotFittedError:  # its hyperparameters alone, checked as fit and load check them
        estimator._validate_params()
        state = {"fitted": None, "history": [], "weights": {}}
    else:
        state = estimator.get_fitted_state()
    params = {k: _json_param(k, v) for k, v in estimator.get_params(deep=False).items()}
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "stsq_learn_version": __version__,
        "class": type(estimator).__name__,
        "params": params,
        "fitted": state["fitted"],
    }
    weights = io.BytesIO()
    torch.save(state["weights"], weights)
    history = json.dumps(state["history"], default=_json_default)

    _archive.write(
        path,
        {
            _METADATA: json.dumps(metadata, indent=1),
            _HISTORY: history,
            _WEIGHTS: weights.getvalue(),
        },
    )


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
    estimator : estimator
        The fitted estimator, of the class the file names, with the same hyperparameters, fitted
        attributes and weights. On the same device type it predicts exactly
        as the saved one did.

    Raises
    ------
    ValueError
        If the file is not a model file of this format, is corrupted or was
        tampered with, always naming the file: a checksum that does not
        match its contents (any flipped byte or truncation of a file of
        format version 4), a file that is not a zip archive, any failure of
        the zip layer, a missing member, bad JSON, an unknown class, unknown
        or invalid hyperparameters, a missing or ill-typed fitted attribute,
        a fitted size out of range (above 2**31 - 1) or larger than the
        weights it fixes, a fitted value its estimator's rules do not give
        (the erf regressor's ``lambda_``), sizes whose model overflows
        torch's shapes, weights that are not plain tensors (e.g. a pickled code object), or
        a missing, extra, misshapen or non-finite tensor.

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
    members, sealed = _archive.read(where, (_METADATA, _HISTORY, _WEIGHTS), _MAX_MEMBER_BYTES)
    metadata = _read_json(members[_METADATA], _METADATA, where)
    history = _read_json(members[_HISTORY], _HISTORY, where)
    weights = members[_WEIGHTS]
    if (
        not sealed
        and isinstance(metadata, dict)
        and metadata.get("format_version") == FORMAT_VERSION
    ):
        raise ValueError(
            f"{where!r} is corrupted: a model file of format version {FORMAT_VERSION} ends with "
            "a checksum of its contents, and this one does not."
        )
    metadata = _migrate(metadata, where)
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise ValueError(f"{where!r}: {_HISTORY} must be a list of per-epoch records.")
    try:
        weights = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(
            f"{where!r}: {_WEIGHTS} is not a plain tensor archive and was refused "
            f"(nothing in it was run): {str(exc).splitlines()[0]}"
        ) from None
    estimator = _estimator(metadata, where)
    if metadata["fitted"] is None:
        return _unfitted(estimator, history, weights, where)
    state = {"fitted": metadata["fitted"], "history": history, "weights": weights}
    try:
        return estimator.set_fitted_state(state, device=device)
    except ValueError as exc:
        raise ValueError(f"{where!r}: {exc}") from None


def _read_json(raw, name, where):
    try:
        return json.loads(raw.decode("utf-8"))
    # ValueError: also an integer of more digits than Python converts (4300)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{where!r}: {name} is not valid JSON: {exc}") from None


def _migrate(metadata, where):
    """Check the format of ``metadata`` and bring it to :data:`FORMAT_VERSION`.

    Everything a migration reads is checked first (the format, an integer
    version this release reads, a class that version could hold, the two
    sections as objects), so every failure is a ``ValueError`` naming the
    file and what is wrong.
    """
    if not isinstance(metadata, dict):
        raise ValueError(f"{where!r}: {_METADATA} must hold a JSON object.")
    if metadata.get("format") != FORMAT_NAME:
        raise ValueError(
            f"{where!r} is not an stsq-learn model file: format={metadata.get('format')!r}."
        )
    version = metadata.get("format_version")
    known = sorted({*MIGRATIONS, FORMAT_VERSION})
    if not isinstance(version, int) or isinstance(version, bool) or version not in known:
        raise ValueError(
            f"{where!r} has format_version={version!r}; this stsq-learn reads versions {known}."
        )
    name = metadata.get("class")
    if not isinstance(name, str) or name not in _CLASSES:
        raise ValueError(
            f"{where!r}: class {name!r} is not an stsq-learn estimator; expected one of "
            f"{sorted(_CLASSES)}."
        )
    if version < _first_version(name):
        raise ValueError(
            f"{where!r}: class {name!r} cannot be in a file of format_version={version}: it "
            f"was first saved in format version {_first_version(name)}."
        )
    for section in ("params", "fitted"):
        if section == "fitted" and metadata.get(section) is None and version == FORMAT_VERSION:
            continue  # an unfitted estimator (its hyperparameters alone)
        if not isinstance(metadata.get(section), dict):
            raise ValueError(
                f"{where!r}: {section!r} must be a JSON object, got {metadata.get(section)!r}."
            )
    while metadata["format_version"] != FORMAT_VERSION:
        version = metadata["format_version"]
        try:
            metadata = MIGRATIONS[version](metadata)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # The checks above leave a migration nothing to trip on; should one still
            # fail, it is a malformed file, not a bug to surface as a raw error.
            raise ValueError(
                f"{where!r}: the {name} of format_version={version} cannot be read: "
                f"{type(exc).__name__}: {exc}."
            ) from None
    return metadata


def _unfitted(estimator, history, weights, where):
    """The unfitted ``estimator`` of a file without fitted state, its hyperparameters checked."""
    if history != [] or not (isinstance(weights, dict) and not weights):
        raise ValueError(
            f"{where!r}: an unfitted {type(estimator).__name__} (fitted: null) holds no history "
            "and no weights, and this file has some."
        )
    try:
        estimator._validate_params()
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where!r}: invalid hyperparameter: {exc}") from None
    return estimator


def _estimator(metadata, where):
    """The unfitted estimator of ``metadata`` (its hyperparameters are validated later)."""
    cls = _CLASSES[metadata["class"]]
    params = metadata["params"]
    expected = set(cls().get_params(deep=False))
    if set(params) != expected:
        missing, unknown = sorted(expected - set(params)), sorted(set(params) - expected)
        raise ValueError(
            f"{where!r}: the hyperparameters of {cls.__name__} do not match: missing "
            f"{missing}, unknown {unknown}."
        )
    if isinstance(params.get("extra_hidden_layers"), list):
        params = {**params, "extra_hidden_layers": tuple(params["extra_hidden_layers"])}
    return cls(**params)
