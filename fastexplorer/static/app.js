/* fastexplorer page: plain JavaScript, no library, no build step.
   Server mode reads the read-only JSON API (relative URLs) and follows a run live over Server-Sent Events;
   report mode (window.FASTEXPLORER_DATA set before this script) reads everything from that object.
   The same file also runs as a dedicated worker that fetches and digests epoch files off the main thread. */
(function () {
'use strict';

/* One epoch document, reduced to what the page draws: stats by module/parameter path; the tree itself is dropped.
   `lazy` (in the worker) keeps each node's stats as a JSON string, parsed by the page only when it needs them:
   strings cross to the page far faster than thousands of small objects. */
function digestEpoch(doc, lazy) {
  const stats = new Map(), custom = new Set();
  const walk = (n) => {
    if (!n || typeof n !== 'object') return;
    const x = n.xtra;
    if (x && x.stats && typeof n.path === 'string' && !stats.has(n.path)) stats.set(n.path, lazy ? JSON.stringify(x.stats) : x.stats);
    if (x && x.stats && typeof x.stats === 'object') for (const k of Object.keys(x.stats)) {
      if (k.startsWith('custom_') && x.stats[k] && typeof x.stats[k] === 'object') for (const nm of Object.keys(x.stats[k])) custom.add(k.replace('custom_valid_', 'custom_') + '|' + nm);
    }
    if (Array.isArray(n.nodes)) for (const c of n.nodes) walk(c);
  };
  walk(doc.tree);
  return {
    epoch: doc.epoch, partial: !!doc.partial, fit: doc.fit, sampled: doc.sampled || null,
    recorder: (doc.recorder && typeof doc.recorder === 'object') ? doc.recorder : {},
    alerts: Array.isArray(doc.alerts) ? doc.alerts : [],
    heatmaps: (doc.heatmaps && typeof doc.heatmaps === 'object') ? doc.heatmaps : null,
    amp: (doc.amp && typeof doc.amp === 'object') ? doc.amp : null, ranks: Number.isFinite(doc.ranks) ? doc.ranks : null,
    hist: doc.hist || null, stats, custom: Array.from(custom),
  };
}

if (typeof document === 'undefined') {
  /* Worker: {id, op: 'epoch'|'probe', url} -> {id, status, ep|text}. Reading and parsing big files here keeps the
     page responsive; and a 404 fetched here (landscape.json is optional) is not logged to the page's console. */
  self.onmessage = async (e) => {
    const { id, op, url } = e.data || {};
    let status = 0, text = null, ep = null;
    try {
      const r = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
      status = r.status;
      if (r.ok) {
        if (op === 'epoch') ep = digestEpoch(await r.json(), true);
        else text = await r.text();
      }
    } catch (err) { if (status === 200) status = -1; }
    self.postMessage({ id, status, text, ep });
  };
  return;
}


// ---------------------------------------------------------------- utilities
const DATA = (typeof window.FASTEXPLORER_DATA !== 'undefined' && window.FASTEXPLORER_DATA) ? window.FASTEXPLORER_DATA : null;
const REPORT = DATA !== null;
const SCRIPT_SRC = (document.currentScript && document.currentScript.src) || '';
const QS = new URLSearchParams(location.search);
const $ = (sel) => document.querySelector(sel);
const fin = (v) => typeof v === 'number' && isFinite(v);
const enc = encodeURIComponent;
const PALETTE = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#dc2626', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];
const C_TRAIN = '#2563eb', C_VALID = '#ea580c';

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  if (attrs) for (const k in attrs) {
    const v = attrs[k];
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'html') e.innerHTML = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) if (k != null && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}
function fmt(v, digits = 3) {
  if (v === null || v === undefined) return '–';
  if (typeof v !== 'number') return String(v);
  if (!isFinite(v)) return String(v);
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(digits - 1).replace(/\.?0+e/, 'e');
  if (Number.isInteger(v)) return String(v);
  return String(parseFloat(v.toPrecision(digits)));
}
function fmtCount(n) {
  if (!fin(n)) return '';
  if (n >= 1e9) return (n / 1e9).toFixed(1).replace(/\.0$/, '') + 'B';
  if (n >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, '') + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(1).replace(/\.0$/, '') + 'K';
  return n.toLocaleString('en-US');
}
function fmtShape(s) {
  if (s == null) return '';
  if (Array.isArray(s)) {
    if (s.length && s.every((x) => Array.isArray(x) || x === null)) return s.map(fmtShape).join(', ');
    return '[' + s.join('×') + ']';
  }
  if (typeof s === 'object') return JSON.stringify(s);
  return String(s);
}
function b64bytes(s) {
  try {
    const bin = atob(s || '');
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch (e) { return new Uint8Array(0); }
}
function hexRgb(hx) { const n = parseInt(hx.slice(1), 16); return [(n >> 16) & 255, (n >> 8) & 255, n & 255]; }
function makeLut(stops) {
  const cs = stops.map(hexRgb), lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255 * (cs.length - 1), k = Math.min(cs.length - 2, Math.floor(t)), f = t - k;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(cs[k][c] + (cs[k + 1][c] - cs[k][c]) * f);
  }
  return lut;
}
const VIRIDIS = makeLut(['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89', '#35b779', '#6ece58', '#b5de2b', '#fde725']);
const MAGMA = makeLut(['#000004', '#180f3d', '#440f76', '#721f81', '#9e2f7f', '#cd4071', '#f1605d', '#fd9668', '#feca8d', '#fcfdbf']);
const HEAT = makeLut(['#fff7bc', '#fee391', '#fec44f', '#fe9929', '#f47a1f', '#e4541a', '#d7301f']);
function lutCss(lut, t) {
  const i = Math.max(0, Math.min(255, Math.round((fin(t) ? t : 0) * 255))) * 3;
  return `rgb(${lut[i]},${lut[i + 1]},${lut[i + 2]})`;
}
function lutGradient(lut) {
  const st = [];
  for (let k = 0; k <= 8; k++) st.push(lutCss(lut, k / 8));
  return `linear-gradient(to right, ${st.join(',')})`;
}

// ---------------------------------------------------------------- state
const S = {
  runs: [],          // [{id, model, status, epochs, updated}]
  run: null,         // the shown run
  cmp: null,         // the compared run, or null
  tree: null,        // {nodes, byPath, root}
  selected: null,    // a tree node
  epochSel: null,    // selected epoch number (null: latest)
  overlay: 'none',
  ovValues: null,    // per node id: overlay value in the selected epoch
  ovScale: null,
  alertPaths: new Set(),
  searchQ: '',
};

function newRun(id) {
  return { id, meta: null, rep: null, status: null, epochs: new Map(), landscape: null, shared: new Map(),
           inflight: new Set(), es: null, landscapeTried: false };
}
function epochNumbers(run) { return run ? Array.from(run.epochs.keys()).sort((a, b) => a - b) : []; }

function sharedMap(rep) {
  const m = new Map();
  const walk = (n) => {
    if (!n || typeof n !== 'object') return;
    if (n.xtra && typeof n.xtra.shared_with === 'string' && typeof n.path === 'string') m.set(n.path, n.xtra.shared_with);
    if (Array.isArray(n.nodes)) for (const c of n.nodes) walk(c);
  };
  walk(rep);
  return m;
}
function statsOf(ep, path) {
  let s = ep.stats.get(path);
  if (typeof s === 'string') {
    try { s = JSON.parse(s); } catch (e) { s = null; }
    ep.stats.set(path, s);
  }
  return s || null;
}
function statsAt(run, ep, path) {
  if (!run || !ep || path == null) return null;
  let s = statsOf(ep, path);
  if (!s) { const sw = run.shared.get(path); if (sw != null) s = statsOf(ep, sw); }
  return s;
}

// ---------------------------------------------------------------- network
function apiUrl(id, rest) { return `api/runs/${enc(id)}/${rest}`; }
async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}
/* The worker (this same script, which the server's CSP allows as a worker source). */
let worker = null, workerSeq = 0, workerDead = !SCRIPT_SRC || REPORT || typeof Worker === 'undefined';
const workerWaiting = new Map();
function workerFail() {
  workerDead = true;
  if (worker) { try { worker.terminate(); } catch (e) { /* gone */ } }
  worker = null;
  for (const f of workerWaiting.values()) f({ status: -2, text: null, ep: null });
  workerWaiting.clear();
}
function startWorker() {
  if (worker || workerDead) return;
  try {
    worker = new Worker(SCRIPT_SRC);
    worker.onmessage = (e) => {
      const d = e.data || {}, f = workerWaiting.get(d.id);
      if (f) { workerWaiting.delete(d.id); f(d); }
    };
    worker.onerror = (e) => { if (e && e.preventDefault) e.preventDefault(); workerFail(); };
  } catch (e) { workerFail(); }
}
function workerCall(op, url) {
  return new Promise((resolve) => {
    startWorker();
    if (workerDead) { resolve({ status: -2, text: null, ep: null }); return; }
    try {
      const id = ++workerSeq;
      workerWaiting.set(id, resolve);
      worker.postMessage({ id, op, url: new URL(url, document.baseURI).href });
    } catch (e) { workerFail(); resolve({ status: -2, text: null, ep: null }); }
  });
}
/* Fetch an optional file without a console error on 404 (only through the worker). */
async function silentFetch(url) { return workerCall('probe', url); }
/* An epoch, digested; through the worker when there is one, else here. */
async function fetchEpoch(run, n) {
  const url = apiUrl(run.id, `epochs/${n}`);
  const r = await workerCall('epoch', url);
  let ep;
  if (r.status === -2) ep = digestEpoch(await getJSON(url));
  else if (r.ep) ep = r.ep;
  else throw new Error(`${url}: HTTP ${r.status}`);
  if (!fin(ep.epoch)) ep.epoch = n;
  return ep;
}

function showMessage(text, kind) {
  const m = $('#message');
  m.textContent = text; m.className = 'message ' + (kind || ''); m.hidden = !text;
}

