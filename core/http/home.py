"""`GET /`: a plain "Postbag is running" in the cloud; the local runner's start page.

Neither page runs a script. The cloud page shows no data at all; the local page (served by
the local runner only, on a developer's machine) shows the installation's oldest form, the
one the first start created, with its HTML snippet.
"""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from core.platform.services import Services

RUNNING = "Postbag is running\n"

_LOCAL_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Postbag (local)</title>
<style>
body{{font:1rem/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem}}
pre{{background:#f4f4f4;padding:1rem;overflow-x:auto}}
</style>
</head>
<body>
<main>
<h1>Postbag is running</h1>
<p>This is the local runner: the submit endpoint, the management API, the dashboard and
the delivery worker in one process, for development.</p>
<ul>
<li><a href="/app">Dashboard</a> (open the sign-in link <code>postbag dev</code> printed;
each start prints a new one)</li>
<li><a href="/v1/docs">API reference</a> (<a href="/v1/openapi.json">OpenAPI</a>)</li>
<li><a href="/health">Health</a></li>
</ul>
{form}
</main>
</body>
</html>
"""

_FORM = """<h2>{name}</h2>
<p>Paste this form into any page; it posts to <code>{url}</code>.</p>
<pre><code>{snippet}</code></pre>
<p>Or from a terminal: <code>curl -d email=ada@example.com -d message=Hello {url}</code></p>
"""

_NO_FORM = '<p>No form yet: create one in the <a href="/app/forms">dashboard</a>.</p>'


async def running(_request: Request) -> Response:
    """The cloud's `GET /`: says it runs, and nothing else."""
    return PlainTextResponse(RUNNING)


async def local_home(request: Request) -> Response:
    """The local runner's `GET /`: what runs, where, and the quick-start form's snippet."""
    # Imported here: the owner's modules bring pydantic, which the cloud submit function's
    # cold start does without (only the local runner serves this page).
    from core.owner.forms import html_snippet, oldest_form, submit_url

    services: Services = request.app.state.services
    async with services.db.connection() as conn:
        form = await oldest_form(conn)
    section = _NO_FORM
    if form is not None:
        url = submit_url(services.settings, form["id"])
        section = _FORM.format(
            name=html.escape(form["name"]),
            url=html.escape(url),
            snippet=html.escape(html_snippet(form, url)),
        )
    return HTMLResponse(_LOCAL_PAGE.format(form=section))
