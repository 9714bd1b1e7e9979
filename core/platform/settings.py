"""Configuration, read once from `POSTBAG_*` environment variables (docs/development.md).

Plain parsing, no settings framework: this module is on every handler's cold-start path,
so it imports only the standard library.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from core.platform.errors import ConfigError

_PLACEHOLDER_SECRETS = frozenset({"changeme", "change-me", "secret", "postbag", "test"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

EmailProvider = Literal["ses", "resend", "smtp", "log", "dev"]
PasswordHashCost = Literal["standard", "test_only"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
# What stands between Postbag and PostgreSQL: nothing (or a session-mode pooler, the same
# to Postbag), or a pooler that hands each transaction any server connection.
DbPooler = Literal["none", "transaction"]


class Secret:
    """A write-only value: its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class Settings:
    """Every setting Postbag reads; `load_settings` builds it and names a bad variable."""

    database_url: str | None = None
    secret_key: Secret | None = None
    public_url: str = "http://127.0.0.1:8080"
    storage_url: str = "file://./.postbag/files"
    email_provider: EmailProvider = "log"
    mail_from: str | None = None
    resend_api_key: Secret | None = None
    resend_api_url: str = "https://api.resend.com"
    smtp_url: Secret | None = None
    # SES with credentials of its own (an organization's sender); unset: the AWS SDK's.
    ses_region: str | None = None
    ses_access_key_id: str | None = None
    ses_secret_access_key: Secret | None = None
    # Signed provider events that add addresses to the suppression list (docs/autoresponse.md):
    # the Resend webhook's signing secret, the SNS topics whose SES events are believed.
    resend_webhook_secret: Secret | None = None
    ses_events_topic_arns: list[str] = field(default_factory=list)
    telegram_api_url: str = "https://api.telegram.org"
    turnstile_verify_url: str = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    hcaptcha_verify_url: str = "https://api.hcaptcha.com/siteverify"
    recaptcha_verify_url: str = "https://www.google.com/recaptcha/api/siteverify"
    akismet_url: str = "https://rest.akismet.com/1.1/comment-check"
    # The vendor APIs of the google_sheets, airtable and notion destinations: fixed public
    # hosts; the operator's to change (a test double, a self-hoster's proxy), never a tenant's.
    google_sheets_url: str = "https://sheets.googleapis.com"
    google_token_url: str = "https://oauth2.googleapis.com/token"
    airtable_url: str = "https://api.airtable.com"
    notion_url: str = "https://api.notion.com"
    allow_private_targets: bool = False
    trusted_proxies: list[str] = field(default_factory=list)
    db_pooler: DbPooler = "none"
    direct_database_url: str | None = None
    # A read replica (an RDS or Aurora reader endpoint, a Neon read replica) for lists,
    # searches, exports and counts (docs/scale.md#a-read-replica); unset: the primary.
    read_database_url: str | None = None
    db_pool_max: int = 10
    db_connect_timeout: float = 5.0
    # What one serving process lets clients hold (core/http/protocol.py, core/intake/body.py).
    request_timeout: float = 30.0
    max_connections: int = 1000
    upload_spool_mb: int = 256
    deliver_loop_seconds: int = 0
    log_level: LogLevel = "INFO"
    # The cloud's deliver function, which the submit path wakes after a commit
    # (core/outbox/wakeup.py); unset: a NOTIFY wakes `postbag worker` instead.
    deliver_function_name: str | None = None
    # The Bearer token GET /metrics requires; unset: /metrics answers anyone who reaches it.
    metrics_token: Secret | None = None
    # Set by the hosted service only: new organizations start on `free`; elsewhere
    # (a self-hosted installation) on `self_hosted`.
    hosted: bool = False
    # argon2id's cost for members' passwords: `standard` (RFC 9106's low-memory profile,
    # 64 MiB), or `test_only` (a few KiB, for the test suite; production refuses it).
    password_hash_cost: PasswordHashCost = "standard"
    # Where the retention tick writes each organization's audit trail, one object a day
    # (`s3://bucket/prefix`); unset: no scheduled export (core/owner/audit_export.py).
    audit_export_url: str | None = None

    def require_database_url(self) -> str:
        """The database URL, or a ConfigError naming the variable."""
        if not self.database_url:
            raise ConfigError("POSTBAG_DATABASE_URL is required")
        return self.database_url

    @property
    def transaction_pooler(self) -> bool:
        """Whether `database_url` goes through a transaction-mode pooler (PgBouncer's
        `pool_mode = transaction`, Neon's and Supabase's pooled endpoints, RDS Proxy)."""
        return self.db_pooler == "transaction"

    def listen_url(self) -> str | None:
        """Where the worker may LISTEN: the direct URL, else the database URL unless it goes
        through a transaction pooler (there a LISTEN stays on a server connection that
        other clients' transactions then use, and hears nothing for this one)."""
        if self.direct_database_url:
            return self.direct_database_url
        return None if self.transaction_pooler else self.require_database_url()

    def migration_url(self) -> str:
        """Where migrations run: the direct URL, else the database URL unless it goes
        through a transaction pooler (their advisory lock is held for the session)."""
        if self.direct_database_url:
            return self.direct_database_url
        if self.transaction_pooler:
            raise ConfigError(
                "POSTBAG_DIRECT_DATABASE_URL is required to migrate behind a transaction "
                "pooler (POSTBAG_DB_POOLER=transaction)"
            )
        return self.require_database_url()

    def require_secret_key(self) -> bytes:
        """The HMAC key for client addresses and cookies, or a ConfigError naming it."""
        if self.secret_key is None:
            raise ConfigError("POSTBAG_SECRET_KEY is required")
        return self.secret_key.get_secret_value().encode()

    def with_values(self, **overrides: object) -> Settings:
        """A copy with `overrides` checked exactly as the environment's values are."""
        return replace(self, **{name: _parse(name, value) for name, value in overrides.items()})


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be text")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value) or None


