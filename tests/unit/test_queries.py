"""Numbering a statement's named placeholders for psycopg's raw cursor."""

from __future__ import annotations

import pytest

from core.platform.queries import number, queries, without


def test_number__first_use_order_a_repeated_name_is_one_parameter_and_percent_signs() -> None:
    numbered = number(
        "SELECT %(b)s, %(a)s WHERE x > %(b)s AND type LIKE 'submission.%%' AND y = %(c)s"
    )
    assert numbered.text == "SELECT $1, $2 WHERE x > $1 AND type LIKE 'submission.%' AND y = $3"
    assert numbered.names == ("b", "a", "c")
    assert numbered.values({"a": 1, "b": 2, "c": 3, "unused": 4}) == [2, 1, 3]


def test_number__a_missing_parameter_is_named() -> None:
    with pytest.raises(KeyError, match="limit"):
        number("SELECT %(limit)s").values({})


@pytest.mark.parametrize("name", ["insert_submission", "claim_due"])
def test_number__the_long_statements_keep_no_named_placeholder(name: str) -> None:
    numbered = number(queries[name])
    assert "%(" not in numbered.text
    assert len(numbered.names) == len(set(numbered.names))


def test_without__leaves_out_the_parts_named_and_keeps_the_others_unmarked() -> None:
    text = "SELECT 1\n-- if a\n, 2\n-- end a\n-- if b\n, 3\n-- end b\n-- if a\n, 4\n-- end a\n"
    assert without(text, frozenset({"a"})) == "SELECT 1\n, 3\n"
    assert without(text, frozenset()) == "SELECT 1\n, 2\n, 3\n, 4\n"
    assert without(text, frozenset({"a", "b"})) == "SELECT 1\n"


def test_load__keeps_the_part_markers_and_drops_other_comments() -> None:
    text = queries["insert_submission"]
    assert "-- if attachments\n" in text and "-- end attachments" in text
    assert "-- The idempotency key" not in text
