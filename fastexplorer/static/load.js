/* Loading runs: from the server (epochs a few at a time, live updates over server-sent events) or from a report's data. */
import { fin } from './util.js';
import { digestEpoch } from './digest.js';
import { DATA, REPORT, QS, S, newRun, sharedMap } from './state.js';
import { apiUrl, getJSON, startWorker, silentFetch, fetchEpoch } from './net.js';
import { initTree } from './tree.js';
import { renderLandscape } from './landscape.js';
import { showMessage, fatal, renderHeader, renderRunNav, runHref } from './header.js';
import { scheduleRender, renderAll, renderNow } from './render.js';
import { renderAlerts } from './curves.js';
import { onSteps } from './steps.js';
import { nextUid, loadSummaries } from './history.js';

/* The run's step summary (steps.sqlite), asked for only when its manifest names the file, so a run without one logs no 404. */
async function loadSteps(run) {
  if (!run.meta || !run.meta.steps) return;
  try { run.steps = await getJSON(apiUrl(run.id, 'steps')); } catch (e) { run.steps = null; }
}

/* The run list says which runs exist and what they are called; a run asked for in the URL that is not in it is an
   error that offers the runs there are (and is never fetched, so the console stays clean). */
export async function startServer() {
  startWorker();
  const wanted = QS.get('run'), cmpId = QS.get('compare');
  const runs = await getJSON('api/runs').then((d) => (d && Array.isArray(d.runs)) ? d.runs : []).catch(() => null);
  if (runs === null) { fatal('Cannot reach the fastexplorer server (api/runs).'); return; }
  S.runs = runs;
  if (!runs.length) { fatal('No runs here yet: a run folder appears once ExplorerCallback has written its run.json. Reload this page once a fit has started.'); return; }
  // a run whose run.json cannot be read is listed with its reason (`error`): shown greyed, never opened by default
  const readable = runs.filter((r) => !r.error), first = readable.length ? readable[0] : runs[0];
  const id = (wanted == null || wanted === '') ? first.id : wanted, entry = runs.find((r) => r.id === id);
  if (!entry) { fatal(`There is no run "${id}" here.`, readable); return; }
  if (entry.error) { fatal(`Run "${entry.name || id}" cannot be read: ${entry.error}`, readable); return; }
  const run = newRun(id, entry.name);
  try {
    const [meta, rep] = await Promise.all([getJSON(apiUrl(id, 'run.json')), getJSON(apiUrl(id, 'representation.json')), loadSummaries(run, entry)]);
    run.meta = meta; run.rep = rep; run.status = meta.status; run.shared = sharedMap(rep);
  } catch (e) {
    fatal(`Cannot load run "${run.name}": ${e.message}`, runs);
    return;
  }
  S.run = run;
  performance.mark('fx:fetched');
  initTree(run.rep);
  performance.mark('fx:tree');
  renderHeader();
  renderRunNav();
  renderAll();
  performance.mark('fx:drawn');
  maybeLandscape(run);
  // with an epoch history, the views ask for what they show (history.js); epochs it does not hold yet are read whole
  if (run.index) { loadEpochs(run, (run.meta.epochs || []).map((e) => e.epoch).filter((n) => !run.epochs.has(n)), false); startSettling(); }
  else loadEpochs(run, (run.meta.epochs || []).map((e) => e.epoch), true);
  if (!(run.meta.epochs || []).length) startSettling();
  // the step summary does not hold up the tree and the epochs: the step charts appear when it arrives
  loadSteps(run).then(() => { if (run.steps) scheduleRender(); });
  openEvents(run);
  if (cmpId && cmpId !== id) loadCompare(cmpId);
}

async function loadCompare(cid) {
  const entry = S.runs.find((r) => r.id === cid);
  const others = S.runs.filter((r) => r.id !== S.run.id).map((r) => ({ ...r, href: runHref(S.run.id, r.id) }));
  if (S.runs.length && !entry) { showMessage(`There is no run "${cid}" here to compare with.`, 'warn', others.filter((r) => !r.error)); return; }
  if (entry && entry.error) { showMessage(`Cannot compare with run "${entry.name || cid}": ${entry.error}`, 'warn'); return; }
  const c = newRun(cid, entry && entry.name);
  try {
    const [meta, rep] = await Promise.all([getJSON(apiUrl(cid, 'run.json')), getJSON(apiUrl(cid, 'representation.json')).catch(() => null), loadSummaries(c, entry)]);
    c.meta = meta; c.rep = rep; c.status = meta.status; c.shared = sharedMap(rep);
  } catch (e) { showMessage(`Cannot load the compared run "${cid}": ${e.message}`, 'warn'); return; }
  loadSteps(c).then(() => { if (c.steps) scheduleRender(); });
  S.cmp = c;
  renderHeader(); scheduleRender(); renderLandscape();   // the landscape says it is the first run's
  settledP.then(() => loadEpochs(c, (c.meta.epochs || []).map((e) => e.epoch).filter((n) => !c.epochs.has(n)), false));
  if (c.status === 'running') openEvents(c);
}

/* The older epochs (and the compared run's) wait until the page has been used once (a click or a key) or has stood still
   for a moment after the latest epoch was drawn: parsing dozens of epoch files takes the machine's cores from the first
   paint and the first click, which need only the latest epoch. Later loads (live updates) never wait. */
