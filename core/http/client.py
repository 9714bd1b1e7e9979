"""A client of `/v1`: the MCP tools and the `postbag` client commands speak only through it.

Over the network for `postbag` and `postbag mcp` (a Postbag URL and a key), in process for
`/mcp` (the api app itself, called over ASGI with the caller's own key). Either way every
call is an ordinary `/v1` request: the same authentication, scoping, rules and problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from core import __version__


class ApiRefused(Exception):
    """`/v1` answered with a problem: its `code`, `detail` and, for 422, the field `errors`."""

    def __init__(
        self, status: int, code: str, detail: str, errors: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(f"{code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors or []

    def __str__(self) -> str:
        fields = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in self.errors)
        return f"{self.code}: {self.detail}" + (f" ({fields})" if fields else "")


def _refusal(response: httpx.Response) -> ApiRefused:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        return ApiRefused(
            response.status_code,
            body["code"],
            str(body.get("detail") or body.get("title") or ""),
            body.get("errors") if isinstance(body.get("errors"), list) else None,
        )
    return ApiRefused(
        response.status_code,
        f"http_{response.status_code}",
        response.text[:200] or response.reason_phrase,
    )


class ApiClient:
    """`/v1` calls under one key; a problem answer raises `ApiRefused`."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    @classmethod
    def remote(cls, url: str, key: str, *, timeout: float = 30.0) -> ApiClient:
        """A client of the Postbag at `url` (its base, without `/v1`)."""
        return cls(
            httpx.AsyncClient(
                base_url=url.rstrip("/"),
                headers={
                    "Authorization": f"Bearer {key}",
                    "User-Agent": f"postbag-client/{__version__}",
                },
                timeout=timeout,
            )
        )

    @classmethod
    def in_process(cls, app: Any, authorization: str) -> ApiClient:
        """A client of the api app `app` itself, over ASGI, sending the caller's header."""
        return cls(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://postbag.internal",
                headers={"Authorization": authorization},
            )
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Mapping[str, Any] | None,
    ) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await self._http.request(method, f"/v1{path}", params=query, json=body)
        except httpx.TransportError as exc:
            raise ApiRefused(0, "unreachable", f"{self._http.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise _refusal(response)
        return response

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """The JSON answer of one `/v1` call (None for `204`)."""
        response = await self._send(method, path, params, body)
        return None if response.status_code == 204 else response.json()

    async def text(self, path: str, *, params: Mapping[str, Any] | None = None) -> str:
        """The text answer of one `GET /v1…` (the CSV export)."""
        return (await self._send("GET", path, params, None)).text
