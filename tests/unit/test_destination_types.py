"""A destination type is named only by its own module: the registry imports the modules,
and no other Python or template file spells a type (or, for `email`, which is also a
common field name and a JSON Schema format, compares or looks up by it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.destinations.registry import ADAPTERS

ROOT = Path(__file__).resolve().parents[2]
# Words that are also field names and formats: only branching on them is refused.
COMMON_WORDS = {"email"}


def _sources() -> list[Path]:
    return [
        path
        for folder in ("core", "handlers", "local")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in (".py", ".html")
    ]


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_destination_type__named_only_in_its_own_module(name: str) -> None:
    quoted = rf"[\"']{re.escape(name)}[\"']"
    pattern = re.compile(
        rf"(==|!=)\s*{quoted}|{quoted}\s*(==|!=)|(?<=[\w\])])\[\s*{quoted}\s*\]"
        if name in COMMON_WORDS
        else quoted
    )
    own = ROOT / "core" / "destinations" / f"{name}.py"
    naming = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if path != own and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert naming == [], f"{name!r} is named outside its module"
