"""The figures of a destination's rate limit (docs/delivery.md#rate-limits): each type's
default rate, the bounds of the rate an owner sets, and how a 429 lowers a rate and how fast
it recovers. The owner's settings check against them; the outbox's token bucket
(`core.outbox.rates`) spends by them."""

from __future__ import annotations

import json

from core.destinations.registry import ADAPTERS

# A 429 halves the rate a destination sends at; it doubles back every RECOVER seconds
# without another 429, up to the full rate.
RECOVER = 60.0
# The lowest a 429 takes a rate: one send a minute (or the owner's own rate, if lower).
FLOOR = 1 / 60
# The bounds of a rate the owner sets, per second: one every 1,000 s to a thousand.
MIN_RATE = 0.001
MAX_RATE = 1000.0
# Each type's default rate (`Adapter.rate_per_second`), as the statements read it: a
# destination without a rate of its own sends at its type's, if it has one.
TYPE_RATES = json.dumps(
    {name: adapter.rate_per_second for name, adapter in ADAPTERS.items() if adapter.rate_per_second}
)
