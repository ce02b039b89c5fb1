"""A deep net's run folder read back, and a long run's: a plain `nn.Sequential` of `--blocks` (Linear, ReLU) pairs
(2,002 modules with the defaults, counting the model and the Learner's root), trained `--epochs` epochs of `--batches`
batches with `ExplorerCallback(every=1)`, then read as a user reads it; and a small MLP trained `--long` epochs of one
batch (1,000 by default), whose `load_run(...).df` is timed (target <= 0.5 s).

Usage: python bench/scale.py [--blocks 1000] [--epochs 30] [--batches 4] [--width 16] [--long 1000] [--keep DIR]

The deep net's epoch writes (statistics collected, alerts found, the file and its history written) are timed inside
the fit: their median is printed (target <= 0.5 s).

`--keep DIR` trains into DIR once and reads it again on later runs (delete it to train again).

Each reading runs in a fresh subprocess so that its peak memory (`ru_maxrss` above the interpreter's baseline with
fastexplorer imported) is its own: `load_run(...).query_steps` of one layer (target <= 200 ms), `load_run(...).df`,
and `report` (target <= 100 MB of peak memory above the baseline). Also prints the run folder's size on disk and the
largest epoch file.
"""
import argparse, json, subprocess, sys, tempfile, textwrap, time
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
torch.set_flush_denormal(True)   # 1,000 layers shrink activations into subnormal floats, which make the CPU 20x slower
blocks,width,batches,epochs,path = {blocks},{width},{batches},{epochs},{path!r}
model = nn.Sequential(*[m for _ in range(blocks) for m in (nn.Linear(width, width), nn.ReLU())])
x = torch.randn(batches * 32, width); y = torch.randn(batches * 32, width)
ds = [(x[i], y[i]) for i in range(len(x))]
dls = DataLoaders(DataLoader(ds, bs=32, shuffle=True), DataLoader(ds[:32], bs=32))
learn = Learner(dls, model, loss_func=nn.MSELoss(), lr=1e-4)
writes,write = [],ExplorerCallback._write_epoch
def timed(self, *a, **k):
    t = time.perf_counter(); r = write(self, *a, **k); writes.append(time.perf_counter() - t); return r
ExplorerCallback._write_epoch = timed
t = time.perf_counter()
with learn.no_bar(), learn.no_logging(): learn.fit(epochs, cbs=ExplorerCallback(path, every=1, overwrite=True))
print(time.perf_counter() - t, sorted(writes)[len(writes) // 2])
"""

LONG = """
import torch, time
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.callback.progress import *
from fastexplorer.all import *
torch.manual_seed(0)
x = torch.randn(32, 8); y = torch.randn(32, 1)
ds = [(x[i], y[i]) for i in range(32)]
dls = DataLoaders(DataLoader(ds, bs=32), DataLoader(ds, bs=32))
learn = Learner(dls, nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)), loss_func=nn.MSELoss(), lr=1e-3)
t = time.perf_counter()
with learn.no_bar(), learn.no_logging(): learn.fit({epochs}, cbs=ExplorerCallback({path!r}, every=1, overwrite=True, preflight=False))
print(time.perf_counter() - t)
"""

READ = """
import resource, time
from fastexplorer.all import *
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
{what}
dt = time.perf_counter() - t
print(dt, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""

def _py(code:str)->list:
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    if out.returncode: raise RuntimeError(out.stderr[-3000:])
    return [float(v) for v in out.stdout.splitlines()[-1].split()]

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--blocks', type=int, default=1000); p.add_argument('--epochs', type=int, default=30)
    p.add_argument('--batches', type=int, default=4); p.add_argument('--width', type=int, default=16)
    p.add_argument('--long', type=int, default=1000, help='epochs of the small MLP whose `.df` is timed')
    p.add_argument('--keep', default=None, help='a folder to train into once and read again on later runs')
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(a.keep or d)/'deep')
        if a.keep and (Path(path)/'run.json').exists(): fit,write = float('nan'),float('nan')   # trained by an earlier run
        else: fit,write = _py(TRAIN.format(blocks=a.blocks, width=a.width, batches=a.batches, epochs=a.epochs, path=path))
        files = list(Path(path).iterdir())
        size,biggest = sum(f.stat().st_size for f in files),max(f.stat().st_size for f in files if f.name.startswith('epoch_0'))
        print(f"{2 * a.blocks + 2:,} modules, {a.epochs} epochs x {a.batches} batches with every=1: fit {fit:.1f} s; "
              f"run folder {size / 2**20:.1f} MiB, largest epoch file {biggest / 2**20:.2f} MiB; "
              f"an epoch write (median) {write:.3f} s (target <= 0.5 s)")
        layer = str(a.blocks)          # a Linear in the middle of the net
        for what,code in [(f"load_run(...).query_steps('{layer}') (target <= 200 ms)", f"d = load_run({path!r}).query_steps({layer!r})"),
                          ("load_run(...).df", f"d = load_run({path!r}).df"),
                          ("report(...) (target <= 100 MB above the baseline)", f"report({path!r}, {str(Path(d)/'r.html')!r})")]:
            dt,mem = _py(READ.format(what=code))
            print(f"  {what:58s} {dt * 1e3:8.0f} ms  {mem:7.0f} MB peak above baseline")
        long = str(Path(a.keep or d)/'long')
        if not (a.keep and (Path(long)/'run.json').exists()): _py(LONG.format(epochs=a.long, path=long))
        rows,dt,mem = _py(READ.format(what=f"d = load_run({long!r}).df; print(len(d), end=' ')"))
        print(f"a small MLP, {a.long:,} epochs: load_run(...).df of {rows:,.0f} rows {dt * 1e3:.0f} ms (target <= 500 ms), "
              f"{mem:.0f} MB peak above baseline")

if __name__ == '__main__': main()
