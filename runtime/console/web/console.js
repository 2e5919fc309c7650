// gost web console: reads the node's /api/... (JSON rendered from the AdminService
// responses) and shows them. Read-only. Every value reaches the page through textContent
// (never innerHTML), so nothing an offer or a stage holds can become markup.
'use strict';

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: 'no-store' });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    const err = new Error((body && body.error) || (r.status + ' ' + r.statusText));
    err.status = r.status;
    throw err;
  }
  return body;
}

const num = (v) => (v === undefined || v === null || v === '' ? 0 : Number(v));

function age(ms) {
  ms = num(ms);
  if (ms <= 0) return '-';
  if (ms < 1000) return ms + ' ms';
  if (ms < 120000) return (ms / 1000).toFixed(1) + ' s';
  if (ms < 7200000) return (ms / 60000).toFixed(1) + ' min';
  return (ms / 3600000).toFixed(1) + ' h';
}

const rate = (v) => (v === null ? '-' : v.toFixed(1));

// columns: [title, (row) => value or Node, 'text' for left-aligned]
function table(container, columns, rows, empty) {
  container.replaceChildren();
  if (!rows.length) {
    container.appendChild(el('p', empty || 'none', 'muted'));
    return;
  }
  const t = el('table');
  const head = el('tr');
  for (const [title, , cls] of columns) head.appendChild(el('th', title, cls));
  t.appendChild(head);
  for (const row of rows) {
    const tr = el('tr');
    for (const [, get, cls] of columns) {
      const v = get(row);
      const td = el('td', null, cls);
      if (v instanceof Node) td.appendChild(v); else td.textContent = String(v);
      tr.appendChild(td);
    }
    t.appendChild(tr);
  }
  container.appendChild(t);
}

function offerLink(id) {
  const a = el('a', id);
  a.href = '?offer=' + encodeURIComponent(id);
  a.addEventListener('click', (ev) => { ev.preventDefault(); showOffer(id); });
  return a;
}

function stateCell(paused) {
  return paused ? el('span', 'PAUSED', 'paused') : 'running';
}

// Rates from two samples of the counters Top returns, as gostctl top computes them.
const RATED = ['shards', 'stages', 'kinds', 'lanes', 'images'];
let previous = null;
let rates = Object.fromEntries(RATED.map((k) => [k, new Map()]));

function takeRates(top) {
  const now = { at: num(top.at_us) };
  for (const kind of RATED) now[kind] = new Map();
  for (const s of top.shards) now.shards.set(s.shard, [num(s.runs), num(s.failures)]);
  for (const s of top.stages) now.stages.set(s.stage_id, [num(s.runs), num(s.failures)]);
  for (const k of top.kinds || []) now.kinds.set(k.kind, [num(k.runs), num(k.failures)]);
  for (const l of top.lanes || [])
    now.lanes.set(l.kind + '/' + l.lane, [num(l.runs), num(l.failures)]);
  for (const i of top.images || []) now.images.set(i.function, [num(i.computed), num(i.failed)]);
  const out = Object.fromEntries(RATED.map((k) => [k, new Map()]));
  if (previous && now.at > previous.at) {
    const dt = (now.at - previous.at) / 1e6;
    for (const kind of RATED)
      for (const [k, [runs, fails]] of now[kind]) {
        const p = previous[kind].get(k);
        if (p) out[kind].set(k, [(runs - p[0]) / dt, (fails - p[1]) / dt]);
      }
  }
  previous = now;
  rates = out;
}

const rateOf = (kind, key, i) => {
  const r = rates[kind].get(key);
  return r ? rate(r[i]) : '-';
};

async function refreshTop() {
  const top = await getJSON('/api/top');
  $('node-id').textContent = top.node_id;
  document.title = 'gost ' + top.node_id;
  takeRates(top);
  lastTop = top;
  showKinds(top);
  table($('top-shards'), [
    ['shard', (s) => s.shard],
    ['epoch', (s) => s.epoch],
    ['resident', (s) => s.resident],
    ['mailbox', (s) => s.mailbox],
    ['runs/s', (s) => rateOf('shards', s.shard, 0)],
    ['fail/s', (s) => rateOf('shards', s.shard, 1)],
    ['running', (s) => s.running],
    ['backlog', (s) => s.backlog],
    ['oldest due', (s) => age(s.oldest_due_age_ms)],
    ['wlag ms', (s) => s.write_lag_ms],
    ['wbatch', (s) => s.write_batch],
  ], top.shards, 'this node owns no shard');
  table($('top-stages'), [
    ['stage', (s) => s.stage_id, 'text'],
    ['state', (s) => stateCell(s.paused)],
    ['queued', (s) => s.queued],
    ['oldest due', (s) => age(s.oldest_due_age_ms)],
    ['runs/s', (s) => rateOf('stages', s.stage_id, 0)],
    ['fail/s', (s) => rateOf('stages', s.stage_id, 1)],
    ['dead', (s) => s.dead_letters],
  ], top.stages, 'no stages');
}

