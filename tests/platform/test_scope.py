from __future__ import annotations

import pytest

from core.owner.organizations import create_api_key
from core.platform.db import connect
from core.platform.errors import MissingScope
from core.platform.scope import OrgScope


async def test_repository__without_scope_raises_before_any_sql(db_url: str) -> None:
    conn = await connect(db_url)
    await conn.close()
    # The connection is closed: had the repository reached the database, psycopg would
    # have raised OperationalError instead of MissingScope.
    with pytest.raises(MissingScope):
        await create_api_key(conn, None, name="x")  # type: ignore[arg-type]
    with pytest.raises(MissingScope):
        await create_api_key(conn, "org_123", name="x")  # type: ignore[arg-type]


def test_org_scope__refuses_a_non_organization_id() -> None:
    with pytest.raises(MissingScope):
        OrgScope("frm_123")
