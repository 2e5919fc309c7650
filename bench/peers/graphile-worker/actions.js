#!/usr/bin/env node
// Peer benchmark for gost's `actions` (scheduled actions): graphile-worker jobs scheduled with
// `run_at`, their firing lag, and a burst due at one second.
//
//   node actions.js --dsn DSN --jobs N --span SECONDS --measure SECONDS --burst B --poll MS
//
// As gost_bench actions does: N jobs due evenly over SPAN seconds starting after the enqueue
// (addJobs, 1,000 per call, `runAt` each), then the runner (the documented fastest settings of
// harness.js, `pollInterval` MS: future jobs are found by polling) from before the first is due;
// the lag of the jobs due in the first MEASURE seconds (the handler's start minus `run_at`);
// then B jobs due at one second (enqueued during the run), drained: jobs per second from that
// second to the last one's start. Each handler only records its lag (gost's action does the same).
// stdout: {"peer": ..., "value": <lag p99 ms>, "unit": "ms", "p50_ms", "max_ms", "fired",
// "burst_per_s", "burst_p99_ms"}.
"use strict";

const { run, makeWorkerUtils } = require("graphile-worker");
const { log, fail, parseArgs, connect, reset } = require("./harness");
const { version } = require("graphile-worker/package.json");

const TASK = "scheduled_action";
const CHUNK = 1000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function summary(lags) {
  lags.sort((a, b) => a - b);
  const pct = (p) => (lags.length ? lags[Math.min(lags.length - 1, Math.floor(p * lags.length))] : 0);
  return { p50: pct(0.5), p99: pct(0.99), max: lags.length ? lags[lags.length - 1] : 0, n: lags.length };
}

async function addAll(utils, n, prefix, dueOf) {
  for (let first = 0; first < n; first += CHUNK) {
    const specs = [];
    for (let i = first; i < Math.min(first + CHUNK, n); i++) {
      const due = dueOf(i);
      specs.push({ identifier: TASK, payload: { k: `${prefix}${i}`, due }, runAt: new Date(due) });
    }
    await utils.addJobs(specs);
  }
}

async function main() {
  const usage = "node actions.js --dsn DSN --jobs N --span S --measure S --burst B --poll MS";
  const { dsn, jobs, span, measure, burst, poll } =
    parseArgs(process.argv.slice(2), usage, ["span", "measure", "burst", "poll"]);
  const worker = connect(dsn);
  await reset(worker, "");
  const utils = await makeWorkerUtils(worker.options);

  // The spread: due after the enqueue (at least 11k/s: 90 µs a job, and 15 s).
  const firstDue = Date.now() + 15000 + Math.ceil(jobs * 0.09);
  const spanMs = span * 1000;
  log(`enqueueing ${jobs} jobs due over ${span} s`);
  const t0 = Date.now();
  await addAll(utils, jobs, "s-", (i) => firstDue + Math.floor((i * spanMs) / jobs));
  log(`enqueued in ${((Date.now() - t0) / 1000).toFixed(1)} s; analyzing`);
  await worker.pgPool.query("ANALYZE");
  if (Date.now() > firstDue - 2000) fail("the enqueue took too long: jobs would be late from the start");

  const spread = [];
  const burstFires = [];
  let jobError = null;
  const taskList = {
    [TASK]: async (payload) => {
      const at = Date.now();
      (payload.k[0] === "b" ? burstFires : spread).push({ due: payload.due, at });
    },
  };
  const preset = { ...worker.options.preset, worker: { ...worker.options.preset.worker, pollInterval: poll } };
  log(`running with pollInterval ${poll} ms`);
  const runner = await run({
    ...worker.options, preset, pollInterval: poll, concurrency: 24, taskList, noHandleSignals: true,
  });
  runner.events.on("job:error", ({ error }) => { jobError = jobError || error; });
  runner.promise.catch((err) => { jobError = jobError || err; });

  const measureEnd = firstDue + measure * 1000;
  while (Date.now() < measureEnd + 2000 && !jobError) await sleep(50);
  const burstDue = Math.ceil((Date.now() + 5000 + burst * 0.09) / 1000) * 1000;
  log(`enqueueing a burst of ${burst} jobs due at one second`);
  await addAll(utils, burst, "b-", () => burstDue);
  if (Date.now() > burstDue - 500) fail("the burst was enqueued too late");
  const giveUp = burstDue + 600000;
  while (burstFires.length < burst && Date.now() < giveUp && !jobError) await sleep(10);
  await runner.stop();
  await utils.release();
  await worker.pgPool.end();
  if (jobError) fail(`a job or the runner failed: ${jobError.message || jobError}`);
  if (burstFires.length < burst) fail(`only ${burstFires.length} of the burst's ${burst} jobs ran in 10 min`);

  const w = summary(spread.filter((f) => f.due >= firstDue && f.due < measureEnd).map((f) => f.at - f.due));
  const expected = Math.ceil((measure * 1000 * jobs) / spanMs);
  if (w.n < expected - 1) fail(`only ${w.n} of the ${expected} jobs due in the measured window ran`);
  const lastBurst = Math.max(...burstFires.map((f) => f.at));
  const b = summary(burstFires.map((f) => f.at - f.due));
  const drain = Math.max(lastBurst - burstDue, 1) / 1000;
  log(`lag p50 ${w.p50} ms, p99 ${w.p99} ms, max ${w.max} ms over ${w.n} jobs; burst of ${burst} ` +
      `drained in ${drain.toFixed(2)} s (${Math.round(burst / drain)}/s, its lag p99 ${b.p99} ms)`);
  process.stdout.write(JSON.stringify({
    peer: `graphile-worker ${version}`, value: w.p99, unit: "ms", p50_ms: w.p50, max_ms: w.max,
    fired: w.n, poll_ms: poll, burst_per_s: Math.round(burst / drain), burst_p99_ms: b.p99,
  }) + "\n");
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