// ---------------------------------------------------------------- loading (server mode)
async function startServer() {
  startWorker();
  const wanted = QS.get('run'), cmpId = QS.get('compare');
  const runsP = getJSON('api/runs').then((d) => (d && Array.isArray(d.runs)) ? d.runs : []).catch(() => null);
  let id = wanted;
  if (id == null || id === '') {
    const runs = await runsP;
    if (runs === null) { fatal('Cannot reach the fastexplorer server (api/runs).'); return; }
    if (!runs.length) { fatal('No runs here yet: a run folder appears once ExplorerCallback has written run.json.'); return; }
    id = runs[0].id;
  }
  const run = newRun(id);
  try {
    const [meta, rep] = await Promise.all([getJSON(apiUrl(id, 'run.json')), getJSON(apiUrl(id, 'representation.json'))]);
    run.meta = meta; run.rep = rep; run.status = meta.status; run.shared = sharedMap(rep);
  } catch (e) {
    fatal(`Cannot load run "${id}": ${e.message}`);
    runsP.then((runs) => { if (runs) { S.runs = runs; renderRunNav(); } });
    return;
  }
  S.run = run;
  initTree(run.rep);
  renderHeader();
  renderAll();
  runsP.then((runs) => { if (runs) { S.runs = runs; renderRunNav(); maybeLandscape(run); } });
  loadEpochs(run, (run.meta.epochs || []).map((e) => e.epoch), true);
  openEvents(run);
  if (cmpId && cmpId !== id) loadCompare(cmpId);
}

async function loadCompare(cid) {
  const c = newRun(cid);
  try {
    const [meta, rep] = await Promise.all([getJSON(apiUrl(cid, 'run.json')), getJSON(apiUrl(cid, 'representation.json')).catch(() => null)]);
    c.meta = meta; c.rep = rep; c.status = meta.status; c.shared = sharedMap(rep);
  } catch (e) { showMessage(`Cannot load the compared run "${cid}": ${e.message}`, 'warn'); return; }
  S.cmp = c;
  renderHeader(); scheduleRender();
  loadEpochs(c, (c.meta.epochs || []).map((e) => e.epoch), false);
  if (c.status === 'running') openEvents(c);
}

let epochUid = 0;
/* Fetch epoch documents, a few at a time; the latest first, so the default epoch's alerts and overlay show early. */
function loadEpochs(run, nums, latestFirst) {
  const todo = nums.filter((n) => fin(n) && !run.inflight.has(n));
  if (!todo.length) return;
  todo.sort((a, b) => a - b);
  if (latestFirst) todo.unshift(todo.pop());
  for (const n of todo) run.inflight.add(n);
  let i = 0;
  const pump = async () => {
    while (i < todo.length) {
      const n = todo[i++];
      try {
        const ep = await fetchEpoch(run, n);
        run.inflight.delete(n);
        ep.uid = ++epochUid;
        run.epochs.set(n, ep);
        onEpochArrived(run);
      } catch (e) { run.inflight.delete(n); /* gone or mid-write: the next update event retries */ }
    }
  };
  // a few requests at a time: the worker parses them off the page's thread, and the page stays responsive
  const k = Math.min(2, todo.length);
  for (let w = 0; w < k; w++) pump();
}

function onEpochArrived(run) {
  // epochs that trickle in (live) show at once; a bulk load redraws a few times a second
  if ((S.run && S.run.inflight.size) || (S.cmp && S.cmp.inflight.size)) { scheduleRender(); return; }
  if (renderTimer !== null) { clearTimeout(renderTimer); renderTimer = null; }
  renderAll();
}

function openEvents(run) {
  if (REPORT || typeof EventSource === 'undefined' || run.es) return;
  let es;
  try { es = new EventSource(apiUrl(run.id, 'events')); } catch (e) { return; }
  run.es = es;
  const handler = (e) => {
    let d = null;
    try { d = JSON.parse(e.data); } catch (err) { d = null; }
    onUpdate(run, d);
  };
  es.addEventListener('update', handler);
  es.onmessage = handler;
}

async function onUpdate(run, d) {
  if (d && typeof d.status === 'string' && d.status !== run.status) {
    run.status = d.status;
    renderHeader();
    if (d.status !== 'running') maybeLandscape(run, true);
  }
  if (d && Array.isArray(d.epochs)) {
    const missing = d.epochs.filter((n) => !run.epochs.has(n));
    if (missing.length) loadEpochs(run, missing, false);
  }
  // the manifest says which epochs were rewritten (a partial epoch completed)
  try {
    const meta = await getJSON(apiUrl(run.id, 'run.json'));
    run.meta = meta;
    if (typeof meta.status === 'string' && meta.status !== run.status) { run.status = meta.status; renderHeader(); }
    const redo = [];
    for (const e of meta.epochs || []) {
      const have = run.epochs.get(e.epoch);
      if (!have) redo.push(e.epoch);
      else if (have.partial && !e.partial) redo.push(e.epoch);
    }
    if (redo.length) loadEpochs(run, redo, false);
    renderHeader();
  } catch (e) { /* the next event will tell */ }
}

async function maybeLandscape(run, retry) {
  if (REPORT || run.landscape) return;
  if (run.landscapeTried && !retry) return;
  run.landscapeTried = true;
  const entry = S.runs.find((r) => r.id === run.id);
  let hint;
  if (entry && 'landscape' in entry) hint = entry.landscape;
  else if (run.meta && 'landscape' in run.meta) hint = run.meta.landscape;
  if (hint !== undefined && !hint) return;
  let doc = null;
  const url = apiUrl(run.id, 'landscape.json');
  if (hint) { try { doc = await getJSON(url); } catch (e) { doc = null; } }
  else {
    const r = await silentFetch(url);
    if (r.status === 200 && r.text) { try { doc = JSON.parse(r.text); } catch (e) { doc = null; } }
  }
  if (doc && typeof doc === 'object' && Array.isArray(doc.loss)) { run.landscape = doc; if (run === S.run) renderLandscape(); }
}

// ---------------------------------------------------------------- loading (report mode)
function startReport() {
  const runs = Array.isArray(DATA.runs) ? DATA.runs : [];
  S.runs = runs.map((r) => ({ id: r.id, model: r.meta && r.meta.model, status: r.meta && r.meta.status,
                              epochs: Array.isArray(r.epochs) ? r.epochs.length : 0, updated: r.meta && r.meta.updated }));
  if (!runs.length) { fatal('This report holds no run.'); return; }
  const wanted = QS.get('run'), cmpId = QS.get('compare');
  const find = (id) => runs.find((r) => String(r.id) === id);
  const mk = (r) => {
    const run = newRun(String(r.id));
    run.meta = r.meta || {}; run.rep = r.representation || null; run.status = run.meta.status || null;
    run.shared = sharedMap(run.rep);
    for (const doc of (Array.isArray(r.epochs) ? r.epochs : [])) {
      if (!doc || typeof doc !== 'object') continue;
      const ep = digestEpoch(doc);
      if (fin(ep.epoch)) run.epochs.set(ep.epoch, ep);
    }
    run.landscape = (r.landscape && Array.isArray(r.landscape.loss)) ? r.landscape : null;
    return run;
  };
  const main = (wanted != null && find(wanted)) || runs[0];
  S.run = mk(main);
  const c = (cmpId != null && cmpId !== String(main.id)) ? find(cmpId) : null;
  S.cmp = c ? mk(c) : null;
  initTree(S.run.rep || { name: 'Learner', type: 'Learner', index: 0, nodes: [] });
  renderHeader();
  renderRunNav();
  renderAll();
  renderLandscape();
}

function fatal(text) {
  showMessage(text, 'error');
  $('#tree').replaceChildren(h('div', { class: 'note', text: 'Nothing to show.' }));
  $('#curves').replaceChildren();
  $('#status').textContent = 'error';
}

// ---------------------------------------------------------------- header, run list, compare
function renderHeader() {
  const run = S.run;
  if (!run) return;
  const model = (run.meta && run.meta.model) || (S.tree && S.tree.model && S.tree.model.cls) || '';
  $('#model').textContent = model;
  $('#run-id').textContent = run.id === '.' ? '' : run.id;
  $('#run-id').hidden = run.id === '.';
  const st = $('#status');
  st.textContent = run.status || 'unknown';
  st.className = 'status st-' + (run.status || 'unknown');
  if (run.meta && run.meta.error) st.title = String(run.meta.error);
  else if (run.meta && run.meta.versions) st.title = Object.entries(run.meta.versions).map(([k, v]) => `${k} ${v}`).join(', ');
  $('#epoch-count').textContent = String(run.epochs.size);
  $('#node-count').textContent = String(S.tree ? S.tree.nodes.length : 0);
  document.title = `${model || 'fastexplorer'}${run.id && run.id !== '.' ? ' · ' + run.id : ''} · fastexplorer`;
  const ci = $('#compare-info');
  if (S.cmp) {
    ci.hidden = false;
    ci.replaceChildren(h('span', { class: 'dash-key' }), ` vs ${S.cmp.id} `,
      h('span', { class: 'muted', text: `(${(S.cmp.meta && S.cmp.meta.model) || ''}, ${S.cmp.status || ''}, ${S.cmp.epochs.size} epochs)` }));
  } else ci.hidden = true;
}

function runHref(id, cmp) { return `?run=${enc(id)}` + (cmp ? `&compare=${enc(cmp)}` : ''); }

function renderRunNav() {
  const nav = $('#run-nav');
  nav.replaceChildren();
  if (!S.run || S.runs.length < 2) return;
  const list = h('nav', { id: 'runs', class: 'runs', 'aria-label': 'runs' });
  for (const r of S.runs) {
    const a = h('a', { href: runHref(r.id), class: 'run-link' + (r.id === S.run.id ? ' current' : ''),
                       title: `${r.model || ''} · ${r.status || ''} · ${r.epochs ?? '?'} epochs${r.updated ? ' · ' + r.updated : ''}` },
      h('span', { class: 'dot st-' + (r.status || 'unknown') }), r.id === '.' ? '(this folder)' : r.id);
    list.append(a);
  }
  const sel = h('select', { id: 'compare', title: 'compare with another run' });
  sel.append(h('option', { value: '', text: 'compare with…' }));
  for (const r of S.runs) if (r.id !== S.run.id) sel.append(h('option', { value: r.id, text: r.id }));
  sel.value = S.cmp ? S.cmp.id : (QS.get('compare') || '');
  sel.addEventListener('change', () => { location.search = runHref(S.run.id, sel.value); });
  nav.append(list, h('label', { class: 'compare-label' }, sel));
}

