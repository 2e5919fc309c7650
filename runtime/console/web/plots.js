// gost web console, the pictures: time-series plots of /api/series (the node's own ring of
// samples, console/series.hpp) and the shards as a grid. Hand-written SVG, no library. Loaded
// after console.js, whose helpers ($, el, num, age, table) it uses.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';

// The four figures of a series, each with its colour (docs/console.md "The web page").
const FIGURES = [
  { field: 'runs_per_s', title: 'runs/s', colour: '#1f6fb2' },
  { field: 'failures_per_s', title: 'failures/s', colour: '#c62828' },
  { field: 'backlog', title: 'backlog', colour: '#e08a00' },
  { field: 'write_lag_ms', title: 'write lag ms', colour: '#6a3fb0' },
];

const GROUP_TITLES = {
  stage: 'stage', offers: 'offers', kind: 'entity type', task: 'tasks',
  scheduled: 'scheduled actions', image: 'image pool', feed: 'feed loads',
};

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

const shortNumber = (v) => (v === null || v === undefined ? '-'
  : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));

// One small plot of `values` (null: a gap) over `times` (µs): a polyline per run of values,
// scaled from 0 to the largest value. Returns the <svg>, or null when every value is null.
function sparkline(times, values, colour, title) {
  const w = 220, h = 56, pad = 4;
  const points = values.map((v, i) => (v === null ? null : [times[i], v]));
  if (!points.some((p) => p)) return null;
  const t0 = times[0], t1 = times[times.length - 1];
  const top = Math.max(...values.filter((v) => v !== null), 0);
  const max = top || 1; // all zero: a line along the bottom
  const x = (t) => (t1 > t0 ? pad + ((t - t0) / (t1 - t0)) * (w - 2 * pad) : w / 2);
  const y = (v) => Math.round(h - pad - (v / max) * (h - 2 * pad));
  const box = svg('svg', { width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: 'plot' });
  box.appendChild(svg('rect', { x: 0, y: 0, width: w, height: h, class: 'plot-frame' }));
  let d = '';
  let pen = false;
  for (const p of points) {
    if (!p) { pen = false; continue; }
    d += (pen ? 'L' : 'M') + x(p[0]).toFixed(1) + ' ' + y(p[1]) + ' ';
    pen = true;
  }
  // A single point is drawn as a short dash so it shows.
  if (points.filter((p) => p).length === 1) d += 'h 4';
  const path = svg('path', { d: d.trim(), stroke: colour, 'stroke-width': 2, fill: 'none' });
  path.dataset.points = String(points.filter((p) => p).length);
  box.appendChild(path);
  const t = svg('title');
  t.textContent = title + ': max ' + shortNumber(top);
  box.appendChild(t);
  return box;
}

// The series' group as the page shows it: entity types named task.* are tasks.
const groupOf = (s) => (s.group === 'kind' && s.key.startsWith('task.') ? 'task' : s.group);

let lastSeries = null;

async function refreshSeries() {
  let data;
  try {
    data = await getJSON('/api/series');
  } catch (e) {
    $('plots').replaceChildren(el('p', 'no samples: ' + e.message, 'muted'));
    return;
  }
  lastSeries = data;
  const secs = Math.round((num(data.interval_ms) * num(data.capacity)) / 1000);
  $('plots-note').textContent = data.at_us.length + ' sample(s), one every '
    + (num(data.interval_ms) / 1000) + ' s, up to ' + (secs >= 120 ? Math.round(secs / 60) + ' min'
    : secs + ' s') + ' kept by the node';
  const box = $('plots');
  box.replaceChildren();
  if (!data.series.length) {
    box.appendChild(el('p', 'nothing sampled yet', 'muted'));
    return;
  }
  const order = Object.keys(GROUP_TITLES);
  const series = data.series.slice().sort((a, b) =>
    order.indexOf(groupOf(a)) - order.indexOf(groupOf(b)) || a.key.localeCompare(b.key));
  for (const s of series) {
    const card = el('div', null, 'series');
    card.dataset.group = groupOf(s);
    card.dataset.key = s.key;
    const single = ['offers', 'scheduled', 'feed'].includes(s.group); // one series of its group
    card.appendChild(el('h4', GROUP_TITLES[groupOf(s)] + (single ? '' : ' ' + s.key)));
    for (const f of FIGURES) {
      const values = s[f.field] || [];
      const last = [...values].reverse().find((v) => v !== null);
      const row = el('div', null, 'figure');
      row.appendChild(el('span', f.title + ' ' + shortNumber(last === undefined ? null : last),
        'figure-label'));
      const plot = sparkline(data.at_us, values, f.colour, s.key + ' ' + f.title);
      if (plot) {
        plot.dataset.field = f.field;
        row.appendChild(plot);
      } else {
        row.appendChild(el('span', 'not counted', 'muted'));
      }
      card.appendChild(row);
    }
    box.appendChild(card);
  }
}

