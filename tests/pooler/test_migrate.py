"""`postbag migrate` behind a transaction pooler: on the direct URL, or refused."""

from __future__ import annotations

from core.platform.migrate import discover
from tests.support.cli import postbag, subprocess_env
from tests.support.pooler import through


def test_migrate__behind_a_transaction_pooler_needs_the_direct_url(
    empty_db_url: str, pooler_port: int
) -> None:
    env = subprocess_env(
        POSTBAG_DATABASE_URL=through(empty_db_url, pooler_port), POSTBAG_DB_POOLER="transaction"
    )
    refused = postbag("migrate", env=env)
    assert (refused.returncode, refused.stderr.strip()) == (
        1,
        "postbag: POSTBAG_DIRECT_DATABASE_URL is required to migrate behind a transaction "
        "pooler (POSTBAG_DB_POOLER=transaction)",
    )
    applied = postbag("migrate", env={**env, "POSTBAG_DIRECT_DATABASE_URL": empty_db_url})
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.startswith(f"applied {len(discover())} migration(s)")
