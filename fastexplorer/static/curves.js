/* The training curves (the Recorder's values per epoch) and the alerts of the selected epoch. */
import { $, fin, PALETTE, C_TRAIN, h, C_VALID, fmtInt } from './util.js';
import { S, epochNumbers, selectedEpoch, epochDomain } from './state.js';
import { lineChart } from './charts.js';
import { selectPath } from './tree.js';
import { hasSteps, stepCurves } from './steps.js';

let curveStepKey = null, curveStepEl = null;

function recorderKeys(runs) {
  const keys = [];
  for (const run of runs) if (run) for (const e of epochNumbers(run)) {
    const r = run.epochs.get(e).recorder;
    for (const k in r) if (fin(r[k]) && k !== 'epoch' && !keys.includes(k)) keys.push(k);
  }
  return keys;
}

export function renderCurves() {
  const box = $('#curves'), run = S.run, cmp = S.cmp;
  const nums = epochNumbers(run);
  // loss and learning rate over steps first, when the run has steps (kept across redraws)
  const skey = `${run.id}|${cmp ? cmp.id : ''}|${hasSteps(run)}|${hasSteps(cmp)}`;
  if (curveStepKey !== skey) { curveStepKey = skey; curveStepEl = (hasSteps(run) || hasSteps(cmp)) ? stepCurves() : null; }
  const pre = curveStepEl ? [curveStepEl, h('h3', { class: 'epoch-head', text: 'Over epochs' })] : [];
  if (!nums.length && !(cmp && cmp.epochs.size)) {
    const waiting = run.meta && Array.isArray(run.meta.epochs) && run.meta.epochs.length;
    box.replaceChildren(...pre, h('div', { class: 'note', text: waiting ? 'Loading epochs…' : 'No epoch recorded yet: curves appear after the first epoch ends.' }));
    return;
  }
  const keys = recorderKeys([run, cmp]);
  const losses = keys.filter((k) => /loss$/.test(k)), lr = keys.filter((k) => k === 'lr' || k === 'lrs'),
    metrics = keys.filter((k) => !losses.includes(k) && !lr.includes(k));
  const dom = epochDomain(), marker = selectedEpoch();
  const series = (ks, colors, only) => {
    const out = [];
    ks.forEach((k, i) => {
      const c = colors ? colors[i % colors.length] : PALETTE[i % PALETTE.length];
      for (const [r, dash] of [[run, false], [cmp, true]]) {
        if (only && r !== only) continue;
        if (!r) continue;
        const pts = epochNumbers(r).map((e) => { const v = r.epochs.get(e).recorder[k]; return [e, fin(v) ? v : null]; });
        if (!pts.some((p) => fin(p[1]))) continue;
        out.push({ label: k, color: c, dash, points: pts });
      }
    });
    return out;
  };
  const charts = [];
  // compared runs' losses can differ by orders of magnitude: one chart, with its own y scale, per run
  const lossColors = [C_TRAIN, C_VALID, ...PALETTE.slice(2)];
  if (losses.length && !cmp) charts.push(lineChart({ title: 'loss', series: series(losses, lossColors), x: dom, marker, log: 'auto' }));
  else if (losses.length) for (const r of [run, cmp]) {
    const ch = lineChart({ title: `loss · ${r.name}`, series: series(losses, lossColors, r), x: dom, marker, log: 'auto', tip: `loss of run ${r.name}, on a y scale of its own` });
    ch.dataset.run = r.id;
    charts.push(ch);
  }
  metrics.forEach((k, i) => charts.push(lineChart({ title: k, series: series([k], [PALETTE[(i + 2) % PALETTE.length]]), x: dom, marker })));
  if (lr.length) charts.push(lineChart({ title: 'learning rate', series: series(lr, ['#6b7280']), x: dom, marker, small: true, h: 110, log: 'auto', tip: 'learning rate at the end of the epoch' }));
  // how the statistics were gathered: steps the mixed-precision loss scaler skipped, processes combined under DDP
  const scaled = (r, dash, c) => {
    const pts = epochNumbers(r).map((e) => { const a = r.epochs.get(e).amp; return [e, a && fin(a.skipped_steps) ? a.skipped_steps : null]; });
    return pts.some((p) => fin(p[1])) ? [{ label: 'skipped', color: c, dash, points: pts }] : [];
  };
  const skipped = [...scaled(run, false, '#b91c1c'), ...(cmp ? scaled(cmp, true, '#b91c1c') : [])];
  if (skipped.length) charts.push(lineChart({ title: 'steps skipped by the loss scaler', series: skipped, x: dom, marker, small: true, h: 110, tip: 'optimizer steps skipped for overflowing fp16 gradients, per epoch (their gradient statistics are left out)' }));
  const ranks = Math.max(0, ...nums.map((e) => run.epochs.get(e).ranks || 0));
  if (!charts.length) charts.push(h('div', { class: 'note', text: 'The Recorder logged no numeric values.' }));
  if (ranks > 1) charts.push(h('div', { class: 'note', id: 'ranks-note', text: `Statistics combined over ${ranks} processes (DistributedDataParallel).` }));
  box.replaceChildren(...pre, h('div', { class: 'charts epoch-curves' }, ...charts));
}

