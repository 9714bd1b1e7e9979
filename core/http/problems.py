"""RFC 9457 problem+json: the one place where domain errors become HTTP answers."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import compile_path

from core.http.served import served_routes
from core.platform.errors import (
    AlreadyMember,
    AlreadyReleased,
    DeliveryInProgress,
    DeliveryNotRetryable,
    DestinationPaused,
    DestinationRemoved,
    DomainTaken,
    EmailNotSent,
    Forbidden,
    FormClosed,
    IdempotencyConflict,
    IngestKeyOnly,
    InputLimit,
    InvalidAttachment,
    InvalidConfig,
    InvalidInput,
    InvalidSchema,
    InvalidSearch,
    InvalidSecret,
    InvalidTemplate,
    LastOwner,
    MalformedBody,
    NotFound,
    PayloadTooLarge,
    PlanLimitReached,
    PostbagError,
    RetryLater,
    RouteExists,
    SsoRefused,
    SsoRequired,
    StorageError,
    StorageLimitReached,
    StreamClosed,
    TooManyAttempts,
    TooManyInvitations,
    TooManySubmissions,
    Unauthenticated,
    Unavailable,
    UnstorableValue,
    UnsupportedMediaType,
    ValuesErased,
    ValuesExpired,
)
from core.platform.logs import log

PROBLEM_TYPE = "application/problem+json"

# Each error class maps to exactly one status and one stable code.
_STATUS_AND_CODE: dict[type[PostbagError], tuple[int, str]] = {
    Unauthenticated: (401, "unauthenticated"),
    NotFound: (404, "not_found"),
    InvalidInput: (422, "invalid_input"),
    Unavailable: (503, "unavailable"),
    PlanLimitReached: (402, "plan_limit"),
    RouteExists: (409, "route_exists"),
    InvalidConfig: (422, "invalid_config"),
    InvalidSecret: (422, "invalid_secret"),
    InvalidSchema: (422, "invalid_schema"),
    InvalidTemplate: (422, "invalid_template"),
    FormClosed: (403, "form_closed"),
    StreamClosed: (403, "stream_closed"),
    Forbidden: (403, "forbidden"),
    IngestKeyOnly: (403, "ingest_key_only"),
    IdempotencyConflict: (409, "idempotency_conflict"),
    PayloadTooLarge: (413, "payload_too_large"),
    TooManyAttempts: (429, "too_many_attempts"),
    TooManySubmissions: (429, "too_many_submissions"),
    TooManyInvitations: (429, "too_many_invitations"),
    StorageLimitReached: (429, "storage_limit"),
    MalformedBody: (400, "malformed_body"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    InvalidAttachment: (422, "invalid_attachment"),
    UnstorableValue: (422, "unstorable_value"),
    InputLimit: (422, "input_limit"),
    InvalidSearch: (422, "invalid_search"),
    StorageError: (503, "storage_unavailable"),
    DeliveryInProgress: (409, "delivery_in_progress"),
    DeliveryNotRetryable: (409, "delivery_not_retryable"),
    ValuesErased: (409, "values_erased"),
    ValuesExpired: (409, "values_expired"),
    DestinationPaused: (409, "destination_paused"),
    DestinationRemoved: (409, "destination_removed"),
    AlreadyReleased: (409, "already_released"),
    LastOwner: (409, "last_owner"),
    AlreadyMember: (409, "already_member"),
    DomainTaken: (409, "domain_taken"),
    SsoRequired: (403, "sso_required"),
    SsoRefused: (403, "sso_refused"),
    EmailNotSent: (503, "email_not_sent"),
}


def problem(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    needed: str | None = None,
) -> JSONResponse:
    """A problem+json response with a machine `code` (and, for `forbidden`, the least role
    that may act: `needed`)."""
    body: dict[str, Any] = {
        "type": f"https://postbag.dev/problems/{code}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors:
        body["errors"] = errors
    if needed:
        body["needed"] = needed
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def status_and_code(exc: PostbagError) -> tuple[int, str]:
    """The HTTP status and problem code of a domain error."""
    for cls in type(exc).__mro__:
        if cls in _STATUS_AND_CODE:
            return _STATUS_AND_CODE[cls]
    return 500, "internal_error"


def problem_for(exc: PostbagError) -> JSONResponse:
    """The problem+json answer to a domain error (503s say when to retry)."""
    status, code = status_and_code(exc)
    errors = exc.errors if isinstance(exc, InvalidInput) else None
    headers = {"Retry-After": "5"} if isinstance(exc, Unavailable | StorageError) else None
    if isinstance(exc, RetryLater):
        headers = {"Retry-After": str(exc.retry_after)}
    if status >= 500:
        log.warning("request failed", extra={"detail": {"code": code, "error": str(exc)}})
    needed = exc.needed if isinstance(exc, Forbidden) else None
    return problem(status, code, str(exc), errors=errors, headers=headers, needed=needed)


def http_error_response(exc: StarletteHTTPException, request: Request) -> JSONResponse:
    """The problem+json answer to a routing error (unknown path, wrong method); a 405 says
    in `Allow` every method the path is served with."""
    # FastAPI answers a body it cannot parse with a 400.
    codes = {400: "malformed_body", 404: "not_found", 405: "method_not_allowed"}
    code = codes.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem(exc.status_code, code, str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app serves at the request's path (a 405's `Allow`)."""
    methods: set[str] = set()
    for served in served_routes(request.app.router.routes):
        if served.methods and compile_path(served.path)[0].fullmatch(request.url.path):
            methods |= served.methods
    return sorted(methods - {"HEAD"})


def install_problem_handlers(app: Starlette) -> None:
    """Render every error the app can raise as problem+json.

    FastAPI's request validation errors are handled too when the app is a FastAPI app (the
    api app); the submit app is plain Starlette, which keeps FastAPI off its cold start.
    """

    async def on_postbag_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PostbagError)
        return problem_for(exc)

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return http_error_response(exc, request)

    async def on_client_gone(request: Request, _exc: Exception) -> JSONResponse:
        # Not an error of ours: the client closed the connection mid-body. Nobody reads
        # the answer; the line says it happened, without a traceback.
        log.info(
            "client went away before its body was read",
            extra={"detail": {"path": request.url.path}},
        )
        return problem_for(MalformedBody("the connection closed before the body ended"))

    async def on_unexpected_error(_request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error", exc_info=exc)
        return problem(500, "internal_error", "an unexpected error happened; it was logged")

    app.add_exception_handler(PostbagError, on_postbag_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(ClientDisconnect, on_client_gone)
    app.add_exception_handler(Exception, on_unexpected_error)


def install_validation_handler(app: Starlette) -> None:
    """Render FastAPI's request validation errors as `422 invalid_input` with the fields."""
    from fastapi.exceptions import RequestValidationError

    async def on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {
                "field": ".".join(str(part) for part in err["loc"][1:]) or str(err["loc"][0]),
                "message": str(err["msg"]),
            }
            for err in exc.errors()
        ]
        return problem(422, "invalid_input", "the request has invalid fields", errors=errors)

    app.add_exception_handler(RequestValidationError, on_validation_error)
