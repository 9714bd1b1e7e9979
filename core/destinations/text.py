"""The text of a submission (or a stream event) as people read it: email and Telegram text,
chat messages, digests.

One line per field in the form's order as `label: value`; booleans `Yes`/`No`; empty `—`;
a ticked consent field reads `Consent: given`; the last line names the receipt, the form and
the arrival time. Values nested deeper than MAX_DEPTH show `…` in place of what lies below,
so no value can make rendering recurse without bound.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.destinations.templates import format_value, render

DEFAULT_SUBJECT = "New form submission"
# The line a given consent reads as, in place of its field's `label: Yes`.
CONSENT_GIVEN = "Consent: given"
# The longest text and subject rendered for any destination (an email's body; a chat
# service cuts further): rendering stops there, it never renders and then cuts.
TEXT_CHARS = 100_000
SUBJECT_CHARS = 998
# The payload event of an owner's notice (core/owner/notifications.py): like a digest, it
# carries its own subject and text.
NOTICE_EVENT = "postbag.notice"
# The payload event of an email about a member's account (a password reset): its own subject
# and text, whose link the email adapter seals when it sends (core/destinations/email.py).
ACCOUNT_EVENT = "postbag.account"
# Where its text has the link: `{"link": {"path": "/app/reset/", "nonce": …}}` in the payload.
LINK_MARK = "{link}"
_OWN_TEXT = frozenset({"form.digest", NOTICE_EVENT, ACCOUNT_EVENT})
# The longest tenant-written text (a name) an installation email quotes.
QUOTED_CHARS = 80
# A dot between two letters or digits (and its CJK and full-width forms): what makes a
# domain name a mail client links.
_LINKING_DOT = re.compile(r"(?<=\w)[.\u3002\uff0e\uff61](?=\w)")
# Quotation marks inside a quoted text, which could seem to end the quote.
_QUOTES = str.maketrans({"“": "'", "”": "'", '"': "'"})
# Levels of lists and objects inside a field's value that the text shows.
MAX_DEPTH = 8
CUT = "…"


def capped(value: Any, depth: int = MAX_DEPTH) -> Any:
    """`value` with every list or object nested below `depth` levels replaced by `…`.

    Its recursion is bounded by `depth`, whatever the nesting of `value`.
    """
    if isinstance(value, list):
        return [capped(item, depth - 1) for item in value] if depth > 0 else CUT
    if isinstance(value, dict):
        return {key: capped(item, depth - 1) for key, item in value.items()} if depth > 0 else CUT
    return value


def _is_event(payload: Mapping[str, Any]) -> bool:
    """Whether `payload` is a stream event's (`data` in place of a submission's `values`)."""
    return payload.get("event") == "stream.event"


def _field_values(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Values (depth-capped) with attachment fields shown by their file names; a stream
    event's top-level `data` keys stand for fields."""
    fields = payload.get("data") if _is_event(payload) else payload.get("values")
    values: dict[str, Any] = {
        str(name): capped(value) for name, value in dict(fields or {}).items()
    }
    for name, files in (payload.get("attachments") or {}).items():
        if isinstance(files, list):
            values[name] = [str(f.get("name", "file")) for f in files if isinstance(f, dict)]
    return values