def _secret(value: object) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    return Secret(_text(value)) if _text(value) else None


def _secret_key(value: object) -> Secret | None:
    secret = _secret(value)
    if secret is not None:
        raw = secret.get_secret_value()
        if raw.lower() in _PLACEHOLDER_SECRETS or len(raw) < 32:
            raise ValueError("must be at least 32 random characters, not a placeholder")
    return secret


def _http_url(value: object) -> str:
    url = _text(value).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")
    return url


def _storage_url(value: object) -> str:
    url = _text(value)
    if not url.startswith(("s3://", "file://")):
        raise ValueError("must start with s3:// or file://")
    return url


def _s3_url(value: object) -> str | None:
    url = _text(value).strip()
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError("must be an s3://bucket/prefix URL")
    return url


def _one_of(*allowed: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return parse


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    word = _text(value).strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ValueError("must be true or false")


def _text_list(value: object) -> list[str]:
    """A JSON list or a comma-separated list of names (SNS topic ARNs)."""
    if isinstance(value, list):
        items: object = value
    else:
        raw = _text(value).strip()
        items = json.loads(raw) if raw.startswith("[") else raw.split(",")
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError("must be a list of names")
    return [item.strip() for item in items if item.strip()]


def _address_list(value: object) -> list[str]:
    """A JSON list (`["10.0.0.0/8"]`) or a comma-separated list of addresses or CIDRs."""
    if isinstance(value, list):
        items: object = value
    else:
        raw = _text(value).strip()
        items = json.loads(raw) if raw.startswith("[") else raw.split(",")
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError("must be a list of addresses or CIDRs")
    proxies = [item.strip() for item in items if item.strip()]
    for proxy in proxies:
        ipaddress.ip_network(proxy, strict=False)  # a ValueError names the bad entry
    return proxies


def _integer(low: int, high: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError("must be an integer")
        try:
            number = int(value)
        except ValueError:
            raise ValueError("must be an integer") from None
        if not low <= number <= high:
            raise ValueError(f"must be at least {low} and at most {high}")
        return number

    return parse


def _seconds(value: object) -> float:
    """A positive timeout of at most a minute."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("must be a number")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("must be a number") from None
    if not 0 < number <= 60:
        raise ValueError("must be greater than 0 and at most 60")
    return number


_PARSERS: Mapping[str, Callable[[object], Any]] = {
    "database_url": _optional_text,
    "secret_key": _secret_key,
    "public_url": _http_url,
    "storage_url": _storage_url,
    "audit_export_url": _s3_url,
    "email_provider": _one_of("ses", "resend", "smtp", "log", "dev"),
    "mail_from": _optional_text,
    "resend_api_key": _secret,
    "resend_api_url": _http_url,
    "smtp_url": _secret,
    "ses_region": _optional_text,
    "ses_access_key_id": _optional_text,
    "ses_secret_access_key": _secret,
    "resend_webhook_secret": _secret,
    "ses_events_topic_arns": _text_list,
    "telegram_api_url": _http_url,
    "turnstile_verify_url": _http_url,
    "hcaptcha_verify_url": _http_url,
    "recaptcha_verify_url": _http_url,
    "akismet_url": _http_url,
    "google_sheets_url": _http_url,
    "google_token_url": _http_url,
    "airtable_url": _http_url,
    "notion_url": _http_url,
    "allow_private_targets": _flag,
    "trusted_proxies": _address_list,
    "db_pooler": _one_of("none", "transaction"),
    "direct_database_url": _optional_text,
    "read_database_url": _optional_text,
    "db_pool_max": _integer(1, 100),
    "db_connect_timeout": _seconds,
    "request_timeout": _seconds,
    "max_connections": _integer(1, 1_000_000),
    "upload_spool_mb": _integer(1, 1_048_576),
    "deliver_loop_seconds": _integer(0, 840),
    "log_level": _one_of("DEBUG", "INFO", "WARNING", "ERROR"),
    "deliver_function_name": _optional_text,
    "metrics_token": _secret,
    "hosted": _flag,
    "password_hash_cost": _one_of("standard", "test_only"),
}


def _parse(name: str, value: object) -> Any:
    if name not in _PARSERS:
        raise ConfigError(f"unknown setting {name!r}")
    try:
        return _PARSERS[name](value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"POSTBAG_{name.upper()}: {exc}") from None


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus `overrides`); a bad value raises one clear ConfigError."""
    unknown = set(overrides) - set(_PARSERS)
    if unknown:
        raise ConfigError(f"unknown setting {sorted(unknown)[0]!r}")
    values: dict[str, Any] = {}
    for spec in fields(Settings):
        if spec.name in overrides:
            values[spec.name] = _parse(spec.name, overrides[spec.name])
        elif (raw := os.environ.get(f"POSTBAG_{spec.name.upper()}")) is not None:
            values[spec.name] = _parse(spec.name, raw)
    return Settings(**values)


# What a production process (`postbag serve`, `postbag worker`, the cloud functions) cannot
# do without; only `postbag dev` fills them in itself.
_REQUIRED = ("database_url", "secret_key")


def production_settings(**overrides: object) -> Settings:
    """The environment's settings (plus `overrides`) with no development default: a missing
    database URL or secret key raises one ConfigError naming every variable missing."""
    settings = load_settings(**overrides)
    missing = [f"POSTBAG_{name.upper()}" for name in _REQUIRED if not getattr(settings, name)]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ConfigError(f"{' and '.join(missing)} {verb} required")
    if settings.password_hash_cost != "standard":
        raise ConfigError("POSTBAG_PASSWORD_HASH_COST=test_only is for the test suite only")
    if settings.email_provider == "dev":
        raise ConfigError(
            "POSTBAG_EMAIL_PROVIDER=dev is for `postbag dev` only: set ses, resend or smtp"
        )
    return settings
