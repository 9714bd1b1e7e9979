"""The submit statement without each combination of its optional parts is one the server
accepts: every variant the submit path may run is prepared against a migrated database."""

from __future__ import annotations

from itertools import combinations

from core.platform.db import Conn
from core.platform.queries import number, queries, without

# Each optional part, and the step of the statement that writes it.
PARTS = {
    "ham": "ham",
    "attachments": "attachment",
    "acknowledgement": "acknowledgement",
    "autoresponse": "autoresponse",
    "drift": "drift",
}
# The parameters whose type the server cannot infer from the statement alone (the submit
# path's values carry theirs); every other one is left for the server to infer.
TYPES = {"client_hash": "bytea", "payload_hash": "bytea", "now": "timestamptz"}


async def test_every_variant_of_the_submit_statement_is_prepared(conn: Conn) -> None:
    texts = set()
    for size in range(len(PARTS) + 1):
        for omit in combinations(PARTS, size):
            statement = number(without(queries["insert_submission"], frozenset(omit)))
            assert "-- if" not in statement.text and "-- end" not in statement.text
            for part, step in PARTS.items():
                assert (f"), {step} AS (" in statement.text) == (part not in omit)
            types = ", ".join(TYPES.get(name, "unknown") for name in statement.names)
            await conn.execute(f"PREPARE variant_{len(texts)} ({types}) AS {statement.text}")
            texts.add(statement.text)
    assert len(texts) == 2 ** len(PARTS)
