"""A change's unit of work: one transaction holds the change and its audit row, and what
must follow the commit (waking the deliverers) runs only once it has committed.

Every change an owner or a visitor makes through `/v1`, the dashboard or `/mcp` (or the
operator through the CLI) is a use case that runs in a `Change`: `async with change as
conn:` opens the organization's scoped transaction; when the block ends without an error
the audit row is appended in that same transaction, which then commits, and the
after-commit calls run. An error anywhere, the audit append's
included, rolls back the change too: the change and its audit row commit together or not
at all (a client answered `503` may retry: nothing was made).
"""

from __future__ import annotations

import contextlib
import getpass
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType

from core import __version__
from core.owner import audit
from core.owner.roles import Actor
from core.platform.db import Conn, Database
from core.platform.scope import OrgScope
from core.platform.vocabulary import AuditVia


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a change or a read came from: the surface, the client's address and agent."""

    via: AuditVia
    ip: str | None
    user_agent: str | None


@dataclass(frozen=True, slots=True)
class Acting:
    """Who acts for an organization, and from where."""

    scope: OrgScope
    actor: Actor
    origin: Origin

    def entry(
        self, action: str, subject: str | None, changed: tuple[str, ...] | None = None
    ) -> audit.AuditEntry:
        """The audit row of `action` on `subject` by this actor (with the names of what
        it `changed`, if said)."""
        return audit.AuditEntry(
            actor_kind=self.actor.kind,
            actor_id=self.actor.id,
            actor_name=self.actor.name,
            action=action,
            subject=subject,
            via=self.origin.via,
            ip=self.origin.ip,
            user_agent=self.origin.user_agent,
            changed=changed,
        )

    async def record(
        self,
        conn: Conn,
        action: str,
        subject: str | None,
        changed: tuple[str, ...] | None = None,
    ) -> None:
        """Append `action` on `subject` within the caller's transaction (a change that is
        not a route's: a member joining by invitation, a password reset)."""
        await audit.record(conn, self.scope, self.entry(action, subject, changed))


def operator(scope: OrgScope) -> Acting:
    """The operator at the `postbag` command line (on the database, with no key), acting as
    an owner: the operating system's user names them."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's user without a passwd entry)
        user = "operator"
    origin = Origin("cli", None, f"postbag/{__version__}")
    return Acting(scope, Actor("operator", "cli", user, "owner"), origin)


class Change:
    """One change by `acting`, recorded as `action` on `subject` (either may be set inside
    the block: a create names what it made, a destination change that sets a new secret is
    `destination.secret_rotated`)."""

    def __init__(
        self, db: Database, acting: Acting, action: str, *, subject: str | None = None
    ) -> None:
        self.db = db
        self.acting = acting
        self.action = action
        self.subject = subject
        # The names of what the change changed (a form's settings), recorded with it.
        self.changed: tuple[str, ...] | None = None
        self.recorded = False
        self._after: list[Callable[[], Awaitable[None]]] = []
        self._stack: contextlib.AsyncExitStack | None = None
        self._conn: Conn | None = None
        self._member_wide = False

    @property
    def scope(self) -> OrgScope:
        return self.acting.scope

    def after_commit(self, call: Callable[[], Awaitable[None]]) -> None:
        """Run `call` once the change has committed (never when it rolls back)."""
        self._after.append(call)

    def member_wide(self) -> Change:
        """This change, made on the acting member's own rows (their sessions, their
        two-factor sign-in), which span their organizations: its transaction runs as the
        owner role rather than scoped to one organization; the audit row still goes to the
        organization's chain."""
        self._member_wide = True
        return self

    async def __aenter__(self) -> Conn:
        if self._stack is not None or self.recorded:
            raise RuntimeError(f"{self.action}: a change opens its transaction once")
        stack = contextlib.AsyncExitStack()
        opened = self.db.transaction() if self._member_wide else self.db.scoped(self.scope)
        self._conn = await stack.enter_async_context(opened)
        self._stack = stack
        return self._conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        stack, conn = self._stack, self._conn
        assert stack is not None and conn is not None
        self._stack = self._conn = None
        if error is None:
            try:
                subject = self.subject or self.acting.scope.organization_id
                await self.acting.record(conn, self.action, subject, self.changed)
            except BaseException as failed:
                await stack.__aexit__(type(failed), failed, failed.__traceback__)
                raise
        await stack.__aexit__(kind, error, traceback)
        if error is None:
            self.recorded = True
            for call in self._after:
                await call()
