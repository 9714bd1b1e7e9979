-- A delivery's reason and last detail are classes Postbag names (`http_400`, `timeout`),
-- never a receiver's words: a chat service's refusal used to be kept after its status
-- (`http_400: <its error line>`), and a receiver may quote the refused message, values
-- included, where a viewer reads states. The receiver's answer stays in the attempt's
-- excerpt only. Rows written before are rewritten to their class here: the reason and
-- last detail of deliveries, the `reason` of `delivery.*` events, and the detail of the
-- alerts dead deliveries raised (`dlv_…: http_400: …`).
CREATE OR REPLACE FUNCTION pg_temp.postbag_detail_class(detail text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN detail ~ '^attempts_exhausted \(last: http_[0-9]{3}: '
            THEN substring(detail FROM '^attempts_exhausted \(last: http_[0-9]{3}') || ')'
        WHEN detail ~ '^http_[0-9]{3}: ' THEN substring(detail FROM '^http_[0-9]{3}')
        ELSE detail
    END
$$;

UPDATE deliveries
   SET reason = pg_temp.postbag_detail_class(reason),
       last_detail = pg_temp.postbag_detail_class(last_detail)
 WHERE reason ~ 'http_[0-9]{3}: ' OR last_detail ~ 'http_[0-9]{3}: ';

UPDATE events
   SET data = jsonb_set(data, '{reason}', to_jsonb(pg_temp.postbag_detail_class(data ->> 'reason')))
 WHERE starts_with(type, 'delivery.') AND jsonb_typeof(data -> 'reason') = 'string'
   AND data ->> 'reason' ~ 'http_[0-9]{3}: ';

UPDATE alerts
   SET detail = substring(detail FROM '^[a-z]+_[^:]*: ')
                || pg_temp.postbag_detail_class(regexp_replace(detail, '^[a-z]+_[^:]*: ', ''))
 WHERE kind = 'delivery.dead' AND detail ~ '^[a-z]+_[^:]*: (attempts_exhausted \(last: )?http_[0-9]{3}: ';
