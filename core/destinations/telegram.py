"""The Telegram adapter: Bot API `sendMessage`, the bot token being the destination secret."""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from core.destinations import http
from core.destinations.base import AdapterConfig, BaseAdapter, DeliveryContext, Result
from core.destinations.text import message

# Telegram refuses longer messages.
MAX_TEXT = 4096

_BOT_TOKEN = re.compile(r"^\d{3,20}:[A-Za-z0-9_-]{20,100}$")


class TelegramConfig(AdapterConfig):
    """`{"chat_id": "-1001234567890"}` (a numeric id or `@channelname`)."""

    chat_id: str = Field(
        title="Telegram chat id",
        description="a numeric chat id or @channelname",
        pattern=r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$",
    )


class TelegramAdapter(BaseAdapter):
    type: ClassVar[str] = "telegram"
    label: ClassVar[str] = "Telegram"
    Config: ClassVar[builtins.type[AdapterConfig]] = TelegramConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True
    secret_hint: ClassVar[str] = "the bot token (123456:ABC…)"
    # Telegram: about one message a second per chat (20 a minute in a group).
    rate_per_second: ClassVar[float | None] = 1.0

    def validate_secret(self, secret: str) -> None:
        if not _BOT_TOKEN.match(secret):
            raise ValueError("must be a Telegram bot token (123456:ABC…)")

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        subject, text = message(payload, ctx.template, limit=MAX_TEXT)
        body = {
            "chat_id": target.get("chat_id"),
            "text": f"{subject}\n\n{text}"[:MAX_TEXT],
            "disable_web_page_preview": True,
        }
        base = str(ctx.settings.telegram_api_url).rstrip("/")
        # The URL holds the bot token: `http.post` records class names, never messages.
        return await http.post(
            ctx.http,
            f"{base}/bot{ctx.secret}/sendMessage",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            timeout=ctx.timeout,
            retry_after=_telegram_retry_after,
        )


def _telegram_retry_after(body: bytes) -> float | None:
    """Telegram's `parameters.retry_after` (seconds) from a 429 answer."""
    try:
        answer = json.loads(body)
        seconds = answer["parameters"]["retry_after"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(seconds, int | float) and seconds > 0:
        return float(seconds)
    return None


adapter = TelegramAdapter()
