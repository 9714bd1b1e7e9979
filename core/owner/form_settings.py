"""A form's settings: one validated model for the API, the dashboard and the code, the
rules across fields, and their mapping to the `forms` columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from psycopg.types.json import Json, Jsonb
from pydantic import (
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    StringConstraints,
    field_validator,
)

from core.destinations.autoresponse import BUILT_IN as AUTORESPONSE_BUILT_IN
from core.destinations.templates import placeholders, template_errors
from core.platform.errors import InvalidInput, InvalidTemplate
from core.platform.vocabulary import SchemaMode
from core.spam.settings import SpamSecrets, SpamSettings, spam_settings

MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_FILES_PER_FIELD = 5

# The supported formats (docs/submit.md), by extension and by exact MIME type; both spellings may be
# declared on a file field, and the submit path checks the bytes against them.
SUPPORTED_FILE_TYPES: Mapping[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".gif": "image/gif",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".rtf": "application/rtf",
    ".txt": "text/plain",
    ".csv": "text/csv",
}
_MIME_TYPES = frozenset(SUPPORTED_FILE_TYPES.values())
_DEFAULT_PORTS = {"http": 80, "https": 443}

FieldName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-\[\]]{0,99}$")]
FormName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Origin = Annotated[str, StringConstraints(max_length=300)]
RetentionDays = Annotated[int, Field(ge=1, le=3650)]
TurnstileSecret = Annotated[str, StringConstraints(min_length=1, max_length=512)]


def _origin(value: str) -> str:
    """`scheme://host[:port]`, lower-cased, without a default port; anything else is refused."""
    parts = urlsplit(value.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{value!r} is not an origin like https://example.com")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{value!r} must not contain a user name or password")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{value!r} must be an origin only, without a path")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{value!r} has an invalid port") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    suffix = f":{port}" if port is not None and port != _DEFAULT_PORTS[parts.scheme] else ""
    return f"{parts.scheme}://{host}{suffix}"


def _redirect_url(value: str) -> str:
    parts = urlsplit(value)
    if len(value) > 2048:
        raise ValueError("must be at most 2048 characters")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("must be an https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain a user name or password")
    return value


class RateLimit(BaseModel):
    """At most `max` submissions per client per `per_seconds` before quarantine."""

    model_config = ConfigDict(extra="forbid")

    max: int = Field(default=10, ge=1, le=10_000)
    per_seconds: int = Field(default=600, ge=1, le=86_400)


class FileField(BaseModel):
    """A form field that takes files: allowed types (extensions or exact MIME types)."""

    model_config = ConfigDict(extra="forbid")

    types: list[str] = Field(min_length=1, max_length=32, examples=[[".pdf", "image/png"]])
    max_files: int = Field(default=1, ge=1, le=MAX_FILES_PER_FIELD)
    max_bytes: int = Field(default=MAX_FILE_BYTES, ge=1, le=MAX_FILE_BYTES)
    required: bool = False

    @field_validator("types")
    @classmethod
    def _check_types(cls, value: list[str]) -> list[str]:
        checked = []
        for item in value:
            kind = item.strip().lower()
            if "*" in kind:
                raise ValueError(f"{item!r}: wildcards are not allowed; list exact types")
            if kind not in SUPPORTED_FILE_TYPES and kind not in _MIME_TYPES:
                raise ValueError(f"{item!r} is not a supported file type")
            checked.append(kind)
        return list(dict.fromkeys(checked))


class AckEmail(BaseModel):
    """A plain-text acknowledgement to the address in `field`, sent only with consent."""

    model_config = ConfigDict(extra="forbid")

    field: FieldName
    subject: str = Field(default="Thanks, we received your message", min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=10_000)


OneLine = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$")]


class AutoresponseSettings(BaseModel):
    """A confirmation email to the visitor (docs/autoresponse.md): to the valid address in
    `to_field`, for accepted submissions only, bounded per recipient and day."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    to_field: FieldName = Field(description="the submitted field that holds the address")
    subject: Annotated[OneLine, StringConstraints(min_length=1, max_length=200)] = Field(
        default="Thanks, we received your message",
        description="`{{field}}`, `{{form.name}}`, `{{receipt}}`, `{{submitted_at}}`",
    )
    text: str = Field(min_length=1, max_length=10_000, description="the plain-text body template")
    html: bool = Field(default=False, description="also send the body as HTML (escaped)")
    reply_to: EmailStr | None = Field(default=None, description="where the visitor's reply goes")
    from_name: Annotated[OneLine, StringConstraints(max_length=100)] | None = Field(
        default=None, description="the display name of the sender"
    )
    fields: list[FieldName] = Field(
        default_factory=list,
        max_length=100,
        description="the submitted fields whose values the templates may show; others render "
        "empty and are refused in a template",
    )


