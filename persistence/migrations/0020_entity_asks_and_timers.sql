-- gost schema, version 20: request/reply and named timers for durable entities
-- (docs/adding-an-actor-type.md, "Asks" and "Named timers").
--
-- A named timer is a pending event with a name: at most one per entity and name, so setting it
-- again replaces it (due time and event) and cancelling it deletes it. Unnamed events are as
-- before.
ALTER TABLE entity_events ADD COLUMN timer text;
CREATE UNIQUE INDEX entity_events_timer ON entity_events (kind, entity_id, timer)
  WHERE timer IS NOT NULL;

-- An ask's answer, kept with its request id (EntityService.Ask): a retry of the same ask gets
-- the same answer and changes nothing twice. `seq` is 0 for asks (they are handled at once,
-- never queued). `refusal_code` (a gost::errc) and `refusal` are set for a refusal, `reply`
-- (a serialized google.protobuf.Any) for a reply; `version` is the entity's version after it.
ALTER TABLE entity_requests
  ADD COLUMN is_ask boolean NOT NULL DEFAULT false,
  ADD COLUMN reply bytea,
  ADD COLUMN refusal_code integer,
  ADD COLUMN refusal text,
  ADD COLUMN version bigint;
