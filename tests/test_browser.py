"The explorer page in a real browser: headless Chromium (Debian's) driven by Playwright, against the real server."
import json, os, shutil, time
from contextlib import contextmanager
from pathlib import Path
import pytest, torch
from fastai.callback.progress import *   # noqa: F403
from torch import nn
from fastai.learner import Learner
from fastexplorer.all import *
from fastexplorer.history import walk_tree
from fastexplorer.formats import validate
from playwright.sync_api import expect   # locator assertions: no eval in the page, which our CSP forbids

CHROMIUM = '/usr/bin/chromium'
ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run']
SHOTS = Path(__file__).parent/'output'

if not os.path.exists(CHROMIUM):
    if os.environ.get('CI'): raise RuntimeError(f"{CHROMIUM} is missing: scripts/test.sh installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (scripts/test.sh installs it)", allow_module_level=True)

@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    "Two digits runs: a sound one and one with a far too high learning rate"
    root = tmp_path_factory.mktemp('runs')
    for name,lr in [('good', 1e-2), ('toohigh', 3.0)]:
        learn = digits_learner(cbs=ExplorerCallback(root/name, every=2, valid=True))
        with learn.no_bar(), learn.no_logging(): learn.fit(3, lr)
    return root

@pytest.fixture(scope='module')
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()

@pytest.fixture
def page(browser):
    "A page that collects console errors and warnings, and uncaught exceptions"
    p = browser.new_page(viewport={'width': 1400, 'height': 900})
    p.problems = []
    def seen(m):   # a resource that failed to load is named by its URL, which the console's text leaves out
        url = (m.location or {}).get('url', '') if m.text.startswith('Failed to load resource') else ''
        p.problems.append(f"{m.type}: {m.text}" + (f" ({url})" if url else ''))
    p.on('console', lambda m: seen(m) if m.type in ('error', 'warning') else None)
    p.on('pageerror', lambda e: p.problems.append(f"pageerror: {e}"))
    yield p
    p.close()

@contextmanager
def serving(page, path):
    "`serve(path)` on any free port for `page`, which leaves for `about:blank` before the server stops: a request the page still had in flight (an older epoch, a step series) ends with the page, not as a refused connection that Chromium logs as an error"
    with serve(path, port=0) as srv:
        try: yield srv
        finally: page.goto('about:blank')

def _n_nodes(run): return len(list(Representation.load(Path(run)/'representation.json')))

def test_page_loads_shows_tree_and_charts(runs, page):
    "The page loads without console errors, shows the run's node count, and a click on a node shows its charts"
    SHOTS.mkdir(exist_ok=True)
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=toohigh')
        page.wait_for_selector('#tree .node .label')
        assert page.locator('#node-count').inner_text().strip() == str(_n_nodes(runs/'toohigh'))
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        page.wait_for_selector('#panel .chart')
        assert '1.2' in page.locator('#panel-title').inner_text()
        assert page.locator('#panel .chart').count() >= 3
        assert page.locator('#alerts .alert').count() >= 1
        page.screenshot(path=str(SHOTS/'explorer.png'), full_page=True)
        page.locator('#tree .node[data-path="4.weight"] .label').first.click()
        expect(page.locator('#panel-title')).to_contain_text('4.weight')
        assert page.locator('#panel .chart').count() >= 2
        page.screenshot(path=str(SHOTS/'explorer-weight.png'), full_page=True)
    assert page.problems == []

def test_alert_links_to_layer(runs, page):
    "Clicking an alert selects its layer"
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=toohigh')
        page.wait_for_selector('#alerts .alert')
        a = page.locator('#alerts .alert').first
        layer = a.get_attribute('data-layer')
        a.click()
        expect(page.locator('#panel-title')).to_contain_text(layer)
    assert page.problems == []

def test_compare_two_runs(runs, page):
    "Two runs side by side: the page shows both without errors"
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good&compare=toohigh')
        page.wait_for_selector('#tree .node .label')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="0.0"] .label').first.click()
        page.wait_for_selector('#panel .chart')
        page.screenshot(path=str(SHOTS/'explorer-compare.png'), full_page=True)
    assert page.problems == []

