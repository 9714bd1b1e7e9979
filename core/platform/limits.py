"""Limits more than one room holds to."""

from __future__ import annotations

# The most fields a submission may carry, and the most field columns a CSV export has.
MAX_FIELDS = 200
