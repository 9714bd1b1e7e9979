"""Loopback doubles of the vendor APIs the table-like destinations write to: Google's token
endpoint and Sheets `values`, Airtable's schema and records, Notion's databases and pages.

Each answers through `peers.receiver` and checks the request shapes the vendor documents
(paths, the auth header, the body, `valueInputOption`, `Notion-Version`), answering a
request it would refuse as the vendor does; each keeps what it stored for the test to read.
`fail` queues answers to give before the real ones (a 429, a 401).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import jwt

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import Tenant, make_tenant
from tests.support.peers import Answer, Request
from tests.support.submit import submit_client

SPREADSHEET = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"
SERVICE_EMAIL = "postbag-writer@acme-forms.iam.gserviceaccount.com"
AIRTABLE_TOKEN = "patAbCdEfGhIjKlMn0." + "0123456789abcdef" * 4
AIRTABLE_BASE = "appAbCdEfGhIjKlMn"
NOTION_TOKEN = "ntn_4fakeIntegrationToken0123456789abcdef"
NOTION_DATABASE = "0123456789abcdef0123456789abcdef"


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return (
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(body).encode(),
    )


@cache
def _private_key() -> tuple[str, str]:
    """A 2048-bit RSA key for the tests' service account: (private PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def service_account_key() -> str:
    """A service account's JSON key as Google's console downloads it."""
    private, _ = _private_key()
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "acme-forms",
            "private_key_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
            "private_key": private,
            "client_email": SERVICE_EMAIL,
            "client_id": "104735200000000000000",
            "token_uri": "https://oauth2.googleapis.com/token",
        },
        indent=2,
    )


def refresh_token_credential() -> str:
    """An OAuth refresh token of the owner's own client, as `gcloud` writes it."""
    return json.dumps(
        {
            "type": "authorized_user",
            "client_id": "1234-abc.apps.googleusercontent.com",
            "client_secret": "GOCSPX-client-secret",
            "refresh_token": "1//0refresh-token",
        }
    )


@dataclass
class Double:
    """What every double shares: queued failures and the requests it saw."""

    fail: list[Answer] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failure(self) -> Answer | None:
        with self.lock:
            return self.fail.pop(0) if self.fail else None

    def refuse(self, problem: str, status: int = 400) -> Answer:
        """A request the vendor would refuse: answered so, and kept for the test to show."""
        self.problems.append(problem)
        return _json(status, {"error": {"code": status, "message": problem}})


