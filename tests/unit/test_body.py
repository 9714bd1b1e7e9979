from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.intake.body import SPOOLED, parse_body
from core.platform.errors import (
    MalformedBody,
    PayloadTooLarge,
    Unavailable,
    UnsupportedMediaType,
)

SPOOL_LIMIT = 1024 * 1024


async def _stream(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_parse_body__urlencoded_repeated_names_become_lists() -> None:
    body = await parse_body(
        "application/x-www-form-urlencoded",
        None,
        _stream(b"a=1&b=x+y&a=2&c=&name=Zo%C3%AB&raw=Zo\xc3\xab&a=3"),
        file_fields=(),
        spool_limit=SPOOL_LIMIT,
    )
    assert body.fields == {
        "a": ["1", "2", "3"],
        "b": "x y",
        "c": "",
        "name": "Zoë",
        "raw": "Zoë",
    }
    assert not body.is_json and body.files == []


async def test_parse_body__json_values_stay_json() -> None:
    body = await parse_body(
        "application/json; charset=utf-8",
        None,
        _stream(b'{"n": 1.5, "ok": true, "tags": ["a"], "nested": {"x": null}}'),
        file_fields=(),
        spool_limit=SPOOL_LIMIT,
    )
    assert body.fields == {"n": 1.5, "ok": True, "tags": ["a"], "nested": {"x": None}}
    assert body.is_json


async def test_parse_body__multipart_fields_and_a_spooled_file() -> None:
    raw = (
        b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n'
        b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n2\r\n'
        b'--B\r\nContent-Disposition: form-data; name="f"; filename="C:\\\\dir\\\\n.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nhello\r\n--B--\r\n"
    )
    # Delivered one byte at a time: the parser keeps state across chunks.
    body = await parse_body(
        "multipart/form-data; boundary=B",
        None,
        _stream(*(bytes([b]) for b in raw)),
        file_fields=("f",),
        spool_limit=SPOOL_LIMIT,
    )
    try:
        assert body.fields == {"a": ["1", "2"]}
        [upload] = body.files
        assert (upload.field, upload.name, upload.size) == ("f", "n.txt", 5)
        assert upload.path.read_bytes() == b"hello"
        assert upload.declared_type == "text/plain"
        assert SPOOLED.used == 5
    finally:
        body.cleanup()
    assert not upload.path.exists()
    assert SPOOLED.used == 0


def _multipart(*parts: tuple[str, str | None, bytes]) -> bytes:
    raw = b""
    for name, filename, data in parts:
        named = f'name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        raw += f"--B\r\nContent-Disposition: form-data; {named}\r\n\r\n".encode()
        raw += data + b"\r\n"
    return raw + b"--B--\r\n"


async def test_parse_body__a_file_outside_the_file_fields_is_named_never_spooled() -> None:
    raw = _multipart(("a", None, b"1"), ("f", "n.txt", b"x" * 100_000), ("g", "", b"y"))
    body = await parse_body(
        "multipart/form-data; boundary=B",
        None,
        _stream(raw),
        file_fields=("other",),
        spool_limit=SPOOL_LIMIT,
    )
    assert (body.fields, body.files, body.unwanted) == ({"a": "1"}, [], ["f", "g"])
    assert body.spool is None and SPOOLED.used == 0


async def test_parse_body__an_empty_file_input_outside_the_file_fields_is_dropped() -> None:
    raw = _multipart(("a", None, b"1"), ("f", "", b""))
    body = await parse_body(
        "multipart/form-data; boundary=B", None, _stream(raw), file_fields=(), spool_limit=1
    )
    assert (body.fields, body.files, body.unwanted, body.spool) == ({"a": "1"}, [], [], None)


async def test_parse_body__past_the_process_spool_budget_an_upload_is_unavailable() -> None:
    held = await parse_body(
        "multipart/form-data; boundary=B",
        None,
        _stream(_multipart(("f", "a.txt", b"x" * 600))),
        file_fields=("f",),
        spool_limit=1000,
    )
    try:
        with pytest.raises(Unavailable):
            await parse_body(
                "multipart/form-data; boundary=B",
                None,
                _stream(_multipart(("f", "b.txt", b"y" * 600))),
                file_fields=("f",),
                spool_limit=1000,
            )
        assert SPOOLED.used == 600
    finally:
        held.cleanup()
    assert SPOOLED.used == 0


@pytest.mark.parametrize(
    ("content_type", "raw", "error"),
    [
        ("text/csv", b"a,b", UnsupportedMediaType),
        ("application/json", b'"just a string"', MalformedBody),
        ("application/json", b"\xff", MalformedBody),
        ("multipart/form-data; boundary=B", b"--B\r\nX: y\r\n\r\nv\r\n--B--\r\n", MalformedBody),
        ("application/json", b'{"a": "' + b"x" * 300_000 + b'"}', PayloadTooLarge),
    ],
)
async def test_parse_body__refusals(content_type: str, raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        await parse_body(content_type, None, _stream(raw), file_fields=(), spool_limit=SPOOL_LIMIT)