def test_amp_skipped_steps_and_ranks_shown(runs, page, tmp_path):
    "Epoch files from a mixed-precision DDP run: the page charts the steps the loss scaler skipped and says how many processes"
    shutil.copytree(runs/'good', tmp_path/'scaled')
    for e,skipped in zip((1, 2, 3), (3, 0, 1)):
        f = tmp_path/'scaled'/f'epoch_{e:04d}.json'
        doc = json.loads(f.read_text())
        doc.update(ranks=2, amp={'dtype': 'float16', 'skipped_steps': skipped, 'loss_scale': 1024.})
        validate(doc); save_json(doc, f)
    build_history(tmp_path/'scaled', [f'epoch_{e:04d}.json' for e in (1, 2, 3)])   # the files changed: index them again
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=scaled')
        expect(page.locator('#epoch-count')).to_have_text('3')
        expect(page.locator('#curves')).to_contain_text('steps skipped by the loss scaler')
        expect(page.locator('#ranks-note')).to_have_text('Statistics combined over 2 processes (DistributedDataParallel).')
        expect(page.locator('#alerts')).not_to_contain_text('Loading')   # the latest epoch's file read before this server stops
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good')
        expect(page.locator('#epoch-count')).to_have_text('3')
        expect(page.locator('#curves')).not_to_contain_text('steps skipped')
        expect(page.locator('#ranks-note')).to_have_count(0)
        expect(page.locator('#alerts')).not_to_contain_text('Loading')
    assert page.problems == []

def test_new_epoch_appears_within_2s(runs, page, tmp_path):
    "An epoch file written while the page is open shows up on it by itself within 2 seconds"
    shutil.copytree(runs/'good', tmp_path/'live')
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=live')
        expect(page.locator('#epoch-count')).to_have_text('3')
        time.sleep(0.6)                                    # let the event stream settle
        doc = json.loads((tmp_path/'live'/'epoch_0003.json').read_text()); doc['epoch'] = 4
        save_json(doc, tmp_path/'live'/'epoch_0004.json')
        m = json.loads((tmp_path/'live'/'run.json').read_text()); m['status'] = 'running'
        t = time.monotonic()
        append_line(tmp_path/'live'/'epochs.jsonl', {'epoch': 4, 'file': 'epoch_0004.json', 'partial': False})   # as RunWriter.write_epoch
        save_json(m, tmp_path/'live'/'run.json')
        expect(page.locator('#epoch-count')).to_have_text('4', timeout=2000)
        assert time.monotonic() - t < 2
    assert page.problems == []

def test_report_from_file_shows_same_tree(runs, page, tmp_path):
    "`report.html` opened from `file://` shows the same tree, offline, without errors"
    out = report(runs/'toohigh', tmp_path/'report.html')
    page.goto(out.resolve().as_uri())
    page.wait_for_selector('#tree .node .label')
    assert page.locator('#node-count').inner_text().strip() == str(_n_nodes(runs/'toohigh'))
    page.locator('#tree .node[data-path="1.2"] .label').first.click()
    page.wait_for_selector('#panel .chart')
    page.screenshot(path=str(SHOTS/'report.png'), full_page=True)
    assert page.problems == []

def test_single_run_folder_and_heatmaps(runs, page):
    "A run folder served by itself (as `learn.explore()` does) works, and the activation maps show beside the images"
    with serving(page, runs/'good') as srv:
        page.goto(srv.url)
        page.wait_for_selector('#tree .node .label')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="0.0"] .label').first.click()
        expect(page.locator('#heatmaps canvas').first).to_be_visible()
        page.locator('#heatmaps').screenshot(path=str(SHOTS/'heatmaps.png'))
    assert page.problems == []

def test_landscape_panel(runs, page, tmp_path):
    "A run with a `landscape.json` shows the loss-landscape panel, with its log-scale toggle, without errors"
    import math
    shutil.copytree(runs/'good', tmp_path/'land')
    xs = [i / 5 - 1 for i in range(11)]
    save_json({'schema': 'fastexplorer/landscape', 'version': 1, 'x': xs, 'y': xs,
               'loss': [[1 + x * x + 2 * y * y for x in xs] for y in xs], 'metric': None,
               'trajectory': [[0.5 * math.cos(t / 3), 0.5 * math.sin(t / 3)] for t in range(5)]}, tmp_path/'land'/'landscape.json')
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=land')
        expect(page.locator('#landscape-canvas')).to_be_visible()
        expect(page.locator('#landscape-surface')).to_be_visible()
        box = page.locator('#landscape-surface').bounding_box()
        page.mouse.move(box['x'] + 100, box['y'] + 100); page.mouse.down(); page.mouse.move(box['x'] + 180, box['y'] + 100); page.mouse.up()
        page.locator('#log-scale').check()
        page.locator('#landscape').screenshot(path=str(SHOTS/'landscape.png'))
    assert page.problems == []

