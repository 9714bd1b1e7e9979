-- A destination that paused itself opens an alert of its own kind (`destination.paused`),
-- so the pause shows on the Alerts page and `GET /v1/alerts` as well as in the notice
-- email; resuming the destination resolves it.
ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('delivery.dead', 'storage.stuck', 'destination.paused'));
