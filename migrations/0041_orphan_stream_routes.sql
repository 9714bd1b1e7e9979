-- Before this release, deleting a destination left its stream routes live (`enabled`,
-- listed, planning nothing). They go now, as the destination's delete does since.
UPDATE stream_routes r
   SET deleted_at = d.deleted_at
  FROM destinations d
 WHERE d.id = r.destination_id AND d.organization_id = r.organization_id
   AND d.deleted_at IS NOT NULL AND r.deleted_at IS NULL;
