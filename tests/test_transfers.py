"""What a training step costs in synchronisations with the device (issue 35): a step that is not sampled reads nothing
back; a sampled one reads its flags and starts at most one copy of the queued statistics, for any number of layers.

On a GPU, reading a value into Python (`item`, `tolist`, `bool`, `float`) or copying to the host waits for the device.
The CPU pays nothing for a read, so the statistics take a faster path there that reads freely; with `READS_FREE` empty
they take the GPU's path on the CPU, and a function mode counts what it would read."""
import pytest, torch
from torch import nn
from torch.overrides import TorchFunctionMode
from fastai.basics import Learner, DataLoaders, DataLoader, MSELossFlat
from fastai.callback.core import Callback
from fastai.callback.progress import *   # noqa: F401,F403  (Learner.no_bar)
import fastexplorer.core, fastexplorer.reduce as R, fastexplorer.steps as steps
from fastexplorer.all import ExplorerCallback, load_run

READS = {'item', 'tolist', '__bool__', '__float__', '__int__', '__index__', 'cpu'}

def _to_host(args, kwargs)->bool:
    dev = kwargs.get('device', next((a for a in args[1:] if isinstance(a, (str, torch.device))), None))
    return dev is not None and torch.device(dev).type == 'cpu'

class HostReads(TorchFunctionMode):
    "Counts reads of tensor values into Python and copies to the host: each a synchronisation on a GPU"
    def __init__(self): super().__init__(); self.n,self.what = 0,[]
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, '__name__', '')
        if name in READS or (name == 'to' and _to_host(args, kwargs)) or (name == 'copy_' and kwargs.get('non_blocking')):
            self.n += 1; self.what.append(name)
        return func(*args, **kwargs)

class Start(Callback):
    "Notes the count before any other callback's `before_batch`"
    order = -1000
    def __init__(self, mode): self.mode,self.rows = mode,[]
    def before_batch(self): self.n0,self.w0 = self.mode.n,len(self.mode.what)

class End(Callback):
    "After every other callback's `after_batch`: the batch's `(training, iter, reads, what was read)`"
    order = 1000
    def __init__(self, start): self.start = start
    def after_batch(self):
        s = self.start
        s.rows.append((self.training, self.iter, s.mode.n - s.n0, s.mode.what[s.w0:]))

def mlp(depth:int)->nn.Module:
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(8, 8), nn.ReLU())], nn.Linear(8, 1))

def learner(depth:int, path, cbs=()):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=g); y = x.sum(1, keepdim=True)
    items = [(x[i], y[i]) for i in range(len(x))]
    dls = DataLoaders(DataLoader(items[:64], bs=8), DataLoader(items[64:], bs=8), device='cpu')
    torch.manual_seed(0)
    return Learner(dls, mlp(depth), loss_func=MSELossFlat(), cbs=list(cbs))

def per_batch(learn, monkeypatch)->list:
    "`(training, iter, reads, what)` of each batch of two epochs, the statistics on the GPU's path"
    monkeypatch.setattr(R, "READS_FREE", ())
    # a fresh process's cache of device tensors: one that earlier tests filled to its bound would be cleared mid-run
    monkeypatch.setattr(fastexplorer.core, '_DEVICE_TENSORS', {})
    mode = HostReads(); start = Start(mode)
    for name in ('tensor', 'as_tensor'):   # made from the host's numbers on the device: a copy that waits for it on a GPU
        f = getattr(torch, name)
        def made(*args, _f=f, _name=name, **kwargs):
            if kwargs.get('device') is not None and torch.device(kwargs['device']).type == 'cpu': mode.n += 1; mode.what.append(_name)
            return _f(*args, **kwargs)
        monkeypatch.setattr(torch, name, made)
    learn.add_cbs([start, End(start)])
    with mode, learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-3)
    return start.rows

@pytest.mark.parametrize('depth', [1, 12, 60])
def test_reads_per_step(tmp_path, monkeypatch, depth):
    """The explorer's reads over a plain fit's, batch by batch: none on steps not sampled; on sampled ones, one read of
    the batch's flags and, on those that flush the queue (every second one here), one copy: 2 at most, whatever the layer
    count. The run's first sampled batch is left out: it makes what the others reuse (the histograms' bins, the sampled
    elements' indices, small index tensors) and fixes the histogram ranges."""
    monkeypatch.setattr(steps, 'FLUSH_BATCHES', 2)
    plain = per_batch(learner(depth, tmp_path), monkeypatch)
    seen = per_batch(learner(depth, tmp_path, [ExplorerCallback(tmp_path/'run', every=3, valid=True)]), monkeypatch)
    assert [r[:2] for r in seen] == [r[:2] for r in plain]
    extra = [(t, i, n - p[2], w) for (t,i,n,w),p in zip(seen, plain)][1:]
    assert all(n == 0 for t,i,n,w in extra if i % 3), [e for e in extra if e[1] % 3 and e[2]]
    sampled = [n for t,i,n,w in extra if not i % 3]
    assert max(sampled) <= 2 and 2 in sampled and len(sampled) == 2 * (3 + 2) - 1, extra   # some did flush
    df = load_run(tmp_path/'run').steps
    assert sorted(df.query("split == 'train'").step.unique()) == [0, 3, 6, 8, 11, 14], "every sampled training batch was written"
