/* The activation-histogram heatmap (fastai's color_dim): a column per epoch, fitted to where the values are, values outside the recording range marked. */
import { fin, h, fmt, fmtCount, VIRIDIS, lutCss } from './util.js';
import { S, epochNumbers, statsAt } from './state.js';
import { niceStep, tickFmt } from './charts.js';

/* Per epoch: the histogram of the training activations over the recording range (values outside it are counted in the
   edge bins), and for each side how many sampled values fell below / at or above the range (`hist_out`; `null`: files
   from before it, which only say, through `min`/`max`, that some did) and whether the extreme itself lay beyond. */
function histColumns(run, path) {
  return epochNumbers(run).map((n) => {
    const ep = run.epochs.get(n), s = statsAt(run, ep, path), a = s && s.act;
    const r = (a && a.hist_range) || (ep.hist && ep.hist.range) || (run.meta && run.meta.hist && run.meta.hist.range);   // the layer's own bins, else the run's
    const c = { n, hist: a && Array.isArray(a.hist) && a.hist.length ? a.hist : null, range: Array.isArray(r) && r.length === 2 && r[1] > r[0] ? r : null,
                hn: a && fin(a.hist_n) ? a.hist_n : null, min: a && fin(a.min) ? a.min : null, max: a && fin(a.max) ? a.max : null };
    if (!c.hist || !c.range) return c;
    const out = Array.isArray(a.hist_out) && a.hist_out.length === 2 ? a.hist_out : null;
    const side = (k, beyond) => ({ n: out ? (fin(out[k]) ? out[k] : 0) : (beyond ? null : 0), beyond });
    c.below = side(0, c.min !== null && c.min < c.range[0]);
    c.above = side(1, c.max !== null && c.max >= c.range[1]);
    return c;
  });
}
const outside = (o) => !!o && (o.n === null || o.n > 0 || o.beyond);

/* The y range drawn: the bins that hold mass in any epoch and the observed min/max (within the range), a bin of margin. */
function fitRange(cols) {
  let y0 = Infinity, y1 = -Infinity, rlo = Infinity, rhi = -Infinity, w = Infinity;
  for (const c of cols) {
    if (!c.hist || !c.range) continue;
    const [lo, hi] = c.range, bw = (hi - lo) / c.hist.length, clip = (v) => Math.max(lo, Math.min(hi, v));
    rlo = Math.min(rlo, lo); rhi = Math.max(rhi, hi); w = Math.min(w, bw);
    c.hist.forEach((v, b) => { if (v > 0) { y0 = Math.min(y0, lo + b * bw); y1 = Math.max(y1, lo + (b + 1) * bw); } });
    if (c.min !== null) { y0 = Math.min(y0, clip(c.min)); y1 = Math.max(y1, clip(c.min)); }
    if (c.max !== null) { y0 = Math.min(y0, clip(c.max)); y1 = Math.max(y1, clip(c.max)); }
    if (outside(c.below)) y0 = lo;
    if (outside(c.above)) y1 = hi;
  }
  if (!(rhi > rlo)) return null;
  if (!(y1 >= y0)) return [rlo, rhi, rlo, rhi];
  y0 = Math.max(rlo, y0 - w); y1 = Math.min(rhi, y1 + w);
  if (y1 - y0 < 4 * w) { const c = (y0 + y1) / 2; y0 = Math.max(rlo, c - 2 * w); y1 = Math.min(rhi, c + 2 * w); }
  return [y0, y1, rlo, rhi];
}

/* The note under the chart when values fell outside the recording range: on each side, how many sampled values and in
   which epochs, or that the files do not say how many, or that only the extreme (of all values) lay beyond. */
function outNote(cols, rlo, rhi) {
  const eps = (cs) => `epoch${cs.length === 1 ? '' : 's'} ${cs.map((c) => c.n).join(', ')}`;
  const side = (k, sym, where, ext, extName) => {
    const on = cols.filter((c) => c[k]), counted = on.filter((c) => c[k].n > 0), unknown = on.filter((c) => c[k].n === null);
    const unsampled = on.filter((c) => c[k].n === 0 && c[k].beyond), parts = [];
    if (counted.length) {
      const n = counted.reduce((t, c) => t + c[k].n, 0), of = counted.reduce((t, c) => t + (c.hn || 0), 0);
      parts.push(`${fmtCount(n)} sampled value${n === 1 ? '' : 's'}${of ? ` (${fmt(100 * n / of, 2)}% of ${fmtCount(of)})` : ''} ${where} in ${eps(counted)}`);
    }
    if (unknown.length) parts.push(`values ${where} (${extName} ${fmt(ext(unknown), 3)}) in ${eps(unknown)}, how many these files do not record`);
    if (unsampled.length) parts.push(`in ${eps(unsampled)} the ${extName} (${fmt(ext(unsampled), 3)}) lay ${where}, but none of the sampled values`);
    return parts.length ? `${sym} ${parts.join('; ')}` : null;
  };
  const parts = [side('above', '▲', `at or above ${fmt(rhi)}`, (cs) => Math.max(...cs.map((c) => c.max)), 'max'),
                 side('below', '▼', `below ${fmt(rlo)}`, (cs) => Math.min(...cs.map((c) => c.min)), 'min')].filter(Boolean);
  if (!parts.length) return null;
  return h('div', { class: 'hist-out', title: `the histogram records values in [${fmt(rlo)}, ${fmt(rhi)}] (the layer's bins: fitted to its first sampled batch, or ExplorerCallback's hist_range); values outside are counted in the edge bins, marked red` },
    `Outside the recording range [${fmt(rlo)}, ${fmt(rhi)}]: ${parts.join('; ')}.`);
}

