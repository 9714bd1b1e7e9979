from __future__ import annotations

import re

import pytest

from core.platform.ids import new_id


def test_new_id__prefixed_and_time_ordered() -> None:
    earlier = new_id("sub", now_ms=1_700_000_000_000)
    later = new_id("sub", now_ms=1_700_000_000_001)
    assert re.fullmatch(r"sub_[0-9a-hjkmnp-tv-z]{26}", earlier)
    assert earlier < later
    assert len({new_id("dlv") for _ in range(1000)}) == 1000


def test_new_id__unknown_prefix_refused() -> None:
    with pytest.raises(ValueError):
        new_id("xyz")
