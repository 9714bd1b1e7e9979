"""A form's spam settings as the API and the dashboard write them (`spam` on the form;
docs/spam.md lists each and its default): the validated model, with the defaults of
`core.spam.config`, which the submit path reads."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from core.spam.config import DEFAULTS, MAX_DUPLICATE_WINDOW, MAX_IMPLICIT_HAM_HOURS
from core.spam.patterns import compile_pattern

Word = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
Pattern = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Domain = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        to_lower=True,
        pattern=r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62}\.)*[A-Za-z0-9-]{1,63}$",
        max_length=253,
    ),
]
# The scripts `allowed_scripts` may name: the first word of a letter's Unicode name.
SCRIPTS = (
    "latin",
    "cyrillic",
    "greek",
    "arabic",
    "hebrew",
    "cjk",
    "hiragana",
    "katakana",
    "hangul",
    "devanagari",
    "thai",
    "armenian",
    "georgian",
)
Script = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)]


class SpamSettings(BaseModel):
    """What counts as spam on this form, beyond the honeypot. Each rule that matches stores
    the submission as `spam` with its reason (`spam_rule:<rule>`, `too_fast`…)."""

    model_config = ConfigDict(extra="forbid")

    max_links: int | None = Field(
        default=DEFAULTS.max_links,
        ge=0,
        le=1000,
        description="more links than this across the values is spam (`spam_rule:links`); "
        "null = no limit",
    )
    blocked_words: list[Word] = Field(
        default_factory=list,
        max_length=500,
        description="words or phrases, matched whole and case-blind (`spam_rule:words`)",
    )
    blocked_patterns: list[Pattern] = Field(
        default_factory=list,
        max_length=50,
        description="regular expressions run on a linear-time engine, `(?i)` for case-blind "
        "(`spam_rule:patterns`)",
    )
    blocked_email_domains: list[Domain] = Field(
        default_factory=list,
        max_length=1000,
        description="an email address at one of these domains or below is spam "
        "(`spam_rule:email_domain`)",
    )
    block_disposable_email: bool = Field(
        default=DEFAULTS.block_disposable_email,
        description="an address at a known disposable-mail domain is spam "
        "(`spam_rule:disposable_email`)",
    )
    allowed_scripts: list[Script] | None = Field(
        default=None,
        max_length=len(SCRIPTS),
        description="opt-in: when most letters are in other scripts, spam (`spam_rule:script`)",
    )

    min_fill_seconds: float = Field(
        default=DEFAULTS.min_fill_seconds,
        ge=0,
        le=3600,
        description="a post sooner than this after its fill-time token was issued is spam "
        "(`too_fast`)",
    )
    max_token_age_seconds: int = Field(
        default=DEFAULTS.max_token_age_seconds,
        ge=60,
        le=30 * 86_400,
        description="a fill-time token older than this is spam (`stale_token`)",
    )
    require_fill_token: bool = Field(
        default=DEFAULTS.require_fill_token,
        description="a post without a fill-time token is spam (`missing_token`); off, such "
        "a post (a JSON client) is not penalised",
    )

    duplicate_max: int | None = Field(
        default=DEFAULTS.duplicate_max,
        ge=1,
        le=100_000,
        description="the same values posted more often than this within the window, from "
        "any addresses, are spam after the first ones (`duplicate_content`); null = off",
    )
    duplicate_window_seconds: int = Field(
        default=DEFAULTS.duplicate_window_seconds,
        ge=60,
        le=MAX_DUPLICATE_WINDOW,
        description="the duplicates' window",
    )

    learned: bool = Field(
        default=DEFAULTS.learned,
        description="the organization's learned filter judges this form's posts (`learned`)",
    )
    learned_threshold: float = Field(
        default=DEFAULTS.learned_threshold,
        ge=0.5,
        le=0.9999,
        description="a post the learned filter scores at or above this is spam",
    )
    implicit_ham: bool = Field(
        default=DEFAULTS.implicit_ham,
        description="an accepted post delivered and not marked as spam within "
        "`implicit_ham_hours` teaches the learned filter it is not spam",
    )
    implicit_ham_hours: int = Field(
        default=DEFAULTS.implicit_ham_hours,
        ge=1,
        le=MAX_IMPLICIT_HAM_HOURS,
        description="the grace period of implicit ham: how long the owner has to mark a post "
        "as spam before it teaches the filter it is not",
    )

    recaptcha_min_score: float = Field(
        default=DEFAULTS.recaptcha_min_score,
        ge=0,
        le=1,
        description="with a reCAPTCHA secret, a v3 score below this is quarantined "
        "(`recaptcha_failed`)",
    )
    akismet_site: str | None = Field(
        default=DEFAULTS.akismet_site,
        max_length=2048,
        description="the site Akismet is told the form belongs to (`blog`); null = "
        "POSTBAG_PUBLIC_URL",
    )

    @field_validator("blocked_patterns")
    @classmethod
    def _check_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if compile_pattern(pattern) is None:
                raise ValueError(
                    f"{pattern!r} cannot run on the linear-time engine "
                    "(no backreferences, no lookaround) or is not a valid pattern"
                )
        return value

    @field_validator("allowed_scripts")
    @classmethod
    def _check_scripts(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for script in value:
            if script not in SCRIPTS:
                raise ValueError(f"{script!r} is not one of {', '.join(SCRIPTS)}")
        return list(dict.fromkeys(value))


Secret = Annotated[str, StringConstraints(min_length=1, max_length=512)]


class SpamSecrets(BaseModel):
    """The write-only secrets that turn a form's external checks on. In a `PATCH`, a key
    with a value sets it, a key with null removes it, a key left out keeps it."""

    model_config = ConfigDict(extra="forbid")

    hcaptcha_secret: Secret | None = Field(default=None, json_schema_extra={"writeOnly": True})
    recaptcha_secret: Secret | None = Field(default=None, json_schema_extra={"writeOnly": True})
    akismet_key: Secret | None = Field(default=None, json_schema_extra={"writeOnly": True})


def spam_settings(stored: Any) -> SpamSettings:
    """The settings a form stored (`{}` or null = every default)."""
    return SpamSettings.model_validate(stored or {})
