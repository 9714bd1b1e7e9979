"""Attachment rules: what a file is (from its bytes), and whether a form's field takes it.

Detection never trusts the name or the browser's type: ZIP containers are opened and
recognised by their content (`[Content_Types].xml` + `word/`, `xl/`, `ppt/` for Office,
the `mimetype` entry for OpenDocument); images, PDF and RTF by their signature (puremagic);
TXT and CSV are valid UTF-8 without NUL bytes (which of the two is taken from the name,
since the bytes cannot tell them apart).

Checking a file costs bounded memory and time whatever it holds: a ZIP is only opened
when the field takes an Office or OpenDocument type; its end record and central directory
are read first and an archive with more than `MAX_ZIP_ENTRIES` entries, a member declaring
more than `MAX_ZIP_MEMBER_BYTES` or a ratio over `MAX_ZIP_RATIO` is refused before anything
is decompressed; of a member only `mimetype`'s first `_MIMETYPE_BYTES` bytes are ever
inflated. `check_files` runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import anyio.to_thread
import puremagic

from core.intake.body import MAX_FILE_BYTES, MAX_FILES_BYTES, UploadedFile
from core.platform.errors import InvalidAttachment

MAX_FILES = 5
MAX_ZIP_ENTRIES = 5000  # a large workbook has hundreds
MAX_ZIP_MEMBER_BYTES = 64 * 1024 * 1024  # declared, uncompressed
MAX_ZIP_RATIO = 200  # declared uncompressed size over compressed size, per member
_MIMETYPE_BYTES = 100
_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22


@dataclass(frozen=True, slots=True)
class Format:
    """A supported file format: its MIME type and the extensions it may be named with."""

    mime: str
    extensions: tuple[str, ...]


_FORMATS: dict[str, Format] = {
    f.mime: f
    for f in (
        Format("image/png", (".png",)),
        Format("image/jpeg", (".jpg", ".jpeg", ".jpe", ".jfif")),
        Format("image/webp", (".webp",)),
        Format("image/avif", (".avif",)),
        Format("image/gif", (".gif",)),
        Format("application/pdf", (".pdf",)),
        Format(
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document", (".docx",)
        ),
        Format("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", (".xlsx",)),
        Format(
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            (".pptx",),
        ),
        Format("application/vnd.oasis.opendocument.text", (".odt",)),
        Format("application/vnd.oasis.opendocument.spreadsheet", (".ods",)),
        Format("application/vnd.oasis.opendocument.presentation", (".odp",)),
        Format("application/rtf", (".rtf",)),
        Format("text/plain", (".txt", ".text")),
        Format("text/csv", (".csv",)),
    )
}
SUPPORTED_EXTENSIONS = frozenset(ext for f in _FORMATS.values() for ext in f.extensions)
SUPPORTED_MIME_TYPES = frozenset(_FORMATS)

_OFFICE_PARTS = {
    "word/": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xl/": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "ppt/": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
_OPENDOCUMENT = {
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.presentation",
}
_SIGNATURE_TYPES = {"image/png", "image/jpeg", "image/webp", "image/avif", "image/gif"} | {
    "application/pdf",
    "application/rtf",
}


def _extension(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


_ZIP_TYPES = frozenset(_OFFICE_PARTS.values()) | _OPENDOCUMENT
_TEXT_TYPES = frozenset({"text/plain", "text/csv"})


def _zip_entries(path: Path) -> int | None:
    """The entry count of the archive's end record (None: no end record, or ZIP64)."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        tail_size = min(size, _EOCD_SIZE + 65535)  # the record, then a comment of <= 64 KiB
        handle.seek(size - tail_size)
        tail = handle.read(tail_size)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < _EOCD_SIZE:
        return None
    (entries,) = struct.unpack_from("<H", tail, at + 10)
    return None if entries == 0xFFFF else int(entries)


def _plausible(info: zipfile.ZipInfo) -> bool:
    if info.file_size > MAX_ZIP_MEMBER_BYTES:
        return False
    return info.file_size <= max(info.compress_size, 1) * MAX_ZIP_RATIO


def _sniff_zip(path: Path, wanted: frozenset[str]) -> str | None:
    entries = _zip_entries(path)
    if entries is None or entries > MAX_ZIP_ENTRIES:
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_ENTRIES or not all(_plausible(m) for m in members):
                return None
            names = {m.filename: m for m in members}
            mimetype = names.get("mimetype")
            if mimetype is not None:
                if not wanted & _OPENDOCUMENT:
                    return None
                with archive.open(mimetype) as member:
                    head = member.read(_MIMETYPE_BYTES)
                declared = head.decode("ascii", "replace").strip()
                return declared if declared in _OPENDOCUMENT else None
            if "[Content_Types].xml" in names:
                for prefix, mime in _OFFICE_PARTS.items():
                    if any(name.startswith(prefix) for name in names):
                        return mime
    except (zipfile.BadZipFile, NotImplementedError, OSError, ValueError, EOFError, RuntimeError):
        return None  # damaged, encrypted or an unsupported compression: not a document we take
    return None


