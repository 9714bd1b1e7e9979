"""Files: every stored object due for deletion deleted through the storage interface, each
leased to one pass. A failure counts an attempt and is retried on the next pass; at the cap
the object is stuck: an alert is opened and `/health` lists it."""

from __future__ import annotations

import time
from collections import Counter

from core.owner.alerts import raise_alert
from core.platform.errors import PostbagError
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.storage import Storage, storage_for
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter()
    storage = ctx.options.storage or storage_for(ctx.services.settings.storage_url)
    while time.monotonic() < ctx.deadline:
        async with ctx.services.db.connection() as conn:
            cur = await conn.execute(
                queries["claim_object_deletions"],
                {
                    "now": ctx.now,
                    "lease": ctx.options.delete_lease,
                    "max_attempts": ctx.options.max_delete_attempts,
                    "limit": ctx.options.delete_batch,
                },
            )
            claimed = await cur.fetchall()
        for row in claimed:
            await _delete_one(ctx, storage, row["storage_key"], stats)
        if len(claimed) < ctx.options.delete_batch:
            break
    return stats


async def _delete_one(ctx: PassContext, storage: Storage, key: str, stats: Counter[str]) -> None:
    try:
        await storage.delete(key)
    except PostbagError as exc:
        stats["delete_failures"] += 1
        async with ctx.services.db.transaction() as conn:
            cur = await conn.execute(
                queries["mark_object_delete_failed"],
                {"storage_key": key, "error": str(exc), "now": ctx.now},
            )
            row = await cur.fetchone()
            if row is not None and row["delete_attempts"] >= ctx.options.max_delete_attempts:
                await raise_alert(
                    conn,
                    organization_id=row["organization_id"],
                    kind="storage.stuck",
                    subject_id=row["submission_id"],
                    detail=f"a stored file could not be deleted: {exc}"[:500],
                    delivery_id=None,
                    now=ctx.now,
                )
        log.warning(
            "could not delete a stored object",
            extra={"org_id": row["organization_id"] if row else None, "detail": str(exc)},
        )
        return
    async with ctx.services.db.connection() as conn:
        await conn.execute(queries["mark_object_deleted"], {"storage_key": key, "now": ctx.now})
    stats["files_deleted"] += 1
