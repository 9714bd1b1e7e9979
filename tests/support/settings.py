"""Settings for tests: the secret key, the mail sender, services built with other settings."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.platform.services import Services
from core.platform.settings import load_settings

TEST_SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"
SENDER = "forms@postbag.test"


@contextlib.asynccontextmanager
async def built_services(
    db_url: str, tmp_path: Path, *, pool_max: int = 4, **overrides: Any
) -> AsyncIterator[Services]:
    """Services like the `services` fixture, with settings overridden."""
    settings = load_settings(
        **{
            "database_url": db_url,
            "secret_key": TEST_SECRET_KEY,
            "storage_url": f"file://{tmp_path / 'files'}",
            "allow_private_targets": True,
            "password_hash_cost": "test_only",
            **overrides,
        }
    )
    built = Services.from_settings(settings, pool_max=pool_max)
    try:
        yield built
    finally:
        await built.db.close()


def with_settings(services: Services, **overrides: Any) -> Services:
    """The same pool under other settings (email provider, private targets…)."""
    return replace(services, settings=services.settings.with_values(**overrides))
