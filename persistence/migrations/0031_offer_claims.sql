-- gost schema, version 31: the claims that keep a seller's keys unique once a split has
-- spread its offers over two groups (issue 28, ADR 0023 "Splits" item 6). Before a split every
-- offer of a seller is in its home group's database (ids are drawn there), and the `offers`
-- table's unique index is the claim of each key. A split makes "strays": offers whose shard
-- went to one side of the cut and whose seller's home shard to the other. A stray's key is
-- claimed here, in the seller's home database, so that a create there, an update re-keying an
-- offer there and the lookups by key see it; `seller_spread` names the other groups holding
-- the seller's offers (for ListOffers and the feed exchange). Both are empty in an
-- installation that never split a group holding offers: no hot path reads more than an empty
-- index. Keyed by seller: a move takes the rows of its range's sellers (home shard) with it.
CREATE TABLE offer_keys (
  seller_id   text NOT NULL,
  namespace   text NOT NULL,
  external_id text NOT NULL,
  offer_id    text NOT NULL, -- the stray holding the key, in another group's database
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, namespace, external_id)
);

CREATE TABLE seller_spread (
  seller_id  text NOT NULL,
  group_id   integer NOT NULL, -- a group other than the seller's home holding its offers
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (seller_id, group_id)
);