export function histChart(run, path, id, label) {
  const W = 340, H = 150, m = { l: 40, r: 8, t: 6, b: 18 }, dpr = 2;
  const wrap = h('div', { class: 'chart' });
  wrap.append(h('div', { class: 'chart-head' }, h('span', { class: 'chart-title', text: 'activation histogram' + (S.cmp ? ` (${label})` : ''), title: 'histogram of the training activations per epoch, colour: log(1 + count) — like fastai\'s color_dim; the y range fits the values' })));
  const cv = h('canvas', { id, class: 'hist-canvas', width: String(W * dpr), height: String(H * dpr) });
  wrap.append(cv, h('div', { class: 'axis-label', text: 'epoch →   ·   y: activation value' }));
  const ctx = cv.getContext('2d');
  if (!ctx) return wrap;
  ctx.scale(dpr, dpr);
  const pw = W - m.l - m.r, ph = H - m.t - m.b, cols = histColumns(run, path), fit = fitRange(cols);
  ctx.fillStyle = '#f3f4f6'; ctx.fillRect(m.l, m.t, pw, ph);
  ctx.font = '9px system-ui, sans-serif'; ctx.fillStyle = '#6b7280';
  if (!fit) { ctx.fillText('no histogram recorded', m.l + 8, m.t + ph / 2); return wrap; }
  const [y0, y1, rlo, rhi] = fit, Y = (v) => m.t + ph - (v - y0) / (y1 - y0) * ph, cw = pw / cols.length;
  Object.assign(cv.dataset, { y0: String(y0), y1: String(y1), range: `${rlo},${rhi}` });
  cv.setAttribute('aria-label', `activation histogram per epoch, values ${fmt(y0, 3)} to ${fmt(y1, 3)} of the recording range ${fmt(rlo)} to ${fmt(rhi)}`);
  let mx = 0;
  for (const c of cols) if (c.hist) for (const v of c.hist) if (fin(v)) mx = Math.max(mx, Math.log1p(v));
  ctx.save(); ctx.beginPath(); ctx.rect(m.l, m.t, pw, ph); ctx.clip();
  cols.forEach((c, i) => {
    if (!c.hist || !c.range) return;
    const bw = (c.range[1] - c.range[0]) / c.hist.length;
    for (let b = 0; b < c.hist.length; b++) {
      const a = c.range[0] + b * bw;
      if (a + bw <= y0 || a >= y1) continue;
      ctx.fillStyle = lutCss(VIRIDIS, fin(c.hist[b]) ? Math.log1p(c.hist[b]) / (mx || 1) : 0);
      ctx.fillRect(m.l + i * cw, Y(a + bw), Math.ceil(cw) + 0.5, Y(a) - Y(a + bw) + 0.5);
    }
    // values outside the range: a red edge on that side, with a triangle pointing out
    ctx.fillStyle = '#dc2626';
    const x = m.l + i * cw, xc = x + cw / 2;
    if (outside(c.above)) { ctx.fillRect(x, m.t, cw, 3); ctx.beginPath(); ctx.moveTo(xc - 5, m.t + 11); ctx.lineTo(xc + 5, m.t + 11); ctx.lineTo(xc, m.t + 4); ctx.fill(); }
    if (outside(c.below)) { ctx.fillRect(x, m.t + ph - 3, cw, 3); ctx.beginPath(); ctx.moveTo(xc - 5, m.t + ph - 11); ctx.lineTo(xc + 5, m.t + ph - 11); ctx.lineTo(xc, m.t + ph - 4); ctx.fill(); }
  });
  ctx.restore();
  ctx.fillStyle = '#6b7280'; ctx.textAlign = 'right';
  const st = niceStep(y1 - y0, 4);
  for (let v = Math.ceil(y0 / st - 1e-9) * st; v <= y1 + st * 1e-6; v += st) {
    const y = Y(v);
    if (y < m.t - 1 || y > m.t + ph + 1) continue;
    ctx.fillText(tickFmt(Math.abs(v) < st * 1e-9 ? 0 : v, st), m.l - 4, Math.max(m.t + 7, Math.min(m.t + ph, y + 3)));
  }
  ctx.textAlign = 'center';
  const every = Math.max(1, Math.ceil(cols.length / 8));
  for (let i = 0; i < cols.length; i += every) ctx.fillText(String(cols[i].n), m.l + (i + 0.5) * cw, H - 5);
  const note = outNote(cols, rlo, rhi);
  if (note) wrap.append(note);
  return wrap;
}
