// What the graphile-worker peer scripts share (noop.js, tasks.js): arguments, the DSN, the
// pool, graphile-worker's documented fastest settings, bulk enqueueing, and the timed run
// from the runner's start until the last job is completed and removed (README.md).
"use strict";

const { execFileSync } = require("node:child_process");
const { EventEmitter } = require("node:events");
const path = require("node:path");
const { performance } = require("node:perf_hooks");
const { Pool } = require("pg");
const { run, runMigrations, makeWorkerUtils, Logger } = require("graphile-worker");
const { version } = require("graphile-worker/package.json");

const PEER = `graphile-worker ${version}`;
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

const log = (msg) => process.stderr.write(`graphile-worker peer: ${msg}\n`);

function fail(msg) {
  log(`FAILED: ${msg}`);
  process.exit(1);
}

// --dsn X --jobs N (also --dsn=X --jobs=N), and the script's own positive integer options
// `extra` (e.g. ["tasks"]); `usage` is printed on a mistake.
function parseArgs(argv, usage, extra = []) {
  const names = ["dsn", "jobs", ...extra];
  const re = new RegExp(`^--(${names.join("|")})(?:=(.*))?$`);
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    const m = re.exec(argv[i]);
    if (!m) fail(`unknown argument ${JSON.stringify(argv[i])}; usage: ${usage}`);
    args[m[1]] = m[2] !== undefined ? m[2] : argv[++i];
  }
  const out = { dsn: args.dsn };
  for (const name of ["jobs", ...extra]) {
    out[name] = Number(args[name]);
    if (!Number.isSafeInteger(out[name]) || out[name] < 1) fail(`usage: ${usage}   (--${name} a positive integer)`);
  }
  if (!args.dsn) fail(`usage: ${usage}`);
  return out;
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

// One pool sized like graphile-worker's own (maxPoolSize), shared by setup, enqueue, the runner
// (so task handlers write through the worker's pool) and the final checks; and the options
// every graphile-worker call gets.
function connect(dsn) {
  const pgPool = new Pool({ ...pgConfigFromDsn(dsn), max: MAX_POOL_SIZE });
  pgPool.on("error", (err) => log(`idle pool client error: ${err.message}`));
  pgPool.on("connect", (client) => client.on("error", (err) => log(`pool client error: ${err.message}`)));
  return { dsn, pgPool, options: { pgPool, logger: quietLogger, preset: WORKER_PRESET } };
}

// CPU seconds so far of this process and of the whole PostgreSQL server (bench/proc_cpu.py,
// the method of gost's own figures): [node, server]. The server must run on this machine.
const PROC_CPU = path.join(__dirname, "..", "..", "proc_cpu.py");
function postmasterOf(dsn) {
  return execFileSync("python3", [PROC_CPU, "postmaster", dsn], { encoding: "utf8" }).trim();
}
function cpuSample(postmaster) {
  const out = execFileSync("python3", [PROC_CPU, "sample", postmaster, String(process.pid)], { encoding: "utf8" });
  return out.trim().split(/\s+/).map(Number);
}

// A clean slate: drops the graphile_worker schema, runs `resetSql` (the script's own tables),
// then graphile-worker's migrations.
async function reset(worker, resetSql) {
  log("resetting the graphile_worker schema and the peer's tables");
  await worker.pgPool.query(`DROP SCHEMA IF EXISTS graphile_worker CASCADE; ${resetSql}`);
  await runMigrations(worker.options);
}

// Enqueues `jobs` jobs of task `identifier` (payload(i) each) with addJobs in calls of 1,000,
// then ANALYZEs the whole (benchmark-only) database: fresh un-analyzed tables are slower.
async function enqueue(worker, identifier, jobs, payload) {
  log(`enqueueing ${jobs} jobs`);
  const utils = await makeWorkerUtils(worker.options);
  const enqueueStart = performance.now();
  for (let first = 0; first < jobs; first += ENQUEUE_CHUNK) {
    const specs = [];
    for (let i = first; i < Math.min(first + ENQUEUE_CHUNK, jobs); i++) {
      specs.push({ identifier, payload: payload(i) });
    }
    await utils.addJobs(specs);
  }
  const enqueueSecs = (performance.now() - enqueueStart) / 1000;
  await utils.release();
  log(`enqueued in ${enqueueSecs.toFixed(2)} s (${Math.round(jobs / enqueueSecs)} jobs/s); analyzing`);
  await worker.pgPool.query("ANALYZE");
}

// Runs `taskList` until `jobs` jobs succeeded and the jobs table is empty (completions are
// batched: after the last handler succeeded, the table is polled until the last completion
// deleted its row); returns { secs, cpu }: the seconds from the runner's start and the CPU
// seconds over them of this process and of PostgreSQL ([node, server]). Exits on a job's failure.
async function timedRun(worker, taskList, jobs) {
  // Events come from our own emitter so none is missed before run() resolves.
  let succeeded = 0;
  let jobError = null;
  const events = new EventEmitter();
  events.on("job:success", () => { succeeded++; });
  events.on("job:error", ({ error }) => { jobError = jobError || error; });

  log(`running with concurrency ${CONCURRENCY}, maxPoolSize ${MAX_POOL_SIZE}, localQueue.size 500`);
  const postmaster = postmasterOf(worker.dsn);
  const cpuBefore = cpuSample(postmaster);
  const start = performance.now();
  const runner = await run({ ...worker.options, concurrency: CONCURRENCY, taskList, events, noHandleSignals: true });
  runner.promise.catch((err) => { jobError = jobError || err; }); // the runner died: stop waiting
  const progress = setInterval(() => {
    const secs = (performance.now() - start) / 1000;
    log(`${succeeded}/${jobs} jobs done after ${secs.toFixed(1)} s`);
  }, 1000);

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  while (succeeded < jobs && !jobError) await sleep(5);
  while (!jobError) {
    const { rows } = await worker.pgPool.query("SELECT count(*)::int AS n FROM graphile_worker.jobs");
    if (rows[0].n === 0) break;
    await sleep(2);
  }
  const secs = (performance.now() - start) / 1000;
  const cpuAfter = cpuSample(postmaster);
  clearInterval(progress);
  await runner.stop();
  await runner.promise.catch(() => {}); // its failure, if any, is reported below
  if (jobError) fail(`a job or the runner failed: ${jobError.message || jobError}`);
  const left = (await worker.pgPool.query("SELECT count(*)::int AS n FROM graphile_worker.jobs")).rows[0].n;
  if (left !== 0) fail(`graphile_worker.jobs still has ${left} jobs`);
  return { secs, cpu: cpuAfter.map((x, i) => x - cpuBefore[i]) };
}

// The one JSON line on stdout: jobs per second over the timed run (`timed`, timedRun's
// answer), and the CPU per job of this process and of PostgreSQL in microseconds.
function report(jobs, timed) {
  const rate = Math.round(jobs / timed.secs);
  const perJob = (s) => Math.round((s * 1e7) / jobs) / 10;
  log(`${jobs} jobs in ${timed.secs.toFixed(2)} s: ${rate} jobs/s`);
  process.stdout.write(JSON.stringify({
    peer: PEER, value: rate, unit: "jobs/s",
    cpu_us_per_op: perJob(timed.cpu[0]), pg_cpu_us_per_op: perJob(timed.cpu[1]),
  }) + "\n");
}

module.exports = { log, fail, parseArgs, connect, reset, enqueue, timedRun, report };
