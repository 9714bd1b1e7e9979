"""The learned filter (docs/spam.md#the-learned-filter): trained only through the owner's
decisions (*Release* and *Mark as spam* on `/v1`, and implicit ham: an accepted post left
alone past its grace period, taught by the retention tick), never by what a visitor alone
controls; judged on `POST /s/{form}`, erased submissions taken out, bounded, resettable, and
its state in `GET /v1/forms/{id}/spam`."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import httpx
import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.spam.learned import hashed, score, tokens
from core.spam.model import counts_of
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import Tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY
from tests.support.spam import JSON_ACCEPT, spam_form
from tests.support.submit import submit_client

SITE = "https://site.example"
FIRST = ["Anna", "Ben", "Chloe", "David", "Elif", "Femi", "Grace", "Hugo", "Ines", "Jon"]
LAST = ["Smith", "Okafor", "Novak", "Garcia", "Chen", "Muller", "Rossi", "Kowalski"]
CITY = ["Leeds", "Bristol", "Lyon", "Porto", "Graz", "Utrecht", "Cork", "Bergen"]
PRODUCT = ["oak table", "garden bench", "bookshelf", "kitchen cabinet", "desk", "wardrobe"]
WEEKDAY = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
# Words both kinds use, so that no single word gives a post away.
SHARED = ["website", "business", "price", "today", "help", "team", "quick", "offer", "thanks"]
HAM = [
    "Hi, could you send me a price for a {product} delivered to {city}? {shared} {shared}",
    "Hello, I ordered a {product} last week and it has not arrived yet in {city}. {shared}",
    "Is the {product} available in walnut? We would collect it on {weekday}. {shared}",
    "Thanks for the quick reply. {weekday} afternoon suits us for the {product} fitting.",
    "Our {product} has a scratch on the top; can your team repair it in {city}? {shared}",
    "Please call me back about the {product} order, I am free on {weekday} morning.",
    # Ham that talks like marketing: a business asking about its own order.
    "We run a small {shared} in {city} and saw the {product} on your website; price for {n}?",
    "Our marketing team needs {n} {product} pieces for the new office in {city}. {shared}",
]
SPAM_WORDS = ["ranking", "backlinks", "traffic", "crypto", "bitcoin", "investment", "leads"]
SPAM = [
    "Boost your {shared} {spam} with our guaranteed SEO package, first page in {n} days!",
    "We noticed your {shared} could get {n}x more {spam}. Reply for a free audit {shared}.",
    "Earn {n}% weekly with our {spam} {shared} program, no experience needed.",
    "Dear owner, buy high authority {spam} for your {shared}: {n} for only {n} USD.",
    "Hire our offshore developers to grow your {spam}, {shared} rates from {n} dollars.",
    "Get {n} targeted {spam} per month for your {shared}, cancel anytime {shared}.",
    # Spam that talks like a customer.
    "Hi, I saw your {product} on your website. We can bring you {n} new {spam} a month.",
    "Hello from {city}! Loved the {product}. Want {n} more {spam}? Our team can help {shared}.",
]
# Everyday words, a few of which any message may hold.
COMMON = (
    "the a and we you our your for with this that about please just also very really more "
    "new good great next week month time would could like need want know see call back soon "
    "hope well here there some any all one two other first last best small big"
).split()


def _fill(template: str, rng: random.Random) -> str:
    text = template
    for key, pool in (
        ("{product}", PRODUCT),
        ("{city}", CITY),
        ("{weekday}", WEEKDAY),
        ("{shared}", SHARED),
        ("{spam}", SPAM_WORDS),
    ):
        while key in text:
            text = text.replace(key, rng.choice(pool), 1)
    while "{n}" in text:
        text = text.replace("{n}", str(rng.randint(2, 500)), 1)
    return f"{text} {' '.join(rng.sample(COMMON, rng.randint(2, 8)))}"


def corpus(kind: str, count: int, rng: random.Random) -> list[dict[str, str]]:
    """`count` posts of `kind` (`ham` or `spam`), each with a name, an address and a
    message from a random template with random fill."""
    posts = []
    for n in range(count):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        templates = HAM if kind == "ham" else SPAM
        posts.append(
            {
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{n}@mail.example",
                "message": _fill(rng.choice(templates), rng),
            }
        )
    return posts


async def _post(
    client: httpx.AsyncClient, form: str, values: dict[str, Any], origin: str | None = SITE
) -> str:
    headers = {**JSON_ACCEPT, **({"Origin": origin} if origin else {})}
    response = await client.post(f"/s/{form}", json=values, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["receipt"])


async def _decide(api: httpx.AsyncClient, receipt: str, action: str) -> None:
    response = await api.post(f"/v1/submissions/{receipt}/{action}")
    assert response.status_code == 200, response.text


async def _learned_form(
    services: Services, conn: Conn, spam: dict[str, Any] | None = None
) -> tuple[Tenant, str]:
    """A form that holds back posts without its origin (ham reaches the owner's Release that
    way), with duplicates off: the corpus repeats itself now and then."""
    return await spam_form(
        services, conn, {"duplicate_max": None, **(spam or {})}, allowed_origins=[SITE]
    )


async def _train(
    services: Services,
    tenant: Tenant,
    form: str,
    ham: list[dict[str, str]],
    spam: list[dict[str, str]],
) -> None:
    """Ham posted without the origin is quarantined and released; spam is accepted and
    marked as spam: the owner's decisions, through `/v1`."""
    async with submit_client(services) as client:
        held = [await _post(client, form, values, origin=None) for values in ham]
        accepted = [await _post(client, form, values) for values in spam]
    async with api_client(services, tenant.key) as api:
        for receipt in held:
            await _decide(api, receipt, "release")
        for receipt in accepted:
            await _decide(api, receipt, "spam")


