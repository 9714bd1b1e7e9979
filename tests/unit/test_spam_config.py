from __future__ import annotations

from dataclasses import fields

from core.spam.config import DEFAULTS, SpamConfig, spam_config
from core.spam.settings import SpamSettings


def test_spam_config__reads_every_setting_the_api_writes_with_its_default() -> None:
    # The submit path's dataclass names the settings again (it must not import pydantic on
    # a cold start): it holds exactly the model's, in its order, with the same defaults.
    assert [f.name for f in fields(SpamConfig)] == list(SpamSettings.model_fields)
    written = SpamSettings().model_dump()
    read = spam_config(written)
    assert read == DEFAULTS
    for name, value in written.items():
        got = getattr(read, name)
        assert (list(got) if isinstance(got, tuple) else got) == value, name
