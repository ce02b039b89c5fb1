"""A deep net's run folder read back, and a long run's: a plain `nn.Sequential` of `--blocks` (Linear, ReLU) pairs
(2,002 modules with the defaults, counting the model and the Learner's root), trained `--epochs` epochs of `--batches`
batches with `ExplorerCallback(every=1)`, then read as a user reads it. A long run of a small net (1,000 epochs) and its
`load_run(...).df`: `bench/longrun.py`.

Usage: python bench/scale.py [--blocks 1000] [--epochs 30] [--batches 4] [--width 16] [--steps 100000] [--keep DIR]

The deep net's epoch writes (statistics collected, alerts found, the file and its history written) are timed inside
the fit: their median is printed (target <= 0.5 s).

A long run: `--steps` sampled batches (100,000 by default) of 200 layers and 200 parameters, written through the
real writer by `bench/steps.py` (statistics that drift as a run's do) into a run folder made by a one-epoch fit, then
read as a user and the page read it: the store's size (target <= 2 GB, <= 48 bytes per series and step),
`load_run(...).steps` (returns within 60 s under 4 GB or refuses at once), `query_steps` of one layer (target
<= 0.3 s), and the page's requests to a running server for a layer's step series over the whole run and zoomed to 1%
of it, and its histograms (target <= 0.3 s each). `--steps 0` leaves it out.

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

READ = """
import resource, time
from fastexplorer.all import *
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
{what}
dt = time.perf_counter() - t
print(dt, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""

STEPS_RUN = """
import sys, torch
sys.path.insert(0, {bench!r})
from pathlib import Path
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.callback.progress import *
from fastexplorer.all import *
import steps as synthetic
x = torch.randn(32, 8); y = torch.randn(32, 1)
ds = [(x[i], y[i]) for i in range(32)]
learn = Learner(DataLoaders(DataLoader(ds, bs=32), DataLoader(ds, bs=32)), nn.Linear(8, 1), loss_func=nn.MSELoss())
with learn.no_bar(), learn.no_logging(): learn.fit(1, cbs=ExplorerCallback({path!r}, every=1, overwrite=True, preflight=False))
for f in Path({path!r}).glob('steps.sqlite*'): f.unlink()
print(synthetic.write(Path({path!r}), {steps}, 200, 200, log=False)[-1])
"""

SERVE = """
import json, time, urllib.request
from fastexplorer.all import serve
with serve({root!r}, port=0) as s:
    for q in {queries!r}:
        ts = []
        for _ in range(3):
            t = time.perf_counter(); body = urllib.request.urlopen(s.url.rstrip('/') + q).read(); ts.append(time.perf_counter() - t)
        print(min(ts), len(body))
"""

def _py(code:str)->list:
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    if out.returncode: raise RuntimeError(out.stderr[-3000:])
    return [float(v) for v in out.stdout.splitlines()[-1].split()]

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--blocks', type=int, default=1000); p.add_argument('--epochs', type=int, default=30)
    p.add_argument('--batches', type=int, default=4); p.add_argument('--width', type=int, default=16)
    p.add_argument('--steps', type=int, default=100_000, help='sampled steps of the long run (0: leave it out)')
    p.add_argument('--keep', default=None, help='a folder to train into once and read again on later runs')
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        if a.steps: long_run(Path(a.keep or d), a.steps)
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

def long_run(root:Path, n:int):
    "The long run's figures: written once into `root/steps` (kept with `--keep`), then read by `load_run` and the server"
    path = root/'steps'
    if not (path/'run.json').exists() or not (path/'steps.sqlite').exists():
        secs, = _py(STEPS_RUN.format(bench=str(Path(__file__).parent), path=str(path), steps=n))
        print(f"a long run: {n:,} sampled steps x 200 layers + 200 parameters written through StepWriter in {secs:.0f} s")
    size = sum(f.stat().st_size for f in path.glob('steps.sqlite*'))
    print(f"  steps.sqlite {size / 1e9:.2f} GB (target <= 2 GB): {size / (n * 400):.1f} bytes per series and step (target <= 48)")
    what = (f"try: d = load_run({str(path)!r}).steps; print(len(d), end=' ')\n"
            "except ValueError as e: print('refused', end=' '); import sys; print(str(e)[:150], file=sys.stderr)")
    out = subprocess.run([sys.executable, '-c', READ.format(what=what)], capture_output=True, text=True)
    if out.returncode: raise RuntimeError(out.stderr[-3000:])
    rows,dt,mem = out.stdout.split()[-3:]; dt,mem = float(dt),float(mem)
    print(f"  load_run(...).steps: {rows} in {dt:.2f} s, {mem:.0f} MB peak above baseline (target: within 60 s under 4 GB, or refused at once)"
          + (f": {out.stderr.strip().splitlines()[-1]}" if rows == 'refused' else ''))
    dt,mem = _py(READ.format(what=f"d = load_run({str(path)!r}).query_steps('100.conv')"))
    print(f"  load_run(...).query_steps('100.conv'): {dt * 1e3:.0f} ms, {mem:.0f} MB peak above baseline (target <= 300 ms)")
    series = '/api/runs/steps/steps/series?layer=100.conv&kind=act&stats=mean,std,near_zero,silent_frac&points=1000'
    queries = [series, f"{series}&start={n // 2}&stop={n // 2 + n // 100}", '/api/runs/steps/steps/series?layer=100.conv.weight&kind=grad&stats=norm&points=1000',
               '/api/runs/steps/steps/hist?layer=100.conv&points=400']
    out = subprocess.run([sys.executable, '-c', SERVE.format(root=str(root), queries=queries)], capture_output=True, text=True)
    if out.returncode: raise RuntimeError(out.stderr[-3000:])
    for what,line in zip(['a layer\'s step series, whole run, 1,000 points', 'the same, zoomed to 1% of the run', 'a parameter\'s gradient norm, whole run',
                          'a layer\'s histograms, whole run, 400 points'], out.stdout.splitlines()[-4:]):
        dt,nbytes = map(float, line.split())
        print(f"  the page's request for {what:45s} {dt * 1e3:6.0f} ms  ({nbytes / 1024:.0f} KiB; target <= 300 ms)")

if __name__ == '__main__': main()
