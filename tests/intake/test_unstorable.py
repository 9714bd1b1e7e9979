"""What the database cannot store gets a clear answer on `POST /s/{form}`, and nothing is
written for it: no submission, no stored object, no file (docs/submit.md#limits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.submit import submit_client

JSON = {"Content-Type": "application/json", "Accept": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}


def _nested(depth: int) -> bytes:
    """A body whose innermost value sits `depth` levels deep (the body is the first)."""
    return b'{"a":' + b"[" * (depth - 1) + b"1" + b"]" * (depth - 1) + b"}"


async def _nothing_written(conn: Conn, tmp_path: Path) -> None:
    assert await rows(conn, "SELECT id FROM submissions") == []
    assert await rows(conn, "SELECT storage_key FROM stored_objects") == []
    assert await rows(conn, "SELECT id FROM events") == []
    files = tmp_path / "files"
    assert not files.exists() or not any(p.is_file() for p in files.rglob("*"))


@pytest.mark.parametrize(
    ("headers", "body", "code", "field"),
    [
        (FORM, b"name=a%00b", "unstorable_value", "name"),
        (FORM, b"na%00me=ab", "unstorable_value", "na\ufffdme"),
        (JSON, b'{"name": "a\\u0000b"}', "unstorable_value", "name"),
        (JSON, b'{"na\\u0000me": "ab"}', "unstorable_value", "na\ufffdme"),
        (JSON, b'{"name": "\\ud800"}', "unstorable_value", "name"),
        (JSON, b'{"name": ["x", {"deep": "\\udfff"}]}', "unstorable_value", "name.1.deep"),
        (JSON, b'{"n": 1e400}', "unstorable_value", "body"),
        (JSON, b'{"n": -1e400}', "unstorable_value", "body"),
        (JSON, _nested(33), "input_limit", "a" + ".0" * 31),
        (JSON, _nested(5000), "input_limit", "body"),
        (FORM, "&".join(f"f{i}=x" for i in range(201)).encode(), "input_limit", "body"),
        (JSON, json.dumps({"n" * 257: "x"}).encode(), "input_limit", "n" * 64 + "…"),
    ],
    ids=[
        "nul-value-urlencoded",
        "nul-key-urlencoded",
        "nul-value-json",
        "nul-key-json",
        "surrogate",
        "nested-surrogate",
        "1e400",
        "-1e400",
        "depth-33",
        "depth-5000",
        "201-fields",
        "long-name",
    ],
)
async def test_unstorable__refused_with_a_code_and_nothing_written(
    services: Services,
    conn: Conn,
    tmp_path: Path,
    headers: dict[str, str],
    body: bytes,
    code: str,
    field: str,
) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == code
    assert [e["field"] for e in problem["errors"]] == [field]
    assert "\x00" not in response.text and "\\u0000" not in response.text
    await _nothing_written(conn, tmp_path)


def _multipart(field_name: bytes, value: bytes, file_name: bytes) -> bytes:
    """Raw bytes, since a client library would escape the NUL of a name."""
    return (
        b'--XyZ\r\nContent-Disposition: form-data; name="'
        + field_name
        + b'"\r\n\r\n'
        + value
        + b'\r\n--XyZ\r\nContent-Disposition: form-data; name="cv"; filename="'
        + file_name
        + b'"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XyZ--\r\n'
    )


@pytest.mark.parametrize(
    "body",
    [
        _multipart(b"note", b"a\x00b", b"cv.txt"),
        _multipart(b"no\x00te", b"ab", b"cv.txt"),
        _multipart(b"note", b"ab", b"c\x00v.txt"),
    ],
    ids=["nul-value", "nul-key", "nul-filename"],
)
async def test_unstorable__multipart_with_a_file_writes_no_file(
    services: Services, conn: Conn, tmp_path: Path, body: bytes
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".txt"]}})
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            content=body,
            headers={
                "Content-Type": "multipart/form-data; boundary=XyZ",
                "Accept": "application/json",
            },
        )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "unstorable_value"
    await _nothing_written(conn, tmp_path)


async def test_unstorable__limits_themselves_are_accepted(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn)
    at_limits = {f"f{i}": "x" for i in range(199)}
    at_limits["n" * 256] = json.loads(_nested(32))["a"]
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", content=json.dumps(at_limits).encode(), headers=JSON
        )
    assert response.status_code == 201, response.text
    [row] = await rows(conn, 'SELECT "values" FROM submissions')
    assert row["values"] == at_limits


@pytest.mark.parametrize("form", ["frm_%00", "frm_a%00b", "frm_" + "z" * 27, "frm_01JX", "x"])
async def test_unstorable__malformed_form_id_is_404_on_post_and_preflight(
    services: Services, conn: Conn, form: str
) -> None:
    async with submit_client(services) as client:
        posted = await client.post(f"/s/{form}", content=b"a=1", headers=FORM)
        preflight = await client.options(f"/s/{form}", headers={"Origin": "https://site.example"})
    assert posted.status_code == 404 and posted.json()["code"] == "not_found"
    assert preflight.status_code == 404 and preflight.json()["code"] == "not_found"
