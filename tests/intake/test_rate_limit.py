"""The rate limit and the acknowledgement cap are counted in the transaction that stores, so
concurrent posts cannot race past them (docs/submit.md#rate-limit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from core.platform.db import Conn
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def _post_all(client: httpx.AsyncClient, form: str, bodies: list[dict[str, str]]) -> None:
    responses = await asyncio.gather(
        *(client.post(f"/s/{form}", json=body, headers=JSON_ACCEPT) for body in bodies)
    )
    assert [r.status_code for r in responses] == [201] * len(bodies), [
        r.text for r in responses if r.status_code != 201
    ][:2]


async def test_rate_limit__40_concurrent_posts_against_max_5_store_exactly_10(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, rate_limit_max=5, routes=1)
    async with (
        built_services(db_url, tmp_path, pool_max=40) as services,
        submit_client(services) as client,
    ):
        responses = await asyncio.gather(
            *(client.post(f"/s/{form}", json={"n": str(n)}, headers=JSON_ACCEPT) for n in range(40))
        )
    # Five accepted, five more kept as rate-limited, and the flood past twice the limit is
    # refused with nothing stored.
    assert sorted(r.status_code for r in responses) == [201] * 10 + [429] * 30
    refused = [r for r in responses if r.status_code == 429]
    assert {r.json()["code"] for r in refused} == {"too_many_submissions"}
    assert all(540 <= int(r.headers["retry-after"]) <= 600 for r in refused)
    found = await rows(conn, "SELECT status, reason FROM submissions")
    assert len(found) == 10
    accepted = [r for r in found if r["status"] == "accepted"]
    limited = [r for r in found if (r["status"], r["reason"]) == ("quarantined", "rate_limited")]
    assert (len(accepted), len(limited)) == (5, 5)
    usage = await rows(conn, "SELECT sum(submissions)::int AS submissions FROM usage_counters")
    assert usage == [{"submissions": 5}]
    events = await rows(conn, "SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY 1")
    assert events == [
        {"type": "submission.quarantined", "n": 5},
        {"type": "submission.received", "n": 5},
    ]
    # The default route takes accepted submissions only: one delivery per accepted one.
    deliveries = await rows(conn, "SELECT count(*) AS n FROM deliveries")
    assert deliveries == [{"n": 5}]


async def test_rate_limit__an_ipv6_client_is_counted_per_64(
    conn: Conn, db_url: str, tmp_path: Path
) -> None:
    _, form = await setup_form(conn, rate_limit_max=1)
    async with built_services(db_url, tmp_path) as services:
        for client, n in [
            ("2001:db8:1:2::1", "a"),
            ("2001:db8:1:2:ffff:ffff:ffff:fffe", "b"),  # the same /64
            ("2001:db8:1:3::1", "c"),  # the next /64
            ("::ffff:198.51.100.9", "d"),  # an IPv4-mapped address is its IPv4 address
            ("198.51.100.9", "e"),
        ]:
            async with submit_client(services, client=(client, 4000)) as http:
                response = await http.post(f"/s/{form}", json={"n": n}, headers=JSON_ACCEPT)
                assert response.status_code == 201
    found = await rows(conn, """SELECT "values" ->> 'n' AS n, reason FROM submissions ORDER BY 1""")
    assert [(r["n"], r["reason"]) for r in found] == [
        ("a", None),
        ("b", "rate_limited"),
        ("c", None),
        ("d", None),
        ("e", "rate_limited"),
    ]


ACK = {"field": "email", "subject": "Thanks", "text": "We got it."}


async def test_rate_limit__acknowledgements_capped_per_recipient_and_day(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(
        conn, consent_field="consent", ack_email=ACK, labels={}, rate_limit_max=1000
    )
    _, other_form = await setup_form(
        conn, name="Other", consent_field="consent", ack_email=ACK, labels={}
    )
    victim = {"email": "victim@example.com", "consent": "on"}
    async with (
        built_services(db_url, tmp_path, pool_max=40) as services,
        submit_client(services) as client,
    ):
        await _post_all(client, form, [{**victim, "n": str(n)} for n in range(12)])
        # The cap is the mailbox's, across forms and organizations: the case, a plus tag
        # and (for Gmail) dots do not matter.
        await _post_all(client, other_form, [{**victim, "email": "Victim@Example.com"}])
        await _post_all(client, other_form, [{**victim, "email": "victim+2@example.com"}])
        await _post_all(client, form, [{"email": "ada@example.com", "consent": "on"}])
    found = await rows(
        conn,
        """SELECT lower(target -> 'to' ->> 0) AS address, count(*) AS n FROM deliveries
            WHERE kind = 'acknowledgement' GROUP BY 1 ORDER BY 1""",
    )
    assert found == [
        {"address": "ada@example.com", "n": 1},
        {"address": "victim@example.com", "n": 5},
    ]
    stored = await rows(conn, "SELECT status FROM submissions")
    assert len(stored) == 15 and {r["status"] for r in stored} == {"accepted"}
    counts = await rows(conn, "SELECT sent FROM acknowledgement_counts ORDER BY sent")
    assert [r["sent"] for r in counts] == [1, 5]


async def test_rate_limit__plus_tags_and_gmail_dots_share_one_cap(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(
        conn, consent_field="consent", ack_email=ACK, labels={}, rate_limit_max=1000
    )
    spellings = [
        "victim@gmail.com",
        "victim+1@gmail.com",
        "v.i.c.t.i.m@gmail.com",
        "Vic.Tim+news@googlemail.com",
        "victim+2@GMAIL.com",
        "vi.ctim+3@gmail.com",
        "victim+4@gmail.com",
    ]
    async with (
        built_services(db_url, tmp_path, pool_max=40) as services,
        submit_client(services) as client,
    ):
        await _post_all(client, form, [{"email": e, "consent": "on"} for e in spellings])
        # Dots are the same mailbox only at Gmail: elsewhere they are another address.
        await _post_all(client, form, [{"email": "v.ictim@example.com", "consent": "on"}])
    acks = await rows(conn, "SELECT count(*) AS n FROM deliveries WHERE kind = 'acknowledgement'")
    assert acks == [{"n": 5 + 1}]
    counts = await rows(conn, "SELECT sent FROM acknowledgement_counts ORDER BY sent")
    assert [r["sent"] for r in counts] == [1, 5]


async def test_rate_limit__the_gate_says_it_returns_one_row(conn: Conn) -> None:
    # At the default estimate (1000 rows) the submit statement's cost passed the JIT
    # threshold, and every submit spent about a second compiling (seen under load).
    [row] = await rows(conn, "SELECT prorows FROM pg_proc WHERE proname = 'postbag_submit_gate'")
    assert row["prorows"] == 1
