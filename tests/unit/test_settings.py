from __future__ import annotations

from pathlib import Path

import pytest

from core.platform.errors import ConfigError
from core.platform.settings import load_settings, production_settings
from local.settings import development_settings


def test_settings__bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSTBAG_EMAIL_PROVIDER", "pigeon")
    with pytest.raises(ConfigError, match=r"^POSTBAG_EMAIL_PROVIDER: "):
        load_settings()


def test_settings__placeholder_secret_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSTBAG_SECRET_KEY", "changeme")
    with pytest.raises(ConfigError, match=r"^POSTBAG_SECRET_KEY: "):
        load_settings()


def test_settings__missing_database_url_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POSTBAG_DATABASE_URL", raising=False)
    with pytest.raises(ConfigError, match=r"^POSTBAG_DATABASE_URL is required$"):
        load_settings().require_database_url()


def test_settings__environment_values_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSTBAG_ALLOW_PRIVATE_TARGETS", "Yes")
    monkeypatch.setenv("POSTBAG_TRUSTED_PROXIES", '["10.0.0.0/8", "192.0.2.1"]')
    monkeypatch.setenv("POSTBAG_DB_POOL_MAX", "4")
    monkeypatch.setenv("POSTBAG_DB_CONNECT_TIMEOUT", "2.5")
    monkeypatch.setenv("POSTBAG_EMAIL_PROVIDER", "smtp")
    settings = load_settings()
    assert settings.allow_private_targets is True
    assert settings.trusted_proxies == ["10.0.0.0/8", "192.0.2.1"]
    assert (settings.db_pool_max, settings.db_connect_timeout) == (4, 2.5)
    assert settings.email_provider == "smtp"
    monkeypatch.setenv("POSTBAG_TRUSTED_PROXIES", "10.0.0.0/8, 172.16.0.0/12")
    assert load_settings().trusted_proxies == ["10.0.0.0/8", "172.16.0.0/12"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("POSTBAG_DB_POOL_MAX", "0"),
        ("POSTBAG_DB_POOL_MAX", "many"),
        ("POSTBAG_DB_CONNECT_TIMEOUT", "0"),
        ("POSTBAG_DELIVER_LOOP_SECONDS", "900"),
        ("POSTBAG_ALLOW_PRIVATE_TARGETS", "maybe"),
        ("POSTBAG_PUBLIC_URL", "ftp://example.com"),
        ("POSTBAG_STORAGE_URL", "/tmp/files"),
        ("POSTBAG_TRUSTED_PROXIES", '{"a": 1}'),
        ("POSTBAG_LOG_LEVEL", "LOUD"),
        ("POSTBAG_HOSTED", "maybe"),
        ("POSTBAG_DB_POOLER", "pgbouncer"),
    ],
)
def test_settings__out_of_range_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=rf"^{variable}: "):
        load_settings()


def test_settings__secrets_never_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-" + "q" * 40
    monkeypatch.setenv("POSTBAG_SECRET_KEY", secret)
    monkeypatch.setenv("POSTBAG_SMTP_URL", "smtp://user:hunter2@mail.example.com")
    monkeypatch.setenv("POSTBAG_METRICS_TOKEN", "scrape-me-not")
    settings = load_settings()
    assert secret not in repr(settings) and "hunter2" not in repr(settings)
    assert "scrape-me-not" not in repr(settings)
    assert settings.require_secret_key() == secret.encode()


def test_settings__overrides_are_checked_like_the_environment() -> None:
    with pytest.raises(ConfigError, match=r"^POSTBAG_DB_POOL_MAX: "):
        load_settings(db_pool_max=0)
    with pytest.raises(ConfigError, match=r"^POSTBAG_PUBLIC_URL: "):
        load_settings().with_values(public_url="not a url")


