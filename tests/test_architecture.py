"""The package's shape: every module sits on a floor of the wing order that ARCHITECTURE.md
writes down, imports only from its own floor or a lower one, and no import cycle exists.

Imports are read from the source (``ast``): module level, inside functions and under
``TYPE_CHECKING`` alike, since a lazy import is a dependency too. The checker is tested on
small made-up packages, so it is known to fail on a cycle or an upward import.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_retrieval_eval"
ORDER_START = "<!-- wing-order:start -->"
ORDER_END = "<!-- wing-order:end -->"


# --------------------------------------------------------------------------- the checker
def modules_of(package_dir: Path) -> dict[str, Path]:
    """Every module of the package below ``package_dir``, by dotted name."""
    out: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The package modules ``name`` imports (``from X import y`` counts ``X.y`` when that is a
    module, else ``X``)."""
    known = set(known)
    package = name.split(".")[0]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != package:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == package)
    found.discard(name)
    return found


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    mods = modules_of(package_dir)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def read_order(text: str) -> list[list[str]]:
    """The wing order between the markers of ARCHITECTURE.md, top floor first: one table row
    a floor, its first cell the wings (``data/`` a subpackage, ``options.py`` a module)."""
    start, end = text.index(ORDER_START), text.index(ORDER_END)
    floors: list[list[str]] = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set(cells[0]) <= set("-: ") or cells[0] == "floor":
            continue
        floors.append(re.findall(r"`([\w./]+)`", cells[1]))
    return floors


def floor_map(order: list[list[str]], package: str) -> dict[str, int]:
    """wing (dotted: ``pkg.data`` for ``data/``, ``pkg.options`` for ``options.py``) -> floor,
    0 the lowest."""
    out: dict[str, int] = {}
    for level, wings in enumerate(reversed(order)):
        for wing in wings:
            dotted = wing.removesuffix("/").removesuffix(".py").replace("/", ".")
            out[f"{package}.{dotted}" if dotted != "__init__" else package] = level
    return out


def floor_of(module: str, floors: Mapping[str, int]) -> int | None:
    """The floor of the longest wing that ``module`` is, or lies in (the root package's own
    ``__init__`` only is, never holds, a module)."""
    parts = module.split(".")
    for n in range(len(parts), 1 if len(parts) > 1 else 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in floors:
            return floors[prefix]
    return None


def unplaced(graph: Mapping[str, set[str]], floors: Mapping[str, int]) -> list[str]:
    return sorted(m for m in graph if floor_of(m, floors) is None)


def upward_imports(graph: Mapping[str, set[str]],
                   floors: Mapping[str, int]) -> list[tuple[str, str]]:
    """(importer, imported) where the imported module sits on a higher floor."""
    out = []
    for importer, targets in graph.items():
        low = floor_of(importer, floors)
        for target in targets:
            high = floor_of(target, floors)
            if low is not None and high is not None and high > low:
                out.append((importer, target))
    return sorted(out)


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


# --------------------------------------------------------------------------- the package
@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT / PACKAGE)


@pytest.fixture(scope="module")
def floors() -> dict[str, int]:
    return floor_map(read_order((ROOT / "ARCHITECTURE.md").read_text("utf-8")), PACKAGE)


def test_every_module_sits_on_a_floor_of_the_written_order(
        graph: dict[str, set[str]], floors: dict[str, int]) -> None:
    assert unplaced(graph, floors) == []
    present = {m for m in floors if any(g == m or g.startswith(m + ".") for g in graph)}
    assert present == set(floors), "ARCHITECTURE.md names a wing the package does not have"


def test_no_module_imports_from_a_higher_floor(
        graph: dict[str, set[str]], floors: dict[str, int]) -> None:
    assert upward_imports(graph, floors) == []