def _is_text(path: Path) -> bool:
    data = path.read_bytes()  # at most MAX_FILE_BYTES: larger files are refused before
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def sniff(path: Path, name: str, wanted: frozenset[str] = SUPPORTED_MIME_TYPES) -> str | None:
    """The supported MIME type of the file's bytes, or None when it is not one we take.

    Signatures (a few KB of the head) are always read; a ZIP is only opened, and a text
    file only read whole, when `wanted` (the field's allowed types) holds such a type.
    """
    with path.open("rb") as handle:
        head = handle.read(4096)
    if head.startswith(b"PK\x03\x04"):
        return _sniff_zip(path, wanted) if wanted & _ZIP_TYPES else None
    try:
        matches = puremagic.magic_string(head)
    except (puremagic.PureError, ValueError):
        matches = []
    for match in matches:
        if match.mime_type in _SIGNATURE_TYPES:
            return str(match.mime_type)
    if wanted & _TEXT_TYPES and _is_text(path):
        return "text/csv" if _extension(name) == ".csv" else "text/plain"
    return None


@dataclass(frozen=True, slots=True)
class FieldRule:
    """One file field of a form (`forms.file_fields`)."""

    types: tuple[str, ...]
    max_files: int = 1
    max_bytes: int = MAX_FILE_BYTES
    required: bool = False

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> FieldRule:
        return cls(
            types=tuple(str(t).lower() for t in raw.get("types") or ()),
            max_files=max(1, min(MAX_FILES, int(raw.get("max_files") or 1))),
            max_bytes=max(1, min(MAX_FILE_BYTES, int(raw.get("max_bytes") or MAX_FILE_BYTES))),
            required=bool(raw.get("required", False)),
        )

    def wanted(self) -> frozenset[str]:
        """The MIME types the field takes (every supported type when `types` is empty)."""
        return frozenset(m for m in SUPPORTED_MIME_TYPES if self.allows(m))

    def allows(self, mime: str) -> bool:
        """Whether the field's `types` (extensions or exact MIME types) cover `mime`."""
        if not self.types:
            return True
        return any(t == mime or t in _FORMATS[mime].extensions for t in self.types)


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """An uploaded file that passed its field's rules, with its sniffed type."""

    upload: UploadedFile
    content_type: str


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


async def check_files(
    files: list[UploadedFile],
    file_fields: Mapping[str, Mapping[str, Any]],
    unwanted: Sequence[str] = (),
) -> list[CheckedFile]:
    """`check_files_now` in a worker thread: sniffing must not hold up the event loop."""
    if not files:
        # Only "a file is required" and the unwanted files to tell.
        return check_files_now(files, file_fields, unwanted)
    return await anyio.to_thread.run_sync(check_files_now, files, file_fields, unwanted)


def check_files_now(
    files: list[UploadedFile],
    file_fields: Mapping[str, Mapping[str, Any]],
    unwanted: Sequence[str] = (),
) -> list[CheckedFile]:
    """Apply the form's per-field rules to the files of its file fields, and refuse the
    files sent to other fields (`unwanted`, never spooled); every problem becomes one field
    error (422)."""
    rules = {name: FieldRule.from_json(raw) for name, raw in file_fields.items()}
    errors: list[dict[str, str]] = []
    checked: list[CheckedFile] = []
    per_field: dict[str, int] = {}

    def fail(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    for name in unwanted:
        fail(name, "this field does not take files")
    for upload in files:
        rule = rules[upload.field]
        per_field[upload.field] = per_field.get(upload.field, 0) + 1
        if per_field[upload.field] == rule.max_files + 1:
            fail(upload.field, f"at most {rule.max_files} file(s)")
        if per_field[upload.field] > rule.max_files:
            continue
        if upload.size == 0:
            fail(upload.field, f"{upload.name}: the file is empty")
            continue
        if upload.truncated or upload.size > rule.max_bytes:
            fail(upload.field, f"{upload.name}: larger than {_mb(rule.max_bytes)}")
            continue
        mime = sniff(upload.path, upload.name, rule.wanted())
        if mime is None:
            fail(upload.field, f"{upload.name}: not a supported file type")
            continue
        extension = _extension(upload.name)
        if extension and extension not in _FORMATS[mime].extensions:
            fail(upload.field, f"{upload.name}: the content is {mime}, not a {extension} file")
            continue
        if not rule.allows(mime):
            fail(upload.field, f"{upload.name}: {mime} is not allowed here")
            continue
        checked.append(CheckedFile(upload=upload, content_type=mime))
    for name, rule in rules.items():
        if rule.required and per_field.get(name, 0) == 0:
            fail(name, "a file is required")
    if len(files) + len(unwanted) > MAX_FILES:
        fail("_files", f"at most {MAX_FILES} files per submission")
    if sum(f.size for f in files) > MAX_FILES_BYTES:
        fail("_files", f"at most {_mb(MAX_FILES_BYTES)} of files per submission")
    if errors:
        raise InvalidAttachment("some files were refused", errors)
    return checked
