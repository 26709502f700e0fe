"""The tutorials: where they are, student versions without solutions, figures.

The tutorials in ``tutorials/`` are jupytext "percent" scripts: plain Python
files that run with ``python tutorials/01_anatomy.py`` and open as notebooks in
Jupyter when jupytext is installed. A cell starts at a line ``# %%`` (code) or
``# %% [markdown]`` (text, every line a comment), optionally followed by cell
metadata such as ``tags=["solution"]``.

The committed files are the *teacher's* version: every exercise is solved in a
cell tagged ``solution``. :func:`student_version` turns one into the
*student's* version: in each solution cell the code between the lines
``# BEGIN SOLUTION`` and ``# END SOLUTION`` (or, without those markers, all code
after the cell's leading comment block) becomes::

    raise NotImplementedError("Exercise 3: <the exercise's title>")

and the tag becomes ``exercise``. A markdown cell tagged ``solution`` (a
written answer) becomes an empty answer box. Everything else is kept, so the
student still has the instructions and the checking call that follows.

``lowprec tutorials student DIR`` writes the student versions of all
tutorials into DIR (never overwriting a file unless ``--force``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = [
    "EXERCISE_TAG",
    "SOLUTION_TAG",
    "Cell",
    "hardware_reports",
    "join_cells",
    "list_tutorials",
    "output_dir",
    "parse_cells",
    "render_notebooks",
    "show",
    "student_version",
    "tutorials_dir",
    "write_student_versions",
]

SOLUTION_TAG = "solution"
EXERCISE_TAG = "exercise"

# "# %%", "# %% [markdown]", "# %% Title [markdown] tags=["x"]"
_MARKER = re.compile(r"^# %%(?P<rest>.*)$")
_KIND = re.compile(r"\[(?P<kind>markdown|md|raw)\]")
_TAGS = re.compile(r"tags\s*=\s*(?P<json>\[[^\]]*\])")
_BEGIN = re.compile(r"^(?P<indent>\s*)#+\s*BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*#+\s*END SOLUTION\s*$")
_EXERCISE = re.compile(r"Exercise\s+(?P<num>\d+[a-z]?)\s*[:.]?\s*(?P<title>[^\n]*)")


@dataclass
class Cell:
    """One cell of a percent script.

    ``marker`` is the cell's ``# %% ...`` line (``None`` for the jupytext
    header block at the top of the file); ``lines`` are the lines after it.
    """

    kind: str  # "code", "markdown", "raw" or "header"
    marker: str | None
    lines: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return "\n".join(self.lines)

    def text(self) -> str:
        """The cell as it appears in the file (marker line included)."""
        head = [self.marker] if self.marker is not None else []
        return "\n".join(head + self.lines)


def _parse_marker(line: str) -> tuple[str, list[str]]:
    rest = _MARKER.match(line)
    assert rest is not None
    body = rest.group("rest")
    kind_match = _KIND.search(body)
    kind = "code"
    if kind_match:
        kind = "markdown" if kind_match.group("kind") in ("markdown", "md") else "raw"
    tags: list[str] = []
    tag_match = _TAGS.search(body)
    if tag_match:
        try:
            tags = [str(t) for t in json.loads(tag_match.group("json"))]
        except json.JSONDecodeError as exc:
            raise ValueError(f"cell marker {line!r}: tags must be a JSON list ({exc})") from None
    return kind, tags


def parse_cells(text: str) -> list[Cell]:
    """Split a percent script into cells (a leading ``# ---`` header is a cell of its own)."""
    lines = text.split("\n")
    cells: list[Cell] = []
    i = 0
    if lines and lines[0].strip() == "# ---":
        end = next((k for k in range(1, len(lines)) if lines[k].strip() == "# ---"), None)
        if end is None:
            raise ValueError("the jupytext header opened by '# ---' on line 1 is never closed")
        cells.append(Cell("header", None, lines[: end + 1]))
        i = end + 1
    current: Cell | None = None
    preamble: list[str] = []
    for line in lines[i:]:
        if _MARKER.match(line):
            kind, tags = _parse_marker(line)
            current = Cell(kind, line, [], tags)
            cells.append(current)
        elif current is None:
            preamble.append(line)
        else:
            current.lines.append(line)
    if any(s.strip() for s in preamble):
        raise ValueError(
            "code before the first '# %%' cell marker; every cell must start with '# %%'"
        )
    if cells and cells[0].kind == "header" and preamble:
        cells[0].lines.extend(preamble)
    return cells


def join_cells(cells: list[Cell]) -> str:
    """Inverse of :func:`parse_cells`."""
    return "\n".join(c.text() for c in cells)


def _exercise_label(cell: Cell, last_markdown: str) -> str:
    """'Exercise 3: title' from the cell's comments, else from the markdown before it."""
    comments = "\n".join(ln.lstrip("# ").rstrip() for ln in cell.lines if ln.lstrip().startswith("#"))
    for text in (comments, last_markdown):
        m = _EXERCISE.search(text)
        if m:
            title = m.group("title").strip().rstrip(".")
            return f"Exercise {m.group('num')}" + (f": {title}" if title else "")
    return "Exercise"


def _stub(indent: str, label: str, names: list[str]) -> list[str]:
    out = []
    if names:
        out.append(f"{indent}# Your code here. Later cells use: {', '.join(names)}")
    out.append(f"{indent}raise NotImplementedError({label + ' (write your code here)'!r})")
    return out


def _assigned_names(code: str) -> list[str]:
    """Names that ``code`` binds (assignments at any depth, loop targets, defs), in order."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return []
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.col_offset, node.id))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.append((node.lineno, node.col_offset, node.name))
    return list(dict.fromkeys(name for _, _, name in sorted(found)))


def _solution_regions(lines: list[str]) -> list[tuple[int, int]]:
    """(begin, end) line indices of the BEGIN/END SOLUTION markers of one cell."""
    regions, begin = [], None
    for n, ln in enumerate(lines):
        if _BEGIN.match(ln):
            if begin is not None:
                raise ValueError(f"nested '# BEGIN SOLUTION' (cell line {n + 1})")
            begin = n
        elif _END.match(ln):
            if begin is None:
                raise ValueError(f"'# END SOLUTION' without BEGIN (cell line {n + 1})")
            regions.append((begin, n))
            begin = None
    if begin is not None:
        raise ValueError("'# BEGIN SOLUTION' is never closed by '# END SOLUTION'")
    return regions


def _student_code(cell: Cell, label: str, later_code: str) -> list[str]:
    """The cell with its solution replaced by a stub naming what later cells need."""
    lines = cell.lines

    def needed(code_lines: list[str]) -> list[str]:
        return [n for n in _assigned_names("\n".join(code_lines))
                if re.search(rf"\b{re.escape(n)}\b", later_code)]

    try:
        regions = _solution_regions(lines)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None
    if regions:
        out: list[str] = []
        pos = 0
        for begin, end in regions:
            out.extend(lines[pos:begin])
            indent = _BEGIN.match(lines[begin]).group("indent")  # type: ignore[union-attr]
            out.extend(_stub(indent, label, needed(lines[begin + 1:end])))
            pos = end + 1
        out.extend(lines[pos:])
        return out
    # No markers: keep the leading comment block (the instructions), replace the rest.
    k = 0
    while k < len(lines) and (lines[k].lstrip().startswith("#") or not lines[k].strip()):
        k += 1
    head = lines[:k]
    while head and not head[-1].strip():
        head.pop()
    tail = [""] if lines and not lines[-1].strip() else []
    return head + _stub("", label, needed(lines[k:])) + tail


def student_version(text: str) -> str:
    """The student's version of a teacher's percent script (see the module docstring)."""
    cells = parse_cells(text)
    out: list[Cell] = []
    last_markdown = ""
    for index, cell in enumerate(cells):
        if SOLUTION_TAG not in cell.tags:
            if cell.kind == "markdown":
                last_markdown = "\n".join(ln.lstrip("# ").rstrip() for ln in cell.lines)
            out.append(cell)
            continue
        # A written answer (markdown) is labelled by the question before it, never by itself.
        label = _exercise_label(cell if cell.kind != "markdown" else Cell("code", None),
                                last_markdown)
        tags = [EXERCISE_TAG if t == SOLUTION_TAG else t for t in cell.tags]
        marker = _TAGS.sub("tags=" + json.dumps(tags), cell.marker or "# %%")
        if cell.kind == "markdown":
            lines = [f"# *{label}: write your answer here.*", ""]
        else:
            later = "\n".join(c.source for c in cells[index + 1:]
                              if c.kind == "code" and SOLUTION_TAG not in c.tags)
            lines = _student_code(cell, label, later)
        out.append(replace(cell, marker=marker, lines=lines, tags=tags))
    return join_cells(out)


# --------------------------------------------------------------- the files
def tutorials_dir() -> Path:
    """Where the tutorials are.

    From a checkout (``pip install -e .``, or ``PYTHONPATH``): its ``tutorials/`` folder, so
    that edits to the tutorials are seen at once. From an installed wheel (``pip install
    .``): the copy that ships inside the package, ``lowprec/tutorials_data/`` (pyproject.toml's
    ``force-include``).
    """
    package = Path(__file__).resolve().parent
    checkout = package.parent / "tutorials"
    if (package.parent / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    shipped = package / "tutorials_data"
    if shipped.is_dir() and any(shipped.glob("[0-9][0-9]_*.py")):
        return shipped
    raise FileNotFoundError(
        f"no tutorials found: neither a checkout's {checkout} nor the packaged {shipped}; "
        "reinstall lowprec (pip install .) or pass --source DIR"
    )


def list_tutorials(source: str | os.PathLike[str] | None = None) -> list[Path]:
    """The tutorial scripts ``NN_name.py`` in ``source`` (default :func:`tutorials_dir`), sorted."""
    folder = Path(source) if source is not None else tutorials_dir()
    if not folder.is_dir():
        raise FileNotFoundError(f"tutorials folder {folder} does not exist")
    found = sorted(p for p in folder.glob("[0-9][0-9]_*.py") if p.is_file())
    if not found:
        raise FileNotFoundError(f"no tutorials (files named NN_name.py) in {folder}")
    return found


def select_tutorials(paths: list[Path], only: list[str] | None) -> list[Path]:
    """The tutorials of ``paths`` that ``only`` names (a number, ``1`` or ``01``, or a name
    prefix); ``ValueError`` naming any entry that matches none.

    >>> [p.name[:2] for p in select_tutorials(list_tutorials(), ["1", "05"])]
    ['01', '05']
    """
    if not only:
        return paths
    chosen: list[Path] = []
    for o in only:
        key = o.zfill(2) if o.isdigit() else o
        found = [p for p in paths if p.name.startswith(key)]
        if not found:
            numbers = " ".join(p.name[:2] for p in paths)
            raise ValueError(f"--only {o}: no such tutorial (there are: {numbers})")
        chosen += [p for p in found if p not in chosen]
    return [p for p in paths if p in chosen]


def write_student_versions(
    dest: str | os.PathLike[str],
    source: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    only: list[str] | None = None,
) -> list[Path]:
    """Write the student version of every tutorial (or those ``only`` names, see
    :func:`select_tutorials`) into ``dest``; returns the paths.

    Refuses (``FileExistsError``, nothing written) if any target file exists,
    unless ``force`` -- a student's work is never overwritten by accident.
    """
    dest = Path(dest)
    sources = select_tutorials(list_tutorials(source), only)
    targets = [dest / p.name for p in sources]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        raise FileExistsError(
            f"{len(existing)} student file(s) already exist, e.g. {existing[0]}; "
            "nothing was written (use --force to overwrite them)"
        )
    texts = [student_version(p.read_text(encoding="utf-8")) for p in sources]
    dest.mkdir(parents=True, exist_ok=True)
    for target, text in zip(targets, texts):
        target.write_text(text, encoding="utf-8")
    return targets


def render_notebooks(
    dest: str | os.PathLike[str],
    source: str | os.PathLike[str] | None = None,
    *,
    student: bool = False,
    execute: bool = True,
    only: list[str] | None = None,
    timeout: int = 600,
) -> list[Path]:
    """Convert the tutorials to ``.ipynb`` in ``dest`` (executed unless ``execute=False``).

    Needs the ``tutorials`` extra (jupytext; nbclient and ipykernel to execute).
    Student versions are never executed (they stop at the first exercise).
    ``only`` selects tutorials by number or name prefix (``["01", "05"]``).
    The kernel imports the same lowprec as this process and
    saves its figures under ``dest/figures``.
    """
    try:
        import jupytext
    except ImportError:
        raise ImportError(
            "rendering notebooks needs jupytext: pip install 'lowprec[tutorials]'"
        ) from None
    paths = select_tutorials(list_tutorials(source), only)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if student:
            text = student_version(text)
        nb = jupytext.reads(text, fmt="py:percent")
        target = dest / (path.stem + ".ipynb")
        if execute and not student:
            _execute(nb, path, dest, timeout)
        jupytext.write(nb, target)
        written.append(target)
    return written


def _kernel_config(sockets: str) -> Any:
    """nbclient's configuration for the notebooks' python3 kernels. Where the
    system has Unix sockets, a kernel talks through them, in the folder
    ``sockets``: over TCP, ipykernel warns on every notebook that its traffic
    is unencrypted."""
    from traitlets.config import Config

    if os.name != "posix":
        return Config()
    return Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}})


def _execute(nb: Any, path: Path, dest: Path, timeout: int) -> None:
    """Run a notebook in a fresh python3 kernel that sees this checkout's lowprec."""
    try:
        from nbclient import NotebookClient
    except ImportError:
        raise ImportError(
            "executing notebooks needs nbclient and ipykernel: pip install 'lowprec[tutorials]'"
            " (or pass --no-execute)"
        ) from None
    # The kernel imports the lowprec this process runs (a checkout's or the installed one).
    root = str(Path(__file__).resolve().parent.parent)
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "LOWPREC_TUTORIAL_OUT", "MPLBACKEND")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved["PYTHONPATH"]) if p)
    os.environ["LOWPREC_TUTORIAL_OUT"] = str((dest / "figures").resolve())
    os.environ.pop("MPLBACKEND", None)  # let the kernel use its inline backend
    try:
        with tempfile.TemporaryDirectory() as sockets:
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           config=_kernel_config(sockets),
                           resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ------------------------------------------------------------- figures