async function refreshOverview() {
  const [nodes, stages, shards] = await Promise.all(
    [getJSON('/api/nodes'), getJSON('/api/stages'), getJSON('/api/shards')]);
  table($('nodes'), [
    ['node', (n) => n.node_id, 'text'],
    ['gRPC', (n) => n.grpc_addr, 'text'],
    ['HTTP', (n) => n.http_addr, 'text'],
    ['alive', (n) => (n.alive ? 'yes' : 'NO')],
    ['leaving', (n) => (n.leaving ? 'yes' : '')],
    ['heartbeat age', (n) => age(n.heartbeat_age_ms)],
    ['shards', (n) => n.shards],
    ['started', (n) => n.started_at || '', 'text'],
  ], nodes.nodes, 'no nodes registered');
  table($('stages'), [
    ['stage', (s) => s.stage_id, 'text'],
    ['state', (s) => stateCell(s.paused)],
    ['queued', (s) => s.queued],
    ['oldest due', (s) => age(s.oldest_due_age_ms)],
    ['runs/s', (s) => rateOf('stages', s.stage_id, 0)],
    ['fail/s', (s) => rateOf('stages', s.stage_id, 1)],
    ['dead letters', (s) => s.dead_letters],
    ['timers', (s) => s.timers],
    ['runs', (s) => s.runs],
    ['run p50/p99 ms', (s) => num(s.run_p50_ms).toFixed(1) + ' / ' + num(s.run_p99_ms).toFixed(1)],
    ['here', (s) => (s.registered ? 'yes' : 'no')],
    ['paused by', (s) => (s.paused ? s.paused_by + ' ' + (s.paused_at || '') : ''), 'text'],
  ], stages.stages, 'no stages');
  lastShards = shards.shards;
  shardGrid(shards.shards, lastTop);
  table($('shards'), [
    ['shard', (s) => s.shard],
    ['owner', (s) => s.owner || '(none)', 'text'],
    ['epoch', (s) => s.epoch],
    ['free', (s) => (s.free ? 'yes' : '')],
    ['heartbeat age', (s) => age(s.heartbeat_age_ms)],
    ['hand-off to', (s) => s.handoff_to, 'text'],
  ], shards.shards, 'no shards');
}

async function refresh() {
  try {
    await refreshTop();
    await refreshOverview();
    await refreshSeries();
    showRatesOfSeries();
    $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('status').className = 'muted';
  } catch (e) {
    $('status').textContent = 'cannot read the node: ' + e.message;
    $('status').className = 'error';
  }
}

let deadAfter = '';

async function loadDeadLetters(more) {
  const stage = $('deadletters-stage').value.trim();
  let path = '/api/deadletters?limit=50';
  if (stage) path += '&stage=' + encodeURIComponent(stage);
  if (more && deadAfter) path += '&after=' + encodeURIComponent(deadAfter);
  try {
    const page = await getJSON(path);
    const columns = [
      ['id', (d) => d.id],
      ['shard', (d) => d.shard],
      ['offer', (d) => offerLink(d.offer_id), 'text'],
      ['stage', (d) => d.stage_id, 'text'],
      ['attempts', (d) => d.attempts],
      ['created', (d) => d.created_at || '', 'text'],
      ['reason', (d) => d.reason, 'text'],
    ];
    table($('deadletters'), columns, page.letters, 'no open dead letters');
    deadAfter = page.next_page_token || '';
    $('deadletters-more').hidden = !deadAfter;
  } catch (e) {
    $('deadletters').replaceChildren(el('p', 'cannot list dead letters: ' + e.message, 'error'));
  }
}

