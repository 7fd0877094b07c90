"""Figures and widget callbacks, one submodule per notebook, all re-exported here.

Every callback is a plain function that returns a figure; ``save_figure``/``show`` write to figures/.
Each submodule lists its public names in ``__all__``.
"""
import importlib as _importlib

from .core import *  # noqa: F401,F403  (notebooks 01-02 and the shared tools)
from .core import _display  # noqa: F401

for _name in ("magnet", "repetition", "decoding", "mtc"):  # notebooks 03-06
    try:
        _module = _importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _error:
        if _error.name != f"{__name__}.{_name}":
            raise
        continue
    _clashes = sorted(set(_module.__all__) & set(globals()))
    if _clashes:
        raise ImportError(f"helpers.plots.{_name} redefines {_clashes}; give them distinct names")
    globals().update({_public: getattr(_module, _public) for _public in _module.__all__})
