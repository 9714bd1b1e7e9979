"""One root error for the domain; the API layer maps each subclass to one problem code."""

from __future__ import annotations


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


class DeliveryInProgress(PostbagError):
    """Retry by hand was asked for a delivery being sent under a live lease."""


class DeliveryNotRetryable(PostbagError):
    """Retry by hand was asked for a delivery that is pending or already sent."""


class ValuesErased(PostbagError):
    """The submission's values were erased on request, so it can no longer be delivered."""


class ValuesExpired(PostbagError):
    """The submission's retention has passed, so it can no longer be delivered."""


class DestinationPaused(PostbagError):
    """The destination is paused (disabled), so nothing is sent to it."""


class DestinationRemoved(PostbagError):
    """The destination was deleted, so nothing is sent to it."""
