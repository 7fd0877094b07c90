"""Argument checks shared by the helpers: every error names the argument and the value it got."""
from __future__ import annotations

import math
import numbers


def whole_number(value, name: str, minimum: int = 1, what: str | None = None) -> int:
    """``value`` as an ``int`` when it is a whole number >= ``minimum`` (booleans, inf and nan are refused);
    otherwise a ValueError naming ``name``, with ``what`` (the argument's meaning) in brackets."""
    try:
        whole = not isinstance(value, bool) and int(value) == value and value >= minimum
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise ValueError(f"{name}={value!r} must be a whole number >= {minimum}" + (f" ({what})" if what else ""))
    return int(value)


def real_number(value, name: str, *, low: float | None = None, high: float | None = None, low_open: bool = False,
                high_open: bool = False, what: str | None = None) -> float:
    """``value`` as a finite ``float`` within the given bounds (closed unless ``low_open``/``high_open``);
    booleans, strings, inf and nan are refused with a ValueError naming ``name``."""
    left = "" if low is None else f"{'(' if low_open else '['}{low:g}"
    right = "" if high is None else f"{high:g}{')' if high_open else ']'}"
    expected = (f"a finite number in {left or '(-inf'}, {right or 'inf)'}" if left or right else "a finite number")
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        number = float(value)
        ok = math.isfinite(number) and (low is None or (number > low if low_open else number >= low)) and (
            high is None or (number < high if high_open else number <= high))
    if not ok:
        raise ValueError(f"{name}={value!r} must be {expected}" + (f" ({what})" if what else ""))
    return float(value)
