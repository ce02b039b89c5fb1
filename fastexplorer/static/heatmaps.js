/* The activation maps card: input images and channel-mean activation maps per validation sample. */
import { $, fin, h, fmt, b64bytes, MAGMA, lutCss, lutGradient } from './util.js';
import { S, selectedEpoch } from './state.js';

function imageCanvas(img, cls, title) {
  const w = img.w | 0, hh = img.h | 0, c = img.c | 0 || 1;
  const cv = h('canvas', { class: cls, width: String(Math.max(1, w)), height: String(Math.max(1, hh)), title });
  const ctx = cv.getContext('2d');
  if (!ctx || !w || !hh) return cv;
  const px = b64bytes(img.data), id = ctx.createImageData(w, hh);
  for (let i = 0; i < w * hh; i++) {
    const o = i * 4;
    if (c >= 3) { id.data[o] = px[i * c]; id.data[o + 1] = px[i * c + 1]; id.data[o + 2] = px[i * c + 2]; }
    else { const v = px[i * c]; id.data[o] = id.data[o + 1] = id.data[o + 2] = v; }
    id.data[o + 3] = 255;
  }
  ctx.putImageData(id, 0, 0);
  return cv;
}

function mapCanvas(b64, w, hh, title) {
  const cv = h('canvas', { class: 'hm-img', width: String(Math.max(1, w)), height: String(Math.max(1, hh)), title });
  const ctx = cv.getContext('2d');
  if (!ctx || !w || !hh) return cv;
  const px = b64bytes(b64), id = ctx.createImageData(w, hh);
  for (let i = 0; i < w * hh; i++) {
    const v = px[i] || 0, o = i * 4;
    id.data[o] = MAGMA[v * 3]; id.data[o + 1] = MAGMA[v * 3 + 1]; id.data[o + 2] = MAGMA[v * 3 + 2]; id.data[o + 3] = 255;
  }
  ctx.putImageData(id, 0, 0);
  return cv;
}

/* A flat map (min == max, such as a 1×1 map after global pooling, or a dead ReLU's) has no pattern to normalise: one
   colour, its value placed on the row's range (`t` in [0, 1]), kept off the colour map's black end. */
function flatCanvas(t, title) {
  const cv = h('canvas', { class: 'hm-img hm-flat', width: '1', height: '1', title });
  const ctx = cv.getContext('2d');
  if (ctx) { ctx.fillStyle = lutCss(MAGMA, 0.2 + 0.75 * t); ctx.fillRect(0, 0, 1, 1); }
  return cv;
}
const isFlat = (lo, hi) => fin(lo) && fin(hi) && Math.abs(hi - lo) <= 1e-6 * Math.max(1, Math.abs(lo), Math.abs(hi));

let heatKey = null;

export function renderHeatmaps() {
  const box = $('#heatmaps'), e = selectedEpoch(), ep = e != null ? S.run.epochs.get(e) : null;
  const hm = ep && ep.heatmaps;
  const key = `${S.run.id}|${e}|${ep ? ep.uid : ''}|${S.selected ? S.selected.id : ''}|${hm ? 1 : 0}`;
  if (key === heatKey && box.childElementCount) return;
  heatKey = key;
  if (!hm || !hm.layers || typeof hm.layers !== 'object') {
    box.replaceChildren(h('div', { class: 'note', text: e == null ? 'No epoch loaded yet.' : `No activation maps in epoch ${e}.` }));
    return;
  }
  const samples = Array.isArray(hm.samples) ? hm.samples : [];
  const sel = S.selected;
  let paths = [], fromSel = false;
  if (sel && sel.path != null && hm.layers[sel.path]) { paths = [sel.path]; fromSel = true; }
  else paths = Object.keys(hm.layers).slice(0, 4);
  const n = Math.max(samples.length, ...paths.map((p) => (Array.isArray(hm.layers[p].maps) ? hm.layers[p].maps.length : 0)));
  const table = h('div', { class: 'hm-grid', style: `grid-template-columns: max-content repeat(${n}, max-content)` });
  table.append(h('div', { class: 'hm-rowlabel', text: 'input' }));
  for (let i = 0; i < n; i++) {
    const s = samples[i];
    const cell = h('div', { class: 'hm-cell' });
    const y = s && s.target != null ? `y = ${s.target}` : null;   // the class index; its name where the vocab gives one
    if (s && s.image) cell.append(imageCanvas(s.image, 'hm-img', `sample ${s.index ?? i}${y ? ', ' + y : ''}${s.label != null ? ` (${s.label})` : ''}`));
    cell.append(h('div', { class: 'hm-cap', text: s && s.label != null ? String(s.label) : y || `#${s && s.index != null ? s.index : i}` }));
    table.append(cell);
  }
  let anyFlat = false;
  for (const p of paths) {
    const L = hm.layers[p], tn = S.tree && S.tree.byPath.get(p);
    const los = Array.isArray(L.lo) ? L.lo : [], his = Array.isArray(L.hi) ? L.hi : [];
    const f0 = Math.min(...los.filter(fin)), f1 = Math.max(...his.filter(fin));   // the row's range
    const lab = h('div', { class: 'hm-rowlabel', title: `${p} ${tn ? tn.cls : ''}` }, h('a', { href: '#', class: 'hm-layer', dataset: { layer: p }, text: p === '' ? '(model)' : p }), tn ? h('div', { class: 'cls', text: tn.cls }) : null);
    table.append(lab);
    for (let i = 0; i < n; i++) {
      const cell = h('div', { class: 'hm-cell' });
      const mp = Array.isArray(L.maps) ? L.maps[i] : null;
      const lo = los[i] ?? null, hi = his[i] ?? null;
      if (mp && isFlat(lo, hi)) {
        anyFlat = true;
        cell.append(flatCanvas(f1 > f0 ? (lo - f0) / (f1 - f0) : 0.5, `${p}, sample ${i}: ${L.h}×${L.w}, flat: every position is ${fmt(lo, 4)}` +
                                                                 (f1 > f0 ? ` (colour: that value on this row's range, ${fmt(f0, 3)} to ${fmt(f1, 3)})` : '')));
        cell.append(h('div', { class: 'hm-cap', text: fmt(lo, 3) }));
      } else if (mp) {
        cell.append(mapCanvas(mp, L.w | 0, L.h | 0, `${p}, sample ${i}: ${L.h}×${L.w}, channel mean in [${fmt(lo)}, ${fmt(hi)}]`));
        cell.append(h('div', { class: 'hm-cap', text: `${fmt(lo, 2)}…${fmt(hi, 2)}` }));
      }
      table.append(cell);
    }
  }
  const note = fromSel ? `Channel-mean activation of ${sel.path === '' ? 'the model' : sel.path} per validation sample, epoch ${e}.`
    : `Channel-mean activations of the first layers, epoch ${e}` + (sel ? ' (the selected node has no map: pick a layer with a 4-D output).' : ' (select a layer to see its own).');
  const whose = S.cmp ? ` Of run ${S.run.name} only: compare mode shows the first run's maps.` : '';
  const flatNote = anyFlat ? ' Flat maps (one value everywhere, such as 1×1 maps after pooling) are labelled with that value, coloured by where it lies in the row\'s range.' : '';
  box.replaceChildren(h('div', { class: 'note small' }, note, ' ', h('span', { class: 'cmap', style: `background:${lutGradient(MAGMA)}`, title: 'low → high, per map' }), whose, flatNote), h('div', { class: 'hm-scroll' }, table));
}
