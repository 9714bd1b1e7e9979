"""The public mail endpoints of the submit app (docs/autoresponse.md): an autoresponse's
unsubscribe link (RFC 8058 one-click), and the providers' signed bounce and complaint events
(Resend's webhook, SES's through SNS). Each adds mailboxes to the suppression list.

- `GET /s/unsubscribe/{token}`: a page with one button (a link scanner's GET changes nothing);
  `POST` to the same URL (the button, or a mail client's one-click) suppresses the mailbox.
- `POST /s/email/events/resend`: Resend's webhook, signed the Svix way with
  `POSTBAG_RESEND_WEBHOOK_SECRET` (`whsec_…`); `email.bounced` and `email.complained`.
- `POST /s/email/events/ses`: an SNS topic's HTTP subscription carrying SES bounce and
  complaint notifications. The SNS signature is checked against the certificate at the
  message's `SigningCertURL` (an `sns.<region>.amazonaws.com` URL only), and only topics in
  `POSTBAG_SES_EVENTS_TOPIC_ARNS` are believed; a subscription confirmation is confirmed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from core.destinations.autoresponse import token_hash
from core.intake.suppressions import suppress_addresses, suppress_hashes
from core.platform.logs import log
from core.platform.services import Registry, Services
from core.platform.vocabulary import SuppressionReason

# The largest provider event read (a bounce lists at most 50 recipients).
MAX_EVENT_BYTES = 256 * 1024
MAX_CERT_BYTES = 16 * 1024
# How far a Resend event's signed timestamp may be from now (Svix's own tolerance).
SIGNATURE_TOLERANCE_SECONDS = 5 * 60
FETCH_TIMEOUT = 5.0
_SNS_URL = re.compile(r"^https://sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")
# The signing certificates fetched, by URL (SNS rotates them rarely).
SNS_CERTIFICATES: Registry[dict[str, bytes]] = Registry("sns certificates", dict)

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body{{font:1.1rem/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}}
</style>
</head><body><main><h1>{title}</h1>{body}</main></body></html>"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        _PAGE.format(title=html.escape(title), body=body),
        status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


def _hash(request: Request) -> bytes | None:
    services: Services = request.app.state.services
    return token_hash(services.settings.require_secret_key(), request.path_params["token"])


async def unsubscribe_page(request: Request) -> Response:
    """`GET /s/unsubscribe/{token}`: the confirmation button, nothing changed."""
    if _hash(request) is None:
        return _page("Link not valid", "<p>This unsubscribe link is not valid.</p>", 404)
    return _page(
        "Unsubscribe",
        "<p>Stop automatic replies from forms on this service to your address?</p>"
        '<form method="post"><button type="submit">Unsubscribe</button></form>',
    )


async def unsubscribe(request: Request) -> Response:
    """`POST /s/unsubscribe/{token}`: the mailbox joins the suppression list (the page's
    button, or RFC 8058's `List-Unsubscribe=One-Click`)."""
    hashed = _hash(request)
    if hashed is None:
        return _page("Link not valid", "<p>This unsubscribe link is not valid.</p>", 404)
    services: Services = request.app.state.services
    await suppress_hashes(services, [hashed], "unsubscribed", now=request.app.state.clock())
    return _page("Unsubscribed", "<p>You will get no more automatic replies from us.</p>")


async def _body(request: Request) -> bytes | None:
    """The request's body, or None past MAX_EVENT_BYTES."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_EVENT_BYTES:
            return None
    return bytes(data)


def svix_verified(secret: str, headers: Mapping[str, str], body: bytes, *, now: float) -> bool:
    """Whether `body` carries a valid Svix (Standard Webhooks) signature under `secret`."""
    msg_id = headers.get("svix-id") or headers.get("webhook-id") or ""
    stamp = headers.get("svix-timestamp") or headers.get("webhook-timestamp") or ""
    signatures = headers.get("svix-signature") or headers.get("webhook-signature") or ""
    if not msg_id or not stamp.isdigit() or abs(now - int(stamp)) > SIGNATURE_TOLERANCE_SECONDS:
        return False
    raw = secret.removeprefix("whsec_")
    try:
        key = base64.b64decode(raw)
    except ValueError:
        return False
    signed = msg_id.encode() + b"." + stamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(part.partition(",")[2], expected)
        for part in signatures.split()
        if part.startswith("v1,")
    )


_RESEND_REASONS: dict[str, SuppressionReason] = {
    "email.bounced": "bounced",
    "email.complained": "complained",
}


async def resend_events(request: Request) -> Response:
    """`POST /s/email/events/resend`: Resend's bounce and complaint events."""
    services: Services = request.app.state.services
    secret = services.settings.resend_webhook_secret
    if secret is None:
        return PlainTextResponse("not configured\n", status_code=404)
    body = await _body(request)
    if body is None:
        return PlainTextResponse("too large\n", status_code=413)
    if not svix_verified(secret.get_secret_value(), request.headers, body, now=time.time()):
        return PlainTextResponse("bad signature\n", status_code=401)
    event = json.loads(body)
    reason = _RESEND_REASONS.get(str(event.get("type")))
    if reason is not None:
        to = (event.get("data") or {}).get("to") or []
        addresses = [str(a) for a in (to if isinstance(to, list) else [to])][:50]
        await suppress_addresses(services, addresses, reason, now=request.app.state.clock())
    return Response(status_code=204)


_SNS_KEYS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}