// ---------------------------------------------------------------- tree
function initTree(rep) {
  const nodes = [], byPath = new Map();
  let model = null;
  const add = (n, parent, depth) => {
    const x = (n && n.xtra && typeof n.xtra === 'object') ? n.xtra : {};
    const node = { id: nodes.length, name: String(n.name ?? ''), type: String(n.type || 'Module'),
                   path: typeof n.path === 'string' ? n.path : null, xtra: x, parent, depth, children: [],
                   el: null, row: null, kidsEl: null, open: false, match: false, ovColor: '', ovText: '', ovTip: '' };
    node.cls = String(x.class || node.type);
    nodes.push(node);
    if (node.path !== null && !byPath.has(node.path)) byPath.set(node.path, node);
    if (!model && node.path === '') model = node;
    if (Array.isArray(n.nodes)) for (const c of n.nodes) if (c && typeof c === 'object') node.children.push(add(c, node, depth + 1));
    return node;
  };
  const root = add(rep, null, 0);
  S.tree = { nodes, byPath, root, model };
  // open: the Learner, the model and its first two levels (so a digits CNN shows down to its parameters)
  const md = model ? model.depth : 1;
  for (const n of nodes) if (n.children.length && n.depth <= md + 2 && n.type !== 'Parameter') n.open = true;
  const tree = $('#tree');
  tree.replaceChildren(makeNodeEl(root));
}

function makeNodeEl(node) {
  const x = node.xtra;
  const el = h('div', { class: 'node t-' + node.type.toLowerCase(), role: 'treeitem', dataset: { path: node.path ?? '', type: node.type, id: String(node.id) } });
  const row = h('div', { class: 'row' });
  row.style.paddingLeft = (6 + node.depth * 14) + 'px';
  const tog = h('span', { class: 'toggle' + (node.children.length ? '' : ' leaf'), text: node.children.length ? (node.open ? '▾' : '▸') : '' });
  const label = h('span', { class: 'label', tabindex: '0' }, h('span', { class: 'name', text: node.name }));
  if (node.type !== 'Parameter' && node.cls !== node.name) label.append(h('span', { class: 'cls', text: node.cls }));
  const info = h('span', { class: 'info' });
  const shape = fmtShape(x.shape);
  if (shape) info.append(h('span', { class: 'shape', text: (node.type === 'Parameter' ? '' : '→ ') + shape, title: node.type === 'Parameter' ? 'parameter shape' : 'output shape' }));
  if (fin(x.params) && x.params > 0 && node.type !== 'Parameter') info.append(h('span', { class: 'params', text: fmtCount(x.params), title: `${x.params.toLocaleString('en-US')} parameters` }));
  if (fin(x.trainable) && fin(x.params) && x.trainable !== x.params) info.append(h('span', { class: 'frozen', text: `${fmtCount(x.trainable)} trainable`, title: `${x.trainable.toLocaleString('en-US')} of ${x.params.toLocaleString('en-US')} parameters are trainable` }));
  if (node.type === 'Parameter' && x.requires_grad === false) info.append(h('span', { class: 'frozen', text: 'frozen', title: 'requires_grad is False' }));
  if (fin(x.calls) && x.calls > 1) info.append(h('span', { class: 'calls', text: `×${x.calls}`, title: `called ${x.calls} times per forward pass` }));
  if (typeof x.shared_with === 'string') info.append(h('span', { class: 'shared', text: `= ${x.shared_with || '(model)'}`, title: `shared with ${x.shared_with}` }));
  if (typeof x.depth_idx === 'string') info.append(h('span', { class: 'didx', text: x.depth_idx, title: `depth-idx label ${x.depth_idx} (torchinfo, scio): select this layer with '${x.depth_idx}'` }));
  const ov = h('span', { class: 'ov' });
  row.append(tog, label, info, ov);
  row.title = (node.path != null ? (node.path === '' ? '(model)' : node.path) : node.name) + ' · ' + node.cls + (x.dtype ? ' · ' + x.dtype : '');
  el.append(row);
  node.el = el; node.row = row; node.ovEl = ov; node.togEl = tog;
  decorate(node);
  if (node.open && node.children.length) renderKids(node);
  return el;
}

function renderKids(node) {
  if (!node.kidsEl) {
    node.kidsEl = h('div', { class: 'kids', role: 'group' });
    const frag = document.createDocumentFragment();
    for (const c of node.children) frag.append(makeNodeEl(c));
    node.kidsEl.append(frag);
    node.el.append(node.kidsEl);
  }
  node.kidsEl.hidden = !node.open;
}
function setOpen(node, open) {
  if (!node.children.length) return;
  node.open = open;
  if (node.togEl) node.togEl.textContent = open ? '▾' : '▸';
  if (node.el) {
    if (open) renderKids(node);
    else if (node.kidsEl) node.kidsEl.hidden = true;
  }
}
function reveal(node) {
  const chain = [];
  for (let p = node.parent; p; p = p.parent) chain.push(p);
  for (let i = chain.length - 1; i >= 0; i--) if (!chain[i].open || !chain[i].kidsEl) setOpen(chain[i], true);
}

function setClass(el, cls, on) { if (el.classList.contains(cls) !== on) el.classList.toggle(cls, on); }
function decorate(node) {
  const row = node.row;
  if (!row) return;
  setClass(node.el, 'selected', S.selected === node);
  setClass(node.el, 'match', node.match);
  setClass(node.el, 'has-alert', node.path != null && S.alertPaths.has(node.path));
  const v = S.ovValues ? S.ovValues[node.id] : null;
  let color = '', text = '', tip = '';
  if (S.overlay !== 'none' && v != null && S.ovScale && !(OVERLAYS[S.overlay].binary && !(v > 0))) { color = lutCss(HEAT, S.ovScale(v)); text = fmt(v, 2); tip = `${S.overlay} = ${v}`; }
  if (node.ovColor !== color) {
    node.ovColor = color;
    if (color) row.style.setProperty('--ov', color); else row.style.removeProperty('--ov');
    setClass(row, 'ov-on', !!color);
  }
  if (node.ovText !== text) { node.ovText = text; node.ovEl.textContent = text; }
  if (node.ovTip !== tip) { node.ovTip = tip; if (tip) node.ovEl.title = tip; else node.ovEl.removeAttribute('title'); }
}
function decorateAll() { if (S.tree) for (const n of S.tree.nodes) if (n.row) decorate(n); }

function selectNode(node, scroll) {
  if (!node) return;
  const prev = S.selected;
  S.selected = node;
  if (prev && prev.el) prev.el.classList.remove('selected');
  reveal(node);
  if (node.el) {
    node.el.classList.add('selected');
    if (scroll) scrollTreeTo(node, true);
  }
  renderPanel();
  renderHeatmaps();
}
/* Scroll the tree pane (only it, never the page) so that the node's row shows. */
function scrollTreeTo(node, center) {
  const tree = $('#tree');
  if (!node.row) return;
  const r = node.row.getBoundingClientRect(), t = tree.getBoundingClientRect();
  if (r.top >= t.top && r.bottom <= t.bottom && !center) return;
  if (r.top >= t.top + 20 && r.bottom <= t.bottom - 20) return;
  tree.scrollTop += center ? (r.top - t.top) - (t.height - r.height) / 2 : (r.top < t.top ? r.top - t.top : r.bottom - t.bottom);
}
function selectPath(path, scroll) {
  if (!S.tree) return;
  const node = S.tree.byPath.get(path);
  if (node) selectNode(node, scroll);
}

function onTreeClick(e) {
  const nodeEl = e.target.closest('.node');
  if (!nodeEl || !S.tree) return;
  const node = S.tree.nodes[+nodeEl.dataset.id];
  if (!node) return;
  if (e.target.closest('.toggle')) { setOpen(node, !node.open); return; }
  if (e.target.closest('.label') || e.target.closest('.row')) selectNode(node, false);
}
function onTreeDblClick(e) {
  const nodeEl = e.target.closest('.node');
  if (!nodeEl || !S.tree || e.target.closest('.toggle')) return;
  const node = S.tree.nodes[+nodeEl.dataset.id];
  if (node) setOpen(node, !node.open);
}
function onTreeKey(e) {
  const lab = e.target.closest('.label');
  if (!lab || !S.tree) return;
  const node = S.tree.nodes[+lab.closest('.node').dataset.id];
  if (!node) return;
  if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); selectNode(node, false); }
  else if (e.key === 'ArrowRight') { e.preventDefault(); setOpen(node, true); }
  else if (e.key === 'ArrowLeft') { e.preventDefault(); setOpen(node, false); }
}

function runSearch() {
  if (!S.tree) return;
  const q = $('#search').value.trim().toLowerCase();
  S.searchQ = q;
  let count = 0, first = null;
  for (const n of S.tree.nodes) {
    const m = q !== '' && ((n.path != null && n.path.toLowerCase().includes(q)) || n.cls.toLowerCase().includes(q));
    if (m) { count++; if (!first) first = n; reveal(n); }
    if (m !== n.match) { n.match = m; if (n.el) n.el.classList.toggle('match', m); }
  }
  $('#search-count').textContent = q ? `${count} match${count === 1 ? '' : 'es'}` : '';
  if (first && first.row) scrollTreeTo(first, false);
}

// ---------------------------------------------------------------- epoch selection and overlay
function selectedEpoch() {
  const nums = epochNumbers(S.run);
  if (!nums.length) return null;
  if (S.epochSel != null && S.run.epochs.has(S.epochSel)) return S.epochSel;
  return nums[nums.length - 1];
}
function renderSlider() {
  const nums = epochNumbers(S.run), sl = $('#epoch'), lab = $('#epoch-label');
  if (!nums.length) { sl.min = '0'; sl.max = '0'; sl.value = '0'; sl.disabled = true; lab.textContent = 'no epochs'; return; }
  const e = selectedEpoch();
  sl.min = String(nums[0]); sl.max = String(nums[nums.length - 1]);
  sl.disabled = nums.length < 2;
  sl.value = String(e);
  const ep = S.run.epochs.get(e);
  lab.textContent = `epoch ${e}${ep && ep.partial ? ' (partial)' : ''}`;
}
function onSlider() {
  const v = +$('#epoch').value, nums = epochNumbers(S.run);
  if (!nums.length) return;
  // nearest loaded epoch
  let best = nums[0];
  for (const n of nums) if (Math.abs(n - v) < Math.abs(best - v)) best = n;
  S.epochSel = best === nums[nums.length - 1] ? null : best;   // the last one follows new epochs
  renderEpochViews();
}

