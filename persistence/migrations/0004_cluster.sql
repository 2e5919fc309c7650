-- gost schema, version 4: cluster membership, and lease hand-offs.

-- One row per node that ever ran. A node is alive while its heartbeat is fresher than the
-- cluster's timeout (cluster.node_timeout); `leaving` is set when it stops on purpose.
CREATE TABLE nodes (
  node_id      text PRIMARY KEY,
  caf_host     text NOT NULL,     -- middleman address other nodes forward requests to
  caf_port     integer NOT NULL,
  grpc_addr    text NOT NULL,
  http_addr    text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  leaving      boolean NOT NULL DEFAULT false
);

-- Seed 001 (shard_locks): a lease is free when it has no owner or its heartbeat is older than
-- the lease timeout; among free leases a node takes the one processed longest ago
-- (last_processing_start). `handoff_to` names the node an owner is handing the shard to
-- while it drains it (a move in progress).
ALTER TABLE shard_leases ADD COLUMN handoff_to text;
UPDATE shard_leases SET last_processing_start = acquired_at WHERE last_processing_start IS NULL;
