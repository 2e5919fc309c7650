-- Stages paused by an operator (gostctl pause STAGE; issue 13 item 4). Cluster-wide: every
-- node reads this table at each heartbeat and on the cluster notification a pause or a resume
-- sends, and its shards start no run of a paused stage. The stage's queue entries stay where
-- they are and run once it is resumed (the row deleted).
CREATE TABLE stage_pauses (
  stage_id  text PRIMARY KEY,
  paused_by text NOT NULL,          -- who asked (gostctl --who, or the caller's address)
  paused_at timestamptz NOT NULL DEFAULT now()
);
