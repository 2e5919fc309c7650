#!/usr/bin/env node
// Peer benchmark: graphile-worker no-op jobs doing the same write as a gost no-op stage.
//
//   node noop.js --dsn "host=127.0.0.1 port=54349 user=gost dbname=X" --jobs N
//
// Starts from a clean slate (drops and recreates the graphile_worker schema and the peer_states
// table), bulk-enqueues N jobs of task `noop_state`, ANALYZEs, then times a runner with
// graphile-worker's documented fastest settings from its start until the last job is completed
// and removed from the jobs table. Each job upserts its offer's state row through the worker's
// pool. Progress goes to stderr; stdout gets exactly one JSON line:
//   {"peer": "graphile-worker 0.17.3", "value": <jobs/s>, "unit": "jobs/s"}
"use strict";

const { EventEmitter } = require("node:events");
const { performance } = require("node:perf_hooks");
const { Pool } = require("pg");
const { run, runMigrations, makeWorkerUtils, Logger } = require("graphile-worker");
const { version } = require("graphile-worker/package.json");

const PEER = `graphile-worker ${version}`;
const TASK = "noop_state";
const ENQUEUE_CHUNK = 1000; // addJobs per call, as documented for bulk enqueue

// graphile-worker's documented fastest settings (see README.md).
const CONCURRENCY = 24;
const MAX_POOL_SIZE = 25;
const WORKER_PRESET = {
  worker: {
    maxPoolSize: MAX_POOL_SIZE,
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

// The same write a gost no-op stage does: upsert the offer's state row.
const UPSERT_STATE = `INSERT INTO peer_states (offer_id, state) VALUES ($1, $2)
  ON CONFLICT (offer_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()`;

const log = (msg) => process.stderr.write(`graphile-worker peer: ${msg}\n`);

function fail(msg) {
  log(`FAILED: ${msg}`);
  process.exit(1);
}

// --dsn X --jobs N (also --dsn=X --jobs=N).
function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(dsn|jobs)(?:=(.*))?$/.exec(argv[i]);
    if (!m) fail(`unknown argument ${JSON.stringify(argv[i])}; usage: node noop.js --dsn DSN --jobs N`);
    args[m[1]] = m[2] !== undefined ? m[2] : argv[++i];
  }
  const jobs = Number(args.jobs);
  if (!args.dsn || !Number.isSafeInteger(jobs) || jobs < 1) {
    fail("usage: node noop.js --dsn DSN --jobs N   (N a positive integer)");
  }
  return { dsn: args.dsn, jobs };
}