@dataclass
class GoogleSheets(Double):
    """Google's token endpoint (`/token`) and the Sheets API's `values` on one spreadsheet:
    cells are stored as Google stores them, `("text", …)`, `("number", …)`, `("bool", …)`,
    or `("formula", …)` for a string written with `USER_ENTERED` that starts with `=`."""

    sheets: dict[str, list[list[tuple[str, Any]]]] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    revoked_refresh: bool = False
    grants: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def header(self, sheet: str) -> list[Any]:
        rows = self.sheets.get(sheet) or [[]]
        return [value for _, value in rows[0]]

    def data(self, sheet: str) -> list[list[tuple[str, Any]]]:
        return (self.sheets.get(sheet) or [[]])[1:]

    def respond(self, request: Request) -> Answer:
        parts = urlsplit(request.path)
        if parts.path == "/token":
            return self._token(request)
        queued = self.failure()
        if queued is not None:
            return queued
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ") not in self.tokens:
            return _json(401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}})
        prefix = f"/v4/spreadsheets/{SPREADSHEET}/values/"
        if not parts.path.startswith(prefix):
            return self.refuse(f"no such spreadsheet: {parts.path}", 404)
        target = unquote(parts.path.removeprefix(prefix))
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        if request.method == "POST" and target.endswith(":append"):
            return self._append(target.removesuffix(":append"), query, request)
        sheet, _, cells = target.rpartition("!")
        name = self._sheet(sheet)
        if name is None or cells != "1:1":
            return self.refuse(f"Unable to parse range: {target}")
        if request.method == "GET":
            body: dict[str, Any] = {"range": f"{sheet}!A1:Z1", "majorDimension": "ROWS"}
            if self.header(name):
                body["values"] = [self.header(name)]
            return _json(200, body)
        if request.method == "PUT":
            if query.get("valueInputOption") not in ("RAW", "USER_ENTERED"):
                return self.refuse("valueInputOption is required")
            sent = json.loads(request.body)
            if sent.get("range") != target or sent.get("majorDimension") != "ROWS":
                return self.refuse("range or majorDimension do not match")
            [row] = sent["values"]
            stored = self.sheets.setdefault(name, [[]])
            stored[0] = [self._cell(value, query["valueInputOption"]) for value in row]
            return _json(200, {"updatedRange": target, "updatedCells": len(row)})
        return self.refuse(f"method {request.method}", 405)

    def _sheet(self, quoted: str) -> str | None:
        if len(quoted) < 2 or not quoted.startswith("'") or not quoted.endswith("'"):
            return None
        return quoted[1:-1].replace("''", "'")

    def _cell(self, value: Any, option: str) -> tuple[str, Any]:
        if isinstance(value, bool):
            return "bool", value
        if isinstance(value, int | float):
            return "number", value
        if option == "USER_ENTERED" and isinstance(value, str) and value.startswith("="):
            return "formula", value
        return "text", value

    def _append(self, target: str, query: dict[str, str], request: Request) -> Answer:
        option = query.get("valueInputOption")
        if option not in ("RAW", "USER_ENTERED"):
            return self.refuse("valueInputOption is required")
        if query.get("insertDataOption", "OVERWRITE") not in ("OVERWRITE", "INSERT_ROWS"):
            return self.refuse("bad insertDataOption")
        sheet, _, _ = target.rpartition("!")
        name = self._sheet(sheet)
        if name is None:
            return self.refuse(f"Unable to parse range: {target}")
        sent = json.loads(request.body)
        if sent.get("majorDimension", "ROWS") != "ROWS":
            return self.refuse("majorDimension")
        stored = self.sheets.setdefault(name, [[]])
        for row in sent["values"]:
            stored.append([self._cell(value, option) for value in row])
        return _json(200, {"spreadsheetId": SPREADSHEET, "updates": {"updatedRows": 1}})

    def _token(self, request: Request) -> Answer:
        if request.headers.get("Content-Type") != "application/x-www-form-urlencoded":
            return _json(400, {"error": "invalid_request"})
        form = {name: values[0] for name, values in parse_qs(request.body.decode()).items()}
        self.grants.append(form)
        if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            _, public = _private_key()
            try:
                claims = jwt.decode(form["assertion"], certs=public, audience=self.url + "/token")
            except (ValueError, KeyError):
                return _json(400, {"error": "invalid_grant", "error_description": "bad JWT"})
            scope_ok = claims.get("scope") == "https://www.googleapis.com/auth/spreadsheets"
            if claims.get("iss") != SERVICE_EMAIL or not scope_ok:
                return _json(400, {"error": "invalid_grant"})
        elif form.get("grant_type") == "refresh_token":
            if self.revoked_refresh:
                return _json(400, {"error": "invalid_grant", "error_description": "revoked"})
            if form.get("client_secret") != "GOCSPX-client-secret":
                return _json(401, {"error": "invalid_client"})
        else:
            return _json(400, {"error": "unsupported_grant_type"})
        token = f"ya29.token-{len(self.grants)}"
        self.tokens.add(token)
        return _json(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})


AIRTABLE_TABLE = {
    "id": "tblSubmissions0001",
    "name": "Submissions",
    "primaryFieldId": "fldName",
    "fields": [
        {"id": "fldName", "name": "Name", "type": "singleLineText"},
        {"id": "fldEmail", "name": "Email", "type": "email"},
        {"id": "fldSeats", "name": "Seats", "type": "number", "options": {"precision": 0}},
        {"id": "fldNews", "name": "Subscribe", "type": "checkbox"},
        {
            "id": "fldPlan",
            "name": "Plan",
            "type": "singleSelect",
            "options": {"choices": [{"id": "sel1", "name": "Pro"}, {"id": "sel2", "name": "Team"}]},
        },
        {"id": "fldReceipt", "name": "Receipt", "type": "singleLineText"},
        {"id": "fldCreated", "name": "Created", "type": "createdTime"},
    ],
}


