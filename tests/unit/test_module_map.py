"""The module map of docs/development.md is true: every module under `core/` is named under
the heading of its own folder (`**`core/intake/`**`), and every module it names exists.

Modules are found by walking `core/`, so a new room or module fails here until the map
says what it holds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "development.md"
HEADING = re.compile(r"^\*\*`(core/[\w/]+?)/?`\*\*", re.MULTILINE)
MODULE = re.compile(r"`([\w/]+\.py)`")


def _map_text() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## Module map\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def mapped_modules(text: str) -> set[str]:
    """The modules the map names, as paths from the repository's root: a bare `name.py` is
    in the folder of the heading above it; `core/…/name.py` is taken as written."""
    headings = list(HEADING.finditer(text))
    named: set[str] = set()
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        folder = heading.group(1)
        section = text[heading.end() : following.start() if following else None]
        for name in MODULE.findall(section):
            named.add(name if name.startswith("core/") else f"{folder}/{name}")
    return named


def core_modules() -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for path in (ROOT / "core").rglob("*.py")
        if path.name != "__init__.py"
    }


def test_mapped_modules__a_bare_name_belongs_to_its_heading() -> None:
    text = (
        "**`core/intake/`** — the submit path.\n\n| `submit.py`, `form.py` | … |\n\n"
        "**`core/http/v1/`** — routers: `forms.py`, `core/platform/db.py` (the pool).\n"
    )
    assert mapped_modules(text) == {
        "core/intake/submit.py",
        "core/intake/form.py",
        "core/http/v1/forms.py",
        "core/platform/db.py",
    }


def test_module_map__names_every_module_under_core() -> None:
    missing = sorted(core_modules() - mapped_modules(_map_text()))
    assert missing == [], f"add these to the module map of {DOC.relative_to(ROOT)}"


def test_module_map__names_no_module_that_does_not_exist() -> None:
    stale = sorted(mapped_modules(_map_text()) - core_modules())
    assert stale == [], f"the module map of {DOC.relative_to(ROOT)} names these; they are gone"
