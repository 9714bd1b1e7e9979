"""When a maintenance pass is due: on every tick when its cadence is the tick's, else on the
first tick of each window of its cadence."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from core.ticks.maintenance import MINUTE, MaintenancePass, PassContext


async def _nothing(ctx: PassContext) -> Counter[str]:
    return Counter()


def test_is_due__a_pass_of_the_ticks_cadence_runs_on_every_tick() -> None:
    every_minute = MaintenancePass("m", MINUTE, _nothing)
    start = datetime(2027, 3, 1, 9, 0, 17, tzinfo=UTC)
    ticks = [start + timedelta(seconds=61 * n) for n in range(120)]
    assert all(every_minute.is_due(at, interval=MINUTE) for at in ticks)


def test_is_due__a_longer_cadence_runs_on_the_first_tick_of_each_window() -> None:
    quarterly = MaintenancePass("q", timedelta(minutes=15), _nothing)
    start = datetime(2027, 3, 1, 9, 0, 17, tzinfo=UTC)
    ticks = [start + timedelta(minutes=n) for n in range(60)]
    due = [at for at in ticks if quarterly.is_due(at, interval=MINUTE)]
    assert [(at.hour, at.minute) for at in due] == [(9, 0), (9, 15), (9, 30), (9, 45)]