@dataclass
class Airtable(Double):
    """Airtable's Web API on one base with one table (`AIRTABLE_TABLE`): the schema, and
    record creation (or an upsert, `PATCH` with `performUpsert`) as `typecast: false` does
    it."""

    records: list[dict[str, Any]] = field(default_factory=list)
    creates: list[int] = field(default_factory=list)
    revoked: bool = False
    lose_answers: int = 0

    def respond(self, request: Request) -> Answer:
        queued = self.failure()
        if queued is not None:
            return queued
        auth = request.headers.get("Authorization")
        if self.revoked or auth != f"Bearer {AIRTABLE_TOKEN}":
            return _json(401, {"error": {"type": "AUTHENTICATION_REQUIRED"}})
        path = urlsplit(request.path).path
        if request.method == "GET" and path == f"/v0/meta/bases/{AIRTABLE_BASE}/tables":
            return _json(200, {"tables": [AIRTABLE_TABLE]})
        records_path = f"/v0/{AIRTABLE_BASE}/{AIRTABLE_TABLE['id']}"
        if request.method in ("POST", "PATCH") and path == records_path:
            answer = self._create(json.loads(request.body), upsert=request.method == "PATCH")
            if answer[0] == 200 and self.lose_answers > 0:
                # Stored, but the answer is lost on its way back.
                self.lose_answers -= 1
                return _json(503, {"error": "SERVICE_UNAVAILABLE"})
            return answer
        return _json(404, {"error": "NOT_FOUND"})

    def _create(self, body: dict[str, Any], *, upsert: bool) -> Answer:
        merge: list[str] = []
        if upsert:
            merge = (body.get("performUpsert") or {}).get("fieldsToMergeOn") or []
            if not 1 <= len(merge) <= 3:
                return self.refuse("INVALID_REQUEST: fieldsToMergeOn", 422)
        records = body.get("records")
        if not isinstance(records, list) or not 1 <= len(records) <= 10:
            return self.refuse("records must be 1 to 10", 422)
        typecast = body.get("typecast", False)
        fields = {f["name"]: f for f in AIRTABLE_TABLE["fields"]}  # type: ignore[attr-defined]
        for record in records:
            for name, value in record["fields"].items():
                spec = fields.get(name)
                if spec is None:
                    return self.refuse(f'UNKNOWN_FIELD_NAME: "{name}"', 422)
                kind = spec["type"]
                if kind == "createdTime":
                    return self.refuse(f'INVALID_VALUE_FOR_COLUMN: "{name}" is computed', 422)
                if kind == "number" and not isinstance(value, int | float):
                    return self.refuse(f'INVALID_VALUE_FOR_COLUMN: "{name}"', 422)
                if kind == "checkbox" and not isinstance(value, bool):
                    return self.refuse(f'INVALID_VALUE_FOR_COLUMN: "{name}"', 422)
                choices = [c["name"] for c in spec.get("options", {}).get("choices", [])]
                if kind == "singleSelect" and value not in choices and not typecast:
                    return self.refuse(f'INVALID_MULTIPLE_CHOICE_OPTIONS: "{value}"', 422)
        self.creates.append(len(records))
        made = []
        for record in records:
            fields = record["fields"]
            same = [
                at
                for at, kept in enumerate(self.records)
                if merge and all(kept.get(name) == fields.get(name) for name in merge)
            ]
            if same:
                self.records[same[0]] = {**self.records[same[0]], **fields}
            else:
                self.records.append(fields)
            made.append({"id": f"rec{(same or [len(self.records) - 1])[0]:014d}", "fields": fields})
        return _json(200, {"records": made})


NOTION_PROPERTIES = {
    "Name": {"id": "title", "type": "title", "title": {}},
    "Email": {"id": "a%3Ab", "type": "email", "email": {}},
    "Seats": {"id": "c%3Ad", "type": "number", "number": {"format": "number"}},
    "Subscribe": {"id": "e%3Af", "type": "checkbox", "checkbox": {}},
    "Plan": {"id": "g%3Ah", "type": "select", "select": {"options": []}},
    "Starts": {"id": "i%3Aj", "type": "date", "date": {}},
    "Notes": {"id": "k%3Al", "type": "rich_text", "rich_text": {}},
    "Owner": {"id": "m%3An", "type": "people", "people": {}},
}


