/* The page's state: the shown and compared runs, the tree, the selection, and lookups of statistics in them. */

export const DATA = (typeof window.FASTEXPLORER_DATA !== 'undefined' && window.FASTEXPLORER_DATA) ? window.FASTEXPLORER_DATA : null;

export const REPORT = DATA !== null;

export const QS = new URLSearchParams(location.search);

export const S = {
  runs: [],          // [{id, name, model, status, epochs, updated}]
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
  stepRange: null,  // [first, last] step shown by every step chart (null: all)
};

/* A run: `id` is its key in URLs (`~`: the served folder itself), `name` what the page calls it (the folder's name). */
export function newRun(id, name) {
  return { id, name: name || id, meta: null, rep: null, status: null, epochs: new Map(), landscape: null, shared: new Map(),
           inflight: new Set(), waiting: new Set(), es: null, landscapeTried: false, steps: null, stepsData: null,
           index: false, histHave: new Set(), histPending: new Set() };   // index: epochs from the epoch history (history.js)
}

export function epochNumbers(run) { return run ? Array.from(run.epochs.keys()).sort((a, b) => a - b) : []; }

export function sharedMap(rep) {
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

export function statsAt(run, ep, path) {
  if (!run || !ep || path == null) return null;
  let s = statsOf(ep, path);
  if (!s) { const sw = run.shared.get(path); if (sw != null) s = statsOf(ep, sw); }
  return s;
}

export function paramChildren(node) { return node.children.filter((c) => c.type === 'Parameter'); }

export function selectedEpoch() {
  const nums = epochNumbers(S.run);
  if (!nums.length) return null;
  if (S.epochSel != null && S.run.epochs.has(S.epochSel)) return S.epochSel;
  return nums[nums.length - 1];
}

export function epochDomain() {
  let nums = epochNumbers(S.run);
  if (S.cmp) nums = nums.concat(epochNumbers(S.cmp));
  if (!nums.length) return null;
  return [Math.min(...nums), Math.max(...nums)];
}
