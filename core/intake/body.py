"""Reading a submit body: urlencoded, multipart (with files) or a JSON object.

Limits are enforced while the stream is read, so a client can never make the server
buffer more than a limit: the non-file part of a body is at most 256 KB, a multipart
body at most 10 MiB + 256 KB. What was read must then be storable as it is
(`core.platform.values`): no NUL or lone surrogate in a name or value, finite numbers, at
most 32 levels, 200 fields and names of 256 characters; otherwise nothing is kept.
Each uploaded file is spooled to its own temporary file as it arrives (never more than a
chunk of it in memory); a file over the per-file maximum stops being written and is only
counted, so it can be refused with a field error. Only a form's file fields are spooled: a
file in any other field is only counted and named in `ParsedBody.unwanted` (refused with
"this field does not take files"), so a form without file fields never writes a byte to
disk (a browser's empty file input, no name and no bytes, is dropped). All the bodies of one
process hold at most `POSTBAG_UPLOAD_SPOOL_MB` (default 256) of spooled files at once;
a chunk past that is refused `503 unavailable` (`Retry-After`), nothing kept.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl

from python_multipart.multipart import MultipartParser, parse_options_header

from core.platform.errors import (
    MalformedBody,
    PayloadTooLarge,
    Unavailable,
    UnsupportedMediaType,
)
from core.platform.values import check_field_count, check_storable, load_json

MAX_FIELDS_BYTES = 256 * 1024
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_FILES_BYTES = 10 * 1024 * 1024
MAX_BODY_BYTES = MAX_FILES_BYTES + MAX_FIELDS_BYTES
MAX_FILE_PARTS = 20  # beyond the 5 a submission may hold, reading stops

URLENCODED = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
JSON = "application/json"


class SpoolBudget:
    """The bytes of uploads spooled to disk in this process at once."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, size: int, limit: int) -> None:
        """Count `size` more bytes, or refuse them (Unavailable) past `limit`."""
        if self.used + size > limit:
            raise Unavailable("too many uploads at once; try again shortly")
        self.used += size

    def give_back(self, size: int) -> None:
        self.used -= size


SPOOLED = SpoolBudget()


@dataclass(slots=True)
class UploadedFile:
    """One file part, spooled to disk; `truncated` when it was over MAX_FILE_BYTES."""

    field: str
    name: str
    declared_type: str | None
    path: Path
    size: int = 0
    sha256: bytes = b""
    truncated: bool = False


@dataclass(slots=True)
class ParsedBody:
    """The fields of a body (repeated names as lists), its spooled files, and the fields
    that sent a file without taking files (`unwanted`, nothing of it kept)."""

    fields: dict[str, Any]
    files: list[UploadedFile] = field(default_factory=list)
    unwanted: list[str] = field(default_factory=list)
    is_json: bool = False
    spool: Path | None = None
    spooled: int = 0

    def cleanup(self) -> None:
        """Remove the spooled files (and give their bytes back to the process's budget)."""
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)
            self.spool = None
        SPOOLED.give_back(self.spooled)
        self.spooled = 0


def _add(fields: dict[str, Any], name: str, value: Any) -> None:
    if name not in fields:
        fields[name] = value
    elif isinstance(fields[name], list):
        fields[name].append(value)
    else:
        fields[name] = [fields[name], value]


async def _read_capped(stream: AsyncIterator[bytes], limit: int) -> bytes:
    buffer = bytearray()
    async for chunk in stream:
        buffer += chunk
        if len(buffer) > limit:
            raise PayloadTooLarge(f"the body is over {limit // 1024} KB")
    return bytes(buffer)


def media_type(content_type: str | None) -> tuple[str, dict[bytes, bytes]]:
    """The lower-case media type of a Content-Type header, and its parameters."""
    kind, params = parse_options_header(content_type or "")
    return kind.decode("latin-1").strip().lower(), params


