/* The loss landscape card: a heatmap with the trajectory, and a 3-D surface that can be turned. */
import { $, fin, h, fmt, fmtInt, VIRIDIS, lutCss, lutGradient } from './util.js';
import { S } from './state.js';

/* What the grid's axes are (`directions` in landscape.json): two random filter-normalised directions, or the two
   principal directions of the weights' trajectory (PCA), the only kind that comes with the trajectory drawn on it. */
function axesOf(L) {
  const tr = Array.isArray(L.trajectory) && L.trajectory.length > 0;
  if (L.directions === 'pca') return { sub: 'around the final weights, in the plane of the training trajectory (its two principal directions, PCA)' , x: 'PC 1', y: 'PC 2' };
  if (L.directions === 'random') return { sub: `around the final weights, along two random filter-normalised directions${fin(L.seed) ? ` (seed ${L.seed})` : ''}` + (tr ? ', with the training trajectory' : ''), x: 'random direction 1', y: 'random direction 2' };
  return { sub: 'around the final weights' + (tr ? ', with the training trajectory' : ''), x: 'x direction', y: 'y direction' };
}

/* What the loss was evaluated on (`evaluated_on` in landscape.json; files from before it say nothing of it): how many
   validation samples in how many batches, and whether they were the whole validation set or part of it. */
function dataOf(L) {
  const e = L.evaluated_on;
  if (!e || typeof e !== 'object' || !Number.isInteger(e.samples) || !Number.isInteger(e.batches)) return '';
  const of = e.whole === false && Number.isInteger(e.valid_batches) ? ` of ${fmtInt(e.valid_batches)}` : '';
  const n = `${fmtInt(e.batches)}${of} ${e.batches === 1 && !of ? 'batch' : 'batches'}`;
  const whole = e.whole === true ? ', the whole validation set'
    : (e.whole === false ? ', part of the validation set' : '');
  return ` · loss on ${fmtInt(e.samples)} validation ${e.samples === 1 ? 'sample' : 'samples'} in ${n}${whole}`;
}

