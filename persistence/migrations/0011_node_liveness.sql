-- Connection-bound liveness (issue 12 items 3 and 4). Each node incarnation holds a
-- session-level advisory lock (classid 1735357300, 'gost'; objid = nodes.lock_key) on a
-- connection of its own for as long as it lives. A process that dies closes its connections
-- and the lock goes with them at once: the others notice within a poll (~200 ms) and take its
-- leases without waiting for the lease timeout. A node that is paused or cut off from the
-- database keeps its connection open and is noticed by the lease timeout, as before.

CREATE SEQUENCE node_lock_keys AS integer;

ALTER TABLE nodes
  -- Stable per node id: a restarted node tries the same lock, and getting it proves that its
  -- previous incarnation is gone.
  ADD COLUMN lock_key integer NOT NULL DEFAULT nextval('node_lock_keys'),
  -- When the current holder took the lock. A lock taken before the server last started was
  -- lost with that restart, not with the node: such a node is judged by its heartbeat.
  ADD COLUMN locked_since timestamptz;

CREATE UNIQUE INDEX nodes_lock_key ON nodes (lock_key);

-- Nodes whose process is gone: they held their liveness lock since the server started, and
-- nobody holds it now. Their leases are free at once (shard_leases.owner IN gone_nodes).
CREATE VIEW gone_nodes AS
SELECT n.node_id
FROM nodes n
WHERE n.locked_since IS NOT NULL
  AND n.locked_since > pg_postmaster_start_time()
  AND NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = 1735357300::oid
      AND l.objid::bigint = n.lock_key
      AND l.objsubid = 2
      AND l.granted);