const OVERLAYS = {
  dead_frac: { desc: 'fraction of dead units (never positive), training activations', fixed: [0, 1] },
  grad_norm: { desc: 'gradient norm (module: max over its parameters)', log: true },
  update_ratio: { desc: 'weight update / weight norm (module: max over its parameters)', log: true },
  nonfinite: { desc: 'NaN/Inf counts in activations and gradients', binary: true },
};
/* Custom statistics (`CustomStat`) found in the loaded epochs become overlays too: training values, epoch means, linear
   scale; a module shows the max over its parameters for weight and gradient statistics. */
function syncCustomOverlays() {
  const sel = $('#overlay');
  for (const ep of (S.run ? S.run.epochs.values() : [])) for (const key of (ep.custom || [])) {
    const id = 'custom:' + key;
    if (OVERLAYS[id]) continue;
    const [k, nm] = [key.slice(0, key.indexOf('|')), key.slice(key.indexOf('|') + 1)], on = k.slice('custom_'.length);
    const what = { out: 'outputs', in: 'inputs', weight: 'weights', grad: 'gradients' }[on] || on;
    OVERLAYS[id] = { desc: `custom statistic ${nm} of the ${what}` + (on === 'weight' || on === 'grad' ? ' (module: max over its parameters)' : '') + ', epoch mean', linear: true, custom: [k, nm] };
    sel.append(h('option', { value: id, text: `${nm} (${on})` }));
  }
}
function paramChildren(node) { return node.children.filter((c) => c.type === 'Parameter'); }
function overlayValue(node, ep, kind) {
  if (node.path == null) return null;
  const run = S.run;
  const paramVal = (p, f) => { const s = statsAt(run, ep, p.path); return s ? f(s) : null; };
  const maxOver = (f) => {
    if (node.type === 'Parameter') return paramVal(node, f);
    let best = null;
    for (const p of paramChildren(node)) { const v = paramVal(p, f); if (fin(v) && (best === null || v > best)) best = v; }
    return best;
  };
  if (kind === 'dead_frac') {
    const s = statsAt(run, ep, node.path);
    const a = s && (s.act || s.valid_act);
    return a && fin(a.dead_frac) ? a.dead_frac : null;
  }
  const cu = OVERLAYS[kind] && OVERLAYS[kind].custom;
  if (cu) {
    const [k, nm] = cu, pick = (s) => (s[k] && s[k][nm] && fin(s[k][nm].mean)) ? s[k][nm].mean : null;
    if (k === 'custom_weight' || k === 'custom_grad') return maxOver(pick);
    const s = statsAt(run, ep, node.path);
    return s ? pick(s) : null;
  }
  if (kind === 'grad_norm') return maxOver((s) => (s.grad && fin(s.grad.norm)) ? s.grad.norm : null);
  if (kind === 'update_ratio') return maxOver((s) => (s.weight && fin(s.weight.update_ratio)) ? s.weight.update_ratio : null);
  if (kind === 'nonfinite') {
    const s = statsAt(run, ep, node.path);
    if (!s) return null;
    let n = 0, any = false;
    for (const k of ['act', 'valid_act', 'grad']) {
      const a = s[k];
      if (a && typeof a === 'object') { any = true; n += (fin(a.nan) ? a.nan : 0) + (fin(a.inf) ? a.inf : 0); }
    }
    return any ? n : null;
  }
  return null;
}
function computeOverlay() {
  const kind = S.overlay, legend = $('#overlay-legend');
  S.ovValues = null; S.ovScale = null;
  const e = selectedEpoch();
  const ep = e != null ? S.run.epochs.get(e) : null;
  if (kind === 'none' || !OVERLAYS[kind] || !S.tree) { legend.hidden = true; legend.replaceChildren(); return; }
  const spec = OVERLAYS[kind];
  const vals = new Array(S.tree.nodes.length).fill(null);
  let lo = Infinity, hi = -Infinity, n = 0;
  if (ep) for (const node of S.tree.nodes) {
    const v = overlayValue(node, ep, kind);
    if (fin(v)) {
      vals[node.id] = v; n++;
      if (!spec.log || v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
  }
  S.ovValues = vals;
  let loL, hiL;
  if (spec.binary) { S.ovScale = (v) => (v > 0 ? 1 : 0); loL = '0'; hiL = '> 0'; }
  else if (spec.fixed) { S.ovScale = (v) => Math.max(0, Math.min(1, (v - spec.fixed[0]) / (spec.fixed[1] - spec.fixed[0]))); loL = String(spec.fixed[0]); hiL = String(spec.fixed[1]); }
  else if (lo <= hi && spec.linear) {
    S.ovScale = (v) => (hi > lo ? (v - lo) / (hi - lo) : 1);
    loL = fmt(lo, 2); hiL = fmt(hi, 2);
  } else if (lo <= hi) {
    const a = Math.log10(lo), b = Math.log10(hi);
    S.ovScale = (v) => (v > 0 ? (b > a ? (Math.log10(v) - a) / (b - a) : 1) : 0);
    loL = fmt(lo, 2); hiL = fmt(hi, 2);
  } else { S.ovScale = () => 0; loL = hiL = '–'; }
  legend.hidden = false;
  legend.replaceChildren(
    h('span', { class: 'muted', text: loL }),
    h('span', { class: 'ramp' + (spec.binary ? ' binary' : ''), style: `background:${spec.binary ? `linear-gradient(to right, ${lutCss(HEAT, 0)} 50%, ${lutCss(HEAT, 1)} 50%)` : lutGradient(HEAT)}` }),
    h('span', { class: 'muted', text: hiL + (spec.log ? ' (log)' : '') }),
    h('span', { class: 'legend-desc', text: ep ? `${spec.desc}, epoch ${e} · ${n} nodes` : 'no epoch loaded yet' }));
}

// ---------------------------------------------------------------- rendering orchestration
let renderTimer = null, renderDue = 0;
/* Coalesce redraws; while epochs stream in, redraw at most a few times a second so the page stays responsive. */
function scheduleRender() {
  const busy = (S.run && S.run.inflight.size) || (S.cmp && S.cmp.inflight.size);
  const due = performance.now() + (busy ? 350 : 30);
  if (renderTimer !== null) {
    if (due >= renderDue) return;
    clearTimeout(renderTimer);
  }
  renderDue = due;
  renderTimer = setTimeout(() => { renderTimer = null; renderAll(); }, Math.max(0, due - performance.now()));
}
function renderAll() {
  if (!S.run) return;
  renderHeader();
  renderCurves();
  renderEpochViews();
}
function renderEpochViews() {
  renderSlider();
  syncCustomOverlays();
  const e = selectedEpoch(), ep = e != null ? S.run.epochs.get(e) : null;
  S.alertPaths = new Set(ep ? ep.alerts.map((a) => String(a.layer)) : []);
  computeOverlay();
  decorateAll();
  renderAlerts();
  renderPanel();
  renderHeatmaps();
}

// ---------------------------------------------------------------- line charts (inline SVG)
function tickFmt(v, step) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const k = Math.max(0, Math.min(6, Math.floor(Math.log10(a)) - Math.floor(Math.log10(step))));
    return v.toExponential(k).replace(/\.?0+e/, 'e');
  }
  const dec = Math.max(0, Math.min(8, -Math.floor(Math.log10(step) + 1e-9)));
  return v.toFixed(dec);
}
function niceStep(range, n) {
  const raw = range / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}