// Turns a libpq DSN into a node-postgres config object. URLs (postgres://, postgresql://) are
// passed through as a connectionString. Keyword DSNs ("host=... port=... dbname='my db'") are
// parsed with libpq's rules (values may be single-quoted; backslash escapes ' and \) and mapped
// onto pg's own fields, which avoids the URL-encoding pitfalls of socket paths, spaces and
// special characters. Unknown keywords are an error rather than silently ignored.
function pgConfigFromDsn(dsn) {
  if (/^postgres(ql)?:\/\//.test(dsn)) return { connectionString: dsn };
  const kv = {};
  const re = /\s*([A-Za-z_]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|((?:[^\s'\\]|\\.)+))/y;
  let pos = 0;
  while (dsn.slice(pos).trim() !== "") {
    re.lastIndex = pos;
    const m = re.exec(dsn);
    if (!m) fail(`cannot parse DSN near ${JSON.stringify(dsn.slice(pos))}`);
    kv[m[1]] = (m[2] !== undefined ? m[2] : m[3]).replace(/\\(.)/g, "$1");
    pos = re.lastIndex;
  }
  const config = {};
  for (const [key, value] of Object.entries(kv)) {
    switch (key) {
      case "host":
      case "hostaddr": config.host = value; break;
      case "port": config.port = Number(value); break;
      case "user": config.user = value; break;
      case "password": config.password = value; break;
      case "dbname": config.database = value; break;
      case "application_name": config.application_name = value; break;
      case "options": config.options = value; break;
      case "connect_timeout": config.connectionTimeoutMillis = Number(value) * 1000; break;
      case "sslmode":
        // pg cannot fall back between plain and TLS; "disable/allow/prefer" mean plain here.
        config.ssl = ["disable", "allow", "prefer"].includes(value) ? false
          : value === "require" ? { rejectUnauthorized: false } : true;
        break;
      default: fail(`DSN keyword ${JSON.stringify(key)} is not supported by this benchmark`);
    }
  }
  return config;
}

// Quiet logger: the default prints a line per job, which would dominate the CPU. Keep errors
// and warnings on stderr.
const quietLogger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") log(`[${level}] ${message}`);
});

async function main() {
  const { dsn, jobs } = parseArgs(process.argv.slice(2));

  // One pool sized like graphile-worker's own (maxPoolSize), shared by setup, enqueue, the
  // runner (so task handlers write through the worker's pool) and the final checks.
  const pgPool = new Pool({ ...pgConfigFromDsn(dsn), max: MAX_POOL_SIZE });
  pgPool.on("error", (err) => log(`idle pool client error: ${err.message}`));
  pgPool.on("connect", (client) => client.on("error", (err) => log(`pool client error: ${err.message}`)));
  const options = { pgPool, logger: quietLogger, preset: WORKER_PRESET };

  // (b) Clean slate, (c) graphile-worker's migrations.
  log("resetting graphile_worker schema and peer_states");
  await pgPool.query(`DROP SCHEMA IF EXISTS graphile_worker CASCADE;
    DROP TABLE IF EXISTS peer_states;
    CREATE TABLE peer_states (
      offer_id text PRIMARY KEY,
      state bytea NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now())`);
  await runMigrations(options);

  // (d) Bulk enqueue in chunks of 1,000, then ANALYZE (fresh un-analyzed tables are slower).
  log(`enqueueing ${jobs} jobs`);
  const utils = await makeWorkerUtils(options);
  const enqueueStart = performance.now();
  for (let first = 0; first < jobs; first += ENQUEUE_CHUNK) {
    const specs = [];
    for (let i = first; i < Math.min(first + ENQUEUE_CHUNK, jobs); i++) {
      specs.push({ identifier: TASK, payload: { offer_id: `bench-${i}` } });
    }
    await utils.addJobs(specs);
  }
  const enqueueSecs = (performance.now() - enqueueStart) / 1000;
  await utils.release();
  log(`enqueued in ${enqueueSecs.toFixed(2)} s (${Math.round(jobs / enqueueSecs)} jobs/s); analyzing`);
  await pgPool.query("ANALYZE"); // the whole (benchmark-only) database: jobs, tasks, peer_states

  // (f) The task: upsert the offer's state row with an 8-byte counter through the worker's pool.
  let counter = 0n;
  const taskList = {
    [TASK]: async (payload, helpers) => {
      const state = Buffer.alloc(8);
      state.writeBigUInt64BE(++counter);
      await helpers.query(UPSERT_STATE, [payload.offer_id, state]);
    },
  };

  // Events come from our own emitter so none is missed before run() resolves.
  let succeeded = 0;
  let jobError = null;
  const events = new EventEmitter();
  events.on("job:success", () => { succeeded++; });
  events.on("job:error", ({ error }) => { jobError = jobError || error; });

  // (e) Time from runner start until every job is completed and removed.
  log(`running with concurrency ${CONCURRENCY}, maxPoolSize ${MAX_POOL_SIZE}, localQueue.size 500`);
  const start = performance.now();
  const runner = await run({ ...options, concurrency: CONCURRENCY, taskList, events, noHandleSignals: true });
  runner.promise.catch((err) => { jobError = jobError || err; }); // the runner died: stop waiting
  const progress = setInterval(() => {
    const secs = (performance.now() - start) / 1000;
    log(`${succeeded}/${jobs} jobs done after ${secs.toFixed(1)} s`);
  }, 1000);

  // Handler successes are counted from events (cheap); completions are batched, so once all
  // handlers succeeded, poll the jobs table until the last completion has deleted its row.
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  while (succeeded < jobs && !jobError) await sleep(5);
  while (!jobError) {
    const { rows } = await pgPool.query("SELECT count(*)::int AS n FROM graphile_worker.jobs");
    if (rows[0].n === 0) break;
    await sleep(2);
  }
  const secs = (performance.now() - start) / 1000;
  clearInterval(progress);
  await runner.stop();
  await runner.promise.catch(() => {}); // its failure, if any, is reported below

  // (g) Verify: every offer has its state row and no job is left.
  if (jobError) fail(`a job or the runner failed: ${jobError.message || jobError}`);
  const states = (await pgPool.query("SELECT count(*)::int AS n FROM peer_states")).rows[0].n;
  const left = (await pgPool.query("SELECT count(*)::int AS n FROM graphile_worker.jobs")).rows[0].n;
  await pgPool.end();
  if (states !== jobs) fail(`peer_states has ${states} rows, expected ${jobs}`);
  if (left !== 0) fail(`graphile_worker.jobs still has ${left} jobs`);

  // (h) One JSON line on stdout.
  const rate = Math.round(jobs / secs);
  log(`${jobs} jobs in ${secs.toFixed(2)} s: ${rate} jobs/s`);
  process.stdout.write(JSON.stringify({ peer: PEER, value: rate, unit: "jobs/s" }) + "\n");
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