async function showOffer(id) {
  id = id.trim();
  $('offer-id').value = id;
  if (!$('trace-offer').value) $('trace-offer').value = id;
  const url = new URL(window.location.href);
  url.searchParams.set('offer', id);
  window.history.replaceState(null, '', url);
  $('offer').hidden = true;
  $('offer-status').className = 'muted';
  $('offer-status').textContent = 'loading ' + id + '…';
  let d;
  try {
    d = await getJSON('/api/offer?id=' + encodeURIComponent(id));
  } catch (e) {
    $('offer-status').className = 'error';
    $('offer-status').textContent = (e.status === 404 ? 'no such offer: ' : 'cannot describe: ')
      + e.message;
    return;
  }
  const o = d.offer || {};
  $('offer-status').textContent = 'offer ' + o.id;
  const summary = [
    ['id', o.id], ['title', o.title], ['version', o.version], ['status', o.status],
    ['seller', o.seller_id], ['shard', d.shard],
    ['resident', d.resident ? 'yes' : 'no'],
    ['mailbox', num(d.mailbox) < 0 ? '-' : d.mailbox],
    ['updated', o.updated_at || ''],
  ];
  table($('offer-summary'), [['', (r) => r[0], 'text'], ['', (r) => r[1], 'text']], summary);
  $('offer-summary').querySelector('tr').remove(); // no header row for a key/value table
  const states = $('offer-states');
  states.replaceChildren();
  const stageIds = Object.keys(d.states || {}).sort();
  if (!stageIds.length) states.appendChild(el('p', 'no stage state', 'muted'));
  for (const stage of stageIds) {
    const div = el('div', null, 'state');
    div.dataset.stage = stage;
    const version = (d.state_versions || {})[stage];
    div.appendChild(el('h4', stage + (version !== undefined ? ' (version ' + version + ')' : '')));
    div.appendChild(el('pre', JSON.stringify(d.states[stage], null, 2)));
    states.appendChild(div);
  }
  const queue = d.queue || [];
  const qcols = [
    ['stage', (q) => q.stage_id, 'text'],
    ['due at', (q) => q.due_at || '', 'text'],
    ['priority', (q) => (q.background ? 'background' : 'normal')],
  ];
  table($('offer-queue'), qcols, queue.filter((q) => !q.timer), 'none due');
  table($('offer-timers'), qcols, queue.filter((q) => q.timer), 'no timers');
  $('offer-json').textContent = JSON.stringify(o, null, 2);
  $('offer').hidden = false;
}

// Every kind of work the node runs: entity types and tasks (Top's kinds, task.* being tasks),
// their lanes, the image pools (Top's images); scheduled actions and feed loads from the newest
// samples of /api/series (Top does not count them).
function kindLink(kind) {
  const a = el('a', kind);
  a.href = '#entity-section';
  a.addEventListener('click', () => { $('entity-kind').value = kind; $('entity-id').focus(); });
  return a;
}

function showKinds(top) {
  const kinds = top.kinds || [];
  const kindColumns = [
    ['kind', (k) => kindLink(k.kind), 'text'],
    ['resident', (k) => k.resident],
    ['runs/s', (k) => rateOf('kinds', k.kind, 0)],
    ['fail/s', (k) => rateOf('kinds', k.kind, 1)],
    ['running', (k) => k.running],
    ['backlog', (k) => k.backlog],
    ['dead letters', (k) => k.dead_letters],
    ['runs', (k) => k.runs],
  ];
  table($('kinds'), kindColumns, kinds.filter((k) => !k.kind.startsWith('task.')),
    'no entity types on this node');
  table($('tasks'), kindColumns, kinds.filter((k) => k.kind.startsWith('task.')),
    'no task types on this node');
  table($('lanes'), [
    ['kind', (l) => l.kind, 'text'],
    ['lane', (l) => l.lane || '(default)', 'text'],
    ['runs/s', (l) => rateOf('lanes', l.kind + '/' + l.lane, 0)],
    ['fail/s', (l) => rateOf('lanes', l.kind + '/' + l.lane, 1)],
    ['running', (l) => l.running],
    ['backlog', (l) => l.backlog],
    ['dead letters', (l) => l.dead_letters],
  ], top.lanes || [], 'no lane has run yet');
  const list = $('entity-kinds');
  list.replaceChildren();
  for (const k of kinds) list.appendChild(el('option', null)).value = k.kind;
  table($('images'), [
    ['function', (i) => i.function, 'text'],
    ['workers', (i) => i.workers],
    ['in flight', (i) => i.in_flight],
    ['waiting', (i) => i.waiting],
    ['queued', (i) => (num(i.queued) < 0 ? '-' : i.queued)],
    ['computed/s', (i) => rateOf('images', i.function, 0)],
    ['fail/s', (i) => rateOf('images', i.function, 1)],
    ['cache hits', (i) => i.cache_hits],
    ['misses', (i) => i.cache_misses],
  ], top.images || [], 'no image pools (images.enabled is off)');
}