def test_custom_stats_and_depth_idx(page, tmp_path):
    "Custom statistics show as charts and as an overlay named after them; the tree shows depth-idx labels"
    def zero_frac(t): return (t == 0).float().mean()
    cb = ExplorerCallback(tmp_path/'custom', every=2, custom={'zero_frac': zero_frac}).add_stat(lambda g: g.abs().mean(), on='grad', name='gabs')
    learn = digits_learner(cbs=cb)
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=custom')
        expect(page.locator('#epoch-count')).to_have_text('2')
        expect(page.locator('#tree .node[data-path="0.2"] .didx').first).to_have_text('2-3')
        page.locator('#tree .node[data-path="0.2"] .label').first.click()
        expect(page.locator('#panel .chart-title', has_text='zero_frac (out)')).to_have_count(1)
        expect(page.locator('#panel .epoch-stats')).to_contain_text('zero_frac (out)')
        page.locator('#tree .node[data-path="1.0"] .label').first.click()
        expect(page.locator('#panel .chart-title', has_text='gabs (grad)')).to_have_count(1)
        page.locator('#overlay').select_option('custom:custom_out|zero_frac')
        expect(page.locator('#overlay-legend')).to_contain_text('custom statistic zero_frac of the outputs')
        assert page.locator('#tree .row.ov-on').count() >= 3
        page.screenshot(path=str(SHOTS/'explorer-custom.png'), full_page=True)
    assert page.problems == []

def test_page_modules_and_worker(runs, page):
    "The page is ES modules of a few hundred lines at most, served as they are and allow-listed; its worker digests the epochs; without the worker it still works"
    import fastexplorer.app as fe
    static = Path(fe.__file__).parent/'static'
    sizes = {p.name: len(p.read_text().splitlines()) for p in static.glob('*.js')}
    assert max(sizes.values()) <= 300, sizes
    seen, workers = [], []
    page.on('response', lambda r: seen.append((r.url.rsplit('/static/', 1)[-1], r.status, r.headers.get('content-type', ''))) if '/static/' in r.url else None)
    page.on('worker', lambda w: workers.append(w.url))
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=toohigh')
        expect(page.locator('#epoch-count')).to_have_text('3')
        mods = {n for n,st,ct in seen if n.endswith('.js') and st == 200 and ct.startswith('text/javascript')}
        assert set(sizes) - {'worker.js'} <= mods <= set(fe._STATIC), (mods, seen)   # every module the package ships, none other
        assert [w.rsplit('/', 1)[-1] for w in workers] == ['worker.js'], workers
        # the worker refused (say, a browser without module workers): the page digests the epochs itself
        page.route('**/static/worker.js', lambda r: r.abort())
        page.goto(srv.url + '?run=good')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(page.locator('#panel .chart').first).to_be_visible()
    assert [p for p in page.problems if 'worker.js' not in p] == []

def test_page_reads_what_it_shows(runs, page):
    "With the run's epoch history, the page reads the latest epoch's file and a layer's history in one request, not every epoch file; an older epoch's file is read when it is selected"
    urls = []
    page.on('request', lambda r: urls.append(r.url))
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        charts = page.locator('#panel .charts[data-history="all"]')
        expect(charts).to_have_count(1)
        # a point for every epoch: epochs 1 and 2 came from the history
        pts = charts.locator('.chart').filter(has_text='activation mean ± std').locator('circle.pt title').all_text_contents()
        assert {t.split(':')[0].split('epoch ')[1] for t in pts} == {'1', '2', '3'}, pts
        expect(page.locator('#alerts-title')).to_contain_text('epoch 3')
        read = lambda: sorted(u.rsplit('/', 1)[1] for u in urls if '/api/runs/good/epochs/' in u)
        assert read() == ['3'] and sum('/api/runs/good/history?' in u for u in urls) == 1, urls
        page.locator('#epoch').fill('1')                                   # the slider: epoch 1's alerts and maps are in its file
        expect(page.locator('#alerts-title')).to_contain_text('epoch 1')
        expect(page.locator('#alerts .note')).not_to_contain_text('Loading')
        assert read() == ['1', '3']
    assert page.problems == []