const ALERT_HELP = {
  dead: 'units that were dead (never positive, or constant)', nonfinite: 'NaN or Inf values', exploding_grad: 'very large gradients',
  vanishing_grad: 'very small gradients', frozen: 'parameters that do not change',
  nonfinite_loss: 'a NaN or Inf the loss function made from finite outputs',
  nonfinite_input: 'NaN or Inf values in the data', nonfinite_target: 'NaN or Inf values in the targets',
  valid_input_shift: 'validation inputs distributed otherwise than the training inputs',
  eval_stats_stale: 'BatchNorm running statistics that do not match the data they normalise in evaluation',
  valid_classes_unseen: 'validation targets of classes the training targets never hold',
  valid_leak: 'validation samples that are training samples too',
  unshuffled_batches: 'training batches in the same order every epoch',
  labels_misaligned: 'validation labels numbered otherwise than the training labels',
  gradient_flow: 'no gradient reaching the weights',
  loss_stalled: 'a training loss that does not fall, or sits at the chance level', loss_diverging: 'a training loss that grows',
  lr_too_high: 'steps too large: the loss grows, or jumped and stuck', lr_too_low: 'steps too small to make progress',
  valid_at_chance: 'a validation loss at chance while the training loss falls', grads_not_zeroed: 'gradients that are never zeroed',
  replica_drift: 'DDP replicas whose weights differ', labels_one_class: 'training labels that are all one class',
  multi_hot_softmax: 'several labels per sample under a softmax cross-entropy',
  output_classes: 'model outputs that no training target reaches',
  target_range: 'targets outside the range the loss expects',
  wd_too_high: 'weight decay that shrinks the weights towards zero',
  train_mode_in_eval: 'layers in training mode while the model is validated',
  eval_mode_in_training: 'a model trained in evaluation mode',
  last_batch_one: 'a training batch of one sample, which a BatchNorm cannot normalise',
  eval_nondeterministic: 'a model whose output in evaluation changes from one forward to the next',
};
const GLOBAL_CAUSE = {   // what an alert without a layer is about
  nonfinite_loss: 'the loss', loss_stalled: 'the loss', loss_diverging: 'the loss', loss_at_init: 'the loss', loss: 'the loss',
  lr_too_high: 'learning rate', lr_too_low: 'learning rate', valid_at_chance: 'the data', input_scale: 'the input',
  target_range: 'the targets', target_scale: 'the targets', target_classes: 'the targets', grads_not_zeroed: 'the optimiser',
  optimizer_groups: 'the optimiser', labels_one_class: 'the targets', multi_hot_softmax: 'the loss',
  output_classes: 'the targets', wd_too_high: 'weight decay',
  nonfinite_input: 'the data', nonfinite_target: 'the targets', valid_input_shift: 'the validation data',
  valid_classes_unseen: 'the split', valid_leak: 'the split', labels_misaligned: 'the labels', unshuffled_batches: 'the data',
  eval_nondeterministic: "the model's forward", last_batch_one: 'the data', gradient_flow: 'the backward',
};

/* Alerts raised inside an epoch whose file is not loaded yet (`live_alerts` in run.json, written within a second). */
function liveAlerts() {
  const la = S.run.meta && Array.isArray(S.run.meta.live_alerts) ? S.run.meta.live_alerts : [];
  return la.filter((a) => a && a.source !== 'preflight' && !S.run.epochs.has(a.epoch));
}

/* Preflight's verdicts, always first: a line of what was checked, then each verdict that asks something, as an alert. */
function preflightItems() {
  const meta = S.run.meta || {}, v = Array.isArray(meta.preflight) ? meta.preflight : [];
  if (!v.length) return [];
  const la = Array.isArray(meta.live_alerts) ? meta.live_alerts : [];
  const count = (s) => v.filter((x) => x && x.severity === s).length;
  const ok = count('ok'), bad = count('error') + count('warning'), skipped = count('skipped');
  const line = h('div', { class: 'preflight-line' + (bad ? '' : ' ok'), text: `Preflight, before the first step: ${v.length} checks, ${ok} passed`
                          + (bad ? `, ${bad} to act on` : '') + (skipped ? `, ${skipped} could not run` : '') + '.' });
  return [line, ...la.filter((a) => a && a.source === 'preflight').map((a) => alertItem(a, 'preflight'))];
}

const isResolved = (a) => a && a.state === 'resolved';

/* A finding's life, after its message: since when it is active, or when it was raised and resolved. */
function lifeNote(a) {
  const raised = Number.isInteger(a.raised_step) ? a.raised_step : null;
  if (isResolved(a)) return ` · resolved at step ${a.resolved_step}` + (raised != null ? ` (raised at step ${raised})` : '');
  return raised != null && Number.isInteger(a.step) && raised < a.step ? ` · active since step ${raised}` : '';
}

