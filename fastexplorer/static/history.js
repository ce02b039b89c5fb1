/* Serving what a view needs. A run whose folder has an epoch history (history.sqlite) starts from every epoch's summary
   (`epochs`: its Recorder row, how many alerts, which custom statistics), as "light" epochs that hold no node statistics.
   A selected node's statistics over every epoch come in one request (`history?path=…`), and an epoch's whole file only
   when a view of that epoch needs it (the tree's alert marks, the overlay, the activation maps). Without a history (a run
   an older fastexplorer wrote, a report) the page reads the epoch files, as it did before. */
import { fin } from './util.js';
import { apiUrl, getJSON, fetchEpoch, fetchHistory } from './net.js';

const MAX_PATHS = 64;   // per request: the server's MAX_HISTORY_PATHS
let uid = 0, onData = () => {};

/* A number that changes whenever an epoch's document is replaced (views cache what they drew by it). */
export function nextUid() { return ++uid; }

/* What to call when statistics arrive (the page's redraw); set once by render.js. */
export function onHistory(f) { onData = f; }

function lightEpoch(s) {
  return { epoch: s.epoch, partial: !!s.partial, fit: s.fit, sampled: s.sampled || null,
           recorder: (s.recorder && typeof s.recorder === 'object') ? s.recorder : {}, alerts: [], nAlerts: fin(s.n_alerts) ? s.n_alerts : 0,
           heatmaps: null, amp: (s.amp && typeof s.amp === 'object') ? s.amp : null, ranks: fin(s.ranks) ? s.ranks : null,
           hist: s.hist || null, stats: new Map(), custom: Array.isArray(s.custom) ? s.custom : [], light: true, uid: nextUid() };
}

/* Every epoch's summary, when the run list says the run has a history: true if the run is now `index`ed. */
export async function loadSummaries(run, entry) {
  if (!entry || !entry.history) return false;
  let d;
  try { d = await getJSON(apiUrl(run.id, 'epochs')); } catch (e) { return false; }
  if (!d || !Array.isArray(d.epochs)) return false;
  for (const s of d.epochs) if (s && fin(s.epoch) && !run.epochs.has(s.epoch)) run.epochs.set(s.epoch, lightEpoch(s));
  run.index = true;
  return true;
}

/* Ask for the history of `paths` (those not asked for yet); true while any of them is on its way. */
export function needHistory(run, paths) {
  if (!run || !run.index) return false;
  const want = Array.from(new Set(paths)).filter((p) => typeof p === 'string' && !run.histHave.has(p) && !run.histPending.has(p));
  for (let i = 0; i < want.length; i += MAX_PATHS) {
    const some = want.slice(i, i + MAX_PATHS);
    for (const p of some) run.histPending.add(p);
    fetchHistory(run, some).then((h) => {
      for (const [p, rows] of Object.entries(h)) for (const [n, s] of rows) {
        const ep = run.epochs.get(n);
        if (ep && ep.light && !ep.stats.has(p)) ep.stats.set(p, s);
      }
      for (const p of some) { run.histPending.delete(p); run.histHave.add(p); }
      onData();
    }).catch(() => { for (const p of some) run.histPending.delete(p); onData(); });
  }
  return paths.some((p) => run.histPending.has(p));
}

/* Read the whole file of epoch `n` if only its summary is here. */
export function needEpoch(run, n) {
  const ep = run && run.epochs.get(n);
  if (!ep || !ep.light || run.inflight.has(n)) return;
  run.inflight.add(n);
  fetchEpoch(run, n).then((full) => {
    run.inflight.delete(n);
    full.uid = nextUid();
    run.epochs.set(n, full);
    if (!performance.getEntriesByName('fx:latest').length) performance.mark('fx:latest');
    onData();
  }).catch(() => { run.inflight.delete(n); });
}
