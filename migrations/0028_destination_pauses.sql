-- Destinations that pause themselves, and the organization's notification emails
-- (docs/delivery.md#destinations-that-pause-themselves, docs/operations.md#owner-notifications).

-- A paused destination says why: the owner turned it off, or it failed every attempt for
-- its window. `enabled` stays the one flag everything reads; the reason is set exactly
-- when it is false. `failing_since` is when the storm breaker last turned it `failing`
-- (kept by the retention tick); `pause_after_*` is its window.
ALTER TABLE destinations
    ADD COLUMN paused_reason text CHECK (paused_reason IN ('owner', 'failing')),
    ADD COLUMN paused_at timestamptz,
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN pause_after_hours integer NOT NULL DEFAULT 24
        CHECK (pause_after_hours BETWEEN 1 AND 720),
    ADD COLUMN pause_after_attempts integer NOT NULL DEFAULT 10
        CHECK (pause_after_attempts BETWEEN 1 AND 10000);
UPDATE destinations SET paused_reason = 'owner', paused_at = updated_at WHERE NOT enabled;
ALTER TABLE destinations
    ADD CONSTRAINT destinations_paused_has_reason CHECK (
        enabled = (paused_reason IS NULL) AND (paused_reason IS NULL) = (paused_at IS NULL)
    );

-- Where the organization's notices go: at most 10 addresses, none by default.
ALTER TABLE organizations
    ADD COLUMN notify text[] NOT NULL DEFAULT '{}' CHECK (cardinality(notify) <= 10);

-- What the owner is to be told, written by the statement that finds it (in the same
-- transaction), then folded into an email delivery by the retention tick: at most one
-- email per kind per hour per organization. `handled_at` is when it went into an email
-- (`delivery_id`), or was dropped because the organization had no address.
CREATE TABLE notifications (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind            text NOT NULL
                    CHECK (kind IN ('destination.paused', 'delivery.dead', 'quota.reached')),
    subject_id      text NOT NULL,
    data            jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    handled_at      timestamptz,
    delivery_id     text
);
-- One notice per dead-delivery alert and per month's quota (a destination may pause again).
CREATE UNIQUE INDEX notifications_subject_key ON notifications (organization_id, kind, subject_id)
    WHERE kind <> 'destination.paused';
CREATE INDEX notifications_unhandled_idx ON notifications (organization_id, kind)
    WHERE handled_at IS NULL;
CREATE INDEX notifications_sent_idx ON notifications (organization_id, kind, handled_at)
    WHERE delivery_id IS NOT NULL;

ALTER TABLE notifications ENABLE ROW LEVEL SECURITY;
CREATE POLICY notifications_organization_scope ON notifications
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT ON notifications TO postbag_app;

-- A notice email is a delivery of its own kind: no submission, route or destination, its
-- subject and text in the payload, sent through the installation's email provider.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('submission', 'acknowledgement', 'digest', 'event', 'notification'));
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'acknowledgement' AND submission_id IS NOT NULL AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
    OR (kind = 'notification' AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NULL AND payload IS NOT NULL)
);
