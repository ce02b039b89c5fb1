/* Line charts as inline SVG: axes, ticks, series with bands, the compared run dashed, boundaries marked. */
import { fin, esc, h, fmt } from './util.js';
import { S } from './state.js';

export function tickFmt(v, step) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const k = Math.max(0, Math.min(6, Math.floor(Math.log10(a)) - Math.floor(Math.log10(step))));
    return v.toExponential(k).replace(/\.?0+e/, 'e');
  }
  const dec = Math.max(0, Math.min(8, -Math.floor(Math.log10(step) + 1e-9)));
  return v.toFixed(dec);
}

export function niceStep(range, n) {
  const raw = range / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

/* series: [{label, color, dash, points: [[x, y|null]], band: [[x, lo, hi]]}]; `o.y`: a y range always shown (a fraction's [0, 1]);
   `o.vlines`: [{x, label}] drawn as dotted lines (epoch starts); `o.xname`: what x is, in tooltips (default epoch) */
export function lineChart(o) {
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
  // one key per colour; the compared run (dashed) gets a single key of its own, unless only it is drawn
  const shown = o.series.filter((s) => s.points.some((p) => fin(p[1]))), seen = new Set();
  const dashed = shown.some((s) => s.dash), onlyDashed = dashed && shown.every((s) => s.dash);
  for (const s of shown) {
    if (!s.label || seen.has(s.label)) continue;
    seen.add(s.label);
    legend.append(h('span', { class: 'key' }, h('span', { class: 'swatch' + (onlyDashed ? ' dashed' : ''), style: `border-color:${s.color}` }), s.label));
  }
  if (dashed && !onlyDashed && S.cmp) legend.append(h('span', { class: 'key cmp-key', title: `dashed lines: run ${S.cmp.name}` }, h('span', { class: 'swatch dashed', style: 'border-color:#6b7280' }), S.cmp.name));
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
    if (o.y) { y0 = Math.min(y0, o.y[0]); y1 = Math.max(y1, o.y[1]); }
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
  for (const v of o.vlines || []) {
    if (!(v.x > x0 && v.x <= x1)) continue;
    const xx = X(v.x).toFixed(1);
    svg += `<line class="vline" x1="${xx}" x2="${xx}" y1="${m.t}" y2="${m.t + ph}"><title>${esc(v.label || '')}</title></line>`;
    if (v.label) svg += `<text class="vlabel" x="${(+xx + 2).toFixed(1)}" y="${m.t + 8}">${esc(v.label)}</text>`;
  }
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
      svg += `<circle class="pt${s.dash ? ' hollow' : ''}" cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="${pts.length === 1 ? 3 : 2.2}" ${s.dash ? `stroke="${s.color}"` : `fill="${s.color}"`}><title>${esc(s.label || '')} · ${o.xname || 'epoch'} ${p[0]}: ${esc(fmt(p[1], 4))}</title></circle>`;
    }
  }
  svg += '</svg>';
  const box = h('div', { class: 'plot-box', html: svg });
  // where x lies in the drawing, for a drag that zooms (steps.js): the x range and the plot's left edge and width, in viewBox units
  Object.assign(wrap.dataset, { x0: String(x0), x1: String(x1), vbw: String(W), pl: String(m.l), pw: String(pw) });
  wrap.append(box);
  if (o.xlabel !== false) wrap.append(h('div', { class: 'axis-label', text: o.xlabel || 'epoch' }));
  return wrap;
}
