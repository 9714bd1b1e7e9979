from __future__ import annotations

import asyncio
import io
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.http.submit_app import create_submit_app
from core.intake import attachments
from core.intake.attachments import sniff
from core.platform.db import Conn
from core.platform.errors import NotFound
from core.platform.storage import storage_for
from tests.support.api import api_client
from tests.support.builders import setup_form
from tests.support.files import (
    ALL_TYPES,
    SAMPLES,
    elf,
    jpeg,
    object_exists,
    opendocument,
    pdf,
    png,
    zip_bomb,
)
from tests.support.fuzzing import served, tenant_with_form
from tests.support.records import claimed, rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


# --- sniffing, without a database -------------------------------------------------------------


@pytest.mark.parametrize(("name", "data", "mime"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sniff__supported_formats(tmp_path: Path, name: str, data: bytes, mime: str) -> None:
    path = tmp_path / "upload"
    path.write_bytes(data)
    assert sniff(path, name) == mime


@pytest.mark.parametrize(
    "data",
    [elf(), b"MZ\x90\x00" + b"\x00" * 60, b"\x00\x01binary\x00", b"\xff\xfe\xfa invalid utf-8"],
)
def test_sniff__unsupported_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "upload"
    path.write_bytes(data)
    assert sniff(path, "file.pdf") is None


def test_sniff__zip_without_office_content_is_unsupported(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", "<doc/>")  # no [Content_Types].xml
    path = tmp_path / "upload"
    path.write_bytes(buffer.getvalue())
    assert sniff(path, "doc.docx") is None


@pytest.mark.parametrize("member", ["mimetype", "word/document.xml"])
def test_sniff__zip_bomb_is_refused_from_its_directory_without_inflating(
    tmp_path: Path, member: str
) -> None:
    path = tmp_path / "upload"
    path.write_bytes(zip_bomb(member))  # ~1 MB inflating to 1 GiB
    tracemalloc.start()
    try:
        mime = sniff(path, "doc.odt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert mime is None
    assert peak < 8 * 1024 * 1024


def test_sniff__only_the_types_a_field_takes_are_looked_for(tmp_path: Path) -> None:
    path = tmp_path / "upload"
    path.write_bytes(opendocument("application/vnd.oasis.opendocument.text"))
    assert sniff(path, "doc.odt") == "application/vnd.oasis.opendocument.text"
    # A field that takes no document type never opens the archive.
    assert sniff(path, "doc.odt", frozenset({"application/pdf", "image/png"})) is None
    text = tmp_path / "notes"
    text.write_bytes(b"hello")
    assert sniff(text, "notes.txt", frozenset({"application/pdf"})) is None


# --- through HTTP, for both stores --------------------------------------------------------------


async def test_attachments__stored_privately_downloaded_and_erased(
    db_url: str, tmp_path: Path, conn: Conn, storage_url: str
) -> None:
    tenant, form = await setup_form(
        conn,
        file_fields={
            "cv": {"types": [".pdf", ".docx"], "max_files": 1, "required": True},
            "photos": {"types": ["image/png", "image/jpeg"], "max_files": 2},
        },
    )
    files: list[tuple[str, tuple[str, bytes, str]]] = [
        ("cv", ("My CV.pdf", pdf(), "application/octet-stream")),
        ("photos", ("a.png", png(), "image/png")),
        ("photos", ("b.jpg", jpeg(), "image/jpeg")),
    ]
    async with built_services(db_url, tmp_path, storage_url=storage_url) as services:
        async with submit_client(services) as client:
            response = await client.post(
                f"/s/{form}", data={"name": "Ada"}, files=files, headers=JSON_ACCEPT
            )
        assert response.status_code == 201, response.text
        receipt = response.json()["receipt"]
        stored = await rows(
            conn, "SELECT id, field, name, content_type, size, storage_key FROM attachments"
        )
        assert sorted((a["field"], a["name"], a["content_type"]) for a in stored) == [
            ("cv", "My CV.pdf", "application/pdf"),
            ("photos", "a.png", "image/png"),
            ("photos", "b.jpg", "image/jpeg"),
        ]
        for attachment in stored:
            assert str(attachment["storage_key"]).split("/")[1] == receipt
            assert object_exists(storage_url, str(attachment["storage_key"]))
        objects = await rows(conn, "SELECT submission_id FROM stored_objects")
        assert objects == [{"submission_id": receipt}] * 3
        if storage_url.startswith("s3://"):
            import boto3

            bucket, prefix = storage_url.removeprefix("s3://").split("/", 1)
            head = boto3.client("s3").head_object(
                Bucket=bucket, Key=f"{prefix}/{stored[0]['storage_key']}"
            )
            assert head["ServerSideEncryption"] == "AES256"
        [claim] = (await claimed(conn)).values()
        payload = claim.payload
        assert payload["values"] == {"name": "Ada"}
        assert sorted(f["name"] for f in payload["attachments"]["photos"]) == ["a.png", "b.jpg"]
        assert payload["attachments"]["cv"][0]["type"] == "application/pdf"

        cv = next(a for a in stored if a["field"] == "cv")
        async with api_client(services, tenant.key) as api:
            detail = (await api.get(f"/v1/submissions/{receipt}")).json()
            assert len(detail["attachments"]) == 3
            download = await api.get(f"/v1/submissions/{receipt}/attachments/{cv['id']}")
            assert download.status_code == 200
            assert download.content == pdf()
            assert download.headers["content-type"] == "application/pdf"
            assert download.headers["content-disposition"] == (
                "attachment; filename*=UTF-8''My%20CV.pdf"
            )
            erased = await api.post(f"/v1/submissions/{receipt}/erase")
            assert erased.status_code == 200
            assert erased.json()["values"] is None and erased.json()["attachments"] == []
            again = await api.get(f"/v1/submissions/{receipt}/attachments/{cv['id']}")
            assert again.status_code == 409
            assert again.json()["code"] == "values_erased"
        for attachment in stored:
            assert not object_exists(storage_url, str(attachment["storage_key"]))
        deleted = await rows(conn, "SELECT deleted_at IS NOT NULL AS gone FROM stored_objects")
        assert deleted == [{"gone": True}] * 3
        assert await rows(conn, "SELECT id FROM attachments") == []


def _multipart(field: str, name: str, data: bytes) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [(field, (name, data, "application/octet-stream"))]


async def test_attachments__every_supported_format_is_accepted(
    db_url: str, tmp_path: Path, conn: Conn, storage_url: str
) -> None:
    tenant, form = await setup_form(conn, file_fields={"file": {"types": ALL_TYPES}})
    async with built_services(db_url, tmp_path, storage_url=storage_url) as services:
        for name, data, mime in SAMPLES:
            async with submit_client(services) as client:
                response = await client.post(
                    f"/s/{form}", files=_multipart("file", name, data), headers=JSON_ACCEPT
                )
            assert response.status_code == 201, (name, response.text)
            receipt = response.json()["receipt"]
            stored = await rows(
                conn,
                "SELECT a.id, a.content_type, a.size FROM attachments a"
                " JOIN submissions s ON s.id = a.submission_id WHERE s.id = %(receipt)s",
                receipt=receipt,
            )
            assert [(a["content_type"], a["size"]) for a in stored] == [(mime, len(data))], name
            async with api_client(services, tenant.key) as api:
                download = await api.get(f"/v1/submissions/{receipt}/attachments/{stored[0]['id']}")
            assert download.content == data, name
            assert download.headers["content-type"].split(";")[0] == mime, name


async def test_storage__put_read_delete(tmp_path: Path, storage_url: str) -> None:
    store = storage_for(storage_url)
    source = tmp_path / "source"
    source.write_bytes(b"z" * 200_000)
    await store.put("org_x/sub_y/att_z", source, content_type="text/plain")
    assert b"".join([chunk async for chunk in store.read("org_x/sub_y/att_z")]) == b"z" * 200_000
    await store.delete("org_x/sub_y/att_z")
    await store.delete("org_x/sub_y/att_z")  # deleting twice is fine
    with pytest.raises(NotFound):
        async for _chunk in store.read("org_x/sub_y/att_z"):
            pass


def _errors(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "invalid_attachment"
    return list(body["errors"])


@pytest.mark.parametrize(
    ("files", "rules", "expected"),
    [
        (
            [("cv", ("cv.pdf", elf(), "application/pdf"))],
            {"cv": {"types": [".pdf"]}},
            [{"field": "cv", "message": "cv.pdf: not a supported file type"}],
        ),
        (
            [("cv", ("cv.pdf", png(), "application/pdf"))],
            {"cv": {"types": [".pdf", ".png"]}},
            [{"field": "cv", "message": "cv.pdf: the content is image/png, not a .pdf file"}],
        ),
        (
            [("cv", ("cv.png", png(), "image/png"))],
            {"cv": {"types": [".pdf"]}},
            [{"field": "cv", "message": "cv.png: image/png is not allowed here"}],
        ),
        (
            [("cv", ("cv.pdf", b"", "application/pdf"))],
            {"cv": {"types": [".pdf"]}},
            [{"field": "cv", "message": "cv.pdf: the file is empty"}],
        ),
        (
            [("cv", ("cv.txt", b"a" * 2048, "text/plain"))],
            {"cv": {"types": [".txt"], "max_bytes": 1024}},
            [{"field": "cv", "message": "cv.txt: larger than 0.000976562 MiB"}],
        ),
        (
            [("cv", ("a.pdf", pdf(), "application/pdf")), ("cv", ("b.pdf", pdf(), "x/y"))],
            {"cv": {"types": [".pdf"]}},
            [{"field": "cv", "message": "at most 1 file(s)"}],
        ),
        (
            [("other", ("a.pdf", pdf(), "application/pdf"))],
            {"cv": {"types": [".pdf"], "required": True}},
            [
                {"field": "other", "message": "this field does not take files"},
                {"field": "cv", "message": "a file is required"},
            ],
        ),
    ],
    ids=["executable", "mismatched", "type", "empty", "size", "too-many", "field"],
)
async def test_attachments__refusals_are_422_per_field_and_store_nothing(
    db_url: str,
    tmp_path: Path,
    conn: Conn,
    files: list[tuple[str, tuple[str, bytes, str]]],
    rules: dict[str, Any],
    expected: list[dict[str, str]],
) -> None:
    _, form = await setup_form(conn, file_fields=rules)
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services) as client,
    ):
        response = await client.post(f"/s/{form}", files=files, headers=JSON_ACCEPT)
    assert _errors(response) == expected
    assert await rows(conn, "SELECT id FROM submissions") == []
    assert await rows(conn, "SELECT storage_key FROM stored_objects") == []


@pytest.mark.parametrize("types", [[".odt"], [".pdf"], []], ids=["odt", "pdf", "any"])
async def test_attachments__zip_bomb_is_refused_off_the_loop_while_health_answers(
    db_url: str, tmp_path: Path, conn: Conn, monkeypatch: pytest.MonkeyPatch, types: list[str]
) -> None:
    """The check runs in a worker thread: held there, `/health` still answers; released, the
    bomb is refused without inflating it and nothing is stored."""
    _, form = await setup_form(conn, file_fields={"doc": {"types": types}})
    loop_thread = threading.get_ident()
    held = threading.Event()
    release = threading.Event()
    checked_on: list[int] = []

    def gated_sniff(path: Path, name: str, wanted: frozenset[str]) -> str | None:
        checked_on.append(threading.get_ident())
        held.set()
        assert release.wait(timeout=30)  # on the loop thread this would freeze /health
        return sniff(path, name, wanted)

    monkeypatch.setattr(attachments, "sniff", gated_sniff)
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services) as client,
    ):
        upload = asyncio.create_task(
            client.post(
                f"/s/{form}",
                files=[("doc", ("doc.odt", zip_bomb(), "application/zip"))],
                headers=JSON_ACCEPT,
            )
        )
        await asyncio.to_thread(held.wait, 30)
        health = await client.get("/health")
        release.set()
        response = await upload
    assert health.status_code == 200
    assert checked_on and checked_on[0] != loop_thread
    assert _errors(response) == [{"field": "doc", "message": "doc.odt: not a supported file type"}]
    assert await rows(conn, "SELECT id FROM submissions") == []
    assert await rows(conn, "SELECT storage_key FROM stored_objects") == []


async def test_attachments__over_5_mib_and_submission_totals(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    rules = {f"f{n}": {"types": [".txt"]} for n in range(6)}
    _, form = await setup_form(conn, file_fields=rules)
    big = b"a" * (5 * 1024 * 1024 + 1)
    two_mib = b"b" * (2 * 1024 * 1024)
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services) as client,
    ):
        over = await client.post(
            f"/s/{form}", files=_multipart("f0", "big.txt", big), headers=JSON_ACCEPT
        )
        six = await client.post(
            f"/s/{form}",
            files=[(f"f{n}", (f"{n}.txt", b"x", "text/plain")) for n in range(6)],
            headers=JSON_ACCEPT,
        )
        total = await client.post(
            f"/s/{form}",
            files=[(f"f{n}", (f"{n}.txt", two_mib, "text/plain")) for n in range(5)]
            + [("f5", ("5.txt", b"c" * 1024, "text/plain"))],
            headers=JSON_ACCEPT,
        )
    assert _errors(over) == [{"field": "f0", "message": "big.txt: larger than 5 MiB"}]
    assert _errors(six) == [{"field": "_files", "message": "at most 5 files per submission"}]
    assert {"field": "_files", "message": "at most 10 MiB of files per submission"} in _errors(
        total
    )
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_attachments__empty_file_input_is_no_file(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".pdf"]}})
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services) as client,
    ):
        # What a browser sends for a file input left empty.
        body = (
            b'--B\r\nContent-Disposition: form-data; name="name"\r\n\r\nAda\r\n'
            b'--B\r\nContent-Disposition: form-data; name="cv"; filename=""\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n\r\n--B--\r\n"
        )
        response = await client.post(
            f"/s/{form}",
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=B", **JSON_ACCEPT},
        )
    assert response.status_code == 201
    assert await rows(conn, 'SELECT "values" FROM submissions') == [{"values": {"name": "Ada"}}]


