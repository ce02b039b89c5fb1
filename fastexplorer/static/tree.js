/* The representation tree in the sidebar: building, opening, selecting, decorating and searching it. */
import { $, fin, esc, fmt, fmtCount, fmtInt, fmtShape, HEAT, lutCss, setClass } from './util.js';
import { S } from './state.js';
import { OVERLAYS } from './overlay.js';
import { renderPanel } from './panel.js';
import { renderHeatmaps } from './heatmaps.js';

/* Calls of one module in a forward that have rows of their own (the statistics' `CALL_SITES`): later ones share the last. */
const CALL_SITES = 16;

export function initTree(rep) {
  const nodes = [], byPath = new Map();
  let model = null;
  const add = (n, parent, depth) => {
    const x = (n && n.xtra && typeof n.xtra === 'object') ? n.xtra : {};
    const node = { id: nodes.length, name: String(n.name ?? ''), type: String(n.type || 'Module'),
                   path: typeof n.path === 'string' ? n.path : null, xtra: x, parent, depth, children: [],
                   el: null, row: null, kidsEl: null, rest: null, open: false, match: false, ovColor: '', ovText: '', ovTip: '' };
    node.cls = String(x.class || node.type);
    nodes.push(node);
    if (node.path !== null && !byPath.has(node.path)) byPath.set(node.path, node);
    if (!model && node.path === '') model = node;
    if (Array.isArray(n.nodes)) for (const c of n.nodes) if (c && typeof c === 'object') node.children.push(add(c, node, depth + 1));
    // a layer called several times in a forward: a row for each further call, whose statistics are its own (`path#2`…)
    const calls = Number(x.calls) || 0;
    if (node.path !== null && calls > 1 && node.type !== 'Parameter' && node.children.every((c) => c.type === 'Parameter'))
      for (let c = 2; c <= Math.min(calls, CALL_SITES); c++) {
        const o = Array.isArray(x.outputs) ? x.outputs[c - 1] : null;
        node.children.push(add({ name: `call ${c}`, type: 'Call', path: `${node.path}#${c}`,
                                 xtra: { class: node.cls, call: c, shape: o && o.shape, dtype: o && o.dtype } }, node, depth + 1));
      }
    return node;
  };
  const root = add(rep, null, 0);
  S.tree = { nodes, byPath, root, model };
  openLevels(nodes, model ? model.depth : 1);
  const tree = $('#tree');
  pending = [];
  budget = FIRST_ROWS;
  tree.innerHTML = nodeHtml(root);
  budget = Infinity;
  bindNodes(tree);
  if (pending.length) setTimeout(renderMore, 0);
}

/* Open the Learner and the model, then the model's next two levels, a whole level at a time while the rows shown stay within
   `OPEN_ROWS` (a digits CNN shows down to its parameters; a net of 700 blocks shows its blocks, closed): the page writes
   and lays out the rows a reader can take in, not thousands. */
const OPEN_ROWS = 300;
function openLevels(nodes, md) {
  const opens = (n) => n.children.length && n.type !== 'Parameter';
  let rows = 1;
  for (const n of nodes) if (n.depth <= md && opens(n)) { n.open = true; rows += n.children.length; }
  for (let d = md + 1; d <= md + 2; d++) {
    const level = nodes.filter((n) => n.depth === d && opens(n)), more = level.reduce((k, n) => k + n.children.length, 0);
    if (rows + more > OPEN_ROWS) break;
    for (const n of level) n.open = true;
    rows += more;
  }
}

/* A big tree is written a screenful first and the rest in slices, each in a task of its own, so the first paint and the
   first click do not wait for thousands of rows (1,000 rows took 150 ms to write and 160 ms to lay out). `pending`: the
   open nodes whose children are written up to `node.rest`, deepest first; a slice continues the first of them. */
const FIRST_ROWS = 150, SLICE_ROWS = 400;
let budget = Infinity, pending = [];

function renderMore() {
  if (!S.tree) return;
  const later = pending;
  pending = [];
  budget = SLICE_ROWS;
  while (later.length && budget > 0) {
    const node = later.shift();
    if (node.rest == null || !node.kidsEl) continue;
    const from = node.rest;
    node.rest = null;
    appendKids(node, from, node.children.length);
  }
  budget = Infinity;
  pending = pending.concat(later);
  if (pending.length) setTimeout(renderMore, 0);
}

/* Write the children `[from, to)` of a node whose earlier children are drawn, within the budget. */
function appendKids(node, from, to) {
  const html = kidsSlice(node, from, to);
  const box = node.kidsEl, last = box.lastElementChild;
  box.insertAdjacentHTML('beforeend', html);
  for (let e = last ? last.nextElementSibling : box.firstElementChild; e; e = e.nextElementSibling) { bindNode(e); bindNodes(e); }
}

