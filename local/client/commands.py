"""The client commands: each is `/v1` calls through `ApiClient`, printed as a table or JSON.

Exit codes: 0 done, 1 the API refused (its problem `code` and `detail` on stderr), 2 a
usage error (argparse's own, no login to use, or an erase not confirmed).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.http.client import ApiClient, ApiRefused
from core.platform.vocabulary import (
    DeliveryStatus,
    SchemaMode,
    StreamEventStatus,
    SubmissionStatus,
)
from local.client.config import Login, NotLoggedIn, current_login, save_login
from local.client.output import as_json, cell, details, table

COMMANDS = ("login", "mcp", "forms", "submissions", "deliveries", "events", "streams", "send")
USAGE_ERROR = 2


@dataclass(frozen=True, slots=True)
class Printed:
    """What a command answers: `data` for `--json`, `text` for people."""

    data: Any
    text: str


Run = Callable[[ApiClient, argparse.Namespace], Awaitable[Printed]]


def _choices(literal: Any) -> list[str]:
    return list(literal.__args__)


def _page_text(page: dict[str, Any], columns: list[str]) -> str:
    text = table(page["data"], columns) if page["data"] else "(none)"
    if page.get("next_cursor"):
        text += f"\nmore: --cursor {page['next_cursor']}"
    return text


# forms


async def forms_list(api: ApiClient, args: argparse.Namespace) -> Printed:
    page = await api.call("GET", "/forms", params={"cursor": args.cursor, "limit": args.limit})
    return Printed(page, _page_text(page, ["id", "name", "accepting", "submit_url"]))


def _form_text(form: dict[str, Any]) -> str:
    keys = ["id", "name", "accepting", "allowed_origins", "redirect_url", "retention_days"]
    keys += ["schema_mode", "turnstile_enabled", "submit_url", "created_at"]
    return details(form, keys) + "\n\n" + str(form["html_snippet"]).rstrip()


async def forms_show(api: ApiClient, args: argparse.Namespace) -> Printed:
    form = await api.call("GET", f"/forms/{args.id}")
    return Printed(form, _form_text(form))


async def forms_create(api: ApiClient, args: argparse.Namespace) -> Printed:
    given = {
        "name": args.name,
        "allowed_origins": args.origin,
        "redirect_url": args.redirect_url,
        "retention_days": args.retention_days,
        "schema_mode": args.schema_mode,
    }
    body = {k: v for k, v in given.items() if v is not None}
    form = await api.call("POST", "/forms", body=body)
    return Printed(form, _form_text(form))


# submissions


async def submissions_list(api: ApiClient, args: argparse.Namespace) -> Printed:
    params = {
        "form": args.form,
        "status": args.status,
        "since": args.since.isoformat() if args.since else None,
        "cursor": args.cursor,
        "limit": args.limit,
    }
    page = await api.call("GET", "/submissions", params=params)
    columns = ["id", "form", "status", "reason", "received_at", "values_state"]
    return Printed(page, _page_text(page, columns))


def _submission_text(found: dict[str, Any]) -> str:
    keys = ["id", "form", "status", "reason", "flags", "received_at", "values_state"]
    parts = [details(found, [*keys, "erase_at", "erased_at"])]
    if found.get("values"):
        parts.append("values\n" + details(found["values"], sorted(found["values"])))
    if found.get("attachments"):
        parts.append(table(found["attachments"], ["id", "field", "name", "size"]))
    if found.get("deliveries"):
        columns = ["id", "channel", "status", "attempts", "reason", "target"]
        parts.append(table(found["deliveries"], columns))
    return "\n\n".join(parts)


async def submissions_show(api: ApiClient, args: argparse.Namespace) -> Printed:
    found = await api.call("GET", f"/submissions/{args.id}")
    return Printed(found, _submission_text(found))


async def submissions_export(api: ApiClient, args: argparse.Namespace) -> Printed:
    text = await api.text("/submissions/export.csv", params={"form": args.form})
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        return Printed({"form": args.form, "file": args.output}, f"wrote {args.output}")
    return Printed({"form": args.form, "csv": text}, text.rstrip("\r\n"))


class NotConfirmed(Exception):
    """A destructive command was neither confirmed at the terminal nor given `--yes`."""


def _confirm(question: str, *, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise NotConfirmed(f"{question} Pass --yes to confirm without a terminal.")
    if input(f"{question} [y/N] ").strip().lower() not in {"y", "yes"}:
        raise NotConfirmed("not confirmed; nothing was erased")


async def submissions_erase(api: ApiClient, args: argparse.Namespace) -> Printed:
    _confirm(f"Erase the values and files of {args.id} for good?", yes=args.yes)
    found = await api.call("POST", f"/submissions/{args.id}/erase")
    return Printed(found, f"erased {found['id']}\n\n" + _submission_text(found))


# deliveries


DELIVERY_COLUMNS = ["id", "submission", "destination", "channel", "status", "attempts", "reason"]


async def deliveries_list(api: ApiClient, args: argparse.Namespace) -> Printed:
    params = {
        "status": args.status,
        "destination": args.destination,
        "submission": args.submission,
        "cursor": args.cursor,
        "limit": args.limit,
    }
    page = await api.call("GET", "/deliveries", params=params)
    return Printed(page, _page_text(page, [*DELIVERY_COLUMNS, "created_at"]))


def _delivery_text(found: dict[str, Any]) -> str:
    keys = [*DELIVERY_COLUMNS, "kind", "max_attempts", "next_attempt_at", "last_detail"]
    text = details(found, [*keys, "created_at", "sent_at"])
    history = found.get("history") or []
    if history:
        text += "\n\n" + table(history, sorted({k for attempt in history for k in attempt}))
    return text


async def deliveries_show(api: ApiClient, args: argparse.Namespace) -> Printed:
    found = await api.call("GET", f"/deliveries/{args.id}")
    return Printed(found, _delivery_text(found))


async def deliveries_retry(api: ApiClient, args: argparse.Namespace) -> Printed:
    found = await api.call("POST", f"/deliveries/{args.id}/retry")
    return Printed(found, f"queued {found['id']} again\n\n" + _delivery_text(found))


# streams


async def streams_list(api: ApiClient, args: argparse.Namespace) -> Printed:
    page = await api.call("GET", "/streams", params={"cursor": args.cursor, "limit": args.limit})
    return Printed(page, _page_text(page, ["id", "name", "schema_mode", "accepting"]))


STREAM_KEYS = ["id", "name", "schema_mode", "retention_days", "accepting", "created_at"]


async def streams_show(api: ApiClient, args: argparse.Namespace) -> Printed:
    stream = await api.call("GET", f"/streams/{args.id}")
    return Printed(stream, details(stream, STREAM_KEYS))


async def streams_create(api: ApiClient, args: argparse.Namespace) -> Printed:
    given = {
        "name": args.name,
        "schema_mode": args.schema_mode,
        "retention_days": args.retention_days,
    }
    body = {k: v for k, v in given.items() if v is not None}
    stream = await api.call("POST", "/streams", body=body)
    key = stream["ingest_key"]["key"]
    text = details(stream, STREAM_KEYS) + f"\n\ningest key (shown once): {key}"
    return Printed(stream, text)


async def streams_events(api: ApiClient, args: argparse.Namespace) -> Printed:
    params = {"type": args.type, "status": args.status, "cursor": args.cursor, "limit": args.limit}
    page = await api.call("GET", f"/streams/{args.id}/events", params=params)
    return Printed(page, _page_text(page, ["event", "id", "type", "status", "received_at"]))


def _event_data(text: str) -> Any:
    """`--data`: JSON, or `@file` for a file's JSON."""
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as file:
            text = file.read()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc


async def send_event(api: ApiClient, args: argparse.Namespace) -> Printed:
    """Post one event to a stream (`postbag send STREAM --type T --data @file.json`)."""
    given = {
        "id": args.id,
        "type": args.type,
        "occurred_at": args.occurred_at,
        "data": args.data,
    }
    body = {k: v for k, v in given.items() if v is not None}
    answer = await api.call("POST", f"/streams/{args.stream}/events", body=body)
    return Printed(answer, details(answer, ["event", "id", "status", "errors"]))


# events


async def events_tail(api: ApiClient, args: argparse.Namespace) -> Printed:
    """Print events as they come (one line each, JSON lines with `--json`) until Ctrl-C."""
    after = args.after
    while True:
        page = await api.call("GET", "/events", params={"after": after, "limit": args.limit})
        for event in page["data"]:
            after = max(after, int(event["id"]))
            if args.json:
                print(json.dumps(event, ensure_ascii=False), flush=True)
            else:
                line = [str(event["id"]), event["created_at"], event["type"]]
                print("  ".join([*line, cell(event.get("subject"))]), flush=True)
        if not page.get("next_cursor"):
            await asyncio.sleep(args.interval)


def _login(url: str, *, as_data: bool) -> int:
    if sys.stdin.isatty():
        key = getpass.getpass("API key: ").strip()
    else:
        key = sys.stdin.readline().strip()
    if not key:
        print("postbag: no API key given", file=sys.stderr)
        return USAGE_ERROR
    login = Login(url=url.rstrip("/"), key=key)

    async def check() -> dict[str, Any]:
        async with ApiClient.remote(login.url, login.key) as api:
            found: dict[str, Any] = await api.call("GET", "/usage")
            return found

    usage = asyncio.run(check())  # a refused key is not stored
    path = save_login(login)
    if as_data:
        print(as_json({"url": login.url, "plan": usage["plan"], "stored_in": str(path)}))
    else:
        print(f"logged in to {login.url} (plan {usage['plan']}); stored in {path}")
    return 0


def _mcp(login: Login) -> int:
    from local.client.stdio import serve_stdio

    serve_stdio(login)
    return 0