def test_many_alerts_show_the_first_50_and_a_button(runs, page, tmp_path):
    "An epoch with thousands of alerts (a deep net's) lists the first 50 and a button that shows them all"
    shutil.copytree(runs/'good', tmp_path/'many')
    f = tmp_path/'many'/'epoch_0003.json'
    doc = json.loads(f.read_text())
    doc['alerts'] = [{'kind': 'dead', 'layer': '1.2', 'stat': 'dead_frac', 'value': 1.0, 'message': f'alert {i}'} for i in range(120)]
    validate(doc); save_json(doc, f)
    build_history(tmp_path/'many', [f'epoch_{e:04d}.json' for e in (1, 2, 3)])
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=many')
        expect(page.locator('#alerts .alert')).to_have_count(50)
        expect(page.locator('#alerts .alerts-more')).to_have_text('Show all 120 alerts (70 more)')
        page.locator('#alerts .alerts-more').click()
        expect(page.locator('#alerts .alert')).to_have_count(120)
        expect(page.locator('#alerts .alerts-more')).to_have_count(0)
        page.locator('#alerts .alert').nth(119).click()                    # an alert still selects its layer
        expect(page.locator('#panel-title')).to_contain_text('1.2')
    assert page.problems == []

def _one_epoch(src:Path, dst:Path)->Path:
    "A copy of run `src` cut to its first epoch"
    shutil.copytree(src, dst)
    (dst/'epochs.jsonl').write_text((dst/'epochs.jsonl').read_text().splitlines(keepends=True)[0])
    return dst

def test_served_run_folder_is_named_by_its_folder(runs, page, tmp_path):
    "A run folder served by itself (the run `~`) is called by its folder's name in the header, the title and the report"
    with serving(page, runs/'good') as srv:
        page.goto(srv.url)
        expect(page.locator('#epoch-count')).to_have_text('3')
        expect(page.locator('#run-id')).to_have_text('good')
        expect(page).to_have_title('good · Sequential · fastexplorer')
        expect(page.locator('#alerts')).not_to_contain_text('Loading')   # its requests done before this server stops
    out = report(runs/'good', tmp_path/'report.html')
    page.goto(out.resolve().as_uri())
    expect(page.locator('#run-id')).to_have_text('good')
    expect(page).to_have_title('good · Sequential · fastexplorer')
    assert page.problems == []

def test_unknown_run_offers_the_runs(runs, page):
    "A run id that is not there (`?run=nope`) is an error listing the runs there are as links, with no console error"
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=nope')
        expect(page.locator('#message')).to_contain_text('no run "nope"')
        links = page.locator('#message a')
        expect(links).to_have_text(['good', 'toohigh'])
        assert [links.nth(i).get_attribute('href') for i in range(2)] == ['?run=good', '?run=toohigh']
        links.nth(1).click()
        expect(page.locator('#run-id')).to_have_text('toohigh')
        expect(page.locator('#epoch-count')).to_have_text('3')
        expect(page.locator('#message')).to_be_hidden()
        page.goto(srv.url + '?run=good&compare=nope')                 # a compared run that is not there: a warning, the run shows
        expect(page.locator('#message')).to_contain_text('no run "nope" here to compare with')
        expect(page.locator('#message a')).to_have_attribute('href', '?run=good&compare=toohigh')
        expect(page.locator('#epoch-count')).to_have_text('3')
    assert page.problems == []

def test_a_folder_with_no_run_says_so_once(page, tmp_path):
    "A served folder holding no run (issue 46): one message saying what a run folder is, not a second 'no run here' line under it"
    with serving(page, tmp_path) as srv:
        page.goto(srv.url)
        expect(page.locator('#message')).to_have_text('No runs here yet: a run folder appears once ExplorerCallback has '
                                                       'written its run.json. Reload this page once a fit has started.')
    assert page.problems == []

def test_counts_are_singular_for_one(runs, page, tmp_path):
    "The header says `1 epoch`, and `3 epochs`: plural only when the count is not one"
    _one_epoch(runs/'good', tmp_path/'one')
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=one')
        expect(page.locator('#header .count').first).to_have_text('1 epoch')
        expect(page.locator('#header .count').nth(1)).to_have_text(f"{_n_nodes(runs/'good')} nodes")
        expect(page.locator('#curves .step-block[data-drawn]')).to_have_count(1)   # loading done before this server stops
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good')
        expect(page.locator('#header .count').first).to_have_text('3 epochs')
        expect(page.locator('#curves .step-block[data-drawn]')).to_have_count(1)
    assert page.problems == []

