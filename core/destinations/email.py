"""The email adapter: one message per submission through SES, Resend, SMTP or the log.

`POSTBAG_EMAIL_PROVIDER=log` (the default) prints the message to the log and ends the
delivery `skipped` with reason `email_log_only`: it was never sent, and it says so.
`dev` (`postbag dev`'s default) catches it in the development mailbox (`mailbox.py`) and
counts it sent. A real
provider without its settings (`POSTBAG_MAIL_FROM`, the Resend key, the SMTP URL) fails
the delivery with `email_not_configured`, so it retries and, configured in time, is sent.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import email.utils
import hashlib
import hmac
import json
import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

import aiohttp
from pydantic import EmailStr, Field

from core.destinations import autoresponse, http, mailbox
from core.destinations.base import AdapterConfig, BaseAdapter, DeliveryContext, Result
from core.destinations.text import ACCOUNT_EVENT, LINK_MARK, cut, message
from core.platform.addresses import valid_address
from core.platform.aws import SES, aws_client
from core.platform.clock import utcnow
from core.platform.logs import log
from core.platform.settings import Settings

# What the log provider prints of a message's text (a log line is not a mailbox).
LOG_TEXT_CHARS = 2_000
# SES answers that mean "later", not "never".
_SES_RETRYABLE = frozenset(
    {
        "TooManyRequestsException",
        "LimitExceededException",
        "InternalFailure",
        "Throttling",
        "ServiceUnavailable",
        "ThrottlingException",
    }
)


class EmailConfig(AdapterConfig):
    """`{"to": ["owner@example.com"]}`: one to ten recipients."""

    to: list[EmailStr] = Field(
        title="Email recipients",
        description="one to ten addresses",
        min_length=1,
        max_length=10,
    )


def _send_ses(sender: str, mail: Email, message_key: str, settings: Settings) -> Result:
    from botocore.exceptions import BotoCoreError, ClientError

    assert settings.mail_from is not None
    mail_from = settings.mail_from
    account = None
    if settings.ses_access_key_id and settings.ses_secret_access_key and settings.ses_region:
        secret = settings.ses_secret_access_key.get_secret_value()
        account = (settings.ses_region, settings.ses_access_key_id, secret)

    # A message with headers of its own (an autoresponse's) goes raw; the rest as SES builds it.
    content: dict[str, Any] = (
        {"Raw": {"Data": _mime(sender, mail, message_key, mail_from).as_bytes()}}
        if mail.headers or mail.html
        else {
            "Simple": {
                "Subject": {"Data": mail.subject, "Charset": "UTF-8"},
                "Body": {"Text": {"Data": mail.text, "Charset": "UTF-8"}},
            }
        }
    )
    try:
        answer = aws_client("sesv2", SES, account=account).send_email(
            FromEmailAddress=sender,
            Destination={"ToAddresses": mail.to},
            ReplyToAddresses=[mail.reply_to] if mail.reply_to else [],
            Content=content,
        )
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        retryable = code in _SES_RETRYABLE or (isinstance(status, int) and status >= 500)
        return Result(ok=False, retryable=retryable, http_status=status, error_class=f"ses_{code}")
    except BotoCoreError as exc:
        return Result(ok=False, retryable=True, error_class=f"ses_{type(exc).__name__}")
    return Result(ok=True, excerpt=str(answer.get("MessageId", ""))[:512] or None)


def _send_smtp(url: str, sender: str, to: list[str], mail: EmailMessage, timeout: float) -> Result:
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    try:
        smtp: smtplib.SMTP
        if parts.scheme == "smtps":
            smtp = smtplib.SMTP_SSL(
                host, parts.port or 465, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            smtp = smtplib.SMTP(host, parts.port or 587, timeout=timeout)
        with smtp:
            if parts.scheme != "smtps":
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls(context=ssl.create_default_context())
                    smtp.ehlo()
            if parts.username:
                smtp.login(unquote(parts.username), unquote(parts.password or ""))
            smtp.send_message(mail, from_addr=sender, to_addrs=to)
    except smtplib.SMTPRecipientsRefused:
        return Result(ok=False, retryable=False, error_class="smtp_recipients_refused")
    except smtplib.SMTPResponseException as exc:
        return Result(ok=False, retryable=exc.smtp_code < 500, error_class=f"smtp_{exc.smtp_code}")
    except (OSError, smtplib.SMTPException) as exc:
        return Result(ok=False, retryable=True, error_class=f"smtp_{type(exc).__name__}")
    return Result(ok=True)


class EmailAdapter(BaseAdapter):
    type: ClassVar[str] = "email"
    label: ClassVar[str] = "Email"
    Config: ClassVar[builtins.type[AdapterConfig]] = EmailConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = False
    # The owner's notices go to addresses through `notify`, not through an email destination.
    takes_notices: ClassVar[bool] = False
    sends_email: ClassVar[bool] = True

    def validate_secret(self, secret: str) -> None:  # noqa: ARG002 - the interface's signature
        raise ValueError("email destinations take no secret")

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        to = [str(address) for address in target.get("to") or []]
        if not to:
            return Result(ok=False, retryable=False, error_class="invalid_target")
        if (ctx.template or {}).get("autoresponse"):
            return await _send_autoresponse(to, payload, ctx)
        subject, text = message(payload, ctx.template)
        account = payload.get("event") == ACCOUNT_EVENT
        if account:
            text = text.replace(LINK_MARK, _account_link(ctx.settings, payload))
        return await send_email(
            ctx.settings,
            ctx.http,
            # An account email's link is never written to the log.
            Email(to, subject, text, _reply_to(payload, ctx.template), loggable=not account),
            message_key=ctx.delivery_id,
            timeout=ctx.timeout,
        )


async def _send_autoresponse(
    to: list[str], payload: Mapping[str, Any], ctx: DeliveryContext
) -> Result:
    """A form's autoresponse to its visitor (`core.destinations.autoresponse`)."""
    assert ctx.template is not None
    settings = ctx.settings
    reply = autoresponse.render(
        payload,
        ctx.template,
        key=settings.require_secret_key(),
        public_url=settings.public_url,
        mail_from=settings.mail_from or "postbag@localhost",
    )
    mail = Email(
        to,
        reply.subject,
        reply.text,
        reply.reply_to,
        html=reply.html,
        headers=reply.headers,
        from_name=reply.from_name,
    )
    return await send_email(
        settings, ctx.http, mail, message_key=ctx.delivery_id, timeout=ctx.timeout
    )


