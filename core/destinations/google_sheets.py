"""The Google Sheets type: one row appended per submission, under a header row kept in step
with the form (docs/integrations.md#google-sheets).

The secret is a Google credential as JSON: a service account's key (`"type":
"service_account"`, the spreadsheet shared with its `client_email`), or an OAuth refresh
token of the owner's own client (`"type": "authorized_user"` with `client_id`,
`client_secret`, `refresh_token`, as `gcloud` writes it). Its access token comes from
`POSTBAG_GOOGLE_TOKEN_URL` (the JWT bearer grant, signed by `google-auth`, or the refresh
grant), never from a URL in the key, and is kept for its hour by the process.

A send reads the header row (`values.get` of row 1), writes it back when the rows hold a
field no column has (a new field adds a column at the end; a removed field keeps its
column; a column is found by the field's name or label, however the owner spells its case),
then appends the rows (`values.append`). Both writes use `valueInputOption=RAW`: a value is
stored as the text it is, never read as a formula (`=HYPERLINK(…)` stays text). A 429 is
retried with the outbox's backoff and lowers the destination's rate; 401 (or a refused
grant) ends the delivery `credentials_rejected`, 403 `permission_denied`.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from pydantic import Field

from core import __version__
from core.destinations import http, tables
from core.destinations.base import AdapterConfig, BaseAdapter, DeliveryContext, Result
from core.destinations.tables import Deadline, Row, key, match, refusal, rows, text

SCOPE = "https://www.googleapis.com/auth/spreadsheets"
# Google keeps at most 50,000 characters in a cell.
CELL_CHARS = 50_000
# Access tokens kept by the process, at most this many (oldest dropped first); one is
# used until a minute before it expires.
KEPT_TOKENS = 256
_EARLY = 60.0
_GRANT_REFUSED = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})
# How long each text of a credential but its private key may be.
_CREDENTIAL_TEXT = (1, 512)
_FIELDS = {
    "service_account": ("client_email", "private_key"),
    "authorized_user": ("client_id", "client_secret", "refresh_token"),
}

# An access token is its credential's, good for any pass or process state: kept here by the
# hash of the credential (a rotated secret has another), beside the HTTP client that uses it.
_tokens: dict[str, tuple[str, float]] = {}


class GoogleSheetsConfig(AdapterConfig):
    """`{"spreadsheet_id": "1AbC…", "sheet": "Responses"}`."""

    spreadsheet_id: str = Field(
        title="Spreadsheet id",
        description="the id in the sheet's URL: docs.google.com/spreadsheets/d/<id>/edit",
        pattern=r"^[A-Za-z0-9_-]{20,200}$",
    )
    sheet: str = Field(
        title="Sheet name",
        description="the tab rows are appended to (its header row is row 1)",
        min_length=1,
        max_length=100,
        pattern=r"^[^\x00-\x1f\x7f]+$",
    )


def credential(secret: str) -> dict[str, Any]:
    """The credential JSON of a secret (raises ValueError)."""
    try:
        info = json.loads(secret)
    except ValueError:
        raise ValueError("must be a Google credential as JSON") from None
    if not isinstance(info, dict) or info.get("type") not in _FIELDS:
        raise ValueError('must be JSON with "type": "service_account" or "authorized_user"')
    missing = [name for name in _FIELDS[info["type"]] if not isinstance(info.get(name), str)]
    if missing:
        raise ValueError(f"the credential has no {', '.join(missing)}")
    return info


def _signer(info: Mapping[str, Any]) -> Any:
    # google-auth and its RSA code are imported by a Sheets send only, not by every
    # process that imports the registry.
    from google.auth import crypt

    return crypt.RSASigner.from_service_account_info(info)


def a1_sheet(name: str) -> str:
    """The sheet's name as A1 notation quotes it."""
    return "'" + name.replace("'", "''") + "'"


def cell(value: Any) -> Any:
    """A value as one RAW cell: numbers and booleans as such, anything else as text."""
    if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
        return value
    return text(value)[:CELL_CHARS]


def header_for(header: list[str], rows: list[Row]) -> list[str]:
    """`header` with a column at the end for each column name of `rows` it lacks."""
    known = {key(name): name for name in header if name}
    grown = list(header)
    for row in rows:
        for name in row.columns():
            if match(known, name, row.labels) is None:
                known[key(name)] = name
                grown.append(name)
    return grown


def row_cells(header: list[str], row: Row) -> list[Any]:
    """`row`'s cells under `header` (empty where it has no value)."""
    known = {key(name): name for name in header if name}
    at = {name: index for index, name in enumerate(header)}
    cells: list[Any] = [""] * len(header)
    for name, value in row.columns().items():
        column = match(known, name, row.labels)
        if column is not None:
            cells[at[column]] = cell(value)
    return cells


