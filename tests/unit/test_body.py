from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.intake.body import parse_body
from core.platform.errors import MalformedBody, PayloadTooLarge, UnsupportedMediaType


async def _stream(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_parse_body__urlencoded_repeated_names_become_lists() -> None:
    body = await parse_body(
        "application/x-www-form-urlencoded",
        None,
        _stream(b"a=1&b=x+y&a=2&c=&name=Zo%C3%AB&raw=Zo\xc3\xab&a=3"),
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
        "multipart/form-data; boundary=B", None, _stream(*(bytes([b]) for b in raw))
    )
    try:
        assert body.fields == {"a": ["1", "2"]}
        [upload] = body.files
        assert (upload.field, upload.name, upload.size) == ("f", "n.txt", 5)
        assert upload.path.read_bytes() == b"hello"
        assert upload.declared_type == "text/plain"
    finally:
        body.cleanup()
    assert not upload.path.exists()


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
        await parse_body(content_type, None, _stream(raw))