def sns_string_to_sign(message: Mapping[str, Any]) -> bytes | None:
    """What SNS signed of `message` (its documented key/value lines), or None for a type
    Postbag does not take."""
    keys = _SNS_KEYS.get(str(message.get("Type")))
    if keys is None:
        return None
    lines = []
    for key in keys:
        if key in message and message[key] is not None:
            lines += [key, str(message[key])]
    return ("\n".join(lines) + "\n").encode()


async def _certificate(services: Services, url: str) -> bytes | None:
    certificates = services.state(SNS_CERTIFICATES)
    if url in certificates:
        return certificates[url]
    import httpx  # only an installation that takes SES events needs it (a cold start)

    try:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=False) as client:
            answer = await client.get(url)
    except httpx.HTTPError:
        return None
    if answer.status_code != 200 or len(answer.content) > MAX_CERT_BYTES:
        return None
    certificates[url] = answer.content
    return answer.content


async def sns_verified(services: Services, message: Mapping[str, Any]) -> bool:
    """Whether `message` is signed by SNS: its certificate from an SNS URL, its signature
    over the documented string (SHA1 for version 1, SHA256 for version 2)."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    url = str(message.get("SigningCertURL") or "")
    signed = sns_string_to_sign(message)
    version = str(message.get("SignatureVersion"))
    if signed is None or not _SNS_URL.match(url) or not url.endswith(".pem"):
        return False
    if version not in ("1", "2"):
        return False
    pem = await _certificate(services, url)
    if pem is None:
        return False
    try:
        key = x509.load_pem_x509_certificate(pem).public_key()
        signature = base64.b64decode(str(message.get("Signature") or ""))
    except ValueError:
        return False
    if not isinstance(key, rsa.RSAPublicKey):
        return False
    # SignatureVersion 1 is SNS's SHA1, the default of a subscription; 2 is SHA256.
    algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
    try:
        key.verify(signature, signed, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        return False
    return True


def _ses_addresses(
    notification: Mapping[str, Any],
) -> tuple[SuppressionReason | None, list[str]]:
    """The suppression reason and addresses of an SES event (a notification's
    `notificationType` or an event destination's `eventType`); transient bounces none."""
    kind = notification.get("notificationType") or notification.get("eventType")
    if kind == "Bounce":
        bounce = notification.get("bounce") or {}
        if bounce.get("bounceType") != "Permanent":
            return None, []
        found = bounce.get("bouncedRecipients") or []
        return "bounced", [str(r.get("emailAddress") or "") for r in found][:50]
    if kind == "Complaint":
        found = (notification.get("complaint") or {}).get("complainedRecipients") or []
        return "complained", [str(r.get("emailAddress") or "") for r in found][:50]
    return None, []


async def ses_events(request: Request) -> Response:
    """`POST /s/email/events/ses`: SNS-delivered SES bounce and complaint notifications."""
    services: Services = request.app.state.services
    body = await _body(request)
    if body is None:
        return PlainTextResponse("too large\n", status_code=413)
    try:
        message = json.loads(body)
    except ValueError:
        return PlainTextResponse("not an SNS message\n", status_code=400)
    if not isinstance(message, dict):
        return PlainTextResponse("not an SNS message\n", status_code=400)
    if message.get("TopicArn") not in services.settings.ses_events_topic_arns:
        return PlainTextResponse("topic not configured\n", status_code=403)
    if not await sns_verified(services, message):
        return PlainTextResponse("bad signature\n", status_code=401)
    if message["Type"] == "SubscriptionConfirmation":
        url = str(message.get("SubscribeURL") or "")
        if _SNS_URL.match(url):
            import httpx

            try:
                async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as client:
                    await client.get(url)
            except httpx.HTTPError:
                return PlainTextResponse("confirmation failed\n", status_code=502)
            log.info("SNS subscription confirmed", extra={"detail": {"topic": message["TopicArn"]}})
        return Response(status_code=204)
    try:
        notification = json.loads(str(message.get("Message") or ""))
    except ValueError:
        return Response(status_code=204)
    reason, addresses = _ses_addresses(notification if isinstance(notification, dict) else {})
    if reason is not None:
        await suppress_addresses(services, addresses, reason, now=request.app.state.clock())
    return Response(status_code=204)
