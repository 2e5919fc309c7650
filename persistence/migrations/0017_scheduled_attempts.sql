-- gost schema, version 17: operating scheduled actions (issue 15 item 5, docs/scheduled-actions.md).
-- The pause verb's column for queries (gostctl actions --paused), and the attempt log: the last
-- attempts of every action (when, which occurrence, which attempt, outcome, error, duration,
-- node, shard and lease epoch), written by the worker in the transaction that records the outcome, trimmed to the last
-- 20 per action there, and deleted with the action (ON DELETE CASCADE).
ALTER TABLE scheduled_actions ADD COLUMN paused boolean NOT NULL DEFAULT false;

CREATE TABLE scheduled_attempts (
  action_id     text NOT NULL REFERENCES scheduled_actions (action_id) ON DELETE CASCADE,
  seq           bigserial,
  at_ms         bigint NOT NULL,   -- when the outcome was recorded
  occurrence_ms bigint NOT NULL,   -- the occurrence fired (the idempotency key's time)
  attempt       integer NOT NULL,  -- 1-based within the occurrence
  outcome       text NOT NULL,     -- ok, failed, gave_up, interrupted
  error         text NOT NULL DEFAULT '',
  duration_ms   bigint,            -- NULL: unknown (an interrupted attempt)
  node          text NOT NULL,     -- the node that recorded it
  shard         integer,           -- the worker's shard and lease epoch (NULL: recorded by a verb)
  epoch         bigint,
  run_now       boolean NOT NULL DEFAULT false,
  PRIMARY KEY (action_id, seq)
);
