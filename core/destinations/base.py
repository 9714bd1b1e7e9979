"""The one interface every destination type implements, and the defaults most types share.

A destination type is one module in `core/destinations/` defining an object that satisfies
`Adapter`, listed in `core.destinations.registry`. Everything about the type lives in that
module: its `Config`, whether and how it takes a secret, its attempt limit, how its target
is shown, whether routes may give it templates, how a digest is rendered for it, and how it
sends. Nothing else names a type.

A delivery keeps what to send as it was accepted; where it goes is its destination's as
it is at each attempt (the claim takes it: docs/delivery.md#where-an-attempt-goes). The
worker hands an adapter `target`, `payload` and `ctx.template`:
- `payload`: the webhook body (`event`, `receipt`, `form`, `submitted_at`, `test`,
  `values`, `labels`, `consent`, `attachments`, `meta`), built when the delivery is claimed
  from its submission's row (`values`, `meta`, `form_snapshot`, its attachments: the one
  copy of the values); a digest's is stored on its delivery (`deliveries.payload`), the
  type's `digest(summary)`. jsonb keeps no key order: `template.field_order` keeps the
  visitor's.
- `target`: the destination's stored config (`stored(config)`) when the attempt is
  claimed (webhook `{"url"}`, email `{"to": [...]}`, telegram `{"chat_id"}`, a chat
  service's redacted `{"url"}`); an acknowledgement's or a notice's, recorded with it.
- `template`: `{"subject", "text", "labels", "field_order", "form_name"}` — the route's
  `{{field}}` templates (or null for the default text), stored on the delivery, with the
  form's name and labels (the submission's `form_snapshot`) and the visitor's field order.
- `secret_version`: the destination's newest secret version when the attempt is claimed
  (webhook signing secret, Telegram bot token, a chat service's incoming-webhook URL), or
  null.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from core.destinations.ssrf import Resolver, system_resolver
from core.destinations.text import digest_message
from core.platform.vocabulary import DeliverySkipReason

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
    peer's requested wait in seconds (at most 6 h), if it gave a valid one. `skip_reason` ends the
    delivery `skipped` without a send (the `log` email provider: printed, never sent).
    `reason` names a failure the status alone does not say (`credentials_rejected` for a
    vendor's 401). Only the excerpt holds the receiver's words (which may echo values):
    `summary` is a class Postbag names.
    """

    ok: bool
    retryable: bool = False
    http_status: int | None = None
    error_class: str | None = None
    excerpt: str | None = None
    retry_after: float | None = None
    skip_reason: DeliverySkipReason | None = None
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """One line for `last_detail`, never the receiver's words: `http_503`, `timeout`,
        `sent`…"""
        if self.ok:
            return f"sent (HTTP {self.http_status})" if self.http_status else "sent"
        if self.skip_reason:
            return self.skip_reason
        if self.reason:
            return self.reason
        if self.http_status is not None:
            return f"http_{self.http_status}"
        return self.error_class or "failed"


class Adapter(Protocol):
    """One destination type.

    A type takes its secret one of two ways: as the destination's separate write-only
    `secret` (`secret_field` None; `secret_hint` says what it is, empty when the type takes
    none), or as one of its config fields (`secret_field`, e.g. an incoming-webhook URL that
    is itself the credential): that field is then stored as the secret and the stored
    config keeps only its redacted form.
    """

    type: ClassVar[str]
    label: ClassVar[str]
    Config: ClassVar[builtins.type[AdapterConfig]]
    max_attempts: ClassVar[int]
    # Sends per second a destination of this type makes unless its owner sets a rate (the
    # service's documented limit); None: no limit (docs/delivery.md#rate-limits).
    rate_per_second: ClassVar[float | None]
    secret_required: ClassVar[bool]
    secret_field: ClassVar[str | None]
    secret_hint: ClassVar[str]
    templates: ClassVar[bool]
    # Whether the owner's notices may also go to a destination of this type (a chat or a
    # webhook; an email destination's addresses belong in the organization's `notify`).
    takes_notices: ClassVar[bool]
    # Whether it sends email: an organization's own sender then sends it (core/outbox/executor.py).
    sends_email: ClassVar[bool]

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        """Validate `config` (raises pydantic.ValidationError)."""
        ...

    def validate_secret(self, secret: str) -> None:
        """Refuse a secret this type cannot use (raises ValueError)."""
        ...

    def new_secret(self) -> str | None:
        """A secret generated when the owner gives none (shown once), or None."""
        ...

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        """What other surfaces than the owner's config read may show (submission lines, logs)."""
        ...

    def stored(self, config: AdapterConfig) -> dict[str, Any]:
        """The config as stored, read back and taken as each attempt's target (without
        what is the secret)."""
        ...

    def digest(self, summary: Mapping[str, Any], *, form_name: str) -> dict[str, Any]:
        """The payload of a digest delivery, from the digest's summary fields."""
        ...

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        """Send one delivery to `target`; never raises for a peer's failure."""
        ...

    async def test(
        self, config: AdapterConfig, sample: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        """Send `sample` to a destination's current config now (`POST …/test`)."""
        ...


class BaseAdapter(ABC):
    """The defaults of a destination type; a type module overrides what differs."""

    secret_field: ClassVar[str | None] = None
    secret_hint: ClassVar[str] = ""
    rate_per_second: ClassVar[float | None] = None
    templates: ClassVar[bool] = True
    takes_notices: ClassVar[bool] = True
    sends_email: ClassVar[bool] = False
    Config: ClassVar[builtins.type[AdapterConfig]]

    def validate(self, config: Mapping[str, Any], ctx: ValidationContext) -> AdapterConfig:
        return self.Config.model_validate(config, context=ctx)

    def new_secret(self) -> str | None:
        return None

    def redact(self, config: AdapterConfig) -> dict[str, Any]:
        return config.model_dump(mode="json")

    def stored(self, config: AdapterConfig) -> dict[str, Any]:
        return self.redact(config) if self.secret_field else config.model_dump(mode="json")

    def digest(self, summary: Mapping[str, Any], *, form_name: str) -> dict[str, Any]:
        subject, text = digest_message(summary, form_name=form_name)
        return {**summary, "subject": subject, "text": text}

    @abstractmethod
    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        """Send one delivery to `target`; never raises for a peer's failure."""

    async def test(
        self, config: AdapterConfig, sample: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        return await self.deliver(self.stored(config), sample, ctx)