class GoogleSheetsAdapter(BaseAdapter):
    type: ClassVar[str] = "google_sheets"
    label: ClassVar[str] = "Google Sheets"
    Config: ClassVar[builtins.type[AdapterConfig]] = GoogleSheetsConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True
    secret_hint: ClassVar[str] = (
        "a service account's JSON key, or an authorized_user JSON with a refresh token"
    )
    # Google: 60 write requests a minute per user (reads have their own 60): a send is one
    # read and one write.
    rate_per_second: ClassVar[float | None] = 1.0
    # A row holds the values, not a text.
    templates: ClassVar[bool] = False

    def validate_secret(self, secret: str) -> None:
        info = credential(secret)
        # The private key is a PEM block (its line breaks are its own), checked by signing.
        texts = [name for name in _FIELDS[info["type"]] if name != "private_key"]
        spoilt = [n for n in texts if not tables.token_shaped(info[n], lengths=_CREDENTIAL_TEXT)]
        if spoilt:
            raise ValueError(
                f"the credential's {', '.join(spoilt)} must be 1 to {_CREDENTIAL_TEXT[1]} "
                "printable characters without spaces"
            )
        if info["type"] == "service_account":
            try:
                _signer(info)
            except (ValueError, TypeError):
                raise ValueError("the service account's private_key is not a PEM key") from None

    def digest(self, summary: Mapping[str, Any], *, form_name: str) -> dict[str, Any]:  # noqa: ARG002 - the interface's signature
        return dict(summary)

    async def test(
        self, config: AdapterConfig, sample: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        # The sample's fields would stay in the header as columns of their own: the test row
        # holds the time and `sub_test` only.
        return await self.deliver(self.stored(config), {**sample, "values": {}}, ctx)

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        deadline = Deadline(ctx.timeout)
        token = await access_token(ctx.secret, ctx, deadline)
        if isinstance(token, Result):
            return token
        result = await _append(target, rows(payload, ctx.template), token[0], ctx, deadline)
        if result.http_status == 401 and not token[1]:
            # A kept token may have been revoked while the credential stands: once more
            # with a new one.
            token = await access_token(ctx.secret, ctx, deadline, renew=True)
            if isinstance(token, Result):
                return token
            result = await _append(target, rows(payload, ctx.template), token[0], ctx, deadline)
        return refusal(result)


async def _append(
    target: Mapping[str, Any],
    table: list[Row],
    token: str,
    ctx: DeliveryContext,
    deadline: Deadline,
) -> Result:
    """Read the header row, write it back grown if `table` needs a column more, append."""
    sheet = a1_sheet(str(target.get("sheet", "")))
    base = (
        f"{str(ctx.settings.google_sheets_url).rstrip('/')}/v4/spreadsheets/"
        f"{quote(str(target.get('spreadsheet_id', '')), safe='')}/values/"
    )
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "User-Agent": f"Postbag/{__version__}",
    }
    header_range = quote(f"{sheet}!1:1", safe="")
    read = await http.request(
        ctx.http,
        "GET",
        f"{base}{header_range}?majorDimension=ROWS",
        headers=headers,
        timeout=deadline.left(),
        read_limit=256 * 1024,
    )
    if not read.result.ok:
        return read.result
    answer = read.json()
    found = (answer.get("values") if isinstance(answer, dict) else None) or [[]]
    header = [str(name) for name in found[0]]
    grown = header_for(header, table)
    if grown != header:
        written = await http.request(
            ctx.http,
            "PUT",
            f"{base}{header_range}?valueInputOption=RAW",
            content=json.dumps(
                {"range": f"{sheet}!1:1", "majorDimension": "ROWS", "values": [grown]},
                ensure_ascii=False,
            ).encode(),
            headers=headers,
            timeout=deadline.left(),
        )
        if not written.result.ok:
            return written.result
    query = urlencode({"valueInputOption": "RAW", "insertDataOption": "INSERT_ROWS"})
    body = {"majorDimension": "ROWS", "values": [row_cells(grown, row) for row in table]}
    appended = await http.request(
        ctx.http,
        "POST",
        f"{base}{quote(f'{sheet}!A1', safe='')}:append?{query}",
        content=json.dumps(body, ensure_ascii=False).encode(),
        headers=headers,
        timeout=deadline.left(),
    )
    return appended.result


async def access_token(
    secret: str, ctx: DeliveryContext, deadline: Deadline, *, renew: bool = False
) -> tuple[str, bool] | Result:
    """An access token for the credential `secret` and whether it is new: the one kept
    (unless `renew`), or a new one from the token URL; a Result when the grant fails."""
    token_url = str(ctx.settings.google_token_url)
    kept_as = hashlib.sha256(f"{token_url}\n{secret}".encode()).hexdigest()
    kept = _tokens.get(kept_as)
    if kept is not None and kept[1] > time.monotonic() and not renew:
        return kept[0], False
    info = credential(secret)
    if info["type"] == "service_account":
        from google.auth import jwt

        now = int(time.time())
        claims = {
            "iss": info["client_email"],
            "scope": SCOPE,
            "aud": token_url,
            "iat": now,
            "exp": now + 3600,
        }
        assertion = jwt.encode(_signer(info), claims).decode()
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion}
    else:
        form = {
            "grant_type": "refresh_token",
            "client_id": info["client_id"],
            "client_secret": info["client_secret"],
            "refresh_token": info["refresh_token"],
        }
    reply = await http.request(
        ctx.http,
        "POST",
        token_url,
        content=urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=deadline.left(),
    )
    answer = reply.json()
    answer = answer if isinstance(answer, dict) else {}
    if not reply.result.ok:
        if answer.get("error") in _GRANT_REFUSED or reply.result.http_status == 401:
            # The excerpt is Google's error, which names no secret.
            return Result(
                ok=False,
                retryable=False,
                http_status=reply.result.http_status,
                excerpt=reply.result.excerpt,
                reason="credentials_rejected",
            )
        return reply.result
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        return Result(ok=False, retryable=True, error_class="token_unreadable")
    lifetime = answer.get("expires_in")
    seconds = float(lifetime) if isinstance(lifetime, int | float) else 3600.0
    _tokens.pop(kept_as, None)
    if len(_tokens) >= KEPT_TOKENS:
        del _tokens[next(iter(_tokens))]
    _tokens[kept_as] = (token, time.monotonic() + seconds - _EARLY)
    return token, True


adapter = GoogleSheetsAdapter()
