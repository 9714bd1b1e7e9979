"""Forms: storing them (created within the plan, changed, soft-deleted) and their snippet."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import (
    ValidationError,
)

from core.owner.changes import Change
from core.owner.form_settings import (
    FormFields,
    FormPatch,
    changed_settings,
    check_rules,
    columns,
    fields_of,
)
from core.owner.usage import reserve
from core.platform.db import Conn
from core.platform.errors import NotFound, invalid_input
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.settings import Settings
from core.spam.filltime import FILL_FIELD


@scoped
async def get_form(conn: Conn, scope: OrgScope, *, form_id: str) -> dict[str, Any]:
    """One live form (its Turnstile secret only as `turnstile_enabled`)."""
    cur = await conn.execute(
        queries["get_form"], {"id": form_id, "organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no form {form_id}")
    return row


async def oldest_form(conn: Conn) -> dict[str, Any] | None:
    """The installation's oldest live form, across organizations (the local start page)."""
    return await (await conn.execute(queries["oldest_form"], {})).fetchone()


@scoped
async def add_form(
    conn: Conn, scope: OrgScope, *, fields: FormFields, allow_http_redirect: bool = False
) -> dict[str, Any]:
    """Create a form within the plan's form count (`allow_http_redirect`: see `check_rules`)."""
    check_rules(fields, allow_http_redirect=allow_http_redirect)
    await reserve(conn, scope, kind="forms")
    form_id = new_id("frm")
    await conn.execute(
        queries["insert_form"],
        {
            **columns(fields),
            "id": form_id,
            "organization_id": scope.organization_id,
            "turnstile_secret": fields.turnstile_secret,
            "spam_secrets": Jsonb(
                fields.spam_secrets.model_dump(exclude_none=True) if fields.spam_secrets else {}
            ),
        },
    )
    return await get_form(conn, scope, form_id=form_id)


