-- gost schema, version 26: a move carries the scheduled actions of the group it moves (issue
-- 28, ADR 0023). `scheduled_actions` has no shard column (an action's home shard is its id's
-- hash, computed by the nodes) and `scheduled_attempts` has rows without one (written by an
-- operator's verb): with a whole group moving, every row of theirs at the source moves, so
-- their triggers log every write. The first argument `*` says so; otherwise as before (the
-- range's first and last shard, then the primary key's columns).
CREATE OR REPLACE FUNCTION gost_move_log() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r jsonb;
  k jsonb := '{}';
  c text;
BEGIN
  IF TG_OP = 'DELETE' THEN
    r := to_jsonb(OLD);
  ELSE
    r := to_jsonb(NEW);
  END IF;
  IF TG_ARGV[0] = '*' OR (r->>'shard')::int BETWEEN TG_ARGV[0]::int AND TG_ARGV[1]::int THEN
    FOREACH c IN ARRAY string_to_array(TG_ARGV[2], ',') LOOP
      k := k || jsonb_build_object(c, r->c);
    END LOOP;
    INSERT INTO move_changes (tbl, key) VALUES (TG_TABLE_NAME, k);
  END IF;
  RETURN NULL;
END
$$;
