"""What every `/v1` router shares: problem responses for OpenAPI, cursor pages, the read of
one object by its id, and the header of a read the read replica served."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, Generic, ParamSpec, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel, Field

from core.platform.db import Conn, ReplicaLag
from core.platform.errors import InvalidInput
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from core.platform.scope import OrgScope
from core.platform.services import Services

T = TypeVar("T")
P = ParamSpec("P")


class Problem(BaseModel):
    """An RFC 9457 problem; `code` is the stable machine-readable part."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    errors: list[dict[str, str]] | None = Field(
        default=None, description="for 422: one `{field, message}` per offending field"
    )
    needed: str | None = Field(
        default=None, description="for `forbidden`: the least role that may do this"
    )


_PROBLEM_SCHEMA = Problem.model_json_schema()
_WHEN: dict[int, str] = {
    400: "`malformed_body`: the body is not valid JSON",
    401: "`unauthenticated`: the API key is missing, unknown or revoked",
    402: (
        "`plan_limit`: the plan's count of this kind of object (or of events this month) is reached"
    ),
    403: (
        "`forbidden`: the key's role may not do this (`needed` names the least role that "
        "may, docs/teams.md); `ingest_key_only`: an ingest key (`pbs_…`) was used for "
        "anything but posting events to its stream; `stream_closed`: the stream is not "
        "taking events"
    ),
    404: "`not_found`: no such object in this organization (or an id of the wrong shape)",
    405: "`method_not_allowed`: `Allow` lists the methods the path takes",
    409: (
        "the object's state does not allow this now: `route_exists`, `delivery_in_progress`, "
        "`delivery_not_retryable`, `values_erased`, `values_expired`, `destination_paused`, "
        "`destination_removed`, `idempotency_conflict` (an event id or idempotency key "
        "used with another payload), `last_owner` or `already_member`"
    ),
    422: (
        "`invalid_input`, `invalid_config`, `invalid_secret`, `invalid_schema`, "
        "`invalid_template`, `unstorable_value` (NUL, a lone surrogate, a non-finite number) "
        "or `input_limit` (nesting, name length): `errors` lists the offending fields"
    ),
    413: ("`payload_too_large`: the request body is over 1 MiB (an event posted alone: 64 KiB)"),
    429: (
        "`too_many_attempts`: too many bad API keys from this client; "
        "`too_many_invitations`: the address's or the organization's invitations of the last "
        "24 hours are used up (nothing stored or sent); retry after `Retry-After` seconds"
    ),
    503: (
        "`unavailable`: the database cannot be reached; retry after `Retry-After` seconds; "
        "`email_not_sent`: the email provider did not take an invitation (nothing stored)"
    ),
}


async def read_one(
    services: Services,
    scope: OrgScope,
    read: Callable[Concatenate[Conn, OrgScope, P], Awaitable[T]],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """What the repository function `read` finds of the organization's, in a scoped
    transaction of its own: one object, or the `NotFound` it raises (`404 not_found`)."""
    async with services.db.scoped(scope) as conn:
        return await read(conn, scope, *args, **kwargs)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these problem statuses."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        responses[status] = {
            "description": _WHEN[status],
            "content": {"application/problem+json": {"schema": _PROBLEM_SCHEMA}},
        }
        if status == 405:
            responses[status]["headers"] = {
                "Allow": {"description": "the methods the path takes", "schema": {"type": "string"}}
            }
    return responses


class Page(BaseModel, Generic[T]):
    """One page of a list."""

    data: list[T]
    next_cursor: str | None = Field(
        description="pass as `cursor` to get the next page; null on the last page"
    )


# On an answer read from the read replica (docs/scale.md): how far behind the primary it was.
REPLICA_LAG_HEADER = "Postbag-Replica-Lag"
REPLICA_READ: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            REPLICA_LAG_HEADER: {
                "description": (
                    "present when the answer was read from the read replica "
                    "(`POSTBAG_READ_DATABASE_URL`): the seconds it was behind the primary "
                    "(`0.0` caught up, `2.4`), or `unknown` when the replica does not say"
                ),
                "schema": {"type": "string"},
            }
        }
    }
}


def replica_lag_headers(lag: ReplicaLag | None) -> dict[str, str]:
    """The header of an answer read with this lag (none when the primary served it)."""
    if lag is None:
        return {}
    return {REPLICA_LAG_HEADER: "unknown" if lag.seconds is None else f"{lag.seconds:.1f}"}


@dataclass(frozen=True, slots=True)
class PageRequest:
    """The `limit` and `cursor` of a list call."""

    limit: int
    cursor: str | None

    def _position(self, kind: type) -> Any:
        position = decode_cursor(self.cursor)
        if position is None:
            return None
        if len(position) != 1 or not isinstance(position[0], kind):
            raise InvalidInput("malformed cursor", [{"field": "cursor", "message": "malformed"}])
        return position[0]

    def after_id(self) -> str | None:
        """The id a page of id-ordered rows starts after."""
        value: str | None = self._position(str)
        return value

    def after_number(self) -> int | None:
        """The number (a version) a page of number-ordered rows starts after."""
        value: int | None = self._position(int)
        return value

    def page(self, rows: list[dict[str, Any]], key: str) -> tuple[list[dict[str, Any]], str | None]:
        """Rows fetched with `limit + 1`, cut to `limit`, and the cursor of what follows."""
        if len(rows) <= self.limit:
            return rows, None
        rows = rows[: self.limit]
        return rows, encode_cursor([rows[-1][key]])


def _page_request(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size")] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None, Query(max_length=512, description="`next_cursor` of the previous page")
    ] = None,
) -> PageRequest:
    return PageRequest(limit=limit, cursor=cursor)


PageDep = Annotated[PageRequest, Depends(_page_request)]
