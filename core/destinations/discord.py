"""The Discord type: a channel's incoming webhook (`https://discord.com/api/webhooks/{id}/{token}`).

Discord takes a JSON POST with `content` (≤ 2,000 characters) and/or up to 10 `embeds`
(`title` ≤ 256, `description` ≤ 4,096, `footer.text` ≤ 2,048, all text of all embeds
≤ 6,000), plus `allowed_mentions`. A submission is one embed: the title, one `label: value`
line per field (or the route's text, or a digest's text) as the description, and the
receipt in the footer. `allowed_mentions: {"parse": []}` keeps anything a visitor typed
from pinging; values and labels are escaped so they cannot format or hide text, and long
ones are cut with `…`.

Answers: 204 (200 with `?wait=true`) is sent. A 429 carries a `Retry-After` header and a
body `retry_after` in fractional seconds: the longer of the header and the body's figure
(rounded up to whole seconds, as the header's is) sets the wait. 5xx is
retried; another 4xx is dead at once, shown as its status (`http_404`); Discord's
`{"code", "message"}` stays in the attempt's excerpt.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar

from core.destinations.chat import ChatAdapter
from core.destinations.text import ChatMessage, cut

TITLE_CHARS = 256
DESCRIPTION_CHARS = 4096
FOOTER_CHARS = 2048
EMBED_CHARS = 6000
# One long answer is cut to a field value's length, so it cannot push the rest of the
# form out of the description.
VALUE_CHARS = 1024

# Left alone: a link (Discord links it before any markup, and an escape inside would break
# it). Broken: `@everyone` / `@here`, visually (they cannot ping: `allowed_mentions`).
# Escaped: every character Discord reads as markup, mention or emoji syntax.
_MARKUP = re.compile(
    r"(?P<link>https?://[^\s<]+)|(?P<mention>@(?=everyone|here))|(?P<char>[\\*_~`|>#\-\[\]()<])"
)


def escape(text: str) -> str:
    """`text` as Discord shows it literally: markup escaped, `@everyone` broken, links kept."""

    def replace(match: re.Match[str]) -> str:
        if match.group("link"):
            return match.group("link")
        if match.group("mention"):
            return "@\u200b"
        return "\\" + match.group("char")

    return _MARKUP.sub(replace, text)


class DiscordAdapter(ChatAdapter):
    type: ClassVar[str] = "discord"
    label: ClassVar[str] = "Discord"
    # Discord publishes no figure: a webhook takes about 5 requests per 2 s, and a channel
    # 30 messages a minute, the limit a steady stream meets first.
    rate_per_second: ClassVar[float | None] = 0.5

    def body(self, message: ChatMessage) -> dict[str, Any]:
        title = cut(escape(message.title), TITLE_CHARS)
        footer = cut(message.footer, FOOTER_CHARS)
        if message.text is not None:
            text = escape(message.text)
        else:
            text = "\n".join(
                f"{cut(escape(label), TITLE_CHARS)}: {cut(escape(value), VALUE_CHARS)}"
                for label, value in message.fields
            )
        room = min(DESCRIPTION_CHARS, EMBED_CHARS - len(title) - len(footer))
        embed: dict[str, Any] = {"title": title}
        if text:
            embed["description"] = cut(text, room)
        if footer:
            # The footer is shown as plain text: it needs no escaping.
            embed["footer"] = {"text": footer}
        return {"embeds": [embed], "allowed_mentions": {"parse": []}}

    def retry_after(self, answer: bytes) -> float | None:
        """The body's `retry_after`, rounded up to whole seconds as Discord's `Retry-After`
        header is, so the body's finer figure never shortens the header's wait (an infinite
        figure is read as none)."""
        try:
            seconds = json.loads(answer)["retry_after"]
        except (ValueError, KeyError, TypeError):
            return None
        if isinstance(seconds, int | float) and 0 < seconds < math.inf:
            return float(math.ceil(seconds))
        return None


adapter = DiscordAdapter()
