"""The client commands' tables and cells (local/client/output.py), without a server."""

from __future__ import annotations

from local.client.output import cell, details, table


def test_cell__says_none_empty_flags_lists_and_structures_briefly() -> None:
    assert [cell(None), cell([]), cell({}), cell(True), cell(False)] == ["-", "-", "-", "yes", "no"]
    assert (
        cell(["https://a.example", "https://b.example"]) == "https://a.example, https://b.example"
    )
    assert cell({"url": "https://h.example"}) == '{"url":"https://h.example"}'
    assert cell("two\nlines") == "two lines"
    long = cell("x" * 100)
    assert len(long) == 60 and long.endswith("…")


def test_table__pads_columns_to_their_widest_cell_under_upper_case_headings() -> None:
    rows = [{"id": "frm_1", "name": "Contact"}, {"id": "frm_22", "name": None}]
    assert table(rows, ["id", "name"]).splitlines() == [
        "ID      NAME",
        "frm_1   Contact",
        "frm_22  -",
    ]
    assert details({"id": "frm_1", "accepting": True}, ["id", "accepting"]).splitlines() == [
        "id         frm_1",
        "accepting  yes",
    ]