async def parse_body(
    content_type: str | None,
    content_length: str | None,
    stream: AsyncIterator[bytes],
    *,
    file_fields: Collection[str],
    spool_limit: int,
) -> ParsedBody:
    """Parse a submit body, spooling only files of `file_fields` (at most `spool_limit`
    bytes spooled in the process at once); raises UnsupportedMediaType, PayloadTooLarge,
    MalformedBody, InvalidAttachment or Unavailable."""
    kind, params = media_type(content_type)
    if kind not in (URLENCODED, MULTIPART, JSON):
        raise UnsupportedMediaType(
            "send application/x-www-form-urlencoded, multipart/form-data or application/json"
        )
    limit = MAX_BODY_BYTES if kind == MULTIPART else MAX_FIELDS_BYTES
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise MalformedBody("invalid Content-Length") from None
        if declared > limit:
            raise PayloadTooLarge(f"the body is over {limit // 1024} KB")
    if kind == JSON:
        body = _parse_json(await _read_capped(stream, limit))
    elif kind == URLENCODED:
        body = _parse_urlencoded(await _read_capped(stream, limit))
    else:
        boundary = params.get(b"boundary")
        if not boundary:
            raise MalformedBody("multipart body without a boundary")
        body = await _MultipartReader(boundary, file_fields, spool_limit).read(stream)
    try:
        _check_storable(body)
    except BaseException:
        body.cleanup()
        raise
    return body


def _check_storable(body: ParsedBody) -> None:
    check_field_count(body.fields)
    if not body.is_json:  # a JSON body was checked as it was parsed
        check_storable(body.fields)
    check_storable([{f.field: f.name} for f in body.files])


def _parse_json(raw: bytes) -> ParsedBody:
    value = load_json(raw)
    if not isinstance(value, dict):
        raise MalformedBody("the JSON body must be an object")
    return ParsedBody(fields=value, is_json=True)


def _parse_urlencoded(raw: bytes) -> ParsedBody:
    try:
        text = raw.decode("utf-8")  # browsers percent-encode; curl may send raw UTF-8
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise MalformedBody("the body is not valid urlencoded UTF-8") from None
    fields: dict[str, Any] = {}
    for name, value in pairs:
        _add(fields, name, value)
    return ParsedBody(fields=fields)