export function renderLandscape() {
  const slot = $('#landscape-slot'), L = S.run && S.run.landscape;
  if (!L) { slot.replaceChildren(); return; }
  let sec = $('#landscape');
  if (!sec) {
    const cb = h('input', { type: 'checkbox', id: 'log-scale' });
    const metricSel = Array.isArray(L.metric) ? h('select', { id: 'landscape-what' }, h('option', { value: 'loss', text: 'loss' }), h('option', { value: 'metric', text: L.metric_name || 'metric' })) : null;
    sec = h('section', { id: 'landscape', class: 'card' },
      h('h2', {}, 'Loss landscape ',
        h('span', { id: 'landscape-sub', class: 'muted sub', text: axesOf(L).sub + dataOf(L) })),
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
  // compare mode shows the first run's landscape only: the subtitle says whose it is
  $('#landscape-sub').textContent = axesOf(L).sub + dataOf(L) + (S.cmp ? ` · of run ${S.run.name} only (compare mode shows the first run's)` : '');
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
  const W = 320, H = 320, dpr = 2, m = { l: 46, r: 8, t: 8, b: 26 };
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
    ctx.fillText(axesOf(L).x, m.l + pw / 2, H - 3);
  }
  if (ys.length) {
    ctx.textAlign = 'right';
    for (const i of [0, Math.floor((ys.length - 1) / 2), ys.length - 1]) ctx.fillText(fmt(ys[i], 2), m.l - 4, m.t + ph - (i + 0.5) * chh + 3);
    ctx.save(); ctx.translate(9, m.t + ph / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = 'center';
    ctx.fillText(axesOf(L).y, 0, 0); ctx.restore();
  }
  drawSurface(Z, rows, cols, tf, tlo, thi, tr, xs, ys, interp);
  const leg = $('#landscape-legend');
  const keys = [h('div', { class: 'muted', text: what === 'metric' ? (L.metric_name || 'metric') : 'loss' }),
    h('span', { class: 'ramp', style: `background:${lutGradient(VIRIDIS)}` }),
    h('div', { class: 'muted', text: lo <= hi ? `${fmt(lo, 3)} … ${fmt(hi, 3)}${logc ? ' (log)' : ''}` : 'no finite value' })];
  if (tr.length) keys.push(h('div', { class: 'muted', text: '○ trajectory · ● final' }));
  leg.replaceChildren(...keys);
}

// A 3-D view of the same grid: each cell a quad at its height, drawn back to front (painter's algorithm), coloured
// like the heatmap, greyed where it is seen from below; the trajectory is drawn at the loss of its nearest grid point.
// Drag sideways to turn it.
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
  // a quad seen from above winds on the canvas as a flat one does (at any angle); one seen from below, the other way
  const wind = (pts) => Math.sign(pts.reduce((s, p, k) => {
    const q = pts[(k + 1) % pts.length]; return s + p[0] * q[1] - q[0] * p[1];
  }, 0));
  const up = wind([P(0, 0, null), P(1, 0, null), P(1, 1, null), P(0, 1, null)]);
  const quads = [];
  for (let i = 0; i < rows - 1; i++) for (let j = 0; j < cols - 1; j++) {
    const c = [[j, i], [j + 1, i], [j + 1, i + 1], [j, i + 1]].map(([a, b]) => (Array.isArray(Z[b]) ? Z[b][a] : null));
    if (!c.every(fin)) continue;
    const pts = [P(j, i, c[0]), P(j + 1, i, c[1]), P(j + 1, i + 1, c[2]), P(j, i + 1, c[3])];
    const v = (c[0] + c[1] + c[2] + c[3]) / 4;
    quads.push({ pts, depth: pts.reduce((s, p) => s + p[2], 0), v, below: wind(pts) === -up });
  }
  // The depth is the depth on the ground (`ry`, larger: farther), heights left out: along any line of sight it grows,
  // so over a height field the quad nearer on the ground is the one in front, however high either is. Farthest first.
  quads.sort((a, b) => b.depth - a.depth);
  ctx.lineWidth = 0.4; ctx.strokeStyle = 'rgba(17,24,39,0.35)';
  for (const q of quads) {
    ctx.beginPath(); q.pts.forEach((p, k) => (k ? ctx.lineTo(p[0], p[1]) : ctx.moveTo(p[0], p[1]))); ctx.closePath();
    ctx.fillStyle = lutCss(VIRIDIS, thi > tlo ? (tf(q.v) - tlo) / (thi - tlo) : 0.5); ctx.fill();
    if (q.below) { ctx.fillStyle = 'rgba(75,85,99,0.6)'; ctx.fill(); }   // its underside: it rises towards the viewer
    ctx.stroke();
  }
  if (tr.length) {
    const pt = (p) => { const j = Math.round(interp(xs, p[0])), i = Math.round(interp(ys, p[1]));
      const v = Array.isArray(Z[i]) ? Z[i][j] : null; return P(interp(xs, p[0]), interp(ys, p[1]), v); };
    ctx.lineWidth = 2; ctx.strokeStyle = '#ffffff'; ctx.beginPath();
    tr.forEach((p, k) => { const q = pt(p); k ? ctx.lineTo(q[0], q[1]) : ctx.moveTo(q[0], q[1]); }); ctx.stroke();
    const q = pt(tr[tr.length - 1]); ctx.fillStyle = '#ef4444'; ctx.beginPath(); ctx.arc(q[0], q[1], 4, 0, 2 * Math.PI); ctx.fill();
  }
  ctx.fillStyle = '#6b7280'; ctx.font = '9px system-ui, sans-serif'; ctx.textAlign = 'left';
  ctx.fillText('surface (drag to turn)' + (quads.some((q) => q.below) ? ' · grey: seen from below' : ''), 6, 12);
}
