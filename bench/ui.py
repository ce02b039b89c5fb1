"""Time until the explorer page is interactive for a 1,000-node tree with 50 epochs, in headless Chromium.

Usage: python bench/ui.py [--nodes 1000] [--epochs 50] [--rounds 5]

Builds a model whose representation has about `--nodes` nodes, records one real epoch with `ExplorerCallback`
(statistics and heatmaps), copies it to make `--epochs` epochs, serves the folder with the real server, and measures,
for each round, the time from navigation until the tree is rendered and a click on a node has filled the panel: on the
page's own clock (`performance.now()`, from navigation start) and as the driving script sees it.
Target: at most 1 s. Also prints the size of the largest epoch file.
"""
import argparse, json, shutil, statistics, tempfile, time
from pathlib import Path
import torch
from torch import nn
from fastai.learner import Learner
from fastai.callback.progress import *  # noqa: F401,F403
from fastexplorer.all import *
from fastexplorer.cli import digits_dls

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]

def big_model(n_nodes:int)->nn.Module:
    "A CNN on 8×8 digits padded with residual-free blocks until its tree has about `n_nodes` nodes"
    blocks = max(1, -(-(n_nodes - 12) // 7))  # each block: Sequential, Conv2d + weight, BatchNorm2d + 2 params, ReLU: 7 nodes
    body = [nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()) for _ in range(blocks)]
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), *body, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))

def make_run(path:Path, n_nodes:int, n_epochs:int)->int:
    torch.manual_seed(0)
    learn = Learner(digits_dls(bs=64), big_model(n_nodes), loss_func=nn.CrossEntropyLoss())
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3, cbs=ExplorerCallback(path, every=5, overwrite=True))
    m = json.loads((path/'run.json').read_text())
    for e in range(2, n_epochs + 1):
        doc = json.loads((path/'epoch_0001.json').read_text()); doc['epoch'] = e
        save_json(doc, path/f'epoch_{e:04d}.json')
        m['epochs'].append({'epoch': e, 'file': f'epoch_{e:04d}.json', 'partial': False})
    save_json(m, path/'run.json')
    return len(list(Representation.load(path/'representation.json')))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--nodes', type=int, default=1000); p.add_argument('--epochs', type=int, default=50)
    p.add_argument('--rounds', type=int, default=5)
    a = p.parse_args()
    from playwright.sync_api import sync_playwright, expect
    root = Path(tempfile.mkdtemp())
    n = make_run(root/'big', a.nodes, a.epochs)
    size = max(f.stat().st_size for f in (root/'big').glob('epoch_*.json'))
    times,inpage = [],[]
    with serve(root, port=0) as srv, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path='/usr/bin/chromium', args=CHROMIUM_ARGS)
        for _ in range(a.rounds):
            page = browser.new_page()
            t = time.perf_counter()
            page.goto(srv.url + '?run=big')
            page.wait_for_selector('#tree .node .label')
            node = page.locator('#tree .node[data-type="Module"]').nth(1)
            path = node.get_attribute('data-path')
            node.locator('.label').first.click()
            expect(page.locator('#panel-title')).to_contain_text(path)   # no eval in the page: our CSP forbids it
            times.append(time.perf_counter() - t)
            inpage.append(page.evaluate("() => performance.now()") / 1000)   # since the navigation started, in the page
            page.close()
        browser.close()
    print(f"tree of {n} nodes, {a.epochs} epochs, largest epoch file {size/1e6:.2f} MB")
    print(f"time to interactive (navigate, tree rendered, a click fills the panel), {a.rounds} rounds, target <= 1 s:")
    print(f"  in the page's own clock (from navigation start): median {statistics.median(inpage):.3f} s, max {max(inpage):.3f} s")
    print(f"  as Playwright sees it (its own round trips included): median {statistics.median(times):.3f} s, max {max(times):.3f} s")

if __name__ == '__main__': main()
