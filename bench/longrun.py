"""A long run of a small net read back: a 20-block MLP (`--blocks` pairs of Linear and ReLU) trained `--epochs` epochs
(1,000) of `--batches` batches (2) with `ExplorerCallback(every=1)`, so that the fit samples every batch and, at
2,000 sampled batches or fewer (`HIST_STEPS`), keeps every histogram.

Usage: python bench/longrun.py [--epochs 1000] [--batches 2] [--blocks 20] [--rounds 3] [--keep DIR]

Prints:
- the step store's size per series (a layer or a parameter) and step, with every histogram kept (target <= 45 bytes);
- `load_run(...).df`, the long frame of every epoch's statistics, timed in a fresh process, the best of `--rounds`
  (target <= 0.5 s), with its rows and its peak memory above the interpreter's (fastexplorer imported).

`--keep DIR` trains into DIR once and reads it again on later runs (delete it to train again).
"""
import argparse, subprocess, sys, tempfile
from pathlib import Path

TRAIN = """
import torch, time
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.callback.progress import *
from fastexplorer.all import *
torch.manual_seed(0)
blocks,batches,epochs,path = {blocks},{batches},{epochs},{path!r}
model = nn.Sequential(nn.Linear(8, 16), *[m for _ in range(blocks - 1) for m in (nn.ReLU(), nn.Linear(16, 16))],
                      nn.ReLU(), nn.Linear(16, 1))
x = torch.randn(batches * 32, 8); y = x[:, :1] * 2 + 0.1 * torch.randn(batches * 32, 1)
ds = [(x[i], y[i]) for i in range(len(x))]
dls = DataLoaders(DataLoader(ds, bs=32, shuffle=True), DataLoader(ds[:32], bs=32))
learn = Learner(dls, model, loss_func=nn.MSELoss(), lr=1e-3)
t = time.perf_counter()
with learn.no_bar(), learn.no_logging(): learn.fit(epochs, cbs=ExplorerCallback(path, every=1, overwrite=True, preflight=False))
print(time.perf_counter() - t)
"""

READ = """
import resource, time
from fastexplorer.all import *
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
d = load_run({path!r}).df
dt = time.perf_counter() - t
print(len(d), dt, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""

def _py(code:str)->list:
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    if out.returncode: raise RuntimeError(out.stderr[-3000:])
    return [float(v) for v in out.stdout.splitlines()[-1].split()]

def store_figures(path:Path)->tuple:
    "The step store's bytes, its series (layers and parameters), its sampled training steps, and its `hist_every`"
    import sqlite3
    from fastexplorer.stepdb import hist_every_for
    size = sum(f.stat().st_size for f in path.glob('steps.sqlite*'))
    con = sqlite3.connect(f"file:{path/'steps.sqlite'}?mode=ro", uri=True)
    try:
        series, = con.execute('SELECT count(*) FROM names').fetchone()
        steps, = con.execute("SELECT count(DISTINCT step) FROM batches WHERE split = 'train'").fetchone()
    finally: con.close()
    return size,series,steps,hist_every_for(steps)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--epochs', type=int, default=1000); p.add_argument('--batches', type=int, default=2)
    p.add_argument('--blocks', type=int, default=20); p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--keep', default=None, help='a folder to train into once and read again on later runs')
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(a.keep or d)/'long'
        if not (path/'run.json').exists():
            fit, = _py(TRAIN.format(blocks=a.blocks, batches=a.batches, epochs=a.epochs, path=str(path)))
            print(f"a {a.blocks}-block MLP, {a.epochs:,} epochs x {a.batches} batches at every=1: fit {fit:.0f} s")
        size,series,steps,every = store_figures(path)
        print(f"steps.sqlite: {size / 1e6:.2f} MB for {series} series x {steps:,} steps: "
              f"{size / (series * steps):.1f} bytes per series and step (target <= 45), histograms kept: 1 in {every}")
        res = [_py(READ.format(path=str(path))) for _ in range(a.rounds)]
        rows,dt,mem = min(res, key=lambda r: r[1])
        print(f"load_run(...).df: {rows:,.0f} rows in {dt * 1e3:.0f} ms, best of {a.rounds} "
              f"(all: {', '.join(f'{r[1] * 1e3:.0f}' for r in res)} ms; target <= 500 ms), {mem:.0f} MB peak above baseline")

if __name__ == '__main__': main()
