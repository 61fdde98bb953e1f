"""Imports run downhill, in the data flow's order (docs/architecture.md#packages): a
package imports only packages of a lower stage. Read from the source, every import
statement (inside functions and ``TYPE_CHECKING`` blocks too), so a new one against the
flow fails here rather than in a review."""

from __future__ import annotations

import ast
from pathlib import Path

import embrasure

PACKAGE = Path(embrasure.__file__).parent

# Each top-level module or package of embrasure/ and its stage: a module may import one
# of a lower stage only. Peers (the same stage) do not import each other.
STAGES: dict[str, int] = {
    # plain data, errors and settings: used by every stage
    "__init__": 0,
    "model": 0,
    "errors": 0,
    "logs": 0,
    "settings": 0,
    "store": 1,
    "access": 2,  # identity and grants: plain rules over model
    "receiver": 3,
    "lifecycle": 3,
    "projector": 4,
    "query": 5,
    "notify": 6,
    "processes": 7,  # serve's processes and their status board
    "web": 8,
    "ui": 9,
    "marquez": 9,
    "app": 10,
    "cli": 11,
    "__main__": 12,
}


def _unit(path: Path) -> str:
    """The top-level module or package a file belongs to."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level unit) of every import of embrasure's own modules."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "embrasure":
                continue
            if len(parts) > 1:
                found.append((node.lineno, parts[1]))
            else:  # from embrasure import x
                found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "embrasure" and len(parts) > 1:
                    found.append((node.lineno, parts[1]))
    return found


def test_every_unit_has_a_stage() -> None:
    units = {_unit(p) for p in PACKAGE.rglob("*.py")}
    assert units - set(STAGES) == set(), "give each new module or package a stage"


def test_imports_run_downhill() -> None:
    against: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = _unit(path)
        for line, target in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            if target == "__version__":  # embrasure/__init__.py's attribute
                target = "__init__"
            if target != unit and STAGES[target] >= STAGES[unit]:
                where = path.relative_to(PACKAGE.parent)
                against.append(f"{where}:{line} imports {target} ({unit} is not above it)")
    assert against == []
