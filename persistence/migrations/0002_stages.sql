-- gost schema, version 2: shard leases (fencing), stage states, stage queues and timers,
-- the outbox and dead letters.

-- One row per shard. `epoch` grows by one with every acquisition; every write-behind commit
-- checks it (FOR SHARE) in its own transaction, so a node that lost a lease cannot write.
CREATE TABLE shard_leases (
  shard                 integer PRIMARY KEY,
  owner                 text,
  epoch                 bigint NOT NULL DEFAULT 0,
  acquired_at           timestamptz,
  heartbeat_at          timestamptz,
  last_processing_start timestamptz
);

-- A stage's private state for an offer: a serialized google.protobuf.Any.
CREATE TABLE stage_states (
  offer_id   text NOT NULL,
  stage_id   text NOT NULL,
  state      bytea NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (offer_id, stage_id)
);

-- Stage queues and timers in one table (seed 000 "Очередь"). The primary key keeps an offer at
-- most once in a stage's queue, and the stage_queue_by_offer index replaces the seed's
-- queue_inverted table ("which queues is this offer in"). A timer is an entry whose due time is
-- in the future. priority: 0 normal, 1 background.
-- Debugging: SELECT to_timestamp(due_at_us / 1e6), * FROM stage_queue;
CREATE TABLE stage_queue (
  shard       integer NOT NULL,
  stage_id    text NOT NULL,
  offer_id    text NOT NULL,
  due_at_us   bigint NOT NULL,     -- microseconds since the Unix epoch (exact, cheap to compare)
  priority    smallint NOT NULL DEFAULT 0,
  enqueued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (shard, stage_id, offer_id)
);
CREATE INDEX stage_queue_due ON stage_queue (shard, due_at_us, stage_id, offer_id);
CREATE INDEX stage_queue_by_offer ON stage_queue (offer_id);

-- Saved offers and states, written in the same transaction as the change (transactional
-- outbox); a relay publishes them to Kafka in id order per shard.
CREATE TABLE outbox (
  id         bigserial PRIMARY KEY,
  shard      integer NOT NULL,
  offer_id   text NOT NULL,
  version    bigint NOT NULL,
  payload    bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_by_shard ON outbox (shard, id);

-- Events that crashed an offer actor too often, or change storms cut short. Not retried
-- until released_at is set.
CREATE TABLE dead_letters (
  id          bigserial PRIMARY KEY,
  shard       integer NOT NULL,
  offer_id    text NOT NULL,
  stage_id    text NOT NULL,
  reason      text NOT NULL,
  attempts    integer NOT NULL DEFAULT 1,
  created_at  timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz
);
CREATE INDEX dead_letters_open ON dead_letters (shard, offer_id) WHERE released_at IS NULL;
