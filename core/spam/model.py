"""The learned filter's storage (docs/spam.md#the-learned-filter): per organization, the
document counts and the token counts, what each trained submission taught it (to move it
on a new decision and take it out on erase), its bound, and its reset."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.vocabulary import TrainingLabel
from core.spam.learned import MIN_DOCS, Counts, hashed, heaviest, tokens

# An organization's model keeps at most this many tokens: past it, those seen least go.
MAX_MODEL_TOKENS = 20_000


def counts_of(found: list[dict[str, Any]]) -> Counts | None:
    """The model's counts from the rows of `spam_lookup` or `spam_model_counts` (one per
    token it knows), or None while it is not ready."""
    if not found or found[0]["spam_docs"] is None:
        return None
    return Counts(
        spam_docs=found[0]["spam_docs"],
        ham_docs=found[0]["ham_docs"],
        tokens={bytes(r["token"]): (r["spam"], r["ham"]) for r in found if r["token"] is not None},
    )


async def weighed_tokens(
    conn: Conn, organization_id: str, submission: Mapping[str, Any], secret_key: bytes
) -> list[dict[str, Any]]:
    """For a submission the learned filter judged, the tokens of its values that weigh
    most in the model now (its receipt shows them beside its score), heaviest toward spam
    first; none for another submission, or once its values are gone."""
    values = submission["values"]
    if submission["spam_score"] is None or not values:
        return []
    token_list = tokens(values)
    token_hashes = hashed(token_list, secret_key)
    cur = await conn.execute(
        queries["spam_model_counts"],
        {"organization_id": organization_id, "tokens": token_hashes, "min_docs": 0},
    )
    counts = counts_of(await cur.fetchall())
    return [] if counts is None else heaviest(counts, token_list, token_hashes)


def _deltas(
    changes: Iterable[tuple[TrainingLabel, Iterable[bytes], int]],
) -> tuple[dict[str, Any], Counter[str]]:
    """The token and document count changes of (label, tokens, +1 or -1) entries."""
    spam: Counter[bytes] = Counter()
    ham: Counter[bytes] = Counter()
    docs: Counter[str] = Counter()
    for label, token_hashes, sign in changes:
        side = spam if label == "spam" else ham
        for token in token_hashes:
            side[bytes(token)] += sign
        docs[label] += sign
    keys = [t for t in spam.keys() | ham.keys() if spam[t] or ham[t]]
    return {
        "tokens": keys,
        "spam": [spam[t] for t in keys],
        "ham": [ham[t] for t in keys],
    }, docs


async def _apply(
    conn: Conn,
    organization_id: str,
    changes: list[tuple[TrainingLabel, Iterable[bytes], int]],
    now: datetime,
) -> None:
    token_deltas, docs = _deltas(changes)
    params = {"organization_id": organization_id, **token_deltas}
    if token_deltas["tokens"]:
        await conn.execute(queries["apply_spam_token_deltas"], params)
    await conn.execute(
        queries["apply_spam_doc_deltas"],
        {
            "organization_id": organization_id,
            "spam": docs["spam"],
            "ham": docs["ham"],
            "now": now,
        },
    )
    await conn.execute(
        queries["prune_spam_tokens"],
        {
            "organization_id": organization_id,
            "tokens": token_deltas["tokens"],
            "max_tokens": MAX_MODEL_TOKENS,
        },
    )


async def train(
    conn: Conn,
    *,
    organization_id: str,
    submission_id: str,
    label: TrainingLabel,
    values: Mapping[str, Any],
    secret_key: bytes,
    now: datetime,
) -> None:
    """Teach the model that this submission is `label`: what it taught before (the other
    label) is taken out first. Runs in the caller's transaction."""
    params = {"organization_id": organization_id, "submission_id": submission_id}
    cur = await conn.execute(queries["lock_spam_training"], params)
    previous = await cur.fetchone()
    if previous is not None and previous["label"] == label:
        return
    token_hashes = hashed(tokens(values), secret_key)
    changes: list[tuple[TrainingLabel, Iterable[bytes], int]] = [(label, token_hashes, 1)]
    if previous is not None:
        changes.append((previous["label"], previous["tokens"], -1))
    await _apply(conn, organization_id, changes, now)
    await conn.execute(
        queries["save_spam_training"],
        {**params, "label": label, "tokens": token_hashes, "now": now},
    )


async def forget_erased(conn: Conn, ids: list[str], now: datetime) -> None:
    """Take what these submissions taught out of their organizations' models (their values
    are being erased). Runs in the caller's transaction."""
    cur = await conn.execute(queries["forget_spam_training"], {"ids": ids})
    by_org: dict[str, list[tuple[TrainingLabel, Iterable[bytes], int]]] = {}
    for row in await cur.fetchall():
        by_org.setdefault(row["organization_id"], []).append((row["label"], row["tokens"], -1))
    for organization_id in sorted(by_org):
        await _apply(conn, organization_id, by_org[organization_id], now)


async def reset_model(conn: Conn, organization_id: str) -> None:
    """Forget everything the organization's model learned."""
    await conn.execute(queries["reset_spam_model"], {"organization_id": organization_id})


async def model_state(conn: Conn, organization_id: str) -> dict[str, Any]:
    """The model as its owner reads it: documents per class, tokens kept, its bound, and
    whether it judges yet."""
    cur = await conn.execute(queries["spam_model_state"], {"organization_id": organization_id})
    row = await cur.fetchone()
    assert row is not None
    return {
        "spam_trained": row["spam_docs"],
        "ham_trained": row["ham_docs"],
        "tokens": row["tokens"],
        "max_tokens": MAX_MODEL_TOKENS,
        "min_trained": MIN_DOCS,
        "ready": row["spam_docs"] >= MIN_DOCS and row["ham_docs"] >= MIN_DOCS,
        "updated_at": row["updated_at"],
    }
