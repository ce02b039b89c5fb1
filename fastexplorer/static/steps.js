/* The step charts: a layer's, a parameter's and the training's series over sampled steps (steps.sqlite), zoomed by a drag, refreshed live. */
import { fin, h, fmt, PALETTE, C_TRAIN, C_VALID, VIRIDIS, lutCss } from './util.js';
import { S, REPORT } from './state.js';
import { lineChart, niceStep, tickFmt } from './charts.js';
import { apiUrl, getJSON } from './net.js';

const POINTS = 400, HIST_POINTS = 200;

export function hasSteps(run) { return !!(run && run.steps && run.steps.batches > 0); }

/* A series `{steps, width, <stat>: {min, max, mean}}` (or a histogram series `{steps, width, counts}`): asked of the server with
   the shared step range, so a zoomed view is at full resolution; in a report, the embedded series cut to the range. */
const cache = new Map();
async function fetchSeries(run, q) {
  const r = S.stepRange;
  if (REPORT) {
    const d = run.stepsData && run.stepsData[q.hist ? 'hist' : 'series'][q.hist ? q.layer : `${q.kind}|${q.layer || ''}`];
    if (!d) return null;
    if (!r) return d;
    const keep = d.steps.map((s) => s >= r[0] && s <= r[1]), cut = (a) => a.filter((_, i) => keep[i]), res = { ...d, steps: cut(d.steps) };
    if (q.hist) res.counts = cut(d.counts);
    else for (const k of Object.keys(d)) if (d[k] && typeof d[k] === 'object' && !Array.isArray(d[k])) res[k] = { min: cut(d[k].min), max: cut(d[k].max), mean: cut(d[k].mean) };
    return res;
  }
  const p = new URLSearchParams();
  if (q.layer != null) p.set('layer', q.layer);
  if (!q.hist) { p.set('kind', q.kind); if (q.stats) p.set('stats', q.stats); }
  p.set('points', String(q.hist ? HIST_POINTS : POINTS));
  if (r) { p.set('start', String(r[0])); p.set('stop', String(r[1])); }
  const url = apiUrl(run.id, `steps/${q.hist ? 'hist' : 'series'}?${p}`), key = `${url}#${run.steps.batches}`;
  if (cache.has(key)) return cache.get(key);
  const d = await getJSON(url);
  if (cache.size > 200) cache.clear();
  cache.set(key, d);
  return d;
}

/* Whether run `r` recorded `layer` (a layer or a parameter) in its steps: the compared run is only asked for what it has. */
const recorded = (r, layer, param) => hasSteps(r) && (param ? r.steps.params : r.steps.layers || []).includes(layer);

function domain() {
  if (S.stepRange) return S.stepRange.slice();
  const last = Math.max(...[S.run, S.cmp].filter(hasSteps).map((r) => r.steps.last_step));
  return [0, Math.max(1, last)];
}

function boundaries() {
  const v = [];
  if (!hasSteps(S.run)) return v;
  for (const e of S.run.steps.epochs || []) if (e.step > 0) v.push({ x: e.step, label: `e${e.epoch}` });
  for (const f of S.run.steps.fits || []) if (f.step > 0) v.push({ x: f.step, label: `fit ${f.fit}` });
  return v;
}

const line = (d, st, f = 'mean') => d && d[st] ? d.steps.map((s, i) => [s, fin(d[st][f][i]) ? d[st][f][i] : null]) : [];
const band = (d, st) => d && d[st] ? d.steps.map((s, i) => [s, d[st].min[i], d[st].max[i]]) : null;

