-- gost schema, version 29: ListTasks merges the pages of every shard group's database by id
-- (issue 28, ADR 0023), so each group's page is in byte order (`COLLATE "C"`), whatever the
-- database's collation, with an index that serves it (as 0025 for scheduled actions).
DROP INDEX entities_by_tag;
CREATE INDEX entities_by_tag ON entities (kind, lane, tag, entity_id COLLATE "C")
  WHERE tag IS NOT NULL;
CREATE INDEX entities_by_lane_tagged ON entities (kind, lane, entity_id COLLATE "C")
  WHERE tag IS NOT NULL;
