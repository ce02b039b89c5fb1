"""Regenerate the screenshots of `nbs/tutorial.ipynb` and `nbs/huggingface.ipynb`: `python scripts/tutorial_images.py`

Trains the tutorial's two runs and the Hugging Face notebook's BERT (the same code and seeds as the notebooks), serves
them with fastexplorer's server on a free port, drives Debian's headless Chromium with Playwright, and writes
`nbs/images/tutorial_*.png` and `nbs/images/hf_histogram.png`."""
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
    assert '1.2' in set(bad.alerts.query('epoch == 3').layer) and len(good.alerts) == 0, (bad.alerts, good.alerts)

def train_bert(root:Path):
    "The Hugging Face notebook's run: a two-layer BERT with random weights learning whether token 7 occurs"
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=32, num_labels=2)
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(8, 64, (512, 16), generator=g)
    has7 = torch.rand(512, generator=g) < 0.5
    ids[has7, torch.randint(0, 16, (int(has7.sum()),), generator=g)] = 7
    items = [(ids[i], has7[i].long()) for i in range(512)]
    dls = DataLoaders(DataLoader(items[:384], bs=32, shuffle=True, drop_last=True), DataLoader(items[384:], bs=64))
    class Logits(Callback):
        def after_pred(self): self.learn.pred = self.pred.logits
    learn = Learner(dls, model, loss_func=CrossEntropyLossFlat(), metrics=accuracy, cbs=[Logits(), ExplorerCallback(root/'bert', every=2)])
    with learn.no_bar(), learn.no_logging(): learn.fit_one_cycle(3, 3e-3)

GELU = 'bert.encoder.layer.1.intermediate.intermediate_act_fn'

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
        train(root); train_bert(root)
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
            # the BERT's GELU: small values, spread over the bins fitted to the layer
            page.set_viewport_size({'width': width, 'height': 2200})   # the whole panel in view: no scrolling under the sticky header
            page.goto(srv.url + '?run=bert')
            expect(page.locator('#epoch-count')).to_have_text('3')
            page.fill('#search', GELU)   # a deep node: the search opens the branches down to it
            select(page, GELU)
            hist = page.locator('#hist-heatmap')
            expect(hist).to_be_visible()
            lo,hi = map(float, hist.get_attribute('data-range').split(','))
            assert hi - lo < 2, (lo, hi)   # the layer's own bins, not -10..10
            fname = out/'hf_histogram.png'
            page.locator('#panel').screenshot(path=str(fname))
            print(f"wrote {fname} ({fname.stat().st_size // 1024} KB)")
            browser.close()
    if problems: raise RuntimeError(f"the page reported problems: {problems}")

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', type=Path, default=IMAGES, help='folder for the PNG files')
    main(p.parse_args().out)
