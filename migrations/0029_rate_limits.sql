-- Per-destination rate limits (docs/delivery.md#rate-limits): a token bucket on each
-- destination row, refilled and spent by the claim under that row's lock, so every worker
-- holds one rate together.
--   destinations.rate_per_second        the owner's rate (null: its type's default, which
--                                       the code passes to each statement)
--   destinations.rate_tokens,           the bucket as last spent (null: full)
--                rate_updated_at
--   destinations.rate_next_at           when its next whole token is due, while the bucket
--                                       is empty (a worker wakes then: the partial index)
--   destinations.rate_lowered,          the rate a 429 lowered it to, and when; it doubles
--                rate_lowered_at        back toward the full rate every recovery period
ALTER TABLE destinations
    ADD COLUMN rate_per_second double precision
        CHECK (rate_per_second >= 0.001 AND rate_per_second <= 1000),
    ADD COLUMN rate_tokens double precision,
    ADD COLUMN rate_updated_at timestamptz,
    ADD COLUMN rate_next_at timestamptz,
    ADD COLUMN rate_lowered double precision CHECK (rate_lowered > 0),
    ADD COLUMN rate_lowered_at timestamptz;

CREATE INDEX destinations_rate_next_idx ON destinations (rate_next_at)
    WHERE rate_next_at IS NOT NULL;

-- A destination's full rate: its own, or its type's default from `defaults` (the code's
-- registry passes `{"type": per_second}`: the chat services' documented rates); null: none.
CREATE FUNCTION postbag_rate_of(own double precision, type text, defaults jsonb)
RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(own, (defaults ->> type)::double precision)
$$;

-- The rate a destination may send at `at`: `full_rate` (its own or its type's; null: no
-- limit), or after a 429 the rate it lowered it to, doubling every `recover` seconds since,
-- never above `full_rate`.
CREATE FUNCTION postbag_send_rate(
    full_rate double precision, lowered double precision, lowered_at timestamptz,
    at timestamptz, recover double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN full_rate IS NULL OR lowered IS NULL OR lowered_at IS NULL THEN full_rate
                ELSE least(full_rate, lowered * power(2, least(30, floor(greatest(0,
                     extract(epoch FROM at - lowered_at)) / recover)))) END
$$;

-- The tokens of a destination's bucket at `at`, sending at `rate` (null: no limit): full
-- until first spent; refilled at `rate` since `updated_at`; it holds one second's sends
-- (at least one).
CREATE FUNCTION postbag_rate_tokens(
    rate double precision, tokens double precision, updated_at timestamptz, at timestamptz
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN rate IS NULL THEN NULL
                WHEN tokens IS NULL OR updated_at IS NULL THEN greatest(rate, 1)
                ELSE least(greatest(rate, 1),
                           tokens + greatest(0, extract(epoch FROM at - updated_at)) * rate) END
$$;
