"""Loaded at start-up by every Python process of a slice run (the kernel and the worker processes it spawns), from
the ``PYTHONPATH`` that ``helpers.equal_numbers`` sets: it makes the smoke profile's sizes run on the slice's model
in the cpu profile's precision, at any commit, without editing that commit's code.

``WORKBOOK_SLICE_MODEL`` names the model (``embedded:smollm2-135m``, or the tiny random decoder in the tests);
``WORKBOOK_SLICE_CHECKOUT`` the checkout whose ``helpers`` must be the one imported (an error otherwise, so a slice
never runs another checkout's code).
"""
import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path


class _SliceProfile(importlib.abc.MetaPathFinder):
    """Finds ``helpers.profiles`` as Python would, and after it runs swaps the smoke profile's model and dtype."""

    def find_spec(self, name, path, target=None):
        if name != "helpers.profiles":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        checkout = os.environ.get("WORKBOOK_SLICE_CHECKOUT")
        if checkout and Path(checkout).resolve() not in Path(spec.origin).resolve().parents:
            raise ImportError(f"a slice of {checkout} imported helpers from {spec.origin}: put the checkout first on "
                              "PYTHONPATH")
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            smoke = module._PROFILES["smoke"]
            module._PROFILES["smoke"] = smoke.replace(model_name=os.environ["WORKBOOK_SLICE_MODEL"], dtype="auto")

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("WORKBOOK_SLICE_MODEL"):
    sys.meta_path.insert(0, _SliceProfile())
