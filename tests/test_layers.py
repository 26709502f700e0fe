"""The import graph runs one way: lower layers know nothing of higher ones.

The flow (README, ``lowprec/__init__``): formats -> rounding/codec -> arithmetic and
accumulation -> scaled and block formats -> autograd and trainer -> inspect -> plots,
figures, CLI, tutorials, grading, explorer; ``lowprec.gpu`` and ``lowprec.validate``
stand beside the numeric layers. The private compiled heart (``lowprec._kernels``) sits
under all of it. This test reads every module's source (imports inside functions
included) and fails on an import that runs up the flow, or on a module imported by a
computed name (``importlib.import_module("lowprec...")``), which would hide an edge of
the graph from this very check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lowprec"

#: Layer of each top-level module or subpackage of lowprec (its first dotted part).
#: Equal layers may import each other; a module may import only its layer or lower.
LAYERS: dict[str, int] = {
    # the private heart and plumbing that everything may use
    "_kernels": 0, "_runtime": 0, "_outdir": 0, "_names": 0,
    "formats": 1,
    # rounding and codecs
    "rounding": 2, "packing": 2, "explain": 2, "_blocks": 2, "nan_rules": 2,
    # arithmetic and accumulation models
    "arith": 3, "matmul": 3, "tensorcores": 3, "instructions": 3, "blockmma": 3, "library_gemms": 3,
    "amd": 3,
    "gpu": 3,
    # scaled and block formats; the validation of hardware against the models
    "scaling": 4, "mx": 4, "nvfp4": 4, "schemes": 4, "quant_error": 4, "validate": 4,
    "_validate_report": 4, "_validate_gemm": 4, "hadamard": 4, "recipes": 4,
    "identify": 4, "gemm_identify": 4, "_gemm_search": 4,
    # autograd and the trainer
    "autograd": 5, "train": 5,
    # what lowprec would do to anyone's tensors
    "inspect": 6, "torch": 6, "_torch_sites": 6, "_torch_emulate": 6,
    # applications: plots, figures, command line, teaching
    "plot": 7, "figures": 7, "demo": 7, "exercises": 7, "tutorials": 7, "grading": 7,
    "explore": 7, "explorer": 7, "commands": 8, "cli": 8, "__main__": 8,
}


def _modules(root: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> list[str]:
    parts = list(path.relative_to(_root_of(path)).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _root_of(path: Path) -> Path:
    """The ``lowprec`` folder that holds ``path``."""
    return next(p for p in path.parents if p.name == "lowprec")


def _top(path: Path) -> str | None:
    """The first dotted part below ``lowprec`` (None for ``lowprec/__init__`` itself)."""
    parts = _dotted(path)
    return parts[0] if parts else None


def _is_module(path: Path, name: str) -> bool:
    """Whether ``name`` is a module or subpackage at the top of lowprec (not a function)."""
    root = _root_of(path)
    return (root / f"{name}.py").exists() or (root / name / "__init__.py").exists()


def _imported_tops(path: Path) -> list[tuple[int, str]]:
    """(line, first dotted part below lowprec) for every lowprec import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path)[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    found.append((node.lineno, target[0]))
                else:  # "from .. import x, y": the names that are modules of lowprec
                    found += [(node.lineno, a.name) for a in node.names if _is_module(path, a.name)]
            elif node.module and (node.module == "lowprec" or node.module.startswith("lowprec.")):
                parts = node.module.split(".")[1:]
                if parts:
                    found.append((node.lineno, parts[0]))
                else:
                    found += [(node.lineno, a.name) for a in node.names if _is_module(path, a.name)]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "lowprec" and len(parts) > 1:
                    found.append((node.lineno, parts[1]))
    return found


def _computed_imports(path: Path) -> list[int]:
    """Lines that import a lowprec module by a computed name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                text = ast.unparse(arg)
                if "lowprec" in text or (isinstance(arg, ast.Constant) and
                                         str(arg.value).startswith(".")):
                    lines.append(node.lineno)
    return lines


def upward_imports(root: Path = PACKAGE) -> list[str]:
    """Every import in lowprec/ that runs up the flow, as readable lines."""
    bad = []
    for path in _modules(root):
        src = _top(path)
        if src is None:  # the package __init__ re-exports the public API: exempt
            continue
        if src not in LAYERS:
            bad.append(f"{path.relative_to(root)}: module {src!r} has no layer in LAYERS")
            continue
        for line, dst in _imported_tops(path):
            if dst not in LAYERS:
                bad.append(f"{path.relative_to(root)}:{line}: imports unknown {dst!r}")
            elif LAYERS[dst] > LAYERS[src]:
                bad.append(f"{path.relative_to(root)}:{line}: {src} (layer {LAYERS[src]}) "
                           f"imports {dst} (layer {LAYERS[dst]})")
    return bad


def test_no_import_runs_up_the_flow():
    assert upward_imports() == []


def test_no_module_is_imported_by_a_computed_name():
    bad = [f"{p.relative_to(PACKAGE)}:{line}" for p in _modules() for line in _computed_imports(p)]
    assert bad == []


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check itself can fail: an upward import planted in a copy of formats.py."""
    import shutil

    copy = tmp_path / "lowprec"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fmt = copy / "formats.py"
    fmt.write_text(fmt.read_text(encoding="utf-8") + "\n\ndef _f():\n    from .train import train\n",
                   encoding="utf-8")
    (copy / "rounding.py").write_text(
        (copy / "rounding.py").read_text(encoding="utf-8")
        + "\n\nimport importlib\n_m = importlib.import_module('lowprec.mx')\n", encoding="utf-8")
    assert any("formats.py" in b and "imports train" in b for b in upward_imports(copy))
    assert "rounding.py" in [str(p.relative_to(copy)) for p in _modules(copy)
                             if _computed_imports(p)]


@pytest.mark.parametrize("name", ["cupy", "torch", "matplotlib"])
def test_import_lowprec_needs_no_optional_dependency(name):
    """``import lowprec`` in a fresh interpreter loads neither CuPy, torch nor matplotlib."""
    import subprocess
    import sys

    code = f"import sys, lowprec; sys.exit(1 if {name!r} in sys.modules else 0)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"import lowprec imported {name}: {result.stderr[-500:]}"