def output_dir() -> Path:
    """Where tutorials save figures: ``$LOWPREC_TUTORIAL_OUT``, else ``./tutorial_figures``."""
    return Path(os.environ.get("LOWPREC_TUTORIAL_OUT", "tutorial_figures"))


def show(fig: Any, name: str) -> None:
    """Save ``fig`` as ``<output_dir>/<name>.png``, and show it where that makes sense.

    In Jupyter (an inline or widget backend) the notebook displays the figure
    under the cell; in a script it is saved, the path is printed, and the
    figure is closed (no window blocks the run).
    """
    import matplotlib
    import matplotlib.pyplot as plt

    folder = output_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    backend = matplotlib.get_backend().lower()
    if "inline" in backend or "ipympl" in backend or "widget" in backend:
        plt.show()
    else:
        print(f"[figure saved to {path}]")
        plt.close(fig)


# ------------------------------------------------------- stored reports
def hardware_reports() -> list[Path]:
    """The GPU validation reports stored in the checkout (``docs/hardware/*.json``), sorted.

    ``lowprec validate --gpu`` writes such a report (JSON next to Markdown); a copy from
    real hardware is kept in the repository so that machines without a GPU can read it.
    An empty list means none is stored in this checkout. Other JSON files there (the
    hardware script's records, e.g. ``h200-2026-12-04.json``) are left out.
    """
    import json

    folder = Path(__file__).resolve().parent.parent / "docs" / "hardware"
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [p for p in found if "tables" in json.loads(p.read_text())]
