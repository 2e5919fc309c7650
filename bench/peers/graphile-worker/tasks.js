#!/usr/bin/env node
// Peer benchmark: graphile-worker doing the work of gost's `tasks` benchmark — one job per task
// event among many created tasks, whose handler writes the task's row and one result row.
//
//   node tasks.js --dsn "host=127.0.0.1 port=54349 user=gost dbname=X" --jobs E --tasks N --groups G
//
// Starts from a clean slate (drops and recreates the graphile_worker schema and the tables
// peer_tasks and peer_results), creates N task rows in G groups (the tasks gost's benchmark
// creates, waiting for a verdict), bulk-enqueues E jobs of task `task_event` for tasks spread
// evenly over the N (as gost's events are), ANALYZEs, then times a runner with
// graphile-worker's documented fastest settings from its start until the last job is completed
// and removed (harness.js). Each job, in one statement (one transaction), writes its task's new
// state and version and appends one result row. Progress goes to stderr; stdout gets exactly
// one JSON line: {"peer": "graphile-worker 0.17.3", "value": <jobs/s>, "unit": "jobs/s"}
"use strict";

const { fail, log, parseArgs, connect, reset, enqueue, timedRun, report } = require("./harness");

const TASK = "task_event";

// The task's row and one result, both or neither.
const WRITE_TASK_AND_RESULT = `WITH t AS (
    UPDATE peer_tasks SET state = $2, version = version + 1, updated_at = now()
    WHERE task_id = $1 RETURNING task_id, group_id)
  INSERT INTO peer_results (group_id, task_id, payload) SELECT group_id, task_id, $3 FROM t`;

async function main() {
  const usage = "node tasks.js --dsn DSN --jobs E --tasks N --groups G";
  const { dsn, jobs, tasks, groups } = parseArgs(process.argv.slice(2), usage, ["tasks", "groups"]);
  if (jobs > tasks) fail(`--jobs (${jobs}) must not exceed --tasks (${tasks})`);
  const worker = connect(dsn);
  // Results are pulled by group after a cursor, as gost's entity_outputs are.
  await reset(worker, `DROP TABLE IF EXISTS peer_tasks, peer_results;
    CREATE TABLE peer_tasks (
      task_id text PRIMARY KEY,
      group_id text NOT NULL,
      version bigint NOT NULL,
      state bytea NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE peer_results (
      seq bigserial PRIMARY KEY,
      group_id text NOT NULL,
      task_id text NOT NULL,
      payload bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX peer_results_by_group ON peer_results (group_id, seq)`);
  log(`creating ${tasks} tasks in ${groups} groups`);
  await worker.pgPool.query(`INSERT INTO peer_tasks (task_id, group_id, version, state)
    SELECT 'bench-' || (i % $2) || ':t-' || i, 'bench-' || (i % $2), 1,
           convert_to('{"state":"waiting","issue":1,"item_id":"item-' || i || '","results":1}', 'UTF8')
    FROM generate_series(0, $1 - 1) AS i`, [tasks, groups]);

  const stride = Math.max(1, Math.floor(tasks / jobs));
  await enqueue(worker, TASK, jobs, (j) => {
    const i = j * stride;
    return { task_id: `bench-${i % groups}:t-${i}`, item_id: `item-${i}` };
  });

  // The task: the verdict closes the task (its new state) and is its result.
  const taskList = {
    [TASK]: async (payload, helpers) => {
      const state = Buffer.from(JSON.stringify({ state: "approved", issue: 1, item_id: payload.item_id, results: 2 }));
      const result = Buffer.from(JSON.stringify({ name: "verdict", approved: true, moderator: "bench", item_id: payload.item_id }));
      await helpers.query(WRITE_TASK_AND_RESULT, [payload.task_id, state, result]);
    },
  };
  const timed = await timedRun(worker, taskList, jobs);

  // Every job wrote its task once and one result.
  const q = async (sql) => (await worker.pgPool.query(sql)).rows[0].n;
  const results = await q("SELECT count(*)::int AS n FROM peer_results");
  const written = await q("SELECT count(*)::int AS n FROM peer_tasks WHERE version = 2");
  await worker.pgPool.end();
  if (results !== jobs || written !== jobs) fail(`${results} results and ${written} tasks written, expected ${jobs}`);
  report(jobs, timed);
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
