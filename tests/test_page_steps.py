"The page's step charts in a real browser (Debian's Chromium, Playwright) against the real server: layers, parameters, zoom, live steps and alerts, the report."
import json, shutil, time
from pathlib import Path
import numpy as np
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from fastexplorer.stepdb import StepWriter, table_stats
from fastexplorer.stepseries import step_info, open_steps, layer_range
from fastexplorer.steps import step_layout
ACT_STATS,GRAD_STATS = table_stats(step_layout(), 'act'),table_stats(step_layout(), 'grad')   # the step database's columns
from playwright.sync_api import expect

from test_browser import browser, page, runs, serving, SHOTS   # noqa: F401  (the browser fixtures, and its skip without chromium)

def _step_chart(page, title:str, where='#panel'):
    return page.locator(f'{where} .step-charts .chart').filter(has=page.locator('.chart-title', has_text=title)).first

def _titles(page, where='#panel')->list: return page.locator(f'{where} .step-charts .chart-title').all_text_contents()

def _yticks(ch)->list: return [float(t) for t in ch.locator('text.tick[text-anchor="end"]').all_text_contents()]

def _range(page, where='#panel')->tuple:
    r = page.locator(f'{where} .step-block').get_attribute('data-range')
    return tuple(map(int, r.split(','))) if r else None

def _open(page, url:str, path:str):
    page.goto(url)
    expect(page.locator('#epoch-count')).to_have_text('3')
    page.locator(f'#tree .node[data-path="{path}"] .label').first.click()
    expect(page.locator('#panel .step-block')).to_have_attribute('data-range', __import__('re').compile(r'\d+,\d+'))
    # the layer's history and the latest epoch's file are in: nothing above the step charts moves any more
    expect(page.locator('#panel .charts[data-history="all"]')).to_have_count(1)
    expect(page.locator('#alerts')).not_to_contain_text('Loading')

def test_step_charts_for_a_layer_a_parameter_and_training(runs, page):
    "A layer's step charts (mean, std, silent and near-zero fractions on [0, 1], histogram), a parameter's, the loss and lr, with epoch boundaries"
    info = step_info(runs/'toohigh')
    with serving(page, runs) as srv:
        _open(page, srv.url + '?run=toohigh', '0.2')
        assert _titles(page) == ['activation mean', 'activation std', 'near-zero fraction', 'silent fraction', 'activation histogram']
        assert _range(page) == (0, info['last_step'])
        for t in ('silent fraction', 'near-zero fraction'): assert (min(ys := _yticks(_step_chart(page, t))), max(ys)) == (0, 1), (t, ys)
        ch = _step_chart(page, 'activation mean')
        assert ch.locator('line.vline').count() == len(info['epochs']) - 1, 'a line where each epoch after the first starts'
        assert ch.locator('polygon.band').count() >= 1, 'the min-max band of the buckets'
        assert ch.locator('text.vlabel').all_text_contents() == [f"e{e['epoch']}" for e in info['epochs'][1:]]
        hist = page.locator('#panel canvas.step-hist')
        con = open_steps(runs/'toohigh'); lo,hi = layer_range(con, '0.2'); con.close()   # the layer's own bins
        assert int(hist.get_attribute('data-columns')) > 10 and hist.get_attribute('data-range') == f'{lo:g},{hi:g}'
        expect(page.locator('#panel .step-hist-out')).to_contain_text('above')    # lr=3: values beyond the recording range
        assert page.locator('#panel .epoch-head').count() == 1 and page.locator('#panel .chart-title', has_text='dead fraction').count() == 1, 'the epoch charts stay, below'
        page.screenshot(path=str(SHOTS/'steps-layer.png'), full_page=True)
        page.locator('#tree .node[data-path="0.0.weight"] .label').first.click()
        expect(page.locator('#panel .step-charts .chart-title')).to_have_text(['gradient norm', 'update ratio'])
        assert _step_chart(page, 'gradient norm').locator('path.line').count() == 1
        assert _titles(page, '#curves') == ['loss', 'learning rate']
        assert _step_chart(page, 'loss', '#curves').locator('path.line').count() == 2, 'loss and smooth_loss'
    assert page.problems == []

