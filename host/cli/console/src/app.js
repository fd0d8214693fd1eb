// The Sluice console: renders the frames `sluice run` samples once a second (history from
// /ui/api/frames, then live from the /ui/api/stream server-sent events) and the DLQ from the
// admin API. Everything is built with textContent: no server string is ever parsed as HTML.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './style.css';

/** Frames kept in the page (the server keeps five minutes at one a second). */
const MAX_FRAMES = 300;
/** How often the DLQ list is reloaded. */
const DLQ_POLL_MS = 2000;
/** Dead letters listed at most. */
const DLQ_LIMIT = 500;

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

let frames = [];

// ---------- small helpers ----------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function cell(root, key) {
  return root.querySelector(`[data-cell="${CSS.escape(key)}"]`);
}

function setText(root, key, text, cls) {
  const c = cell(root, key);
  if (!c) return;
  if (c.textContent !== text) c.textContent = text;
  if (cls !== undefined) c.className = cls;
}

function fmtNum(n) {
  if (n === null || n === undefined) return '–';
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toFixed(1);
}

function fmtRate(r) {
  if (r === null || r === undefined) return '–';
  if (r === 0) return '0';
  return r >= 100 ? Math.round(r).toLocaleString('en-US') : r.toFixed(1);
}

function fmtMs(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms === 0) return '0';
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${ms.toFixed(0)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function fmtBytes(b) {
  if (b === null || b === undefined) return '–';
  if (b < 1024) return `${b} B`;
  if (b < 1 << 20) return `${(b / 1024).toFixed(1)} KiB`;
  return `${(b / (1 << 20)).toFixed(1)} MiB`;
}

function fmtClock(tMs) {
  return new Date(tMs).toLocaleTimeString('en-GB', { hour12: false });
}

/** Keeps one <tr> per key, in order; `build` makes a new row, `update` fills it. */
function syncRows(tbody, items, keyOf, build, update) {
  const old = new Map([...tbody.children].map((tr) => [tr.dataset.key, tr]));
  let prev = null;
  for (const item of items) {
    const key = keyOf(item);
    let tr = old.get(key);
    if (tr) old.delete(key);
    else {
      tr = build(item, key);
      tr.dataset.key = key;
    }
    update(tr, item);
    const at = prev ? prev.nextSibling : tbody.firstChild;
    if (at !== tr) tbody.insertBefore(tr, at);
    prev = tr;
  }
  for (const tr of old.values()) {
    for (const c of tr.querySelectorAll('td.spark')) c._plot?.destroy();
    tr.remove();
  }
}

// ---------- charts ----------

/** A sparkline: no axes, no legend; `scales` names one y scale per series. */
function sparkline(td, scales) {
  const opts = {
    width: 170,
    height: 28,
    cursor: { show: false },
    legend: { show: false },
    select: { show: false },
    axes: [{ show: false }, ...scales.map(() => ({ show: false }))],
    scales: Object.fromEntries([['x', { time: true }], ...scales.map((s) => [s, { auto: true, range: (u, lo, hi) => [0, Math.max(hi, 1)] }])]),
    series: [{}, ...scales.map((s, i) => ({ scale: s, stroke: COLORS[i], width: 1.25, points: { show: false } }))],
  };
  td._plot = new uPlot(opts, [[], ...scales.map(() => [])], td);
  return td._plot;
}

function chart(container, title, series, height = 150) {
  const width = Math.max(320, container.clientWidth || 600);
  const opts = {
    title,
    width,
    height,
    legend: { live: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.1, 1)] } },
    axes: [{ stroke: '#6b7385', space: 70 }, { stroke: '#6b7385', size: 40 }],
    series: [{}, ...series.map((s, i) => ({ stroke: COLORS[i % COLORS.length], width: 1.5, points: { show: false }, ...s }))],
  };
  return new uPlot(opts, [[], ...series.map(() => [])], container);
}

const xs = () => frames.map((f) => f.t_ms / 1000);

// ---------- actor types ----------

const TYPE_FIELDS = [
  ['active', (t) => fmtNum(t.active)],
  ['turns_per_s', (t) => fmtRate(t.turns_per_s)],
  ['p50_ms', (t) => fmtMs(t.p50_ms)],
  ['p99_ms', (t) => fmtMs(t.p99_ms)],
  ['queued', (t) => fmtNum(t.queued)],
  ['oldest_queued_ms', (t) => fmtMs(t.oldest_queued_ms)],
  ['refused', (t) => fmtNum(t.refused), (t) => (t.refused_per_s > 0 ? 'hot' : '')],
  ['dropped', (t) => fmtNum(t.dropped)],
  ['skipped', (t) => fmtNum(t.skipped)],
  ['restarts', (t) => fmtNum(t.restarts), (t) => (t.restarts > 0 ? 'warm' : '')],
  ['stopped', (t) => `${fmtNum(t.stopped)} (${fmtNum(t.stopped_total)} total)`, (t) => (t.stopped > 0 ? 'hot' : '')],
];