@scoped
async def list_forms(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` live forms with ids after `after`, by id."""
    cur = await conn.execute(
        queries["list_forms"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


@scoped
async def patch_form(
    conn: Conn,
    scope: OrgScope,
    *,
    form_id: str,
    patch: FormPatch,
    allow_http_redirect: bool = False,
) -> dict[str, Any]:
    """Change the fields `patch` sets; the result must satisfy every rule of a new form (a
    redirect_url kept as it was is not checked against `allow_http_redirect` again)."""
    params = {"id": form_id, "organization_id": scope.organization_id}
    current = await (await conn.execute(queries["lock_form"], params)).fetchone()
    if current is None:
        raise NotFound(f"no form {form_id}")
    secrets = {"turnstile_secret", "spam_secrets"}
    changes = patch.model_dump(include=patch.model_fields_set - secrets)
    try:
        fields = FormFields.model_validate({**fields_of(current), **changes})
    except ValidationError as exc:
        raise invalid_input(exc) from None
    kept = "redirect_url" not in patch.model_fields_set
    check_rules(fields, allow_http_redirect=allow_http_redirect or kept)
    await conn.execute(
        queries["update_form"],
        {
            **columns(fields),
            **params,
            "set_turnstile": "turnstile_secret" in patch.model_fields_set,
            "turnstile_secret": patch.turnstile_secret,
            **_spam_secrets_change(patch),
        },
    )
    return await get_form(conn, scope, form_id=form_id)


def _spam_secrets_change(patch: FormPatch) -> dict[str, Any]:
    """How a PATCH changes the external checks' secrets: all removed (null), some set or
    removed (the keys given), or none."""
    given = patch.spam_secrets
    cleared = "spam_secrets" in patch.model_fields_set and given is None
    return {
        "clear_spam_secrets": cleared,
        "set_spam_secrets": given is not None,
        "spam_secrets": Jsonb(given.model_dump(include=given.model_fields_set) if given else {}),
    }


@scoped
async def remove_form(conn: Conn, scope: OrgScope, *, form_id: str) -> None:
    """Remove a form softly, with its routes; its submissions stay until retention ends."""
    params = {"id": form_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["delete_form"], params)).fetchone() is None:
        raise NotFound(f"no form {form_id}")
    await conn.execute(
        queries["delete_form_routes"],
        {"form_id": form_id, "organization_id": scope.organization_id},
    )


async def create_form(
    change: Change, *, fields: FormFields, allow_http_redirect: bool = False
) -> dict[str, Any]:
    """Create a form (`add_form`) as the change."""
    async with change as conn:
        row = await add_form(
            conn, change.scope, fields=fields, allow_http_redirect=allow_http_redirect
        )
        change.subject = row["id"]
    return row


async def update_form(
    change: Change, *, form_id: str, patch: FormPatch, allow_http_redirect: bool = False
) -> dict[str, Any]:
    """Change a form's settings (`patch_form`) as the change, recorded with the names of
    the settings it changed (never their values)."""
    async with change as conn:
        before = await _stored_settings(conn, change.scope, form_id)
        row = await patch_form(
            conn,
            change.scope,
            form_id=form_id,
            patch=patch,
            allow_http_redirect=allow_http_redirect,
        )
        after = await _stored_settings(conn, change.scope, form_id)
        change.changed = changed_settings(before, after, patch.model_fields_set)
        return row


async def _stored_settings(conn: Conn, scope: OrgScope, form_id: str) -> dict[str, Any]:
    params = {"id": form_id, "organization_id": scope.organization_id}
    current = await (await conn.execute(queries["lock_form"], params)).fetchone()
    if current is None:
        raise NotFound(f"no form {form_id}")
    return fields_of(current)


async def delete_form(change: Change, *, form_id: str) -> None:
    """Delete a form and its routes (`remove_form`) as the change."""
    async with change as conn:
        await remove_form(conn, change.scope, form_id=form_id)


def submit_url(settings: Settings, form_id: str) -> str:
    """The public address a website posts this form to: `POSTBAG_PUBLIC_URL/s/{id}`."""
    return f"{settings.public_url.rstrip('/')}/s/{form_id}"


def html_snippet(form: Mapping[str, Any], submit_url: str) -> str:
    """A ready-to-paste HTML form posting to `submit_url`, with the honeypot hidden."""
    e = html.escape
    file_fields: Mapping[str, Any] = form["file_fields"] or {}
    enctype = ' enctype="multipart/form-data"' if file_fields else ""
    lines = [f'<form action="{e(submit_url)}" method="POST"{enctype}>']
    lines.append('  <label>Email <input type="email" name="email" required></label>')
    lines.append('  <label>Message <textarea name="message" required></textarea></label>')
    for name, spec in file_fields.items():
        accept = ",".join(spec.get("types", []))
        multiple = " multiple" if spec.get("max_files", 1) > 1 else ""
        required = " required" if spec.get("required") else ""
        lines.append(
            f'  <label>{e(name)} <input type="file" name="{e(name)}" '
            f'accept="{e(accept)}"{multiple}{required}></label>'
        )
    if form["consent_field"]:
        lines.append(
            f'  <label><input type="checkbox" name="{e(form["consent_field"])}" value="yes"> '
            "Send me a confirmation</label>"
        )
    if form["turnstile_enabled"]:
        lines.append('  <div class="cf-turnstile" data-sitekey="YOUR_SITE_KEY"></div>')
    lines.append(
        f'  <input type="text" name="{e(form["honeypot_field"])}" tabindex="-1" '
        'autocomplete="off" style="display:none">'
    )
    # The fill-time token, fetched when the page loads (docs/spam.md#fill-time).
    lines.append(f'  <input type="hidden" name="{FILL_FIELD}" value="">')
    token_url = json.dumps(f"{submit_url}/token").replace("<", "\\u003c")
    lines.append(
        f"  <script>(function(f){{fetch({token_url}).then(function(r){{return r.text()}})"
        f'.then(function(t){{f.elements["{FILL_FIELD}"].value=t}})}})'
        '(document.currentScript.closest("form"))</script>'
    )
    lines.append('  <button type="submit">Send</button>')
    lines.append("</form>")
    if form["turnstile_enabled"]:
        lines.append(
            '<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" async defer>'
            "</script>"
        )
    return "\n".join(lines) + "\n"
