"""The webhook adapter, the reference implementation: a signed JSON POST (SPEC §5)."""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import ValidationInfo, field_validator

from core import __version__
from core.destinations import http
from core.destinations.base import AdapterConfig, DeliveryContext, Result, ValidationContext
from core.destinations.channels import MAX_ATTEMPTS
from core.destinations.ssrf import ResolutionFailed, TargetRefused, pin

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


def signing_key(secret: str) -> bytes:
    """The HMAC key: the bytes base64-decoded from a `whsec_` secret, else its UTF-8 bytes."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except ValueError:
            pass
    return secret.encode()


def body_bytes(payload: Mapping[str, Any]) -> bytes:
    """The exact body that is signed and sent: compact JSON, UTF-8."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def signature_headers(
    *, secret: str, delivery_id: str, body: bytes, timestamp: int
) -> dict[str, str]:
    """Both signatures of SPEC §5: `X-Postbag-Signature` and the Standard Webhooks trio."""
    key = signing_key(secret)
    hex_digest = hmac.new(key, body, hashlib.sha256).hexdigest()
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    standard = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "X-Postbag-Signature": f"sha256={hex_digest}",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{standard}",
    }


class WebhookAdapter:
    type: ClassVar[str] = "webhook"
    Config: ClassVar[builtins.type[AdapterConfig]] = WebhookConfig
    max_attempts: ClassVar[int] = MAX_ATTEMPTS["webhook"]
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

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        url = str(target.get("url", ""))
        try:
            pinned = await pin(
                url, resolver=ctx.resolver, allow_private=ctx.settings.allow_private_targets
            )
        except TargetRefused:
            return Result(ok=False, retryable=False, error_class="invalid_target")
        except ResolutionFailed:
            return Result(ok=False, retryable=True, error_class="dns_error")
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        body = body_bytes(payload)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"Postbag/{__version__}",
            "X-Postbag-Event": str(payload.get("event", "form.submitted")),
            "X-Postbag-Delivery": ctx.delivery_id,
            **signature_headers(
                secret=ctx.secret,
                delivery_id=ctx.delivery_id,
                body=body,
                timestamp=int(time.time()),
            ),
        }
        if pinned.host_header is not None:
            headers["Host"] = pinned.host_header
        return await http.post(
            ctx.http,
            pinned.url,
            content=body,
            headers=headers,
            timeout=ctx.timeout,
            server_hostname=pinned.sni_hostname,
        )

    async def test(
        self, config: AdapterConfig, sample: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        return await self.deliver(self.target(config), sample, ctx)


adapter = WebhookAdapter()
