"""Numbering a statement's named placeholders for psycopg's raw cursor."""

from __future__ import annotations

import pytest

from core.platform.queries import number, queries


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
