"""The webhook adapter, the reference implementation: a signed JSON POST (SPEC §5)."""

from __future__ import annotations

import base64
import builtins
import ipaddress
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import ValidationInfo, field_validator

from core.adapters.base import AdapterConfig, ValidationContext

MAX_URL_LENGTH = 2048
SECRET_MIN, SECRET_MAX = 16, 256


class WebhookConfig(AdapterConfig):
    """`{"url": "https://example.com/hooks/postbag"}`."""

    url: str

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str, info: ValidationInfo) -> str:
        ctx = info.context if isinstance(info.context, ValidationContext) else None
        allow_private = ctx.allow_private_targets if ctx else False
        if len(value) > MAX_URL_LENGTH:
            raise ValueError(f"must be at most {MAX_URL_LENGTH} characters")
        parts = urlsplit(value)
        allowed = ("https", "http") if allow_private else ("https",)
        if parts.scheme not in allowed:
            raise ValueError("must be an https:// URL")
        if not parts.hostname:
            raise ValueError("must name a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("must not contain a user name or password")
        if not allow_private:
            try:
                address = ipaddress.ip_address(parts.hostname)
            except ValueError:
                address = None
            if address is not None and not address.is_global:
                raise ValueError("must not target a private, loopback or link-local address")
        return value


def generate_secret() -> str:
    """A new signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookAdapter:
    type: ClassVar[str] = "webhook"
    Config: ClassVar[builtins.type[AdapterConfig]] = WebhookConfig
    max_attempts: ClassVar[int] = 10
    secret_required: ClassVar[bool] = True

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        return WebhookConfig.model_validate(config, context=ctx)

    def validate_secret(self, secret: str) -> None:
        if not SECRET_MIN <= len(secret) <= SECRET_MAX:
            raise ValueError(f"must be {SECRET_MIN} to {SECRET_MAX} characters")

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, WebhookConfig)
        parts = urlsplit(config.url)
        origin = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return {"url": origin + (parts.path or "/")}

    def target(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, WebhookConfig)
        return {"url": config.url}


adapter = WebhookAdapter()
