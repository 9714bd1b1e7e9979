"""`check_rules` reads every route of an app, included routers walked into, and refuses to
build one with a `/v1` route or a page that declares no rule or would record no audit; an
ingest route refuses a rule that would."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI

from core.http.access import (
    AuditedRoute,
    Rule,
    check_rules,
    checked_routes,
    declare,
    open_to_all,
)
from core.http.v1.ingest import IngestRoute


async def _nothing() -> dict[str, str]:
    return {}


def _app(router: APIRouter, prefix: str) -> FastAPI:
    app = FastAPI()
    outer = APIRouter()
    outer.include_router(router, prefix="/inner")
    app.include_router(outer, prefix=prefix)
    return app


def test_check_rules__accepts_declared_routes_and_reads_their_full_paths() -> None:
    router = APIRouter(route_class=AuditedRoute)
    router.add_api_route("/things", _nothing, methods=["GET", "POST"], dependencies=[open_to_all()])
    app = _app(router, "/v1")
    check_rules(app)
    [served] = checked_routes(app)
    assert (served.path, served.methods) == ("/v1/inner/things", frozenset({"GET", "POST"}))


def test_check_rules__refuses_a_route_without_a_rule() -> None:
    router = APIRouter(route_class=AuditedRoute)
    router.add_api_route("/things", _nothing, methods=["GET"])
    with pytest.raises(RuntimeError, match=r"\['GET'\] /v1/inner/things declares no permission"):
        check_rules(_app(router, "/v1"))


def test_check_rules__refuses_a_page_that_would_record_no_audit() -> None:
    router = APIRouter()
    router.add_api_route("/page", _nothing, methods=["GET"], dependencies=[open_to_all()])
    with pytest.raises(RuntimeError, match=r"/app/inner/page is not an AuditedRoute"):
        check_rules(_app(router, "/app"))


def test_check_rules__leaves_routes_outside_v1_and_app_alone() -> None:
    router = APIRouter()
    router.add_api_route("/ping", _nothing, methods=["GET"])
    app = _app(router, "/elsewhere")
    check_rules(app)
    assert checked_routes(app) == []


def test_ingest_route__refuses_a_rule_that_would_audit() -> None:
    # An ingest route is handled by its endpoint alone: nothing would record the action.
    router = APIRouter(route_class=IngestRoute)

    async def caller() -> None:
        return None

    with pytest.raises(RuntimeError, match="audits nothing"):
        router.add_api_route(
            "/events",
            _nothing,
            methods=["POST"],
            dependencies=[declare(Rule("operate", "event.posted"), caller)],
        )
