"""Regenerate the screenshots of `nbs/tutorial.ipynb`: `python scripts/tutorial_images.py`

Trains the tutorial's two runs (the same code and seeds as the notebook), serves them with fastexplorer's server on a
free port, drives Debian's headless Chromium with Playwright, and writes `nbs/images/tutorial_*.png`."""
import argparse, tempfile
from pathlib import Path
import torch
from fastai.basics import *
from fastai.callback.all import *
from fastexplorer.all import *
from playwright.sync_api import sync_playwright, expect

CHROMIUM = '/usr/bin/chromium'
ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run']
IMAGES = Path(__file__).resolve().parent.parent/'nbs'/'images'

def train(root:Path):
    "The tutorial's two runs, as its cells train them: `toohigh` (lr 3) and `fixed` (lr 1e-2)"
    torch.set_num_threads(1)
    for name,lr in [('toohigh', 3.0), ('fixed', 1e-2)]:
        set_seed(42, reproducible=True)
        learn = digits_learner(cbs=ExplorerCallback(root/name, every=2, valid=True))
        with learn.no_bar(), learn.no_logging(): learn.fit(3, lr=lr)
    # the story the screenshots tell, checked as the notebook checks it
    bad,good = load_run(root/'toohigh'),load_run(root/'fixed')
    assert set(bad.alerts.query('epoch == 3').layer) == {'1.1', '1.2'} and len(good.alerts) == 0, (bad.alerts, good.alerts)

def select(page, path:str):
    "Click the tree node `path` and wait for its charts"
    page.locator(f'#tree .node[data-path="{path}"] .label').first.click()
    expect(page.locator('#panel-title')).to_contain_text(path)
    expect(page.locator('#panel .chart').first).to_be_visible()

def shoot(page, name:str, out:Path, **kw):
    "Screenshot `page` (or a locator) as `out/tutorial_{name}.png`"
    fname = out/f'tutorial_{name}.png'
    page.screenshot(path=str(fname), **kw)
    print(f"wrote {fname} ({fname.stat().st_size // 1024} KB)")

def main(out:Path=IMAGES, width:int=1280, height:int=800):
    "Train the two runs, serve them, and save the screenshots into `out`"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        train(root)
        with serve(root, port=0) as srv, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={'width': width, 'height': height})
            problems = []
            page.on('console', lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ('error', 'warning') else None)
            page.on('pageerror', lambda e: problems.append(f"pageerror: {e}"))
            # the bad run: tree coloured by dead fraction, the alerts, the charts of the dead ReLU
            page.goto(srv.url + '?run=toohigh')
            expect(page.locator('#epoch-count')).to_have_text('3')
            expect(page.locator('#alerts .alert').first).to_be_visible()
            page.select_option('#overlay', 'dead_frac')
            select(page, '1.2')
            shoot(page, 'dead', out, full_page=True)
            # why: the convolution before it, whose first steps moved it by more than its own norm
            page.set_viewport_size({'width': width, 'height': 1600})   # the whole panel in view: no scrolling under the sticky header
            select(page, '1.0.weight')
            shoot(page.locator('#panel'), 'update', out)
            page.set_viewport_size({'width': width, 'height': height})
            # compare mode: the fixed run, with the bad one dashed
            page.goto(srv.url + '?run=fixed&compare=toohigh')
            expect(page.locator('#epoch-count')).to_have_text('3')
            expect(page.locator('#compare-info')).to_be_visible()
            select(page, '1.2')
            shoot(page, 'compare', out, full_page=True)
            browser.close()
    if problems: raise RuntimeError(f"the page reported problems: {problems}")

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', type=Path, default=IMAGES, help='folder for the PNG files')
    main(p.parse_args().out)