def test_sidebar_runs_the_full_height(runs, page):
    "On a page longer than the window the sidebar's background reaches the bottom, and its tools stay in view as it scrolls"
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=toohigh')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(page.locator('#panel .chart').first).to_be_visible()
        expect(page.locator('.step-block[data-drawn]')).to_have_count(2)   # the step charts (panel, training) arrive after the click
        page.wait_for_timeout(100)
        side, main = page.locator('#side').bounding_box(), page.locator('#main').bounding_box()
        assert main['height'] > 1200, main                      # taller than the 900-pixel window
        assert abs(side['y'] + side['height'] - (main['y'] + main['height'])) < 2, (side, main)
        page.mouse.move(900, 500); page.mouse.wheel(0, 5000)
        page.wait_for_timeout(200)
        box = page.locator('#search').bounding_box()
        assert 0 < box['y'] < 200, box                          # the search box stuck below the header
    assert page.problems == []

def _yticks(page, title:str, where='#panel')->list:
    "The y-axis tick values of the chart titled `title` in `where`"
    ch = page.locator(f"{where} .chart:not(.step-charts .chart)").filter(has=page.locator('.chart-title', has_text=title)).first
    return [float(t) for t in ch.locator('text.tick[text-anchor="end"]').all_text_contents()]

def test_fractions_on_0_1_and_bands_within_min_max(runs, page):
    "A fraction is drawn on [0, 1]; a ReLU's mean ± std band stays within its observed min and max, so never below 0"
    with serving(page, runs) as srv:
        for run in ('good', 'toohigh'):
            page.goto(srv.url + f'?run={run}')
            expect(page.locator('#epoch-count')).to_have_text('3')
            page.locator('#tree .node[data-path="1.2"] .label').first.click()
            expect(page.locator('#panel .chart-title', has_text='dead fraction')).to_have_count(1)
            for t in ('dead fraction', 'near-zero fraction'):
                ys = _yticks(page, t)
                assert (min(ys), max(ys)) == (0, 1), (run, t, ys)
            ys = _yticks(page, 'activation mean ± std')
            assert min(ys) >= 0, (run, ys)
    assert page.problems == []

def test_flat_activation_maps(runs, page):
    "A flat map (1×1 after `AdaptiveAvgPool2d`) is one colour, not black, labelled with its single value"
    import io
    from PIL import Image
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="2"] .label').first.click()
        expect(page.locator('#heatmaps .hm-layer')).to_have_text(['2'])
        caps = page.locator('#heatmaps .hm-cell').filter(has=page.locator('canvas')).locator('.hm-cap').all_inner_texts()[4:]
        assert len(caps) == 4 and all('…' not in c and float(c) > 0 for c in caps), caps
        for i in range(4):
            im = Image.open(io.BytesIO(page.locator('#heatmaps canvas.hm-img').nth(4 + i).screenshot())).convert('RGB')
            px = {c for _,c in im.crop((4, 4, im.width - 4, im.height - 4)).getcolors()}
            assert len(px) == 1 and sum(px.pop()) > 120, (i, px)   # one colour, and not the colour map's black
    assert page.problems == []

def _edit_stats(run:Path, f, doc_f=None):
    "Apply `f(act_stats)` to every activation-stats entry of every epoch file of `run` (and `doc_f(doc)` to each file), then index the files again (`build_history`)"
    files = sorted(run.glob('epoch_*.json'))
    for p in files:
        doc = json.loads(p.read_text())
        if doc_f is not None: doc_f(doc)
        def walk(n):
            for k in ('act', 'valid_act'):
                if (a := (n.get('xtra') or {}).get('stats', {}).get(k)): f(a)
            for c in n.get('nodes', []): walk(c)
        walk(doc['tree']); save_json(doc, p)
    build_history(run, [p.name for p in files])

def _act(run:Path, e:int, path:str)->dict:
    "The training activation stats of layer `path` in epoch `e` of `run`"
    def find(n): return n if n.get('path') == path else next((r for c in n.get('nodes', []) if (r := find(c))), None)
    return find(json.loads((run/f'epoch_{e:04d}.json').read_text())['tree'])['xtra']['stats']['act']

