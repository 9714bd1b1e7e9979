"""What `postbag dev` prints: the ready-to-paste block of a first start, and the banner."""

from __future__ import annotations

import os
import shlex
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.owner.form_settings import FormFields
from core.owner.forms import add_form, html_snippet, submit_url
from core.owner.members import local_owner_link
from core.owner.organizations import create_api_key, create_organization, list_organizations
from core.platform.clock import utcnow
from core.platform.db import connect
from core.platform.queries import queries
from core.platform.settings import Settings

QUICK_START_FORM = "Contact"


@dataclass(frozen=True, slots=True)
class FirstStart:
    """What a first start created: the local organization, its key, and a form."""

    organization_id: str
    api_key: str
    form: dict[str, Any]


async def first_start(url: str) -> FirstStart | None:
    """On an installation without organizations, create the local organization, its API key
    and the quick-start form ("Contact", any origin), in one transaction; else None."""
    conn = await connect(url)
    try:
        async with conn.transaction():
            # Two runners starting at once on an empty database create one organization.
            await conn.execute(queries["lock_organizations"])
            if await list_organizations(conn):
                return None
            scope = await create_organization(conn, name="Local", plan="self_hosted")
            key = await create_api_key(conn, scope, name="default", role="owner")
            form = await add_form(conn, scope, fields=FormFields(name=QUICK_START_FORM))
        return FirstStart(scope.organization_id, key.secret, form)
    finally:
        await conn.close()


async def local_sign_in_url(url: str, settings: Settings) -> str | None:
    """A one-time link that signs the installation's first owner in (the local owner, made
    on the first start, or for an organization that has no owner yet); None without any
    organization."""
    conn = await connect(url)
    try:
        token = await local_owner_link(conn, now=utcnow())
    finally:
        await conn.close()
    return None if token is None else f"{settings.public_url.rstrip('/')}/app/link/{token}"


def command_name(argv0: str) -> str:
    """How to run `postbag` again from here: `.venv/bin/postbag` when `./local/run` started
    it (the script is not on PATH), else `postbag`."""
    path = Path(argv0)
    if path.name != "postbag" or shutil.which("postbag") == str(path.resolve()):
        return "postbag"
    relative = os.path.relpath(path)
    return str(path.resolve()) if relative.startswith("..") else relative


def ready_block(
    created: FirstStart, settings: Settings, sign_in: str | None, *, command: str = "postbag"
) -> str:
    """The block printed once on first start: key, dashboard sign-in link, submit URL,
    snippet, curl, and the `command` lines that come next."""
    base = settings.public_url.rstrip("/")
    url = submit_url(settings, created.form["id"])
    snippet = textwrap.indent(html_snippet(created.form, url).rstrip(), "    ")
    curl = shlex.join(["curl", "-d", "email=ada@example.com", "-d", "message=Hello from curl", url])
    rule = "=" * 78
    return "\n".join(
        [
            rule,
            "Postbag is ready. This block is shown once: keep the API key.",
            "",
            f"  API key     {created.api_key}",
            f"  Dashboard   {sign_in or base + '/app'}",
            "              (signs you in once; each start prints a new link)",
            f"  Submit URL  {url}   (form {QUICK_START_FORM!r}, any origin)",
            "",
            "  Paste this form into any page:",
            "",
            snippet,
            "",
            "  Or submit from a terminal:",
            "",
            f"    {curl}",
            "",
            f"  See deliveries arrive:  {command} listen --create-destination {created.form['id']}",
            f"  Lost the key?           {command} create-key {created.organization_id}",
            rule,
        ]
    )


def banner(settings: Settings, *, host: str, port: int, ticks: bool) -> list[str]:
    """The start-up lines: what this local runner relaxes, and where it listens."""
    lines = []
    if settings.allow_private_targets:
        lines.append(
            "POSTBAG_ALLOW_PRIVATE_TARGETS is on: webhooks may target http:// and private "
            "addresses, and a form's redirect_url may be http:// (development only)."
        )
    base = f"http://{host}:{port}"
    if settings.email_provider == "dev":
        lines.append(
            "Email is caught, never sent (POSTBAG_EMAIL_PROVIDER=dev): invitations, password "
            f"resets, notices and email destinations land in the mailbox at {base}/app/dev/mail. "
            "Set POSTBAG_EMAIL_PROVIDER (ses, resend or smtp) to send for real."
        )
    if settings.email_provider == "log":
        lines.append(
            "Email is log-only (POSTBAG_EMAIL_PROVIDER=log): each email is written to this "
            "log and its delivery ends skipped (email_log_only), never sent. Set "
            "POSTBAG_EMAIL_PROVIDER (ses, resend or smtp) to send for real."
        )
    if not ticks:
        lines.append("Ticks are off: nothing is delivered until `postbag tick deliver` runs.")
    lines.append(
        f"Postbag is listening on {base} (start page {base}/, dashboard {base}/app, "
        "API docs /v1/docs; Ctrl-C stops it)"
    )
    return lines
