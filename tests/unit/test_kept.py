from __future__ import annotations

from core.platform.db import Database
from core.platform.kept import Kept


def test_kept__bounded_per_database_the_oldest_dropped_first() -> None:
    one, other = Database("postgresql://one"), Database("postgresql://other")
    kept: Kept[int] = Kept(2)
    kept.keep(one, "a", 1)
    kept.keep(one, "b", 2)
    kept.keep(other, "a", 10)
    kept.keep(one, "a", 3)  # kept again: now the newest of `one`
    kept.keep(one, "c", 4)  # `one` is full: its oldest, `b`, goes
    assert [kept.get(one, k) for k in "abc"] == [3, None, 4]
    assert kept.get(other, "a") == 10
    kept.forget(one, "a")
    assert kept.get(one, "a") is None
    assert kept.get(other, "a") == 10