function renderTypes(frame) {
  const tbody = document.querySelector('#types tbody');
  syncRows(
    tbody,
    frame.types,
    (t) => t.actor_type,
    (t) => {
      const tr = el('tr', {}, el('td', { 'data-cell': `type:${t.actor_type}:name` }));
      for (const [f] of TYPE_FIELDS) tr.append(el('td', { 'data-cell': `type:${t.actor_type}:${f}` }));
      const spark = el('td', { class: 'spark' });
      tr.append(spark);
      sparkline(spark, ['turns', 'depth']);
      return tr;
    },
    (tr, t) => {
      setText(tr, `type:${t.actor_type}:name`, `${t.actor_type} v${t.version}`);
      for (const [f, show, cls] of TYPE_FIELDS) setText(tr, `type:${t.actor_type}:${f}`, show(t), cls ? cls(t) : '');
      const series = frames.map((fr) => fr._types.get(t.actor_type));
      tr.querySelector('td.spark')._plot.setData([
        xs(),
        series.map((s) => (s ? s.turns_per_s : null)),
        series.map((s) => (s ? s.queued : null)),
      ]);
    },
  );
}

// ---------- outbox ----------

let ratesChart = null;
const limiterCharts = new Map();

function renderOutbox(frame) {
  const root = document.getElementById('outbox');
  const ob = frame.outbox;
  root.querySelector('.none').hidden = !!ob;
  root.querySelector('.cols').hidden = !ob;
  if (!ob) return;
  syncRows(
    root.querySelector('.partitions'),
    ob.partitions,
    (p) => String(p.partition),
    (p) =>
      el('tr', {},
        el('td', { text: String(p.partition) }),
        el('td', { 'data-cell': `partition:${p.partition}:depth` }),
        el('td', { 'data-cell': `partition:${p.partition}:oldest` })),
    (tr, p) => {
      setText(tr, `partition:${p.partition}:depth`, fmtNum(p.depth), p.depth > 0 ? 'warm' : '');
      setText(tr, `partition:${p.partition}:oldest`, fmtMs(p.oldest_age_s * 1000));
    },
  );
  for (const k of ['delivered_per_s', 'retries_per_s', 'backpressure_per_s', 'dead_lettered_per_s']) setText(root, `outbox:${k}`, fmtRate(ob[k]));
  for (const k of ['delivered', 'retries', 'dead_lettered', 'backpressure', 'pending']) setText(root, `outbox:${k}`, fmtNum(ob[k]));

  if (!ratesChart) {
    ratesChart = chart(root.querySelector('.rates-chart'), 'relay, per second', [
      { label: 'delivered' }, { label: 'retries' }, { label: 'backpressure' }, { label: 'dead-lettered' },
    ], 130);
  }
  const obs = frames.map((f) => f.outbox);
  ratesChart.setData([
    xs(),
    obs.map((o) => (o ? o.delivered_per_s : null)),
    obs.map((o) => (o ? o.retries_per_s : null)),
    obs.map((o) => (o ? o.backpressure_per_s : null)),
    obs.map((o) => (o ? o.dead_lettered_per_s : null)),
  ]);

  // One chart per receiver type that has had deliveries in flight (or a limit that moved).
  const byType = new Map();
  for (const l of ob.limiters) {
    if (!byType.has(l.actor_type)) byType.set(l.actor_type, []);
    byType.get(l.actor_type).push(l);
  }
  const box = root.querySelector('.limiters');
  let idleNote = box.querySelector('.idle');
  if (!idleNote) {
    idleNote = el('p', { class: 'hint idle' });
    box.append(idleNote);
  }
  const idle = [];
  for (const [ty, ls] of byType) {
    const hist = frames.map((f) => (f.outbox ? f.outbox.limiters.filter((l) => l.actor_type === ty) : []));
    const active = hist.some((h) => h.some((l) => l.in_flight_max > 0 || l.limit_min !== h[0].limit));
    if (!active && !limiterCharts.has(ty)) {
      idle.push(ty);
      continue;
    }
    let c = limiterCharts.get(ty);
    if (!c) {
      const div = el('div', { class: 'limiter', 'data-limiter': ty },
        el('span', { class: 'title', text: ty }),
        el('span', { class: 'now', 'data-cell': `limiter:${ty}:now` }));
      const plotBox = el('div');
      div.append(plotBox);
      box.insertBefore(div, idleNote);
      // Wider lines for lower partitions, so equal limits stay visible one under the other.
      const series = ls.map((l, i) => ({ label: `limit p${l.partition}`, width: Math.max(1.25, 3.5 - i), paths: uPlot.paths.stepped({ align: 1 }) }));
      series.push({ label: 'in flight', stroke: '#111827', dash: [4, 3] });
      c = { div, plot: chart(plotBox, null, series, 140), partitions: ls.map((l) => l.partition) };
      limiterCharts.set(ty, c);
    }
    const data = [xs()];
    for (const p of c.partitions) data.push(hist.map((h) => h.find((l) => l.partition === p)?.limit_min ?? null));
    data.push(hist.map((h) => (h.length ? h.reduce((a, l) => a + l.in_flight_max, 0) : null)));
    c.plot.setData(data);
    const limits = ls.map((l) => `p${l.partition} ${fmtNum(l.limit)}`).join(' · ');
    const inflight = ls.reduce((a, l) => a + l.in_flight, 0);
    setText(c.div, `limiter:${ty}:now`, `limit ${limits} (min ${ob.min_limit}, max ${ob.max_limit}) — in flight ${fmtNum(inflight)}`);
    for (const l of ls) c.div.dataset[`limitP${l.partition}`] = String(l.limit);
  }
  idleNote.textContent = idle.length ? `No deliveries yet to: ${idle.join(', ')}` : '';
}

