"""What a stored submission sends and records: the form's parts its deliveries send (kept once,
on the submission), one delivery per matching route, the acknowledgement email, the events
of the submission (docs/webhooks.md).

A submission's values are written once, on its row: a delivery keeps only what differs per
destination (its target, secret version and route template), and the worker builds the
body when it claims the delivery, from the submission (`core.destinations.bodies`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.intake.checks import Decision
from core.intake.form import Form
from core.platform.addresses import valid_address
from core.platform.fields import consented
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


def form_snapshot(
    *,
    form_name: str,
    labels: Mapping[str, Any],
    consent_field: str | None,
    ack_email: Mapping[str, Any] | None,
    values: Mapping[str, Any],
    attachments: list[dict[str, Any]],
) -> dict[str, Any]:
    """What of its form a submission's deliveries send, kept once on the submission as it
    was when the submission arrived (or was released): the form's name, the label of each
    submitted field that has one, whether the visitor ticked the consent field (None when
    the form has none), and the names of the consent field and of the field an email
    replies to."""
    names = [*values, *(a["field"] for a in attachments)]
    return {
        "form_name": form_name,
        "labels": {name: labels[name] for name in names if name in labels},
        "consent": consented(values.get(consent_field)) if consent_field else None,
        # Names, never values: the email's `Consent: given` line and its `Reply-To`.
        "consent_field": consent_field,
        "reply_to_field": reply_to_field(ack_email, values),
    }


# Field names that hold the visitor's address when the form names no acknowledgement field
# (the names form services have taught people to use), compared without case.
REPLY_TO_NAMES = ("email", "_replyto")


def reply_to_field(ack_email: Mapping[str, Any] | None, values: Mapping[str, Any]) -> str | None:
    """The field whose address an email's `Reply-To` takes: the form's acknowledgement field
    when it was submitted, else the first submitted field named `email` or `_replyto`."""
    field = str((ack_email or {}).get("field") or "")
    if field and field in values:
        return field
    return next((str(name) for name in values if str(name).lower() in REPLY_TO_NAMES), None)


def route_template(templates: Mapping[str, Any] | None) -> dict[str, Any]:
    """A delivery's template: the route's `{{field}}` subject and text (None for the default
    text). The form's labels and name and the visitor's field order are the submission's."""
    return {"subject": (templates or {}).get("subject"), "text": (templates or {}).get("text")}


def route_deliveries(form: Form, status: str) -> list[dict[str, Any]]:
    """One delivery for each of the form's routes that takes submissions of `status`."""
    return [
        {
            "id": new_id("dlv"),
            "route_id": route["route_id"],
            "template": route_template(route["template"]),
        }
        for route in form.routes
        if status in route["include_statuses"]
    ]


def acknowledgement(form: Form, values: Mapping[str, Any], status: str) -> dict[str, Any] | None:
    """The acknowledgement email an accepted submission gets (consent ticked, a valid
    address in the form's field), or None: no consent or no valid address is no error."""
    ack = form.ack_email
    if status != "accepted" or not ack or not form.consent_field:
        return None
    if not consented(values.get(form.consent_field)):
        return None
    address = valid_address(values.get(str(ack.get("field"))))
    if address is None:
        return None
    return {
        "id": new_id("dlv"),
        "target": {"to": [address]},
        "template": route_template(ack),
    }


def autoresponse(
    form: Form, values: Mapping[str, Any], status: str, *, over_quota: bool
) -> dict[str, Any] | None:
    """The autoresponse an accepted submission within its quota gets (the form's setting on,
    a valid address in its `to_field`), or None; its template is the settings as they are now
    (docs/autoresponse.md). The submit statement bounds it per mailbox and day."""
    settings = form.autoresponse
    if status != "accepted" or over_quota or not settings or not settings.get("enabled"):
        return None
    address = valid_address(values.get(str(settings.get("to_field"))))
    if address is None:
        return None
    snapshot = {
        name: settings.get(name)
        for name in ("subject", "text", "html", "reply_to", "from_name", "fields")
    }
    return {
        "id": new_id("dlv"),
        "target": {"to": [address]},
        "template": {"autoresponse": snapshot},
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