def test_histogram_fits_the_values_and_marks_values_outside(runs, page, tmp_path):
    "The activation histogram's y range fits where the values are, and values outside the layer's bins are marked and counted"
    shutil.copytree(runs/'toohigh', tmp_path/'counted'); shutil.copytree(runs/'toohigh', tmp_path/'older')
    _edit_stats(tmp_path/'counted', lambda a: a.update(hist_out=[0, 123] if a['max'] >= a['hist_range'][1] else [0, 0]))
    def old_file(doc): doc['hist']['range'] = [-10, 10]   # files from before each layer had its own bins: one range, in the file
    _edit_stats(tmp_path/'older', lambda a: [a.pop(k, None) for k in ('hist_out', 'hist_range')], old_file)
    shutil.copytree(runs/'toohigh', tmp_path/'unsampled')
    _edit_stats(tmp_path/'unsampled', lambda a: a.update(hist_out=[0, 0]))  # the max beyond the range, but no sampled value
    shutil.copytree(runs/'good', tmp_path/'good')
    hist = page.locator('#hist-heatmap')
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=good')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="0.0"] .label').first.click()   # values in about -3..2.6
        lo,hi = _act(tmp_path/'good', 3, '0.0')['hist_range']             # the layer's own bins, fitted to its first batch
        assert lo < -3 and hi > 2.6 and hi - lo < 20, (lo, hi)
        expect(hist).to_have_attribute('data-range', f'{lo:g},{hi:g}')
        y0, y1 = float(hist.get_attribute('data-y0')), float(hist.get_attribute('data-y1'))
        assert -4.5 <= y0 < -2 and 2 < y1 <= 4.5, (y0, y1)
        expect(page.locator('#panel .hist-out')).to_have_count(0)
        page.goto(srv.url + '?run=counted')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()   # a ReLU that lr 3 pushes far beyond its first values
        top = _act(tmp_path/'counted', 1, '1.2')['hist_range'][1]
        over = [e for e in (1, 2, 3) if _act(tmp_path/'counted', e, '1.2')['max'] >= top]
        assert over, 'the lr=3 run should push the ReLU beyond its bins'
        expect(page.locator('#panel .hist-out')).to_contain_text(f"▲ {123 * len(over)} sampled values")
        expect(page.locator('#panel .hist-out')).to_contain_text(f"at or above {top:g} in epoch{'s' if len(over) > 1 else ''} {', '.join(map(str, over))}")
        assert float(hist.get_attribute('data-y1')) == top and float(hist.get_attribute('data-y0')) >= -1
        page.goto(srv.url + '?run=older')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(hist).to_have_attribute('data-range', '-10,10')            # the file's one range
        old = [_act(tmp_path/'older', e, '1.2')['max'] for e in (1, 2, 3)]
        assert max(old) >= 10, old
        expect(page.locator('#panel .hist-out')).to_contain_text(f"values at or above 10 (max {float(f'{max(old):.3g}'):g})")
        expect(page.locator('#panel .hist-out')).to_contain_text('how many these files do not record')
        for i in range(3):      # the panel is drawn again when the older epochs arrive: take the picture of the settled one
            try: hist.screenshot(path=str(SHOTS/'hist-out.png')); break
            except Exception:
                if i == 2: raise
                page.wait_for_timeout(300)
        page.goto(srv.url + '?run=unsampled')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        mx = max(_act(tmp_path/'unsampled', e, '1.2')['max'] for e in over)
        expect(page.locator('#panel .hist-out')).to_contain_text(f"the max ({float(f'{mx:.3g}'):g}) lay at or above {top:g}, but none of the sampled values")
    assert page.problems == []

def test_landscape_says_what_its_directions_are(runs, page, tmp_path):
    "The landscape card's subtitle, axes and legend follow landscape.json's `directions`: random ones have no trajectory, and no `null` shows"
    xs = [i / 5 - 1 for i in range(11)]
    grid = dict(schema='fastexplorer/landscape', version=1, x=xs, y=xs, loss=[[1 + x * x + 2 * y * y for x in xs] for y in xs],
                metric=[[0.9 - 0.1 * x * x for x in xs] for y in xs], metric_name='accuracy')
    for name,extra in [('random', dict(directions='random', seed=7, trajectory=None)),
                       ('pca', dict(directions='pca', seed=None, trajectory=[[0.8, 0.6], [0.3, 0.2], [0., 0.]]))]:
        shutil.copytree(runs/'good', tmp_path/name)
        doc = {**grid, **extra}; validate(doc); save_json(doc, tmp_path/name/'landscape.json')
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=random')
        expect(page.locator('#landscape h2 .sub')).to_have_text('around the final weights, along two random filter-normalised directions (seed 7)')
        expect(page.locator('#landscape-legend')).to_have_text('loss1 … 4')
        page.locator('#landscape-what').select_option('metric')
        expect(page.locator('#landscape-legend')).to_contain_text('accuracy')
        page.goto(srv.url + '?run=pca')
        expect(page.locator('#landscape h2 .sub')).to_contain_text('in the plane of the training trajectory')
        expect(page.locator('#landscape-legend')).to_contain_text('○ trajectory · ● final')
        expect(page.locator('#landscape-legend')).not_to_contain_text('null')
    assert page.problems == []