class _MultipartReader:
    """python-multipart callbacks that keep fields in memory and spool files to disk."""

    def __init__(self, boundary: bytes, file_fields: Collection[str], spool_limit: int) -> None:
        self.boundary = boundary
        self.file_fields = file_fields
        self.spool_limit = spool_limit
        self.fields: dict[str, Any] = {}
        self.files: list[UploadedFile] = []
        self.unwanted: list[str] = []
        self.spool: Path | None = None
        self.spooled = 0
        self.fields_bytes = 0
        self.body_bytes = 0
        self.error: Exception | None = None
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[str, bytes] = {}
        self._name: str | None = None
        self._file: UploadedFile | None = None
        self._handle: BinaryIO | None = None
        self._digest: Any = None
        self._value = bytearray()
        self._ended = False
        # A file part in a field that takes no files, and whether it had a name or bytes.
        self._unwanted = False
        self._unwanted_seen = False

    async def read(self, stream: AsyncIterator[bytes]) -> ParsedBody:
        parser = MultipartParser(
            self.boundary,
            {
                "on_part_begin": self._on_part_begin,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
                "on_end": self._on_end,
            },
        )
        body = ParsedBody(fields=self.fields, files=self.files, unwanted=self.unwanted)
        try:
            async for chunk in stream:
                self.body_bytes += len(chunk)
                if self.body_bytes > MAX_BODY_BYTES:
                    raise PayloadTooLarge("the multipart body is over 10 MiB + 256 KB")
                try:
                    parser.write(chunk)
                except Exception as exc:
                    if self.error is None:
                        raise MalformedBody("the multipart body is malformed") from exc
                if self.error is not None:
                    raise self.error
            try:
                parser.finalize()
            except Exception as exc:
                raise MalformedBody("the multipart body is malformed") from exc
            if not self._ended:
                raise MalformedBody("the multipart body ends before its closing boundary")
        except BaseException:
            self._close_file()
            body.spool, body.spooled = self.spool, self.spooled
            body.cleanup()
            raise
        body.spool, body.spooled = self.spool, self.spooled
        return body

    def _on_end(self) -> None:
        self._ended = True

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        raise error

    def _on_part_begin(self) -> None:
        self._headers = {}
        self._name = None
        self._file = None
        self._unwanted = False
        self._value = bytearray()

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _on_header_end(self) -> None:
        self._headers[bytes(self._header_field).decode("latin-1").lower()] = bytes(
            self._header_value
        )
        self._header_field = bytearray()
        self._header_value = bytearray()

    def _on_headers_finished(self) -> None:
        disposition, options = parse_options_header(self._headers.get("content-disposition"))
        if disposition.lower() != b"form-data" or b"name" not in options:
            self._fail(MalformedBody("a multipart part has no form-data name"))
        try:
            name = options[b"name"].decode("utf-8")
            filename = options[b"filename"].decode("utf-8") if b"filename" in options else None
        except UnicodeDecodeError:
            self._fail(MalformedBody("a multipart part name is not UTF-8"))
            return
        self._name = name
        self.fields_bytes += len(name.encode())
        if filename is None:
            return
        if len(self.files) + len(self.unwanted) >= MAX_FILE_PARTS:
            self._fail(PayloadTooLarge(f"more than {MAX_FILE_PARTS} files"))
        if name not in self.file_fields:
            # Counted, never kept; named at its end unless it is an empty file input.
            self._unwanted = True
            self._unwanted_seen = filename != ""
            return
        if self.spool is None:
            self.spool = Path(tempfile.mkdtemp(prefix="postbag-upload-"))
        declared = self._headers.get("content-type")
        self._file = UploadedFile(
            field=name,
            name=filename.replace("\\", "/").rsplit("/", 1)[-1][:255],
            declared_type=declared.decode("latin-1").strip() if declared else None,
            path=self.spool / str(len(self.files)),
        )
        self._handle = self._file.path.open("wb")
        self._digest = hashlib.sha256()

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self._unwanted:
            self._unwanted_seen = self._unwanted_seen or bool(chunk)
            return
        if self._file is None:
            self.fields_bytes += len(chunk)
            if self.fields_bytes > MAX_FIELDS_BYTES:
                self._fail(PayloadTooLarge("the non-file fields are over 256 KB"))
            self._value += chunk
            return
        self._file.size += len(chunk)
        if self._file.size > MAX_FILE_BYTES:
            # Keep counting, stop keeping: the file is refused by size anyway.
            self._file.truncated = True
            self._close_file()
            return
        assert self._handle is not None
        try:
            SPOOLED.take(len(chunk), self.spool_limit)
        except Unavailable as exc:
            self._fail(exc)
        self.spooled += len(chunk)
        self._handle.write(chunk)
        self._digest.update(chunk)

    def _close_file(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _on_part_end(self) -> None:
        if self._name is None:
            self._fail(MalformedBody("a multipart part has no name"))
            return
        if self._unwanted:
            if self._unwanted_seen:
                self.unwanted.append(self._name)
            self._name = None
            return
        if self._file is not None:
            self._close_file()
            self._file.sha256 = self._digest.digest()
            # An empty file input with no file chosen: the browser sends filename="".
            if not (self._file.name == "" and self._file.size == 0):
                self.files.append(self._file)
            else:
                self._file.path.unlink(missing_ok=True)
        else:
            try:
                value = self._value.decode("utf-8")
            except UnicodeDecodeError:
                self._fail(MalformedBody(f"field {self._name!r} is not UTF-8"))
                return
            _add(self.fields, self._name, value)
        self._name = None
        self._file = None
