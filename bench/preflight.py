"""Time `learn.preflight()` against one training step's forward and backward of the same batch, side by side in one run.

Usage: python bench/preflight.py [--rounds 10] [--threads 2]

For resnet18 at 64 px, batch 32, and the digits CNN (random weights), it times in interleaved rounds: one forward, loss
and backward in training mode (a step without the optimiser: `fb`); and `learn.preflight(b)` on the same batch. It prints
the median of each and the median of the paired ratios (preflight over the step just before it). The target (issue 32):
preflight costs at most 3 forward and 2 backward passes of one batch, about 2.3 steps (a backward costs about two
forwards); it runs two forwards and two backwards, so about 2 steps plus its Python work. It also counts the passes
one `learn.preflight(b)` makes (`passes`: the model's top-level forwards, and the backwards through `Tensor.backward`
and `torch.autograd.grad`) and prints them beside the time.
"""
import argparse, statistics, time, warnings
from unittest import mock
import torch, torchvision
from torch import nn
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastexplorer.all import digits_learner
from fastexplorer.preflight import *   # noqa: F401,F403  (Learner.preflight)

warnings.filterwarnings('ignore')

def resnet18_learner():
    torch.manual_seed(0)
    x,y = torch.randn(32, 3, 64, 64),torch.randint(0, 10, (32,))
    dl = DataLoader(list(zip(x, y)), bs=32)
    return Learner(DataLoaders(dl, dl), torchvision.models.resnet18(num_classes=10), loss_func=nn.CrossEntropyLoss()),(x, y)

def digits():
    learn = digits_learner()
    return learn,learn.dls.train.one_batch()

def step(learn, b):
    learn.model.train()
    loss = learn.loss_func(learn.model(b[0]), b[1])
    loss.backward()
    learn.model.zero_grad(set_to_none=True)

def passes(learn, b)->tuple:
    "The forwards of the whole model and the backwards that one `learn.preflight(b)` runs"
    n = {'fwd': 0, 'bwd': 0}
    def count(f):
        def g(*a, **k): n['bwd'] += 1; return f(*a, **k)
        return g
    h = learn.model.register_forward_pre_hook(lambda m, a: n.__setitem__('fwd', n['fwd'] + 1))
    try:
        with mock.patch('torch.autograd.backward', count(torch.autograd.backward)), \
             mock.patch('torch.autograd.grad', count(torch.autograd.grad)):
            learn.preflight(b)
    finally: h.remove()
    return n['fwd'],n['bwd']

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=10); p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for name,make in (('resnet18 @64px bs32', resnet18_learner), ('digits CNN bs64', digits)):
        learn,b = make()
        step(learn, b); learn.preflight(b)           # warm-up
        fb,pf,ratios = [],[],[]
        for _ in range(a.rounds):
            t0 = time.perf_counter(); step(learn, b); t1 = time.perf_counter(); learn.preflight(b); t2 = time.perf_counter()
            fb.append(t1 - t0); pf.append(t2 - t1); ratios.append((t2 - t1) / (t1 - t0))
        nf,nb = passes(learn, b)
        print(f"{name}: {nf} forwards and {nb} backwards (target: at most 3 and 2)")
        print(f"{name}: step (forward+backward) {statistics.median(fb)*1e3:.1f} ms, preflight {statistics.median(pf)*1e3:.1f} ms, "
              f"paired ratio {statistics.median(ratios):.2f}x a step (target: at most ~2.3x, 3 forwards + 2 backwards)")
