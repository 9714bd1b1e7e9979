-- name: spam_lookup
-- The submit path's read-only statement for the spam checks, before the insert: the most
-- times one of the post's fingerprints was counted in its current window (`duplicates`;
-- null when none is), and the organization's model, when it is trained on at least
-- `min_docs` of each class, with the counts of the tokens asked for: one row per token it
-- knows, at least one row (nulls when the model is not ready). The insert counts the
-- fingerprints (`insert_submission`).
SELECT (SELECT max(f.count) FROM spam_fingerprints f
         WHERE f.form_id = %(form_id)s AND f.organization_id = %(organization_id)s
           AND f.fingerprint = ANY(%(fingerprints)s::bytea[])
           AND f.window_start > %(now)s - make_interval(secs => %(window)s)) AS duplicates,
       m.spam_docs, m.ham_docs, t.token, t.spam, t.ham
  FROM (SELECT 1) one
  LEFT JOIN spam_models m
    ON m.organization_id = %(organization_id)s
   AND m.spam_docs >= %(min_docs)s AND m.ham_docs >= %(min_docs)s
  LEFT JOIN spam_tokens t
    ON t.organization_id = m.organization_id AND t.token = ANY(%(tokens)s::bytea[])

-- name: spam_model_counts
-- The organization's model, when it is trained on at least `min_docs` of each class, with
-- the counts of the tokens asked for (one row per token it knows; one row with null token
-- when it knows none of them). No row: not ready.
SELECT m.spam_docs, m.ham_docs, t.token, t.spam, t.ham
  FROM spam_models m
  LEFT JOIN spam_tokens t
    ON t.organization_id = m.organization_id AND t.token = ANY(%(tokens)s::bytea[])
 WHERE m.organization_id = %(organization_id)s
   AND m.spam_docs >= %(min_docs)s AND m.ham_docs >= %(min_docs)s

-- name: spam_model_state
-- The organization's model as the owner reads it.
SELECT coalesce(m.spam_docs, 0) AS spam_docs, coalesce(m.ham_docs, 0) AS ham_docs,
       (SELECT count(*) FROM spam_tokens t WHERE t.organization_id = %(organization_id)s)
           AS tokens,
       m.updated_at
  FROM (SELECT 1) one
  LEFT JOIN spam_models m ON m.organization_id = %(organization_id)s

-- name: lock_spam_training
-- What a submission taught the model before, locked against a concurrent decision.
SELECT label, tokens FROM spam_training
 WHERE submission_id = %(submission_id)s AND organization_id = %(organization_id)s
   FOR UPDATE

-- name: apply_spam_token_deltas
-- Add each token's change of counts (negative to untrain): tokens the model has are
-- updated (never below 0), new tokens with something to add are inserted; a concurrent
-- insert of the same new token adds to it.
WITH d AS (
    SELECT * FROM unnest(%(tokens)s::bytea[], %(spam)s::int[], %(ham)s::int[])
        AS d(token, spam, ham)
), updated AS (
    UPDATE spam_tokens t
       SET spam = greatest(t.spam + d.spam, 0), ham = greatest(t.ham + d.ham, 0)
      FROM d
     WHERE t.organization_id = %(organization_id)s AND t.token = d.token
)
INSERT INTO spam_tokens AS t (organization_id, token, spam, ham)
SELECT %(organization_id)s, d.token, greatest(d.spam, 0), greatest(d.ham, 0)
  FROM d
 WHERE (d.spam > 0 OR d.ham > 0)
   AND NOT EXISTS (SELECT 1 FROM spam_tokens e
                    WHERE e.organization_id = %(organization_id)s AND e.token = d.token)
ON CONFLICT ON CONSTRAINT spam_tokens_key
DO UPDATE SET spam = t.spam + excluded.spam, ham = t.ham + excluded.ham

-- name: apply_spam_doc_deltas
-- Add to the organization's document counts (never below 0).
INSERT INTO spam_models AS m (organization_id, spam_docs, ham_docs, updated_at)
VALUES (%(organization_id)s, greatest(%(spam)s, 0), greatest(%(ham)s, 0), %(now)s)
ON CONFLICT (organization_id)
DO UPDATE SET spam_docs = greatest(m.spam_docs + %(spam)s, 0),
              ham_docs = greatest(m.ham_docs + %(ham)s, 0), updated_at = %(now)s

