"""Implicit ham (docs/spam.md#implicit-ham): an accepted submission delivered and not marked
as spam within its form's grace period teaches the learned filter "not spam", once. The
submit statement queues when that is due (a row of `ham_due`, migrations/0065); this pass
takes the due ones, `batch` at a time in one transaction each (`FOR UPDATE SKIP LOCKED`:
passes on several machines take different rows), teaches or drops each, and deletes its row.
One still on its way to a destination is due again an hour later, for a week."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

from core.platform.queries import queries
from core.spam.model import train
from core.spam.verdict import model_changed
from core.ticks.maintenance import PassContext

# A submission whose delivery is still on its way is looked at again this much later.
WAIT = timedelta(hours=1)


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter(implicit_ham_taught=0)
    for _ in range(ctx.options.max_batches):
        taught: set[str] = set()
        async with ctx.services.db.transaction() as conn:
            cur = await conn.execute(
                queries["lock_due_ham"], {"now": ctx.now, "limit": ctx.options.ham_batch}
            )
            due = await cur.fetchall()
            if not due:
                break
            for row in due:
                if row["outcome"] != "teach":
                    continue
                await train(
                    conn,
                    organization_id=row["organization_id"],
                    submission_id=row["id"],
                    label="ham",
                    values=row["values"],
                    secret_key=ctx.services.settings.require_secret_key(),
                    now=ctx.now,
                )
                taught.add(row["organization_id"])
                stats["implicit_ham_taught"] += 1
            waiting = [row["id"] for row in due if row["outcome"] == "wait"]
            await conn.execute(
                queries["settle_due_ham"],
                {
                    "ids": [row["id"] for row in due if row["outcome"] != "wait"],
                    "waiting": waiting,
                    "later": ctx.now + WAIT,
                },
            )
        for organization_id in taught:
            model_changed(ctx.services, organization_id)
        stats["implicit_ham_waiting"] += len(waiting)
        stats["implicit_ham_dropped"] += sum(1 for row in due if row["outcome"] == "drop")
        if len(due) < ctx.options.ham_batch or time.monotonic() > ctx.deadline:
            break
    return stats