/* One block of step charts: `specs(runs data) -> charts`, re-drawn when the range changes or new steps arrive. */
const blocks = new Set();
function block(cls, title, queries, build) {
  const el = h('div', { class: 'step-block' });
  const charts = h('div', { class: 'charts step-charts ' + cls });
  const head = h('div', { class: 'step-head' }, h('h3', { text: title }), h('span', { class: 'step-range' }));
  el.append(head, charts);
  let gen = 0;
  const b = { el, last: null };
  b.draw = async () => {
    const g = ++gen, runs = [[S.run, false]].concat(hasSteps(S.cmp) ? [[S.cmp, true]] : []);
    let data;
    try {
      data = await Promise.all(runs.map(([r, dash]) => Promise.all(queries.map((q) => (q.cmpToo === false && dash) || !(q.loss || recorded(r, q.layer, q.param))
        ? null : fetchSeries(r, q).catch(() => null))).then((ds) => ({ run: r, dash, ds }))));
    } catch (e) { data = null; }
    if (g !== gen || !data) return;
    b.last = data;
    const dom = domain(), vlines = boundaries();
    charts.replaceChildren(...build(data, { x: dom, vlines, xname: 'step', xlabel: 'step' }));
    const res = data[0].ds.find((d) => d && d.width);
    head.querySelector('.step-range').textContent = `steps ${dom[0]}–${dom[1]}${res ? ` · ${res.width === 1 ? 'every sampled step' : `${res.width} steps a point`}` : ''}` +
      (REPORT ? ' · drag to zoom (to the report\'s embedded resolution), double-click to reset' : ' · drag across a chart to zoom, double-click to reset');
    el.dataset.range = dom.join(',');
    el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
    el.dataset.drawnAt = performance.now().toFixed(1);   // for bench/ui.py: when the series were drawn, on the page's clock
  };
  charts.append(h('div', { class: 'note', text: 'loading step series…' }));
  blocks.add(b);
  b.draw();
  return el;
}

/* Redraw every step block on the page (the range changed, or new steps arrived); blocks no longer shown are dropped. */
export function refreshSteps() {
  for (const b of blocks) { if (b.el.isConnected) b.draw(); else blocks.delete(b); }
}

/* The statistics of `kind` (`act`, `grad`, `weight`) that the run's step database holds and declares charted. */
const charted = (kind) => ((S.run.steps && S.run.steps.stats) || []).filter((d) => d.kind === kind && d.charted);

/* The node panel's step charts: a layer's charted activation statistics (mean and std with the buckets' min–max, the silent
   and near-zero fractions by default), its histogram, and its parameters' charted gradient and update statistics. */
export function stepPanel(node, params) {
  const path = node.path, isLayer = node.type !== 'Parameter' && recorded(S.run, path, false) || (S.cmp && recorded(S.cmp, path, false));
  const ps = params.filter((p) => recorded(S.run, p.path, true) || recorded(S.cmp, p.path, true));
  if (!isLayer && !ps.length) return null;
  const acts = charted('act'), grads = charted('grad'), weights = charted('weight'), names = (ds) => ds.map((d) => d.name).join(',');
  const q = [];
  if (isLayer) q.push({ kind: 'act', layer: path, stats: names(acts) }, { kind: 'valid_act', layer: path, stats: names(acts) },
                     { hist: true, layer: path, cmpToo: false });
  for (const p of ps) q.push({ kind: 'grad', layer: p.path, stats: names(grads), param: true }, { kind: 'weight', layer: p.path, stats: names(weights), param: true });
  return block('step-panel', 'Over steps', q, (data, o) => {
    const out = [];
    if (isLayer) {
      const ser = (st, withBand) => {
        const res = [];
        for (const { ds, dash } of data) for (const [d, c, nm] of [[ds[0], C_TRAIN, 'train'], [ds[1], C_VALID, 'valid']]) {
          if (!d || !d.steps.length) continue;
          res.push({ label: nm, color: c, dash, points: line(d, st), band: withBand && !dash ? band(d, st) : null });
        }
        return res;
      };
      // one chart a charted statistic, as the run's step database declares it; a fixed range, or the min–max band of its buckets
      for (const d of acts) out.push(lineChart({ ...o, title: d.label || d.name, series: ser(d.name, !d.range), y: d.range || undefined, tip: d.doc }));
      out.push(stepHist(data[0].ds[2], o.x, o.vlines, S.cmp ? S.run.name : null));
    }
    if (ps.length) {
      const ser = (k, st) => {
        const res = [];
        for (const { ds, dash } of data) ps.forEach((p, i) => {
          const d = ds[(isLayer ? 3 : 0) + 2 * i + k];
          if (d && d.steps.length) res.push({ label: p.name, color: PALETTE[i % PALETTE.length], dash, points: line(d, st) });
        });
        return res;
      };
      for (const [k, ds] of [[0, grads], [1, weights]]) for (const d of ds) out.push(lineChart({ ...o, title: d.label || d.name, series: ser(k, d.name), log: 'auto', tip: d.doc }));
    }
    return out;
  });
}

