"""Real sample bytes of each accepted file type, and whether a store holds an upload."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png() -> bytes:
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


def jpeg() -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    return b"\xff\xd8" + app0 + b"\xff\xdb\x00\x43\x00" + bytes(range(64)) + b"\xff\xd9"


def gif() -> bytes:
    return (
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
        b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )


def webp() -> bytes:
    vp8l = b"\x2f\x00\x00\x00\x00\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
    chunk = b"VP8L" + struct.pack("<I", len(vp8l)) + vp8l
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def avif() -> bytes:
    ftyp = b"ftypavif" + b"\x00\x00\x00\x00" + b"avifmif1miaf"
    return struct.pack(">I", 4 + len(ftyp)) + ftyp + b"\x00\x00\x00\x08mdat"


def pdf() -> bytes:
    return (
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    )


def office(part: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships/>')
        archive.writestr(f"{part}/document.xml", '<?xml version="1.0"?><doc/>')
    return buffer.getvalue()


def opendocument(mime: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", mime, compress_type=zipfile.ZIP_STORED)
        archive.writestr("content.xml", '<?xml version="1.0"?><office:document-content/>')
        archive.writestr("META-INF/manifest.xml", '<?xml version="1.0"?><manifest/>')
    return buffer.getvalue()


def zip_bomb(member: str = "mimetype", inflated_mib: int = 1024) -> bytes:
    """A ZIP of about `inflated_mib` KB whose one deflated member inflates to `inflated_mib`
    MiB of zeros, its true sizes declared in its headers (built without inflating it: each
    MiB after a full flush compresses to the same bytes)."""
    block = b"\x00" * (1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    steady = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    data = first + steady * (inflated_mib - 2) + compressor.compress(block) + compressor.flush()
    crc = 0
    for _ in range(inflated_mib):
        crc = zlib.crc32(block, crc)
    name = member.encode()
    size = inflated_mib << 20
    local = struct.pack(
        "<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(data), size, len(name), 0
    )
    central = struct.pack(
        "<4s6H3L5H2L",
        b"PK\x01\x02",
        20,
        20,
        0,
        8,
        0,
        0x21,
        crc,
        len(data),
        size,
        len(name),
        0,
        0,
        0,
        0,
        0,
        0,
    )
    directory = central + name
    offset = len(local) + len(name) + len(data)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(directory), offset, 0)
    return local + name + data + directory + end


def elf() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00" + b"\x00" * 100


SAMPLES: list[tuple[str, bytes, str]] = [
    ("pic.png", png(), "image/png"),
    ("pic.jpg", jpeg(), "image/jpeg"),
    ("pic.gif", gif(), "image/gif"),
    ("pic.webp", webp(), "image/webp"),
    ("pic.avif", avif(), "image/avif"),
    ("doc.pdf", pdf(), "application/pdf"),
    (
        "doc.docx",
        office("word"),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    (
        "sheet.xlsx",
        office("xl"),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    (
        "slides.pptx",
        office("ppt"),
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    (
        "doc.odt",
        opendocument("application/vnd.oasis.opendocument.text"),
        "application/vnd.oasis.opendocument.text",
    ),
    (
        "sheet.ods",
        opendocument("application/vnd.oasis.opendocument.spreadsheet"),
        "application/vnd.oasis.opendocument.spreadsheet",
    ),
    (
        "slides.odp",
        opendocument("application/vnd.oasis.opendocument.presentation"),
        "application/vnd.oasis.opendocument.presentation",
    ),
    ("doc.rtf", b"{\\rtf1\\ansi\\deff0 Hello \\b world\\b0.}", "application/rtf"),
    ("notes.txt", "Grüße, hello\n".encode(), "text/plain"),
    ("data.csv", b"name,email\nAda,ada@example.com\n", "text/csv"),
]

ALL_TYPES = [name[name.rindex(".") :] for name, _data, _mime in SAMPLES]


def object_exists(storage_url: str, key: str) -> bool:
    """Whether the store at `storage_url` holds an object under `key`."""
    if storage_url.startswith("file://"):
        return (Path(storage_url.removeprefix("file://")) / key).exists()
    import boto3

    bucket, prefix = storage_url.removeprefix("s3://").split("/", 1)
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{key}")
    return int(listed.get("KeyCount", 0)) > 0
