"""The organization scope every tenant repository requires."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from core.platform.errors import MissingScope


@dataclass(frozen=True, slots=True)
class OrgScope:
    """The organization a piece of tenant work runs for."""

    organization_id: str

    def __post_init__(self) -> None:
        if not self.organization_id.startswith("org_"):
            raise MissingScope(f"not an organization id: {self.organization_id!r}")


P = ParamSpec("P")
R = TypeVar("R")


def scoped(
    func: Callable[Concatenate[Any, OrgScope, P], Awaitable[R]],
) -> Callable[Concatenate[Any, OrgScope, P], Awaitable[R]]:
    """Make a repository function refuse to run, before any SQL, without an OrgScope."""

    @functools.wraps(func)
    async def wrapper(conn: Any, scope: OrgScope, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not isinstance(scope, OrgScope):
            raise MissingScope(f"{func.__qualname__} needs an OrgScope, got {scope!r}")
        return await func(conn, scope, *args, **kwargs)

    return wrapper
