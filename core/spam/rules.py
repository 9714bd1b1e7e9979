"""The content rules of a form's spam settings (docs/spam.md#content-rules): links, blocked
words, blocked patterns, blocked and disposable email domains, unexpected scripts.

Pure and bounded: the values are read up to `core.spam.text.MAX_TEXT` characters, every
algorithm is linear in them, and the rules stop at a time budget (a rule not reached in
time matches nothing), so no submission is refused or delayed by its rules.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from core.platform.logs import log
from core.spam.config import SpamConfig
from core.spam.patterns import found
from core.spam.text import texts, words

RULES_BUDGET = 0.05  # seconds for all of a submission's rules
# The script rule reads at most this many letters, and needs at least this many to judge.
SCRIPT_LETTERS = 4096
SCRIPT_MIN_LETTERS = 10
_LINK = re.compile(r"(?i)(?:https?://|\bwww\.)")
_EMAIL = re.compile(r"^[^@\s]{1,64}@([A-Za-z0-9.-]{1,253})$")

Texts = list[tuple[str, str]]


def _links(settings: SpamConfig, found_texts: Texts) -> bool:
    if settings.max_links is None:
        return False
    count = 0
    for _, text in found_texts:
        count += len(_LINK.findall(text))
        if count > settings.max_links:
            return True
    return False


def _domains(found_texts: Texts) -> list[list[str]]:
    """For each email address among the values, its domain and the domains above it."""
    found_domains = []
    for _, text in found_texts:
        match = _EMAIL.match(text.strip())
        if match:
            labels = match.group(1).lower().strip(".").split(".")
            found_domains.append([".".join(labels[i:]) for i in range(len(labels))])
    return found_domains


def _email_domain(settings: SpamConfig, found_texts: Texts) -> bool:
    blocked = set(settings.blocked_email_domains)
    return bool(blocked) and any(blocked.intersection(d) for d in _domains(found_texts))


def _disposable_email(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.block_disposable_email:
        return False
    found_domains = _domains(found_texts)
    if not found_domains:
        return False
    # Imported here, once: about 10 000 domains that a post without an address never needs.
    from disposable_email_domains import blocklist

    return any(blocklist.intersection(d[:-1] or d) for d in found_domains)


def _phrase(text: str) -> str:
    return " " + " ".join(words(text)) + " "


def _words(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.blocked_words:
        return False
    phrases = [p for p in (_phrase(w) for w in settings.blocked_words) if p.strip()]
    return any(p in _phrase(text) for _, text in found_texts for p in phrases)


def _patterns(settings: SpamConfig, found_texts: Texts, deadline: float) -> bool:
    for pattern in settings.blocked_patterns:
        for _, text in found_texts:
            if found(pattern, text):
                return True
        if time.monotonic() > deadline:
            raise TimeoutError
    return False


def _script_of(char: str) -> str:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0].lower()


def _script(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.allowed_scripts:
        return False
    allowed = set(settings.allowed_scripts)
    inside = outside = 0
    for _, text in found_texts:
        for char in text:
            if not char.isalpha():
                continue
            if _script_of(char) in allowed:
                inside += 1
            else:
                outside += 1
            if inside + outside >= SCRIPT_LETTERS:
                break
    return inside + outside >= SCRIPT_MIN_LETTERS and outside > inside


_RULES: tuple[tuple[str, Callable[[SpamConfig, Texts], bool]], ...] = (
    ("links", _links),
    ("email_domain", _email_domain),
    ("disposable_email", _disposable_email),
    ("words", _words),
    ("script", _script),
)


def rule_hit(settings: SpamConfig, values: Mapping[str, Any]) -> str | None:
    """The reason of the first rule the values match (`spam_rule:<rule>`), or None. Rules
    not reached within RULES_BUDGET match nothing."""
    deadline = time.monotonic() + RULES_BUDGET
    found_texts = texts(values)
    try:
        for name, rule in _RULES:
            if rule(settings, found_texts):
                return f"spam_rule:{name}"
            if time.monotonic() > deadline:
                raise TimeoutError
        if _patterns(settings, found_texts, deadline):
            return "spam_rule:patterns"
    except TimeoutError:
        log.warning("spam rules stopped at their time budget")
    return None
