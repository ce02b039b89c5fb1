/* Reduces one epoch document to what the page draws; shared by the page and its worker. */

/* The custom statistics (`CustomStat`) in a node's `stats`, as `[kind, name]` pairs in their order. */
export function customStats(s) {
  const res = [];
  if (s && typeof s === 'object') for (const k of Object.keys(s)) {
    if (k.startsWith('custom_') && s[k] && typeof s[k] === 'object') for (const nm of Object.keys(s[k])) res.push([k, nm]);
  }
  return res;
}

/* The kind a custom statistic is charted under: a validation kind (`custom_valid_out`) under its training one (`custom_out`). */
export const trainKind = (k) => k.replace('custom_valid_', 'custom_');

/* One epoch document, reduced to what the page draws: stats by module/parameter path; the tree itself is dropped.
   `lazy` (in the worker) keeps each node's stats as a JSON string, parsed by the page only when it needs them:
   strings cross to the page far faster than thousands of small objects. */
export function digestEpoch(doc, lazy) {
  const stats = new Map(), custom = new Set();
  const walk = (n) => {
    if (!n || typeof n !== 'object') return;
    const x = n.xtra;
    if (x && x.stats && typeof n.path === 'string' && !stats.has(n.path)) stats.set(n.path, lazy ? JSON.stringify(x.stats) : x.stats);
    if (x) for (const [k, nm] of customStats(x.stats)) custom.add(trainKind(k) + '|' + nm);
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