class FormFields(BaseModel):
    """A form's settings as created; PATCH takes the same fields, each optional."""

    model_config = ConfigDict(extra="forbid")

    name: FormName
    accepting: bool = True
    allowed_origins: list[Origin] = Field(
        default_factory=list, max_length=100, description="`scheme://host[:port]`; empty = any"
    )
    honeypot_field: FieldName = "_gotcha"
    redirect_url: str | None = Field(
        default=None,
        description="https URL for plain HTML form posts (http:// where private targets are "
        "allowed, as in the local runner)",
    )
    retention_days: RetentionDays | None = Field(
        default=None, description="null = the plan's default"
    )
    rate_limit: RateLimit = Field(default_factory=lambda: RateLimit())
    schema_mode: SchemaMode = "off"
    labels: dict[FieldName, Label] = Field(default_factory=dict, max_length=500)
    file_fields: dict[FieldName, FileField] = Field(default_factory=dict, max_length=20)
    consent_field: FieldName | None = None
    ack_email: AckEmail | None = None
    autoresponse: AutoresponseSettings | None = None
    spam: SpamSettings = Field(
        default_factory=lambda: SpamSettings(), description="spam rules (docs/spam.md)"
    )
    spam_secrets: SpamSecrets | None = Field(
        default=None,
        description="secrets of the external spam checks; write-only (reads show `spam_checks`)",
        json_schema_extra={"writeOnly": True},
    )
    turnstile_secret: TurnstileSecret | None = Field(
        default=None,
        description="Cloudflare Turnstile secret; write-only (reads show `turnstile_enabled`)",
        json_schema_extra={"writeOnly": True},
    )

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(_origin(item) for item in value))

    @field_validator("redirect_url")
    @classmethod
    def _check_redirect(cls, value: str | None) -> str | None:
        return None if value is None else _redirect_url(value)