/* A node's children from `from` up to `to`, as far as the budget goes; the rest wait in `pending`. */
function kidsSlice(node, from, to) {
  let html = '', i = from;
  for (; i < to && budget > 0; i++) html += nodeHtml(node.children[i]);
  if (i < node.children.length) { node.rest = i; pending.push(node); }   // callers clear `rest` first
  return html;
}

/* Draw, at once, what a node needs to be on the page: its ancestors' children up to its own branch. */
function ensureDrawn(node) {
  const chain = [];
  for (let n = node; n.parent; n = n.parent) chain.push(n);
  for (let i = chain.length - 1; i >= 0; i--) {
    const p = chain[i].parent, k = p.children.indexOf(chain[i]);
    if (p.rest != null && k >= p.rest && p.kidsEl) { const from = p.rest; p.rest = null; appendKids(p, from, k + 1); }
  }
}

/* A node's markup, and its open descendants': the tree is written as one string and parsed once, which is several
   times faster than building thousands of elements one by one (everything from the data is escaped). */
function nodeHtml(node) {
  const x = node.xtra, P = node.type === 'Parameter', sp = (cls, text, title) => `<span class="${cls}"${title ? ` title="${esc(title)}"` : ''}>${esc(text)}</span>`;
  let info = '';
  const shape = fmtShape(x.shape);
  if (shape) info += sp('shape', (P ? '' : '→ ') + shape, P ? 'parameter shape' : 'output shape');
  if (fin(x.params) && x.params > 0 && !P) info += sp('params', fmtCount(x.params), `${fmtInt(x.params)} parameters`);
  if (fin(x.trainable) && fin(x.params) && x.trainable !== x.params) info += sp('frozen', `${fmtCount(x.trainable)} trainable`, `${fmtInt(x.trainable)} of ${fmtInt(x.params)} parameters are trainable`);
  if (P && x.requires_grad === false) info += sp('frozen', 'frozen', 'requires_grad is False');
  if (fin(x.calls) && x.calls > 1) info += sp('calls', `×${x.calls}`, `called ${x.calls} times per forward pass`);
  if (typeof x.shared_with === 'string') info += sp('shared', `= ${x.shared_with || '(model)'}`, `shared with ${x.shared_with}`);
  if (typeof x.depth_idx === 'string') info += sp('didx', x.depth_idx, `depth-idx label ${x.depth_idx} (torchinfo, scio): select this layer with '${x.depth_idx}'`);
  const kids = node.children.length, title = (node.path != null ? (node.path === '' ? '(model)' : node.path) : node.name) + ' · ' + node.cls + (x.dtype ? ' · ' + x.dtype : '');
  budget--;
  return `<div class="node t-${esc(node.type.toLowerCase())}" role="treeitem" data-path="${esc(node.path ?? '')}" data-type="${esc(node.type)}" data-id="${node.id}">` +
    `<div class="row" style="padding-left:${6 + node.depth * 14}px" title="${esc(title)}">` +
    `<span class="toggle${kids ? '' : ' leaf'}">${kids ? (node.open ? '▾' : '▸') : ''}</span>` +
    `<span class="label" tabindex="0"><span class="name">${esc(node.name)}</span>${!P && node.cls !== node.name ? sp('cls', node.cls) : ''}</span>` +
    `<span class="info">${info}</span><span class="ov"></span></div>` +
    (node.open && kids ? kidsHtml(node) : '') + '</div>';
}
function kidsHtml(node) { return `<div class="kids" role="group">${kidsSlice(node, 0, node.children.length)}</div>`; }

/* Attach the nodes drawn inside `el` (or `el` itself, with `bindNode`) to their elements. */
function bindNodes(el) { for (const e of el.querySelectorAll('.node')) bindNode(e); }
function bindNode(e) {
  const node = S.tree.nodes[+e.dataset.id], row = e.firstElementChild;
  node.el = e; node.row = row; node.togEl = row.firstElementChild; node.ovEl = row.lastElementChild;
  node.kidsEl = row.nextElementSibling;
  decorate(node);
}

function renderKids(node) {
  if (!node.kidsEl) {
    node.el.insertAdjacentHTML('beforeend', kidsHtml(node));
    bindNodes(node.el.lastElementChild);
    node.kidsEl = node.el.lastElementChild;
  }
  node.kidsEl.hidden = !node.open;
}

