"""Email addresses as visitors type them: one valid address, or None.

An acknowledgement is sent to it and an owner's email replies to it (`Reply-To`), so it must
be one address on one line: anything else (a list, a CR/LF, a second address) is no address.
"""

from __future__ import annotations

from typing import Any

# The longest address SMTP carries (RFC 5321's path limit).
MAX_ADDRESS = 254


def valid_address(value: Any) -> str | None:
    """The normalised address a field's value holds (the first of repeated values), or None."""
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, str) or not value or len(value) > MAX_ADDRESS:
        return None
    # Imported here: only forms that send email need it.
    from email_validator import EmailNotValidError, validate_email

    try:
        checked = validate_email(value.strip(), check_deliverability=False)
    except EmailNotValidError:
        return None
    return str(checked.normalized)
