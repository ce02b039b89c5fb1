"`Learner.loss_landscape`: exact restore (also after failures), a convex check, reproducibility, trajectories."
import json, math
import numpy as np
import pytest, torch
from torch import nn
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from zoo import ZOO, learner, images
from untouched import Untouched

def _trained(name='frozen_bn', epochs=1):
    learn = ZOO[name]()
    with learn.no_bar(), learn.no_logging(): learn.fit(epochs, 1e-3)
    return learn

def _opt_state(learn):
    return {k: {n: v.clone() if isinstance(v, torch.Tensor) else v for n,v in s.items()} for k,s in learn.opt.state.items()} if learn.opt else None

@pytest.mark.parametrize('name', ['frozen_bn', 'resnet18_tv', 'two_parents'])
def test_restores_bitwise(name):
    "After a landscape every tensor of `state_dict()` is `torch.equal`, parameters are the same objects, modes and optimizer untouched"
    learn = _trained(name)
    u = Untouched(learn.model)
    opt = _opt_state(learn)
    ls = learn.loss_landscape(n=3, seed=1, progress=False)
    u.check()
    assert {k: {n: v for n,v in s.items()} for k,s in learn.opt.state.items()}.keys() == opt.keys()
    for k,s in learn.opt.state.items():
        for n,v in s.items(): assert (torch.equal(v, opt[k][n]) if isinstance(v, torch.Tensor) else v == opt[k][n]), n
    assert len(ls.loss) == 3 and all(len(r) == 3 for r in ls.loss)

@pytest.mark.parametrize('exc', [RuntimeError('injected'), KeyboardInterrupt()])
def test_restores_after_failure_mid_grid(exc):
    "An exception or interrupt injected mid-grid propagates, and the model comes back bitwise"
    learn = _trained()
    calls = {'n': 0}
    def boom(m, i, o):
        calls['n'] += 1
        if calls['n'] == 5: raise exc
    h = learn.model[3].register_forward_hook(boom)
    u = Untouched(learn.model)
    with pytest.raises(type(exc)): learn.loss_landscape(n=4, seed=0, progress=False)
    u.check()
    h.remove()

def test_convex_quadratic_minimum_at_centre():
    "A model whose loss is a convex quadratic of its weights, at its minimum, has the landscape's minimum at the centre"
    torch.manual_seed(0)
    x = torch.randn(64, 4); w = torch.tensor([[1., -2., 0.5, 3.]])
    model = nn.Linear(4, 1, bias=False)
    with torch.no_grad(): model.weight.copy_(w)
    learn = learner(model, x, y=(x @ w.T), loss_func=nn.MSELoss(), bs=64)
    ls = learn.loss_landscape(n=9, seed=3, progress=False)
    assert ls.argmin == (0.0, 0.0) and ls.loss[4][4] < 1e-10
    assert all(l > 0 for row in ls.loss for l in row if l is not ls.loss[4][4])

def test_same_seed_same_landscape():
    "The same seed gives the same landscape; another seed another one"
    learn = _trained()
    a, b, c = (learn.loss_landscape(n=3, seed=s, progress=False) for s in (7, 7, 8))
    assert a.loss == b.loss and a.loss != c.loss and a.seed == 7

@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_half_precision_restored(dtype):
    "float16 and bfloat16 weights are restored bitwise, dtype kept"
    class Cast(nn.Module):
        def __init__(self, dt): super().__init__(); self.dt = dt
        def forward(self, x): return x.to(self.dt)
    model = nn.Sequential(Cast(dtype), nn.Linear(12, 8).to(dtype), nn.ReLU(), nn.Linear(8, 3).to(dtype), Cast(torch.float32))
    learn = learner(model, torch.randn(16, 12))
    u = Untouched(model)
    learn.loss_landscape(n=3, seed=0, progress=False)
    u.check()
    assert all(p.dtype == dtype for p in model.parameters())

def test_trajectory_and_file(tmp_path):
    "With weight snapshots, PCA directions and one projected point per snapshot; `landscape.json` validates"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5, snapshots=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(3, 1e-2)
    ls = learn.loss_landscape(n=5, trajectory=True, progress=False)
    assert len(ls.trajectory) == len(learn.explorer.snapshots) == 3 and all(len(p) == 2 for p in ls.trajectory)
    snaps = learn.explorer.snapshots                        # files in the run folder, nothing held in memory
    assert [s.name for s in snaps] == ['snapshot_0001.npy', 'snapshot_0002.npy', 'snapshot_0003.npy'] and all(s.parent == tmp_path/'run' for s in snaps)
    n = sum(p.numel() for p in set(learn.model.parameters()))
    assert all(np.load(s, mmap_mode='r').shape == (n,) for s in snaps)
    assert ls.kind == 'pca' and max(abs(c) for p in ls.trajectory for c in p) <= ls.x[-1]
    doc = json.loads((tmp_path/'run'/'landscape.json').read_text())
    validate(doc)
    assert doc['directions'] == 'pca' and len(doc['trajectory']) == 3

def test_trajectory_needs_snapshots():
    "Asking for a trajectory without snapshots says how to get them"
    with pytest.raises(ValueError, match='snapshots=True'): _trained().loss_landscape(trajectory=True, progress=False)
