"""The role table: each role holds what the roles after it hold, and a refusal names the least
role that may act."""

from __future__ import annotations

from typing import get_args

import pytest

from core.owner.roles import LEAST_ROLE, ROLES, Actor, Permission, may, require
from core.platform.errors import Forbidden


def test_roles_are_ordered_most_powerful_first() -> None:
    assert ROLES == ("owner", "admin", "operator", "viewer")
    for permission in get_args(Permission):
        holders = [role for role in ROLES if may(role, permission)]
        assert holders == list(ROLES[: len(holders)]), permission
        assert holders[-1] == LEAST_ROLE[permission]


def test_a_viewer_reads_but_never_values() -> None:
    assert may("viewer", "read")
    assert not may("viewer", "read_values")
    assert not may("operator", "configure")
    assert not may("admin", "manage_members")


def test_require_names_the_least_role_that_may() -> None:
    viewer = Actor(kind="key", id="key_1", name="support", role="viewer")
    with pytest.raises(Forbidden) as refused:
        require(viewer, "operate")
    assert refused.value.needed == "operator"
    require(Actor(kind="member", id="mem_1", name="Ann", role="owner"), "manage_members")
