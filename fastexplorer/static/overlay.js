/* Colouring the tree by a statistic of the selected epoch: the built-in and custom overlays. */
import { $, fin, h, fmt, HEAT, lutCss, lutGradient } from './util.js';
import { S, statsAt, paramChildren, selectedEpoch } from './state.js';

export const OVERLAYS = {
  dead_frac: { desc: 'fraction of dead units (never positive after a rectifier, constant after any other layer), training activations', fixed: [0, 1] },
  grad_norm: { desc: 'gradient norm (module: max over its parameters)', log: true },
  update_ratio: { desc: 'weight update / weight norm (module: max over its parameters)', log: true },
  nonfinite: { desc: 'NaN/Inf counts in activations and gradients', binary: true },
};

/* Custom statistics (`CustomStat`) found in the loaded epochs become overlays too: training values, epoch means, linear
   scale; a module shows the max over its parameters for weight and gradient statistics. */
export function syncCustomOverlays() {
  const sel = $('#overlay');
  for (const ep of (S.run ? S.run.epochs.values() : [])) for (const key of (ep.custom || [])) {
    const id = 'custom:' + key;
    if (OVERLAYS[id]) continue;
    const [k, nm] = [key.slice(0, key.indexOf('|')), key.slice(key.indexOf('|') + 1)], on = k.slice('custom_'.length);
    const what = { out: 'outputs', in: 'inputs', weight: 'weights', grad: 'gradients' }[on] || on;
    OVERLAYS[id] = { desc: `custom statistic ${nm} of the ${what}` + (on === 'weight' || on === 'grad' ? ' (module: max over its parameters)' : '') + ', epoch mean', linear: true, custom: [k, nm] };
    sel.append(h('option', { value: id, text: `${nm} (${on})` }));
  }
}

function overlayValue(node, ep, kind) {
  if (node.path == null) return null;
  const run = S.run;
  const paramVal = (p, f) => { const s = statsAt(run, ep, p.path); return s ? f(s) : null; };
  const maxOver = (f) => {
    if (node.type === 'Parameter') return paramVal(node, f);
    let best = null;
    for (const p of paramChildren(node)) { const v = paramVal(p, f); if (fin(v) && (best === null || v > best)) best = v; }
    return best;
  };
  if (kind === 'dead_frac') {
    const s = statsAt(run, ep, node.path);
    const a = s && (s.act || s.valid_act);
    return a && fin(a.dead_frac) ? a.dead_frac : null;
  }
  const cu = OVERLAYS[kind] && OVERLAYS[kind].custom;
  if (cu) {
    const [k, nm] = cu, pick = (s) => (s[k] && s[k][nm] && fin(s[k][nm].mean)) ? s[k][nm].mean : null;
    if (k === 'custom_weight' || k === 'custom_grad') return maxOver(pick);
    const s = statsAt(run, ep, node.path);
    return s ? pick(s) : null;
  }
  if (kind === 'grad_norm') return maxOver((s) => (s.grad && fin(s.grad.norm)) ? s.grad.norm : null);
  if (kind === 'update_ratio') return maxOver((s) => (s.weight && fin(s.weight.update_ratio)) ? s.weight.update_ratio : null);
  if (kind === 'nonfinite') {
    const s = statsAt(run, ep, node.path);
    if (!s) return null;
    let n = 0, any = false;
    for (const k of ['act', 'valid_act', 'grad']) {
      const a = s[k];
      if (a && typeof a === 'object') { any = true; n += (fin(a.nan) ? a.nan : 0) + (fin(a.inf) ? a.inf : 0); }
    }
    return any ? n : null;
  }
  return null;
}

export function computeOverlay() {
  const kind = S.overlay, legend = $('#overlay-legend');
  S.ovValues = null; S.ovScale = null;
  const e = selectedEpoch();
  const ep = e != null ? S.run.epochs.get(e) : null;
  if (kind === 'none' || !OVERLAYS[kind] || !S.tree) { legend.hidden = true; legend.replaceChildren(); return; }
  const spec = OVERLAYS[kind];
  const vals = new Array(S.tree.nodes.length).fill(null);
  let lo = Infinity, hi = -Infinity, n = 0;
  if (ep) for (const node of S.tree.nodes) {
    const v = overlayValue(node, ep, kind);
    if (fin(v)) {
      vals[node.id] = v; n++;
      if (!spec.log || v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
  }
  S.ovValues = vals;
  let loL, hiL;
  if (spec.binary) { S.ovScale = (v) => (v > 0 ? 1 : 0); loL = '0'; hiL = '> 0'; }
  else if (spec.fixed) { S.ovScale = (v) => Math.max(0, Math.min(1, (v - spec.fixed[0]) / (spec.fixed[1] - spec.fixed[0]))); loL = String(spec.fixed[0]); hiL = String(spec.fixed[1]); }
  else if (lo <= hi && spec.linear) {
    S.ovScale = (v) => (hi > lo ? (v - lo) / (hi - lo) : 1);
    loL = fmt(lo, 2); hiL = fmt(hi, 2);
  } else if (lo <= hi) {
    const a = Math.log10(lo), b = Math.log10(hi);
    S.ovScale = (v) => (v > 0 ? (b > a ? (Math.log10(v) - a) / (b - a) : 1) : 0);
    loL = fmt(lo, 2); hiL = fmt(hi, 2);
  } else { S.ovScale = () => 0; loL = hiL = '–'; }
  legend.hidden = false;
  legend.replaceChildren(
    h('span', { class: 'muted', text: loL }),
    h('span', { class: 'ramp' + (spec.binary ? ' binary' : ''), style: `background:${spec.binary ? `linear-gradient(to right, ${lutCss(HEAT, 0)} 50%, ${lutCss(HEAT, 1)} 50%)` : lutGradient(HEAT)}` }),
    h('span', { class: 'muted', text: hiL + (spec.log ? ' (log)' : '') }),
    h('span', { class: 'legend-desc', text: ep ? `${spec.desc}, epoch ${e} · ${n} nodes` : 'no epoch loaded yet' }));
}
