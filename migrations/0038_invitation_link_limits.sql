-- Guesses of an invitation link are throttled per client like a reset link's
-- (core/owner/throttle.py): each use counts before the token is looked up.
ALTER TABLE auth_failures DROP CONSTRAINT auth_failures_kind_check;
ALTER TABLE auth_failures ADD CONSTRAINT auth_failures_kind_check
    CHECK (kind IN ('sign_in', 'sign_in_account', 'reset_link', 'invitation_link', 'api_key'));
