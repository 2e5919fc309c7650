-- gost schema, version 32: `seller_spread` names the shards holding a seller's strays, not
-- their groups (issue 28, ADR 0023 "Splits" item 6). A group id goes stale when the stray's
-- shard moves again (a whole group moved to another database, or a split of the stray's
-- group); a shard does not: readers find its group in the map they already follow. Nothing
-- wrote the table of version 31 (its writer, a split's fence, comes with this version), so
-- it is replaced, not converted.
DROP TABLE seller_spread;

CREATE TABLE seller_spread (
  seller_id   text NOT NULL,
  stray_shard integer NOT NULL, -- a shard outside the seller's home group holding its offers
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, stray_shard)
);