@dataclass(frozen=True, slots=True)
class Email:
    """One message to send: plain text, with an HTML alternative and extra headers when
    given (an autoresponse's)."""

    to: list[str]
    subject: str
    text: str
    reply_to: str | None = None
    # Whether the text may be written to the log (`log` provider): not when it holds a link.
    loggable: bool = True
    html: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # The display name of the `From` (the address is the installation's).
    from_name: str | None = None


async def send_email(
    settings: Settings,
    client: aiohttp.ClientSession,
    mail: Email,
    *,
    message_key: str,
    timeout: float,
) -> Result:
    """Send `mail` through the installation's provider (or the log); `message_key` makes its
    `Message-ID` and Resend's idempotency key, the same for each attempt of one email and
    never another's (a delivery's or an invitation's id)."""
    to, subject, text, reply_to = mail.to, mail.subject, mail.text, mail.reply_to
    if settings.email_provider == "dev":
        mailbox.catch(message_key, to, subject, text, reply_to)
        return Result(ok=True)
    if settings.email_provider == "log":
        detail: dict[str, Any] = {
            "message": message_key,
            "to": to,
            "reply_to": reply_to,
            "subject": subject,
        }
        if mail.loggable:
            detail["text"] = cut(text, LOG_TEXT_CHARS)
        log.info(
            "email not sent (POSTBAG_EMAIL_PROVIDER=log)",
            extra={"detail": detail},
        )
        return Result(ok=False, skip_reason="email_log_only")
    missing = _missing_setting(settings)
    if missing:
        return Result(ok=False, retryable=True, error_class="email_not_configured", excerpt=missing)
    assert settings.mail_from is not None
    sender = autoresponse.sender(settings.mail_from, mail.from_name)
    if settings.email_provider == "ses":
        return await asyncio.to_thread(_send_ses, sender, mail, message_key, settings)
    if settings.email_provider == "resend":
        assert settings.resend_api_key is not None
        body: dict[str, Any] = {
            "from": sender,
            "to": to,
            "subject": subject,
            "text": text,
        }
        if reply_to:
            body["reply_to"] = reply_to
        if mail.html:
            body["html"] = mail.html
        if mail.headers:
            body["headers"] = dict(mail.headers)
        return await http.post(
            client,
            f"{settings.resend_api_url.rstrip('/')}/emails",
            content=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {settings.resend_api_key.get_secret_value()}",
                "Content-Type": "application/json",
                "Idempotency-Key": message_key,
            },
            timeout=timeout,
        )
    assert settings.smtp_url is not None
    mime = _mime(sender, mail, message_key, settings.mail_from)
    return await asyncio.to_thread(
        _send_smtp, settings.smtp_url.get_secret_value(), settings.mail_from, to, mime, timeout
    )