/* series: [{label, color, dash, points: [[x, y|null]], band: [[x, lo, hi]]}] */
function lineChart(o) {
  const W = o.w || 340, H = o.h || 150, m = { l: 46, r: 10, t: 8, b: 20 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  let logY = o.log === true;
  const all = [];
  for (const s of o.series) {
    for (const p of s.points) if (fin(p[1])) all.push(p[1]);
    if (s.band) for (const b of s.band) { if (fin(b[1])) all.push(b[1]); if (fin(b[2])) all.push(b[2]); }
  }
  if (o.log === 'auto') {
    const pos = all.filter((v) => v > 0);
    logY = pos.length === all.length && pos.length > 1 && Math.max(...pos) / Math.min(...pos) > 50;
  }
  const ys = logY ? all.filter((v) => v > 0) : all;
  const wrap = h('div', { class: 'chart' + (o.small ? ' small' : '') });
  const head = h('div', { class: 'chart-head' }, h('span', { class: 'chart-title', text: o.title, title: o.tip || o.title }));
  const legend = h('span', { class: 'chart-legend' });
  // one key per colour; the compared run (dashed) gets a single key of its own
  const seen = new Set();
  let dashed = false;
  for (const s of o.series) {
    if (!s.points.some((p) => fin(p[1]))) continue;
    if (s.dash) dashed = true;
    if (!s.label || seen.has(s.label)) continue;
    seen.add(s.label);
    legend.append(h('span', { class: 'key' }, h('span', { class: 'swatch', style: `border-color:${s.color}` }), s.label));
  }
  if (dashed && S.cmp) legend.append(h('span', { class: 'key cmp-key', title: `dashed lines: run ${S.cmp.id}` }, h('span', { class: 'swatch dashed', style: 'border-color:#6b7280' }), S.cmp.id));
  head.append(legend);
  wrap.append(head);
  if (!ys.length) { wrap.append(h('div', { class: 'chart-empty', text: o.empty || 'no data yet' })); return wrap; }
  // x domain
  let x0 = o.x ? o.x[0] : Infinity, x1 = o.x ? o.x[1] : -Infinity;
  if (!o.x) for (const s of o.series) for (const p of s.points) { x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]); }
  const dx0 = x0, dx1 = x1;   // the epochs themselves: ticks stay within
  if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
  // y domain
  let y0 = Math.min(...ys), y1 = Math.max(...ys), ticks = [], yst = 0;
  if (logY) {
    let a = Math.floor(Math.log10(y0)), b = Math.ceil(Math.log10(y1));
    if (a === b) b = a + 1;
    y0 = Math.pow(10, a); y1 = Math.pow(10, b);
    const every = Math.ceil((b - a) / 5);
    for (let k = a; k <= b; k += every) ticks.push(Math.pow(10, k));
  } else {
    if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
    const st = niceStep(y1 - y0, 4);
    yst = st;
    y0 = Math.floor(y0 / st + 1e-9) * st; y1 = Math.ceil(y1 / st - 1e-9) * st;
    for (let v = y0; v <= y1 + st * 1e-6; v += st) ticks.push(Math.abs(v) < st * 1e-9 ? 0 : v);
  }
  const X = (x) => m.l + (x - x0) / (x1 - x0) * pw;
  const Y = logY ? (y) => m.t + ph - (Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0)) * ph
                 : (y) => m.t + ph - (y - y0) / (y1 - y0) * ph;
  const ok = (y) => fin(y) && (!logY || y > 0);
  let svg = `<svg viewBox="0 0 ${W} ${H}" class="plot" role="img" aria-label="${esc(o.title)}">`;
  for (const t of ticks) {
    const yy = Y(t).toFixed(1);
    svg += `<line class="grid" x1="${m.l}" x2="${W - m.r}" y1="${yy}" y2="${yy}"/><text class="tick" x="${m.l - 4}" y="${yy}" dy="3" text-anchor="end">${esc(logY ? fmt(t, 1) : tickFmt(t, yst))}</text>`;
  }
  const xst = Math.max(1, niceStep(x1 - x0, 6));
  const xt = [];
  for (let x = Math.ceil(dx0 / xst) * xst; x <= dx1; x += xst) if (x >= dx0) xt.push(x);
  if (Number.isInteger(dx0) && (!xt.length || xt[0] - dx0 > xst / 2)) xt.unshift(dx0);
  for (const x of xt) {
    const xx = X(x).toFixed(1);
    svg += `<line class="xtick" x1="${xx}" x2="${xx}" y1="${m.t + ph}" y2="${m.t + ph + 3}"/><text class="tick" x="${xx}" y="${H - 5}" text-anchor="middle">${x}</text>`;
  }
  svg += `<line class="axis" x1="${m.l}" x2="${W - m.r}" y1="${m.t + ph}" y2="${m.t + ph}"/>`;
  if (fin(o.marker) && o.marker >= x0 && o.marker <= x1) svg += `<line class="marker" x1="${X(o.marker).toFixed(1)}" x2="${X(o.marker).toFixed(1)}" y1="${m.t}" y2="${m.t + ph}"/>`;
  for (const s of o.series) {
    if (s.band) {
      let seg = [];
      const flush = () => {
        if (seg.length === 1) {
          const b = seg[0], xx = X(b[0]).toFixed(1);
          svg += `<line class="band-bar" x1="${xx}" x2="${xx}" y1="${Y(b[1]).toFixed(1)}" y2="${Y(b[2]).toFixed(1)}" stroke="${s.color}"/>`;
        } else if (seg.length > 1) {
          const top = seg.map((b) => `${X(b[0]).toFixed(1)},${Y(b[2]).toFixed(1)}`), bot = seg.slice().reverse().map((b) => `${X(b[0]).toFixed(1)},${Y(b[1]).toFixed(1)}`);
          svg += `<polygon class="band" points="${top.concat(bot).join(' ')}" fill="${s.color}"/>`;
        }
        seg = [];
      };
      for (const b of s.band) { if (ok(b[1]) && ok(b[2])) seg.push(b); else flush(); }
      flush();
    }
  }
  for (const s of o.series) {
    let d = '', pen = false;
    for (const p of s.points) {
      if (ok(p[1])) { d += `${pen ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`; pen = true; } else pen = false;
    }
    if (d) svg += `<path class="line" d="${d}" stroke="${s.color}"${s.dash ? ' stroke-dasharray="5 3"' : ''}${s.width ? ` stroke-width="${s.width}"` : ''}/>`;
    const pts = s.points.filter((p) => ok(p[1]));
    if (pts.length <= 80) for (const p of pts) {
      svg += `<circle class="pt${s.dash ? ' hollow' : ''}" cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="${pts.length === 1 ? 3 : 2.2}" ${s.dash ? `stroke="${s.color}"` : `fill="${s.color}"`}><title>${esc(s.label || '')} · epoch ${p[0]}: ${esc(fmt(p[1], 4))}</title></circle>`;
    }
  }
  svg += '</svg>';
  const box = h('div', { class: 'plot-box', html: svg });
  wrap.append(box);
  if (o.xlabel !== false) wrap.append(h('div', { class: 'axis-label', text: o.xlabel || 'epoch' }));
  return wrap;
}
function epochDomain() {
  let nums = epochNumbers(S.run);
  if (S.cmp) nums = nums.concat(epochNumbers(S.cmp));
  if (!nums.length) return null;
  return [Math.min(...nums), Math.max(...nums)];
}

// ---------------------------------------------------------------- training curves
function recorderKeys(runs) {
  const keys = [];
  for (const run of runs) if (run) for (const e of epochNumbers(run)) {
    const r = run.epochs.get(e).recorder;
    for (const k in r) if (fin(r[k]) && k !== 'epoch' && !keys.includes(k)) keys.push(k);
  }
  return keys;
}
function renderCurves() {
  const box = $('#curves'), run = S.run, cmp = S.cmp;
  const nums = epochNumbers(run);
  if (!nums.length && !(cmp && cmp.epochs.size)) {
    const waiting = run.meta && Array.isArray(run.meta.epochs) && run.meta.epochs.length;
    box.replaceChildren(h('div', { class: 'note', text: waiting ? 'Loading epochs…' : 'No epoch recorded yet: curves appear after the first epoch ends.' }));
    return;
  }
  const keys = recorderKeys([run, cmp]);
  const losses = keys.filter((k) => /loss$/.test(k)), lr = keys.filter((k) => k === 'lr' || k === 'lrs'),
    metrics = keys.filter((k) => !losses.includes(k) && !lr.includes(k));
  const dom = epochDomain(), marker = selectedEpoch();
  const series = (ks, colors) => {
    const out = [];
    ks.forEach((k, i) => {
      const c = colors ? colors[i % colors.length] : PALETTE[i % PALETTE.length];
      for (const [r, dash] of [[run, false], [cmp, true]]) {
        if (!r) continue;
        const pts = epochNumbers(r).map((e) => { const v = r.epochs.get(e).recorder[k]; return [e, fin(v) ? v : null]; });
        if (!pts.some((p) => fin(p[1]))) continue;
        out.push({ label: k, color: c, dash, points: pts });
      }
    });
    return out;
  };
  const charts = [];
  if (losses.length) charts.push(lineChart({ title: 'loss', series: series(losses, [C_TRAIN, C_VALID, ...PALETTE.slice(2)]), x: dom, marker, log: 'auto' }));
  metrics.forEach((k, i) => charts.push(lineChart({ title: k, series: series([k], [PALETTE[(i + 2) % PALETTE.length]]), x: dom, marker })));
  if (lr.length) charts.push(lineChart({ title: 'learning rate', series: series(lr, ['#6b7280']), x: dom, marker, small: true, h: 110, log: 'auto', tip: 'learning rate at the end of the epoch' }));
  // how the statistics were gathered: steps the mixed-precision loss scaler skipped, processes combined under DDP
  const scaled = (r, dash, c) => {
    const pts = epochNumbers(r).map((e) => { const a = r.epochs.get(e).amp; return [e, a && fin(a.skipped_steps) ? a.skipped_steps : null]; });
    return pts.some((p) => fin(p[1])) ? [{ label: 'skipped', color: c, dash, points: pts }] : [];
  };
  const skipped = [...scaled(run, false, '#b91c1c'), ...(cmp ? scaled(cmp, true, '#b91c1c') : [])];
  if (skipped.length) charts.push(lineChart({ title: 'steps skipped by the loss scaler', series: skipped, x: dom, marker, small: true, h: 110, tip: 'optimizer steps skipped for overflowing fp16 gradients, per epoch (their gradient statistics are left out)' }));
  const ranks = Math.max(0, ...nums.map((e) => run.epochs.get(e).ranks || 0));
  if (!charts.length) charts.push(h('div', { class: 'note', text: 'The Recorder logged no numeric values.' }));
  if (ranks > 1) charts.push(h('div', { class: 'note', id: 'ranks-note', text: `Statistics combined over ${ranks} processes (DistributedDataParallel).` }));
  box.replaceChildren(...charts);
}

// ---------------------------------------------------------------- alerts
const ALERT_HELP = {
  dead: 'units that were never positive', nonfinite: 'NaN or Inf values', exploding_grad: 'very large gradients',
  vanishing_grad: 'very small gradients', frozen: 'parameters that do not change',
};
function renderAlerts() {
  const box = $('#alerts'), e = selectedEpoch(), title = $('#alerts-title');
  if (e == null) { title.textContent = 'Alerts'; box.replaceChildren(h('div', { class: 'note', text: 'No epoch loaded yet.' })); return; }
  const ep = S.run.epochs.get(e);
  title.replaceChildren('Alerts ', h('span', { class: 'muted sub', text: `epoch ${e}` }));
  if (!ep.alerts.length) {
    // a hint of where the alerts are, when the selected epoch has none
    const other = epochNumbers(S.run).filter((n) => S.run.epochs.get(n).alerts.length);
    box.replaceChildren(h('div', { class: 'note ok', text: `No alert in epoch ${e}.` + (other.length ? ` Epochs with alerts: ${other.join(', ')}.` : '') }));
    return;
  }
  const items = ep.alerts.map((a) => {
    const layer = String(a.layer ?? '');
    const known = S.tree && S.tree.byPath.has(layer);
    return h('div', { class: 'alert k-' + String(a.kind || 'other'), role: 'button', tabindex: '0', dataset: { layer, kind: String(a.kind || '') },
                      title: (ALERT_HELP[a.kind] || '') + (known ? ' · click to show the layer' : '') },
      h('span', { class: 'alert-kind', text: String(a.kind || 'alert').replace('_', ' ') }),
      h('span', { class: 'alert-layer', text: layer || '(model)' }),
      h('span', { class: 'alert-msg', text: String(a.message || '') }));
  });
  box.replaceChildren(...items);
}
function onAlertClick(e) {
  const a = e.target.closest('.alert');
  if (!a) return;
  if (e.type === 'keydown' && e.key !== 'Enter' && e.key !== ' ') return;
  if (e.type === 'keydown') e.preventDefault();
  selectPath(a.dataset.layer, true);
}