@dataclass
class Notion(Double):
    """Notion's API (version 2022-06-28) on one database (`NOTION_PROPERTIES`)."""

    pages: list[dict[str, Any]] = field(default_factory=list)
    revoked: bool = False

    def respond(self, request: Request) -> Answer:
        queued = self.failure()
        if queued is not None:
            return queued
        if request.headers.get("Notion-Version") != "2022-06-28":
            return self.refuse("missing_version: Notion-Version header", 400)
        if self.revoked or request.headers.get("Authorization") != f"Bearer {NOTION_TOKEN}":
            return _json(401, {"object": "error", "status": 401, "code": "unauthorized"})
        path = urlsplit(request.path).path
        if request.method == "GET" and path == f"/v1/databases/{NOTION_DATABASE}":
            body = {"object": "database", "id": NOTION_DATABASE, "properties": NOTION_PROPERTIES}
            return _json(200, body)
        if request.method == "POST" and path == "/v1/pages":
            return self._page(json.loads(request.body))
        return _json(404, {"object": "error", "status": 404, "code": "object_not_found"})

    def _page(self, body: dict[str, Any]) -> Answer:
        if body.get("parent") != {"database_id": NOTION_DATABASE}:
            return self.refuse("validation_error: parent")
        for name, value in body.get("properties", {}).items():
            spec = NOTION_PROPERTIES.get(name)
            if spec is None or set(value) != {spec["type"]}:
                return self.refuse(f"validation_error: property {name}")
            inner = value[spec["type"]]
            if spec["type"] in ("title", "rich_text"):
                texts = [item["text"]["content"] for item in inner]
                if len(inner) > 100 or any(len(t) > 2000 for t in texts):
                    return self.refuse(f"validation_error: {name} too long")
            if spec["type"] == "number" and not isinstance(inner, int | float):
                return self.refuse(f"validation_error: {name} is not a number")
            if spec["type"] == "select" and "," in inner["name"]:
                return self.refuse(f"validation_error: {name} has a comma")
        children = body.get("children", [])
        if len(children) > 100:
            return self.refuse("validation_error: children")
        self.pages.append(body)
        return _json(200, {"object": "page", "id": f"page-{len(self.pages)}"})


def page_lines(page: dict[str, Any]) -> list[str]:
    """A created page's content as text, one line a block."""
    return [
        "".join(item["text"]["content"] for item in block["paragraph"]["rich_text"])
        for block in page.get("children", [])
    ]


@dataclass(frozen=True)
class Wired:
    """A tenant, its form and a destination of a vendor type routed from it (through /v1)."""

    tenant: Tenant
    form: str
    destination: str


async def wire(
    services: Services,
    conn: Conn,
    destination: dict[str, Any],
    *,
    route: dict[str, Any] | None = None,
    form: dict[str, Any] | None = None,
) -> Wired:
    """Through /v1: a form with labels, the destination `destination` describes, a route."""
    acme = await make_tenant(conn, plan="pro")
    labels = {"email": "Email", "seats": "Seats"}
    async with api_client(services) as client:
        made_form = await create(
            client, acme, "/v1/forms", {"name": "Signup", "labels": labels, **(form or {})}
        )
        made = await create(client, acme, "/v1/destinations", {"name": "Table", **destination})
        await create(
            client,
            acme,
            f"/v1/forms/{made_form['id']}/routes",
            {"destination_id": made["id"], **(route or {})},
        )
    return Wired(acme, made_form["id"], made["id"])


async def post(services: Services, form: str, data: dict[str, str]) -> str:
    """A visitor's form post; returns its receipt."""
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", data=data, headers={"Accept": "application/json"}
        )
    assert response.status_code == 201, response.text
    receipt: str = response.json()["receipt"]
    return receipt


async def deliver(services: Services, now: datetime | None = None) -> None:
    """One pass of the deliver tick."""
    await Deliverer(services, options=WorkerOptions(timeout=5, margin=0.1)).run_pass(
        now=now or utcnow(), budget=10
    )


async def read_destination(services: Services, wired: Wired) -> dict[str, Any]:
    """`GET /v1/destinations/{id}`."""
    async with api_client(services) as client:
        response = await client.get(
            f"/v1/destinations/{wired.destination}", headers=wired.tenant.headers
        )
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def send_test(services: Services, wired: Wired) -> dict[str, Any]:
    """`POST /v1/destinations/{id}/test`."""
    async with api_client(services) as client:
        response = await client.post(
            f"/v1/destinations/{wired.destination}/test", headers=wired.tenant.headers
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
