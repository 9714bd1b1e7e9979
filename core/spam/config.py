"""A form's spam settings as the submit path reads them: a plain frozen dataclass with every
default, built from the stored `spam` object (validated by `core.spam.settings` when it was
written), so the submit path's cold start imports no pydantic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# The longest duplicate window (seconds); the retention tick forgets fingerprints older.
MAX_DUPLICATE_WINDOW = 30 * 86_400
# The longest grace period of implicit ham (hours).
MAX_IMPLICIT_HAM_HOURS = 30 * 24


@dataclass(frozen=True, slots=True)
class SpamConfig:
    """Every spam setting with its default (docs/spam.md lists them)."""

    max_links: int | None = 3
    blocked_words: tuple[str, ...] = ()
    blocked_patterns: tuple[str, ...] = ()
    blocked_email_domains: tuple[str, ...] = ()
    block_disposable_email: bool = True
    allowed_scripts: tuple[str, ...] | None = None
    min_fill_seconds: float = 2
    max_token_age_seconds: int = 86_400
    require_fill_token: bool = False
    duplicate_max: int | None = 3
    duplicate_window_seconds: int = 86_400
    learned: bool = True
    learned_threshold: float = 0.9
    implicit_ham: bool = True
    implicit_ham_hours: int = 72
    recaptcha_min_score: float = 0.5
    akismet_site: str | None = None


DEFAULTS = SpamConfig()
_NAMES = frozenset(f.name for f in fields(SpamConfig))


def spam_config(stored: Mapping[str, Any] | None) -> SpamConfig:
    """The settings a form stored (`{}` or null = every default)."""
    given: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in (stored or {}).items()
        if name in _NAMES
    }
    return SpamConfig(**given)
