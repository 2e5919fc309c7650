-- gost schema, version 3: a stage's queue entry lives in the row of its state, and the outbox
-- holds one row per committed batch.
--
-- Why (docs/performance.md, "Row layout"): a stage run used to write three rows (state upsert,
-- queue delete, outbox insert) and lock a fourth (the offer). With the entry in the state row,
-- a run writes one row: its new state and "no longer queued" (or its next timer) in a single
-- upsert. The seed's semantics hold: (offer, stage) is the primary key, so an offer is in a
-- stage's queue at most once; the partial index stage_states_due is the time-ordered queue and
-- the primary key answers "which queues is this offer in" (the seed's queue_inverted).

ALTER TABLE stage_states ALTER COLUMN state DROP NOT NULL;  -- NULL: queued, no state yet
ALTER TABLE stage_states
  ADD COLUMN shard     integer,
  ADD COLUMN due_at_us bigint,                          -- NULL: not queued
  ADD COLUMN priority  smallint NOT NULL DEFAULT 0;     -- 0 normal, 1 background

UPDATE stage_states s SET shard = o.shard FROM offers o WHERE o.offer_id = s.offer_id;
DELETE FROM stage_states WHERE shard IS NULL;           -- states of offers already deleted

INSERT INTO stage_states (offer_id, stage_id, shard, state, due_at_us, priority)
SELECT offer_id, stage_id, shard, NULL, due_at_us, priority FROM stage_queue
ON CONFLICT (offer_id, stage_id) DO UPDATE
  SET due_at_us = EXCLUDED.due_at_us, priority = EXCLUDED.priority;
ALTER TABLE stage_states ALTER COLUMN shard SET NOT NULL;
DROP TABLE stage_queue;

-- The queue of a shard in due order. Debugging:
--   SELECT to_timestamp(due_at_us / 1e6), * FROM stage_states WHERE due_at_us IS NOT NULL;
CREATE INDEX stage_states_due ON stage_states (shard, due_at_us, stage_id, offer_id)
  WHERE due_at_us IS NOT NULL;

-- The outbox: one row per committed write-behind batch. `payload` is a serialized
-- gost.v1.OutboxBatch (its events in commit order); the relay publishes them in id order.
CREATE TABLE outbox_batches (
  id         bigserial PRIMARY KEY,
  shard      integer NOT NULL,
  events     integer NOT NULL,
  payload    bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE outbox_batches ALTER COLUMN payload SET STORAGE EXTERNAL; -- no compression pass
CREATE INDEX outbox_batches_by_shard ON outbox_batches (shard, id);

-- Rows of the old per-event outbox become one-event batches: an OutboxBatch with a single
-- `events` (field 1, length-delimited) is the bytes 0x0a, varint(length), payload.
CREATE FUNCTION pg_temp.gost_varint(n bigint) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  out bytea := '\x'::bytea;
BEGIN
  LOOP
    IF n < 128 THEN
      RETURN out || set_byte('\x00'::bytea, 0, n::int);
    END IF;
    out := out || set_byte('\x00'::bytea, 0, (n % 128 + 128)::int);
    n := n / 128;
  END LOOP;
END $$;
INSERT INTO outbox_batches (shard, events, payload, created_at)
SELECT shard, 1, '\x0a'::bytea || pg_temp.gost_varint(length(payload)) || payload, created_at
FROM outbox ORDER BY id;
DROP TABLE outbox;
