"""What the vendor API types share (core/destinations/tables.py), and the Sheets header rules
on it, without a database."""

from __future__ import annotations

from core.destinations.google_sheets import header_for, row_cells
from core.destinations.tables import Row, match, number, rows, text, token_shaped


def test_rows__a_submission_in_the_visitors_order_with_files_as_names() -> None:
    payload = {
        "event": "form.submitted",
        "receipt": "sub_1",
        "submitted_at": "2026-12-04T10:00:00.000Z",
        "values": {"b": "2", "a": "1"},
        "attachments": {"cv": [{"name": "cv.pdf"}, {"name": "photo.png"}]},
        "labels": {"a": "First"},
    }
    [row] = rows(payload, {"field_order": ["a", "cv", "b"]})
    assert list(row.fields.items()) == [("a", "1"), ("cv", "cv.pdf, photo.png"), ("b", "2")]
    assert row.labels == {"a": "First"}
    assert list(row.columns()) == ["Submitted at", "Receipt", "a", "cv", "b"]


def test_rows__a_stream_event_is_one_row_of_its_data() -> None:
    payload = {
        "event": "stream.event",
        "receipt": "evt_1",
        "received_at": "2026-12-04T10:00:00.000Z",
        "data": {"plan": "pro"},
    }
    [row] = rows(payload, None)
    assert (row.receipt, row.fields) == ("evt_1", {"plan": "pro"})
    [scalar] = rows({**payload, "data": 42}, None)
    assert scalar.fields == {"data": 42}


def test_text_and_number__read_values_as_one_cell() -> None:
    assert [text(v) for v in (None, True, ["a", 1], {"k": [1]})] == ["", "Yes", "a, 1", '{"k":[1]}']
    assert [number(v) for v in ("3", " 2.5 ", 7, "1e3", "three", True, "nan")] == [
        3,
        2.5,
        7,
        1000.0,
        None,
        None,
        None,
    ]


def test_match__by_name_then_label_whatever_the_case() -> None:
    columns = {"email address": "Email Address", "name": "Name"}
    assert match(columns, "NAME", {}) == "Name"
    assert match(columns, "email", {"email": "Email  address"}) == "Email Address"
    assert match(columns, "phone", {}) is None


def test_token_shaped__its_prefix_its_bounds_and_printable_ascii_only() -> None:
    assert token_shaped("pat" + "a" * 17, prefixes=("pat",))
    assert token_shaped("pat" + "a" * 197, prefixes=("pat",))
    assert not token_shaped("pat" + "a" * 16, prefixes=("pat",))
    assert not token_shaped("pat" + "a" * 198, prefixes=("pat",))
    assert not token_shaped("key" + "a" * 17, prefixes=("pat",))
    assert token_shaped("1//0x-_.~!", lengths=(1, 512))
    for char in ("\x00", "\n", "\t", " ", "\x7f", "é", "\u2028"):
        assert not token_shaped("a" * 10 + char + "a" * 10)
    assert not token_shaped(None) and not token_shaped(["a" * 20])


def test_sheets_header__grows_at_the_end_and_keeps_what_the_owner_renamed() -> None:
    row = Row("sub_2", "t", {"email": "a@example.com", "seats": 3}, {"email": "Email"})
    # The owner renamed `email` to its label and added a column of their own.
    header = ["Submitted at", "Receipt", "name", "Email", "Notes"]
    grown = header_for(header, [row])
    assert grown == [*header, "seats"]
    assert row_cells(grown, row) == ["t", "sub_2", "", "a@example.com", "", 3]
