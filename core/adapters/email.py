"""The email adapter: one message per submission through SES, Resend, SMTP or the log."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import EmailStr, Field

from core.adapters.base import AdapterConfig, ValidationContext


class EmailConfig(AdapterConfig):
    """`{"to": ["owner@example.com"]}`: one to ten recipients."""

    to: list[EmailStr] = Field(min_length=1, max_length=10)


class EmailAdapter:
    type: ClassVar[str] = "email"
    Config: ClassVar[builtins.type[AdapterConfig]] = EmailConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = False

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        return EmailConfig.model_validate(config, context=ctx)

    def validate_secret(self, secret: str) -> None:  # noqa: ARG002 - the interface's signature
        raise ValueError("email destinations take no secret")

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, EmailConfig)
        return {"to": list(config.to)}

    def target(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, EmailConfig)
        return {"to": list(config.to)}


adapter = EmailAdapter()