def test_compare_gives_each_run_its_own_loss_scale(runs, page):
    "In compare mode each run's loss has a chart and a y scale of its own, so the smaller loss is not flattened"
    losses = {r: [m for e in load_run(runs/r).epochs for k,m in e['recorder'].items() if k.endswith('loss')] for r in ('good', 'toohigh')}
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good&compare=toohigh')
        expect(page.locator('#compare-info')).to_contain_text('vs toohigh')
        expect(page.locator('#curves .chart[data-run]')).to_have_count(2)
        expect(page.locator('#curves .chart[data-run="good"] .chart-title')).to_have_text('loss · good')
        expect(page.locator('#curves .chart[data-run="toohigh"] .chart-title')).to_have_text('loss · toohigh')
        expect(page.locator('#curves .chart[data-run="toohigh"] path.line[stroke-dasharray]')).to_have_count(2)
        for r in ('good', 'toohigh'):
            ys = _yticks(page, f'loss · {r}', '#curves')
            lo, hi = min(losses[r]), max(losses[r])
            assert ys[0] <= lo and hi <= ys[-1] and ys[-1] - ys[0] < 3 * (hi - lo), (r, ys, lo, hi)   # fitted to this run's losses
        page.screenshot(path=str(SHOTS/'compare-losses.png'))
    assert page.problems == []

class _TwiceReLU(nn.Module):
    "One `ReLU` called twice in each forward: on the flattened image (64 features), then on the hidden layer (16)"
    def __init__(self):
        super().__init__()
        self.lin1,self.relu,self.lin2 = nn.Linear(64, 16),nn.ReLU(),nn.Linear(16, 10)
    def forward(self, x): return self.lin2(self.relu(self.lin1(self.relu(x.flatten(1)))))

def test_each_call_of_a_module_has_its_row(page, tmp_path):
    "A module called twice shows a row for its second call (`relu#2`) under its own, whose panel has that call's statistics, step charts included"
    learn = Learner(digits_dls(), _TwiceReLU(), loss_func=nn.CrossEntropyLoss(), cbs=ExplorerCallback(tmp_path/'twice', every=4))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=twice')
        row = page.locator('#tree .node[data-path="relu#2"]')
        expect(row).to_have_attribute('data-type', 'Call')
        expect(row.locator('.name').first).to_have_text('call 2')
        expect(page.locator('#node-count')).to_have_text(str(_n_nodes(tmp_path/'twice')))   # the representation's nodes
        row.locator('.label').first.click()
        expect(page.locator('#panel-title')).to_contain_text('relu#2')
        expect(page.locator('#panel')).to_contain_text('2 of 2 of relu')
        expect(page.locator('#panel .step-block[data-drawn]').first).to_be_visible()
        expect(page.locator('#panel .charts[data-history="all"]')).to_have_count(1)
        page.screenshot(path=str(SHOTS/'calls.png'), full_page=True)
    assert page.problems == []

class _AuxScripted(nn.Module):
    "A scripted body, and an auxiliary head that runs only in training (as googlenet's and inception's)"
    def __init__(self):
        super().__init__()
        self.body = torch.jit.script(nn.Sequential(nn.Linear(64, 16), nn.ReLU()))
        self.head,self.aux = nn.Linear(16, 10),nn.Linear(16, 10)
    def forward(self, x):
        h = self.body(x.flatten(1))
        return self.head(h) + 0 * self.aux(h) if self.training else self.head(h)

def test_panel_says_why_a_node_has_no_shape(page, tmp_path):
    "A node the probe could not see into says so in its panel: a scripted module (no hooks) and a head run only in training (the probe runs in eval mode)"
    learn = Learner(digits_dls(), _AuxScripted(), loss_func=nn.CrossEntropyLoss(), cbs=ExplorerCallback(tmp_path/'aux', every=4))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=aux')
        for path,says in [('aux', 'runs in eval mode'), ('body', 'TorchScript: shapes not recorded')]:
            page.locator(f'#tree .node[data-path="{path}"] .label').first.click()
            expect(page.locator('#panel-title')).to_contain_text(path)
            expect(page.locator('#panel .kv').first).to_contain_text(says)
        page.screenshot(path=str(SHOTS/'notes.png'), full_page=True)
    assert page.problems == []

