-- gost schema, version 14: the offers' history (issue 13 item 3; docs/adr/0010-offer-history.md).
-- One row per committed change of an offer: the change's outbox event (a serialized
-- gost.v1.OfferSaved: the offer as saved, all its stage states, what made the change and who),
-- written by the write-behind commit in the same transaction and the same statement as the
-- outbox row, so nothing acknowledged is missing from it. Kept for `history.retention` (0: not
-- written), reaped by the nodes' housekeeping, each for the shards it owns.
CREATE TABLE offer_history (
  id        bigserial,
  offer_id  text NOT NULL,
  shard     integer NOT NULL,
  version   bigint NOT NULL,              -- the offer's version after the change
  at        timestamptz NOT NULL DEFAULT now(),
  event     bytea NOT NULL,
  PRIMARY KEY (offer_id, id)
);
ALTER TABLE offer_history ALTER COLUMN event SET STORAGE EXTERNAL; -- no compression pass
-- Rows arrive in time order: a BRIN index finds the old ones for the reaper at almost no cost
-- on the write path.
CREATE INDEX offer_history_age ON offer_history USING brin (at);
