"""A way back in: `postbag orgs` (every organization) and `postbag create-key ORG [--role R]`."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from core.owner import organizations
from core.owner.changes import Change, operator
from core.owner.organizations import list_organizations, organization_scope
from core.owner.roles import ROLES
from core.platform.db import Database, connect
from core.platform.settings import Settings
from core.platform.vocabulary import Role

T = TypeVar("T")


async def _organizations(url: str) -> list[dict[str, Any]]:
    conn = await connect(url)
    try:
        return await list_organizations(conn)
    finally:
        await conn.close()


async def as_operator(
    settings: Settings, organization_id: str, action: str, make: Callable[[Change], Awaitable[T]]
) -> T:
    """Make a change as the operator in an existing organization (an unknown one is
    NotFound), through the same use case as `/v1`: its audit row commits with it."""
    db = Database(
        settings.require_database_url(), max_size=1, transaction_pooler=settings.transaction_pooler
    )
    try:
        async with db.transaction() as conn:
            scope = await organization_scope(conn, organization_id)
        return await make(Change(db, operator(scope), action))
    finally:
        await db.close()


async def _create_key(settings: Settings, organization_id: str, name: str, role: Role) -> str:
    async def make(change: Change) -> str:
        return (await organizations.create_key(change, name=name, role=role)).secret

    return await as_operator(settings, organization_id, "key.created", make)


def orgs(args: argparse.Namespace, settings: Settings) -> int:
    """Print every organization: id, plan and name, one a line (or JSON lines)."""
    for row in asyncio.run(_organizations(settings.require_database_url())):
        if args.json:
            print(json.dumps({"id": row["id"], "name": row["name"], "plan": row["plan"]}))
        else:
            print(f"{row['id']}  {row['plan']:<11}  {row['name']}")
    return 0


def create_key(args: argparse.Namespace, settings: Settings) -> int:
    """Make a new API key for an existing organization and print it once."""
    key = asyncio.run(_create_key(settings, args.organization_id, args.name, args.role))
    if args.json:
        print(json.dumps({"organization_id": args.organization_id, "api_key": key}))
    else:
        print(f"organization: {args.organization_id}\napi key (shown once): {key}")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `orgs` and `create-key` to the `postbag` command line."""
    listing = commands.add_parser("orgs", help="list organizations (id, plan, name)")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(run=orgs)
    key = commands.add_parser("create-key", help="make another API key for an organization")
    key.add_argument("organization_id", metavar="ORG")
    key.add_argument("--name", default="cli", help="the key's name (default: cli)")
    key.add_argument(
        "--role", choices=ROLES, default="admin", help="what the key may do (default: admin)"
    )
    key.add_argument("--json", action="store_true", help="print one JSON object")
    key.set_defaults(run=create_key)
