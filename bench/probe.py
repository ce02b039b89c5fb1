"""Time the probe against one plain `no_grad` forward of the same batch, side by side in one run.

Usage: python bench/probe.py [--rounds 30] [--threads 2] [--summary]

For two models, resnet50 at 224 px batch 1 and mobilenet_v3_small at 64 px batch 8 (random weights, eval mode), it times
in interleaved rounds (so drift on a noisy machine hits every contender alike): one forward; `represent(model, x)`;
`learn.to_representation(b)` on a `Learner` holding the same model and batch; `torchinfo.summary(model, input_data=x)`;
and with `--summary`, fastai's `learn.summary()`. Each contender is timed right after a forward of its own, which is its
pair: it finds the caches as a probe after a training step does (a contender timed after another one would find the
model's modules still in the cache from it, and look cheaper than it is). Prints the median of each, the ratio of
medians, and the median of the paired ratios (each call over the forward just before it: the machine's drift between
rounds cancels, which the ratio of medians leaves in; the targets are checked on it). Targets
(issue 16): `represent` and `to_representation` at most 1.10x one forward on resnet50, at most 1.5x on mobilenet_v3_small
(many small layers: hooks weigh more against its short forward).
"""
import argparse, statistics, time, io, contextlib, warnings
import torch, torchvision, torchinfo
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastexplorer.all import represent
from fastai.callback.hook import *  # noqa: F401,F403  (patches Learner.summary)

warnings.filterwarnings('ignore')
CASES = [('resnet50', 224, 1, 1.10), ('mobilenet_v3_small', 64, 8, 1.5)]

def contenders(arch:str, size:int, bs:int, with_summary:bool)->dict:
    torch.manual_seed(0)
    x = torch.randn(bs, 3, size, size); y = torch.zeros(bs, dtype=torch.long)
    ds = [(x[i], y[i]) for i in range(bs)]
    model = getattr(torchvision.models, arch)(weights=None).eval()
    learn = Learner(DataLoaders(DataLoader(ds, bs=bs), DataLoader(ds, bs=bs)), model, loss_func=nn.CrossEntropyLoss())
    def forward():
        with torch.no_grad(): model(x)
    def summary():
        with contextlib.redirect_stdout(io.StringIO()): learn.summary()
    fns = {'forward': forward, 'represent': lambda: represent(model, x), 'to_representation': lambda: learn.to_representation((x, y)),
           'torchinfo.summary': lambda: torchinfo.summary(model, input_data=x, verbose=0)}
    if with_summary: fns['learn.summary'] = summary
    return fns

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=30)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--summary', action='store_true', help="also time fastai's learn.summary()")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for arch,size,bs,target in CASES:
        fns = contenders(arch, size, bs, a.summary)
        for f in fns.values(): f(); f()   # warm up
        times,pairs = {k: [] for k in fns},{k: [] for k in fns}   # `pairs[k]`: the forward timed just before each call of `k`
        for _ in range(a.rounds):
            for k,f in fns.items():
                if k == 'forward': continue
                t = time.perf_counter(); fns['forward'](); t1 = time.perf_counter(); f(); t2 = time.perf_counter()
                times['forward'].append(t1 - t); pairs[k].append(t1 - t); times[k].append(t2 - t1)
        pairs['forward'] = times['forward']
        med = {k: statistics.median(v) for k,v in times.items()}
        paired = {k: statistics.median(t / f for t,f in zip(v, pairs[k])) for k,v in times.items()}
        print(f"{arch} @ {size}px, batch {bs}, {a.threads} threads, {a.rounds} interleaved rounds (median ms); target: probe <= {target:.2f}x forward")
        for k,v in med.items():
            mark = '' if k not in ('represent', 'to_representation') else ('  ok' if paired[k] <= target else '  ABOVE TARGET')
            print(f"  {k:18s} {v*1000:8.1f} ms   ratio of medians {v/med['forward']:.3f}   paired {paired[k]:.3f}{mark}")

if __name__ == '__main__': main()
