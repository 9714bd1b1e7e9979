"""The public intake app: `POST /s/{form}`, its preflight, and `/health`."""

from __future__ import annotations

import base64
import hashlib
import html
import time
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from core.http import email_events, health, home
from core.http.problems import install_problem_handlers, problem_for
from core.intake.checks import origin_allowed
from core.intake.form import Form, form_for_submit, resolve_form
from core.intake.submit import Receipt, SubmitRequest
from core.intake.submit import submit as run_submit
from core.intake.visitor import client_address
from core.outbox.wakeup import wake_deliveries
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput, PostbagError
from core.platform.ids import is_id
from core.platform.metrics import count_submission
from core.platform.services import Services
from core.spam.filltime import fill_token as issue_fill_token

_PREFLIGHT_HEADERS = "Content-Type, Accept, Idempotency-Key"

_THANK_YOU_STYLE = (
    "body{font:1.1rem/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}"
    ".local{border:2px solid #b45309;padding:0 1rem}"
)
_THANK_YOU = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Thank you</title>
<style>{style}</style>
</head>
<body>
<main>
<h1>Thank you</h1>
<p role="status">Your submission was received.</p>
<p>Reference: <code>{receipt}</code></p>
{notice}{back}
</main>
</body>
</html>
"""
# The page's one style block is allowed by its hash; nothing else may load or run.
_THANK_YOU_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'sha256-"
        + base64.b64encode(hashlib.sha256(_THANK_YOU_STYLE.encode()).digest()).decode()
        + "'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _thank_you(receipt: str, referrer: str | None, notice: str) -> str:
    """The built-in page (with the local runner's `notice`), and a link back to the form's
    page when the browser named it."""
    back = ""
    if referrer and urlsplit(referrer).scheme in ("http", "https"):
        back = f'<p><a href="{html.escape(referrer)}">Back to the form</a></p>'
    return _THANK_YOU.format(
        style=_THANK_YOU_STYLE, receipt=html.escape(receipt), notice=notice, back=back
    )


# The local runner only: why a post was not accepted. Production answers spam and quarantined
# posts exactly like accepted ones, so that bots learn nothing.
_LOCAL_NOTICE = """<aside class="local">
<p><strong>Local runner only:</strong> this post was stored as <strong>{status}</strong>
(<code>{reason}</code>) and will not be delivered.
<a href="/app/submissions/{receipt}">Open its receipt</a>.</p>
{onward}</aside>
"""


def _local_notice(receipt: Receipt, redirect_url: str | None) -> str:
    """The thank-you page's notice for a post that was not accepted (local runner only)."""
    if receipt.status == "accepted":
        return ""
    onward = ""
    if redirect_url:
        target = html.escape(_redirect_target(redirect_url, receipt.id))
        onward = f'<p>The form redirects to <a href="{target}">{target}</a>.</p>\n'
    return _LOCAL_NOTICE.format(
        status=html.escape(receipt.status),
        reason=html.escape(receipt.reason or ""),
        receipt=html.escape(receipt.id),
        onward=onward,
    )


_REFUSED = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{heading}</title>
<style>
body{{font:1.1rem/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}}
</style>
</head>
<body>
<main>
<h1>{heading}</h1>
<p role="alert">{message}</p>
{errors}<p><a href="{back}">Go back to the form</a></p>
</main>
</body>
</html>
"""

# The page's heading for each refusal status; any other refusal is "Not sent".
_HEADINGS = {
    403: "This form is closed",
    404: "Form not found",
    413: "Too much to send",
    415: "This form cannot be sent",
    422: "Please check the form",
    503: "Please try again in a moment",
}


def _cors_headers(form: Form | None, origin: str | None) -> dict[str, str]:
    """Echo an origin on the form's allowlist; an opaque (`null`) origin is never echoed."""
    if form is None or not origin or origin == "null" or not origin_allowed(form, origin):
        return {"Vary": "Origin"}
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


def _wants_json(request: Request, receipt: Receipt) -> bool:
    return receipt.is_json or "application/json" in request.headers.get("accept", "")


def _wants_page(request: Request) -> bool:
    """A plain HTML form post: a browser asking for HTML, not a JSON client."""
    accept = request.headers.get("accept", "")
    content_type = request.headers.get("content-type", "")
    return (
        "text/html" in accept
        and "application/json" not in accept
        and not content_type.startswith("application/json")
    )


def _back_link(request: Request, form: Form | None) -> str:
    """The page the visitor came from when it is on the form's allowed origins."""
    referer = request.headers.get("referer", "")
    parts = urlsplit(referer)
    if form is None or parts.scheme not in ("http", "https") or not parts.netloc:
        return "javascript:history.back()"
    if not origin_allowed(form, f"{parts.scheme}://{parts.netloc}"):
        return "javascript:history.back()"
    return referer


def _refusal(request: Request, form: Form | None, exc: PostbagError) -> Response:
    """problem+json for JSON clients; for a plain HTML form post, a small page with the same
    status and headers: the message, each field's error, and a link back."""
    problem = problem_for(exc)
    if not _wants_page(request):
        return problem
    message = str(exc)
    errors = exc.errors if isinstance(exc, InvalidInput) else []
    items = "".join(
        f"<li><strong>{html.escape(str(e.get('field', '')))}</strong>: "
        f"{html.escape(str(e.get('message', '')))}</li>"
        for e in errors
    )
    page = _REFUSED.format(
        heading=_HEADINGS.get(problem.status_code, "Not sent"),
        message=html.escape(message[:1].upper() + message[1:].rstrip(".") + "."),
        errors=f"<ul>{items}</ul>\n" if items else "",
        back=html.escape(_back_link(request, form)),
    )
    headers = {
        k: v
        for k, v in problem.headers.items()
        if k.lower() not in ("content-type", "content-length")
    }
    return HTMLResponse(page, status_code=problem.status_code, headers=headers)


def _redirect_target(redirect_url: str, receipt: str) -> str:
    parts = urlsplit(redirect_url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("receipt", receipt)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _answer(request: Request, form: Form, receipt: Receipt, headers: dict[str, str]) -> Response:
    if _wants_json(request, receipt):
        body: dict[str, Any] = {"receipt": receipt.id, "status": "received"}
        if receipt.duplicate:
            body["duplicate"] = True
        return JSONResponse(body, status_code=200 if receipt.duplicate else 201, headers=headers)
    notice = _local_notice(receipt, form.redirect_url) if request.app.state.local else ""
    if form.redirect_url and not notice:
        return RedirectResponse(
            _redirect_target(form.redirect_url, receipt.id), status_code=303, headers=headers
        )
    page = _thank_you(receipt.id, request.headers.get("referer"), notice)
    return HTMLResponse(page, headers={**headers, **_THANK_YOU_HEADERS})


def _client(request: Request, services: Services) -> str:
    peer = request.client.host if request.client else None
    return client_address(
        peer, request.headers.get("x-forwarded-for"), services.settings.trusted_proxies
    )


async def submit(request: Request) -> Response:
    """`POST /s/{form}`: a plain Starlette endpoint, since this is the hot path."""
    services: Services = request.app.state.services
    now: datetime = request.app.state.clock()
    form_id: str = request.path_params["form_id"]
    origin = request.headers.get("origin")
    client = _client(request, services)
    started = time.perf_counter()
    form: Form | None = None
    try:
        form = await form_for_submit(services, form_id, client=client, now=now)
        receipt = await run_submit(
            services,
            form,
            SubmitRequest(
                content_type=request.headers.get("content-type"),
                content_length=request.headers.get("content-length"),
                body=request.stream(),
                client=client,
                origin=origin,
                referrer=request.headers.get("referer"),
                accept_language=request.headers.get("accept-language"),
                idempotency_key=request.headers.get("idempotency-key"),
            ),
            now=now,
        )
    except PostbagError as exc:
        refusal = _refusal(request, form, exc)
        refusal.headers.update(_cors_headers(form, origin))
        count_submission("refused", time.perf_counter() - started)
        return refusal
    form = receipt.form or form
    response = _answer(request, form, receipt, _cors_headers(form, origin))
    count_submission(
        "duplicate" if receipt.duplicate else receipt.status, time.perf_counter() - started
    )
    if receipt.deliveries:
        response.background = BackgroundTask(wake_deliveries, services)
    return response


async def preflight(request: Request) -> Response:
    """`OPTIONS /s/{form}`: CORS preflight for the form's allowed origins."""
    services: Services = request.app.state.services
    origin = request.headers.get("origin")
    form = await resolve_form(
        services,
        request.path_params["form_id"],
        client=_client(request, services),
        now=request.app.state.clock(),
    )
    headers = _cors_headers(form, origin)
    if "Access-Control-Allow-Origin" in headers:
        headers.update(
            {
                "Access-Control-Allow-Methods": "POST, OPTIONS",
                "Access-Control-Allow-Headers": _PREFLIGHT_HEADERS,
                "Access-Control-Max-Age": "86400",
            }
        )
    return Response(status_code=204, headers=headers)


async def fill_token(request: Request) -> Response:
    """`GET /s/{form}/token`: a fresh fill-time token for the form's page (docs/spam.md).
    Not secret and not stored: any page may fetch one, none reads the database."""
    services: Services = request.app.state.services
    form_id: str = request.path_params["form_id"]
    if not is_id(form_id, "frm"):
        return PlainTextResponse("no such form\n", status_code=404)
    token = issue_fill_token(
        services.settings.require_secret_key(), form_id, request.app.state.clock()
    )
    return PlainTextResponse(
        token, headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store"}
    )


def create_submit_app(services: Services, *, local: bool = False) -> Starlette:
    """Build the submit app around one process's services (plain Starlette: a small cold start).

    `local` (the local runner only) serves the start page at `/` and tells on the thank-you
    page why a post was stored as spam or quarantined.
    """
    app = Starlette(
        routes=[
            Route("/", home.local_home if local else home.running, methods=["GET"]),
            Route("/health", health.health, methods=["GET"]),
            Route("/s/unsubscribe/{token}", email_events.unsubscribe_page, methods=["GET"]),
            Route("/s/unsubscribe/{token}", email_events.unsubscribe, methods=["POST"]),
            Route("/s/email/events/resend", email_events.resend_events, methods=["POST"]),
            Route("/s/email/events/ses", email_events.ses_events, methods=["POST"]),
            Route("/s/{form_id}", submit, methods=["POST"]),
            Route("/s/{form_id}", preflight, methods=["OPTIONS"]),
            Route("/s/{form_id}/token", fill_token, methods=["GET"]),
        ]
    )
    app.state.services = services
    app.state.local = local
    app.state.clock = utcnow  # tests may replace it
    install_problem_handlers(app)
    return app
