-- gost schema, version 33: the feeds' move fences (migrations 0027, 0030) hold the lease rows
-- they check FOR KEY SHARE instead of FOR SHARE (issue 28, ADR 0023). Only a move's fence must
-- wait for the writes in flight, and it now locks its range's rows FOR UPDATE (in shard order)
-- before it marks them `moved:`; a FOR SHARE lock made the rows' owners' heartbeats and
-- another node's takeover (no-key UPDATEs) wait for every feed write too. Nothing else
-- changes.
CREATE OR REPLACE FUNCTION gost_move_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  o text;
BEGIN
  IF current_setting('gost.moving', true) = 'on' THEN
    RETURN NULL;
  END IF;
  SELECT owner INTO o FROM shard_leases WHERE shard = TG_ARGV[0]::int FOR KEY SHARE;
  IF o LIKE 'moved:%' THEN
    RAISE EXCEPTION 'the feeds of this shard group are moving to group `%` (gostctl move-shards): retry in a moment',
      substr(o, 7) USING ERRCODE = 'GM001';
  END IF;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION gost_move_fence_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  homes integer[];
  s integer;
  o text;
BEGIN
  IF current_setting('gost.moving', true) = 'on' THEN
    RETURN NULL;
  END IF;
  IF TG_ARGV[1] = 'task_id' THEN
    SELECT array_agg(DISTINCT gost_shard_of(t.seller_id, TG_ARGV[0]::int)) INTO homes
      FROM (SELECT DISTINCT task_id FROM changed) c JOIN feed_tasks t USING (task_id);
  ELSE
    SELECT array_agg(gost_shard_of(c.seller_id, TG_ARGV[0]::int)) INTO homes
      FROM (SELECT DISTINCT seller_id FROM changed) c;
  END IF;
  FOR s, o IN
    SELECT l.shard, l.owner FROM shard_leases l WHERE l.shard = ANY(homes)
     ORDER BY l.shard FOR KEY SHARE OF l
  LOOP
    IF o LIKE 'moved:%' THEN
      RAISE EXCEPTION 'the feeds of shard % moved to group `%` (gostctl move-shards): retry in a moment',
        s, substr(o, 7) USING ERRCODE = 'GM001';
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;
