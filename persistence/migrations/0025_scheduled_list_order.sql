-- gost schema, version 25: scheduled actions listed across shard groups (issue 28, ADR 0023
-- step 3). An action lives in the database of its id's home shard; ListScheduledActions reads
-- a page in every group's database and merges them by id. The merge needs one order in every
-- database whatever its collation: byte order ("C"), which this index serves page by page.
CREATE INDEX scheduled_actions_id_bytes ON scheduled_actions (action_id COLLATE "C");
