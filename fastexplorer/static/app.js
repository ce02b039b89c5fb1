/* The page's entry point: wires the controls to their handlers and starts loading, from the server or a report's data. */
// Plain JavaScript modules, no library, no build step; `report()` inlines them in dependency order for file://.
import { $ } from './util.js';
import { S, REPORT } from './state.js';
import { onTreeClick, onTreeDblClick, onTreeKey, runSearch, decorateAll, selectPath } from './tree.js';
import { computeOverlay } from './overlay.js';
import { onSlider } from './render.js';
import { onAlertClick } from './curves.js';
import { fatal } from './header.js';
import { startServer, startReport } from './load.js';
import { wireZoom } from './steps.js';

function wire() {
  S.overlay = $('#overlay').value;
  // the tree column sticks below the header, whatever its height
  const hdr = $('#header'), setHdr = () => document.documentElement.style.setProperty('--hdr', hdr.offsetHeight + 'px');
  setHdr();
  if (typeof ResizeObserver !== 'undefined') new ResizeObserver(setHdr).observe(hdr);
  const tree = $('#tree');
  tree.addEventListener('click', onTreeClick);
  tree.addEventListener('dblclick', onTreeDblClick);
  tree.addEventListener('keydown', onTreeKey);
  $('#search').addEventListener('input', runSearch);
  $('#overlay').addEventListener('change', () => { S.overlay = $('#overlay').value; computeOverlay(); decorateAll(); });
  $('#epoch').addEventListener('input', onSlider);
  wireZoom($('#main'));
  $('#alerts').addEventListener('click', onAlertClick);
  $('#alerts').addEventListener('keydown', onAlertClick);
  $('#heatmaps').addEventListener('click', (e) => {
    const a = e.target.closest('.hm-layer');
    if (!a) return;
    e.preventDefault();
    selectPath(a.dataset.layer, true);
  });
}

wire();
try {
  if (REPORT) startReport();
  else startServer().catch((e) => fatal(String(e && e.message ? e.message : e)));
} catch (e) { fatal(String(e && e.message ? e.message : e)); }
