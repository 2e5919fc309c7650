-- gost schema, version 22: parked outbox rows (issue 27, "outbox oversize").
--
-- A row whose event the broker refuses for good (larger than the topic's max.message.bytes,
-- an invalid record, no right to write the topic) would stall the relay for every row behind
-- it in its shard. The relay moves such a row here, with what it tried and why it failed,
-- and goes on. An operator lists them (gostctl parked), and after fixing the cause (raising
-- the broker's limit) puts one back into outbox_batches under its old id
-- (gostctl retry-parked), or drops it (gostctl drop-parked).
CREATE TABLE outbox_parked (
  id         bigint PRIMARY KEY,       -- the row's id in outbox_batches
  shard      integer NOT NULL,
  events     integer NOT NULL,
  payload    bytea NOT NULL,           -- the gost.v1.OutboxBatch, as it was
  created_at timestamptz NOT NULL,     -- when the row was committed
  topic      text NOT NULL,            -- the refused message's topic
  msg_key    text NOT NULL,            -- and key (an offer id for an after-save event)
  bytes      bigint NOT NULL,          -- and its value's size
  reason     text NOT NULL,            -- the reason class (message_too_large, ...)
  error      text NOT NULL,            -- librdkafka's text
  parked_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE outbox_parked ALTER COLUMN payload SET STORAGE EXTERNAL;
