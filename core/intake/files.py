"""Writing a submission's attachments to storage, before its transaction.

Each key is recorded in `stored_objects` before its bytes are written, so a submit that
fails after the upload leaves a row retention can find and delete, never an orphan. The
bytes are counted against the plan's monthly attachment bytes in the same transaction,
and refused (nothing written) when they would exceed it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.intake.attachments import CheckedFile
from core.intake.form import Form
from core.owner.plans import PLANS
from core.owner.usage import reserve_attachment_bytes
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.storage import storage_for


async def store_files(
    services: Services, form: Form, submission_id: str, files: list[CheckedFile], now: datetime
) -> list[dict[str, Any]]:
    """Write each file under the submission's id, recording its key first."""
    if not files:
        return []
    rows: list[dict[str, Any]] = []
    for checked in files:
        attachment_id = new_id("att")
        rows.append(
            {
                "id": attachment_id,
                "field": checked.upload.field,
                "name": checked.upload.name,
                "content_type": checked.content_type,
                "size": checked.upload.size,
                "sha256": checked.upload.sha256.hex(),
                "storage_key": f"{form.organization_id}/{submission_id}/{attachment_id}",
            }
        )
    async with services.db.transaction() as conn:
        await reserve_attachment_bytes(
            conn,
            organization_id=form.organization_id,
            plan=PLANS[form.plan],
            size=sum(checked.upload.size for checked in files),
            now=now,
        )
        await conn.execute(
            queries["insert_stored_objects"],
            {
                "organization_id": form.organization_id,
                "submission_id": submission_id,
                "storage_keys": [row["storage_key"] for row in rows],
                "now": now,
            },
        )
    storage = storage_for(services.settings.storage_url)
    for checked, row in zip(files, rows, strict=True):
        await storage.put(row["storage_key"], checked.upload.path, content_type=row["content_type"])
    return rows