def test_production_settings__names_every_missing_variable_and_defaults_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DATABASE_URL", "SECRET_KEY", "ALLOW_PRIVATE_TARGETS"):
        monkeypatch.delenv(f"POSTBAG_{name}", raising=False)
    with pytest.raises(
        ConfigError, match=r"^POSTBAG_DATABASE_URL and POSTBAG_SECRET_KEY are required$"
    ):
        production_settings()
    monkeypatch.setenv("POSTBAG_DATABASE_URL", "postgresql://db/postbag")
    with pytest.raises(ConfigError, match=r"^POSTBAG_SECRET_KEY is required$"):
        production_settings()
    monkeypatch.setenv("POSTBAG_SECRET_KEY", "test-secret-key-0123456789abcdef0123456789")
    settings = production_settings()
    assert settings.allow_private_targets is False
    monkeypatch.setenv("POSTBAG_ALLOW_PRIVATE_TARGETS", "true")
    assert production_settings().allow_private_targets is True


def test_development_settings__lists_each_default_it_applies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POSTBAG_DATABASE_URL", "postgresql://db/postbag")
    monkeypatch.delenv("POSTBAG_SECRET_KEY", raising=False)
    monkeypatch.setenv("POSTBAG_ALLOW_PRIVATE_TARGETS", "false")
    settings, notes = development_settings()
    assert settings.allow_private_targets is True
    assert settings.require_secret_key() == (tmp_path / ".postbag" / "secret").read_bytes()
    assert notes == ["the secret key was generated into .postbag/secret"]
    monkeypatch.setenv("POSTBAG_SECRET_KEY", "test-secret-key-0123456789abcdef0123456789")
    _, with_key = development_settings(public_url="http://127.0.0.1:9000")
    assert with_key == []
    assert development_settings(public_url="http://127.0.0.1:9000")[0].public_url == (
        "http://127.0.0.1:9000"
    )


def test_development_settings__email_goes_to_the_mailbox_unless_a_provider_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POSTBAG_DATABASE_URL", "postgresql://db/postbag")
    monkeypatch.setenv("POSTBAG_SECRET_KEY", "test-secret-key-0123456789abcdef0123456789")
    monkeypatch.delenv("POSTBAG_EMAIL_PROVIDER", raising=False)
    assert development_settings()[0].email_provider == "dev"
    monkeypatch.setenv("POSTBAG_EMAIL_PROVIDER", "log")
    assert development_settings()[0].email_provider == "log"
    monkeypatch.setenv("POSTBAG_EMAIL_PROVIDER", "dev")
    with pytest.raises(ConfigError, match="POSTBAG_EMAIL_PROVIDER=dev is for `postbag dev`"):
        production_settings()


def test_settings__behind_a_transaction_pooler_listen_and_migrate_use_the_direct_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pooled, direct = "postgresql://u@pooler:6432/db", "postgresql://u@db:5432/db"
    monkeypatch.setenv("POSTBAG_DATABASE_URL", pooled)
    assert load_settings().transaction_pooler is False  # never guessed from the URL
    assert (load_settings().listen_url(), load_settings().migration_url()) == (pooled, pooled)
    monkeypatch.setenv("POSTBAG_DB_POOLER", "transaction")
    settings = load_settings()
    assert settings.transaction_pooler is True
    assert settings.listen_url() is None  # the worker polls
    with pytest.raises(ConfigError, match=r"^POSTBAG_DIRECT_DATABASE_URL is required to migrate"):
        settings.migration_url()
    monkeypatch.setenv("POSTBAG_DIRECT_DATABASE_URL", direct)
    assert (load_settings().listen_url(), load_settings().migration_url()) == (direct, direct)


def test_production_settings__refuse_the_test_only_password_hash_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POSTBAG_DATABASE_URL", "postgresql://unused@127.0.0.1:1/unused")
    monkeypatch.setenv("POSTBAG_SECRET_KEY", "test-secret-key-0123456789abcdef0123456789")
    monkeypatch.setenv("POSTBAG_PASSWORD_HASH_COST", "test_only")
    with pytest.raises(ConfigError, match="POSTBAG_PASSWORD_HASH_COST=test_only"):
        production_settings()
    assert load_settings().password_hash_cost == "test_only"
    monkeypatch.delenv("POSTBAG_PASSWORD_HASH_COST")
    assert production_settings().password_hash_cost == "standard"
