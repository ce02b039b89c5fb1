/* The node panel: a selected layer's or parameter's charts over steps and over epochs, and its statistics in the selected epoch. */
import { $, fin, PALETTE, C_TRAIN, h, fmt, fmtInt, fmtShape, C_VALID } from './util.js';
import { S, epochNumbers, statsAt, paramChildren, selectedEpoch, epochDomain } from './state.js';
import { lineChart } from './charts.js';
import { histChart } from './hist.js';
import { hasSteps, stepPanel } from './steps.js';
import { needHistory } from './history.js';
import { customStats, trainKind } from './digest.js';

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

let panelStepKey = null, panelStepEl = null;

export function renderPanel() {
  const node = S.selected, title = $('#panel-title'), body = $('#panel-body');
  if (!node) {
    panelStepKey = null; panelStepEl = null;
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
    ['params', fin(x.params) ? fmtInt(x.params) : null], ['trainable', fin(x.trainable) && x.trainable !== x.params ? fmtInt(x.trainable) : null],
    ['params once materialised', fin(x.materialised) ? fmtInt(x.materialised) : null, 'lazy layers: the count after their first forward (the probe ran a copy)'],
    ['numel', fin(x.numel) ? fmtInt(x.numel) : null], ['requires_grad', x.requires_grad === undefined ? null : String(x.requires_grad)],
    ['calls', fin(x.calls) && x.calls > 1 ? x.calls : null, 'times called per forward pass'], ['shared with', x.shared_with],
    ['call', fin(x.call) && node.parent ? `${x.call} of ${node.parent.xtra.calls} of ${node.parent.path || '(model)'}` : null, 'a further call of its module in one forward pass: its statistics are its own'],
    ['depth-idx', typeof x.depth_idx === 'string' ? x.depth_idx : null, 'torchinfo/scio label: depth below the model - rank at that depth'],
    ['note', typeof x.note === 'string' ? x.note : null],
  ]);
  out.push(info);
  if (path == null) {
    out.push(h('div', { class: 'note', text: `${node.type} is a pseudo-node: it has no statistics of its own.` }));
    body.replaceChildren(...out);
    return;
  }
  // the step charts first, when the run has steps; kept across redraws of the same node, so epochs arriving do not refetch them
  const params0 = node.type === 'Parameter' ? [node] : paramChildren(node);
  const skey = `${run.id}|${cmp ? cmp.id : ''}|${path}|${hasSteps(run)}|${hasSteps(cmp)}`;
  if (panelStepKey !== skey) { panelStepKey = skey; panelStepEl = (hasSteps(run) || hasSteps(cmp)) ? stepPanel(node, params0) : null; }
  if (panelStepEl) out.push(panelStepEl, h('h3', { class: 'epoch-head', text: 'Over epochs' }));
  const dom = epochDomain();
  const both = [[run, false]].concat(cmp ? [[cmp, true]] : []);
  // with an epoch history, this node's statistics over every epoch arrive in one request (then the panel is drawn again)
  const want = [path, ...params0.map((p) => p.path)];
  for (const p of want.slice()) for (const r of [run, cmp]) if (r && r.shared.has(p)) want.push(r.shared.get(p));
  const coming = [needHistory(run, want), needHistory(cmp, want)].some(Boolean);
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
        // the band is what the values can be: mean ± std, clipped to the epoch's observed min and max (a ReLU's stays >= 0)
        if (band && !dash) sr.band = epochNumbers(r).map((n) => {
          const s = statsAt(r, r.epochs.get(n), path), a = s && s[k];
          if (!(a && fin(a.mean) && fin(a.std))) return [n, null, null];
          return [n, fin(a.min) ? Math.max(a.min, a.mean - a.std) : a.mean - a.std, fin(a.max) ? Math.min(a.max, a.mean + a.std) : a.mean + a.std];
        });
        ser.push(sr);
      }
      return ser;
    };
    charts.push(lineChart({ title: 'activation mean ± std', series: mk('mean', true), x: dom, marker: e, tip: 'mean of the outputs, shaded: ± one standard deviation, within the observed min and max' }));
    const mm = [];
    for (const [r, dash] of both) for (const [k, c, nm] of [['act', C_TRAIN, 'train'], ['valid_act', C_VALID, 'valid']]) {
      for (const f of ['min', 'max']) {
        const pts = nodeSeries(r, path, (s) => s[k] && s[k][f]);
        if (pts.some((p) => fin(p[1]))) mm.push({ label: nm, color: c, dash, points: pts });
      }
    }
    charts.push(lineChart({ title: 'activation min / max', series: mm, x: dom, marker: e }));
    charts.push(lineChart({ title: 'dead fraction', series: mk('dead_frac'), x: dom, y: [0, 1], marker: e, tip: 'fraction of units (channels, features) that were dead: never positive after a rectifier, constant after any other layer' }));
    charts.push(lineChart({ title: 'near-zero fraction', series: mk('near_zero'), x: dom, y: [0, 1], marker: e, tip: 'fraction of activations close to zero' }));
    charts.push(histChart(run, path, 'hist-heatmap', run.name));
    if (cmp) charts.push(histChart(cmp, path, 'hist-heatmap-compare', cmp.name));
    const valid = both.some(([r]) => epochNumbers(r).some((n) => { const s = statsAt(r, r.epochs.get(n), path); return s && s.valid_act; }));
    if (!valid) charts.push(h('div', { class: 'note small no-valid', text: 'Training activations only: ExplorerCallback(valid=True) records the validation set\'s too, drawn beside them in orange.' }));
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
  if (!hasAct && !hasParam && !hasCustom && ((run.epochs.size === 0 && run.inflight.size > 0) || coming)) {
    // nothing loaded yet: the charts this node will most likely have, filled in as epochs arrive
    const sk = (t) => lineChart({ title: t, series: [], empty: 'loading…' });
    if (node.type !== 'Parameter') ['activation mean ± std', 'activation min / max', 'dead fraction', 'near-zero fraction'].forEach((t) => charts.push(sk(t)));
    if (params.length) ['weight norm', 'update ratio', 'gradient norm', 'gradient max |g|'].forEach((t) => charts.push(sk(t)));
    out.push(h('div', { class: 'charts' }, ...charts));
  } else if (!hasAct && !hasParam && !hasCustom) {
    const container = node.children.some((c) => c.type !== 'Parameter' && c.type !== 'Call');
    const why = !run.epochs.size ? 'No statistics yet: no epoch has been loaded.'
      : 'No statistics were recorded for this node.' + (container ? ' It is a container: open it and pick a layer inside.' : '');
    out.push(h('div', { class: 'note no-stats', text: why }));
  } else {
    out.push(h('div', { class: 'charts', dataset: { history: coming ? 'coming' : 'all' } }, ...charts));
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
      for (const [k, nm] of customStats(s)) keys.set(trainKind(k) + '|' + nm, [trainKind(k), nm]);
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

/* The activation statistics a run declares (in its step database) beyond those the table always shows, as `[label, value]`. */
const SHOWN = new Set(['n', 'nan', 'inf', 'mean', 'std', 'min', 'max', 'abs_mean', 'near_zero', 'silent_frac']);
const declared = (a) => ((S.run.steps && S.run.steps.stats) || []).filter((d) => d.kind === 'act' && !SHOWN.has(d.name) && fin(a[d.name]))
  .map((d) => [d.label || d.name, a[d.name]]);

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
      ...declared(a),
      ['dead units', fin(a.dead) ? `${a.dead} / ${a.units ?? '?'}` : null], ['dead unit ids', du],
      ['units', fin(a.unit_dim) ? `dim ${a.unit_dim} of the output; dead = ${a.dead_rule === 'constant' ? 'did not vary' : 'never positive'}` : null],
      ['units with no finite value', fin(a.units_nonfinite) ? a.units_nonfinite : null],
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
    for (const [k, nm] of customStats(s2)) {
      cpairs.push([`${p === node ? '' : p.name + ' '}${nm} (${k.slice('custom_'.length).replace('_', ' ')})`, s2[k][nm] ? s2[k][nm].mean : null]);
    }
  }
  if (cpairs.length) grid.append(h('div', {}, h('h4', { text: 'custom statistics' }), kv(cpairs)));
  if (!grid.children.length) return h('div', { class: 'note', text: `No statistics for this node in epoch ${e}.` });
  box.append(grid);
  return box;
}