// ---------------------------------------------------------------- node panel
function nodeSeries(run, path, pick, opts) {
  return epochNumbers(run).map((e) => {
    const s = statsAt(run, run.epochs.get(e), path);
    const v = s ? pick(s) : null;
    return [e, fin(v) ? v : null];
  });
}
function kv(pairs) {
  const d = h('dl', { class: 'kv' });
  for (const [k, v, tip] of pairs) {
    if (v === undefined || v === null || v === '') continue;
    d.append(h('dt', { text: k, title: tip || null }), h('dd', { text: typeof v === 'number' ? fmt(v, 4) : String(v) }));
  }
  return d;
}
function renderPanel() {
  const node = S.selected, title = $('#panel-title'), body = $('#panel-body');
  if (!node) {
    title.textContent = 'No layer selected';
    body.replaceChildren(h('div', { class: 'note', text: 'Click a layer in the tree (or an alert) to see its statistics over epochs.' }));
    return;
  }
  const run = S.run, cmp = S.cmp, x = node.xtra, path = node.path;
  const shownPath = path == null ? node.name : (path === '' ? '(model)' : path);
  title.replaceChildren(h('span', { class: 'panel-path', text: shownPath }), ' ', h('span', { class: 'cls', text: node.cls }));
  const e = selectedEpoch(), ep = e != null ? run.epochs.get(e) : null;
  const out = [];
  const info = kv([
    ['type', node.type], ['output shape', node.type === 'Parameter' ? null : fmtShape(x.shape)],
    ['shape', node.type === 'Parameter' ? fmtShape(x.shape) : null], ['dtype', x.dtype],
    ['params', fin(x.params) ? x.params.toLocaleString('en-US') : null], ['trainable', fin(x.trainable) && x.trainable !== x.params ? x.trainable.toLocaleString('en-US') : null],
    ['numel', fin(x.numel) ? x.numel.toLocaleString('en-US') : null], ['requires_grad', x.requires_grad === undefined ? null : String(x.requires_grad)],
    ['calls', fin(x.calls) && x.calls > 1 ? x.calls : null, 'times called per forward pass'], ['shared with', x.shared_with],
    ['depth-idx', typeof x.depth_idx === 'string' ? x.depth_idx : null, 'torchinfo/scio label: depth below the model - rank at that depth'],
  ]);
  out.push(info);
  if (path == null) {
    out.push(h('div', { class: 'note', text: `${node.type} is a pseudo-node: it has no statistics of its own.` }));
    body.replaceChildren(...out);
    return;
  }
  const dom = epochDomain();
  const both = [[run, false]].concat(cmp ? [[cmp, true]] : []);
  const charts = [];
  // activations
  const hasAct = both.some(([r]) => epochNumbers(r).some((n) => { const s = statsAt(r, r.epochs.get(n), path); return s && (s.act || s.valid_act); }));
  if (hasAct) {
    const mk = (pick, band, bandKey) => {
      const ser = [];
      for (const [r, dash] of both) for (const [k, c, nm] of [['act', C_TRAIN, 'train'], ['valid_act', C_VALID, 'valid']]) {
        const pts = nodeSeries(r, path, (s) => s[k] && s[k][pick]);
        if (!pts.some((p) => fin(p[1]))) continue;
        const sr = { label: nm, color: c, dash, points: pts };
        if (band && !dash) sr.band = epochNumbers(r).map((n) => {
          const s = statsAt(r, r.epochs.get(n), path), a = s && s[k];
          return (a && fin(a.mean) && fin(a.std)) ? [n, a.mean - a.std, a.mean + a.std] : [n, null, null];
        });
        ser.push(sr);
      }
      return ser;
    };
    charts.push(lineChart({ title: 'activation mean ± std', series: mk('mean', true), x: dom, marker: e, tip: 'mean of the outputs, shaded: ± one standard deviation' }));
    const mm = [];
    for (const [r, dash] of both) for (const [k, c, nm] of [['act', C_TRAIN, 'train'], ['valid_act', C_VALID, 'valid']]) {
      for (const f of ['min', 'max']) {
        const pts = nodeSeries(r, path, (s) => s[k] && s[k][f]);
        if (pts.some((p) => fin(p[1]))) mm.push({ label: nm, color: c, dash, points: pts });
      }
    }
    charts.push(lineChart({ title: 'activation min / max', series: mm, x: dom, marker: e }));
    charts.push(lineChart({ title: 'dead fraction', series: mk('dead_frac'), x: dom, marker: e, tip: 'fraction of units (channels) that were never positive' }));
    charts.push(lineChart({ title: 'near-zero fraction', series: mk('near_zero'), x: dom, marker: e, tip: 'fraction of activations close to zero' }));
    charts.push(histChart(run, path, 'hist-heatmap', run.id));
    if (cmp) charts.push(histChart(cmp, path, 'hist-heatmap-compare', cmp.id));
  }
  // parameters: the node itself, or a module's direct parameters
  const params = node.type === 'Parameter' ? [node] : paramChildren(node);
  const hasParam = params.some((p) => both.some(([r]) => epochNumbers(r).some((n) => { const s = statsAt(r, r.epochs.get(n), p.path); return s && (s.weight || s.grad); })));
  if (hasParam) {
    const mk = (k, f) => {
      const ser = [];
      params.forEach((p, i) => {
        for (const [r, dash] of both) {
          const pts = nodeSeries(r, p.path, (s) => s[k] && s[k][f]);
          if (pts.some((q) => fin(q[1]))) ser.push({ label: p.name, color: PALETTE[i % PALETTE.length], dash, points: pts });
        }
      });
      return ser;
    };
    charts.push(lineChart({ title: 'weight norm', series: mk('weight', 'norm'), x: dom, marker: e, log: 'auto' }));
    charts.push(lineChart({ title: 'update ratio', series: mk('weight', 'update_ratio'), x: dom, marker: e, log: 'auto', tip: '|Δw| / |w| per step, averaged over the epoch (about 1e-3 is typical)' }));
    charts.push(lineChart({ title: 'gradient norm', series: mk('grad', 'norm'), x: dom, marker: e, log: 'auto' }));
    charts.push(lineChart({ title: 'gradient max |g|', series: mk('grad', 'max_abs'), x: dom, marker: e, log: 'auto' }));
  }
  const cust = customCharts(node, params, both, dom, e);
  charts.push(...cust);
  const hasCustom = cust.length > 0;
  if (!hasAct && !hasParam && !hasCustom && run.epochs.size === 0 && run.inflight.size > 0) {
    // nothing loaded yet: the charts this node will most likely have, filled in as epochs arrive
    const sk = (t) => lineChart({ title: t, series: [], empty: 'loading…' });
    if (node.type !== 'Parameter') ['activation mean ± std', 'activation min / max', 'dead fraction', 'near-zero fraction'].forEach((t) => charts.push(sk(t)));
    if (params.length) ['weight norm', 'update ratio', 'gradient norm', 'gradient max |g|'].forEach((t) => charts.push(sk(t)));
    out.push(h('div', { class: 'charts' }, ...charts));
  } else if (!hasAct && !hasParam && !hasCustom) {
    const container = node.children.some((c) => c.type !== 'Parameter');
    const why = !run.epochs.size ? 'No statistics yet: no epoch has been loaded.'
      : 'No statistics were recorded for this node.' + (container ? ' It is a container: open it and pick a layer inside.' : '');
    out.push(h('div', { class: 'note no-stats', text: why }));
  } else {
    out.push(h('div', { class: 'charts' }, ...charts));
    if (ep) out.push(epochTable(node, params, ep, e));
  }
  body.replaceChildren(...out);
}
/* One chart per custom statistic of the node (outputs/inputs: train and valid) or of its parameters (weights, gradients). */
function customCharts(node, params, both, dom, e) {
  const keys = new Map();
  const look = (r, p) => {
    for (const n of epochNumbers(r)) {
      const s = statsAt(r, r.epochs.get(n), p);
      if (s) for (const k of Object.keys(s)) if (k.startsWith('custom_') && s[k] && typeof s[k] === 'object') for (const nm of Object.keys(s[k])) keys.set(k.replace('custom_valid_', 'custom_') + '|' + nm, [k.replace('custom_valid_', 'custom_'), nm]);
    }
  };
  for (const [r] of both) { if (node.path != null && node.type !== 'Parameter') look(r, node.path); for (const p of params) look(r, p.path); }
  const out = [];
  for (const [k, nm] of keys.values()) {
    const pick = (kk) => (s) => (s[kk] && s[kk][nm]) ? s[kk][nm].mean : null, on = k.slice('custom_'.length), ser = [];
    if (on === 'out' || on === 'in') {
      for (const [r, dash] of both) for (const [kk, c, lab] of [[k, C_TRAIN, 'train'], ['custom_valid_' + on, C_VALID, 'valid']]) {
        const pts = nodeSeries(r, node.path, pick(kk));
        if (pts.some((q) => fin(q[1]))) ser.push({ label: lab, color: c, dash, points: pts });
      }
    } else params.forEach((p, i) => {
      for (const [r, dash] of both) {
        const pts = nodeSeries(r, p.path, pick(k));
        if (pts.some((q) => fin(q[1]))) ser.push({ label: p.name, color: PALETTE[i % PALETTE.length], dash, points: pts });
      }
    });
    if (ser.length) out.push(lineChart({ title: `${nm} (${on})`, series: ser, x: dom, marker: e, tip: `custom statistic ${nm} of the ${on}: mean over the epoch's sampled batches` }));
  }
  return out;
}
function epochTable(node, params, ep, e) {
  const s = statsAt(S.run, ep, node.path);
  const box = h('div', { class: 'epoch-stats' }, h('h3', { text: `Epoch ${e}` }));
  const grid = h('div', { class: 'kv-grid' });
  for (const k of ['act', 'valid_act']) {
    const a = s && s[k];
    if (!a) continue;
    const du = Array.isArray(a.dead_units) && a.dead_units.length ? a.dead_units.slice(0, 40).join(', ') + (a.dead_units.length > 40 ? '…' : '') : null;
    grid.append(h('div', {}, h('h4', { text: k === 'act' ? 'activations (train)' : 'activations (valid)' }), kv([
      ['mean', a.mean], ['std', a.std], ['min', a.min], ['max', a.max], ['abs mean', a.abs_mean], ['near zero', a.near_zero],
      ['dead units', fin(a.dead) ? `${a.dead} / ${a.units ?? '?'}` : null], ['dead unit ids', du],
      ['NaN / Inf', (fin(a.nan) || fin(a.inf)) ? `${a.nan ?? 0} / ${a.inf ?? 0}` : null], ['batches', a.calls],
    ])));
  }
  for (const p of params) {
    const ps = statsAt(S.run, ep, p.path);
    if (!ps) continue;
    const w = ps.weight || {}, g = ps.grad || {};
    grid.append(h('div', {}, h('h4', { text: p === node ? 'parameter' : p.name }), kv([
      ['weight norm', w.norm], ['weight mean', w.mean], ['weight std', w.std], ['update ratio', w.update_ratio], ['update max', w.update_max],
      ['grad norm', g.norm], ['grad max |g|', g.max_abs], ['grad frac zero', g.frac_zero],
      ['grad NaN / Inf', (fin(g.nan) || fin(g.inf)) ? `${g.nan ?? 0} / ${g.inf ?? 0}` : null], ['steps', w.update_steps ?? g.steps],
    ])));
  }
  const cpairs = [];
  for (const [p, s2] of [[node, s]].concat(params.filter((p) => p !== node).map((p) => [p, statsAt(S.run, ep, p.path)]))) {
    if (s2) for (const k of Object.keys(s2)) if (k.startsWith('custom_') && s2[k] && typeof s2[k] === 'object') {
      for (const nm of Object.keys(s2[k])) cpairs.push([`${p === node ? '' : p.name + ' '}${nm} (${k.slice('custom_'.length).replace('_', ' ')})`, s2[k][nm] ? s2[k][nm].mean : null]);
    }
  }
  if (cpairs.length) grid.append(h('div', {}, h('h4', { text: 'custom statistics' }), kv(cpairs)));
  if (!grid.children.length) return h('div', { class: 'note', text: `No statistics for this node in epoch ${e}.` });
  box.append(grid);
  return box;
}

