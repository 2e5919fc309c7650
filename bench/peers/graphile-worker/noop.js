#!/usr/bin/env node
// Peer benchmark: graphile-worker no-op jobs doing the same write as a gost no-op stage.
//
//   node noop.js --dsn "host=127.0.0.1 port=54349 user=gost dbname=X" --jobs N
//
// Starts from a clean slate (drops and recreates the graphile_worker schema and the peer_states
// table), bulk-enqueues N jobs of task `noop_state`, ANALYZEs, then times a runner with
// graphile-worker's documented fastest settings from its start until the last job is completed
// and removed from the jobs table (harness.js). Each job upserts its offer's state row through
// the worker's pool. Progress goes to stderr; stdout gets exactly one JSON line:
//   {"peer": "graphile-worker 0.17.3", "value": <jobs/s>, "unit": "jobs/s"}
"use strict";

const { fail, parseArgs, connect, reset, enqueue, timedRun, report } = require("./harness");

const TASK = "noop_state";

// The same write a gost no-op stage does: upsert the offer's state row.
const UPSERT_STATE = `INSERT INTO peer_states (offer_id, state) VALUES ($1, $2)
  ON CONFLICT (offer_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()`;

async function main() {
  const { dsn, jobs } = parseArgs(process.argv.slice(2), "node noop.js --dsn DSN --jobs N");
  const worker = connect(dsn);
  await reset(worker, `DROP TABLE IF EXISTS peer_states;
    CREATE TABLE peer_states (
      offer_id text PRIMARY KEY,
      state bytea NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now())`);
  await enqueue(worker, TASK, jobs, (i) => ({ offer_id: `bench-${i}` }));

  // The task: upsert the offer's state row with an 8-byte counter through the worker's pool.
  let counter = 0n;
  const taskList = {
    [TASK]: async (payload, helpers) => {
      const state = Buffer.alloc(8);
      state.writeBigUInt64BE(++counter);
      await helpers.query(UPSERT_STATE, [payload.offer_id, state]);
    },
  };
  const timed = await timedRun(worker, taskList, jobs);

  // Every offer has its state row (timedRun checked that no job is left).
  const states = (await worker.pgPool.query("SELECT count(*)::int AS n FROM peer_states")).rows[0].n;
  await worker.pgPool.end();
  if (states !== jobs) fail(`peer_states has ${states} rows, expected ${jobs}`);
  report(jobs, timed);
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