function showRatesOfSeries() {
  const rows = [['scheduled', 'actions', 'scheduled actions: attempts'], ['feed', 'loads', 'feed loads']];
  const seen = rows.filter(([g, k]) => latest(g, k, 'runs_per_s') !== null
    || (lastSeries && lastSeries.series.some((s) => s.group === g)));
  table($('other-kinds'), [
    ['what', (r) => r[2], 'text'],
    ['done/s', (r) => rate(latest(r[0], r[1], 'runs_per_s'))],
    ['fail/s', (r) => rate(latest(r[0], r[1], 'failures_per_s'))],
  ], seen, 'no scheduled-action workers or feed pools on this node');
}

// One durable entity (/api/entity, AdminService.InspectEntity), as the offer's view.
async function showEntity(kind, id) {
  kind = kind.trim();
  id = id.trim();
  $('entity-kind').value = kind;
  $('entity-id').value = id;
  $('entity').hidden = true;
  const status = $('entity-status');
  status.className = 'muted';
  status.textContent = 'loading ' + kind + '/' + id + '…';
  let d;
  try {
    d = await getJSON('/api/entity?kind=' + encodeURIComponent(kind) + '&id='
      + encodeURIComponent(id));
  } catch (e) {
    status.className = 'error';
    status.textContent = (e.status === 404 ? 'no such entity: ' : 'cannot describe: ') + e.message;
    return;
  }
  status.textContent = 'entity ' + d.entity_key;
  const summary = [
    ['entity', d.entity_key], ['version', d.version], ['lane', d.lane || '(default)'],
    ['pending events', d.pending_events], ['next due', d.next_due || '-'], ['shard', d.shard],
    ['owner', d.owner || '-'], ['epoch', d.epoch], ['resident', d.resident ? 'yes' : 'no'],
    ['mailbox', num(d.mailbox) < 0 ? '-' : d.mailbox],
    ['waiting', (d.waiting || 'nothing') + (num(d.waiting_ms) ? ' ' + age(d.waiting_ms) : '')],
    ['write lag ms', d.write_lag_ms],
  ];
  table($('entity-summary'), [['', (r) => r[0], 'text'], ['', (r) => r[1], 'text']], summary);
  $('entity-summary').querySelector('tr').remove();
  $('entity-state').textContent = d.state ? JSON.stringify(d.state, null, 2) : '(no state yet)';
  table($('entity-timers'), [
    ['name', (t) => t.name, 'text'],
    ['due', (t) => t.due || '', 'text'],
  ], d.timers || [], 'no named timers');
  table($('entity-recent'), [
    ['at', (e) => e.at || '', 'text'],
    ['kind', (e) => e.kind, 'text'],
    ['source', (e) => e.source || '', 'text'],
    ['stage', (e) => e.stage || '', 'text'],
    ['result', (e) => e.result || '', 'text'],
    ['version', (e) => e.version],
  ], d.recent || [], 'no recent events kept');
  $('entity').hidden = false;
}

// The live trace: newline-delimited JSON, read as it arrives. A node without the trace
// answers 501, shown as such.
let traceAbort = null;

function traceEvent(line) {
  let text = line;
  try { text = JSON.stringify(JSON.parse(line)); } catch (e) { /* shown as it came */ }
  const events = $('trace-events');
  events.appendChild(el('li', text));
  while (events.children.length > 1000) events.firstChild.remove();
}

async function startTrace() {
  const offer = $('trace-offer').value.trim();
  const status = $('trace-status');
  if (!offer) {
    status.className = 'error';
    status.textContent = 'give an offer id';
    return;
  }
  if (traceAbort) traceAbort.abort();
  traceAbort = new AbortController();
  const path = '/api/trace?offer=' + encodeURIComponent(offer) + '&for='
    + encodeURIComponent($('trace-for').value.trim()) + '&max='
    + encodeURIComponent($('trace-max').value.trim());
  $('trace-events').replaceChildren();
  $('trace-stop').disabled = false;
  status.className = 'muted';
  status.textContent = 'tracing ' + offer + '…';
  delete status.dataset.code;
  let count = 0;
  try {
    const r = await fetch(path, { signal: traceAbort.signal, cache: 'no-store' });
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* keep the status line */ }
      status.className = r.status === 501 ? 'muted' : 'error';
      status.textContent = (r.status === 501 ? 'not available: ' : 'trace refused: ') + msg;
      status.dataset.code = String(r.status);
      return;
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) { traceEvent(line); count++; }
      }
    }
    if (buf.trim()) { traceEvent(buf.trim()); count++; }
    status.textContent = 'trace ended: ' + count + ' event(s)';
  } catch (e) {
    status.textContent = e.name === 'AbortError' ? 'stopped after ' + count + ' event(s)'
      : 'trace failed: ' + e.message;
    status.className = e.name === 'AbortError' ? 'muted' : 'error';
  } finally {
    $('trace-stop').disabled = true;
    traceAbort = null;
  }
}

