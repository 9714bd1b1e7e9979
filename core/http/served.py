"""The routes an app serves, with their full paths, read off the routers as declared.

FastAPI 0.16x keeps an included router whole (`app.routes` holds a wrapper with the
router and its prefix) and builds each route's effective copy on first use, about 2 ms a
route; its `iter_route_contexts` builds them all. Reading the declared routes costs
nothing: the path is the prefixes joined, the methods and dependencies are the route's
own. Older FastAPI copies each route into the app with its full path, read as it is.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from starlette.routing import BaseRoute


@dataclass(frozen=True, slots=True)
class Served:
    """A route as the app serves it: its full path, its methods and the route declared."""

    path: str
    methods: frozenset[str]
    route: BaseRoute


def served_routes(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[Served]:
    """Every route under `routes`, included routers walked into, in the order declared."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            yield from served_routes(included.routes, prefix + getattr(context, "prefix", ""))
            continue
        path = getattr(route, "path", None)
        if isinstance(path, str):
            methods = frozenset(getattr(route, "methods", None) or ())
            yield Served(prefix + path, methods, route)
