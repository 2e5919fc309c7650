-- gost schema, version 1: the installation, offers.
-- Offers keep their protobuf body (gost.v1.Offer) plus the columns needed to route and find
-- them. `shard` is stored so that a shard's offers can be walked without rehashing.

CREATE TABLE installation (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  shard_count integer NOT NULL CHECK (shard_count > 0),
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE offers (
  offer_id    text PRIMARY KEY,
  shard       integer NOT NULL,
  seller_id   text NOT NULL,
  namespace   text NOT NULL,
  external_id text,            -- NULL when the seller gave none
  version     bigint NOT NULL CHECK (version > 0),
  body        bytea NOT NULL,  -- serialized gost.v1.Offer
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX offers_seller_key ON offers (seller_id, namespace, external_id)
  WHERE external_id IS NOT NULL;
CREATE INDEX offers_by_shard ON offers (shard, offer_id);
