"""The Telegram adapter: Bot API `sendMessage`, the bot token being the destination secret."""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from core.adapters.base import AdapterConfig, ValidationContext

_BOT_TOKEN = re.compile(r"^\d{3,20}:[A-Za-z0-9_-]{20,100}$")


class TelegramConfig(AdapterConfig):
    """`{"chat_id": "-1001234567890"}` (a numeric id or `@channelname`)."""

    chat_id: str = Field(pattern=r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$")


class TelegramAdapter:
    type: ClassVar[str] = "telegram"
    Config: ClassVar[builtins.type[AdapterConfig]] = TelegramConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        return TelegramConfig.model_validate(config, context=ctx)

    def validate_secret(self, secret: str) -> None:
        if not _BOT_TOKEN.match(secret):
            raise ValueError("must be a Telegram bot token (123456:ABC…)")

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, TelegramConfig)
        return {"chat_id": config.chat_id}

    def target(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, TelegramConfig)
        return {"chat_id": config.chat_id}


adapter = TelegramAdapter()
