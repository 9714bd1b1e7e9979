"""Configuration, read once from `POSTBAG_*` environment variables (SPEC §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import ConfigError

_PLACEHOLDER_SECRETS = frozenset({"changeme", "change-me", "secret", "postbag", "test"})


class Settings(BaseSettings):
    """Every setting Postbag reads; `load_settings` builds it and names a bad variable."""

    model_config = SettingsConfigDict(env_prefix="POSTBAG_", extra="ignore", frozen=True)

    database_url: str | None = None
    secret_key: SecretStr | None = None
    public_url: AnyHttpUrl = AnyHttpUrl("http://127.0.0.1:8080")
    storage_url: str = "file://./.postbag/files"
    email_provider: Literal["ses", "resend", "smtp", "log"] = "log"
    mail_from: str | None = None
    resend_api_key: SecretStr | None = None
    smtp_url: SecretStr | None = None
    telegram_api_url: AnyHttpUrl = AnyHttpUrl("https://api.telegram.org")
    turnstile_verify_url: AnyHttpUrl = AnyHttpUrl(
        "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    )
    allow_private_targets: bool = False
    trusted_proxies: list[str] = Field(default_factory=list)
    db_pool_max: int = Field(default=10, ge=1, le=100)
    db_connect_timeout: float = Field(default=5.0, gt=0, le=60)
    deliver_loop_seconds: int = Field(default=0, ge=0, le=840)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("secret_key")
    @classmethod
    def _refuse_placeholder(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            raw = value.get_secret_value()
            if raw.lower() in _PLACEHOLDER_SECRETS or len(raw) < 32:
                raise ValueError("must be at least 32 random characters, not a placeholder")
        return value

    @field_validator("storage_url")
    @classmethod
    def _storage_scheme(cls, value: str) -> str:
        if not value.startswith(("s3://", "file://")):
            raise ValueError("must start with s3:// or file://")
        return value

    def require_database_url(self) -> str:
        """The database URL, or a ConfigError naming the variable."""
        if not self.database_url:
            raise ConfigError("POSTBAG_DATABASE_URL is required")
        return self.database_url

    def require_secret_key(self) -> bytes:
        """The HMAC key for client addresses and cookies, or a ConfigError naming it."""
        if self.secret_key is None:
            raise ConfigError("POSTBAG_SECRET_KEY is required")
        return self.secret_key.get_secret_value().encode()


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus `overrides`); a bad value raises one clear ConfigError."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "?"
        raise ConfigError(f"POSTBAG_{field.upper()}: {first['msg']}") from None
