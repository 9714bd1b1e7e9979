-- Sign-in limits that hold against parallel guesses (core/owner/throttle.py): attempts are
-- counted per client and per account, and guesses of a password-reset link per client.
-- The account is an HMAC of the member's id (or of the address typed, when it is no
-- member's), never the address.
ALTER TABLE auth_failures DROP CONSTRAINT auth_failures_kind_check;
ALTER TABLE auth_failures ADD CONSTRAINT auth_failures_kind_check
    CHECK (kind IN ('sign_in', 'sign_in_account', 'reset_link', 'api_key'));

-- A TOTP code works once: the time step of the last code accepted for the member (on
-- signing in, joining, or turning TOTP on); a code of that step or an earlier one is refused.
ALTER TABLE members ADD COLUMN totp_last_step bigint;