def test_the_package_has_no_import_cycle(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_the_pytest_face_is_on_top_and_scoring_and_vipune_near_the_bottom(
        floors: dict[str, int]) -> None:
    top = max(floors.values())
    assert floors[f"{PACKAGE}.plugin"] == top
    assert floors[f"{PACKAGE}.scoring"] <= 2 and floors[f"{PACKAGE}.vipune"] <= 3


def test_the_map_names_every_wing_and_stays_a_map() -> None:
    """ARCHITECTURE.md is a map (at most 250 lines) that names every wing; what is true of one
    module only is in that module's docstring (the next test)."""
    text = (ROOT / "ARCHITECTURE.md").read_text("utf-8")
    assert len(text.splitlines()) <= 250
    for init in sorted((ROOT / PACKAGE).glob("*/__init__.py")):
        assert f"{init.parent.name}/" in text, f"ARCHITECTURE.md does not name {init.parent.name}/"


def test_every_module_says_what_it_holds() -> None:
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8")))
        rel = path.relative_to(ROOT).as_posix()
        assert doc and len(doc.split()) >= 6, f"{rel}: no docstring saying what it holds"


def top_level_modules(package_dir: Path, entry_lines: int = 20) -> list[str]:
    """The modules directly in the package, thin entries (``entry_lines`` lines or fewer,
    such as ``__init__.py`` or a ``python -m`` shim) aside."""
    return sorted(p.name for p in package_dir.glob("*.py")
                  if len(p.read_text("utf-8").splitlines()) > entry_lines)


def test_at_most_ten_top_level_modules() -> None:
    modules = top_level_modules(ROOT / PACKAGE)
    assert len(modules) <= 10, f"{len(modules)} top-level modules: {modules}; put them in a wing"


def test_the_top_level_count_skips_thin_entries_only(tmp_path: Path) -> None:
    (tmp_path / "shim.py").write_text("x = 1\n" * 20, "utf-8")
    (tmp_path / "face.py").write_text("x = 1\n" * 21, "utf-8")
    assert top_level_modules(tmp_path) == ["face.py"]


def test_each_wing_says_what_it_holds() -> None:
    for init in sorted((ROOT / PACKAGE).glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        assert doc and len(doc.split()) >= 12, f"{init.parent.name}/__init__.py: no docstring"


# --------------------------------------------------------------------------- the checker's own
def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return tmp_path / "pkg"


ORDER = f"""
{ORDER_START}
| floor | wings |
| --- | --- |
| 2 | `face.py` |
| 1 | `high/` |
| 0 | `low/`, `errors.py` |
{ORDER_END}
"""


def test_the_checker_reads_relative_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "face.py": "from .high import a\nfrom . import errors\n",
        "high/__init__.py": "",
        "high/a.py": "def f():\n    from ..low.b import x\n",
        "low/__init__.py": "",
        "low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from pkg.errors import E\n",
    })
    assert import_graph(pkg) == {
        "pkg": set(), "pkg.errors": set(), "pkg.face": {"pkg.high.a", "pkg.errors"},
        "pkg.high": set(), "pkg.high.a": {"pkg.low.b"}, "pkg.low": set(),
        "pkg.low.b": {"pkg.errors"}}


def test_the_checker_finds_an_upward_import_even_a_lazy_one(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "__init__.py": "", "errors.py": "", "face.py": "",
        "high/__init__.py": "", "high/a.py": "",
        "low/__init__.py": "", "low/b.py": "def f():\n    from ..high import a\n",
    })
    floors = floor_map(read_order(ORDER), "pkg")
    graph = import_graph(pkg)
    assert upward_imports(graph, floors) == [("pkg.low.b", "pkg.high.a")]
    assert floors == {"pkg.face": 2, "pkg.high": 1, "pkg.low": 0, "pkg.errors": 0}


def test_the_checker_finds_a_cycle_and_an_unplaced_module(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "__init__.py": "", "errors.py": "", "face.py": "",
        "high/__init__.py": "",
        "high/a.py": "from . import b\n", "high/b.py": "from .c import x\n",
        "high/c.py": "def f():\n    from .a import y\n",
        "low/__init__.py": "", "stray.py": "",
    })
    graph = import_graph(pkg)
    assert cycles(graph) == [["pkg.high.a", "pkg.high.b", "pkg.high.c"]]
    assert unplaced(graph, floor_map(read_order(ORDER), "pkg")) == ["pkg", "pkg.stray"]
