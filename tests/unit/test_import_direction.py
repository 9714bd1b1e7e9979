"""The imports that reach "the other way" in docs/development.md are the only ones: the
destinations never import the outbox (the outbox imports them to send)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_import_direction__destinations_never_import_the_outbox() -> None:
    reaching = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "core" / "destinations").glob("*.py"))
        for name in _imported(path)
        if name == "core.outbox" or name.startswith("core.outbox.")
    }
    assert reaching == set()
