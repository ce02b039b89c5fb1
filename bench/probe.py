"""Time `learn.to_representation(b)` against one plain `no_grad` forward of the same batch, side by side.

Usage: python bench/probe.py [--rounds 15] [--size 224] [--bs 1] [--threads 2]
Prints the median of each and their ratio (target: at most 1.15 for resnet50 at 224 px, batch 1), and fastai's
`learn.summary()` measured the same way for reference.
"""
import argparse, statistics, time, io, contextlib
import torch, torchvision
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
import fastexplorer.all  # noqa: F401  (patches Learner.to_representation)
from fastai.callback.hook import *  # noqa: F401,F403  (patches Learner.summary)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=15)
    p.add_argument('--size', type=int, default=224)
    p.add_argument('--bs', type=int, default=1)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--arch', default='resnet50')
    p.add_argument('--summary', action='store_true', help="also time fastai's learn.summary()")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.bs, 3, a.size, a.size); y = torch.zeros(a.bs, dtype=torch.long)
    ds = [(x[i], y[i]) for i in range(a.bs)]
    dls = DataLoaders(DataLoader(ds, bs=a.bs), DataLoader(ds, bs=a.bs))
    model = getattr(torchvision.models, a.arch)().eval()
    learn = Learner(dls, model, loss_func=nn.CrossEntropyLoss())
    b = (x, y)
    def plain():
        with torch.no_grad(): model(x)
    def probe(): learn.to_representation(b)
    def summary():
        with contextlib.redirect_stdout(io.StringIO()): learn.summary()
    fns = {'forward': plain, 'probe': probe}
    if a.summary: fns['summary'] = summary
    for f in fns.values(): f(); f()   # warm up
    times = {k: [] for k in fns}
    for _ in range(a.rounds):          # interleaved rounds, so drift hits every contender alike
        for k,f in fns.items():
            t = time.perf_counter(); f(); times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k,v in times.items()}
    print(f"{a.arch} @ {a.size}px, batch {a.bs}, {a.threads} threads, {a.rounds} interleaved rounds (median ms)")
    for k,v in med.items(): print(f"  {k:8s} {v*1000:8.1f} ms   ratio to forward {v/med['forward']:.3f}")

if __name__ == '__main__': main()
