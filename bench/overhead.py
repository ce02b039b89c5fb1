"""Overhead of `ExplorerCallback` on training, measured side by side in one process.

Usage: python bench/overhead.py [--rounds 5] [--batches 20] [--models cnn,resnet18] [--only plain,defaults,every,fastai]

For each model (a small CNN and torchvision's resnet18, on synthetic 64 px images, batch 64, 2 threads) it times one
epoch of `Learner.fit` in interleaved rounds (so drift on a noisy machine hits every contender alike) with:
plain fit; `ExplorerCallback()` defaults (every 10th batch); `ExplorerCallback(every=1, valid=True)` (every batch,
all statistics, histograms, gradients and update ratios, and the step series in `steps.sqlite`); each of the two
again with `steps=False` (epoch files only), which isolates what the step series cost; fastai's
`ActivationStats(with_hist=True)`.
Prints the median epoch time of each and its ratio to plain fit, and for the explorer's, the time spent inside the
callback (its events and forward hooks, timed on their own over two more epochs) as a fraction of a plain epoch: its own
cost, which the epoch-to-epoch noise of a shared 2-core machine (several per cent) does not blur. What that leaves out
(the writer's thread, caches the hooks evict) shows in the ratio. Targets on a 2-core CPU (issue 14): defaults <= 1.03x on
resnet18, every batch <= 1.10x (issue 48; fastai's `ActivationStats(with_hist=True)` is about 1.4x).

The timed epochs are later fits of the same Learners: what an explorer does once, before a fit's first batch (probe the
model with `learn.to_representation()`, check it with `learn.preflight()`), is left out of them and reported apart, in
steps of plain fit (a plain epoch's median time over its batches), timed in rounds with the other contenders' epochs.
"""
import argparse, statistics, tempfile, time, warnings
import torch, torchvision
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastai.callback.hook import ActivationStats
from fastai.callback.progress import *  # noqa: F401,F403  (Learner.no_bar)
from fastexplorer.all import ExplorerCallback
from fastexplorer.preflight import *  # noqa: F401,F403  (Learner.preflight)

warnings.filterwarnings('ignore')

def small_cnn():
    def block(ni, nf): return nn.Sequential(nn.Conv2d(ni, nf, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(nf), nn.ReLU(inplace=True))
    return nn.Sequential(block(3, 16), block(16, 32), block(32, 64), block(64, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

MODELS = {'cnn': small_cnn, 'resnet18': lambda: torchvision.models.resnet18(num_classes=10)}

def make_learner(model_fn, n_batches, bs=64, size=64, cbs=None):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_batches * bs, 3, size, size, generator=g); y = torch.randint(0, 10, (n_batches * bs,), generator=g)
    items = [(x[i], y[i]) for i in range(len(x))]
    dls = DataLoaders(DataLoader(items, bs=bs, shuffle=True, drop_last=True), DataLoader(items[:bs], bs=bs))
    torch.manual_seed(0)
    return Learner(dls, model_fn(), loss_func=CrossEntropyLossFlat(), cbs=cbs)

class Inside:
    "Seconds spent inside `ExplorerCallback`'s events and forward hooks while active: its own work, measured on its own"
    EVENTS = ('before_fit', 'before_epoch', 'before_batch', 'after_pred', 'after_backward', 'after_step', 'after_batch', 'after_epoch', 'after_fit')
    def __enter__(self):
        import fastexplorer.callback as C
        self.C,self.t = C,0.
        self.saved,self.hook = {e: getattr(C.ExplorerCallback, e) for e in self.EVENTS},C._hook
        def timed(f):
            def g(*args, **kwargs):
                t0 = time.perf_counter()
                try: return f(*args, **kwargs)
                finally: self.t += time.perf_counter() - t0
            return g
        for e,f in self.saved.items(): setattr(C.ExplorerCallback, e, timed(f))
        C._hook = timed(self.hook)      # looked up when `before_batch` registers the hooks
        return self
    def __exit__(self, *args):
        for e,f in self.saved.items(): setattr(self.C.ExplorerCallback, e, f)
        self.C._hook = self.hook

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=5)
    p.add_argument('--batches', type=int, default=20, help='training batches per epoch')
    p.add_argument('--models', default='cnn,resnet18')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--only', default=None, help='time only these contenders (more rounds in the same time): plain,defaults,defaults-ns,every,every-ns,fastai')
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    tmp = tempfile.mkdtemp()
    for name in a.models.split(','):
        configs = {
            'plain fit': lambda: None,
            'explorer defaults': lambda: ExplorerCallback(f"{tmp}/{name}-defaults", overwrite=True),
            'explorer defaults, no step series': lambda: ExplorerCallback(f"{tmp}/{name}-defaults-ns", overwrite=True, steps=False),
            'explorer every batch, all stats': lambda: ExplorerCallback(f"{tmp}/{name}-full", every=1, valid=True, overwrite=True),
            'explorer every batch, no step series': lambda: ExplorerCallback(f"{tmp}/{name}-full-ns", every=1, valid=True, overwrite=True, steps=False),
            'fastai ActivationStats(with_hist)': lambda: ActivationStats(with_hist=True),
        }
        short = dict(zip(['plain', 'defaults', 'defaults-ns', 'every', 'every-ns', 'fastai'], configs))
        if a.only: configs = {short[k]: configs[short[k]] for k in ['plain'] + [k for k in a.only.split(',') if k != 'plain']}
        learners = {k: make_learner(MODELS[name], a.batches, cbs=f()) for k,f in configs.items()}
        for l in learners.values():                       # warm up (and let the explorer probe once)
            with l.no_bar(), l.no_logging(): l.fit(1, 1e-3)
        times,once = {k: [] for k in learners},{'probe': [], 'preflight': []}
        plain = learners['plain fit']
        b = plain.dls.train.one_batch()
        once_fns = {'probe': lambda: plain.to_representation(b), 'preflight': lambda: plain.preflight(b)}
        for _ in range(a.rounds):
            for k,l in learners.items():
                with l.no_bar(), l.no_logging():
                    t = time.perf_counter(); l.fit(1, 1e-3); times[k].append(time.perf_counter() - t)
            for k,f in once_fns.items():
                t = time.perf_counter(); f(); once[k].append(time.perf_counter() - t)
        base = statistics.median(times['plain fit'])
        inside = {}
        for k,l in learners.items():       # the callback's own time, which the noise of a shared machine does not blur
            if not k.startswith('explorer'): continue
            with Inside() as acc, l.no_bar(), l.no_logging():
                for _ in range(2): l.fit(1, 1e-3)
            inside[k] = acc.t / 2
        print(f"\n{name}: {a.batches} batches of 64 at 64 px per epoch, {a.threads} threads, {a.rounds} interleaved rounds")
        for k,v in times.items():
            med = statistics.median(v)
            own = f"   inside the callback {inside[k]:5.2f} s = {inside[k] / base:.3f} of plain" if k in inside else ''
            print(f"  {k:36s} {med:7.2f} s/epoch   ratio {med/base:.3f}   (min {min(v)/min(times['plain fit']):.3f}){own}")
        step = base / a.batches
        print(f"  once per fit, before its first batch (not in the epochs above; a plain step is {step * 1e3:.0f} ms):")
        for k,v in once.items():
            what = {'probe': 'the probe, learn.to_representation()', 'preflight': 'the preflight, learn.preflight()'}[k]
            print(f"    {what:38s} {statistics.median(v) * 1e3:7.0f} ms = {statistics.median(v) / step:.2f} steps")

if __name__ == '__main__': main()
