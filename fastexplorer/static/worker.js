/* The page's worker: fetches epoch files, node histories and optional files off the main thread and digests epochs (server mode only). */
import { digestEpoch } from './digest.js';

/* {id, op: 'epoch'|'history'|'probe', url} -> {id, status, ep|text}. Reading and parsing big files here keeps the page responsive;
   and a 404 fetched here (landscape.json is optional) is not logged to the page's console. */
self.onmessage = async (e) => {
  const { id, op, url } = e.data || {};
  let status = 0, text = null, ep = null;
  try {
    const r = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
    status = r.status;
    if (r.ok) {
      if (op === 'epoch') ep = digestEpoch(await r.json(), true);
      else if (op === 'history') {
        ep = await r.json();
        for (const k of Object.keys(ep)) ep[k] = ep[k].map(([n, s]) => [n, JSON.stringify(s)]);
      }
      else text = await r.text();
    }
  } catch (err) { if (status === 200) status = -1; }
  self.postMessage({ id, status, text, ep });
};
