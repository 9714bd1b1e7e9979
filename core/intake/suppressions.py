"""The installation's suppression list (docs/autoresponse.md#the-suppression-list): mailboxes
no autoresponse goes to, added by the recipient's unsubscribe or a provider's bounce or
complaint. The submit statement reads it when it plans an autoresponse; mailboxes are kept
only as the HMAC the autoresponse bounds count them by (`recipient_hash`)."""

from __future__ import annotations

from datetime import datetime

from core.intake.visitor import recipient_hash
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.vocabulary import SuppressionReason


async def suppress_hashes(
    services: Services, hashes: list[bytes], reason: SuppressionReason, *, now: datetime
) -> None:
    """Add the mailboxes of `hashes` to the suppression list."""
    if not hashes:
        return
    async with services.db.transaction() as conn:
        await conn.execute(
            queries["suppress_addresses"], {"hashes": hashes, "reason": reason, "now": now}
        )
    log.info("addresses suppressed", extra={"detail": {"count": len(hashes), "reason": reason}})


async def suppress_addresses(
    services: Services, addresses: list[str], reason: SuppressionReason, *, now: datetime
) -> None:
    """Add `addresses`' mailboxes (a provider's bounce or complaint) to the suppression list."""
    key = services.settings.require_secret_key()
    await suppress_hashes(
        services,
        [recipient_hash(address, key) for address in addresses if address],
        reason,
        now=now,
    )
