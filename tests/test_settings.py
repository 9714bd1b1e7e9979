from __future__ import annotations

import pytest

from core.errors import ConfigError
from core.settings import load_settings


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
