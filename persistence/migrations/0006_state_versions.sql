-- gost schema, version 6: a version per stage state, for StateService's compare-and-set
-- (seed 000 "GRPC-api": read -> (state, version), update(state, version) -> bool).
-- 0: the stage never stored a state; every write of the state adds one.
ALTER TABLE stage_states ADD COLUMN state_version bigint NOT NULL DEFAULT 0;
UPDATE stage_states SET state_version = 1 WHERE state IS NOT NULL;