// ---------------------------------------------------------------- histogram heatmap (fastai's color_dim)
function histChart(run, path, id, label) {
  const nums = epochNumbers(run);
  const W = 340, H = 150, m = { l: 40, r: 8, t: 6, b: 18 }, dpr = 2;
  const wrap = h('div', { class: 'chart' });
  wrap.append(h('div', { class: 'chart-head' }, h('span', { class: 'chart-title', text: 'activation histogram' + (S.cmp ? ` (${label})` : ''), title: 'histogram of the training activations per epoch, colour: log(1 + count) — like fastai\'s color_dim' })));
  const cv = h('canvas', { id, class: 'hist-canvas', width: String(W * dpr), height: String(H * dpr) });
  wrap.append(cv, h('div', { class: 'axis-label', text: 'epoch →   ·   y: activation value' }));
  const ctx = cv.getContext('2d');
  if (!ctx) return wrap;
  ctx.scale(dpr, dpr);
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const cols = nums.map((n) => { const ep = run.epochs.get(n), s = statsAt(run, ep, path), a = s && s.act; return { n, hist: a && Array.isArray(a.hist) ? a.hist : null, range: (ep.hist && ep.hist.range) || (run.meta && run.meta.hist && run.meta.hist.range) || null }; });
  let mx = 0, bins = 0, range = null;
  for (const c of cols) if (c.hist) { bins = Math.max(bins, c.hist.length); for (const v of c.hist) if (fin(v)) mx = Math.max(mx, Math.log1p(v)); if (!range && Array.isArray(c.range)) range = c.range; }
  ctx.fillStyle = '#f3f4f6'; ctx.fillRect(m.l, m.t, pw, ph);
  ctx.font = '9px system-ui, sans-serif'; ctx.fillStyle = '#6b7280';
  if (!bins) { ctx.fillText('no histogram recorded', m.l + 8, m.t + ph / 2); return wrap; }
  const cw = pw / cols.length, bh = ph / bins;
  cols.forEach((c, i) => {
    if (!c.hist) return;
    for (let b = 0; b < c.hist.length; b++) {
      const v = fin(c.hist[b]) ? Math.log1p(c.hist[b]) / (mx || 1) : 0;
      ctx.fillStyle = lutCss(VIRIDIS, v);
      ctx.fillRect(m.l + i * cw, m.t + ph - (b + 1) * bh, Math.ceil(cw) + 0.5, Math.ceil(bh) + 0.5);
    }
  });
  ctx.fillStyle = '#6b7280'; ctx.textAlign = 'right';
  if (range) {
    const [lo, hi] = range;
    for (const v of [lo, (lo + hi) / 2, hi]) {
      const y = m.t + ph - (v - lo) / (hi - lo) * ph;
      ctx.fillText(fmt(v, 2), m.l - 4, Math.min(H - m.b, Math.max(m.t + 8, y + 3)));
    }
  }
  ctx.textAlign = 'center';
  const st = Math.max(1, Math.ceil(cols.length / 8));
  for (let i = 0; i < cols.length; i += st) ctx.fillText(String(cols[i].n), m.l + (i + 0.5) * cw, H - 5);
  return wrap;
}

// ---------------------------------------------------------------- activation maps
function imageCanvas(img, cls, title) {
  const w = img.w | 0, hh = img.h | 0, c = img.c | 0 || 1;
  const cv = h('canvas', { class: cls, width: String(Math.max(1, w)), height: String(Math.max(1, hh)), title });
  const ctx = cv.getContext('2d');
  if (!ctx || !w || !hh) return cv;
  const px = b64bytes(img.data), id = ctx.createImageData(w, hh);
  for (let i = 0; i < w * hh; i++) {
    const o = i * 4;
    if (c >= 3) { id.data[o] = px[i * c]; id.data[o + 1] = px[i * c + 1]; id.data[o + 2] = px[i * c + 2]; }
    else { const v = px[i * c]; id.data[o] = id.data[o + 1] = id.data[o + 2] = v; }
    id.data[o + 3] = 255;
  }
  ctx.putImageData(id, 0, 0);
  return cv;
}
function mapCanvas(b64, w, hh, title) {
  const cv = h('canvas', { class: 'hm-img', width: String(Math.max(1, w)), height: String(Math.max(1, hh)), title });
  const ctx = cv.getContext('2d');
  if (!ctx || !w || !hh) return cv;
  const px = b64bytes(b64), id = ctx.createImageData(w, hh);
  for (let i = 0; i < w * hh; i++) {
    const v = px[i] || 0, o = i * 4;
    id.data[o] = MAGMA[v * 3]; id.data[o + 1] = MAGMA[v * 3 + 1]; id.data[o + 2] = MAGMA[v * 3 + 2]; id.data[o + 3] = 255;
  }
  ctx.putImageData(id, 0, 0);
  return cv;
}
let heatKey = null;
function renderHeatmaps() {
  const box = $('#heatmaps'), e = selectedEpoch(), ep = e != null ? S.run.epochs.get(e) : null;
  const hm = ep && ep.heatmaps;
  const key = `${S.run.id}|${e}|${ep ? ep.uid : ''}|${S.selected ? S.selected.id : ''}|${hm ? 1 : 0}`;
  if (key === heatKey && box.childElementCount) return;
  heatKey = key;
  if (!hm || !hm.layers || typeof hm.layers !== 'object') {
    box.replaceChildren(h('div', { class: 'note', text: e == null ? 'No epoch loaded yet.' : `No activation maps in epoch ${e}.` }));
    return;
  }
  const samples = Array.isArray(hm.samples) ? hm.samples : [];
  const sel = S.selected;
  let paths = [], fromSel = false;
  if (sel && sel.path != null && hm.layers[sel.path]) { paths = [sel.path]; fromSel = true; }
  else paths = Object.keys(hm.layers).slice(0, 4);
  const n = Math.max(samples.length, ...paths.map((p) => (Array.isArray(hm.layers[p].maps) ? hm.layers[p].maps.length : 0)));
  const table = h('div', { class: 'hm-grid', style: `grid-template-columns: max-content repeat(${n}, max-content)` });
  table.append(h('div', { class: 'hm-rowlabel', text: 'input' }));
  for (let i = 0; i < n; i++) {
    const s = samples[i];
    const cell = h('div', { class: 'hm-cell' });
    if (s && s.image) cell.append(imageCanvas(s.image, 'hm-img', `sample ${s.index ?? i}${s.target != null ? ', target ' + s.target : ''}`));
    cell.append(h('div', { class: 'hm-cap', text: s && s.target != null ? `y = ${s.target}` : `#${s && s.index != null ? s.index : i}` }));
    table.append(cell);
  }
  for (const p of paths) {
    const L = hm.layers[p], tn = S.tree && S.tree.byPath.get(p);
    const lab = h('div', { class: 'hm-rowlabel', title: `${p} ${tn ? tn.cls : ''}` }, h('a', { href: '#', class: 'hm-layer', dataset: { layer: p }, text: p === '' ? '(model)' : p }), tn ? h('div', { class: 'cls', text: tn.cls }) : null);
    table.append(lab);
    for (let i = 0; i < n; i++) {
      const cell = h('div', { class: 'hm-cell' });
      const mp = Array.isArray(L.maps) ? L.maps[i] : null;
      if (mp) {
        const lo = Array.isArray(L.lo) ? L.lo[i] : null, hi = Array.isArray(L.hi) ? L.hi[i] : null;
        cell.append(mapCanvas(mp, L.w | 0, L.h | 0, `${p}, sample ${i}: ${L.h}×${L.w}, channel mean in [${fmt(lo)}, ${fmt(hi)}]`));
        cell.append(h('div', { class: 'hm-cap', text: `${fmt(lo, 2)}…${fmt(hi, 2)}` }));
      }
      table.append(cell);
    }
  }
  const note = fromSel ? `Channel-mean activation of ${sel.path === '' ? 'the model' : sel.path} per validation sample, epoch ${e}.`
    : `Channel-mean activations of the first layers, epoch ${e}` + (sel ? ' (the selected node has no map: pick a layer with a 4-D output).' : ' (select a layer to see its own).');
  box.replaceChildren(h('div', { class: 'note small' }, note, ' ', h('span', { class: 'cmap', style: `background:${lutGradient(MAGMA)}`, title: 'low → high, per map' })), h('div', { class: 'hm-scroll' }, table));
}

