"""`GET /v1/docs`: Swagger UI 5 from the installed `fastapi-offline` package, no CDN.

The page loads the bundle's script and style from `/v1/docs/assets/` and starts it from
`/v1/docs/init.js`, so it runs under a Content-Security-Policy without inline script.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/v1/docs"
ASSETS_PATH = f"{DOCS_PATH}/assets"
# The package's copies of swagger-ui-bundle.js and swagger-ui.css (only its files are used).
ASSETS_DIRECTORY = str(files("fastapi_offline") / "static")

_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Postbag management API</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="{DOCS_PATH}/init.js"></script>
</body>
</html>
"""

_INIT = """window.ui = SwaggerUIBundle({
  url: "/v1/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


async def docs_page(_request: Request) -> Response:
    return HTMLResponse(_PAGE)


async def docs_init(_request: Request) -> Response:
    return Response(_INIT, media_type="text/javascript; charset=utf-8")


def install_api_docs(app: FastAPI) -> None:
    """Serve the docs page, its starter script and the bundle's files."""
    app.add_route(DOCS_PATH, docs_page, methods=["GET"], include_in_schema=False)
    app.add_route(f"{DOCS_PATH}/init.js", docs_init, methods=["GET"], include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIRECTORY), name="api-docs-assets")
