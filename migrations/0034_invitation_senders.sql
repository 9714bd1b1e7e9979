-- An invitation records who sent it (a member or an API key, by id) and can be withdrawn
-- (docs/teams.md): it is accepted only while its sender still holds a role at least the
-- invited one. Invitations made before their sender was recorded end here: an accepted one
-- is a member already, a pending one is sent again.
DELETE FROM invitations;
ALTER TABLE invitations
    ADD COLUMN sender_kind  text NOT NULL CHECK (sender_kind IN ('member', 'key')),
    ADD COLUMN sender_id    text NOT NULL,
    ADD COLUMN withdrawn_at timestamptz;

-- The daily bounds count an organization's invitations of the last day, and an address's.
CREATE INDEX invitations_created_idx ON invitations (organization_id, created_at);
-- The retention tick sweeps expired invitations.
CREATE INDEX invitations_expires_idx ON invitations (expires_at);
