/* The header (run, model, status, counts, compared run), the run list and compare menu, and page messages. */
import { $, enc, h, plural } from './util.js';
import { QS, S } from './state.js';

/* A message above the cards; `links`: runs [{id, name, href?}] to offer as links under it. */
export function showMessage(text, kind, links) {
  const m = $('#message');
  m.replaceChildren(text);
  if (links && links.length) {
    const list = h('nav', { class: 'msg-runs', 'aria-label': 'runs' }, 'Runs here: ');
    for (const r of links) list.append(h('a', { href: r.href || runHref(r.id), class: 'msg-run', text: r.name || r.id }), ' ');
    m.append(list);
  } else if (links) m.append(h('div', { class: 'msg-runs', text: 'No run here can be opened.' }));
  m.className = 'message ' + (kind || ''); m.hidden = !text;
}

export function fatal(text, links) {
  showMessage(text, 'error', links);
  $('#tree').replaceChildren(h('div', { class: 'note', text: 'Nothing to show.' }));
  $('#curves').replaceChildren();
  $('#status').textContent = 'error';
  document.body.classList.add('fatal');   // the cards and counts have nothing to show
  document.title = 'fastexplorer';
}

export function renderHeader() {
  const run = S.run;
  if (!run) return;
  const model = (run.meta && run.meta.model) || (S.tree && S.tree.model && S.tree.model.cls) || '';
  $('#model').textContent = model;
  $('#run-id').textContent = run.name;
  $('#run-id').title = run.name === run.id ? 'run' : `run: the served folder ${run.name}`;
  const st = $('#status');
  st.textContent = run.status || 'unknown';
  st.className = 'status st-' + (run.status || 'unknown');
  if (run.meta && run.meta.error) st.title = String(run.meta.error);
  else if (run.meta && run.meta.versions) st.title = Object.entries(run.meta.versions).map(([k, v]) => `${k} ${v}`).join(', ');
  const nodes = S.tree ? S.tree.nodes.filter((n) => n.type !== 'Call').length : 0;   // the representation's nodes: calls are rows, not nodes
  $('#epoch-count').textContent = String(run.epochs.size);
  $('#epoch-word').textContent = run.epochs.size === 1 ? 'epoch' : 'epochs';
  $('#node-count').textContent = String(nodes);
  $('#node-word').textContent = nodes === 1 ? 'node' : 'nodes';
  document.title = `${run.name}${model ? ' · ' + model : ''} · fastexplorer`;
  const ci = $('#compare-info');
  if (S.cmp) {
    ci.hidden = false;
    ci.replaceChildren(h('span', { class: 'dash-key' }), ` vs ${S.cmp.name} `,
      h('span', { class: 'muted', text: `(${(S.cmp.meta && S.cmp.meta.model) || ''}, ${S.cmp.status || ''}, ${plural(S.cmp.epochs.size, 'epoch')})` }));
  } else ci.hidden = true;
}

export function runHref(id, cmp) { return `?run=${enc(id)}` + (cmp ? `&compare=${enc(cmp)}` : ''); }

export function renderRunNav() {
  const nav = $('#run-nav');
  nav.replaceChildren();
  if (!S.run || S.runs.length < 2) return;
  const list = h('nav', { id: 'runs', class: 'runs', 'aria-label': 'runs' });
  for (const r of S.runs) {
    // a run whose run.json cannot be read: greyed, its reason as the tooltip, and no link
    const a = r.error ? h('span', { class: 'run-link unreadable', title: `cannot be read: ${r.error}`, style: 'opacity: 0.5; cursor: not-allowed' },
                          h('span', { class: 'dot st-unreadable' }), r.name || r.id)
      : h('a', { href: runHref(r.id), class: 'run-link' + (r.id === S.run.id ? ' current' : ''),
                 title: `${r.model || ''} · ${r.status || ''} · ${Number.isFinite(r.epochs) ? plural(r.epochs, 'epoch') : '? epochs'}${r.updated ? ' · ' + r.updated : ''}` },
          h('span', { class: 'dot st-' + (r.status || 'unknown') }), r.name || r.id);
    list.append(a);
  }
  const sel = h('select', { id: 'compare', title: 'compare with another run' });
  sel.append(h('option', { value: '', text: 'compare with…' }));
  for (const r of S.runs) if (r.id !== S.run.id) sel.append(h('option', { value: r.id, text: (r.name || r.id) + (r.error ? ' (cannot be read)' : ''), disabled: !!r.error }));
  sel.value = S.cmp ? S.cmp.id : (QS.get('compare') || '');
  sel.addEventListener('change', () => { location.search = runHref(S.run.id, sel.value); });
  nav.append(list, h('label', { class: 'compare-label' }, sel));
}