/* The Training card's step charts: the loss and its smoothed value, and the learning rate. */
export function stepCurves() {
  const q = [{ kind: 'loss', stats: 'loss,smooth_loss', loss: true }, { kind: 'hyper', layer: 'group 0', stats: 'lr', loss: true }];
  return block('step-curves', 'Over steps', q, (data, o) => {
    const loss = [], lr = [];
    for (const { ds, dash } of data) {
      if (ds[0] && ds[0].steps.length) {
        loss.push({ label: 'loss', color: C_TRAIN, dash, points: line(ds[0], 'loss'), band: dash ? null : band(ds[0], 'loss') });
        loss.push({ label: 'smooth_loss', color: '#111827', dash, points: line(ds[0], 'smooth_loss'), width: 1.2 });
      }
      if (ds[1] && ds[1].steps.length) lr.push({ label: 'lr', color: '#6b7280', dash, points: line(ds[1], 'lr') });
    }
    return [lineChart({ ...o, title: 'loss', series: loss, log: 'auto', tip: 'training loss per sampled batch (shaded: min–max in each point) and fastai\'s smoothed loss' }),
            lineChart({ ...o, title: 'learning rate', series: lr, log: 'auto', small: true, h: 110 })];
  });
}

/* The histogram of the training activations over steps: a column per point, the y range fitted to the bins that hold
   values, values below or above the recording range marked red on that edge. */
function stepHist(d, x, vlines, label) {
  const W = 340, H = 150, m = { l: 46, r: 10, t: 8, b: 20 }, dpr = 2, pw = W - m.l - m.r, ph = H - m.t - m.b;
  const wrap = h('div', { class: 'chart' });
  wrap.append(h('div', { class: 'chart-head' }, h('span', { class: 'chart-title', text: 'activation histogram' + (label ? ` (${label})` : ''), title: 'histogram of the training activations at each point (its first sampled batch), colour: log(1 + count); the y range fits the values' + (label ? `; compare mode: of run ${label} only` : '') })));
  const cv = h('canvas', { class: 'hist-canvas step-hist', width: String(W * dpr), height: String(H * dpr) });
  const box = h('div', { class: 'plot-box' }, cv);
  wrap.append(box, h('div', { class: 'axis-label', text: 'step →   ·   y: activation value' }));
  Object.assign(wrap.dataset, { x0: String(x[0]), x1: String(x[1]), vbw: String(W), pl: String(m.l), pw: String(pw) });
  const hm = S.run.meta && S.run.meta.hist, rng = (d && d.range) || (hm && hm.range), ctx = cv.getContext('2d');   // the layer's bins, else the run's
  if (!ctx) return wrap;
  ctx.scale(dpr, dpr);
  ctx.fillStyle = '#f3f4f6'; ctx.fillRect(m.l, m.t, pw, ph);
  ctx.font = '9px system-ui, sans-serif'; ctx.fillStyle = '#6b7280';
  if (!d || !d.counts || !d.counts.length || !Array.isArray(rng)) { ctx.fillText('no histogram recorded', m.l + 8, m.t + ph / 2); return wrap; }
  const nb = d.counts[0].length - 2, [lo, hi] = rng, bw = (hi - lo) / nb;
  let b0 = nb, b1 = -1, mx = 0, below = false, above = false;
  for (const c of d.counts) {
    for (let b = 0; b < nb; b++) if (c[b + 1] > 0) { b0 = Math.min(b0, b); b1 = Math.max(b1, b); mx = Math.max(mx, Math.log1p(c[b + 1])); }
    if (c[0] > 0) below = true;
    if (c[nb + 1] > 0) above = true;
  }
  if (b1 < 0) { b0 = 0; b1 = nb - 1; }
  b0 = below ? 0 : Math.max(0, b0 - 1); b1 = above ? nb - 1 : Math.min(nb - 1, b1 + 1);
  const y0 = lo + b0 * bw, y1 = lo + (b1 + 1) * bw, Y = (v) => m.t + ph - (v - y0) / (y1 - y0) * ph;
  const X = (s) => m.l + (s - x[0]) / ((x[1] - x[0]) || 1) * pw, cw = Math.max(1, pw * d.width / ((x[1] - x[0]) || 1));
  Object.assign(cv.dataset, { y0: String(y0), y1: String(y1), range: `${lo},${hi}`, columns: String(d.counts.length) });
  ctx.save(); ctx.beginPath(); ctx.rect(m.l, m.t, pw, ph); ctx.clip();
  // each column runs to the next one (sampled steps leave gaps between buckets); the last is as wide as the one before
  const gap = (i) => i + 1 < d.steps.length ? X(d.steps[i + 1]) - X(d.steps[i]) : (i > 0 ? X(d.steps[i]) - X(d.steps[i - 1]) : cw);
  d.counts.forEach((c, i) => {
    const xx = X(d.steps[i]), cw = Math.max(1, gap(i));
    for (let b = b0; b <= b1; b++) {
      ctx.fillStyle = lutCss(VIRIDIS, mx ? Math.log1p(c[b + 1]) / mx : 0);
      ctx.fillRect(xx, Y(lo + (b + 1) * bw), cw + 0.5, Y(lo + b * bw) - Y(lo + (b + 1) * bw) + 0.5);
    }
    ctx.fillStyle = '#dc2626';
    if (c[nb + 1] > 0) ctx.fillRect(xx, m.t, cw + 0.5, 3);
    if (c[0] > 0) ctx.fillRect(xx, m.t + ph - 3, cw + 0.5, 3);
  });
  ctx.strokeStyle = 'rgba(255,255,255,.7)'; ctx.setLineDash([1, 3]);
  for (const v of vlines) if (v.x > x[0] && v.x <= x[1]) { ctx.beginPath(); ctx.moveTo(X(v.x), m.t); ctx.lineTo(X(v.x), m.t + ph); ctx.stroke(); }
  ctx.restore();
  ctx.fillStyle = '#6b7280'; ctx.textAlign = 'right';
  const st = niceStep(y1 - y0, 4);
  for (let v = Math.ceil(y0 / st - 1e-9) * st; v <= y1 + st * 1e-6; v += st) ctx.fillText(tickFmt(Math.abs(v) < st * 1e-9 ? 0 : v, st), m.l - 4, Math.max(m.t + 7, Math.min(m.t + ph, Y(v) + 3)));
  ctx.textAlign = 'center';
  const xs = Math.max(1, niceStep(x[1] - x[0], 6));
  for (let s = Math.ceil(x[0] / xs) * xs; s <= x[1]; s += xs) ctx.fillText(String(s), X(s), H - 5);
  if (below || above) wrap.append(h('div', { class: 'step-hist-out', text: `Values outside the recording range [${fmt(lo)}, ${fmt(hi)}] (marked red): ${[above ? 'above' : null, below ? 'below' : null].filter(Boolean).join(' and ')}.` }));
  return wrap;
}