// A seller's feeds and their newest loads (/api/feeds, FeedService's messages as JSON).
async function loadFeeds() {
  const seller = $('feeds-seller').value.trim();
  if (!seller) return;
  $('feeds-status').textContent = 'loading…';
  let body;
  try {
    body = await getJSON('/api/feeds?seller=' + encodeURIComponent(seller));
  } catch (e) {
    $('feeds-status').textContent = e.status === 404
      ? 'feeds are not served on this node (feed.enabled is off)' : String(e.message);
    return;
  }
  $('feeds-status').textContent = '';
  const feeds = body.feeds || [];
  const s = (f) => f.settings || {};
  table($('feeds'), [
    ['namespace', (f) => f.namespace, 'text'],
    ['kind', (f) => s(f).kind || '-', 'text'],
    ['url', (f) => s(f).url || '-', 'text'],
    ['version', (f) => f.version],
    ['removed', (f) => (f.removed ? 'yes' : '')],
    ['last fetched', (f) => f.last_fetched_at || '-', 'text'],
    ['next fetch', (f) => f.next_fetch_at || '-', 'text'],
  ], feeds, 'no feed of seller ' + seller);
  const out = $('feed-loads');
  out.replaceChildren();
  for (const f of feeds) {
    out.appendChild(el('h3', 'Loads of ' + f.namespace));
    const box = el('div', null, 'table');
    out.appendChild(box);
    const st = (l) => l.statistics || {};
    table(box, [
      ['load', (l) => l.load_id],
      ['status', (l) => l.status, 'text'],
      ['origin', (l) => l.origin, 'text'],
      ['format', (l) => l.format || '-', 'text'],
      ['offers', (l) => num(st(l).offers)],
      ['sent', (l) => num(st(l).sent)],
      ['rejected', (l) => num(st(l).rejected)],
      ['added', (l) => num(st(l).added)],
      ['updated', (l) => num(st(l).updated)],
      ['deleted', (l) => num(st(l).deleted)],
      ['error', (l) => (l.error ? l.error_kind + ': ' + l.error : ''), 'text'],
      ['errors', (l) => {
        const a = el('a', 'CSV');
        a.href = '/feeds/errors.csv?seller=' + encodeURIComponent(seller) + '&load=' + l.load_id;
        return a;
      }],
      ['updated at', (l) => l.updated_at || '-', 'text'],
    ], (body.loads || {})[f.namespace] || [], 'no load yet');
  }
}

let timer = null;

function schedule() {
  if (timer) clearInterval(timer);
  timer = $('auto').checked ? setInterval(refresh, 3000) : null;
}

document.addEventListener('DOMContentLoaded', () => {
  $('offer-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if ($('offer-id').value.trim()) showOffer($('offer-id').value);
  });
  $('deadletters-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadDeadLetters(false);
  });
  $('deadletters-more').addEventListener('click', () => loadDeadLetters(true));
  $('feeds-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadFeeds(); });
  $('trace-form').addEventListener('submit', (ev) => { ev.preventDefault(); startTrace(); });
  $('trace-stop').addEventListener('click', () => { if (traceAbort) traceAbort.abort(); });
  $('auto').addEventListener('change', schedule);
  $('entity-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if ($('entity-kind').value.trim() && $('entity-id').value.trim())
      showEntity($('entity-kind').value, $('entity-id').value);
  });
  $('shards-as-table').addEventListener('change', () => {
    $('shards').hidden = !$('shards-as-table').checked;
  });
  const params = new URLSearchParams(window.location.search);
  const offer = params.get('offer');
  if (offer) {
    $('trace-offer').value = offer;
    // A link may set the trace's bounds too (&for=S&max=N).
    if (params.get('for')) $('trace-for').value = params.get('for');
    if (params.get('max')) $('trace-max').value = params.get('max');
    showOffer(offer);
    if (params.get('trace') === '1') startTrace(); // a link straight to the offer's trace
  }
  if (params.get('kind') && params.get('id')) showEntity(params.get('kind'), params.get('id'));
  refresh();
  loadDeadLetters(false);
  schedule();
});
