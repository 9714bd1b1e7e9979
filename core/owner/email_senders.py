"""An organization's own email sender (docs/autoresponse.md#each-organizations-own-sender):
an SMTP server, a Resend key or an SES account, with a from address. When set, the emails of the
organization's destinations, notices, acknowledgements and autoresponses go through it
(the worker's `sender_settings`); otherwise through the installation's provider. The
secret (SMTP password, Resend key) is write-only."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel, ConfigDict, EmailStr, Field, StringConstraints

from core.destinations.base import Result
from core.destinations.email import Email, send_email
from core.destinations.ssrf import (
    ResolutionFailed,
    Resolver,
    refused,
    system_resolver,
)
from core.owner.changes import Change
from core.platform.db import Conn, Database
from core.platform.errors import InvalidInput
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.settings import Settings
from core.platform.vocabulary import EmailSenderProvider, SmtpTls

Host = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9]([A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?$")
]
Secret = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class SmtpServer(BaseModel):
    """Where the organization's SMTP server listens and how to sign in."""

    model_config = ConfigDict(extra="forbid")

    host: Host
    port: int = Field(default=587, ge=1, le=65535)
    username: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    tls: SmtpTls = Field(
        default="starttls",
        description="`starttls` (plain connection upgraded when offered, usually port 587) or "
        "`tls` (TLS from the start, usually 465)",
    )


class SesAccount(BaseModel):
    """The AWS account whose SES sends (its secret access key is the sender's `secret`)."""

    model_config = ConfigDict(extra="forbid")

    region: Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$")] = Field(
        examples=["eu-west-1"]
    )
    access_key_id: Annotated[str, StringConstraints(pattern=r"^[A-Z0-9]{16,128}$")]


class EmailSenderFields(BaseModel):
    """The organization's own sender, as set."""

    model_config = ConfigDict(extra="forbid")

    provider: EmailSenderProvider
    from_address: EmailStr = Field(description="the address its emails come from")
    smtp: SmtpServer | None = Field(default=None, description="with provider `smtp`")
    ses: SesAccount | None = Field(default=None, description="with provider `ses`")
    secret: Secret | None = Field(
        default=None,
        description="the SMTP password, the Resend API key or the SES secret access key; "
        "write-only (reads show `secret_set`); left out, the stored one stays while the "
        "provider does",
        json_schema_extra={"writeOnly": True},
    )