/* Zoom: a drag across a step chart picks a step range for every step chart; a double-click resets it. */
export function wireZoom(root) {
  let drag = null;
  const stepAt = (wrap, box, clientX) => {
    const r = box.getBoundingClientRect(), ds = wrap.dataset, u = (clientX - r.left) / r.width * +ds.vbw;
    const f = Math.max(0, Math.min(1, (u - +ds.pl) / +ds.pw));
    return +ds.x0 + f * (+ds.x1 - +ds.x0);
  };
  root.addEventListener('mousedown', (e) => {
    const box = e.target.closest('.step-charts .plot-box'), wrap = box && box.closest('.chart');
    if (!box || !wrap || !wrap.dataset.x0 || e.button !== 0) return;
    e.preventDefault();
    const sel = h('div', { class: 'zoom-sel' });
    box.append(sel);
    drag = { box, wrap, sel, x: e.clientX };
    sel.style.left = `${e.clientX - box.getBoundingClientRect().left}px`; sel.style.width = '0px';
  });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    const r = drag.box.getBoundingClientRect(), a = Math.max(0, Math.min(drag.x, e.clientX) - r.left), b = Math.min(r.width, Math.max(drag.x, e.clientX) - r.left);
    drag.sel.style.left = `${a}px`; drag.sel.style.width = `${Math.max(0, b - a)}px`;
  });
  window.addEventListener('mouseup', (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    d.sel.remove();
    if (Math.abs(e.clientX - d.x) < 5) return;
    const a = Math.round(stepAt(d.wrap, d.box, Math.min(d.x, e.clientX))), b = Math.round(stepAt(d.wrap, d.box, Math.max(d.x, e.clientX)));
    if (b <= a) return;
    S.stepRange = [a, b];
    refreshSteps();
  });
  root.addEventListener('dblclick', (e) => {
    if (!e.target.closest('.step-charts .plot-box') || !S.stepRange) return;
    S.stepRange = null;
    refreshSteps();
  });
}

/* New steps were written (the event stream's `steps` event): the run's summary is updated and the step charts redrawn. */
let refreshTimer = null;
export function onSteps(run, d) {
  if (!run.steps || !d) return false;
  Object.assign(run.steps, d);
  if (refreshTimer === null) refreshTimer = setTimeout(() => { refreshTimer = null; refreshSteps(); }, 50);
  return true;
}