async def _trained(
    services: Services, conn: Conn, seed: int, ham: int, spam: int, **settings: Any
) -> tuple[random.Random, Tenant, str]:
    """A form whose organization's filter was taught `ham` and `spam` posts of a corpus
    drawn with `seed`; returns the generator to draw more from."""
    rng = random.Random(seed)
    tenant, form = await _learned_form(services, conn, settings)
    await _train(services, tenant, form, corpus("ham", ham, rng), corpus("spam", spam, rng))
    return rng, tenant, form


async def test_learned__a_generated_corpus_is_judged_with_precision_of_at_least_95_percent(
    services: Services, conn: Conn
) -> None:
    rng, tenant, form = await _trained(services, conn, 31, 60, 60)
    held_out = [("ham", v) for v in corpus("ham", 100, rng)] + [
        ("spam", v) for v in corpus("spam", 100, rng)
    ]
    rng.shuffle(held_out)
    async with submit_client(services) as client:
        judged = [(kind, await _post(client, form, values)) for kind, values in held_out]
    found = await rows(
        conn,
        "SELECT id, status, reason, spam_score FROM submissions WHERE id = ANY(%(ids)s)",
        ids=[receipt for _, receipt in judged],
    )
    by_id = {r["id"]: r for r in found}
    caught = {r["id"] for r in found if r["reason"] == "learned"}
    assert all(by_id[i]["spam_score"] >= 0.9 for i in caught)
    true_positives = sum(1 for kind, r in judged if kind == "spam" and r in caught)
    false_positives = sum(1 for kind, r in judged if kind == "ham" and r in caught)
    precision = true_positives / max(true_positives + false_positives, 1)
    recall = true_positives / 100
    print(
        f"learned filter: precision {precision:.3f}, recall {recall:.3f}, "
        f"false positives {false_positives}/100 ham, caught {true_positives}/100 spam"
    )
    assert precision >= 0.95
    assert recall >= 0.8
    # The receipt shows the score and the tokens that weighed most, toward spam first.
    example = sorted(caught)[0]
    async with api_client(services, tenant.key) as api:
        receipt = (await api.get(f"/v1/submissions/{example}")).json()
    assert receipt["reason"] == "learned" and receipt["spam_score"] >= 0.9
    assert receipt["spam_tokens"] and receipt["spam_tokens"][0]["weight"] > 0
    assert {"token", "weight"} == receipt["spam_tokens"][0].keys()
    async with dashboard_client(services) as dashboard:
        await sign_in(dashboard, tenant.key)
        page = (await dashboard.get(f"/app/submissions/{example}")).text
    assert f"score {receipt['spam_score']:.2f}" in page
    assert "Weighed most" in page and receipt["spam_tokens"][0]["token"] in page


async def test_learned__it_judges_only_once_trained_on_enough_of_both(
    services: Services, conn: Conn
) -> None:
    rng, tenant, form = await _trained(services, conn, 7, 9, 40)
    async with submit_client(services) as client:
        receipts = [await _post(client, form, values) for values in corpus("spam", 10, rng)]
    found = await rows(conn, "SELECT status FROM submissions WHERE id = ANY(%(ids)s)", ids=receipts)
    assert {r["status"] for r in found} == {"accepted"}
    async with api_client(services, tenant.key) as api:
        state = (await api.get(f"/v1/forms/{form}/spam")).json()["model"]
    assert (state["spam_trained"], state["ham_trained"], state["ready"]) == (40, 9, False)


