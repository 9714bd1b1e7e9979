"""What every `/v1` request is checked for after its key and before its endpoint runs (so
before any query with its input): ids by shape, and a JSON body for what cannot be stored."""

from __future__ import annotations

from fastapi import Request

from core.http.v1.auth import ScopeDep
from core.platform.errors import InvalidInput, NotFound
from core.platform.ids import is_id
from core.platform.values import check_storable, load_json

# Path parameters and query parameters that name an object, with their id prefix.
PATH_IDS = {
    "form_id": "frm",
    "destination_id": "dst",
    "route_id": "rte",
    "delivery_id": "dlv",
    "submission_id": "sub",
    "attachment_id": "att",
    "alert_id": "alr",
    "key_id": "key",
    "stream_id": "str",
    "ingest_key_id": "sky",
    "stream_route_id": "srt",
    "event_id": "evt",
    "member_id": "mem",
    "invitation_id": "inv",
    "hook_id": "hok",
}
QUERY_IDS = {"form": "frm", "destination": "dst", "route": "rte", "submission": "sub"}
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _is_json(content_type: str | None) -> bool:
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


async def check_request(request: Request, _scope: ScopeDep) -> None:
    """A malformed id in the path is `404 not_found` (no such object); in the query,
    `422 invalid_input`; a query parameter with NUL is `422 unstorable_value` (no text the
    database holds has one to compare with); a JSON body with NUL, a lone surrogate, a
    non-finite number or nesting past the limit is `422 unstorable_value` or `422
    input_limit`."""
    for name, prefix in PATH_IDS.items():
        value = request.path_params.get(name)
        if value is not None and not is_id(str(value), prefix):
            raise NotFound(f"no such object: {name} is not a {prefix}_… id")
    errors = [
        {"field": name, "message": f"not a {prefix}_… id"}
        for name, prefix in QUERY_IDS.items()
        for value in request.query_params.getlist(name)
        if not is_id(value, prefix)
    ]
    if errors:
        raise InvalidInput("the request has invalid fields", errors)
    check_storable({name: request.query_params.getlist(name) for name in request.query_params})
    if request.method in _BODY_METHODS and _is_json(request.headers.get("content-type")):
        body = await request.body()
        if body:
            load_json(body)