def test_drag_zooms_every_step_chart_and_requeries(runs, page):
    "A drag across a step chart narrows every step chart of the panel to that range, asking the server for it; a double-click resets"
    asked = []
    page.on('request', lambda r: asked.append(r.url) if '/steps/' in r.url else None)
    with serving(page, runs) as srv:
        _open(page, srv.url + '?run=good', '1.2')
        full = _range(page)
        box = _step_chart(page, 'activation std').locator('.plot-box').bounding_box()
        y = box['y'] + box['height'] / 2
        asked.clear()
        page.mouse.move(box['x'] + box['width'] * 0.4, y); page.mouse.down()
        page.mouse.move(box['x'] + box['width'] * 0.6, y, steps=4); page.mouse.up()
        expect(page.locator('#panel .step-block')).not_to_have_attribute('data-range', f'{full[0]},{full[1]}')
        lo,hi = _range(page)
        assert full[0] < lo < hi < full[1] and hi - lo < (full[1] - full[0]) / 2, (full, lo, hi)
        assert any(f'start={lo}' in u and f'stop={hi}' in u for u in asked), asked
        ticks = [float(t) for t in _step_chart(page, 'silent fraction').locator('text.tick[text-anchor="middle"]').all_text_contents()]
        assert ticks and lo <= min(ticks) and max(ticks) <= hi, ticks
        assert _range(page, '#curves') == (lo, hi), 'the training card shares the range'
        page.screenshot(path=str(SHOTS/'steps-zoomed.png'), full_page=True)
        _step_chart(page, 'activation mean').locator('.plot-box').dblclick()
        expect(page.locator('#panel .step-block')).to_have_attribute('data-range', f'{full[0]},{full[1]}')
    assert page.problems == []

def _append_steps(run:Path, first:int, n:int, epoch:int):
    "Write `n` sampled training batches from step `first` on, with every layer's and parameter's statistics, as the callback's writer does"
    info,m = step_info(run),json.loads((run/'run.json').read_text())
    w = StepWriter(run, m['hist']['bins'], m['hist']['range'] and tuple(m['hist']['range']))
    L,P,k = info['layers'],info['params'],m['hist']['bins'] + 2
    act = np.array([[i, j, *np.full(len(ACT_STATS), 0.5), *np.ones(k)] for i in range(n) for j in range(len(L))])
    grad = np.array([[i, j, *np.full(len(GRAD_STATS), 0.01)] for i in range(n) for j in range(len(P))])
    w.append([{'step': first + 2 * i, 'fit': 0, 'epoch': epoch, 'split': 'train', 'iter': i, 'loss': 1., 'smooth_loss': 1.,
               'hypers': [{'lr': 1e-3}]} for i in range(n)], L, act, P, grad)
    w.close()

def test_new_steps_and_live_alert_appear_without_reload(runs, page, tmp_path):
    "Steps written while the page is open reach every step chart within 2 s; a live alert shows, raised at its step, before its epoch file exists"
    shutil.copytree(runs/'good', tmp_path/'live')
    last = step_info(tmp_path/'live')['last_step']
    with serving(page, tmp_path) as srv:
        _open(page, srv.url + '?run=live', '1.2')
        assert _range(page) == (0, last)
        time.sleep(0.6)                                              # let the event stream settle
        t = time.monotonic()
        _append_steps(tmp_path/'live', last + 2, 10, 4)
        expect(page.locator('#panel .step-block')).to_have_attribute('data-range', f'0,{last + 20}', timeout=2000)
        assert time.monotonic() - t < 2
        expect(page.locator('#curves .step-block')).to_have_attribute('data-range', f'0,{last + 20}')
        assert _step_chart(page, 'activation mean').locator('text.vlabel', has_text='e4').count() == 1, 'the new epoch is marked'
        m = json.loads((tmp_path/'live'/'run.json').read_text())
        m['status'] = 'running'
        m['live_alerts'] = [{'kind': 'nonfinite', 'layer': '1.0', 'stat': 'nan', 'value': 12, 'message': 'NaN in the outputs of `1.0`',
                             'epoch': 4, 'step': last + 6}]
        t = time.monotonic()
        save_json(m, tmp_path/'live'/'run.json')
        expect(page.locator('#alerts .alert.live')).to_contain_text(f'raised at step {last + 6} of epoch 4', timeout=2000)
        assert time.monotonic() - t < 2
        page.screenshot(path=str(SHOTS/'steps-live.png'), full_page=True)
        page.locator('#alerts .alert.live').click()
        expect(page.locator('#panel-title')).to_contain_text('1.0')
    assert page.problems == []

