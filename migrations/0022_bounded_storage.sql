-- One payload per submission: a submission's values are written once, on its row.
-- Before, every delivery copied the whole webhook body (`deliveries.payload`) and the form's
-- labels and the visitor's field order (`deliveries.template`): one post to a form with 300
-- routes wrote 73 MB. Now a submission keeps what of its form its deliveries send
-- (`form_snapshot`: the form's name, the labels of the submitted fields, the consent), its
-- deliveries keep what differs per destination (target, secret version, the route's subject
-- and text templates), and the worker builds the body from the submission's row when it
-- claims one. Only a digest's delivery keeps a payload (its own text, of many submissions).
ALTER TABLE submissions ADD COLUMN form_snapshot jsonb;

-- Existing rows: the snapshot from one of the submission's deliveries (all hold the same),
-- and the field order from its template where the row has none (stored before 0014).
UPDATE submissions s
   SET form_snapshot = jsonb_build_object(
           'form_name', d.template -> 'form_name',
           'labels', coalesce(d.payload -> 'labels', '{}'::jsonb),
           'consent', d.payload -> 'consent'),
       field_order = coalesce(s.field_order,
                              CASE WHEN jsonb_typeof(d.template -> 'field_order') = 'array'
                                   THEN ARRAY(SELECT jsonb_array_elements_text(
                                                  d.template -> 'field_order')) END)
  FROM (SELECT DISTINCT ON (submission_id) submission_id, payload, template
          FROM deliveries
         WHERE kind IN ('submission', 'acknowledgement')
         ORDER BY submission_id, id) d
 WHERE d.submission_id = s.id AND s.erased_at IS NULL;

ALTER TABLE deliveries ALTER COLUMN payload DROP NOT NULL;
UPDATE deliveries
   SET payload = NULL,
       template = CASE WHEN template IS NULL THEN NULL
                       ELSE jsonb_build_object('subject', template -> 'subject',
                                               'text', template -> 'text') END
 WHERE kind IN ('submission', 'acknowledgement');
ALTER TABLE deliveries ADD CONSTRAINT deliveries_payload_of_digests_only CHECK (
    CASE kind WHEN 'digest' THEN payload IS NOT NULL
              WHEN 'submission' THEN payload IS NULL
              WHEN 'acknowledgement' THEN payload IS NULL
              ELSE true END
);

-- Floods cost bounded storage. Per form and client, past twice the rate limit within its
-- window, the submit statement stores nothing (429 too_many_submissions). Per organization
-- and month, the bytes of values kept for review (spam, quarantined, over quota) are counted
-- on shard 0 (like attachment bytes) against the plan's `monthly_review_bytes`; past it,
-- such a submission is refused (429 storage_limit) and nothing is stored.
ALTER TABLE usage_counters
    ADD COLUMN review_bytes bigint NOT NULL DEFAULT 0 CHECK (review_bytes >= 0);
