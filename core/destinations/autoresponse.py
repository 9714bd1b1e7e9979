"""A form's autoresponse to its visitor (docs/autoresponse.md): the message rendered from the
owner's templates when the delivery is claimed, its headers, and the unsubscribe token.

Placeholders: `{{field}}` for a submitted value the owner listed in `fields` (any other
renders empty), `{{form.name}}`, `{{receipt}}` and `{{submitted_at}}`. A value is cut to
`VALUE_CHARS`; in the subject every control character (CR, LF, tab, the Unicode line
separators) becomes a space, so no value can start a header; the HTML part escapes the
template's text and each value alike. The whole subject, text and HTML are each bounded.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formataddr, parseaddr
from typing import Any
from urllib.parse import quote

from core.destinations.templates import format_value, render_with

# The longest a submitted value reads in an autoresponse, and each part's bound.
VALUE_CHARS = 500
SUBJECT_CHARS = 200
TEXT_CHARS = 10_000
HTML_CHARS = 40_000
# The placeholders that are not submitted fields.
BUILT_IN = ("form.name", "receipt", "submitted_at")
# Every character that could end a header line or hide one: C0, DEL, C1, U+2028/2029.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
UNSUBSCRIBE_PATH = "/s/unsubscribe/"


def one_line(text: str) -> str:
    """`text` with each control character a space: safe in a header."""
    return _CONTROL.sub(" ", text)


@dataclass(frozen=True, slots=True)
class Autoresponse:
    """One rendered autoresponse."""

    subject: str
    text: str
    html: str | None
    reply_to: str | None
    from_name: str | None
    headers: dict[str, str]


def _lookup(
    payload: Mapping[str, Any], template: Mapping[str, Any], escape: Callable[[str], str]
) -> Callable[[str, int], str]:
    settings: Mapping[str, Any] = template["autoresponse"]
    allowed = set(settings.get("fields") or [])
    values: Mapping[str, Any] = payload.get("values") or {}
    built_in = {
        "form.name": str(template.get("form_name") or ""),
        "receipt": str(payload.get("receipt") or ""),
        "submitted_at": str(payload.get("submitted_at") or ""),
    }

    def value(name: str, room: int) -> str:
        if name in built_in:
            return escape(built_in[name][:VALUE_CHARS])[:room]
        if name not in allowed:
            return ""
        return escape(format_value(values.get(name), min(room, VALUE_CHARS)))[:room]

    return value


def _html_text(text: str) -> str:
    return html.escape(text, quote=True).replace("\n", "<br>\n")


def unsubscribe_token(key: bytes, recipient_hash: str) -> str:
    """The token of a mailbox's unsubscribe link: its hash (hex) and an HMAC of it."""
    mac = hmac.new(key, b"unsubscribe:" + recipient_hash.encode(), hashlib.sha256).digest()
    return f"{recipient_hash}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def token_hash(key: bytes, token: str) -> bytes | None:
    """The mailbox hash a valid unsubscribe token names, or None."""
    hashed, _, _ = token.partition(".")
    if not re.fullmatch(r"[0-9a-f]{64}", hashed):
        return None
    if not hmac.compare_digest(unsubscribe_token(key, hashed), token):
        return None
    return bytes.fromhex(hashed)


def render(
    payload: Mapping[str, Any],
    template: Mapping[str, Any],
    *,
    key: bytes,
    public_url: str,
    mail_from: str,
) -> Autoresponse:
    """The autoresponse a claimed delivery sends: `template` is its stored snapshot of the
    form's settings (`autoresponse`) and mailbox hash (`unsubscribe`), with the form's name."""
    settings: Mapping[str, Any] = template["autoresponse"]
    subject = one_line(
        render_with(
            str(settings["subject"]), _lookup(payload, template, one_line), one_line, SUBJECT_CHARS
        )
    )
    body = str(settings["text"])
    text = render_with(body, _lookup(payload, template, str), str, TEXT_CHARS)
    page = None
    if settings.get("html"):
        inner = render_with(body, _lookup(payload, template, _html_text), _html_text, HTML_CHARS)
        page = f"<!doctype html>\n<html><body><div>{inner}</div></body></html>"
    token = unsubscribe_token(key, str(template["unsubscribe"]))
    link = f"{public_url.rstrip('/')}{UNSUBSCRIBE_PATH}{token}"
    mailto = f"mailto:{parseaddr(mail_from)[1]}?subject={quote('unsubscribe ' + token)}"
    from_name = one_line(str(settings.get("from_name") or "")).strip() or None
    return Autoresponse(
        subject=subject,
        text=text,
        html=page,
        reply_to=settings.get("reply_to") or None,
        from_name=from_name,
        headers={
            "Auto-Submitted": "auto-replied",
            "X-Auto-Response-Suppress": "All",
            "List-Unsubscribe": f"<{mailto}>, <{link}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    )


def sender(mail_from: str, from_name: str | None) -> str:
    """The `From` of a message: the installation's address under the form's name, if any."""
    return formataddr((from_name, parseaddr(mail_from)[1])) if from_name else mail_from
