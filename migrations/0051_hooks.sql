-- REST hooks (docs/hooks.md): a subscription Zapier, Make, n8n or Pipedream makes and
-- removes through `/v1/hooks`. A hook is a webhook destination plus what feeds it: a form's
-- route (`submission.created`), a stream's route (`stream.event`), or nothing for the
-- lifecycle events (`delivery.dead`, `destination.paused`), whose deliveries are queued to
-- every live hook of the event's organization when the event is written. The destination
-- and its route are created and removed with the hook, so a hook is signed, retried,
-- throttled, paused and counted against the plan exactly like a webhook destination.
CREATE TABLE hooks (
    id               text PRIMARY KEY CHECK (id LIKE 'hok\_%'),
    organization_id  text NOT NULL,
    event            text NOT NULL CHECK (event IN ('submission.created', 'stream.event',
                                                    'delivery.dead', 'destination.paused')),
    destination_id   text NOT NULL,
    form_id          text,
    route_id         text,
    stream_id        text,
    stream_route_id  text,
    created_at       timestamptz NOT NULL,
    -- Removed softly: by its subscriber (`DELETE /v1/hooks/{id}`, reason `unsubscribed`),
    -- or by its target answering `410 Gone` (reason `gone`).
    deleted_at       timestamptz,
    deleted_reason   text CHECK (deleted_reason IN ('unsubscribed', 'gone')),
    CONSTRAINT hooks_deleted_has_reason CHECK ((deleted_at IS NULL) = (deleted_reason IS NULL)),
    CONSTRAINT hooks_feeds_its_event CHECK (
        CASE event
            WHEN 'submission.created' THEN form_id IS NOT NULL AND route_id IS NOT NULL
                AND stream_id IS NULL AND stream_route_id IS NULL
            WHEN 'stream.event' THEN stream_id IS NOT NULL AND stream_route_id IS NOT NULL
                AND form_id IS NULL AND route_id IS NULL
            ELSE form_id IS NULL AND route_id IS NULL AND stream_id IS NULL
                AND stream_route_id IS NULL
        END
    ),
    FOREIGN KEY (organization_id) REFERENCES organizations (id) ON DELETE CASCADE,
    FOREIGN KEY (destination_id, organization_id)
        REFERENCES destinations (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (route_id, organization_id) REFERENCES routes (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (stream_id, organization_id)
        REFERENCES streams (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (stream_route_id, organization_id)
        REFERENCES stream_routes (id, organization_id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX hooks_destination_key ON hooks (destination_id);
CREATE INDEX hooks_live_idx ON hooks (organization_id, event, id) WHERE deleted_at IS NULL;

ALTER TABLE hooks ENABLE ROW LEVEL SECURITY;
CREATE POLICY hooks_organization_scope ON hooks
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON hooks TO postbag_app;

-- A lifecycle event's delivery to a hook: no submission, route or event, its body in the
-- payload (written when the event is), to the hook's webhook destination. (The checks below
-- restate every kind: a notification's destination from 0042, the autoresponse of 0047.)
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('submission', 'acknowledgement', 'digest', 'event', 'notification',
                    'account', 'autoresponse', 'lifecycle'));
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind IN ('acknowledgement', 'autoresponse') AND submission_id IS NOT NULL
        AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
    OR (kind = 'notification' AND submission_id IS NULL AND route_id IS NULL
        AND payload IS NOT NULL)
    OR (kind = 'account' AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NULL AND payload IS NOT NULL)
    OR (kind = 'lifecycle' AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NOT NULL AND payload IS NOT NULL)
);

-- The worker unsubscribing a hook whose target answered `410 Gone` is an audited change
-- with no person or key behind it: actor kind `system`, via `worker`.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_kind_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_kind_check
    CHECK (actor_kind IN ('member', 'key', 'operator', 'system'));
ALTER TABLE audit_log DROP CONSTRAINT audit_log_via_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_via_check
    CHECK (via IN ('api', 'mcp', 'dashboard', 'cli', 'worker'));