-- name: save_spam_training
-- Record what a submission taught the model now.
INSERT INTO spam_training (submission_id, organization_id, label, tokens, trained_at)
VALUES (%(submission_id)s, %(organization_id)s, %(label)s, %(tokens)s::bytea[], %(now)s)
ON CONFLICT ON CONSTRAINT spam_training_pkey
DO UPDATE SET label = excluded.label, tokens = excluded.tokens, trained_at = excluded.trained_at

-- name: prune_spam_tokens
-- Delete the organization's tokens that count nothing any more among `tokens`, and, past
-- `max_tokens`, those seen least (the model's bound).
DELETE FROM spam_tokens
 WHERE organization_id = %(organization_id)s
   AND ((token = ANY(%(tokens)s::bytea[]) AND spam = 0 AND ham = 0)
        OR token IN (SELECT token FROM spam_tokens
                      WHERE organization_id = %(organization_id)s
                      ORDER BY spam + ham, token
                      LIMIT greatest((SELECT count(*) FROM spam_tokens
                                       WHERE organization_id = %(organization_id)s)
                                     - %(max_tokens)s, 0)))

-- name: forget_spam_training
-- The training records of submissions being erased, deleted and returned, so their counts
-- can be taken out of the model.
DELETE FROM spam_training WHERE submission_id = ANY(%(ids)s)
RETURNING organization_id, label, tokens

-- name: reset_spam_model
-- Forget everything the organization's model learned.
WITH tokens AS (
    DELETE FROM spam_tokens WHERE organization_id = %(organization_id)s
), training AS (
    DELETE FROM spam_training WHERE organization_id = %(organization_id)s
)
DELETE FROM spam_models WHERE organization_id = %(organization_id)s

-- name: spam_counts
-- A form's submissions of the last days, per status and reason.
SELECT status, reason, count(*)::int AS count
  FROM submissions
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
   AND received_at > %(since)s
 GROUP BY status, reason
 ORDER BY status, reason

-- name: lock_due_ham
-- Submissions whose implicit ham is due (`ham_due`, docs/spam.md#implicit-ham), oldest
-- first, their queue rows locked (several machines take different ones), each with what the
-- pass does:
-- `teach` (still accepted with its values, its form's implicit ham still on, every
-- delivery to a route sent, nothing taught of it yet), `wait` (a delivery still on its way,
-- within a week of arrival) or `drop` (anything else: marked, erased, undelivered).
SELECT s.id, s.organization_id, s."values",
       CASE WHEN s.status <> 'accepted' OR s."values" IS NULL
                 OR coalesce((f.spam ->> 'implicit_ham')::boolean, true) IS NOT TRUE
                 OR EXISTS (SELECT 1 FROM spam_training t WHERE t.submission_id = s.id)
                 OR EXISTS (SELECT 1 FROM deliveries d
                             WHERE d.submission_id = s.id AND d.kind = 'submission'
                               AND d.status IN ('dead', 'skipped'))
            THEN 'drop'
            WHEN EXISTS (SELECT 1 FROM deliveries d
                          WHERE d.submission_id = s.id AND d.kind = 'submission'
                            AND d.status <> 'sent')
            THEN CASE WHEN s.received_at > %(now)s - interval '7 days' THEN 'wait' ELSE 'drop' END
            ELSE 'teach' END AS outcome
  FROM ham_due h
  JOIN submissions s ON s.id = h.submission_id AND s.organization_id = h.organization_id
  JOIN forms f ON f.id = s.form_id AND f.organization_id = s.organization_id
 WHERE h.due_at <= %(now)s
 ORDER BY h.due_at
 LIMIT %(limit)s
   FOR UPDATE OF h SKIP LOCKED

-- name: settle_due_ham
-- The pass's outcome of due submissions: done (`ids`: taught or dropped, out of the queue),
-- or due again in an hour (`waiting`: a delivery still on its way).
WITH done AS (
    DELETE FROM ham_due WHERE submission_id = ANY(%(ids)s::text[])
)
UPDATE ham_due SET due_at = %(later)s WHERE submission_id = ANY(%(waiting)s::text[])