def test_storage_for__file_urls(tmp_path: Path) -> None:
    store = storage_for(f"file://{tmp_path}/x")
    assert store is storage_for(f"file://{tmp_path}/x")


async def test_attachments__repeat_with_files_is_recognised_stores_nothing_even_after_closing(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".pdf"]}})
    headers = {**JSON_ACCEPT, "Idempotency-Key": "with-file"}
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services) as client,
    ):
        files = _multipart("cv", "cv.pdf", pdf())
        first = await client.post(f"/s/{form}", files=files, headers=headers)
        open_repeat = await client.post(f"/s/{form}", files=files, headers=headers)
        await conn.execute("UPDATE forms SET accepting = false WHERE id = %s", (form,))
        again = await client.post(f"/s/{form}", files=files, headers=headers)
        other = await client.post(
            f"/s/{form}", files=_multipart("cv", "cv.pdf", pdf() + b"\n"), headers=headers
        )
    assert first.status_code == 201
    assert again.status_code == 200 and again.json()["receipt"] == first.json()["receipt"]
    assert open_repeat.status_code == 200
    assert open_repeat.json()["receipt"] == first.json()["receipt"]
    assert other.status_code == 409
    assert len(await rows(conn, "SELECT id FROM attachments")) == 1
    # The repeats and the conflicting post wrote no file and counted no bytes.
    assert len(await rows(conn, "SELECT storage_key FROM stored_objects")) == 1
    assert await rows(conn, "SELECT attachment_bytes FROM usage_counters WHERE shard = 0") == [
        {"attachment_bytes": len(pdf())}
    ]


@pytest.mark.slow
def test_attachments__health_answers_promptly_while_a_bomb_is_checked(
    db_url: str, tmp_path: Path
) -> None:
    """Timing, against a real server: `/health` polled while a 1 MB bomb (1 GiB inflated) is
    uploaded and refused. The bound is loose for a loaded CI machine; the target is 200 ms."""
    _, form = tenant_with_form(db_url, file_fields={"doc": {"types": [".odt"]}})
    waits: list[float] = []
    done = threading.Event()
    with served(db_url, tmp_path, create_submit_app) as base:

        def poll() -> None:
            with httpx.Client(base_url=base, timeout=60) as health:
                while not done.is_set():
                    started = time.monotonic()
                    assert health.get("/health").status_code == 200
                    waits.append(time.monotonic() - started)

        poller = threading.Thread(target=poll)
        poller.start()
        with httpx.Client(base_url=base, timeout=60) as client:
            for _ in range(3):
                response = client.post(
                    f"/s/{form}",
                    files=[("doc", ("doc.odt", zip_bomb(), "application/zip"))],
                    headers=JSON_ACCEPT,
                )
                assert response.status_code == 422
        done.set()
        poller.join()
    assert len(waits) >= 3
    assert max(waits) < 1.0, max(waits)
