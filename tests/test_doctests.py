"""Every module's docstring examples run and print what they say (doctest).

Modules that need an optional dependency (CuPy, torch) are imported only where it is
installed; their doctests are written to run without a GPU.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import lowprec

MODULES = sorted(m.name for m in pkgutil.walk_packages(lowprec.__path__, "lowprec.")
                 if not m.name.endswith("__main__"))
OPTIONAL = {"lowprec.torch": "torch", "lowprec._torch_sites": "torch",
            "lowprec._torch_emulate": "torch"}


@pytest.mark.parametrize("name", ["lowprec", *MODULES])
def test_module_doctests(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name], reason=f"{name} needs {OPTIONAL[name]}")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
