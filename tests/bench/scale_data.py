"""The data of the scale benchmark (tests/bench/scale.py), generated in the database by
INSERT … SELECT over generate_series: nothing passes through the client but the statements.

Every value is a function of the row's number (`hashint8extended`, `hashtextextended`), so
two databases loaded with the same `Shape` hold the same rows. The shape:

- organizations with a Zipf-like skew (the first few hold most of the submissions), each
  with 1 to 30 forms (the bigger, the more) whose use is skewed too, and 2 to 10 webhook
  destinations; every form has two routes;
- submissions in arrival order over the period (the table's pages in time order, as a
  running installation writes them), their values a JSON object of 300 to 800 bytes of
  text fields (name, email, company, phone, subject, a message of 2 to 6 sentences; one in
  1,000 mentions a sofa, what the search looks for); 3% spam and 1% quarantined, whose
  values are erased 30 days after arrival;
- about 1.5 deliveries per submission (route 2 took 56% of them), most sent, 2% dead after
  10 attempts, and a hot set the claim reads: the last 0.05% of the period pending, 10% of
  the last 0.5% failed and retrying (half of them due), a few with an expired lease;
- about 1.3 attempts per delivery, started from its creation with the worker's backoff;
- the events the code writes: one per submission (received or quarantined), one per
  ended delivery (sent or dead), one per erasure: about 2.5 per submission.

A table is loaded as a bulk restore does: its secondary indexes and foreign keys dropped,
the rows inserted, then the indexes built and the keys added (validated) as the
migrations define them; primary and unique keys stay throughout.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg import sql

from core.platform.db import Conn

# The share of the period, from its end, whose deliveries are still pending.
PENDING_SHARE = 0.0005
# The share of the period, from its end, in which one delivery in ten is failing.
FAILING_SHARE = 0.005
# Days after which spam and quarantined values are erased (the plans' spam retention).
SPAM_DAYS = 30
# How many buckets map a submission to its organization.
BUCKETS = 10_000

FIRST = [
    "Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Frances",
    "John", "Radia", "Linus", "Sophie", "Tim", "Hedy", "Katherine", "Dennis", "Lynn",
    "Niklaus", "Shafi", "Leslie", "Annie", "Guido", "Mary", "Yukihiro", "Joan", "Bjarne",
    "Evelyn", "Anders", "Ruth",
]  # fmt: skip
LAST = [
    "Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson",
    "Allen", "Backus", "Perlman", "Torvalds", "Wilson", "Berners-Lee", "Lamarr", "Johnson",
    "Ritchie", "Conway", "Wirth", "Goldwasser", "Lamport", "Easley", "van Rossum", "Keller",
    "Matsumoto", "Clarke", "Stroustrup", "Boyd", "Hejlsberg", "Teitelman",
]  # fmt: skip
COMPANIES = [
    "Analytical Engines Ltd", "Northwind Traders", "Contoso Pharmaceuticals", "Fabrikam Inc",
    "Globex Corporation", "Initech", "Umbrella Logistics", "Hooli", "Vandelay Industries",
    "Wayne Enterprises", "Stark Industries", "Acme Garden Supplies", "Blue Harbour Bakery",
    "Riverside Dental Clinic", "Kestrel Architects", "", "", "",
]  # fmt: skip
SUBJECTS = [
    "Quote request", "Question about pricing", "Booking enquiry", "Support request",
    "Partnership proposal", "Feedback", "Job application", "Press enquiry",
    "Appointment", "Order status", "Newsletter", "Other",
]  # fmt: skip
SENTENCES = [
    "Hello, I would like to know more about your services and what a typical project costs.",
    "We are a small team based in Leeds and we are looking for a partner for the next year.",
    "Could you send me a quote for the work described below, with your earliest start date?",
    "I tried to reach you by phone yesterday afternoon but nobody picked up, so here I am.",
    "Our current supplier is closing at the end of the quarter and we need a replacement.",
    "Please call me back on the number above between nine and five on any weekday.",
    "The order I placed last week has not arrived yet and the tracking link shows nothing.",
    "I am writing on behalf of my manager, who asked me to collect three offers by Friday.",
    "We would need around forty units delivered to our warehouse before the end of March.",
    "Is it possible to book a table for twelve people on Saturday evening at eight?",
    "Thank you for the great service last month, the whole team was very happy with it.",
    "Do you offer discounts for charities or schools, and if so how do we apply for one?",
    "Attached to my previous message you will find the plans for the kitchen extension.",
    "I saw your stand at the trade fair in Birmingham and would love to continue our chat.",
    "My appointment is on Tuesday but I have to move it, is Thursday morning still free?",
    "The invoice number is on the second page; the amount does not match what we agreed.",
    "We are organising a conference in May and are looking for speakers on this topic.",
    "Could you confirm whether the price includes installation and the removal of waste?",
    "I would like to unsubscribe from the weekly newsletter but keep the product updates.",
    "Our website form stopped sending emails last night, can someone have a look at it?",
    "Looking forward to hearing from you soon, and have a lovely rest of your week.",
    "Kind regards from the whole office, and thanks in advance for your quick answer.",
    "The chairs we ordered are fine, but one of the tables arrived with a scratch on top.",
    "We need the documents signed and returned before the meeting with the bank.",
]  # fmt: skip
# One submission in 1,000 ends with it: what the benchmark's search finds.
RARE_SENTENCE = "Also, could you deliver a sofa with the rest of the order?"
RARE_WORD = "sofa"
DOMAINS = ["example.com", "example.org", "example.net", "mail.example", "post.example"]


@dataclass(frozen=True, slots=True)
class Shape:
    """What is generated: how many submissions, over which period, across how many
    organizations (their forms and destinations follow from their weight)."""

    submissions: int
    organizations: int
    start: datetime
    end: datetime

    def weights(self) -> list[float]:
        """Each organization's share of the submissions (Zipf-like, exponent 1.1)."""
        raw = [1 / (i**1.1) for i in range(1, self.organizations + 1)]
        total = sum(raw)
        return [w / total for w in raw]

    def forms(self) -> list[int]:
        """Forms per organization: 1 for the smallest, up to 30 for the biggest."""
        return [max(1, min(30, round(1 + 60 * math.sqrt(w)))) for w in self.weights()]

    def destinations(self) -> list[int]:
        return [max(2, min(10, forms // 3 + 1)) for forms in self.forms()]

    def bucket_map(self) -> list[int]:
        """For each of BUCKETS equal slices of [0, 1), the organization (1-based) it falls in."""
        bounds, total = [], 0.0
        for weight in self.weights():
            total += weight
            bounds.append(total)
        mapped, org = [], 0
        for bucket in range(BUCKETS):
            while org < len(bounds) - 1 and (bucket + 0.5) / BUCKETS > bounds[org]:
                org += 1
            mapped.append(org + 1)
        return mapped

    def params(self) -> dict[str, Any]:
        span = (self.end - self.start).total_seconds()
        return {
            "n": self.submissions,
            "orgs": self.organizations,
            "start": self.start,
            "end": self.end,
            "step": span / self.submissions,
            "orgmap": self.bucket_map(),
            "forms": self.forms(),
            "destinations": self.destinations(),
            "pending_after": self.end - timedelta(seconds=span * PENDING_SHARE),
            "failing_after": self.end - timedelta(seconds=span * FAILING_SHARE),
            "first": FIRST,
            "last": LAST,
            "companies": COMPANIES,
            "subjects": SUBJECTS,
            "sentences": SENTENCES,
            "rare": RARE_SENTENCE,
            "domains": DOMAINS,
            "spam_days": SPAM_DAYS,
        }


def org_id(number: int) -> str:
    """The id of organization `number` (1-based), as ORGANIZATIONS makes it."""
    return f"org_{number:026x}"


def form_id(org: int, form: int) -> str:
    """The id of form `form` (0-based, the most used first) of organization `org`."""
    return f"frm_{org:012x}{form:013x}0"


# The ids are hex digits (a subset of the ids' alphabet, so they have the shape of
# `new_id`'s): deliveries' start with their time in hex; submissions' with their millisecond
# in base32 as `new_id`'s do, since 0067 partitions submissions by those ids' ranges.
ORGANIZATIONS = """
INSERT INTO organizations (id, name, plan, created_at)
SELECT 'org_' || lpad(to_hex(o), 26, '0'), 'Organization ' || o, 'self_hosted',
       %(start)s::timestamptz - interval '30 days'
  FROM generate_series(1, %(orgs)s) AS o
"""

FORMS = """
INSERT INTO forms (id, organization_id, name, created_at, updated_at)
SELECT 'frm_' || lpad(to_hex(o), 12, '0') || lpad(to_hex(k), 13, '0') || '0',
       'org_' || lpad(to_hex(o), 26, '0'), 'Form ' || k || ' of organization ' || o,
       %(start)s::timestamptz - interval '30 days', %(start)s::timestamptz - interval '30 days'
  FROM generate_series(1, %(orgs)s) AS o
 CROSS JOIN LATERAL generate_series(0, (%(forms)s::int[])[o] - 1) AS k
"""

DESTINATIONS = """
INSERT INTO destinations (id, organization_id, type, name, config, created_at)
SELECT 'dst_' || lpad(to_hex(o), 13, '0') || lpad(to_hex(j), 13, '0'),
       'org_' || lpad(to_hex(o), 26, '0'), 'webhook', 'Hook ' || j,
       jsonb_build_object('url', 'https://hooks.example.com/' || o || '/' || j),
       %(start)s::timestamptz - interval '30 days'
  FROM generate_series(1, %(orgs)s) AS o
 CROSS JOIN LATERAL generate_series(0, (%(destinations)s::int[])[o] - 1) AS j
"""

SECRETS = """
INSERT INTO destination_secrets (organization_id, destination_id, version, secret)
SELECT organization_id, id, 1, 'whsec_' || md5(id) FROM destinations
"""

# Two routes per form, to two of its organization's destinations.
ROUTES = """
INSERT INTO routes (id, organization_id, form_id, destination_id, created_at)
SELECT 'rte_' || substr(f.id, 5, 25) || r,
       f.organization_id, f.id,
       'dst_' || lpad(to_hex(o), 13, '0')
              || lpad(to_hex((k + r) %% (%(destinations)s::int[])[o]), 13, '0'),
       f.created_at
  FROM (SELECT f.*, ('x' || substr(f.id, 5, 12))::bit(48)::bigint::int AS o,
               ('x' || substr(f.id, 17, 13))::bit(52)::bigint::int AS k
          FROM forms f) f
 CROSS JOIN generate_series(1, 2) AS r
"""

SUBMISSIONS = """
INSERT INTO submissions (id, organization_id, form_id, status, reason, "values", field_order,
                         meta, form_snapshot, payload_hash, client_hash, received_at,
                         erase_at, erased_at, erase_reason)
SELECT 'sub_'
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 45 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 40 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 35 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 30 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 25 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 20 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 15 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 10 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 5 & 31)::int + 1, 1)
              || substr('0123456789abcdefghjkmnpqrstvwxyz', (x.ms >> 0 & 31)::int + 1, 1)
              || '0' || lpad(to_hex(x.h1 & 1152921504606846975), 15, '0'),
       'org_' || lpad(to_hex(x.o), 26, '0'),
       'frm_' || lpad(to_hex(x.o), 12, '0') || lpad(to_hex(x.k), 13, '0') || '0',
       x.status,
       CASE x.status WHEN 'spam' THEN 'honeypot' WHEN 'quarantined' THEN 'origin_rejected' END,
       CASE WHEN NOT x.erased THEN jsonb_build_object(
           'name', x.first || ' ' || x.last,
           'email', lower(x.first) || '.' || lower(replace(x.last, ' ', '')) || (x.h2 %% 1000)
                    || '@' || (%(domains)s::text[])[1 + (x.h2 >> 10) %% 5],
           'company', (%(companies)s::text[])[1 + (x.h3 >> 20) %% 18],
           'phone', '+44 20 ' || lpad(((x.h3 >> 30) %% 10000000)::text, 7, '0'),
           'subject', (%(subjects)s::text[])[1 + (x.h4 >> 40) %% 12],
           'message', concat_ws(' ',
               (%(sentences)s::text[])[1 + x.h4 %% 24],
               (%(sentences)s::text[])[1 + (x.h4 >> 5) %% 24],
               CASE WHEN x.sentences > 2 THEN (%(sentences)s::text[])[1 + (x.h4 >> 10) %% 24] END,
               CASE WHEN x.sentences > 3 THEN (%(sentences)s::text[])[1 + (x.h4 >> 15) %% 24] END,
               CASE WHEN x.sentences > 4 THEN (%(sentences)s::text[])[1 + (x.h4 >> 20) %% 24] END,
               CASE WHEN x.sentences > 5 THEN (%(sentences)s::text[])[1 + (x.h4 >> 25) %% 24] END,
               CASE WHEN x.h5 %% 1000 = 0 THEN %(rare)s END),
           'consent', CASE WHEN x.h5 %% 3 = 0 THEN 'no' ELSE 'yes' END) END,
       CASE WHEN NOT x.erased
            THEN ARRAY['name', 'email', 'company', 'phone', 'subject', 'message', 'consent'] END,
       jsonb_build_object('origin', 'https://www.example.com',
                          'referrer', 'https://www.example.com/contact', 'locale', 'en'),
       jsonb_build_object('form_name', 'Form ' || x.k, 'labels', '{}'::jsonb, 'consent', NULL,
                          'consent_field', NULL, 'reply_to_field', 'email'),
       sha256(int8send(x.g)), sha256(int8send(x.h2 %% 50000)), x.at,
       CASE WHEN x.status <> 'accepted' THEN x.at + make_interval(days => %(spam_days)s) END,
       CASE WHEN x.erased THEN x.at + make_interval(days => %(spam_days)s) END,
       CASE WHEN x.erased THEN 'expired' END
  FROM (SELECT y.*, floor(extract(epoch FROM y.at) * 1000)::bigint AS ms,
               y.status <> 'accepted'
                   AND y.at + make_interval(days => %(spam_days)s) < %(end)s AS erased
          FROM (SELECT z.*,
                       floor((%(forms)s::int[])[z.o] * power((z.h2 %% 1000) / 1000.0, 2))::int
                           AS k,
                       CASE WHEN z.h3 %% 1000 < 30 THEN 'spam'
                            WHEN z.h3 %% 1000 < 40 THEN 'quarantined'
                            ELSE 'accepted' END AS status,
                       (%(first)s::text[])[1 + (z.h5 >> 8) %% 30] AS first,
                       (%(last)s::text[])[1 + (z.h5 >> 16) %% 30] AS last,
                       2 + (z.h5 >> 24) %% 5 AS sentences
                  FROM (SELECT w.*, (%(orgmap)s::int[])[1 + w.h1 %% 10000] AS o
                          FROM (SELECT g,
                                       hashint8extended(g, 1) & 4611686018427387903 AS h1,
                                       hashint8extended(g, 2) & 4611686018427387903 AS h2,
                                       hashint8extended(g, 3) & 4611686018427387903 AS h3,
                                       hashint8extended(g, 4) & 4611686018427387903 AS h4,
                                       hashint8extended(g, 5) & 4611686018427387903 AS h5,
                                       %(start)s::timestamptz
                                           + make_interval(secs => (g - 1) * %(step)s::float8)
                                           AS at
                                  FROM generate_series(1, %(n)s::bigint) AS g) w) z) y) x
"""

# An accepted submission's deliveries: route 1, and route 2 for 56% of them (~1.5 each).
DELIVERIES = """
INSERT INTO deliveries (id, organization_id, kind, submission_id, route_id, destination_id,
                        channel, status, reason, attempts, max_attempts, next_attempt_at,
                        claimed_until, claim_token, target, secret_version, last_detail,
                        sent_at, created_at, updated_at)
SELECT x.id, x.organization_id, 'submission', x.submission_id, x.route_id, x.destination_id,
       'webhook', x.status,
       CASE WHEN x.status = 'dead' THEN 'attempts_exhausted' END,
       x.attempts, 10,
       CASE WHEN x.status = 'failed'
            THEN %(end)s::timestamptz + make_interval(secs => (x.h >> 8) %% 7200 - 3600)
            ELSE x.created_at END,
       CASE WHEN x.status = 'sending' THEN %(end)s::timestamptz - interval '1 minute' END,
       CASE WHEN x.status = 'sending' THEN md5(x.id)::uuid END,
       x.target, 1,
       CASE x.status WHEN 'sent' THEN 'HTTP 200' WHEN 'dead'
            THEN 'attempts_exhausted (last: HTTP 500)' WHEN 'failed' THEN 'HTTP 503' END,
       CASE WHEN x.status = 'sent'
            THEN x.created_at + make_interval(secs => 1 + 30 * (x.attempts - 1)) END,
       x.created_at,
       CASE WHEN x.status IN ('sent', 'dead')
            THEN x.created_at + make_interval(secs => 1 + 30 * (power(2, x.attempts - 1) - 1))
            ELSE x.created_at END
  FROM (SELECT y.*,
               CASE y.status WHEN 'pending' THEN 0 WHEN 'dead' THEN 10
                             WHEN 'sent' THEN 1 + ((y.h >> 12) %% 100 < 12)::int
                             ELSE 1 + (y.h >> 16) %% 3 END AS attempts
          FROM (SELECT 'dlv_' || substr(s.id, 5, 25) || r.n AS id, s.organization_id,
                       s.id AS submission_id, rt.id AS route_id, d.id AS destination_id,
                       d.config AS target, s.received_at AS created_at, h.h,
                       CASE WHEN s.received_at > %(pending_after)s THEN 'pending'
                            WHEN s.received_at > %(failing_after)s AND h.h %% 10 = 0
                            THEN CASE WHEN (h.h >> 20) %% 20 = 0 THEN 'sending' ELSE 'failed' END
                            WHEN h.h %% 1000 < 20 THEN 'dead'
                            ELSE 'sent' END AS status
                  FROM submissions s
                 CROSS JOIN generate_series(1, 2) AS r(n)
                 CROSS JOIN LATERAL (
                       SELECT hashtextextended(s.id || r.n, 11) & 4611686018427387903 AS h) h
                  JOIN routes rt ON rt.id = 'rte_' || substr(s.form_id, 5, 25) || r.n
                  JOIN destinations d ON d.id = rt.destination_id
                 WHERE s.status = 'accepted'
                   AND (r.n = 1 OR (hashtextextended(s.id, 7) & 4611686018427387903) %% 100 < 56)
               ) y) x
"""

USAGE = """
INSERT INTO usage_counters (organization_id, month, shard, submissions)
SELECT organization_id, date_trunc('month', received_at AT TIME ZONE 'UTC')::date, 1, count(*)
  FROM submissions WHERE status = 'accepted'
 GROUP BY 1, 2
"""

# A delivery's attempts, the last one its outcome (a lease in flight is not one yet).
ATTEMPTS = """
INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token, started_at,
                               duration_ms, outcome, http_status, error_class,
                               response_excerpt)
SELECT x.organization_id, x.delivery_id, x.attempt, x.token, x.started_at,
       CASE WHEN x.outcome = 'sent' THEN 40 + x.h %% 400
            WHEN x.h %% 4 = 0 THEN 10000 ELSE 200 + x.h %% 3000 END,
       x.outcome,
       CASE WHEN x.outcome = 'sent' THEN 200 WHEN x.h %% 4 = 0 THEN NULL
            ELSE (ARRAY[500, 502, 503])[1 + x.h %% 3] END,
       CASE WHEN x.outcome <> 'sent' AND x.h %% 4 = 0 THEN 'timeout' END,
       CASE WHEN x.outcome = 'sent' THEN '{"ok":true,"received":true}'
            WHEN x.h %% 4 = 0 THEN NULL
            ELSE '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad '
                 'Gateway</h1></center><hr><center>nginx/1.24.0</center></body></html>' END
  FROM (SELECT d.organization_id, d.id AS delivery_id, a.n AS attempt,
               md5(d.id || '/' || a.n)::uuid AS token,
               d.created_at + make_interval(secs => 1 + 30 * (power(2, a.n - 1) - 1))
                   AS started_at,
               CASE WHEN a.n = d.attempts AND d.status = 'sent' THEN 'sent'
                    WHEN a.n = d.attempts AND d.status = 'dead' THEN 'dead'
                    ELSE 'failed' END AS outcome,
               hashtextextended(d.id || a.n, 13) & 4611686018427387903 AS h
          FROM deliveries d
         CROSS JOIN LATERAL generate_series(
               1, d.attempts - (d.status = 'sending')::int) AS a(n)) x
 ORDER BY x.started_at
"""

EVENTS = """
INSERT INTO events (organization_id, type, subject_id, data, created_at)
SELECT organization_id, type, subject_id, data, created_at
  FROM (SELECT organization_id,
               CASE status WHEN 'quarantined' THEN 'submission.quarantined'
                           ELSE 'submission.received' END AS type,
               id AS subject_id,
               jsonb_build_object('form', form_id, 'status', status, 'reason', reason,
                                  'flags', '[]'::jsonb) AS data,
               received_at AS created_at
          FROM submissions
        UNION ALL
        SELECT organization_id, 'delivery.' || status, id,
               jsonb_build_object('delivery', id, 'submission', submission_id,
                                  'destination', destination_id, 'attempts', attempts)
               || CASE WHEN reason IS NULL THEN '{}'::jsonb
                       ELSE jsonb_build_object('reason', reason) END,
               updated_at
          FROM deliveries WHERE status IN ('sent', 'dead')
        UNION ALL
        SELECT organization_id, 'submission.erased', id,
               jsonb_build_object('reason', erase_reason), erased_at
          FROM submissions WHERE erased_at IS NOT NULL) e
 ORDER BY created_at
"""

# Memory a bulk load gives its session (sorts, index builds).
LOAD_SETTINGS = ("SET maintenance_work_mem = '1GB'", "SET work_mem = '256MB'")


async def _fetch(conn: Conn, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = await conn.execute(query, params)
    return list(await cur.fetchall())


async def bulk(conn: Conn, table: str, load: Callable[[], Awaitable[object]]) -> None:
    """Run `load` on `table` without its secondary indexes and foreign keys, then build
    them again as they were (keys validated, and the statistics targets of their columns
    set again on the indexes and every partition's: a new index has none)."""
    indexes = await _fetch(
        conn,
        "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition"
        "  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = %(t)s::regclass"
        "   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
        {"t": table},
    )
    keys = await _fetch(
        conn,
        "SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint"
        " WHERE conrelid = %(t)s::regclass AND contype = 'f' AND conparentid = 0",
        {"t": table},
    )
    for key in keys:
        await conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                sql.Identifier(table), sql.Identifier(key["name"])
            )
        )
    targets = await _fetch(
        conn,
        "SELECT c.relname AS name, a.attnum, a.attstattarget"
        "  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        "  JOIN pg_attribute a ON a.attrelid = i.indexrelid AND a.attnum > 0"
        " WHERE i.indrelid = %(t)s::regclass AND a.attstattarget > 0"
        "   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
        {"t": table},
    )
    for index in indexes:
        await conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index["name"])))
    await load()
    for index in indexes:
        # A partitioned table's index is printed `ON ONLY` it: built so, it would be an
        # invalid index of the parent alone, none of its partitions'.
        definition = index["definition"].replace(" ON ONLY ", " ON ", 1)
        await conn.execute(definition.encode())
    for target in targets:
        for part in await _fetch(
            conn,
            "SELECT c.relname AS name FROM pg_partition_tree(%(i)s::regclass) t"
            " JOIN pg_class c ON c.oid = t.relid",
            {"i": target["name"]},
        ):
            await conn.execute(
                sql.SQL("ALTER INDEX {} ALTER COLUMN {} SET STATISTICS {}").format(
                    sql.Identifier(part["name"]),
                    sql.Literal(target["attnum"]),
                    sql.Literal(target["attstattarget"]),
                )
            )
    for key in keys:
        head = sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(
            sql.Identifier(table), sql.Identifier(key["name"])
        )
        # The definition as the catalog printed it, not input.
        await conn.execute((head.as_string(conn) + key["definition"]).encode())
    invalid = await _fetch(
        conn,
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid IN (SELECT relid FROM pg_partition_tree(%(t)s::regclass)"
        "                      UNION SELECT %(t)s::regclass) AND NOT i.indisvalid",
        {"t": table},
    )
    assert not invalid, f"invalid indexes after loading {table}: {invalid}"


async def load_base(conn: Conn, shape: Shape) -> None:
    """Organizations, forms, destinations, routes, submissions, deliveries and usage."""
    params = shape.params()
    for setting in LOAD_SETTINGS:
        await conn.execute(setting)
    for statement in (ORGANIZATIONS, FORMS, DESTINATIONS, SECRETS, ROUTES):
        await conn.execute(statement, params)
    await bulk(conn, "submissions", lambda: conn.execute(SUBMISSIONS, params))
    await bulk(conn, "deliveries", lambda: conn.execute(DELIVERIES, params))
    await conn.execute(USAGE, params)


async def load_history(conn: Conn) -> None:
    """Delivery attempts and events, from the deliveries and submissions loaded."""
    for setting in LOAD_SETTINGS:
        await conn.execute(setting)
    await bulk(conn, "delivery_attempts", lambda: conn.execute(ATTEMPTS, {}))
    await bulk(conn, "events", lambda: conn.execute(EVENTS, {}))
