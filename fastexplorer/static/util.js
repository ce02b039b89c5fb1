/* DOM, number and colour helpers shared by every part of the page (no state, no network). */

export const $ = (sel) => document.querySelector(sel);

export const fin = (v) => typeof v === 'number' && isFinite(v);

export const enc = encodeURIComponent;

export const PALETTE = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#dc2626', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];

export const C_TRAIN = '#2563eb', C_VALID = '#ea580c';

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

export function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  if (attrs) for (const k in attrs) {
    const v = attrs[k];
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'html') e.innerHTML = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) if (k != null && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}

export function fmt(v, digits = 3) {
  if (v === null || v === undefined) return '–';
  if (typeof v !== 'number') return String(v);
  if (!isFinite(v)) return String(v);
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(digits - 1).replace(/\.?0+e/, 'e');
  if (Number.isInteger(v)) return String(v);
  return String(parseFloat(v.toPrecision(digits)));
}

/* `12,345`, without `Intl` (`toLocaleString` sets up a formatter per call, which a tree of thousands of nodes feels). */
export function fmtInt(n) {
  if (!Number.isInteger(n) || Math.abs(n) >= 1e21) return String(n);
  return String(n).replace(/\B(?=(\d{3})+$)/g, ',');
}

/* `1 epoch`, `3 epochs`: the count and the word, plural unless the count is one. */
export function plural(n, word, words) { return `${n} ${n === 1 ? word : (words || word + 's')}`; }

export function fmtCount(n) {
  if (!fin(n)) return '';
  if (n >= 1e9) return (n / 1e9).toFixed(1).replace(/\.0$/, '') + 'B';
  if (n >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, '') + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(1).replace(/\.0$/, '') + 'K';
  return fmtInt(n);
}

export function fmtShape(s) {
  if (s == null) return '';
  if (Array.isArray(s)) {
    if (s.length && s.every((x) => Array.isArray(x) || x === null)) return s.map(fmtShape).join(', ');
    return '[' + s.join('×') + ']';
  }
  if (typeof s === 'object') return JSON.stringify(s);
  return String(s);
}

export function b64bytes(s) {
  try {
    const bin = atob(s || '');
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch (e) { return new Uint8Array(0); }
}

function hexRgb(hx) { const n = parseInt(hx.slice(1), 16); return [(n >> 16) & 255, (n >> 8) & 255, n & 255]; }

function makeLut(stops) {
  const cs = stops.map(hexRgb), lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255 * (cs.length - 1), k = Math.min(cs.length - 2, Math.floor(t)), f = t - k;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(cs[k][c] + (cs[k + 1][c] - cs[k][c]) * f);
  }
  return lut;
}

export const VIRIDIS = makeLut(['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89', '#35b779', '#6ece58', '#b5de2b', '#fde725']);

export const MAGMA = makeLut(['#000004', '#180f3d', '#440f76', '#721f81', '#9e2f7f', '#cd4071', '#f1605d', '#fd9668', '#feca8d', '#fcfdbf']);

export const HEAT = makeLut(['#fff7bc', '#fee391', '#fec44f', '#fe9929', '#f47a1f', '#e4541a', '#d7301f']);

export function lutCss(lut, t) {
  const i = Math.max(0, Math.min(255, Math.round((fin(t) ? t : 0) * 255))) * 3;
  return `rgb(${lut[i]},${lut[i + 1]},${lut[i + 2]})`;
}

export function lutGradient(lut) {
  const st = [];
  for (let k = 0; k <= 8; k++) st.push(lutCss(lut, k / 8));
  return `linear-gradient(to right, ${st.join(',')})`;
}

export function setClass(el, cls, on) { if (el.classList.contains(cls) !== on) el.classList.toggle(cls, on); }