def run_client_command(args: argparse.Namespace) -> int:
    """Run one client command; the exit code."""
    try:
        if args.command == "login":
            return _login(args.url, as_data=args.json)
        login = current_login()
        if args.command == "mcp":
            return _mcp(login)
        run: Run = args.run

        async def main() -> Printed:
            async with ApiClient.remote(login.url, login.key) as api:
                return await run(api, args)

        printed = asyncio.run(main())
    except (NotLoggedIn, NotConfirmed) as exc:
        print(f"postbag: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except ApiRefused as exc:
        print(f"postbag: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0 if args.command == "events" else 130
    print(as_json(printed.data) if args.json else printed.text)
    return 0


def _datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc


def add_client_commands(commands: Any) -> None:
    """Add the client commands to the `postbag` parser's subcommands."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON")
    pages = argparse.ArgumentParser(add_help=False)
    pages.add_argument("--cursor", help="`next_cursor` of the previous page")
    pages.add_argument("--limit", type=int, default=50)

    def leaf(group: Any, name: str, run: Run, help_: str, *parents: Any) -> Any:
        parser = group.add_parser(name, help=help_, parents=[output, *parents])
        parser.set_defaults(run=run)
        return parser

    login = commands.add_parser("login", help="store a Postbag URL and API key for the client")
    login.add_argument("url", help="the Postbag's base URL, e.g. https://forms.example.com")
    login.add_argument("--json", action="store_true", help="print JSON")
    commands.add_parser("mcp", help="serve the MCP tools over stdio (a client of the login)")

    forms = commands.add_parser("forms", help="list, show and create forms")
    group = forms.add_subparsers(dest="action", required=True)
    leaf(group, "list", forms_list, "list forms", pages)
    leaf(group, "show", forms_show, "one form and its HTML snippet").add_argument("id")
    create = leaf(group, "create", forms_create, "create a form")
    create.add_argument("--name", required=True)
    create.add_argument("--origin", action="append", help="an allowed origin (repeatable)")
    create.add_argument("--redirect-url")
    create.add_argument("--retention-days", type=int)
    create.add_argument("--schema-mode", choices=_choices(SchemaMode))

    subs = commands.add_parser("submissions", help="list, show, export and erase submissions")
    group = subs.add_subparsers(dest="action", required=True)
    listing = leaf(group, "list", submissions_list, "list submissions, newest first", pages)
    listing.add_argument("--form")
    listing.add_argument("--status", choices=_choices(SubmissionStatus))
    listing.add_argument("--since", type=_datetime, help="ISO 8601, e.g. 2026-10-01T00:00Z")
    leaf(group, "show", submissions_show, "one submission with values").add_argument("id")
    export = leaf(group, "export", submissions_export, "a form's submissions as CSV")
    export.add_argument("--form", required=True)
    export.add_argument("--output", "-o", help="write the CSV to this file")
    erase = leaf(group, "erase", submissions_erase, "erase values and files now, for good")
    erase.add_argument("id")
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    dels = commands.add_parser("deliveries", help="list, show and retry deliveries")
    group = dels.add_subparsers(dest="action", required=True)
    listing = leaf(group, "list", deliveries_list, "list deliveries, newest first", pages)
    listing.add_argument("--status", choices=_choices(DeliveryStatus))
    listing.add_argument("--destination")
    listing.add_argument("--submission")
    leaf(group, "show", deliveries_show, "one delivery with its attempts").add_argument("id")
    leaf(group, "retry", deliveries_retry, "queue a delivery again now").add_argument("id")

    streams = commands.add_parser("streams", help="list, show and create streams; their events")
    group = streams.add_subparsers(dest="action", required=True)
    leaf(group, "list", streams_list, "list streams", pages)
    leaf(group, "show", streams_show, "one stream").add_argument("id")
    create = leaf(group, "create", streams_create, "create a stream (prints its ingest key once)")
    create.add_argument("--name", required=True)
    create.add_argument("--schema-mode", choices=_choices(SchemaMode))
    create.add_argument("--retention-days", type=int)
    listing = leaf(group, "events", streams_events, "a stream's events, newest first", pages)
    listing.add_argument("id")
    listing.add_argument("--type")
    listing.add_argument("--status", choices=_choices(StreamEventStatus))

    send = leaf(commands, "send", send_event, "post one event to a stream")
    send.add_argument("stream", help="the stream's id, str_…")
    send.add_argument("--type", required=True, help="the event's type, e.g. order.paid")
    send.add_argument(
        "--data", type=_event_data, required=True, help="JSON, or @file.json to read a file"
    )
    send.add_argument("--id", help="your event id (a repeat is answered as a duplicate)")
    send.add_argument("--occurred-at", help="RFC 3339, e.g. 2026-12-01T09:00:00Z")

    events = commands.add_parser("events", help="follow the event stream")
    group = events.add_subparsers(dest="action", required=True)
    tail = leaf(group, "tail", events_tail, "print events as they come, until Ctrl-C")
    tail.add_argument("--after", type=int, default=0, help="start after this event id")
    tail.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    tail.add_argument("--limit", type=int, default=100)
