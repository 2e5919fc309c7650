-- gost schema, version 28: events an entity sends to an entity of another shard group (issue
-- 28, ADR 0023). A handler's effects commit in one transaction of the sender's database; an
-- event whose target lives in another group's database is kept here, in that transaction, and
-- the owner of the sending shard relays it through EntityService's Send path to the target's
-- owner with the row's request id (the target stores it once), then deletes the row. Nothing
-- committed is lost; a relay retried stores nothing twice. The request id is drawn once, at
-- the insert, and copied with the row when its group moves to another database (`id` is this
-- database's order of relay only).
CREATE TABLE entity_forwards (
  request_id  text PRIMARY KEY DEFAULT 'gost.forward/' || gen_random_uuid(),
  id          bigserial NOT NULL,        -- relayed in this order
  shard       integer NOT NULL,          -- the sending entity's shard: its owner relays the row
  kind        text NOT NULL,             -- the target
  entity_id   text NOT NULL,
  due_at_us   bigint NOT NULL,           -- when the target handles it (the sender's clock)
  payload     bytea NOT NULL,            -- a serialized google.protobuf.Any
  attempts    integer NOT NULL DEFAULT 0,
  last_error  text,                      -- the last relay's failure, for an operator
  retry_at    timestamptz NOT NULL DEFAULT now(), -- a failed relay waits (doubling, at most 5 min)
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entity_forwards_by_shard ON entity_forwards (shard, retry_at);