function setOpen(node, open) {
  if (!node.children.length) return;
  node.open = open;
  if (node.togEl) node.togEl.textContent = open ? '▾' : '▸';
  if (node.el) {
    if (open) renderKids(node);
    else if (node.kidsEl) node.kidsEl.hidden = true;
  }
}

function reveal(node) {
  const chain = [];
  for (let p = node.parent; p; p = p.parent) chain.push(p);
  for (let i = chain.length - 1; i >= 0; i--) if (!chain[i].open || !chain[i].kidsEl) setOpen(chain[i], true);
  ensureDrawn(node);
}

function decorate(node) {
  const row = node.row;
  if (!row) return;
  setClass(node.el, 'selected', S.selected === node);
  setClass(node.el, 'match', node.match);
  setClass(node.el, 'has-alert', node.path != null && S.alertPaths.has(node.path));
  const v = S.ovValues ? S.ovValues[node.id] : null;
  let color = '', text = '', tip = '';
  if (S.overlay !== 'none' && v != null && S.ovScale && !(OVERLAYS[S.overlay].binary && !(v > 0))) { color = lutCss(HEAT, S.ovScale(v)); text = fmt(v, 2); tip = `${S.overlay} = ${v}`; }
  if (node.ovColor !== color) {
    node.ovColor = color;
    if (color) row.style.setProperty('--ov', color); else row.style.removeProperty('--ov');
    setClass(row, 'ov-on', !!color);
  }
  if (node.ovText !== text) { node.ovText = text; node.ovEl.textContent = text; }
  if (node.ovTip !== tip) { node.ovTip = tip; if (tip) node.ovEl.title = tip; else node.ovEl.removeAttribute('title'); }
}

export function decorateAll() { if (S.tree) for (const n of S.tree.nodes) if (n.row) decorate(n); }

function selectNode(node, scroll) {
  if (!node) return;
  const prev = S.selected;
  S.selected = node;
  if (prev && prev.el) prev.el.classList.remove('selected');
  reveal(node);
  if (node.el) {
    node.el.classList.add('selected');
    if (scroll) scrollTreeTo(node, true);
  }
  renderPanel();
  renderHeatmaps();
}

/* Scroll the tree pane (only it, never the page) so that the node's row shows. */
function scrollTreeTo(node, center) {
  const tree = $('#tree');
  if (!node.row) return;
  const r = node.row.getBoundingClientRect(), t = tree.getBoundingClientRect();
  if (r.top >= t.top && r.bottom <= t.bottom && !center) return;
  if (r.top >= t.top + 20 && r.bottom <= t.bottom - 20) return;
  tree.scrollTop += center ? (r.top - t.top) - (t.height - r.height) / 2 : (r.top < t.top ? r.top - t.top : r.bottom - t.bottom);
}

export function selectPath(path, scroll) {
  if (!S.tree) return;
  const node = S.tree.byPath.get(path);
  if (node) selectNode(node, scroll);
}

export function onTreeClick(e) {
  const nodeEl = e.target.closest('.node');
  if (!nodeEl || !S.tree) return;
  const node = S.tree.nodes[+nodeEl.dataset.id];
  if (!node) return;
  if (e.target.closest('.toggle')) { setOpen(node, !node.open); return; }
  if (e.target.closest('.label') || e.target.closest('.row')) selectNode(node, false);
}

export function onTreeDblClick(e) {
  const nodeEl = e.target.closest('.node');
  if (!nodeEl || !S.tree || e.target.closest('.toggle')) return;
  const node = S.tree.nodes[+nodeEl.dataset.id];
  if (node) setOpen(node, !node.open);
}

export function onTreeKey(e) {
  const lab = e.target.closest('.label');
  if (!lab || !S.tree) return;
  const node = S.tree.nodes[+lab.closest('.node').dataset.id];
  if (!node) return;
  if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); selectNode(node, false); }
  else if (e.key === 'ArrowRight') { e.preventDefault(); setOpen(node, true); }
  else if (e.key === 'ArrowLeft') { e.preventDefault(); setOpen(node, false); }
}

export function runSearch() {
  if (!S.tree) return;
  const q = $('#search').value.trim().toLowerCase();
  S.searchQ = q;
  let count = 0, first = null;
  for (const n of S.tree.nodes) {
    const m = q !== '' && ((n.path != null && n.path.toLowerCase().includes(q)) || n.cls.toLowerCase().includes(q));
    if (m) { count++; if (!first) first = n; reveal(n); }
    if (m !== n.match) { n.match = m; if (n.el) n.el.classList.toggle('match', m); }
  }
  $('#search-count').textContent = q ? `${count} match${count === 1 ? '' : 'es'}` : '';
  if (first && first.row) scrollTreeTo(first, false);
}