const QUIET_MS = 1000;
let settle = null;
const settledP = new Promise((resolve) => { settle = resolve; });
function startSettling() {
  if (!settle) return;   // once
  const resolve = settle;
  settle = null;
  let timer = null;
  const go = () => {
    clearTimeout(timer);
    for (const t of ['click', 'keydown']) document.removeEventListener(t, go, true);
    setTimeout(resolve, 0);   // after the interaction's own handlers
  };
  for (const t of ['click', 'keydown']) document.addEventListener(t, go, true);
  requestAnimationFrame(() => { timer = setTimeout(go, QUIET_MS); });
}

/* Fetch epoch documents, a few at a time. `latestFirst`: the latest alone, so the default epoch's views show early, and the
   others once the page has settled (`settledP`), newest first; meanwhile they are `waiting`, and update events leave them. */
function loadEpochs(run, nums, latestFirst) {
  const todo = nums.filter((n) => fin(n) && !run.inflight.has(n) && !run.waiting.has(n));
  if (!todo.length) return;
  todo.sort((a, b) => a - b);
  if (!latestFirst) { fetchEpochs(run, todo); return; }
  const last = todo.pop();
  for (const n of todo) run.waiting.add(n);
  fetchEpochs(run, [last]).then(() => { performance.mark('fx:latest'); startSettling(); return settledP; }).then(() => {
    run.waiting.clear();
    fetchEpochs(run, todo.filter((n) => !run.epochs.has(n) && !run.inflight.has(n)).reverse());
  });
}

function fetchEpochs(run, todo) {
  for (const n of todo) run.inflight.add(n);
  let i = 0;
  const pump = async () => {
    while (i < todo.length) {
      const n = todo[i++];
      try {
        const ep = await fetchEpoch(run, n);
        run.inflight.delete(n);
        ep.uid = nextUid();
        run.epochs.set(n, ep);
        onEpochArrived(run);
      } catch (e) { run.inflight.delete(n); /* gone or mid-write: the next update event retries */ }
    }
  };
  // a few requests at a time: the worker parses them off the page's thread, and the page stays responsive
  const k = Math.min(2, todo.length), pumps = [];
  for (let w = 0; w < k; w++) pumps.push(pump());
  return Promise.all(pumps);
}

function onEpochArrived(run) {
  // epochs that trickle in (live) show at once; a bulk load redraws a few times a second
  if ((S.run && S.run.inflight.size) || (S.cmp && S.cmp.inflight.size)) { scheduleRender(); return; }
  renderNow();
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
  es.addEventListener('steps', async (e) => {
    let d = null;
    try { d = JSON.parse(e.data); } catch (err) { return; }
    if (onSteps(run, d)) return;
    // the first steps of a run whose page opened before it had any: read the summary, then draw the step charts
    await loadSteps(run);
    if (!run.steps) { run.meta = run.meta || {}; run.meta.steps = 'steps.sqlite'; await loadSteps(run); }
    scheduleRender();
  });
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
    if (run === S.run) renderAlerts();   // live alerts (raised inside an epoch) show before the epoch's file exists
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

export function startReport() {
  const runs = Array.isArray(DATA.runs) ? DATA.runs : [];
  S.runs = runs.map((r) => ({ id: String(r.id), name: r.name || String(r.id), model: r.meta && r.meta.model, status: r.meta && r.meta.status,
                              epochs: Array.isArray(r.epochs) ? r.epochs.length : 0, updated: r.meta && r.meta.updated }));
  if (!runs.length) { fatal('This report holds no run.'); return; }
  const wanted = QS.get('run'), cmpId = QS.get('compare');
  const find = (id) => runs.find((r) => String(r.id) === id);
  if (wanted != null && wanted !== '' && !find(wanted)) { fatal(`This report holds no run "${wanted}".`, S.runs); return; }
  const mk = (r) => {
    const run = newRun(String(r.id), r.name);
    run.meta = r.meta || {}; run.rep = r.representation || null; run.status = run.meta.status || null;
    run.shared = sharedMap(run.rep);
    for (const doc of (Array.isArray(r.epochs) ? r.epochs : [])) {
      if (!doc || typeof doc !== 'object') continue;
      const ep = digestEpoch(doc);
      if (fin(ep.epoch)) run.epochs.set(ep.epoch, ep);
    }
    run.landscape = (r.landscape && Array.isArray(r.landscape.loss)) ? r.landscape : null;
    if (r.steps && r.steps.info) { run.steps = r.steps.info; run.stepsData = r.steps; }
    return run;
  };
  const main = (wanted != null && wanted !== '' && find(wanted)) || runs[0];
  S.run = mk(main);
  const c = (cmpId != null && cmpId !== '' && cmpId !== String(main.id)) ? find(cmpId) : null;
  if (cmpId && !c && cmpId !== String(main.id)) showMessage(`This report holds no run "${cmpId}" to compare with.`, 'warn', S.runs.filter((r) => r.id !== String(main.id)).map((r) => ({ ...r, href: runHref(String(main.id), r.id) })));
  S.cmp = c ? mk(c) : null;
  initTree(S.run.rep || { name: 'Learner', type: 'Learner', index: 0, nodes: [] });
  renderHeader();
  renderRunNav();
  renderAll();
  renderLandscape();
}
