"""What a stored submission sends and records: the webhook body (docs/webhooks.md), one delivery per
matching route, the acknowledgement email, and the events of the submission."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.intake.checks import Decision
from core.intake.form import Form
from core.intake.values import consented, first_text
from core.platform.clock import iso_ms
from core.platform.ids import new_id


def _locale(accept_language: str | None) -> str | None:
    if not accept_language:
        return None
    first = accept_language.split(",")[0].split(";")[0].strip()
    return first[:35] or None


def request_meta(
    *, origin: str | None, referrer: str | None, accept_language: str | None
) -> dict[str, Any]:
    """Where a submission came from, as its payload and its row keep it."""
    return {"origin": origin, "referrer": referrer, "locale": _locale(accept_language)}


def _payload_attachments(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["field"], []).append(
            {"id": row["id"], "name": row["name"], "type": row["content_type"], "size": row["size"]}
        )
    return grouped


def webhook_body(
    form: Form,
    submission_id: str,
    values: Mapping[str, Any],
    attachments: list[dict[str, Any]],
    *,
    meta: Mapping[str, Any],
    test: bool,
    now: datetime,
) -> dict[str, Any]:
    """The `form.submitted` body every destination of the submission is sent."""
    return submitted_body(
        form_id=form.id,
        labels=form.labels,
        consent_field=form.consent_field,
        submission_id=submission_id,
        values=values,
        attachments=attachments,
        meta=meta,
        test=test,
        submitted_at=now,
    )


def submitted_body(
    *,
    form_id: str,
    labels: Mapping[str, Any],
    consent_field: str | None,
    submission_id: str,
    values: Mapping[str, Any],
    attachments: list[dict[str, Any]],
    meta: Mapping[str, Any],
    test: bool,
    submitted_at: datetime,
) -> dict[str, Any]:
    """The `form.submitted` body: `labels` holds the form's label of each submitted field that
    has one, in the visitor's order; `consent` is whether the visitor ticked the form's
    consent field (None when it has none)."""
    files = _payload_attachments(attachments)
    return {
        "event": "form.submitted",
        "receipt": submission_id,
        "form": form_id,
        "submitted_at": iso_ms(submitted_at),
        "test": test,
        "values": values,
        "labels": {name: labels[name] for name in [*values, *files] if name in labels},
        "consent": consented(values.get(consent_field)) if consent_field else None,
        "attachments": files,
        "meta": meta,
    }


def delivery_template(
    *, labels: Mapping[str, Any], form_name: str, field_order: list[str], route_template: Any
) -> dict[str, Any]:
    """A delivery's template snapshot: the route's `{{field}}` templates (or None), the form's
    labels and name, and the visitor's field order."""
    return {
        "subject": (route_template or {}).get("subject"),
        "text": (route_template or {}).get("text"),
        "labels": dict(labels),
        "field_order": field_order,
        "form_name": form_name,
    }


def _template(form: Form, values: Mapping[str, Any], subject: Any, text: Any) -> dict[str, Any]:
    return delivery_template(
        labels=form.labels,
        form_name=form.name,
        field_order=list(values),
        route_template={"subject": subject, "text": text},
    )


def route_deliveries(form: Form, values: Mapping[str, Any], status: str) -> list[dict[str, Any]]:
    """One delivery for each of the form's routes that takes submissions of `status`."""
    return [
        {
            "id": new_id("dlv"),
            "route_id": route["route_id"],
            "template": _template(
                form,
                values,
                (route["template"] or {}).get("subject"),
                (route["template"] or {}).get("text"),
            ),
        }
        for route in form.routes
        if status in route["include_statuses"]
    ]


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
        "target": {"to": [address]},
        "template": _template(form, values, ack.get("subject"), ack.get("text")),
    }


def submission_events(form: Form, decision: Decision, flags: list[str]) -> list[dict[str, Any]]:
    """The event a stored submission records: received or quarantined. Its schema drift is
    counted apart (`schema_drift`), with one `schema.drift` event per rule and hour."""
    return [
        {
            "type": "submission.quarantined"
            if decision.status == "quarantined"
            else "submission.received",
            "data": {
                "form": form.id,
                "status": decision.status,
                "reason": decision.reason,
                "flags": flags,
            },
        }
    ]
