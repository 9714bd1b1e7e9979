"""A way back in: `postbag orgs` (every organization) and `postbag create-key ORG [--role R]`."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from core.owner.audit import by_operator, record
from core.owner.organizations import create_api_key, list_organizations, organization_scope
from core.owner.roles import ROLES
from core.platform.db import connect
from core.platform.settings import Settings
from core.platform.vocabulary import Role


async def _organizations(url: str) -> list[dict[str, Any]]:
    conn = await connect(url)
    try:
        return await list_organizations(conn)
    finally:
        await conn.close()


async def _create_key(url: str, organization_id: str, name: str, role: Role) -> str:
    conn = await connect(url)
    try:
        async with conn.transaction():
            scope = await organization_scope(conn, organization_id)
            key = await create_api_key(conn, scope, name=name, role=role)
            await record(conn, scope, by_operator("key.created", key.id))
            return key.secret
    finally:
        await conn.close()


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
    url = settings.require_database_url()
    key = asyncio.run(_create_key(url, args.organization_id, args.name, args.role))
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