async def test_learned__a_form_with_the_filter_off_accepts_what_it_would_catch(
    services: Services, conn: Conn
) -> None:
    rng, tenant, form = await _trained(services, conn, 8, 30, 30)
    spam = corpus("spam", 10, rng)
    async with submit_client(services) as client:
        judged = [await _post(client, form, values) for values in spam[:5]]
        async with api_client(services, tenant.key) as api:
            patched = await api.patch(
                f"/v1/forms/{form}", json={"spam": {"learned": False, "duplicate_max": None}}
            )
            assert patched.status_code == 200
        unjudged = [await _post(client, form, values) for values in spam[5:]]
    found = await rows(
        conn, "SELECT id, reason FROM submissions WHERE id = ANY(%(ids)s)", ids=judged + unjudged
    )
    reasons = {r["id"]: r["reason"] for r in found}
    assert [reasons[i] for i in judged].count("learned") >= 3
    assert [reasons[i] for i in unjudged] == [None] * 5


def _token(word: str) -> bytes:
    [token] = hashed([f"message:{word}"], TEST_SECRET_KEY.encode())
    return token


async def _token_counts(conn: Conn, word: str) -> list[dict[str, Any]]:
    return await rows(conn, "SELECT spam, ham FROM spam_tokens WHERE token = %(t)s", t=_token(word))


async def _model(conn: Conn) -> list[dict[str, Any]]:
    return await rows(conn, "SELECT spam_docs, ham_docs FROM spam_models")


async def test_learned__a_decision_moves_a_submission_and_erase_takes_its_tokens_out(
    services: Services, conn: Conn
) -> None:
    tenant, form = await _learned_form(services, conn, {"blocked_words": ["zqxbargain"]})
    async with submit_client(services) as client:
        caught = await _post(client, form, {"message": "A zqxbargain for zqxmarker readers"})
    # The rule's hit taught the filter nothing: a visitor alone cannot move it.
    assert await _token_counts(conn, "zqxmarker") == []
    assert await _model(conn) == []
    async with api_client(services, tenant.key) as api:
        await _decide(api, caught, "release")
        assert await _token_counts(conn, "zqxmarker") == [{"spam": 0, "ham": 1}]
        assert await _model(conn) == [{"spam_docs": 0, "ham_docs": 1}]
        await _decide(api, caught, "spam")
        await _decide(api, caught, "spam")  # marking again teaches nothing more
        assert await _token_counts(conn, "zqxmarker") == [{"spam": 1, "ham": 0}]
        erased = await api.post(f"/v1/submissions/{caught}/erase")
        assert erased.status_code == 200, erased.text
    assert await _token_counts(conn, "zqxmarker") == []
    assert await rows(conn, "SELECT 1 FROM spam_tokens") == []
    assert await rows(conn, "SELECT 1 FROM spam_training") == []
    assert await _model(conn) == [{"spam_docs": 0, "ham_docs": 0}]


