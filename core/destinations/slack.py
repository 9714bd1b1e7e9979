"""The Slack adapter: one Block Kit message to an incoming webhook
(`https://hooks.slack.com/services/…`, given as `config.url`, the secret).

Slack takes a JSON POST of `text` (the fallback notifications show) and `blocks`: a `header`
(`plain_text`, at most 150 characters) with the title, `section` blocks whose `mrkdwn` text
(at most 3000 characters each) holds the `*label:* value` lines in the form's order or the
route's text (a digest's text too), and a `context` block with the receipt; at most 50 blocks.
In `mrkdwn`, `&`, `<` and `>` become entities, so `<!channel>` or `<http://x|y>` in a value
stays text, and `verbatim` keeps Slack from turning a bare `@channel` or `#general` into a
mention or link; `plain_text` is never parsed, so the header is sent as it is. Link
previews are off, so a URL in a value does not unfurl. A value too long for its section is
cut with `…`; lines beyond the last section Slack allows are counted in a closing line
instead of being sent.

Answers: `200 ok` is sent. 429 waits for its `Retry-After`; 408, 5xx, timeouts and
connection errors are retried. Any other status is final, shown as the status
(`http_400`, `http_404`); Slack's plain-text body (`invalid_payload`, `channel_not_found`…)
may quote the message, so it stays in the attempt's excerpt.
"""

from __future__ import annotations

from typing import Any, ClassVar

from core.destinations.chat import ChatAdapter
from core.destinations.text import DEFAULT_SUBJECT, ChatMessage, cut

HEADER_CHARS = 150
SECTION_CHARS = 3000
MAX_BLOCKS = 50
# Slack shows the fallback in notifications and asks for it to stay short.
FALLBACK_CHARS = 3000
# A long label is cut sooner so that its value keeps most of the line.
LABEL_CHARS = 300
MARKER = "…"

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ESCAPE = str.maketrans(_ENTITIES)


def escape(text: str) -> str:
    """`text` as `mrkdwn` shows it literally: Slack's three control characters as entities."""
    return text.translate(_ESCAPE)


def escaped_within(text: str, limit: int) -> str:
    """`text` escaped, cut with the marker so that the escaped form fits `limit`; a cut
    never splits an entity."""
    shown = escape(text)
    if len(shown) <= limit:
        return shown
    room = limit - len(MARKER)
    kept: list[str] = []
    for char in text:
        piece = _ENTITIES.get(char, char)
        room -= len(piece)
        if room < 0:
            break
        kept.append(piece)
    return "".join(kept) + MARKER


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _context(footer: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(escaped_within(footer, SECTION_CHARS))]}


def _lines(message: ChatMessage) -> list[str]:
    """The escaped lines of the message body, each within one section."""
    if message.text is not None:
        return [escaped_within(line, SECTION_CHARS) for line in message.text.splitlines()]
    lines = []
    for label, value in message.fields:
        head = f"*{escaped_within(label, LABEL_CHARS)}:* "
        lines.append(head + escaped_within(value, SECTION_CHARS - len(head)))
    return lines


def _section_texts(lines: list[str], room: int) -> list[str]:
    """`lines` packed into at most `room` section texts; the lines that do not fit are
    counted in the last one instead."""
    packed: list[list[str]] = []
    size = 0
    for line in lines:
        if packed and size + 1 + len(line) <= SECTION_CHARS:
            packed[-1].append(line)
            size += 1 + len(line)
        else:
            packed.append([line])
            size = len(line)
    if len(packed) > room:
        left = sum(len(group) for group in packed[room - 1 :])
        packed[room - 1 :] = [[f"_{MARKER} {left} more lines not shown_"]]
    # Slack refuses a section without text; blank lines alone say nothing.
    return [text for group in packed if (text := "\n".join(group)).strip()]


class SlackAdapter(ChatAdapter):
    type: ClassVar[str] = "slack"
    label: ClassVar[str] = "Slack"
    # Slack: one message a second per incoming webhook, short bursts allowed.
    rate_per_second: ClassVar[float | None] = 1.0

    def body(self, message: ChatMessage) -> dict[str, Any]:
        # An empty rendered subject would be an empty header, which Slack refuses.
        title = message.title.strip() or DEFAULT_SUBJECT
        header = {
            "type": "header",
            "text": {"type": "plain_text", "text": cut(title, HEADER_CHARS, MARKER)},
        }
        footer = [_context(message.footer)] if message.footer else []
        room = MAX_BLOCKS - 1 - len(footer)
        sections = [
            {"type": "section", "text": _mrkdwn(text)}
            for text in _section_texts(_lines(message), room)
        ]
        return {
            "text": escaped_within(title, FALLBACK_CHARS),
            "blocks": [header, *sections, *footer],
            "unfurl_links": False,
            "unfurl_media": False,
        }


adapter = SlackAdapter()
