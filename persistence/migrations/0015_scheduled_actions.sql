-- gost schema, version 15: scheduled actions (seed 001, docs/scheduled-actions.md, ADR 0011).
-- The seed's shard_locks are the runtime's shard_leases (fencing by epoch); these are its other
-- three tables. The invariant: for every action exactly one row of scheduled_incoming ∪
-- scheduled_processing carries its action_id and current action_guid; rows with its id and
-- another guid are stale and dropped by the shard's worker when it sees them. The API never
-- deletes queue rows.

-- An action: Meta, Spec and Status as serialized gost.v1.ScheduledAction{Meta,Spec,Status}, and
-- the columns queries need without parsing them.
CREATE TABLE scheduled_actions (
  action_id              text PRIMARY KEY,      -- Meta.id
  action_guid            text NOT NULL,         -- Meta.guid: new at every change by the API
  meta                   bytea NOT NULL,
  spec                   bytea NOT NULL,
  status                 bytea NOT NULL,
  status_scheduled_at_ms bigint,                -- Status.scheduled_at_ms; NULL: nothing left
  failures_in_row        bigint NOT NULL DEFAULT 0  -- Status.failures_in_row (gostctl --failing)
);
CREATE INDEX scheduled_actions_due ON scheduled_actions (status_scheduled_at_ms)
  WHERE status_scheduled_at_ms IS NOT NULL;

-- Changes by the API, per shard (a random one) in arrival order. Only inserted by the API;
-- deleted by the shard's worker as it moves them (one row, one transaction).
CREATE TABLE scheduled_incoming (
  shard           integer NOT NULL,
  seq             bigserial,
  created_at      timestamptz NOT NULL DEFAULT now(),
  action_id       text NOT NULL,
  action_guid     text NOT NULL,
  scheduled_at_ms bigint,                       -- Status.scheduled_at_ms when the row was made
  PRIMARY KEY (shard, seq)
);

-- What the shard's worker fires, by due time. A row whose action has nothing left to fire is
-- parked (scheduled_at_ms NULL).
CREATE TABLE scheduled_processing (
  shard                   integer NOT NULL,
  action_id               text NOT NULL,
  action_guid             text NOT NULL,
  scheduled_at_ms         bigint,
  added_to_incoming_at    timestamptz NOT NULL,  -- created_at of the incoming row it came from
  moved_by_sync           text NOT NULL,         -- guid of the worker's sync iteration that moved it
  moved_at                timestamptz NOT NULL,
  last_reschedule_by_sync text,                  -- guid of the iteration that last set scheduled_at_ms
  last_reschedule_at      timestamptz,
  PRIMARY KEY (shard, action_id, action_guid)
);
CREATE INDEX scheduled_processing_due ON scheduled_processing (shard, scheduled_at_ms)
  WHERE scheduled_at_ms IS NOT NULL;
CREATE INDEX scheduled_processing_parked ON scheduled_processing (shard)
  WHERE scheduled_at_ms IS NULL;
CREATE INDEX scheduled_processing_by_action ON scheduled_processing (action_id);
CREATE INDEX scheduled_incoming_by_action ON scheduled_incoming (action_id);