def test_page_says_what_it_does_not_show(runs, page, tmp_path):
    "A run without validation statistics says how to record them; in compare mode the maps, the landscape and the step histogram name the one run they show"
    shutil.copytree(runs/'good', tmp_path/'land'); shutil.copytree(runs/'toohigh', tmp_path/'other')
    xs = [i / 2 - 1 for i in range(5)]
    save_json({'schema': 'fastexplorer/landscape', 'version': 1, 'x': xs, 'y': xs, 'loss': [[1 + x * x + y * y for x in xs] for y in xs],
               'metric': None}, tmp_path/'land'/'landscape.json')
    _edit_stats(tmp_path/'other', lambda a: None, lambda doc: [(n.get('xtra') or {}).get('stats', {}).pop('valid_act', None) for n in walk_tree(doc['tree'])])
    with serving(page, tmp_path) as srv:
        page.goto(srv.url + '?run=other')
        expect(page.locator('#epoch-count')).to_have_text('3')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(page.locator('#panel .no-valid')).to_contain_text('ExplorerCallback(valid=True)')
        page.goto(srv.url + '?run=land')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(page.locator('#panel .chart').first).to_be_visible()
        expect(page.locator('#panel .no-valid')).to_have_count(0)            # validation lines are there
        expect(page.locator('#landscape-sub')).not_to_contain_text('only')
        page.goto(srv.url + '?run=land&compare=other')
        expect(page.locator('#compare-info')).to_be_visible()
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(page.locator('#landscape-sub')).to_contain_text('of run land only')
        expect(page.locator('#heatmaps')).to_contain_text('Of run land only')
        expect(page.locator('#alerts-title')).to_contain_text('of run land (open other for its own)')
        expect(page.locator('.step-panel .chart-title', has_text='activation histogram')).to_have_text('activation histogram (land)')
        page.set_viewport_size({'width': 1400, 'height': 900})
        head = page.locator('#header').bounding_box()
        assert head['height'] < 60, head                                    # one line at 1400 px
        page.screenshot(path=str(SHOTS/'compare-notes.png'), full_page=True)
    assert page.problems == []

def _shapes_folder(root:Path, n:int=12, size:int=16)->Path:
    "`n` grey PNGs each of a circle, a square and a triangle at random places, in a folder per class (`triangle/3.png`)"
    import numpy as np
    from PIL import Image
    rng,(yy,xx) = np.random.default_rng(0),np.mgrid[:size, :size]
    draw = {'circle': lambda c, r: (yy - c[0]) ** 2 + (xx - c[1]) ** 2 <= r * r,
            'square': lambda c, r: (abs(yy - c[0]) <= r) & (abs(xx - c[1]) <= r),
            'triangle': lambda c, r: (yy >= c[0] - r) & (yy <= c[0] + r) & (abs(xx - c[1]) <= (yy - c[0] + r) / 2)}
    for k,f in draw.items():
        (root/k).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            m = f(rng.uniform(5, size - 5, 2), rng.uniform(3, 5))
            Image.fromarray((40 + 180 * m + rng.normal(0, 10, m.shape)).clip(0, 255).astype(np.uint8)).save(root/k/f'{i}.png')
    return root

def test_activation_maps_label_samples_by_class_name(page, tmp_path):
    """Issue 46: `ImageDataLoaders.from_folder` over circles, squares and triangles: the activation maps' samples were
    captioned `y = 2`; the DataLoaders' vocab names the class, `triangle`"""
    from fastai.vision.all import ImageDataLoaders, Resize
    dls = ImageDataLoaders.from_folder(_shapes_folder(tmp_path/'shapes'), valid_pct=0.25, seed=0, item_tfms=Resize(16),
                                       bs=8, num_workers=0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    learn = Learner(dls, model, loss_func=nn.CrossEntropyLoss(), cbs=ExplorerCallback(tmp_path/'run', every=2))
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    doc = json.loads((tmp_path/'run'/'epoch_0001.json').read_text())
    validate(doc)   # the schema knows the new field
    samples = doc['heatmaps']['samples']
    want = [dls.vocab[int(s['target'])] for s in samples]
    assert set(want) <= {'circle', 'square', 'triangle'} and [s['label'] for s in samples] == want, samples
    with serving(page, tmp_path/'run') as srv:
        page.goto(srv.url)
        page.locator('#tree .node[data-path="0"] .label').first.click()
        expect(page.locator('#heatmaps canvas').first).to_be_visible()
        caps = page.locator('#heatmaps .hm-cell').locator('.hm-cap').all_inner_texts()[:len(want)]
        assert caps == want, caps
    assert page.problems == []