/* The findings an epoch resolved, apart, after the active ones: what no longer holds. */
function resolvedGroup(items, e) {
  if (!items.length) return [];
  return [h('div', { class: 'alerts-resolved-title', text: `Resolved${e == null ? '' : ` by the end of epoch ${e}`}: no longer shown by the run (${fmtInt(items.length)})` }),
          ...items.map((a) => alertItem(a, isResolved(a) && a.source === 'live' ? 'live resolved' : 'resolved'))];
}

export function renderAlerts() {
  const box = $('#alerts'), e = selectedEpoch(), title = $('#alerts-title');
  const lives = liveAlerts(), gone = lives.filter(isResolved);
  const live = [...preflightItems(), ...lives.filter((a) => !isResolved(a)).map((a) => alertItem(a, 'live'))];
  if (e == null) {
    title.textContent = 'Alerts';
    box.replaceChildren(...live, ...resolvedGroup(gone, null), ...(live.length || gone.length ? [] : [h('div', { class: 'note', text: 'No epoch loaded yet.' })]));
    return;
  }
  const ep = S.run.epochs.get(e);
  title.replaceChildren('Alerts ', h('span', { class: 'muted sub', text: `epoch ${e}` + (S.cmp ? ` · of run ${S.run.name} (open ${S.cmp.name} for its own)` : '') }));
  if (ep.light) { box.replaceChildren(...live, h('div', { class: 'note', text: `Loading the alerts of epoch ${e}…` })); return; }
  const active = ep.alerts.filter((a) => !isResolved(a)), resolved = [...gone, ...ep.alerts.filter(isResolved)];
  if (!active.length) {
    // a hint of where the alerts are, when the selected epoch has none active
    const other = epochNumbers(S.run).filter((n) => { const o = S.run.epochs.get(n); return o.light ? o.nAlerts : o.alerts.some((a) => !isResolved(a)); });
    box.replaceChildren(...live, h('div', { class: 'note ok', text: `No active alert in epoch ${e}.` + (other.length ? ` Epochs with alerts: ${other.join(', ')}.` : '') }), ...resolvedGroup(resolved, e));
    return;
  }
  // a deep net can raise thousands in an epoch: the first ALERTS_SHOWN, and a button for the rest (thousands of rows took
  // a tenth of a second to lay out, on the page's first screen)
  const key = `${S.run.id}|${e}`, all = allAlertsFor === key || active.length <= ALERTS_SHOWN;
  const more = all ? [] : [h('button', { class: 'alerts-more', type: 'button', dataset: { key }, text: `Show all ${fmtInt(active.length)} alerts (${fmtInt(active.length - ALERTS_SHOWN)} more)` })];
  box.replaceChildren(...live, ...(all ? active : active.slice(0, ALERTS_SHOWN)).map((a) => alertItem(a, false)), ...more, ...resolvedGroup(resolved, e));
}

const ALERTS_SHOWN = 50;
let allAlertsFor = null;   // the run and epoch whose alerts are all shown

function alertItem(a, live) {
  const layer = String(a.layer ?? '');
  const known = S.tree && S.tree.byPath.has(layer);
  const where = live === 'preflight' ? ' · preflight, before the first step' : live === 'live' || live === 'live resolved' ? ` · raised at step ${a.step} of epoch ${a.epoch} (live)` : '';
  return h('div', { class: 'alert k-' + String(a.kind || 'other') + (live ? ' ' + live : ''), role: 'button', tabindex: '0', dataset: { layer, kind: String(a.kind || ''), state: isResolved(a) ? 'resolved' : 'active' },
                      title: (ALERT_HELP[a.kind] || '') + (known ? ' · click to show the layer' : '') },
      ...(a.severity ? [h('span', { class: 'alert-sev sev-' + String(a.severity), text: String(a.severity) })] : []),
      h('span', { class: 'alert-kind', text: String(a.kind || 'alert').replaceAll('_', ' ') }),
      h('span', { class: 'alert-layer', text: layer || `(${GLOBAL_CAUSE[a.kind] || 'model'})` }),
      h('span', { class: 'alert-msg', text: String(a.message || '') + where + (live === 'preflight' ? '' : lifeNote(a)) }),
      ...(a.hint && !isResolved(a) ? [h('span', { class: 'alert-hint', text: 'Why, and what to try: ' + String(a.hint) })] : []));
}

export function onAlertClick(e) {
  const m = e.target.closest('.alerts-more');
  if (m && e.type === 'click') { allAlertsFor = m.dataset.key; renderAlerts(); return; }
  const a = e.target.closest('.alert');
  if (!a) return;
  if (e.type === 'keydown' && e.key !== 'Enter' && e.key !== ' ') return;
  if (e.type === 'keydown') e.preventDefault();
  selectPath(a.dataset.layer, true);
}
