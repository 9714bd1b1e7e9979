from __future__ import annotations

from core.platform.kept import Kept


def test_kept__bounded_the_oldest_dropped_first() -> None:
    kept: Kept[int] = Kept(2)
    kept.keep("a", 1)
    kept.keep("b", 2)
    kept.keep("a", 3)  # kept again: now the newest
    kept.keep("c", 4)  # full: the oldest, `b`, goes
    assert [kept.get(k) for k in "abc"] == [3, None, 4]
    kept.forget("a")
    assert kept.get("a") is None
