"""The one interface every destination type implements (SPEC §5, "Destination adapters").

Adding a type is adding one module that defines an object satisfying `Adapter` and listing
it in `core.destinations.registry.ADAPTERS`.

The delivery snapshot (`deliveries.payload`, `.target`, `.template`, `.secret_version`) is
written at submit time and read by the worker:
- `payload`: the webhook body object of SPEC §5 (`event`, `receipt`, `form`,
  `submitted_at`, `test`, `values`, `attachments`, `meta`); digests use `event:
  form.digest` and their own summary fields.
- `target`: the adapter's `target(config)` at submit time (webhook `{"url"}`, email
  `{"to": [...]}`, telegram `{"chat_id"}`).
- `template`: `{"subject", "text", "labels", "field_order", "form_name"}` — the route's
  `{{field}}` templates (or null for the default text), the form's labels and field order.
- `secret_version`: the destination secret version current at submit time (webhook
  signing secret, telegram bot token), or null.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from core.destinations.ssrf import Resolver, system_resolver

if TYPE_CHECKING:
    import aiohttp

    from core.platform.settings import Settings


class AdapterConfig(BaseModel):
    """Base of every adapter's config model: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class ValidationContext:
    """What config validation needs to know about the deployment."""

    allow_private_targets: bool


@dataclass(frozen=True, slots=True)
class DeliveryContext:
    """What one send needs besides config and payload.

    `http` is the process's shared client; `resolver` is the DNS lookup the SSRF guard
    uses (a test makes a name resolve to loopback through it).
    """

    delivery_id: str
    secret: str | None
    template: Mapping[str, Any] | None
    settings: Settings
    http: aiohttp.ClientSession
    timeout: float = 10.0
    resolver: Resolver = system_resolver


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one send, as the worker records it.

    `ok` means delivered. Otherwise `retryable` separates failures worth retrying (timeout,
    connection, 408, 429, 5xx) from final ones. `http_status` / `error_class` say what
    happened, `excerpt` is at most 512 characters of the answer, and `retry_after` is the
    peer's requested wait in seconds, if it gave a valid one. `skip_reason` ends the
    delivery `skipped` without a send (the `log` email provider: printed, never sent).
    """

    ok: bool
    retryable: bool = False
    http_status: int | None = None
    error_class: str | None = None
    excerpt: str | None = None
    retry_after: float | None = None
    skip_reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """One line for `last_detail`: `http_503`, `timeout`, `sent`…"""
        if self.ok:
            return f"sent (HTTP {self.http_status})" if self.http_status else "sent"
        if self.skip_reason:
            return self.skip_reason
        if self.http_status is not None:
            return f"http_{self.http_status}"
        return self.error_class or "failed"


class Adapter(Protocol):
    """One destination type."""

    type: ClassVar[str]
    Config: ClassVar[builtins.type[AdapterConfig]]
    max_attempts: ClassVar[int]
    secret_required: ClassVar[bool]

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        """Validate `config` (raises pydantic.ValidationError)."""
        ...

    def validate_secret(self, secret: str) -> None:
        """Refuse a secret this type cannot use (raises ValueError)."""
        ...

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        """What other surfaces than the owner's config read may show (submission lines, logs)."""
        ...

    def target(self, config: AdapterConfig) -> dict[str, Any]:
        """The snapshot of where a delivery goes, taken at submit time."""
        ...

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        """Send one delivery to its snapshot `target`; never raises for a peer's failure."""
        ...

    async def test(
        self, config: AdapterConfig, sample: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        """Send `sample` to a destination's current config now (`POST …/test`)."""
        ...