class FormPatch(BaseModel):
    """A change to some of a form's settings; fields left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    name: FormName | None = None
    accepting: bool | None = None
    allowed_origins: list[Origin] | None = None
    honeypot_field: FieldName | None = None
    redirect_url: str | None = None
    retention_days: RetentionDays | None = None
    rate_limit: RateLimit | None = None
    schema_mode: SchemaMode | None = None
    labels: dict[FieldName, Label] | None = None
    file_fields: dict[FieldName, FileField] | None = None
    consent_field: FieldName | None = None
    ack_email: AckEmail | None = None
    autoresponse: AutoresponseSettings | None = None
    spam: SpamSettings | None = None
    spam_secrets: SpamSecrets | None = Field(
        default=None,
        description="write-only; keys given set or (null) remove a secret, keys left out keep "
        "theirs; null removes them all",
        json_schema_extra={"writeOnly": True},
    )
    turnstile_secret: TurnstileSecret | None = Field(
        default=None,
        description="write-only; null turns Turnstile off",
        json_schema_extra={"writeOnly": True},
    )


def check_rules(fields: FormFields, *, allow_http_redirect: bool = False) -> None:
    """The rules that involve more than one field, templates, or the installation: an
    `http://` redirect_url only where private targets are allowed (development)."""
    if fields.redirect_url and urlsplit(fields.redirect_url).scheme != "https":
        if not allow_http_redirect:
            raise InvalidInput(
                "redirect_url must be an https:// URL",
                [
                    {
                        "field": "redirect_url",
                        "message": "must be an https:// URL "
                        "(http:// only with POSTBAG_ALLOW_PRIVATE_TARGETS, as the local runner)",
                    }
                ],
            )
    if fields.autoresponse is not None:
        _check_autoresponse(fields.autoresponse)
    ack = fields.ack_email
    if ack is None:
        return
    if fields.consent_field is None:
        raise InvalidInput(
            "an acknowledgement email needs a consent_field",
            [{"field": "ack_email", "message": "set consent_field: acks go only with consent"}],
        )
    for name in ("subject", "text"):
        problems = template_errors(getattr(ack, name))
        if problems:
            raise InvalidTemplate(
                problems[0], [{"field": f"ack_email.{name}", "message": problems[0]}]
            )


def _check_autoresponse(reply: AutoresponseSettings) -> None:
    """The templates hold only placeholders, each a listed field or a built-in one."""
    allowed = {*reply.fields, *AUTORESPONSE_BUILT_IN}
    for name in ("subject", "text"):
        template = getattr(reply, name)
        problems = template_errors(template) or [
            f"{{{{{found}}}}} is not a listed field: add it to autoresponse.fields"
            for found in placeholders(template)
            if found not in allowed
        ]
        if problems:
            raise InvalidTemplate(
                problems[0], [{"field": f"autoresponse.{name}", "message": problems[0]}]
            )


def columns(fields: FormFields) -> dict[str, Any]:
    return {
        "name": fields.name,
        "accepting": fields.accepting,
        "allowed_origins": fields.allowed_origins,
        "honeypot_field": fields.honeypot_field,
        "redirect_url": fields.redirect_url,
        "retention_days": fields.retention_days,
        "rate_limit_max": fields.rate_limit.max,
        "rate_limit_per_seconds": fields.rate_limit.per_seconds,
        "schema_mode": fields.schema_mode,
        "labels": Json(fields.labels),
        "file_fields": Jsonb({k: v.model_dump() for k, v in fields.file_fields.items()}),
        "consent_field": fields.consent_field,
        "ack_email": Jsonb(fields.ack_email.model_dump()) if fields.ack_email else None,
        "autoresponse": (Jsonb(fields.autoresponse.model_dump()) if fields.autoresponse else None),
        "spam": Jsonb(fields.spam.model_dump()),
    }


def fields_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored form's settings in FormFields' shape (without the write-only secret)."""
    return {
        "name": row["name"],
        "accepting": row["accepting"],
        "allowed_origins": row["allowed_origins"],
        "honeypot_field": row["honeypot_field"],
        "redirect_url": row["redirect_url"],
        "retention_days": row["retention_days"],
        "rate_limit": {"max": row["rate_limit_max"], "per_seconds": row["rate_limit_per_seconds"]},
        "schema_mode": row["schema_mode"],
        "labels": row["labels"],
        "file_fields": row["file_fields"],
        "consent_field": row["consent_field"],
        "ack_email": row["ack_email"],
        "autoresponse": row["autoresponse"],
        "spam": spam_settings(row["spam"]).model_dump(),
    }


# The write-only settings: a PATCH that gives one changes it, whatever it was.
WRITE_ONLY = ("spam_secrets", "turnstile_secret")


def changed_settings(
    before: Mapping[str, Any], after: Mapping[str, Any], asked: set[str]
) -> tuple[str, ...] | None:
    """The names of the settings a change moved (`fields_of` before and after it), with the
    write-only ones it gave; None when it moved none."""
    moved = {name for name, value in after.items() if before.get(name) != value}
    moved |= asked.intersection(WRITE_ONLY)
    return tuple(sorted(moved)) or None
