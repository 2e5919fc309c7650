-- gost schema, version 12: tasks (seed 002, docs/tasks.md) on the kit's durable entities.
-- A task is an entity of kind `task.<type>` whose lane is its group: its state (input, state
-- enum and data) is `entities.state`, its events `entity_events` (pending, due time,
-- attempts), its results `entity_outputs` (append-only, pulled by the group's consumer with the
-- seq as cursor). What tasks add: the groups, and a tag on entities to list them by state.

-- A group: one task type fed by one source system, with its own settings. Each group is its
-- own lane of the kit (its own queue and parallelism), so one group's backlog never delays
-- another's.
CREATE TABLE task_groups (
  group_id        text PRIMARY KEY,
  task_type       text NOT NULL,
  source          text NOT NULL,
  retry_delay_ms  bigint NOT NULL,   -- a failed event is rescheduled this much later (× attempts)
  max_attempts    integer NOT NULL,  -- then it is dead-lettered
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- An entity's label chosen by its type (a task's state name), to list entities by it.
ALTER TABLE entities ADD COLUMN tag text;
CREATE INDEX entities_by_tag ON entities (kind, lane, tag, entity_id) WHERE tag IS NOT NULL;
