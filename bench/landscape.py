"""Cost of one loss-landscape grid point as a ratio to one plain `no_grad` forward of the same batches, side by side.

Usage: python bench/landscape.py [--n 9] [--rounds 5] [--models cnn,resnet18]

For each model (the digits CNN on 8×8 digits, batch 64; torchvision resnet18 on synthetic 64 px images, batch 64;
2 threads), interleaved rounds time `learn.loss_landscape(n=N, n_batches=1)` (N² grid points, including the final
restore) and N² plain `no_grad` evaluations of the same validation batch in eval mode (forward, loss and, as a grid
point does, the Learner's first metric). Prints the medians per
point and their ratio. Target on a 2-core CPU: at most 1.10.
"""
import argparse, statistics, time, warnings
import torch, torchvision
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastexplorer.all import *

warnings.filterwarnings('ignore')

def resnet_learner(bs=64, size=64):
    g = torch.Generator().manual_seed(0)
    items = [(torch.randn(3, size, size, generator=g), torch.tensor(i % 10)) for i in range(bs)]
    torch.manual_seed(0)
    return Learner(DataLoaders(DataLoader(items, bs=bs), DataLoader(items, bs=bs)), torchvision.models.resnet18(num_classes=10),
                   loss_func=CrossEntropyLossFlat())

MODELS = {'cnn': lambda: digits_learner(bs=64), 'resnet18': resnet_learner}

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=9); p.add_argument('--rounds', type=int, default=5)
    p.add_argument('--models', default='cnn,resnet18'); p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.models.split(','):
        learn = MODELS[name]()
        xb,yb = learn.dls.valid.one_batch()
        model = learn.model
        metric = getattr(learn.metrics[0], 'func', None) if len(learn.metrics) else None
        def plain():   # what a grid point evaluates, without moving the weights: forward, loss, first metric
            model.eval()
            with torch.no_grad():
                for _ in range(a.n * a.n):
                    pred = model(xb); float(learn.loss_func(pred, yb))
                    if metric is not None: float(metric(pred, yb))
        def grid(): learn.loss_landscape(n=a.n, n_batches=1, seed=0, progress=False)
        plain(); grid()
        t_plain,t_grid = [],[]
        for _ in range(a.rounds):
            t = time.perf_counter(); plain(); t_plain.append((time.perf_counter() - t) / a.n**2)
            t = time.perf_counter(); grid(); t_grid.append((time.perf_counter() - t) / a.n**2)
        mp,mg = statistics.median(t_plain),statistics.median(t_grid)
        print(f"{name}: {a.n}×{a.n} grid, {a.rounds} interleaved rounds: plain evaluation {mp*1e3:.2f} ms, "
              f"grid point {mg*1e3:.2f} ms, ratio {mg/mp:.3f} (target <= 1.10)")

if __name__ == '__main__': main()
