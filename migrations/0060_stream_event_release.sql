-- A quarantined stream event can be released by its owner, once: it becomes `accepted`
-- with `released_at`, and the stream's live routes that take accepted events of its type
-- deliver it (`POST /v1/streams/{id}/events/{event}/release`). The status and reason it had
-- stay in its `stream_event.released` event; what its data broke stays in `schema_errors`.
ALTER TABLE stream_events ADD COLUMN released_at timestamptz;
ALTER TABLE stream_events ADD CONSTRAINT stream_events_released_is_accepted
    CHECK (released_at IS NULL OR status = 'accepted');
