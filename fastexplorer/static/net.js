/* Reads the server's JSON API: plain fetches, and a worker that fetches and digests epoch files off the main thread. */
import { fin, enc } from './util.js';
import { digestEpoch } from './digest.js';
import { REPORT } from './state.js';

export function apiUrl(id, rest) { return `api/runs/${enc(id)}/${rest}`; }

export async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

/* The worker (worker.js, a module the server's CSP allows as a worker source); none in a report, which has no server. */
let worker = null, workerSeq = 0, workerDead = REPORT || typeof Worker === 'undefined';

const workerWaiting = new Map();

function workerFail() {
  workerDead = true;
  if (worker) { try { worker.terminate(); } catch (e) { /* gone */ } }
  worker = null;
  for (const f of workerWaiting.values()) f({ status: -2, text: null, ep: null });
  workerWaiting.clear();
}

export function startWorker() {
  if (worker || workerDead) return;
  try {
    worker = new Worker(new URL('static/worker.js', document.baseURI), { type: 'module' });
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
export async function silentFetch(url) { return workerCall('probe', url); }

/* The statistics of `paths` in every epoch, `{path: [[epoch, stats], …]}`: through the worker, which hands each node's
   statistics over as a JSON string (parsed when a view reads them), else here. */
export async function fetchHistory(run, paths) {
  const url = apiUrl(run.id, 'history?' + paths.map((p) => 'path=' + encodeURIComponent(p)).join('&'));
  const r = await workerCall('history', url);
  if (r.status === -2) return getJSON(url);
  if (r.ep) return r.ep;
  throw new Error(`${url}: HTTP ${r.status}`);
}

/* An epoch, digested; through the worker when there is one, else here. */
export async function fetchEpoch(run, n) {
  const url = apiUrl(run.id, `epochs/${n}`);
  const r = await workerCall('epoch', url);
  let ep;
  if (r.status === -2) ep = digestEpoch(await getJSON(url));
  else if (r.ep) ep = r.ep;
  else throw new Error(`${url}: HTTP ${r.status}`);
  if (!fin(ep.epoch)) ep.epoch = n;
  return ep;
}