def test_compare_draws_the_other_runs_steps_dashed(runs, page):
    "In compare mode the compared run's step series are drawn dashed on the same charts"
    with serving(page, runs) as srv:
        page.goto(srv.url + '?run=good&compare=toohigh')
        expect(page.locator('#compare-info')).to_contain_text('vs toohigh')
        page.locator('#tree .node[data-path="1.2"] .label').first.click()
        expect(_step_chart(page, 'activation std').locator('path.line[stroke-dasharray]')).to_have_count(2)   # train and valid
        expect(_step_chart(page, 'loss', '#curves').locator('path.line[stroke-dasharray]')).to_have_count(2)
    assert page.problems == []

def test_report_shows_step_charts_offline(runs, page, tmp_path):
    "`report.html` from `file://` embeds the step series: the same step charts, zoomable to its resolution, without a console error"
    out = report(runs/'toohigh', tmp_path/'report.html')
    page.goto(out.resolve().as_uri())
    page.wait_for_selector('#tree .node .label')
    page.locator('#tree .node[data-path="0.2"] .label').first.click()
    expect(page.locator('#panel .step-charts .chart-title')).to_have_count(5)
    expect(page.locator('#panel .step-head')).to_contain_text('embedded resolution')
    assert _step_chart(page, 'activation mean').locator('line.vline').count() == 2
    _step_chart(page, 'activation std').scroll_into_view_if_needed()   # below the fold when the run has several alerts
    box = _step_chart(page, 'activation std').locator('.plot-box').bounding_box()
    page.mouse.move(box['x'] + box['width'] * 0.3, box['y'] + 20); page.mouse.down()
    page.mouse.move(box['x'] + box['width'] * 0.7, box['y'] + 20, steps=4); page.mouse.up()
    lo,hi = _range(page)
    assert 0 < lo < hi < step_info(runs/'toohigh')['last_step']
    page.locator('#tree .node[data-path="4.weight"] .label').first.click()
    expect(page.locator('#panel .step-charts .chart-title')).to_have_text(['gradient norm', 'update ratio'])
    assert _titles(page, '#curves') == ['loss', 'learning rate']
    page.screenshot(path=str(SHOTS/'steps-report.png'), full_page=True)
    assert page.problems == []
    print(f"report of the digits run: {out.stat().st_size / 1e6:.2f} MB")

def test_a_declared_statistic_reaches_the_page(tmp_path, page):
    "A statistic added to `ACT_STATS` (patched in, as one more line there) is charted over steps and listed in the epoch's table"
    from unittest import mock
    from fastexplorer import stats
    rms = Statistic('rms', 'root mean square of the finite outputs', f=lambda c: (c['sumsq'] / c['finite'].clamp(min=1)).sqrt(),
                    charted=True, label='activation RMS')
    with mock.patch.object(stats, 'ACT_STATS', stats.ACT_STATS + (rms,)):
        learn = digits_learner(cbs=ExplorerCallback(tmp_path/'rms', every=2, valid=True))
        with learn.no_bar(), learn.no_logging(): learn.fit(3, 1e-2)
    with serving(page, tmp_path) as srv:
        _open(page, srv.url + '?run=rms', '1.2')
        assert _titles(page)[:5] == ['activation mean', 'activation std', 'near-zero fraction', 'activation RMS', 'silent fraction']
        expect(page.locator('#panel .epoch-stats').first).to_contain_text('activation RMS')
        page.screenshot(path=str(SHOTS/'declared-statistic.png'), full_page=True)
    assert page.problems == []