def shown(row: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sender as the API and the dashboard show it: which one is in use, never the
    secret."""
    if row is None:
        return {
            "sender": "installation",
            "provider": None,
            "from_address": None,
            "smtp": None,
            "ses": None,
            "secret_set": False,
            "updated_at": None,
        }
    smtp = (
        {
            "host": row["smtp_host"],
            "port": row["smtp_port"],
            "username": row["smtp_username"],
            "tls": row["smtp_tls"],
        }
        if row["provider"] == "smtp"
        else None
    )
    return {
        "sender": "organization",
        "provider": row["provider"],
        "from_address": row["from_address"],
        "smtp": smtp,
        "ses": {"region": row["ses_region"], "access_key_id": row["ses_access_key_id"]}
        if row["provider"] == "ses"
        else None,
        "secret_set": row["secret"] is not None,
        "updated_at": row["updated_at"],
    }


@scoped
async def get_sender(conn: Conn, scope: OrgScope) -> dict[str, Any] | None:
    """The organization's own sender with its secret, or None."""
    cur = await conn.execute(
        queries["get_organization_email"], {"organization_id": scope.organization_id}
    )
    return await cur.fetchone()


async def check_smtp_host(host: str, port: int, *, allow_private: bool, resolver: Resolver) -> None:
    """Refuse an SMTP host that is, or resolves to, a non-public address (as webhook targets
    are refused), unless private targets are allowed."""
    if allow_private:
        return
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            addresses = [
                ipaddress.ip_address(a.split("%", 1)[0]) for a in await resolver(host, port)
            ]
        except ResolutionFailed:
            addresses = []
    if not addresses or any(refused(address) for address in addresses):
        raise InvalidInput(
            "the SMTP host must resolve to public addresses only",
            [{"field": "smtp.host", "message": "not a public host"}],
        )


async def set_email_sender(
    change: Change,
    fields: EmailSenderFields,
    *,
    now: datetime,
    allow_private: bool,
    resolver: Resolver = system_resolver,
) -> dict[str, Any]:
    """Set the organization's own sender (checked first: an SMTP host that is public, a
    Resend key); answers it as shown."""
    if fields.provider == "smtp":
        if fields.smtp is None:
            raise InvalidInput(
                "provider smtp needs `smtp`", [{"field": "smtp", "message": "required"}]
            )
        await check_smtp_host(
            fields.smtp.host, fields.smtp.port, allow_private=allow_private, resolver=resolver
        )
    if fields.provider == "ses" and fields.ses is None:
        raise InvalidInput("provider ses needs `ses`", [{"field": "ses", "message": "required"}])
    smtp = fields.smtp if fields.provider == "smtp" else None
    ses = fields.ses if fields.provider == "ses" else None
    async with change as conn:
        current = await get_sender(conn, change.scope)
        if fields.provider != "smtp" and fields.secret is None:
            if current is None or current["provider"] != fields.provider:
                raise InvalidInput(
                    f"provider {fields.provider} needs its key as `secret`",
                    [{"field": "secret", "message": "required"}],
                )
        cur = await conn.execute(
            queries["put_organization_email"],
            {
                "organization_id": change.scope.organization_id,
                "provider": fields.provider,
                "from_address": str(fields.from_address),
                "smtp_host": smtp.host if smtp else None,
                "smtp_port": smtp.port if smtp else None,
                "smtp_username": smtp.username if smtp else None,
                "smtp_tls": smtp.tls if smtp else None,
                "ses_region": ses.region if ses else None,
                "ses_access_key_id": ses.access_key_id if ses else None,
                "secret": fields.secret,
                "now": now,
            },
        )
        row = await cur.fetchone()
    return shown(row)


async def remove_email_sender(change: Change) -> None:
    """Back to the installation's provider (already there: nothing changes)."""
    async with change as conn:
        await conn.execute(
            queries["delete_organization_email"], {"organization_id": change.scope.organization_id}
        )


def sender_settings(settings: Settings, row: Mapping[str, Any]) -> Settings:
    """The installation's settings with the organization's sender as its email provider."""
    if row["provider"] == "ses":
        return settings.with_values(
            email_provider="ses",
            mail_from=row["from_address"],
            ses_region=row["ses_region"],
            ses_access_key_id=row["ses_access_key_id"],
            ses_secret_access_key=row["secret"],
        )
    if row["provider"] == "resend":
        return settings.with_values(
            email_provider="resend", mail_from=row["from_address"], resend_api_key=row["secret"]
        )
    user = row["smtp_username"]
    login = ""
    if user:
        login = quote(user, safe="") + (
            f":{quote(row['secret'], safe='')}" if row["secret"] else ""
        )
        login += "@"
    scheme = "smtps" if row["smtp_tls"] == "tls" else "smtp"
    return settings.with_values(
        email_provider="smtp",
        mail_from=row["from_address"],
        smtp_url=f"{scheme}://{login}{row['smtp_host']}:{row['smtp_port']}",
    )


async def senders_for(db: Database, organization_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The own senders of these organizations (as the owner: a deliver pass's)."""
    async with db.connection() as conn:
        cur = await conn.execute(
            queries["organization_senders"], {"organization_ids": organization_ids}
        )
        return {row["organization_id"]: row for row in await cur.fetchall()}


# What of a provider's DNS record is shown (Resend's domain records).
_RECORD_KEYS = ("record", "type", "name", "value", "priority", "ttl", "status")
DNS_TIMEOUT = 5.0


async def dns_records(settings: Settings, row: Mapping[str, Any] | None) -> dict[str, Any]:
    """The DNS records the provider says the from address's domain needs, as it says them
    (Resend's domain records); Postbag never makes one up. An SMTP server's are in its
    provider's documentation, SES's on the verified identity in the SES console: none shown."""
    if row is None or row["provider"] != "resend":
        return {
            "provider": None if row is None else row["provider"],
            "domain": None,
            "records": [],
            "detail": "the installation's sender: its operator's records"
            if row is None
            else "your SMTP provider's documentation names the records to add"
            if row["provider"] == "smtp"
            else "the SES console names the DKIM records of the domain's verified identity",
        }
    domain = str(row["from_address"]).rpartition("@")[2].lower()
    base = settings.resend_api_url.rstrip("/")
    headers = {"Authorization": f"Bearer {row['secret']}"}
    import httpx  # only the DNS records ask Resend from an API request

    try:
        async with httpx.AsyncClient(timeout=DNS_TIMEOUT, follow_redirects=False) as client:
            listed = await client.get(f"{base}/domains", headers=headers)
            found = [
                d
                for d in (listed.json().get("data") or [] if listed.status_code == 200 else [])
                if str(d.get("name", "")).lower() == domain
            ]
            if not found:
                return {
                    "provider": "resend",
                    "domain": domain,
                    "records": [],
                    "detail": f"Resend answered {listed.status_code} and lists no domain {domain}: "
                    "add it in Resend first",
                }
            detail = await client.get(f"{base}/domains/{found[0]['id']}", headers=headers)
            records = detail.json().get("records") or [] if detail.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return {
            "provider": "resend",
            "domain": domain,
            "records": [],
            "detail": "Resend did not answer",
        }
    return {
        "provider": "resend",
        "domain": domain,
        "records": [
            {key: str(r[key]) for key in _RECORD_KEYS if r.get(key) is not None}
            for r in records
            if isinstance(r, dict)
        ][:50],
        "detail": None,
    }


async def send_test(
    settings: Settings,
    row: Mapping[str, Any] | None,
    http: aiohttp.ClientSession,
    *,
    to: str,
    message_key: str,
) -> Result:
    """One test email to `to` through the organization's sender (or the installation's)."""
    used = settings if row is None else sender_settings(settings, row)
    mail = Email(
        [to],
        "Postbag test email",
        "This is a test email from Postbag: the organization's email sender works.\n",
    )
    return await send_email(used, http, mail, message_key=message_key, timeout=10.0)