// ---------------------------------------------------------------- loss landscape
function renderLandscape() {
  const slot = $('#landscape-slot'), L = S.run && S.run.landscape;
  if (!L) { slot.replaceChildren(); return; }
  let sec = $('#landscape');
  if (!sec) {
    const cb = h('input', { type: 'checkbox', id: 'log-scale' });
    const metricSel = Array.isArray(L.metric) ? h('select', { id: 'landscape-what' }, h('option', { value: 'loss', text: 'loss' }), h('option', { value: 'metric', text: 'metric' })) : null;
    sec = h('section', { id: 'landscape', class: 'card' },
      h('h2', {}, 'Loss landscape ', h('span', { class: 'muted sub', text: 'around the final weights, with the training trajectory' })),
      h('div', { class: 'tool-row' }, h('label', {}, cb, ' log colour scale'), metricSel ? h('label', {}, ' show ', metricSel) : null),
      h('div', { class: 'land-wrap' }, h('canvas', { id: 'landscape-canvas', width: '640', height: '640' }),
        h('canvas', { id: 'landscape-surface', width: '720', height: '640', title: 'drag to turn the surface' }),
        h('div', { id: 'landscape-legend', class: 'land-legend' })));
    slot.replaceChildren(sec);
    cb.addEventListener('change', drawLandscape);
    const sf = $('#landscape-surface');
    let drag = null;
    sf.addEventListener('pointerdown', (e) => { drag = { x: e.clientX, az: S.landAz }; sf.setPointerCapture(e.pointerId); });
    sf.addEventListener('pointermove', (e) => { if (drag) { S.landAz = drag.az + (e.clientX - drag.x) / 120; drawLandscape(); } });
    sf.addEventListener('pointerup', () => { drag = null; });
    if (metricSel) metricSel.addEventListener('change', drawLandscape);
  }
  drawLandscape();
}
function drawLandscape() {
  const L = S.run && S.run.landscape, cv = $('#landscape-canvas');
  if (!L || !cv) return;
  const what = $('#landscape-what') ? $('#landscape-what').value : 'loss';
  const Z = (what === 'metric' && Array.isArray(L.metric)) ? L.metric : L.loss;
  const xs = Array.isArray(L.x) ? L.x : [], ys = Array.isArray(L.y) ? L.y : [];
  const rows = Z.length, cols = rows ? Math.max(...Z.map((r) => (Array.isArray(r) ? r.length : 0))) : 0;
  const ctx = cv.getContext('2d');
  if (!ctx) return;
  const W = 320, H = 320, dpr = 2, m = { l: 38, r: 8, t: 8, b: 26 };
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const logc = $('#log-scale') && $('#log-scale').checked;
  let lo = Infinity, hi = -Infinity;
  for (const r of Z) if (Array.isArray(r)) for (const v of r) if (fin(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const tf = (v) => (logc ? Math.log10(v - lo + (hi - lo) * 1e-3 + 1e-12) : v);
  const tlo = tf(lo), thi = tf(hi);
  const cw = pw / Math.max(1, cols), chh = ph / Math.max(1, rows);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) {
    const v = Array.isArray(Z[i]) ? Z[i][j] : null;
    ctx.fillStyle = fin(v) ? lutCss(VIRIDIS, thi > tlo ? (tf(v) - tlo) / (thi - tlo) : 0.5) : '#d1d5db';
    ctx.fillRect(m.l + j * cw, m.t + ph - (i + 1) * chh, Math.ceil(cw) + 0.5, Math.ceil(chh) + 0.5);
  }
  // coordinates → canvas: x[j] is the centre of column j, y[i] the centre of row i (y grows upwards)
  const interp = (arr, v) => {
    if (arr.length < 2) return 0;
    const inc = arr[arr.length - 1] >= arr[0];
    for (let k = 0; k < arr.length - 1; k++) {
      const a = arr[k], b = arr[k + 1];
      if ((inc && v <= b) || (!inc && v >= b) || k === arr.length - 2) return k + (b !== a ? (v - a) / (b - a) : 0);
    }
    return 0;
  };
  const PX = (v) => m.l + (interp(xs, v) + 0.5) * cw, PY = (v) => m.t + ph - (interp(ys, v) + 0.5) * chh;
  const tr = Array.isArray(L.trajectory) ? L.trajectory.filter((p) => Array.isArray(p) && fin(p[0]) && fin(p[1])) : [];
  if (tr.length) {
    ctx.save();
    ctx.beginPath(); ctx.rect(m.l, m.t, pw, ph); ctx.clip();
    ctx.lineWidth = 2; ctx.strokeStyle = 'rgba(255,255,255,0.95)'; ctx.beginPath();
    tr.forEach((p, k) => (k ? ctx.lineTo(PX(p[0]), PY(p[1])) : ctx.moveTo(PX(p[0]), PY(p[1]))));
    ctx.stroke();
    ctx.lineWidth = 1; ctx.strokeStyle = '#111827';
    tr.forEach((p, k) => { ctx.beginPath(); ctx.arc(PX(p[0]), PY(p[1]), k === tr.length - 1 ? 4 : 2.5, 0, 2 * Math.PI); ctx.fillStyle = k === tr.length - 1 ? '#ef4444' : '#ffffff'; ctx.fill(); ctx.stroke(); });
    ctx.restore();
  }
  ctx.fillStyle = '#6b7280'; ctx.font = '9px system-ui, sans-serif';
  if (xs.length) {
    ctx.textAlign = 'center';
    for (const j of [0, Math.floor((xs.length - 1) / 2), xs.length - 1]) ctx.fillText(fmt(xs[j], 2), m.l + (j + 0.5) * cw, H - m.b + 11);
    ctx.fillText('x direction', m.l + pw / 2, H - 3);
  }
  if (ys.length) {
    ctx.textAlign = 'right';
    for (const i of [0, Math.floor((ys.length - 1) / 2), ys.length - 1]) ctx.fillText(fmt(ys[i], 2), m.l - 4, m.t + ph - (i + 0.5) * chh + 3);
  }
  drawSurface(Z, rows, cols, tf, tlo, thi, tr, xs, ys, interp);
  const leg = $('#landscape-legend');
  leg.replaceChildren(h('div', { class: 'muted', text: what }),
    h('span', { class: 'ramp', style: `background:${lutGradient(VIRIDIS)}` }),
    h('div', { class: 'muted', text: lo <= hi ? `${fmt(lo, 3)} … ${fmt(hi, 3)}${logc ? ' (log)' : ''}` : 'no finite value' }),
    tr.length ? h('div', { class: 'muted', text: '○ trajectory · ● final' }) : null);
}

// A 3-D view of the same grid: each cell a quad at its height, drawn back to front (painter's algorithm), coloured
// like the heatmap; the trajectory is drawn at the loss of its nearest grid point. Drag sideways to turn it.
function drawSurface(Z, rows, cols, tf, tlo, thi, tr, xs, ys, interp) {
  const cv = $('#landscape-surface');
  const ctx = cv && cv.getContext('2d');
  if (!ctx || rows < 2 || cols < 2) return;
  const W = 360, H = 320, dpr = 2;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  if (S.landAz === undefined) S.landAz = -0.7;
  const az = S.landAz, el = 0.55, ca = Math.cos(az), sa = Math.sin(az), ce = Math.cos(el), se = Math.sin(el);
  const zn = (v) => (fin(v) && thi > tlo ? (tf(v) - tlo) / (thi - tlo) : 0);
  // grid coordinates in [-1, 1], height in [0, 0.9]
  const P = (j, i, v) => {
    const x = (2 * j) / (cols - 1) - 1, y = (2 * i) / (rows - 1) - 1, z = 0.9 * zn(v);
    const rx = x * ca - y * sa, ry = x * sa + y * ca;
    return [W / 2 + rx * 115, H * 0.62 - (ry * se * 115 * 0.8 + z * ce * 150), ry];
  };
  const quads = [];
  for (let i = 0; i < rows - 1; i++) for (let j = 0; j < cols - 1; j++) {
    const c = [[j, i], [j + 1, i], [j + 1, i + 1], [j, i + 1]].map(([a, b]) => (Array.isArray(Z[b]) ? Z[b][a] : null));
    if (!c.every(fin)) continue;
    const pts = [P(j, i, c[0]), P(j + 1, i, c[1]), P(j + 1, i + 1, c[2]), P(j, i + 1, c[3])];
    quads.push({ pts, depth: pts.reduce((s, p) => s + p[2], 0), v: (c[0] + c[1] + c[2] + c[3]) / 4 });
  }
  quads.sort((a, b) => b.depth - a.depth);
  ctx.lineWidth = 0.4; ctx.strokeStyle = 'rgba(17,24,39,0.35)';
  for (const q of quads) {
    ctx.beginPath(); q.pts.forEach((p, k) => (k ? ctx.lineTo(p[0], p[1]) : ctx.moveTo(p[0], p[1]))); ctx.closePath();
    ctx.fillStyle = lutCss(VIRIDIS, thi > tlo ? (tf(q.v) - tlo) / (thi - tlo) : 0.5); ctx.fill(); ctx.stroke();
  }
  if (tr.length) {
    const pt = (p) => { const j = Math.round(interp(xs, p[0])), i = Math.round(interp(ys, p[1]));
      const v = Array.isArray(Z[i]) ? Z[i][j] : null; return P(interp(xs, p[0]), interp(ys, p[1]), v); };
    ctx.lineWidth = 2; ctx.strokeStyle = '#ffffff'; ctx.beginPath();
    tr.forEach((p, k) => { const q = pt(p); k ? ctx.lineTo(q[0], q[1]) : ctx.moveTo(q[0], q[1]); }); ctx.stroke();
    const q = pt(tr[tr.length - 1]); ctx.fillStyle = '#ef4444'; ctx.beginPath(); ctx.arc(q[0], q[1], 4, 0, 2 * Math.PI); ctx.fill();
  }
  ctx.fillStyle = '#6b7280'; ctx.font = '9px system-ui, sans-serif'; ctx.textAlign = 'left';
  ctx.fillText('surface (drag to turn)', 6, 12);
}

// ---------------------------------------------------------------- wiring
function wire() {
  S.overlay = $('#overlay').value;
  // the tree column sticks below the header, whatever its height
  const hdr = $('#header'), setHdr = () => document.documentElement.style.setProperty('--hdr', hdr.offsetHeight + 'px');
  setHdr();
  if (typeof ResizeObserver !== 'undefined') new ResizeObserver(setHdr).observe(hdr);
  const tree = $('#tree');
  tree.addEventListener('click', onTreeClick);
  tree.addEventListener('dblclick', onTreeDblClick);
  tree.addEventListener('keydown', onTreeKey);
  $('#search').addEventListener('input', runSearch);
  $('#overlay').addEventListener('change', () => { S.overlay = $('#overlay').value; computeOverlay(); decorateAll(); });
  $('#epoch').addEventListener('input', onSlider);
  $('#alerts').addEventListener('click', onAlertClick);
  $('#alerts').addEventListener('keydown', onAlertClick);
  $('#heatmaps').addEventListener('click', (e) => {
    const a = e.target.closest('.hm-layer');
    if (!a) return;
    e.preventDefault();
    selectPath(a.dataset.layer, true);
  });
}

wire();
try {
  if (REPORT) startReport();
  else startServer().catch((e) => fatal(String(e && e.message ? e.message : e)));
} catch (e) { fatal(String(e && e.message ? e.message : e)); }

})();
