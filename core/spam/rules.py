"""The content rules of a form's spam settings (docs/spam.md#content-rules): links, blocked
words, blocked and disposable email domains, unexpected scripts, run on the event loop;
blocked patterns run in the checker's child processes (`core.spam.patterns`).

Bounded by construction: the values are read up to `core.spam.text.MAX_TEXT` characters,
and every rule here is one linear pass over them in C code (regular expressions without
backtracking, one Aho-Corasick automaton for all blocked words, set lookups), whatever the
owner's lists hold: measured under 10 ms on the largest body (tests/spam/test_rules.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import ahocorasick

from core.spam.config import SpamConfig
from core.spam.text import Piece, phrase_of

# The script rule reads at most this many letters, and needs at least this many to judge.
SCRIPT_LETTERS = 4096
SCRIPT_MIN_LETTERS = 10
_SCRIPT_SLICE = 2 * SCRIPT_LETTERS
_WWW = re.compile(r"\bwww\.")
_EMAIL = re.compile(r"^[^@\s]{1,64}@([A-Za-z0-9.-]{1,253})$")
_NOT_LETTER = re.compile(r"[\W\d_]+")
_LONGEST_ADDRESS = 320

Texts = list[Piece]


def count_links(found_texts: Texts) -> int:
    """The links in the texts, as the links rule counts them (`http://`, `https://`, and
    `www.` at a word's start); one linear pass per text."""
    count = 0
    for piece in found_texts:
        folded = piece.folded
        count += folded.count("http://") + folded.count("https://")
        if "www." in folded:
            count += len(_WWW.findall(folded))
    return count


def _links(settings: SpamConfig, found_texts: Texts) -> bool:
    return settings.max_links is not None and count_links(found_texts) > settings.max_links


def _addresses(found_texts: Texts) -> list[list[str]]:
    """For each email address among the values, the labels of its domain."""
    found = []
    for piece in found_texts:
        if len(piece.text) > _LONGEST_ADDRESS:
            continue
        match = _EMAIL.match(piece.text.strip())
        if match:
            found.append(match.group(1).lower().strip(".").split("."))
    return found


def _under(blocked: frozenset[str], depth: int, labels: list[str], *, top: bool) -> bool:
    """Whether the domain of `labels`, or one above it (at most `depth` labels long; the
    top-level domain alone only when `top`), is in `blocked`."""
    shortest = 1 if top or len(labels) == 1 else 2
    return any(
        ".".join(labels[-n:]) in blocked for n in range(shortest, min(depth, len(labels)) + 1)
    )


@lru_cache(maxsize=256)
def _blocked(domains: tuple[str, ...]) -> tuple[frozenset[str], int]:
    return frozenset(domains), max((d.count(".") + 1 for d in domains), default=0)


def _email_domain(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.blocked_email_domains:
        return False
    blocked, depth = _blocked(settings.blocked_email_domains)
    return any(_under(blocked, depth, labels, top=True) for labels in _addresses(found_texts))


@lru_cache(maxsize=1)
def _disposable() -> tuple[frozenset[str], int]:
    # Imported here, once: about 10 000 domains that a post without an address never needs.
    from disposable_email_domains import blocklist

    return _blocked(tuple(sorted(blocklist)))


def _disposable_email(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.block_disposable_email:
        return False
    found = _addresses(found_texts)
    if not found:
        return False
    blocked, depth = _disposable()
    return any(_under(blocked, depth, labels, top=False) for labels in found)


@lru_cache(maxsize=256)
def _automaton(blocked: tuple[str, ...]) -> Any | None:
    """One Aho-Corasick automaton of a form's blocked words as phrases (` seo services `),
    built once per list; None when none holds a word."""
    automaton = ahocorasick.Automaton()
    for phrase in {phrase_of(word) for word in blocked}:
        if phrase.strip():
            automaton.add_word(phrase, True)
    if not len(automaton):
        return None
    automaton.make_automaton()
    return automaton


def _words(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.blocked_words:
        return False
    automaton = _automaton(settings.blocked_words)
    if automaton is None:
        return False
    # One pass over each text's phrase form, whatever the number of words: the first
    # match ends it.
    return any(next(automaton.iter(piece.phrase), None) for piece in found_texts)


@lru_cache(maxsize=4096)
def _script_of(char: str) -> str:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0].lower()


def _script(settings: SpamConfig, found_texts: Texts) -> bool:
    if not settings.allowed_scripts:
        return False
    allowed = set(settings.allowed_scripts)
    letters = ""
    for piece in found_texts:
        # A slice at a time: the letters needed are usually in the text's first slice.
        for start in range(0, len(piece.text), _SCRIPT_SLICE):
            chunk = _NOT_LETTER.sub("", piece.text[start : start + _SCRIPT_SLICE])
            letters += chunk[: SCRIPT_LETTERS - len(letters)]
            if len(letters) >= SCRIPT_LETTERS:
                break
        if len(letters) >= SCRIPT_LETTERS:
            break
    # Each distinct letter named once, however often it comes.
    inside = sum(n for char, n in Counter(letters).items() if _script_of(char) in allowed)
    return len(letters) >= SCRIPT_MIN_LETTERS and len(letters) - inside > inside


_RULES: tuple[tuple[str, Callable[[SpamConfig, Texts], bool]], ...] = (
    ("links", _links),
    ("email_domain", _email_domain),
    ("disposable_email", _disposable_email),
    ("words", _words),
    ("script", _script),
)


def rule_hit(settings: SpamConfig, found_texts: list[Piece]) -> str | None:
    """The reason of the first rule here the values' pieces match (`spam_rule:<rule>`), or
    None."""
    for name, rule in _RULES:
        if rule(settings, found_texts):
            return f"spam_rule:{name}"
    return None
