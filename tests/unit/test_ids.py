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


def test_new_id__its_digits_are_the_milliseconds_and_80_random_bits() -> None:
    made = new_id("evt", now_ms=1_700_000_000_123)
    value = 0
    for digit in made.removeprefix("evt_"):
        value = value * 32 + "0123456789abcdefghjkmnpqrstvwxyz".index(digit)
    assert value >> 80 == 1_700_000_000_123