async def test_learned__the_model_keeps_at_most_its_bound_of_tokens(
    services: Services, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("core.spam.model.MAX_MODEL_TOKENS", 40)
    _, tenant, form = await _trained(services, conn, 9, 0, 10)
    [count] = await rows(conn, "SELECT count(*)::int AS n FROM spam_tokens")
    assert count["n"] == 40
    async with api_client(services, tenant.key) as api:
        state = (await api.get(f"/v1/forms/{form}/spam")).json()["model"]
    assert (state["tokens"], state["spam_trained"]) == (40, 10)


async def test_learned__reset_forgets_everything_and_counts_show_per_reason(
    services: Services, conn: Conn
) -> None:
    _, tenant, form = await _trained(services, conn, 10, 2, 3, blocked_words=["casino"])
    async with submit_client(services) as client:
        await _post(client, form, {"message": "Best casino bonus"})
        await _post(client, form, {"message": "A plain question about a desk"})
    async with api_client(services, tenant.key) as api:
        spam = (await api.get(f"/v1/forms/{form}/spam")).json()
        counts = {(c["status"], c["reason"]): c["count"] for c in spam["counts"]}
        assert counts == {
            ("accepted", None): 3,
            ("spam", "marked_spam"): 3,
            ("spam", "spam_rule:words"): 1,
        }
        assert (spam["model"]["spam_trained"], spam["model"]["ham_trained"]) == (3, 2)
        assert spam["learned"] is True and spam["learned_threshold"] == 0.9
    async with dashboard_client(services) as dashboard:
        await sign_in(dashboard, tenant.key)
        form_page = (await dashboard.get(f"/app/forms/{form}")).text
    assert "<code>spam_rule:words</code></td><td>1</td>" in form_page
    assert "<code>marked_spam</code></td><td>3</td>" in form_page
    assert "taught 3 as spam and 2 as not spam" in form_page
    async with api_client(services, tenant.key) as api:
        reset = await api.delete("/v1/spam/model")
        assert reset.status_code == 204
        state = (await api.get(f"/v1/forms/{form}/spam")).json()["model"]
    assert (state["spam_trained"], state["ham_trained"], state["tokens"]) == (0, 0, 0)
    assert await rows(conn, "SELECT 1 FROM spam_training") == []


async def test_learned__marked_pitches_and_real_messages_left_alone_past_the_grace_period_teach_it(
    services: Services, conn: Conn
) -> None:
    rng = random.Random(44)
    tenant, form = await _learned_form(services, conn)
    async with submit_client(services) as client:
        pitches = [await _post(client, form, values) for values in corpus("spam", 40, rng)]
        for values in corpus("ham", 40, rng):
            await _post(client, form, values)
    async with api_client(services, tenant.key) as api:
        for receipt in pitches:
            await _decide(api, receipt, "spam")
        # Within the grace period the real messages teach nothing yet.
        await run_retention(services, now=utcnow() + timedelta(hours=71), budget=30)
        state = (await api.get(f"/v1/forms/{form}/spam")).json()["model"]
        assert (state["spam_trained"], state["ham_trained"]) == (40, 0)
        stats = await run_retention(services, now=utcnow() + timedelta(hours=73), budget=30)
        assert stats["implicit_ham_taught"] == 40
        again = await run_retention(services, now=utcnow() + timedelta(hours=74), budget=30)
        assert again.get("implicit_ham_taught", 0) == 0
        state = (await api.get(f"/v1/forms/{form}/spam")).json()["model"]
    assert (state["spam_trained"], state["ham_trained"], state["ready"]) == (40, 40, True)
    new = [("spam", v) for v in corpus("spam", 20, rng)] + [
        ("ham", v) for v in corpus("ham", 20, rng)
    ]
    async with submit_client(services) as client:
        judged = [(kind, await _post(client, form, values)) for kind, values in new]
    found = await rows(
        conn,
        "SELECT id, reason FROM submissions WHERE id = ANY(%(ids)s)",
        ids=[receipt for _, receipt in judged],
    )
    caught = {r["id"] for r in found if r["reason"] == "learned"}
    pitches_caught = sum(1 for kind, r in judged if kind == "spam" and r in caught)
    real_caught = sum(1 for kind, r in judged if kind == "ham" and r in caught)
    precision = pitches_caught / max(pitches_caught + real_caught, 1)
    print(
        f"implicit ham: caught {pitches_caught}/20 pitches, {real_caught}/20 real messages "
        f"(precision {precision:.2f}, recall {pitches_caught / 20:.2f})"
    )
    assert pitches_caught >= 15
    assert real_caught <= 1


def _score(found: list[dict[str, Any]], values: dict[str, str]) -> float:
    counts = counts_of(found)
    assert counts is not None
    return score(counts, hashed(tokens(values), TEST_SECRET_KEY.encode()))


async def test_learned__anonymous_rule_hits_leave_a_released_leads_score_unchanged(
    services: Services, conn: Conn
) -> None:
    _, tenant, form = await _trained(services, conn, 12, 20, 20)
    lead = {
        "name": "Ada Lovelace",
        "email": "ada@shop.example",
        "message": "Hello team, please send a price for four oak tables and a bookshelf "
        "for our shop, delivered next week. Thanks!",
    }
    async with submit_client(services) as client:
        held = await _post(client, form, lead, origin=None)
    async with api_client(services, tenant.key) as api:
        await _decide(api, held, "release")
    model = "SELECT token, spam, ham FROM spam_tokens ORDER BY token"
    before = await rows(conn, model)
    lead_tokens = hashed(tokens(lead), TEST_SECRET_KEY.encode())
    counts = (
        "SELECT m.spam_docs, m.ham_docs, t.token, t.spam, t.ham FROM spam_models m"
        " LEFT JOIN spam_tokens t ON t.token = ANY(%(tokens)s)"
    )
    score_before = _score(await rows(conn, counts, tokens=lead_tokens), lead)
    async with submit_client(services, client=("203.0.113.44", 4000)) as bot:
        for n in range(25):
            links = " ".join(f"https://shop{n}-{i}.example" for i in range(4))
            message = f"{lead['message']} {links}"
            values = {**lead, "email": f"bot{n}@bots.example", "message": message}
            response = await bot.post(
                f"/s/{form}", json=values, headers={**JSON_ACCEPT, "Origin": SITE}
            )
            assert response.status_code == 201
    reasons = await rows(
        conn,
        "SELECT reason, count(*)::int AS n FROM submissions"
        " WHERE reason LIKE 'spam_rule:%%' GROUP BY 1",
    )
    assert reasons == [{"reason": "spam_rule:links", "n": 25}]
    assert await rows(conn, model) == before
    assert _score(await rows(conn, counts, tokens=lead_tokens), lead) == score_before
    async with submit_client(services) as client:
        again = await _post(client, form, {**lead, "message": lead["message"] + " Regards"})
    [row] = await rows(conn, "SELECT status FROM submissions WHERE id = %(id)s", id=again)
    assert row["status"] == "accepted"
