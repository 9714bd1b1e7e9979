"""A search text (`q`) read as terms: what people type, found anywhere in the values.

Each term is a word or a "quoted phrase"; a submission is found when its values hold every
term and none of the `-excluded` ones, in any case, as a whole value or any part of one
(`ada` finds ada@example.com, `example.net` and `sofa` find the values that hold them). The
values are matched as the database stores them (their JSON text), so a term is escaped the
same way before it becomes an ILIKE pattern.

The search is bounded before the database sees it: at most SEARCH_CHARS characters and
MAX_TERMS terms, and one term to find must hold ANCHOR_RUN letters or digits in a row (the
trigram index can narrow nothing shorter), the anchor; the others are checked on the rows
the anchor found. The statement itself has SEARCH_TIMEOUT.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from core.platform.errors import InvalidSearch

# The longest search text (`q`) accepted.
SEARCH_CHARS = 200
# The most terms (found and excluded) in one search.
MAX_TERMS = 8
# The letters or digits in a row that one term to find must hold.
ANCHOR_RUN = 3
# How long one search may take before it is refused as too broad.
SEARCH_TIMEOUT = "5s"

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')
_ALNUM_RUN = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Search:
    """A search as ILIKE patterns: the anchor the index answers, the other terms to find,
    the terms to exclude."""

    anchor: str
    others: tuple[str, ...]
    excluded: tuple[str, ...]


def refused(why: str) -> InvalidSearch:
    """The refusal of a search text, naming `q`."""
    return InvalidSearch(f"invalid search text: {why}", [{"field": "q", "message": why}])


def read_search(q: str) -> Search:
    """`q` as terms, or InvalidSearch saying which bound it passed."""
    if len(q) > SEARCH_CHARS:
        raise refused(f"at most {SEARCH_CHARS} characters")
    if "\x00" in q:
        raise refused("it holds a NUL character")
    found: list[str] = []
    excluded: list[str] = []
    for match in _TOKEN.finditer(q):
        quoted_minus, phrase, minus, word = match.groups()
        term, excluding = (phrase, quoted_minus) if word is None else (word, minus)
        if term:
            (excluded if excluding else found).append(term)
    if len(found) + len(excluded) > MAX_TERMS:
        raise refused(f"at most {MAX_TERMS} words or phrases")
    anchor = max(found, key=_longest_run, default=None)
    if anchor is None or _longest_run(anchor) < ANCHOR_RUN:
        raise refused(f"name a word to find with at least {ANCHOR_RUN} letters or digits")
    others = list(found)
    others.remove(anchor)
    return Search(
        anchor=_pattern(anchor),
        others=tuple(_pattern(term) for term in others),
        excluded=tuple(_pattern(term) for term in excluded),
    )


def _longest_run(term: str) -> int:
    return max((len(run) for run in _ALNUM_RUN.findall(term)), default=0)


def _pattern(term: str) -> str:
    """An ILIKE pattern finding `term` inside the values' JSON text."""
    stored = json.dumps(term, ensure_ascii=False)[1:-1]
    escaped = stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
