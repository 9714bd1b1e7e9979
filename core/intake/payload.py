"""What a stored submission sends: the acknowledgement email to the visitor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.destinations.channels import MAX_ATTEMPTS
from core.intake.checks import consented, first_text
from core.intake.form import Form
from core.platform.ids import new_id


def _valid_address(value: Any) -> str | None:
    address = first_text(value)
    if address is None or len(address) > 254:
        return None
    # Imported here: only forms that send acknowledgements need it.
    from email_validator import EmailNotValidError, validate_email

    try:
        checked = validate_email(address.strip(), check_deliverability=False)
    except EmailNotValidError:
        return None
    return str(checked.normalized)


def acknowledgement(form: Form, values: Mapping[str, Any], status: str) -> dict[str, Any] | None:
    """The acknowledgement email an accepted submission gets (consent ticked, a valid
    address in the form's field), or None: no consent or no valid address is no error."""
    ack = form.ack_email
    if status != "accepted" or not ack or not form.consent_field:
        return None
    if not consented(values.get(form.consent_field)):
        return None
    address = _valid_address(values.get(str(ack.get("field"))))
    if address is None:
        return None
    return {
        "id": new_id("dlv"),
        "max_attempts": MAX_ATTEMPTS["email"],
        "target": {"to": [address]},
        "template": {
            "subject": ack.get("subject"),
            "text": ack.get("text"),
            "labels": dict(form.labels),
            "field_order": list(values),
            "form_name": form.name,
        },
    }
