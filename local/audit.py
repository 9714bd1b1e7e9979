"""`postbag audit verify`: check every organization's audit chain on the database."""

from __future__ import annotations

import argparse
import asyncio
import json

from core.owner.audit import ChainReport, verify_chains
from core.platform.db import connect
from core.platform.settings import Settings


async def _verify(url: str) -> list[ChainReport]:
    conn = await connect(url)
    try:
        return await verify_chains(conn)
    finally:
        await conn.close()


def verify(args: argparse.Namespace, settings: Settings) -> int:
    """Print each organization's chain as verified; exit 1 when one is broken, naming its
    first broken row (or the rows removed from its end). `--json` carries each chain's head,
    for the operator to keep a copy elsewhere."""
    reports = asyncio.run(_verify(settings.require_database_url()))
    for report in reports:
        if args.json:
            print(
                json.dumps(
                    {
                        "organization_id": report.organization_id,
                        "rows": report.rows,
                        "intact": report.problem is None,
                        "broken_id": report.broken_id,
                        "broken_seq": report.broken_seq,
                        "problem": report.problem,
                        "head_seq": report.head_seq,
                        "head_hash": report.head_hash,
                    }
                )
            )
        elif report.problem is None:
            print(f"{report.organization_id}  intact  {report.rows} rows")
        else:
            row = f"row {report.broken_seq}" + (
                f" ({report.broken_id})" if report.broken_id else ""
            )
            print(
                f"{report.organization_id}  BROKEN at {row}: {report.problem}; "
                f"{report.rows} rows before it are intact"
            )
    return 1 if any(report.problem is not None for report in reports) else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `audit verify` to the `postbag` command line."""
    group = commands.add_parser("audit", help="the audit trail")
    actions = group.add_subparsers(dest="audit_command", required=True)
    check = actions.add_parser("verify", help="check every organization's hash chain")
    check.add_argument("--json", action="store_true", help="one JSON object per organization")
    check.set_defaults(run=verify)
