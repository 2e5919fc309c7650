-- gost schema, version 24: moving a shard range to another group online (issue 28, ADR 0023
-- decision 5), in every group's database.
--
-- While a range is copied out of this database, triggers on the moved tables (made by the move
-- itself, `gost_move_<table>`, dropped when it ends) log the primary key of every row of the
-- range written meanwhile; the move copies those rows again (or deletes them at the target)
-- until a round is small, fences the range and copies the last ones. A key is logged, not the
-- row: a round reads the row as it is then.
CREATE TABLE move_changes (
  seq bigserial PRIMARY KEY,
  tbl text NOT NULL,  -- the table written
  key jsonb NOT NULL  -- its primary key, column by column
);

-- Arguments: the range's first and last shard, and the table's primary key columns separated
-- by commas. Rows outside the range are not logged.
CREATE FUNCTION gost_move_log() RETURNS trigger LANGUAGE plpgsql AS $$
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
  IF (r->>'shard')::int BETWEEN TG_ARGV[0]::int AND TG_ARGV[1]::int THEN
    FOREACH c IN ARRAY string_to_array(TG_ARGV[2], ',') LOOP
      k := k || jsonb_build_object(c, r->c);
    END LOOP;
    INSERT INTO move_changes (tbl, key) VALUES (TG_TABLE_NAME, k);
  END IF;
  RETURN NULL;
END
$$;