// ---------- bus ----------

function renderBus(frame) {
  const root = document.getElementById('bus');
  root.querySelector('.none').hidden = frame.bus.length > 0;
  const key = (s, i) => `${s.actor}|${s.topic}|${i}`;
  const items = frame.bus.map((s, i) => ({ ...s, _i: i }));
  syncRows(
    root.querySelector('tbody'),
    items,
    (s) => key(s, s._i),
    (s) => {
      const k = `bus:${s.actor}:${s.topic}`;
      const tr = el('tr', {},
        el('td', { text: s.actor }), el('td', { text: s.topic }), el('td', { text: s.mode }));
      for (const f of ['active_principals', 'bytes_in_use', 'queued', 'evicted', 'delivered', 'dropped']) tr.append(el('td', { 'data-cell': `${k}:${f}` }));
      tr.append(el('td', { class: 'text', 'data-cell': `${k}:top` }));
      const spark = el('td', { class: 'spark' });
      tr.append(spark);
      sparkline(spark, ['bytes']);
      return tr;
    },
    (tr, s) => {
      const k = `bus:${s.actor}:${s.topic}`;
      setText(tr, `${k}:active_principals`, fmtNum(s.active_principals));
      setText(tr, `${k}:bytes_in_use`, fmtBytes(s.bytes_in_use));
      setText(tr, `${k}:queued`, fmtNum(s.queued));
      setText(tr, `${k}:evicted`, fmtNum(s.evicted), s.evicted > 0 ? 'warm' : '');
      setText(tr, `${k}:delivered`, fmtNum(s.delivered));
      setText(tr, `${k}:dropped`, fmtNum(s.dropped));
      setText(tr, `${k}:top`, s.top_principals.map(([p, b]) => `${p} ${fmtBytes(b)}`).join(', ') || '–');
      tr.querySelector('td.spark')._plot.setData([
        xs(),
        frames.map((f) => f.bus[s._i]?.bytes_in_use ?? null),
      ]);
    },
  );
}

// ---------- deploys ----------

function renderDeploys(frame) {
  syncRows(
    document.querySelector('#deploys tbody'),
    frame.deploys,
    (d) => `${d.actor_type}@${d.version}`,
    (d) => el('tr', {}, el('td', { text: d.actor_type }), el('td', { text: `v${d.version}` }), el('td', { 'data-cell': `deploy:${d.actor_type}:${d.version}` })),
    (tr, d) => {
      const ago = fmtMs(Math.max(0, frame.t_ms - d.at_ms));
      setText(tr, `deploy:${d.actor_type}:${d.version}`, d.at_start ? `with the app folder, at start (${fmtClock(d.at_ms)}, ${ago} ago)` : `${fmtClock(d.at_ms)} (${ago} ago)`);
    },
  );
}

// ---------- frames ----------

function addFrame(f) {
  f._types = new Map(f.types.map((t) => [t.actor_type, t]));
  frames.push(f);
  if (frames.length > MAX_FRAMES) frames.splice(0, frames.length - MAX_FRAMES);
}

