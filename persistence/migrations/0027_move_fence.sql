-- gost schema, version 27: a move carries the feeds of the group it moves (issue 28, ADR
-- 0023). The feeds' writers (the API, the loader and processor, the exchange, the answers'
-- reader, housekeeping) hold no lease: while a group moves, its database's feed tables carry
-- a statement trigger calling this function, which holds the lease row of the moving range's
-- first shard (its argument) FOR SHARE to the end of the writer's transaction and refuses the
-- write once that row says `moved:<target>`. So the move's fence (which updates every lease row
-- of the range) waits for the writes in flight, and none passes it: a whole group moves, so
-- every feed row of the source belongs to the range. The move's own cleanup runs with
-- `gost.moving` set. The error's SQLSTATE GM001 reads as UNAVAILABLE (retry), not as an outage.
CREATE FUNCTION gost_move_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  o text;
BEGIN
  IF current_setting('gost.moving', true) = 'on' THEN
    RETURN NULL;
  END IF;
  SELECT owner INTO o FROM shard_leases WHERE shard = TG_ARGV[0]::int FOR SHARE;
  IF o LIKE 'moved:%' THEN
    RAISE EXCEPTION 'the feeds of this shard group are moving to group `%` (gostctl move-shards): retry in a moment',
      substr(o, 7) USING ERRCODE = 'GM001';
  END IF;
  RETURN NULL;
END
$$;
