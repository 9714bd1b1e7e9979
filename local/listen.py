"""`postbag listen`: a development receiver that prints each webhook delivery as it arrives
(a submission's values, a stream event's type and data), and whether both of its signatures
verify (docs/webhooks.md)."""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.destinations import webhook
from core.destinations.base import ValidationContext
from core.destinations.bodies import EVENT_NAME
from core.owner import destinations, routes
from core.owner.changes import Change
from core.owner.organizations import owner_of
from core.owner.routes import RoutedWebhook
from core.platform.db import Conn, connect, enter_scope
from core.platform.errors import ConfigError, InvalidInput
from core.platform.scope import OrgScope
from core.platform.settings import Settings
from local.keys import as_operator

DEFAULT_PORT = 8787


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether each signature of a delivery matches its secret (None: no secret to check)."""

    postbag: bool | None
    standard: bool | None

    def words(self) -> str:
        if self.postbag is None:
            return "not checked (no secret: give --secret or --destination)"
        names = (("X-Postbag-Signature", self.postbag), ("webhook-signature", self.standard))
        parts = [f"{name} {'ok' if ok else 'MISMATCH'}" for name, ok in names]
        verdict = "both verify" if self.postbag and self.standard else "NOT VERIFIED"
        return f"{verdict} ({', '.join(parts)})"


def verify(secret: str | None, headers: Mapping[str, str], body: bytes) -> Verdict:
    """Check both signatures of a delivery against `secret` (header names in any case)."""
    if secret is None:
        return Verdict(None, None)
    lower = {name.lower(): value for name, value in headers.items()}
    try:
        timestamp = int(lower.get("webhook-timestamp", ""))
    except ValueError:
        return Verdict(postbag=False, standard=False)
    delivery_id = lower.get("webhook-id", "")
    expected = webhook.signature_headers(
        secret=secret, delivery_id=delivery_id, body=body, timestamp=timestamp
    )
    return Verdict(
        postbag=hmac.compare_digest(
            expected["X-Postbag-Signature"], lower.get("x-postbag-signature", "")
        ),
        standard=any(
            hmac.compare_digest(expected["webhook-signature"], given)
            for given in lower.get("webhook-signature", "").split()
        ),
    )


def describe(headers: Mapping[str, str], body: bytes, verdict: Verdict, *, at: datetime) -> str:
    """One delivery as printed: event, receipt, form and values (a stream event's type,
    receipt, stream, id and data), and the signatures' verdict."""
    lower = {name.lower(): value for name, value in headers.items()}
    event, delivery = lower.get("x-postbag-event", "?"), lower.get("x-postbag-delivery", "?")
    head = f"{at:%H:%M:%S}  {event}  {delivery}"
    try:
        payload = json.loads(body)
    except ValueError:
        return f"{head}\n  body is not JSON ({len(body)} bytes)\n  signatures: {verdict.words()}"
    lines = [head]
    if isinstance(payload, dict) and payload.get("event") == EVENT_NAME:
        lines.append(
            f"  type {payload.get('type')}  receipt {payload.get('receipt')}"
            f"  stream {payload.get('stream')}  id {payload.get('id')}"
        )
        data = payload.get("data")
        for name, value in (data if isinstance(data, dict) else {}).items():
            lines.append(f"  {name}: {json.dumps(value, ensure_ascii=False)}")
    elif isinstance(payload, dict):
        lines.append(f"  receipt {payload.get('receipt')}  form {payload.get('form')}")
        if payload.get("test"):
            lines.append("  (a test send)")
        for name, value in (payload.get("values") or {}).items():
            lines.append(f"  {name}: {json.dumps(value, ensure_ascii=False)}")
        for name, files in (payload.get("attachments") or {}).items():
            listed = ", ".join(f"{f.get('name')} ({f.get('size')} B)" for f in files)
            lines.append(f"  {name}: {listed}")
    lines.append(f"  signatures: {verdict.words()}")
    return "\n".join(lines)


def receiver_app(secret: str | None) -> Starlette:
    """Answer every POST with 200 after printing it."""

    async def receive(request: Request) -> Response:
        body = await request.body()
        verdict = verify(secret, request.headers, body)
        print(describe(request.headers, body, verdict, at=datetime.now()), flush=True)
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/{path:path}", receive, methods=["POST"])])


async def _owned(url: str, scope_of: dict[str, str]) -> tuple[Conn, OrgScope]:
    conn = await connect(url)
    return conn, await owner_of(conn, **scope_of)


async def _listening_destination(settings: Settings, form_id: str, target: str) -> RoutedWebhook:
    """A webhook destination to `target` routed from `form_id`: the one already there, or a
    new one; made as the operator, so the audit trail records it."""
    conn, scope = await _owned(settings.require_database_url(), {"form_id": form_id})
    await conn.close()
    ctx = ValidationContext(allow_private_targets=True)

    async def make(change: Change) -> RoutedWebhook:
        return await routes.route_to_webhook(
            change, form_id=form_id, url=target, name="postbag listen", ctx=ctx
        )

    return await as_operator(settings, scope.organization_id, "route.created", make)