function render() {
  const f = frames[frames.length - 1];
  if (!f) return;
  setText(document, 'inflight', fmtNum(f.inflight_turns));
  setText(document, 'admission', `actor ${fmtNum(f.admission_refusals.actor ?? 0)} · host ${fmtNum(f.admission_refusals.host ?? 0)}`);
  setText(document, 'updated', fmtClock(f.t_ms));
  renderTypes(f);
  renderOutbox(f);
  renderBus(f);
  renderDeploys(f);
}

function setConn(state, text) {
  const c = document.getElementById('conn');
  c.className = `conn ${state}`;
  c.textContent = text;
}

async function loadHistory() {
  const r = await fetch('/ui/api/frames', { cache: 'no-store' });
  if (!r.ok) throw new Error(`frames: HTTP ${r.status}`);
  frames = [];
  for (const f of await r.json()) addFrame(f);
  render();
}

function connect() {
  const es = new EventSource('/ui/api/stream');
  let lost = false;
  es.onopen = () => {
    setConn('live', 'live');
    // After a reconnect, fill the gap from the server's history.
    if (lost) loadHistory().catch(() => {});
    lost = false;
  };
  es.addEventListener('frame', (e) => {
    const f = JSON.parse(e.data);
    if (!f) return;
    if (frames.length && f.t_ms <= frames[frames.length - 1].t_ms) return;
    addFrame(f);
    render();
  });
  es.onerror = () => {
    lost = true;
    setConn('down', 'disconnected — retrying');
  };
}

// ---------- DLQ ----------

const dlqRoot = () => document.getElementById('dlq');

async function adminPost(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const j = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(j.message || `HTTP ${r.status}`);
  return j;
}

function dlqStatus(text) {
  setText(dlqRoot(), 'dlq:status', text);
}

let dlqItems = [];

async function loadDlq() {
  const filter = cell(dlqRoot(), 'dlq:filter').value.trim();
  const q = new URLSearchParams({ limit: String(DLQ_LIMIT) });
  if (filter) q.set('receiver', filter);
  const r = await fetch(`/admin/dlq?${q}`, { cache: 'no-store' });
  const j = await r.json().catch(() => ({}));
  const tbody = dlqRoot().querySelector('tbody');
  if (!r.ok) {
    setText(dlqRoot(), 'dlq:count', '–');
    dlqStatus(j.message || `HTTP ${r.status}`);
    syncRows(tbody, [], () => '', () => null, () => {});
    return;
  }
  dlqItems = j.dead_letters;
  const count = cell(dlqRoot(), 'dlq:count');
  count.textContent = dlqItems.length >= DLQ_LIMIT ? `${DLQ_LIMIT}+` : String(dlqItems.length);
  count.className = dlqItems.length ? 'count hot' : 'count';
  syncRows(
    tbody,
    dlqItems,
    (d) => String(d.id),
    (d) => {
      const replay = el('button', { 'data-cell': `dlq:replay:${d.id}`, text: 'Replay' });
      const purge = el('button', { class: 'danger', 'data-cell': `dlq:purge:${d.id}`, text: 'Purge' });
      replay.onclick = () => dlqAction(true, { id: d.id }, `Replay dead letter #${d.id} (${d.msg_type} to ${d.receiver})?`);
      purge.onclick = () => dlqAction(false, { id: d.id }, `Delete dead letter #${d.id} (${d.msg_type} to ${d.receiver}) for good?`);
      const tr = el('tr', { 'data-receiver': d.receiver },
        el('td', { text: String(d.id) }), el('td', { class: 'text', text: d.receiver }), el('td', { class: 'text', text: d.msg_type }),
        el('td', { 'data-cell': `dlq:${d.id}:attempts` }), el('td', { text: d.reason }),
        el('td', { class: 'text', text: d.last_error ?? '–' }), el('td', { 'data-cell': `dlq:${d.id}:age` }),
        el('td', { class: 'actions' }, replay, purge));
      return tr;
    },
    (tr, d) => {
      setText(tr, `dlq:${d.id}:attempts`, String(d.attempts));
      setText(tr, `dlq:${d.id}:age`, fmtMs(d.age_ms));
    },
  );
  const all = !filter;
  cell(dlqRoot(), 'dlq:replay-all').textContent = all ? 'Replay all' : `Replay all for ${filter}`;
  cell(dlqRoot(), 'dlq:purge-all').textContent = all ? 'Purge all' : `Purge all for ${filter}`;
  cell(dlqRoot(), 'dlq:replay-all').disabled = dlqItems.length === 0;
  cell(dlqRoot(), 'dlq:purge-all').disabled = dlqItems.length === 0;
}

