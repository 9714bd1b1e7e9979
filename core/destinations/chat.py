"""What the chat services (Slack, Discord, Microsoft Teams) share: an incoming-webhook URL
that is itself the credential, and one JSON POST of a message a person reads.

Anyone holding an incoming-webhook URL can post into the channel, so the URL is the
destination's secret: given as `config.url`, stored as a secret version (rotated by a new
`config.url`), and read back only redacted to its origin and first path segment. A type
module subclasses `ChatAdapter` and says how its service's message looks (`body`), and
where it differs, how the service asks to wait (`retry_after`). A refusal is shown as its
HTTP status (`http_400`): a service's error text may quote the refused message, so it is
kept only in the attempt's excerpt.
"""

from __future__ import annotations

import json
from abc import abstractmethod
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
from core.destinations.text import ChatMessage, chat_message


class IncomingWebhookConfig(AdapterConfig):
    """`{"url": "https://hooks.example.com/…"}`: the service's incoming-webhook URL."""

    url: str = Field(
        title="Incoming webhook URL",
        description="the service's incoming-webhook URL; write-only, it is the secret",
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str, info: ValidationInfo) -> str:
        ctx = info.context if isinstance(info.context, ValidationContext) else None
        return check_target_url(value, allow_private=ctx.allow_private_targets if ctx else False)


def redact_url(url: str) -> str:
    """The URL as reads show it: origin and first path segment, e.g.
    `https://hooks.slack.com/services/…`."""
    parts = urlsplit(url)
    origin = url_origin(url)
    first = next((segment for segment in parts.path.split("/") if segment), None)
    return f"{origin}/{first}/…" if first else f"{origin}/…"


class ChatAdapter(BaseAdapter):
    """An incoming-webhook chat service; subclasses give `type`, `label` and `body`."""

    Config: ClassVar[type[AdapterConfig]] = IncomingWebhookConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True
    secret_field: ClassVar[str | None] = "url"

    def validate_secret(self, secret: str) -> None:  # noqa: ARG002 - the interface's signature
        raise ValueError("the incoming-webhook URL is the secret: give it as config.url")

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        assert isinstance(config, IncomingWebhookConfig)
        return {"url": redact_url(config.url)}

    @abstractmethod
    def body(self, message: ChatMessage) -> dict[str, Any]:
        """The JSON the service's incoming webhook takes for `message`."""

    def retry_after(self, answer: bytes) -> float | None:  # noqa: ARG002 - overridden
        """The wait a 429 or 5xx answer's body asks for, beyond `Retry-After`."""
        return None

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        del target  # only the redacted URL: the real one is the secret
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        try:
            pinned = await pin(
                ctx.secret, resolver=ctx.resolver, allow_private=ctx.settings.allow_private_targets
            )
        except TargetRefused:
            return Result(ok=False, retryable=False, error_class="invalid_target")
        except ResolutionFailed:
            return Result(ok=False, retryable=True, error_class="dns_error")
        content = json.dumps(self.body(chat_message(payload, ctx.template)), ensure_ascii=False)
        headers = {"Content-Type": "application/json", "User-Agent": f"Postbag/{__version__}"}
        if pinned.host_header is not None:
            headers["Host"] = pinned.host_header
        # The URL holds the credential: `http.post` records class names, never messages.
        return await http.post(
            ctx.http,
            pinned.url,
            content=content.encode(),
            headers=headers,
            timeout=ctx.timeout,
            server_hostname=pinned.sni_hostname,
            retry_after=self.retry_after,
        )
