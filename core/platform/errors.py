"""One root error for the domain; the API layer maps each subclass to one problem code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class PostbagError(Exception):
    """Base of every error Postbag raises on purpose."""


class ConfigError(PostbagError):
    """A setting is missing or invalid; the message names it in one line."""


class MissingScope(PostbagError):
    """A tenant repository was called without an OrgScope."""


class Unavailable(PostbagError):
    """The database cannot be reached or is restarting; the caller may retry."""


class MigrationError(PostbagError):
    """The migrations on disk and the ones recorded in the database disagree."""


class NotFound(PostbagError):
    """The object does not exist in the caller's organization."""


class Unauthenticated(PostbagError):
    """The API key is missing, unknown or revoked."""


class InvalidInput(PostbagError):
    """A request value breaks a rule; `errors` lists the offending fields."""

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class UnstorableValue(InvalidInput):
    """A value or name holds what cannot be stored: NUL, a lone surrogate, a non-finite number."""


class InputLimit(InvalidInput):
    """The input is past a documented limit: nesting depth, field count, field name length."""


class InvalidSearch(InvalidInput):
    """A search text (`q`) past its bounds (length, terms, no word long enough to find, a
    NUL) or that ran past its time: refused, never a failed request."""


class PlanLimitReached(PostbagError):
    """Creating the object would take the organization past its plan's count of that kind."""


class RouteExists(PostbagError):
    """The form already has a live route to that destination."""


class InvalidConfig(InvalidInput):
    """A destination's config is refused by its adapter's model."""


class InvalidSecret(InvalidInput):
    """A destination secret is missing, not allowed, or unusable for the destination's type."""


class InvalidSchema(InvalidInput):
    """A form schema is not a valid JSON Schema (checked against its meta-schema)."""


class InvalidTemplate(InvalidInput):
    """A template holds more than `{{field}}` placeholders, or is set where none applies."""


class FormClosed(PostbagError):
    """The form exists but is not taking submissions (`accepting` is false)."""


class StreamClosed(PostbagError):
    """The stream exists but is not taking events (`accepting` is false)."""


class Forbidden(PostbagError):
    """The actor's role may not do this; `needed` names the least role that may."""

    def __init__(self, message: str, *, needed: str) -> None:
        super().__init__(message)
        self.needed = needed


class IngestKeyOnly(PostbagError):
    """An ingest key (`pbs_…`) was used for anything but posting events to its stream."""


class IdempotencyConflict(PostbagError):
    """An idempotency key was reused with a different payload."""


class PayloadTooLarge(PostbagError):
    """The request body is over a size limit; reading stopped at the limit."""


class RetryLater(PostbagError):
    """A request refused for now; the client may try again after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TooManyAttempts(RetryLater):
    """A client failed to authenticate too often."""


class TooManySubmissions(RetryLater):
    """A client posted to a form past its flood limit within the window; nothing stored."""


class TooManyInvitations(RetryLater):
    """An address or an organization had its invitations of the day; nothing stored or sent."""


class StorageLimitReached(RetryLater):
    """The organization's month of over-quota, spam and quarantined bytes is full."""


class MalformedBody(PostbagError):
    """The request body cannot be parsed as its declared content type."""


class UnsupportedMediaType(PostbagError):
    """The request body has a content type the submit path does not accept."""


class InvalidAttachment(InvalidInput):
    """An uploaded file is empty, unsupported, mismatched, too large or one too many."""


class ValuesErased(PostbagError):
    """The submission's values and files were erased on request (nothing to read or send)."""


class ValuesExpired(PostbagError):
    """The submission's values and files are past their retention (nothing to read or send)."""


class AlreadyReleased(PostbagError):
    """A release was asked for a submission or a stream event already released or
    accepted."""


class StorageError(PostbagError):
    """Attachment storage refused or failed an operation; the caller may retry."""


class DeliveryInProgress(PostbagError):
    """Retry by hand was asked for a delivery being sent under a live lease."""


class DeliveryNotRetryable(PostbagError):
    """Retry by hand was asked for a delivery that is pending or already sent."""


class DestinationPaused(PostbagError):
    """The destination is paused (disabled), so nothing is sent to it."""


class DestinationRemoved(PostbagError):
    """The destination was deleted, so nothing is sent to it."""


class LastOwner(PostbagError):
    """The change would leave the organization without an owner."""


class AlreadyMember(PostbagError):
    """The address invited already belongs to a member of the organization."""


class DomainTaken(PostbagError):
    """An email domain single sign-on is set for belongs to another organization's SSO."""


class SsoRequired(PostbagError):
    """The organization lets its members in through single sign-on only."""


class SsoRefused(PostbagError):
    """A single sign-on did not complete: the provider, its token or the address refused."""


class EmailNotSent(PostbagError):
    """The installation's email provider did not take the message; nothing was stored."""


def invalid_input(exc: ValidationError) -> InvalidInput:
    """A pydantic error as InvalidInput listing the offending fields (never their values)."""
    errors = [
        {"field": ".".join(str(part) for part in err["loc"]), "message": err["msg"]}
        for err in exc.errors()
    ]
    return InvalidInput("the request has invalid fields", errors)
