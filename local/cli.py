"""The `postbag` command line (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

import uvloop

from core.destinations.http import close_shared_client
from core.destinations.registry import DESTINATION_TYPES
from core.owner.members import add_first_owner
from core.owner.organizations import change_plan, create_api_key, create_organization
from core.owner.plans import PLAN_NAMES, default_plan
from core.platform.clock import utcnow
from core.platform.db import connect
from core.platform.errors import PostbagError
from core.platform.logs import configure_logging
from core.platform.migrate import migrate
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.platform.settings import Settings
from core.ticks.registry import TICKS, run_pass
from local import audit, keys, listen, serve, worker
from local.client.commands import COMMANDS as CLIENT_COMMANDS
from local.client.commands import add_client_commands, run_client_command
from local.embedded import stop_like_ctrl_c
from local.settings import command_settings, development_settings, listening_url
from local.welcome import banner, command_name, first_start, local_sign_in_url, ready_block


async def _migrate(url: str) -> list[str]:
    conn = await connect(url)
    try:
        return await migrate(conn, destination_types=DESTINATION_TYPES)
    finally:
        await conn.close()


async def _create_org(
    url: str, name: str, plan: str, owner_email: str | None
) -> tuple[OrgScope, str, str | None]:
    """The organization, its first API key, and with `owner_email` the token of the first
    owner's one-time link (None when that address already has a password)."""
    conn = await connect(url)
    try:
        async with conn.transaction():
            scope = await create_organization(conn, name=name, plan=plan)
            key = await create_api_key(conn, scope, name="default", role="owner")
            link = None
            if owner_email is not None:
                link = await add_first_owner(conn, scope, email=owner_email, now=utcnow())
        return scope, key.secret, link
    finally:
        await conn.close()


async def _set_plan(settings: Settings, organization_id: str, plan: str) -> None:
    await keys.as_operator(
        settings, organization_id, "plan.changed", lambda change: change_plan(change, plan)
    )


async def _dev(settings: Settings, notes: list[str], host: str, port: int, *, ticks: bool) -> None:
    from local.runner import serve

    url = settings.require_database_url()
    await _migrate(url)
    created = await first_start(url)
    sign_in = await local_sign_in_url(url, settings)
    if created is not None:
        block = ready_block(created, settings, sign_in, command=command_name(sys.argv[0]))
        print(block, flush=True)
    elif sign_in is not None:
        print(f"Sign in to the dashboard (the link works once): {sign_in}", flush=True)
    print(
        "Development mode (production runs `postbag serve` and `postbag worker`)"
        + "".join(f"; {note}" for note in notes)
        + ".",
        flush=True,
    )
    for line in banner(settings, host=host, port=port, ticks=ticks):
        print(line, flush=True)
    await serve(Services.from_settings(settings), host=host, port=port, ticks=ticks)


async def _tick(settings: Settings, name: str, budget: float) -> dict[str, object]:
    services = Services.from_settings(settings)
    try:
        return dict(await run_pass(services, TICKS[name], now=utcnow(), budget=budget))
    finally:
        await close_shared_client()
        await services.db.close()


def _listening_url(args: argparse.Namespace) -> str | None:
    """Where `postbag dev` can be reached from this machine, e.g. `http://127.0.0.1:8080`."""
    if args.command != "dev":
        return None
    return listening_url(args.host, args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="postbag", description="Postbag form backend")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending database migrations")
    org = commands.add_parser("create-org", help="create an organization and an owner's API key")
    org.add_argument("--name", required=True)
    org.add_argument(
        "--plan",
        choices=PLAN_NAMES,
        help="default: self_hosted, or free on the hosted service (POSTBAG_HOSTED=true)",
    )
    org.add_argument(
        "--owner-email",
        metavar="E",
        help="make E the first owner and print a one-time link to set their password",
    )
    org.add_argument("--json", action="store_true", help="print one JSON object")
    plan = commands.add_parser("set-plan", help="move an organization to another plan")
    plan.add_argument("organization_id")
    plan.add_argument("plan", choices=PLAN_NAMES)
    dev = commands.add_parser("dev", help="run everything in one local process")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8080)
    dev.add_argument(
        "--no-ticks",
        action="store_true",
        help="serve HTTP only; run the ticks elsewhere (`postbag tick deliver` from cron)",
    )
    keys.register(commands)
    audit.register(commands)
    listen.register(commands)
    serve.add_command(commands)
    worker.add_command(commands)
    tick = commands.add_parser("tick", help="run one pass of a scheduled tick")
    tick.add_argument("name", choices=sorted(TICKS))
    tick.add_argument("--budget", type=float, default=60.0, help="seconds (default 60)")
    add_client_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in CLIENT_COMMANDS:
        return run_client_command(args)
    stop_like_ctrl_c()
    try:
        if args.command == "serve":
            return serve.main(args)
        if args.command == "worker":
            return worker.main(args)
        notes: list[str] = []
        if args.command == "dev":
            settings, notes = development_settings(public_url=_listening_url(args))
        else:
            settings = command_settings()
        # JSON unless a person reads stderr; the cloud functions always log JSON.
        configure_logging(settings.log_level, readable=sys.stderr.isatty())
        url = settings.require_database_url()
        if args.command == "migrate":
            applied = asyncio.run(_migrate(settings.migration_url()))
            print(f"applied {len(applied)} migration(s)" + "".join(f"\n  {a}" for a in applied))
        elif args.command == "create-org":
            plan = args.plan or default_plan(hosted=settings.hosted)
            scope, key, token = asyncio.run(_create_org(url, args.name, plan, args.owner_email))
            created: dict[str, str] = {"organization_id": scope.organization_id, "api_key": key}
            if token is not None:
                base, unset = serve.links_base(settings.public_url)
                created["owner_link"] = f"{base}/app/reset/{token}"
                if unset is not None:
                    print(f"postbag: {unset}", file=sys.stderr)
            if args.json:
                print(json.dumps(created))
            else:
                print(f"organization: {scope.organization_id}\napi key (shown once): {key}")
                if token is not None:
                    print(
                        f"owner {args.owner_email}: set a password within 7 days "
                        f"(the link works once): {created['owner_link']}"
                    )
                elif args.owner_email is not None:
                    print(f"owner {args.owner_email}: sign in with their password")
        elif args.command == "set-plan":
            asyncio.run(_set_plan(settings, args.organization_id, args.plan))
            print(f"{args.organization_id} is now on {args.plan}")
        elif args.command == "dev":
            # The runner serves on uvloop (and httptools, see `local.runner.serve`).
            uvloop.run(_dev(settings, notes, args.host, args.port, ticks=not args.no_ticks))
        elif args.command == "tick":
            print(json.dumps(asyncio.run(_tick(settings, args.name, args.budget))))
        else:
            return int(args.run(args, settings))
    except PostbagError as exc:
        print(f"postbag: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # uvicorn re-raises the signal once it has shut down: for a server that is a clean stop.
        return 0 if args.command in ("dev", "listen") else 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
