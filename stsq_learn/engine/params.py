"""Parameters checked by name: ``set_params`` that checks every key before it sets any, and
constructors that name the public class when a keyword is not one of its parameters.

scikit-learn's :meth:`~sklearn.base.BaseEstimator.set_params` sets the keys
of a call one by one and raises at the first unknown one, so
``set_params(length_scale="log", bogus=1)`` leaves ``length_scale`` changed.
:class:`AtomicSetParams` checks every key first, nested
``component__parameter`` keys the scikit-learn way included, then hands the
call to scikit-learn unchanged: a valid call behaves exactly as
``BaseEstimator.set_params`` (values are still validated in ``fit``).

An estimator inherits its ``__init__`` from a private core
(``SparseTokenSelector`` from ``_AttentionCore``), so Python's own message for
a misspelt keyword, ``_AttentionCore.__init__() got an unexpected keyword
argument 'widht'``, names a class the user never wrote. Every ``__init__``
defined under :class:`AtomicSetParams` is wrapped (:func:`named_init`) to
raise a ``TypeError`` that names the class called and lists its parameters,
as ``set_params`` does.
"""

from __future__ import annotations

import functools
import inspect
import sys
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval


def check_param_keys(estimator, params):
    """Raise ``ValueError`` (scikit-learn's message) at the first key of ``params`` that is not a
    parameter of ``estimator``; a key ``name__sub`` is checked against the (new, when the call
    sets ``name`` too) value of ``name``.
    """
    if not params:
        return
    valid = estimator.get_params(deep=True)
    nested = {}
    for key in params:
        name, delim, sub = key.partition("__")
        if name not in valid:
            raise ValueError(
                f"Invalid parameter {name!r} for estimator {estimator}. "
                f"Valid parameters are: {estimator._get_param_names()!r}."
            )
        if delim:
            nested.setdefault(name, {})[sub] = params[key]
    for name, sub_params in nested.items():
        # scikit-learn sets the plain keys first: nested keys reach the new value.
        component = params.get(name, valid[name])
        if not hasattr(component, "set_params") or not hasattr(component, "get_params"):
            raise ValueError(
                f"Invalid parameter {next(iter(sub_params))!r} of {name!r} for estimator "
                f"{estimator}: {name}={component!r} has no parameters to set."
            )
        check_param_keys(component, sub_params)


def named_init(init):
    """``init``, refusing an unknown keyword or an extra positional argument by the class's name.

    The check runs before ``init``: ``Cls(widht=3)`` raises ``TypeError: Cls() got an
    unexpected keyword argument 'widht'. Valid parameters are: [...]``, naming the class called
    (``type(self)``, not the one that defined ``init``). A valid call runs ``init`` unchanged;
    ``inspect.signature`` (and so ``get_params``) still reads ``init``'s signature.
    """
    if getattr(init, "_names_its_class", False):
        return init
    params = list(inspect.signature(init).parameters.values())[1:]
    kinds = inspect.Parameter
    if any(p.kind in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD) for p in params):
        return init  # not a scikit-learn estimator's __init__: Python's message stands
    positional = [p.name for p in params if p.kind == kinds.POSITIONAL_OR_KEYWORD]
    names = frozenset(p.name for p in params)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        problem = _call_problem(args, kwargs, positional, names)
        if problem is not None:
            cls = type(self)
            raise TypeError(
                f"{cls.__name__}() {problem}. Valid parameters are: {cls._get_param_names()!r}."
            )
        init(self, *args, **kwargs)

    __init__._names_its_class = True
    return __init__


def _call_problem(args, kwargs, positional, names):
    """What Python would refuse in a call ``(*args, **kwargs)``, as its message ends; or None."""
    for key in kwargs:
        if key not in names:
            return f"got an unexpected keyword argument {key!r}"
    if len(args) > len(positional):
        return (
            f"takes at most {len(positional)} positional argument(s) but {len(args)} were "
            "given (the others are keyword-only)"
        )
    for name in positional[: len(args)]:
        if name in kwargs:
            return f"got multiple values for argument {name!r}"
    return None


def refuse_booleans(estimator):
    """Raise for a boolean where a parameter's constraints ask for a number (``TypeError``), or
    for an integer too large for the float64 a real number is computed in (``ValueError``).

    scikit-learn's ``Interval(Integral)`` and ``Interval(Real)`` let True and False pass as 1
    and 0; an integer beyond float64's range (JSON's, and so a model file's, are unbounded)
    would overflow in the computation, not here. Run after scikit-learn's ``_validate_params``.
    """
    params = estimator.get_params(deep=False)
    for name, constraints in estimator._parameter_constraints.items():
        kinds = {c.type for c in constraints if isinstance(c, Interval)}
        value = params.get(name)
        if kinds and isinstance(value, (bool, np.bool_)):
            kind = "an integer" if Integral in kinds else "a real number"
            raise TypeError(
                f"The {name!r} parameter of {type(estimator).__name__} must be {kind}, "
                f"got the boolean {value!r}."
            )
        if Real in kinds and isinstance(value, Integral) and abs(value) > sys.float_info.max:
            raise ValueError(
                f"The {name!r} parameter of {type(estimator).__name__} must be a real number "
                f"that a float64 holds, got an integer of {len(str(abs(value)))} digits."
            )


class AtomicSetParams:
    """Mixin: ``set_params`` checks every key before it sets any (a failed call changes nothing).

    Every ``__init__`` a subclass defines is wrapped by :func:`named_init`:
    an unknown keyword raises a ``TypeError`` naming the class called and
    its parameters.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in vars(cls):
            cls.__init__ = named_init(vars(cls)["__init__"])

    def set_params(self, **params):
        """Set the parameters of this estimator.

        Every key is checked before any is set, so a call with an unknown
        key raises and leaves the estimator as it was; otherwise as
        :meth:`sklearn.base.BaseEstimator.set_params`. Values are
        validated in ``fit``.

        Parameters
        ----------
        **params : dict
            Estimator parameters; ``component__parameter`` sets a parameter
            of a nested estimator.

        Returns
        -------
        self : estimator instance
            Estimator instance.

        Raises
        ------
        ValueError
            If a key (nested keys included) is not a parameter, before
            anything is set.
        """
        check_param_keys(self, params)
        before = self.get_params(deep=False)
        try:
            return super().set_params(**params)
        except BaseException:
            # A nested estimator refused a value: restore this one's parameters.
            for name, value in before.items():
                setattr(self, name, value)
            raise