async def _remove_what_was_made(settings: Settings, made: RoutedWebhook) -> None:
    """Delete the destination (with its routes) or the route this listener made, as the
    operator: after it stops, no new submission queues a delivery that can only fail."""
    conn, scope = await _owned(
        settings.require_database_url(), {"destination_id": made.destination_id}
    )
    await conn.close()
    if made.created:

        async def remove(change: Change) -> None:
            change.subject = made.destination_id
            await destinations.delete_destination(change, destination_id=made.destination_id)

        await as_operator(settings, scope.organization_id, "destination.deleted", remove)
    elif made.created_route:
        route_id = made.created_route

        async def unroute(change: Change) -> None:
            change.subject = route_id
            await routes.delete_route(change, route_id=route_id)

        await as_operator(settings, scope.organization_id, "route.deleted", unroute)


async def _destination_secret(url: str, destination_id: str) -> str:
    conn, scope = await _owned(url, {"destination_id": destination_id})
    try:
        async with conn.transaction():
            await enter_scope(conn, scope)
            current = await destinations.current_secret(conn, scope, destination_id=destination_id)
    finally:
        await conn.close()
    if current is None:
        raise InvalidInput(
            f"destination {destination_id} has no secret",
            [{"field": "destination", "message": "has no secret"}],
        )
    return current[1]


def _secret(
    args: argparse.Namespace, settings: Settings, target: str
) -> tuple[str | None, RoutedWebhook | None]:
    """The secret to verify with, and the destination `--create-destination` routed here."""
    if args.create_destination:
        made = asyncio.run(_listening_destination(settings, args.create_destination, target))
        what = "Created" if made.created else "Using"
        print(
            f"{what} webhook destination {made.destination_id} to {target}, "
            f"routed from form {args.create_destination}.",
            flush=True,
        )
        if made.created:
            print(f"Its signing secret (for your own receiver): {made.secret}", flush=True)
        return made.secret, made
    if args.destination:
        url = settings.require_database_url()
        return asyncio.run(_destination_secret(url, args.destination)), None
    secret: str | None = args.secret
    return secret, None


def _clean_up(args: argparse.Namespace, settings: Settings, made: RoutedWebhook | None) -> None:
    """On stop: remove what `--create-destination` made, unless `--keep`, and say so."""
    if made is None or not (made.created or made.created_route):
        return
    if args.keep:
        print(f"Kept webhook destination {made.destination_id} (--keep).", flush=True)
        return
    asyncio.run(_remove_what_was_made(settings, made))
    if made.created:
        print(
            f"Removed webhook destination {made.destination_id} and its route (--keep keeps them).",
            flush=True,
        )
    else:
        print(
            f"Removed the route from form {args.create_destination} to "
            f"{made.destination_id} (--keep keeps it).",
            flush=True,
        )


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound and listening on `host`:`port` (a ConfigError when it cannot be):
    requests sent from now on wait in its backlog until the server takes them."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def listen(args: argparse.Namespace, settings: Settings) -> int:
    """Receive deliveries on `--port` until Ctrl-C, printing each one."""
    target = f"http://{args.host}:{args.port}/"
    # Listening before saying so: a delivery sent on reading the line is not refused. And
    # before making a destination: a busy port leaves nothing behind.
    sock = _listening_socket(args.host, args.port)
    try:
        secret, made = _secret(args, settings, target)
    except BaseException:
        sock.close()
        raise
    try:
        # Inside the try: a Ctrl-C right after this line (before the server takes over the
        # signal) is as clean a stop as one after, and still removes what was made.
        print(
            f"Listening for webhooks on {target} "
            + ("(checking signatures)" if secret else "(signatures not checked)")
            + "; Ctrl-C stops.",
            flush=True,
        )
        config = uvicorn.Config(
            receiver_app(secret),
            host=args.host,
            port=args.port,
            lifespan="off",
            log_config=None,
            access_log=False,
        )
        asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    _clean_up(args, settings, made)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `listen` to the `postbag` command line."""
    parser = commands.add_parser(
        "listen", help="receive webhook deliveries here and print them (development)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--secret", help="the destination's signing secret, to verify with")
    secret.add_argument(
        "--destination", metavar="DST", help="verify with this destination's secret"
    )
    secret.add_argument(
        "--create-destination",
        metavar="FORM",
        help="create (or reuse) a webhook destination to this listener, routed from FORM; "
        "what it creates is removed when it stops, unless --keep",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with --create-destination: keep the destination and route it made after it stops",
    )
    parser.set_defaults(run=listen)
