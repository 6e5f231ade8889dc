"""Number formatting shared by the summary rows."""

from __future__ import annotations

import math


def fmt(value, digits=3):
    """``value`` with ``digits`` decimals, ``"n/a"`` for None."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def finite(value):
    """``value``, or None where it is None or not finite."""
    return None if value is None or not math.isfinite(value) else value


def spread(mean, low, high):
    """``"mean [low, high]"``, ``"n/a"`` where the mean is not finite."""
    mean, low, high = finite(mean), finite(low), finite(high)
    if mean is None:
        return "n/a"
    return f"{mean:.3f} [{low:.2f}, {high:.2f}]"
