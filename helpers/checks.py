"""Argument checks shared by the helpers: every error names the argument and the value it got."""
from __future__ import annotations


def whole_number(value, name: str, minimum: int = 1, what: str | None = None) -> int:
    """``value`` as an ``int`` when it is a whole number >= ``minimum`` (booleans are refused); otherwise a
    ValueError naming ``name``, with ``what`` (the argument's meaning) in brackets."""
    try:
        whole = not isinstance(value, bool) and int(value) == value and value >= minimum
    except (TypeError, ValueError):
        whole = False
    if not whole:
        raise ValueError(f"{name}={value!r} must be a whole number >= {minimum}" + (f" ({what})" if what else ""))
    return int(value)
