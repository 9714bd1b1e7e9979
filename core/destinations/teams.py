"""The Microsoft Teams type: a channel's incoming webhook through Power Automate Workflows.

The Workflows trigger "Post to a channel when a webhook request is received" takes a JSON
`message` with one Adaptive Card attachment (version 1.4): a bold title, a `FactSet` with
one `label: value` fact per field in the form's order, and a subtle footer naming the
receipt; the route's own text or a digest is one wrapped `TextBlock` instead of the facts.
TextBlocks and facts render a subset of Markdown, so every text is escaped and a value can
neither format nor link nor mention. Teams refuses a request over 28 KB: long texts are cut
with a marker until the body fits, and when even short ones do not, the trailing fields are
left out and counted.

Answers: 202 (or any 2xx) sent; 429 waits its `Retry-After`; 408 and 5xx retried; any other
status dead at once, shown as its status (`http_404`); the JSON body's `error.code`
stays in the attempt's excerpt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

from core.destinations.chat import ChatAdapter
from core.destinations.text import ChatMessage, cut

# Teams' limit is 28 KB per message; this leaves room for the request's headers.
MAX_BODY_BYTES = 27_000
CUT_MARKER = "…"
# Texts are never cut shorter than this to fit; fields are left out instead.
SHORTEST_CUT = 100

_MARKDOWN = re.compile(r"([\\*_\[\]()#\->`<])")


def escape(text: str) -> str:
    """`text` shown as typed in an Adaptive Card TextBlock or fact: Markdown escaped, and each
    line its own paragraph (Teams joins lines that one newline separates)."""
    return "\n\n".join(_MARKDOWN.sub(r"\\\1", line) for line in text.splitlines())


def _text_block(text: str, **style: str | bool) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def card(message: ChatMessage, *, longest: int, fields: int) -> dict[str, Any]:
    """The Adaptive Card of `message`: every text cut to `longest` characters, and only the
    first `fields` fields."""

    def shown(text: str) -> str:
        return escape(cut(text, longest, CUT_MARKER))

    body: list[dict[str, Any]] = [_text_block(shown(message.title), weight="Bolder", size="Medium")]
    if message.text is not None:
        body.append(_text_block(shown(message.text)))
    if fields:
        facts = [
            {"title": shown(label), "value": shown(value)}
            for label, value in message.fields[:fields]
        ]
        body.append({"type": "FactSet", "facts": facts})
    if left_out := len(message.fields) - fields:
        more = f"{left_out} more field{'' if left_out == 1 else 's'} not shown"
        body.append(_text_block(more, isSubtle=True))
    if message.footer:
        body.append(_text_block(shown(message.footer), isSubtle=True, size="Small"))
    return {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }


def request_body(card: dict[str, Any]) -> dict[str, Any]:
    """The Workflows webhook's JSON: a message with the card as its one attachment."""
    attachment = {
        "contentType": "application/vnd.microsoft.card.adaptive",
        "contentUrl": None,
        "content": card,
    }
    return {"type": "message", "attachments": [attachment]}


def _size(body: dict[str, Any]) -> int:
    # Encoded as `ChatAdapter.deliver` sends it.
    return len(json.dumps(body, ensure_ascii=False).encode())


def _largest(low: int, high: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [low, high] found by halving for which `fits(n)`; `fits(low)` holds."""
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def fitted(message: ChatMessage) -> dict[str, Any]:
    """The request for `message` within MAX_BODY_BYTES: texts cut to the longest length
    that fits, never below SHORTEST_CUT, then as many fields as fit at that length."""
    texts = [message.title, message.text or "", message.footer]
    texts += [text for field in message.fields for text in field]
    everything = max(len(text) for text in texts)
    count = len(message.fields)

    def fits(longest: int, fields: int) -> bool:
        request = request_body(card(message, longest=longest, fields=fields))
        return _size(request) <= MAX_BODY_BYTES

    shortest = min(SHORTEST_CUT, everything)
    if fits(shortest, count):
        longest = _largest(shortest, everything, lambda n: fits(n, count))
        return request_body(card(message, longest=longest, fields=count))
    kept = _largest(0, count, lambda n: fits(shortest, n))
    return request_body(card(message, longest=shortest, fields=kept))


class TeamsAdapter(ChatAdapter):
    type: ClassVar[str] = "teams"
    label: ClassVar[str] = "Microsoft Teams"
    # Microsoft documents 4 requests a second per connector webhook (60 per 30 s) and no
    # figure for Workflows; one a second stays within both.
    rate_per_second: ClassVar[float | None] = 1.0

    def body(self, message: ChatMessage) -> dict[str, Any]:
        return fitted(message)


adapter = TeamsAdapter()