async function dlqAction(replay, selector, question) {
  if (!window.confirm(question)) return;
  try {
    const j = await adminPost(replay ? '/admin/dlq/replay' : '/admin/dlq/purge', selector);
    dlqStatus(replay ? `replayed ${j.replayed}` : `purged ${j.purged}`);
  } catch (e) {
    dlqStatus(`failed: ${e.message}`);
  }
  await loadDlq().catch(() => {});
}

function bulk(replay) {
  const filter = cell(dlqRoot(), 'dlq:filter').value.trim();
  const sel = filter ? { receiver: filter } : { all: true };
  const what = filter ? `every dead letter of ${filter}` : 'every dead letter';
  dlqAction(replay, sel, replay ? `Replay ${what}?` : `Delete ${what} for good?`);
}

async function pollDlq() {
  try {
    await loadDlq();
  } catch (e) {
    dlqStatus(`failed: ${e.message}`);
  }
  setTimeout(pollDlq, DLQ_POLL_MS);
}

// ---------- reminders ----------

const remRoot = () => document.getElementById('reminders');

function remStatus(text) {
  setText(remRoot(), 'rem:status', text);
}

async function loadReminders() {
  const filter = cell(remRoot(), 'rem:filter').value.trim();
  const q = new URLSearchParams({ limit: String(DLQ_LIMIT) });
  if (filter) q.set('receiver', filter);
  const r = await fetch(`/admin/reminders?${q}`, { cache: 'no-store' });
  const j = await r.json().catch(() => ({}));
  const tbody = remRoot().querySelector('tbody');
  if (!r.ok) {
    setText(remRoot(), 'rem:count', '–');
    remStatus(j.message || `HTTP ${r.status}`);
    syncRows(tbody, [], () => '', () => null, () => {});
    return;
  }
  const items = j.reminders;
  setText(remRoot(), 'rem:count', items.length >= DLQ_LIMIT ? `${DLQ_LIMIT}+` : String(items.length));
  syncRows(
    tbody,
    items,
    (m) => String(m.id),
    (m) => {
      const actions = el('td', { class: 'actions' });
      // Only a named reminder can be cancelled (an anonymous one has no handle).
      if (m.name) {
        const cancel = el('button', { class: 'danger', 'data-cell': `rem:cancel:${m.id}`, text: 'Cancel' });
        cancel.onclick = () => cancelReminder(m);
        actions.append(cancel);
      }
      return el('tr', { 'data-receiver': m.receiver },
        el('td', { class: 'text', text: m.receiver }), el('td', { class: 'text', 'data-cell': `rem:${m.id}:name`, text: m.name || '(anonymous)' }),
        el('td', { class: 'text', text: m.msg_type }), el('td', { text: String(m.payload_bytes) }),
        el('td', { 'data-cell': `rem:${m.id}:due` }), el('td', { 'data-cell': `rem:${m.id}:age` }), actions);
    },
    (tr, m) => {
      setText(tr, `rem:${m.id}:due`, m.due_in_ms > 0 ? fmtMs(m.due_in_ms) : 'due now');
      setText(tr, `rem:${m.id}:age`, `${fmtMs(m.age_ms)} ago`);
    },
  );
}

async function cancelReminder(m) {
  if (!window.confirm(`Cancel reminder "${m.name}" of ${m.receiver} (${m.msg_type})?`)) return;
  try {
    const j = await adminPost('/admin/reminders/cancel', { receiver: m.receiver, name: m.name });
    remStatus(j.cancelled ? `cancelled ${m.name}` : `${m.name} was no longer pending`);
  } catch (e) {
    remStatus(`failed: ${e.message}`);
  }
  await loadReminders().catch(() => {});
}

async function pollReminders() {
  try {
    await loadReminders();
  } catch (e) {
    remStatus(`failed: ${e.message}`);
  }
  setTimeout(pollReminders, DLQ_POLL_MS);
}

// ---------- start ----------

document.addEventListener('DOMContentLoaded', () => {
  cell(dlqRoot(), 'dlq:replay-all').onclick = () => bulk(true);
  cell(dlqRoot(), 'dlq:purge-all').onclick = () => bulk(false);
  cell(dlqRoot(), 'dlq:filter').addEventListener('change', () => loadDlq().catch(() => {}));
  cell(remRoot(), 'rem:filter').addEventListener('change', () => loadReminders().catch(() => {}));
  loadHistory()
    .catch((e) => setConn('down', e.message))
    .finally(connect);
  pollDlq();
  pollReminders();
});
