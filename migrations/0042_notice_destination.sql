-- An organization's notices (a destination paused, deliveries dead, the quota reached) can
-- also go to one chat or webhook destination of the owner's choice, beside the email to
-- `notify` (docs/operations.md#owner-notifications). The choice is checked when it is made
-- (a live chat or webhook destination of the organization) and again at each fold: a
-- destination removed, paused or itself the subject of a notice gets none of it.
ALTER TABLE organizations ADD COLUMN notify_destination_id text
    CHECK (notify_destination_id LIKE 'dst\_%');

-- The delivery of a notice to that destination: a `notification` delivery with the
-- destination (its target and secret follow the destination, as every attempt's do) and
-- no route. The notice email keeps no destination.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'acknowledgement' AND submission_id IS NOT NULL AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
    OR (kind = 'notification' AND submission_id IS NULL AND route_id IS NULL
        AND payload IS NOT NULL)
    OR (kind = 'account' AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NULL AND payload IS NOT NULL)
);

-- Where each folded notice went besides the email: the destination's delivery.
ALTER TABLE notifications ADD COLUMN destination_delivery_id text;
