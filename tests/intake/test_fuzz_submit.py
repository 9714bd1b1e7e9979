"""Property: whatever bytes, JSON or multipart reach `POST /s/{form}` of a real server, the
answer is never a 5xx, and a refused request writes nothing (no submission, no stored
object, no file); an accepted one writes exactly one submission."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.http.submit_app import create_submit_app
from tests.support.fuzzing import served, tenant_with_form

EXAMPLES = 150
STORED = (200, 201, 303)
BOUNDARY = "fuzzBoundary7"
CONTENT_TYPES = [
    "application/x-www-form-urlencoded",
    "application/json",
    f"multipart/form-data; boundary={BOUNDARY}",
    "text/plain",
    None,
]

# Text as an attacker sends it: any code point, lone surrogates and NUL included.
_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
    | st.sampled_from(["\x00", "\ud800", "a\udfffb", "1e400"])
)
_JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=16,
)


@st.composite
def _json_bodies(draw: st.DrawFn) -> tuple[str | None, bytes]:
    value: Any = draw(st.dictionaries(_TEXT, _JSON_VALUES, max_size=6))
    if draw(st.booleans()):
        nested: Any = draw(_JSON_VALUES)
        for _ in range(draw(st.integers(0, 40))):
            nested = [nested]
        value["nested"] = nested
    if draw(st.integers(0, 9)) == 0:
        value = draw(_JSON_VALUES)  # not an object at all
    # ASCII escapes carry lone surrogates as `\\udxxx`, valid JSON syntax; 1e400 as text.
    text = json.dumps(value).replace('"1e400"', "1e400")
    return "application/json", text.encode()


# Bytes: mostly the UTF-8 of text (so some bodies parse), sometimes anything; part names
# are sometimes the form's file field, so files reach storage (or must not).
_BYTES = _TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=40)
_NAME = (st.just(b"cv") | _BYTES).filter(lambda b: not (set(b) & set(b'"\r\n')))


@st.composite
def _multipart_bodies(draw: st.DrawFn) -> tuple[str | None, bytes]:
    parts = []
    for name, value, filename in draw(
        st.lists(st.tuples(_NAME, _BYTES, st.none() | _NAME), max_size=5)
    ):
        disposition = b'Content-Disposition: form-data; name="' + name + b'"'
        if filename is not None:
            disposition += b'; filename="' + filename + b'"'
        parts.append(b"--" + BOUNDARY.encode() + b"\r\n" + disposition + b"\r\n\r\n" + value)
    body = b"\r\n".join(parts) + b"\r\n--" + BOUNDARY.encode() + b"--\r\n"
    return f"multipart/form-data; boundary={BOUNDARY}", body


@st.composite
def _urlencoded_bodies(draw: st.DrawFn) -> tuple[str | None, bytes]:
    pairs = draw(st.lists(st.tuples(_BYTES, _BYTES), max_size=8))
    body = b"&".join(_percent(name) + b"=" + _percent(value) for name, value in pairs)
    return "application/x-www-form-urlencoded", body


def _percent(raw: bytes) -> bytes:
    return b"".join(b"%%%02X" % byte for byte in raw)


_RAW = st.tuples(st.sampled_from(CONTENT_TYPES), st.binary(max_size=2048))
BODIES = _RAW | _json_bodies() | _multipart_bodies() | _urlencoded_bodies()


def _written(conn: psycopg.Connection[Any], files: Path) -> tuple[int, int, int]:
    submissions = conn.execute("SELECT count(*) FROM submissions").fetchone()
    objects = conn.execute("SELECT count(*) FROM stored_objects").fetchone()
    assert submissions is not None and objects is not None
    stored_files = sum(1 for p in files.rglob("*") if p.is_file()) if files.exists() else 0
    return int(submissions[0]), int(objects[0]), stored_files


@pytest.mark.slow
def test_fuzz_submit__no_5xx_and_no_partial_write(db_url: str, tmp_path: Path) -> None:
    _, form = tenant_with_form(db_url, rate_limit_max=100000, file_fields={"cv": {"types": []}})
    seen: dict[int, int] = {}
    with (
        served(db_url, tmp_path, create_submit_app) as base,
        httpx.Client(base_url=base, timeout=30) as client,
        psycopg.connect(db_url, autocommit=True) as conn,
    ):

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(request=BODIES)
        def post(request: tuple[str | None, bytes]) -> None:
            content_type, body = request
            headers = {"Accept": "application/json"}
            if content_type is not None:
                headers["Content-Type"] = content_type
            before = _written(conn, tmp_path / "files")
            response = client.post(f"/s/{form}", content=body, headers=headers)
            seen[response.status_code] = seen.get(response.status_code, 0) + 1
            assert response.status_code < 500, response.text
            after = _written(conn, tmp_path / "files")
            if response.status_code in STORED:
                assert after[0] in (before[0], before[0] + 1)  # 200: a repeat
            else:
                assert response.headers["content-type"] == "application/problem+json"
                assert "code" in response.json()
                assert after == before, (response.status_code, response.text)

        post()
        files = _written(conn, tmp_path / "files")[2]
    print(
        f"submit fuzzer: {sum(seen.values())} requests, statuses {sorted(seen.items())}, "
        f"{files} files stored"
    )
    assert sum(seen.values()) >= EXAMPLES
