"""The webhook type, the reference implementation: a signed JSON POST (docs/webhooks.md)."""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from core import __version__
from core.destinations import http
from core.destinations.base import (
    AdapterConfig,
    BaseAdapter,
    DeliveryContext,
    Result,
    ValidationContext,
)
from core.destinations.ssrf import (
    ResolutionFailed,
    TargetRefused,
    check_target_url,
    pin,
    url_origin,
)

SECRET_MIN, SECRET_MAX = 16, 256


class WebhookConfig(AdapterConfig):
    """`{"url": "https://example.com/hooks/postbag"}`."""

    url: str = Field(title="Webhook URL", description="where the signed JSON POST goes")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str, info: ValidationInfo) -> str:
        ctx = info.context if isinstance(info.context, ValidationContext) else None
        return check_target_url(value, allow_private=ctx.allow_private_targets if ctx else False)


def generate_secret() -> str:
    """A new signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def standard_key(secret: str) -> bytes:
    """Standard Webhooks' key: the bytes base64-decoded from a `whsec_` secret, else its
    UTF-8 bytes. `X-Postbag-Signature` is keyed with the UTF-8 bytes of the whole secret."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except ValueError:
            pass
    return secret.encode()


# The documented key order of the body; any other key follows in its snapshot's order.
_BODY_KEYS = (
    "event",
    "receipt",
    "form",
    "submitted_at",
    "test",
    "values",
    "labels",
    "consent",
    "attachments",
    "meta",
)


def in_field_order(
    payload: Mapping[str, Any], template: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The body as sent: the documented key order, and `values` and `labels` in the visitor's
    field order. The snapshot is jsonb, which keeps no key order; its template keeps the
    visitor's order (`field_order`)."""
    order = [str(name) for name in (template or {}).get("field_order") or []]
    body = {key: payload[key] for key in _BODY_KEYS if key in payload}
    body.update(payload)
    for key in ("values", "labels"):
        mapping = body.get(key)
        if isinstance(mapping, dict):
            first = {name: mapping[name] for name in order if name in mapping}
            body[key] = first | mapping
    return body


def body_bytes(payload: Mapping[str, Any]) -> bytes:
    """The exact body that is signed and sent: compact JSON, UTF-8."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def signature_headers(
    *, secret: str, delivery_id: str, body: bytes, timestamp: int
) -> dict[str, str]:
    """Both signatures: `X-Postbag-Signature`, keyed with the secret's text as a receiver
    written from `new TextEncoder().encode(secret)` keys it (a `whsec_` secret included),
    and the Standard Webhooks trio, keyed by that scheme's own rule (`standard_key`)."""
    hex_digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    standard = base64.b64encode(
        hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
    ).decode()
    return {
        "X-Postbag-Signature": f"sha256={hex_digest}",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{standard}",
    }


class WebhookAdapter(BaseAdapter):
    type: ClassVar[str] = "webhook"
    label: ClassVar[str] = "Webhook"
    Config: ClassVar[builtins.type[AdapterConfig]] = WebhookConfig
    max_attempts: ClassVar[int] = 10
    secret_required: ClassVar[bool] = True
    secret_hint: ClassVar[str] = "signing secret, 16-256 characters (generated when empty)"
    # A receiver reads JSON, not text.
    templates: ClassVar[bool] = False

    def validate_secret(self, secret: str) -> None:
        if not SECRET_MIN <= len(secret) <= SECRET_MAX:
            raise ValueError(f"must be {SECRET_MIN} to {SECRET_MAX} characters")
        # Receivers key Standard Webhooks by the prefix alone (docs/webhooks.md): a `whsec_`
        # secret must be the base64 they will decode.
        if secret.startswith("whsec_") and standard_key(secret) == secret.encode():
            raise ValueError("a secret starting with whsec_ must be base64 after the prefix")

    def new_secret(self) -> str | None:
        return generate_secret()

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, WebhookConfig)
        return {"url": url_origin(config.url) + (urlsplit(config.url).path or "/")}

    def digest(self, summary: Mapping[str, Any], *, form_name: str) -> dict[str, Any]:  # noqa: ARG002 - the interface's signature
        return dict(summary)

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
        body = body_bytes(in_field_order(payload, ctx.template))
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


adapter = WebhookAdapter()
