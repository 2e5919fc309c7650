-- gost schema, version 9: durable entities of the runtime kit (docs/adding-an-actor-type.md).
-- Application-defined actor types keep their state, their pending events, their outputs and
-- their dead letters here; the kit's writer commits all of an event's effects in one
-- transaction, fenced by the shard lease like offers.

-- One row per entity of a kind. `version` grows by one with every handled event. `due_at_us`
-- is the earliest pending event (the kit's queue entry, in lane `lane`); NULL: none pending.
CREATE TABLE entities (
  kind        text NOT NULL,
  entity_id   text NOT NULL,
  shard       integer NOT NULL,
  version     bigint NOT NULL DEFAULT 0,
  state       bytea,
  lane        text NOT NULL DEFAULT '',
  due_at_us   bigint,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, entity_id)
);
CREATE INDEX entities_due ON entities (shard, due_at_us, kind, entity_id) WHERE due_at_us IS NOT NULL;

-- Pending events: sent by clients (EntityService.Send), by entities to themselves or to each
-- other, or set as timers (a future due time). Handled one at a time per entity, by due time
-- then by seq; deleted when handled; a failed one is rescheduled (attempts + 1).
CREATE TABLE entity_events (
  kind        text NOT NULL,
  entity_id   text NOT NULL,
  seq         bigserial,
  due_at_us   bigint NOT NULL,
  attempts    integer NOT NULL DEFAULT 0,
  payload     bytea NOT NULL,            -- a serialized google.protobuf.Any
  PRIMARY KEY (kind, entity_id, seq)
);

-- Requests already accepted, by the client's request id: a retried Send is answered with the
-- first answer and stores nothing twice. Kept for `entity.request_ttl`.
CREATE TABLE entity_requests (
  kind        text NOT NULL,
  entity_id   text NOT NULL,
  request_id  text NOT NULL,
  seq         bigint NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, entity_id, request_id)
);

-- What entities emit for others to pull with a cursor (seq), per kind and lane.
CREATE TABLE entity_outputs (
  seq         bigserial PRIMARY KEY,
  kind        text NOT NULL,
  lane        text NOT NULL,
  entity_id   text NOT NULL,
  payload     bytea NOT NULL,            -- a serialized google.protobuf.Any
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entity_outputs_by_lane ON entity_outputs (kind, lane, seq);

-- Events given up after their attempts, kept for an operator.
CREATE TABLE entity_dead_letters (
  id          bigserial PRIMARY KEY,
  kind        text NOT NULL,
  entity_id   text NOT NULL,
  shard       integer NOT NULL,
  payload     bytea NOT NULL,
  reason      text NOT NULL,
  attempts    integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz
);