def default_lines(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> list[str]:
    """`label: value` per field in form order, then the receipt line."""
    template = template or {}
    values = _field_values(payload)
    labels: Mapping[str, Any] = template.get("labels") or {}
    order = [str(name) for name in (template.get("field_order") or [])]
    order += [name for name in values if name not in order]
    # A ticked consent box reads as the consent it is, not as its label and `Yes`.
    given = template.get("consent_field") if payload.get("consent") is True else None
    lines = [
        CONSENT_GIVEN
        if name == given
        else f"{labels.get(name) or name}: {format_value(values.get(name))}"
        for name in order
    ]
    if _is_event(payload):
        lines.append(
            f"Receipt {payload.get('receipt', '')} · {payload.get('type', '')} on stream "
            f"{payload.get('stream', '')} · received {payload.get('received_at', '')}"
        )
        return lines
    form = payload.get("form", "")
    form_name = template.get("form_name")
    form_text = f"{form_name} ({form})" if form_name else str(form)
    lines.append(
        f"Receipt {payload.get('receipt', '')} · form {form_text} · "
        f"received {payload.get('submitted_at', '')}"
    )
    return lines


def one_line(text: str) -> str:
    """`text` with its line breaks as spaces: a subject is one header line, and a visitor's
    CR/LF must neither break it nor add a header."""
    return " ".join(text.splitlines())


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """Tenant-written text (a key's, member's or organization's name) as an email the
    installation sends shows it: within “…”, on one line (control, format and separator
    characters read as one space; its own quotation marks as `'`), at most `limit`
    characters, and never a link: `://` reads `[:]//` and a dot between two letters or
    digits `[.]`, so no mail client makes a URL, a domain or an address of it."""
    text = "".join(" " if unicodedata.category(char)[0] in "CZ" else char for char in str(value))
    text = " ".join(text.split()).translate(_QUOTES)
    text = _LINKING_DOT.sub("[.]", text.replace("://", "[:]//"))
    return f"“{cut(text, limit)}”"


def message(
    payload: Mapping[str, Any], template: Mapping[str, Any] | None, *, limit: int = TEXT_CHARS
) -> tuple[str, str]:
    """The subject and text: the route's `{{field}}` templates (the text rendered up to
    `limit` characters), or the default message."""
    template = template or {}
    values = _field_values(payload)
    if payload.get("event") in _OWN_TEXT and isinstance(payload.get("text"), str):
        return str(payload.get("subject") or "Form digest"), str(payload["text"])
    subject = template.get("subject")
    text = template.get("text")
    default = one_line(f"New event: {payload.get('type', '')}") if _is_event(payload) else None
    return (
        one_line(render(subject, values, min(limit, SUBJECT_CHARS)))
        if isinstance(subject, str) and subject
        else (default or DEFAULT_SUBJECT)[:SUBJECT_CHARS],
        render(text, values, limit)
        if isinstance(text, str) and text
        else "\n".join(default_lines(payload, template))[:limit],
    )


def digest_message(summary: Mapping[str, Any], *, form_name: str) -> tuple[str, str]:
    """The subject and text of a digest: the count, one line per listed submission, and the
    link to all of them."""
    count = int(summary.get("count") or 0)
    listed = list(summary.get("submissions") or [])
    noun = "submission" if count == 1 else "submissions"
    subject = one_line(f"{count} new {noun} to {form_name} ({summary.get('period', '')})")
    lines = [subject, ""]
    lines += [f"{item['receipt']} · {item['submitted_at']}" for item in listed]
    if count > len(listed):
        lines.append(f"… and {count - len(listed)} more")
    lines += ["", f"All of them: {summary.get('more_url', '')}"]
    return subject, "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """A submission as a chat service shows it: a title, `label: value` lines in the
    form's order (or the route's rendered text instead), and a footer naming the receipt.
    Values are plain text; each service escapes them for its own format."""

    title: str
    fields: list[tuple[str, str]]
    text: str | None
    footer: str


def chat_message(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> ChatMessage:
    """What a chat destination posts for `payload`: the email text rules in parts."""
    template = template or {}
    form_name = str(template.get("form_name") or payload.get("form") or "")
    if payload.get("event") == "form.digest" and isinstance(payload.get("text"), str):
        subject = str(payload.get("subject") or "Form digest")
        return ChatMessage(title=subject, fields=[], text=str(payload["text"]), footer="")
    subject, text = message(payload, template)
    custom = isinstance(template.get("text"), str) and bool(template.get("text"))
    values = _field_values(payload)
    labels: Mapping[str, Any] = template.get("labels") or {}
    order = [str(name) for name in (template.get("field_order") or [])]
    order += [name for name in values if name not in order]
    fields = [(str(labels.get(name) or name), format_value(values.get(name))) for name in order]
    title = f"{subject}: {form_name}" if form_name and subject == DEFAULT_SUBJECT else subject
    received = payload.get("received_at") if _is_event(payload) else payload.get("submitted_at")
    footer = f"Receipt {payload.get('receipt', '')} · received {received or ''}"
    return ChatMessage(
        title=title, fields=[] if custom else fields, text=text if custom else None, footer=footer
    )


def cut(text: str, limit: int, marker: str = "…") -> str:
    """`text` within `limit` characters, ending in `marker` when it was cut."""
    return text if len(text) <= limit else text[: max(limit - len(marker), 0)] + marker