// The newest value of one figure of a series (null: none).
function latest(group, key, field) {
  if (!lastSeries) return null;
  const s = lastSeries.series.find((x) => x.group === group && x.key === key);
  const v = s ? [...(s[field] || [])].reverse().find((x) => x !== null) : undefined;
  return v === undefined ? null : v;
}

// Shards as a grid: one cell per shard, its colour the owner's (grey: free), darker with its
// backlog; a hand-off outlined. The title says it all; a click shows the shard's details.
const ownerHue = (owner) => {
  let h = 0;
  for (const c of owner) h = (h * 31 + c.charCodeAt(0)) % 360;
  return h;
};

let shownShard = null;

function shardGrid(shards, top) {
  const mine = new Map((top ? top.shards : []).map((s) => [s.shard, s]));
  const grid = $('shard-grid');
  grid.replaceChildren();
  for (const s of shards) {
    const t = mine.get(s.shard);
    const backlog = t ? num(t.backlog) + num(t.mailbox) : 0;
    const cell = el('button', String(s.shard), 'shard-cell');
    cell.type = 'button';
    cell.dataset.shard = s.shard;
    if (!s.owner || s.free) {
      cell.classList.add('free');
    } else {
      const light = Math.max(35, 70 - Math.min(backlog, 100) * 0.35);
      cell.style.backgroundColor = `hsl(${ownerHue(s.owner)}, 55%, ${light}%)`;
    }
    if (s.handoff_to) cell.classList.add('moving');
    cell.title = 'shard ' + s.shard + ' · ' + (s.owner ? 'owner ' + s.owner : 'no owner')
      + ' · epoch ' + s.epoch + (s.handoff_to ? ' · hand-off to ' + s.handoff_to : '')
      + (t ? ' · backlog ' + num(t.backlog) + ' · mailbox ' + num(t.mailbox) : '');
    cell.addEventListener('click', () => showShard(s.shard));
    grid.appendChild(cell);
  }
  const owners = [...new Set(shards.map((s) => s.owner).filter((o) => o))].sort();
  const legend = $('shard-legend');
  legend.replaceChildren();
  for (const o of owners) {
    const swatch = el('span', o, 'shard-owner');
    swatch.style.borderLeftColor = `hsl(${ownerHue(o)}, 55%, 55%)`;
    legend.appendChild(swatch);
  }
  if (shownShard !== null) showShard(shownShard);
}

let lastShards = [];
let lastTop = null;

function showShard(id) {
  shownShard = id;
  const s = lastShards.find((x) => x.shard === id);
  const t = lastTop ? lastTop.shards.find((x) => x.shard === id) : null;
  const rows = [['shard', id]];
  if (s) rows.push(['owner', s.owner || '(none)'], ['epoch', s.epoch], ['free', s.free ? 'yes' : 'no'],
    ['heartbeat age', age(s.heartbeat_age_ms)], ['hand-off to', s.handoff_to || '-']);
  if (t) rows.push(['resident', t.resident], ['mailbox', t.mailbox], ['running', t.running],
    ['backlog', t.backlog], ['oldest due', age(t.oldest_due_age_ms)],
    ['write lag ms', t.write_lag_ms], ['write batch', t.write_batch]);
  else rows.push(['figures', 'held by another node: open its console']);
  const box = $('shard-detail');
  box.hidden = false;
  table(box, [['', (r) => r[0], 'text'], ['', (r) => r[1], 'text']], rows);
  box.querySelector('tr').remove();
}
