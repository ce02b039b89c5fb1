/* The header (run, model, status, counts, compared run), the run list and compare menu, and page messages. */
import { $, enc, h } from './util.js';
import { QS, S } from './state.js';

export function showMessage(text, kind) {
  const m = $('#message');
  m.textContent = text; m.className = 'message ' + (kind || ''); m.hidden = !text;
}

export function fatal(text) {
  showMessage(text, 'error');
  $('#tree').replaceChildren(h('div', { class: 'note', text: 'Nothing to show.' }));
  $('#curves').replaceChildren();
  $('#status').textContent = 'error';
}

export function renderHeader() {
  const run = S.run;
  if (!run) return;
  const model = (run.meta && run.meta.model) || (S.tree && S.tree.model && S.tree.model.cls) || '';
  $('#model').textContent = model;
  $('#run-id').textContent = run.id === '.' ? '' : run.id;
  $('#run-id').hidden = run.id === '.';
  const st = $('#status');
  st.textContent = run.status || 'unknown';
  st.className = 'status st-' + (run.status || 'unknown');
  if (run.meta && run.meta.error) st.title = String(run.meta.error);
  else if (run.meta && run.meta.versions) st.title = Object.entries(run.meta.versions).map(([k, v]) => `${k} ${v}`).join(', ');
  $('#epoch-count').textContent = String(run.epochs.size);
  $('#node-count').textContent = String(S.tree ? S.tree.nodes.length : 0);
  document.title = `${model || 'fastexplorer'}${run.id && run.id !== '.' ? ' · ' + run.id : ''} · fastexplorer`;
  const ci = $('#compare-info');
  if (S.cmp) {
    ci.hidden = false;
    ci.replaceChildren(h('span', { class: 'dash-key' }), ` vs ${S.cmp.id} `,
      h('span', { class: 'muted', text: `(${(S.cmp.meta && S.cmp.meta.model) || ''}, ${S.cmp.status || ''}, ${S.cmp.epochs.size} epochs)` }));
  } else ci.hidden = true;
}

function runHref(id, cmp) { return `?run=${enc(id)}` + (cmp ? `&compare=${enc(cmp)}` : ''); }

export function renderRunNav() {
  const nav = $('#run-nav');
  nav.replaceChildren();
  if (!S.run || S.runs.length < 2) return;
  const list = h('nav', { id: 'runs', class: 'runs', 'aria-label': 'runs' });
  for (const r of S.runs) {
    const a = h('a', { href: runHref(r.id), class: 'run-link' + (r.id === S.run.id ? ' current' : ''),
                       title: `${r.model || ''} · ${r.status || ''} · ${r.epochs ?? '?'} epochs${r.updated ? ' · ' + r.updated : ''}` },
      h('span', { class: 'dot st-' + (r.status || 'unknown') }), r.id === '.' ? '(this folder)' : r.id);
    list.append(a);
  }
  const sel = h('select', { id: 'compare', title: 'compare with another run' });
  sel.append(h('option', { value: '', text: 'compare with…' }));
  for (const r of S.runs) if (r.id !== S.run.id) sel.append(h('option', { value: r.id, text: r.id }));
  sel.value = S.cmp ? S.cmp.id : (QS.get('compare') || '');
  sel.addEventListener('change', () => { location.search = runHref(S.run.id, sel.value); });
  nav.append(list, h('label', { class: 'compare-label' }, sel));
}
