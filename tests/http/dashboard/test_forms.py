"""The form page's settings over HTTP: the schema modes it offers and shows, and a save that
changes only what the owner changed."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any, get_args

from core.platform.db import Conn
from core.platform.services import Services
from core.platform.vocabulary import SchemaMode
from tests.support.builders import make_form, make_route_to, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows


class _FormReader(HTMLParser):
    """What a browser would post from the form with `action`, and each select's options."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action = action
        self.inside = False
        self.fields: dict[str, str] = {}
        self.options: dict[str, list[str]] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = found.get("action") == self.action
        if not self.inside:
            return
        name = found.get("name", "")
        if tag == "input" and name and found.get("type") != "checkbox":
            self.fields[name] = found.get("value", "")
        elif tag == "textarea":
            self._textarea = name
            self.fields[name] = ""
        elif tag == "select":
            self._select = name
            self.options[name] = []
        elif tag == "option" and self._select:
            self.options[self._select].append(found["value"])
            if "selected" in found or self._select not in self.fields:
                self.fields[self._select] = found["value"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data


def _read(html: str, action: str) -> _FormReader:
    reader = _FormReader(action)
    reader.feed(html)
    assert reader.fields, f"no form posting to {action}"
    return reader


async def _api_modes(services: Services) -> list[str]:
    async with dashboard_client(services) as client:
        spec = (await client.get("/v1/openapi.json")).json()
    mode = spec["components"]["schemas"]["FormFields"]["properties"]["schema_mode"]
    return list(mode["enum"])


async def test_forms__the_mode_select_offers_exactly_the_api_modes(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant)
    api_modes = await _api_modes(services)
    assert api_modes == list(get_args(SchemaMode))
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        new = _read((await client.get("/app/forms/new")).text, "/app/forms")
        edit = _read((await client.get(f"/app/forms/{form_id}")).text, f"/app/forms/{form_id}")
    assert new.options["schema_mode"] == api_modes
    assert edit.options["schema_mode"] == api_modes
    assert new.fields["schema_mode"] == "off"


async def test_forms__the_page_shows_the_stored_mode(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        for mode in get_args(SchemaMode):
            form_id = await make_form(conn, tenant, schema_mode=mode)
            page = await client.get(f"/app/forms/{form_id}")
            assert _read(page.text, f"/app/forms/{form_id}").fields["schema_mode"] == mode
            assert f'<strong id="schema-mode-now">{mode}</strong>' in page.text


async def test_forms__saving_another_setting_keeps_observe(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    labels = {"message": "Your message", "email": "Email"}  # not in alphabetical order
    form_id = await make_form(conn, tenant, schema_mode="observe", labels=labels)
    url = f"/app/forms/{form_id}"
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, url).fields
        assert json.loads(posted["labels"]) == labels
        assert list(json.loads(posted["labels"])) == ["message", "email"]
        # The browser posts every field, the textareas with CRLF line breaks.
        posted = {k: v.replace("\n", "\r\n") for k, v in posted.items()}
        response = await client.post(url, data=posted | {"name": "Contact us"})
        assert response.status_code == 303, response.text
    (form,) = await rows(
        conn, "SELECT name, schema_mode, labels FROM forms WHERE id = %(id)s", id=form_id
    )
    assert form["name"] == "Contact us" and form["schema_mode"] == "observe"
    assert list(form["labels"].items()) == list(labels.items())


async def test_forms__a_save_leaves_settings_changed_elsewhere_since(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    url = f"/app/forms/{form_id}"
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, url).fields
        # Meanwhile, through the API, another session turns enforce on and closes the form.
        await conn.execute(
            "UPDATE forms SET schema_mode = 'enforce', accepting = false, rate_limit_max = 3 "
            "WHERE id = %(id)s",
            {"id": form_id},
        )
        response = await client.post(url, data=posted | {"honeypot_field": "_trap"})
        assert response.status_code == 303, response.text
        (form,) = await rows(conn, "SELECT * FROM forms WHERE id = %(id)s", id=form_id)
        assert form["honeypot_field"] == "_trap"
        assert form["schema_mode"] == "enforce" and form["accepting"] is False
        assert form["rate_limit_max"] == 3
        # The owner's own change of mode is saved as chosen.
        posted = _read((await client.get(url)).text, url).fields
        assert posted["schema_mode"] == "enforce"
        response = await client.post(url, data=posted | {"schema_mode": "observe"})
        assert response.status_code == 303, response.text
    (form,) = await rows(conn, "SELECT schema_mode FROM forms WHERE id = %(id)s", id=form_id)
    assert form["schema_mode"] == "observe"


async def test_forms__inputs_left_out_of_a_post_are_left_alone(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe", rate_limit_max=7)
    url = f"/app/forms/{form_id}"
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, url).fields
        only = {"csrf": posted["csrf"], "shown": posted["shown"], "rate_per_seconds": "60"}
        response = await client.post(url, data=only)
        assert response.status_code == 303, response.text
    (form,) = await rows(conn, "SELECT * FROM forms WHERE id = %(id)s", id=form_id)
    assert (form["rate_limit_max"], form["rate_limit_per_seconds"]) == (7, 60)
    assert form["name"] == "Contact" and form["schema_mode"] == "observe"


async def test_forms__a_refused_save_names_the_field_and_changes_nothing(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    url = f"/app/forms/{form_id}"
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, url).fields
        refused: dict[str, Any] = {}
        for change in ({"schema_mode": "suggest"}, {"name": ""}):
            response = await client.post(url, data=posted | change)
            refused[next(iter(change))] = response
        stale = await client.post(url, data={"csrf": posted["csrf"], "name": "No page"})
    for field, response in refused.items():
        assert response.status_code == 422 and "Please check the form" in response.text
        assert f"<code>{field}</code>" in response.text
    assert stale.status_code == 422 and "reload" in stale.text
    (form,) = await rows(conn, "SELECT name, schema_mode FROM forms WHERE id = %(id)s", id=form_id)
    assert form["name"] == "Contact" and form["schema_mode"] == "observe"


async def test_forms__the_page_saves_and_shows_the_autoresponse(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant)
    url = f"/app/forms/{form_id}"
    reply = {"to_field": "email", "subject": "Thanks {{name}}", "text": "Hi", "fields": ["name"]}
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, url).fields
        assert posted["autoresponse"] == ""
        response = await client.post(url, data=posted | {"autoresponse": json.dumps(reply)})
        assert response.status_code == 303, response.text
        shown = _read((await client.get(url)).text, url).fields
    assert json.loads(shown["autoresponse"])["subject"] == "Thanks {{name}}"
    (form,) = await rows(conn, "SELECT autoresponse FROM forms WHERE id = %(id)s", id=form_id)
    assert form["autoresponse"]["to_field"] == "email" and form["autoresponse"]["enabled"]


async def test_forms__an_email_routes_message_is_previewed_from_the_sample_then_saved(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, labels={"message": "Your message"})
    _, route = await make_route_to(
        conn, tenant, form_id, type="email", config={"to": ["owner@example.com"]}, secrets=()
    )
    url = f"/app/forms/{form_id}"
    action = f"{url}/routes/{route}"
    template = {"subject": "From {{email}}", "text": "They wrote: {{message}}"}
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        posted = _read((await client.get(url)).text, f"{action}/template").fields
        assert posted["subject"] == "" and posted["text"] == ""
        shown = await client.post(f"{action}/preview", data=posted | template)
        assert shown.status_code == 200, shown.text
        assert "<strong>From visitor@example.com</strong>" in shown.text
        assert "They wrote: A test from Postbag." in shown.text
        bad = await client.post(f"{action}/preview", data=posted | {"subject": "{{ a | b }}"})
        assert "only {{field}} placeholders are allowed" in bad.text
        # The preview stored nothing; saving does.
        assert await rows(conn, "SELECT template FROM routes") == [{"template": None}]
        saved = await client.post(f"{action}/template", data=posted | template)
        assert saved.status_code == 303, saved.text
    assert await rows(conn, "SELECT template FROM routes") == [{"template": template}]
