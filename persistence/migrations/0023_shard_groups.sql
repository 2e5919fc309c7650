-- gost schema, version 23: the shard group map (issue 28, ADR 0023), in the catalog database.
--
-- A group is a database holding ranges of shards. Group 0 is this database itself (its dsn
-- stays empty: the nodes' pg.dsn); the others name their own. With no range declared, group 0
-- holds every shard: an installation of one database, as before groups. shard_map's version
-- grows with every change of either table, and a change is notified on gost_groups.
CREATE TABLE shard_groups (
  id   integer PRIMARY KEY CHECK (id >= 0),
  name text NOT NULL UNIQUE CHECK (name <> ''),
  dsn  text NOT NULL DEFAULT '',
  CHECK ((id = 0) = (dsn = ''))
);
CREATE UNIQUE INDEX shard_groups_dsn ON shard_groups (dsn) WHERE dsn <> '';
INSERT INTO shard_groups (id, name) VALUES (0, 'main');

CREATE TABLE shard_ranges (
  first_shard integer PRIMARY KEY CHECK (first_shard >= 0),
  last_shard  integer NOT NULL CHECK (last_shard >= first_shard),
  group_id    integer NOT NULL REFERENCES shard_groups (id),
  moving_to   integer REFERENCES shard_groups (id) CHECK (moving_to IS DISTINCT FROM group_id)
);

CREATE TABLE shard_map (
  one     boolean PRIMARY KEY DEFAULT true CHECK (one),
  version bigint NOT NULL
);
INSERT INTO shard_map (version) VALUES (1);
