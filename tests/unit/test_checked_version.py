from __future__ import annotations

from core.schemas.versions import Version, checked_version

OWNER = Version(3, {"type": "object"}, "manual")
TYPED = Version(4, {"type": "object", "required": ["order"]}, "manual")
SUGGESTED = Version(5, {"type": "object"}, "suggested")


def test_checked_version__the_events_type_else_the_default() -> None:
    current = {None: OWNER, "order.paid": TYPED}
    assert checked_version("enforce", current, "order.paid") is TYPED
    assert checked_version("enforce", current, "signup") is OWNER
    assert checked_version("observe", {"order.paid": TYPED}, "signup") is None


def test_checked_version__off_checks_nothing_and_enforce_only_the_owners() -> None:
    assert checked_version("off", {None: OWNER}) is None
    assert checked_version("enforce", {None: OWNER}) is OWNER
    # A form without an owner's version reads its latest suggestion: only `observe` uses it.
    assert checked_version("enforce", {None: SUGGESTED}) is None
    assert checked_version("observe", {None: SUGGESTED}) is SUGGESTED
    assert checked_version("observe", {}) is None
