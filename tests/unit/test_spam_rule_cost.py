"""The spam checks that run on the event loop (docs/spam.md#content-rules): the rules, the
duplicate fingerprints and the learned filter's tokens together stay linear and cheap on
the worst bodies the submit path takes (256 KB, of which 64 KiB of text is read), whatever
the owner's lists hold. Measured alone they cost 2.3-5.8 ms of CPU each (the 10 ms goal);
the bound here is a guard with room for a busy machine's test run: a rule that turned
super-linear (the 1.19 s word list this replaced) is far beyond it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from core.spam.config import SpamConfig
from core.spam.duplicates import fingerprints
from core.spam.learned import hashed, tokens
from core.spam.rules import rule_hit
from core.spam.text import texts
from tests.support.spam import LETTERS, MANY_WORDS

LOOP_BUDGET = 0.025
KEY = b"k" * 32
# Every rule on, none matching early: the lists at their limits.
WORST = SpamConfig(
    max_links=1000,
    blocked_words=tuple(f"{word} {'x ' * 40}".strip()[:100] for word in MANY_WORDS),
    blocked_email_domains=tuple(f"blocked{n}.example" for n in range(1000)),
    block_disposable_email=True,
    allowed_scripts=("latin",),
)
BODIES: dict[str, dict[str, Any]] = {
    "short words": {"message": ("ab cd ef " * 30_000)[:65_536]},
    "distinct words": {"message": " ".join(f"w{n}" for n in range(20_000))[:65_536]},
    "65,000 CJK letters": {"message": LETTERS},
    "200 long addresses": {f"f{n}": f"{'a' * 60}@{'sub.' * 60}example.com" for n in range(200)},
    "links": {"message": ("www. http:// " * 6_000)[:65_536]},
    "200 fields": {f"f{n}": "word " * 60 for n in range(200)},
}


def _checks(values: dict[str, Any]) -> None:
    pieces = texts(values)
    rule_hit(WORST, pieces)
    fingerprints(values, pieces, KEY)
    hashed(tokens(pieces), KEY)


@pytest.mark.parametrize("values", BODIES.values(), ids=BODIES.keys())
def test_spam_checks__the_worst_body_costs_milliseconds_of_loop_time(
    values: dict[str, Any],
) -> None:
    _checks(values)  # caches (the automaton, the domain sets) are built once per list
    spent = []
    for _ in range(10):
        started = time.process_time()
        _checks(values)
        spent.append(time.process_time() - started)
    assert min(spent) < LOOP_BUDGET, spent