def _mime(sender: str, mail: Email, message_key: str, mail_from: str) -> EmailMessage:
    """`mail` as a MIME message from `sender` (plain text, and HTML as its alternative)."""
    mime = EmailMessage()
    mime["From"], mime["To"], mime["Subject"] = sender, ", ".join(mail.to), mail.subject
    mime["Date"] = email.utils.format_datetime(utcnow())
    mime["Message-ID"] = _message_id(message_key, mail_from)
    if mail.reply_to:
        mime["Reply-To"] = mail.reply_to
    for name, value in mail.headers.items():
        mime[name] = value
    mime.set_content(mail.text)
    if mail.html:
        mime.add_alternative(mail.html, subtype="html")
    return mime


def sealed_token(key: bytes, nonce: str) -> str:
    """The token of a link whose email is queued: HMAC-SHA256 of its nonce under the
    installation's secret key (the same for each attempt of the email)."""
    digest = hmac.new(key, f"link:{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _account_link(settings: Settings, payload: Mapping[str, Any]) -> str:
    """The link of an account email, its token sealed from the payload's nonce now: the
    stored delivery holds no live token, and every attempt sends the same link."""
    link = payload["link"]
    token = sealed_token(settings.require_secret_key(), str(link["nonce"]))
    return f"{settings.public_url.rstrip('/')}{link['path']}{token}"


def _reply_to(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> str | None:
    """The visitor's address the owner's reply goes to: the valid address in the field the
    delivery's snapshot names (see `reply_to_field`), or None."""
    field = (template or {}).get("reply_to_field")
    if not isinstance(field, str):
        return None
    return valid_address((payload.get("values") or {}).get(field))


def _message_id(delivery_id: str, sender: str) -> str:
    """The same `Message-ID` for every attempt of a delivery (a receiving server can drop the
    copy a lost answer made us send again), in the sender's domain."""
    domain = sender.rpartition("@")[2].strip(" >") or "postbag"
    return f"<{delivery_id}@{domain}>"


def not_sent_words(settings: Settings, result: Result) -> str:
    """Why an installation email was not sent, naming the variables to set: what a refusal
    that stored nothing (`503 email_not_sent`) tells the owner."""
    if result.skip_reason == "email_log_only":
        return (
            "email is log-only on this server (POSTBAG_EMAIL_PROVIDER=log): set "
            "POSTBAG_EMAIL_PROVIDER to ses, resend or smtp and POSTBAG_MAIL_FROM (with "
            "POSTBAG_RESEND_API_KEY for resend, POSTBAG_SMTP_URL for smtp)"
        )
    missing = _missing_setting(settings)
    if result.error_class == "email_not_configured" and missing:
        return f"email is not configured: {missing}"
    return f"the provider did not take it ({result.error_class or 'failed'})"


def _missing_setting(settings: Settings) -> str | None:
    """The variable a real provider still needs, if any."""
    if not settings.mail_from:
        return "POSTBAG_MAIL_FROM is not set"
    if settings.email_provider == "resend" and settings.resend_api_key is None:
        return "POSTBAG_RESEND_API_KEY is not set"
    if settings.email_provider == "smtp" and settings.smtp_url is None:
        return "POSTBAG_SMTP_URL is not set"
    return None


adapter = EmailAdapter()
