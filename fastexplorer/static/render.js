/* Redraw orchestration: what to redraw when epochs arrive or the selected epoch changes, and the epoch slider. */
import { $ } from './util.js';
import { S, epochNumbers, selectedEpoch } from './state.js';
import { syncCustomOverlays, computeOverlay } from './overlay.js';
import { renderPanel } from './panel.js';
import { renderHeatmaps } from './heatmaps.js';
import { decorateAll } from './tree.js';
import { renderCurves, renderAlerts } from './curves.js';
import { renderHeader } from './header.js';
import { onHistory, needEpoch } from './history.js';

let renderTimer = null, renderDue = 0;

/* Coalesce redraws; while epochs stream in, redraw at most a few times a second so the page stays responsive. */
export function scheduleRender() {
  const busy = (S.run && S.run.inflight.size) || (S.cmp && S.cmp.inflight.size);
  const due = performance.now() + (busy ? 350 : 30);
  if (renderTimer !== null) {
    if (due >= renderDue) return;
    clearTimeout(renderTimer);
  }
  renderDue = due;
  renderTimer = setTimeout(() => { renderTimer = null; renderAll(); }, Math.max(0, due - performance.now()));
}

onHistory(() => scheduleRender());

/* Redraw now, dropping a scheduled redraw. */
export function renderNow() {
  if (renderTimer !== null) { clearTimeout(renderTimer); renderTimer = null; }
  renderAll();
}

export function renderAll() {
  if (!S.run) return;
  renderHeader();
  renderCurves();
  renderEpochViews();
}

function renderEpochViews() {
  renderSlider();
  syncCustomOverlays();
  const e = selectedEpoch(), ep = e != null ? S.run.epochs.get(e) : null;
  if (ep && ep.light) needEpoch(S.run, e);   // its alerts, overlay values and activation maps are in its file
  S.alertPaths = new Set(ep ? ep.alerts.filter((a) => a.state !== 'resolved').map((a) => String(a.layer)) : []);   // the active
  computeOverlay();
  decorateAll();
  renderAlerts();
  renderPanel();
  renderHeatmaps();
}

function renderSlider() {
  const nums = epochNumbers(S.run), sl = $('#epoch'), lab = $('#epoch-label');
  if (!nums.length) { sl.min = '0'; sl.max = '0'; sl.value = '0'; sl.disabled = true; lab.textContent = 'no epochs'; return; }
  const e = selectedEpoch();
  sl.min = String(nums[0]); sl.max = String(nums[nums.length - 1]);
  sl.disabled = nums.length < 2;
  sl.value = String(e);
  const ep = S.run.epochs.get(e);
  lab.textContent = `epoch ${e}${ep && ep.partial ? ' (partial)' : ''}`;
}

export function onSlider() {
  const v = +$('#epoch').value, nums = epochNumbers(S.run);
  if (!nums.length) return;
  // nearest loaded epoch
  let best = nums[0];
  for (const n of nums) if (Math.abs(n - v) < Math.abs(best - v)) best = n;
  S.epochSel = best === nums[nums.length - 1] ? null : best;   // the last one follows new epochs
  renderEpochViews();
}
