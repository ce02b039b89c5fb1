"`Learner.loss_landscape`: exact restore (also after failures), a convex check, reproducibility, trajectories."
import json, math, os, shutil
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
    assert len(ls.trajectory) == len(learn.explorer.snapshot_files) == 3 and all(len(p) == 2 for p in ls.trajectory)
    snaps = learn.explorer.snapshot_files                  # files in the run folder, nothing held in memory
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

# ---- through the Learner's own callbacks (issue 16) ----
from collections import Counter
from types import SimpleNamespace
from fastai.callback.core import Callback
from fastai.learner import Recorder
from fastai.data.core import DataLoaders
from fastai.text.all import LMDataLoader, language_model_learner, AWD_LSTM, awd_lstm_lm_config

class LearnerSnapshot:
    "The Learner's attribute bindings, its callback list and each callback's attribute bindings; `check()` asserts none changed"
    def __init__(self, learn):
        self.learn,self.attrs,self.cbs = learn,dict(learn.__dict__),list(learn.cbs)
        self.cb_attrs = [dict(cb.__dict__) for cb in self.cbs]
    def check(self):
        l = self.learn
        assert l.__dict__.keys() == self.attrs.keys(), f"Learner attributes added or removed: {l.__dict__.keys() ^ self.attrs.keys()}"
        assert all(l.__dict__[k] is v for k,v in self.attrs.items()), \
            f"Learner attributes rebound: {[k for k,v in self.attrs.items() if l.__dict__[k] is not v]}"
        assert list(l.cbs) == self.cbs, f"callback list changed: {list(l.cbs)} != {self.cbs}"
        for cb,d in zip(self.cbs, self.cb_attrs):
            assert cb.__dict__.keys() == d.keys() and all(cb.__dict__[k] is v for k,v in d.items()), f"attributes of {cb} changed"
        assert all(getattr(l, cb.name) is cb for cb in self.cbs), "a callback's Learner attribute is missing"
        assert not l.lock.locked(), "the Learner's lock is held"

def _lm_learner():
    "fastai's `language_model_learner` on AWD_LSTM (2 layers, 16 hidden units) over 2,000 random tokens, built offline"
    ids = torch.randint(0, 30, (2000,), generator=torch.Generator().manual_seed(0))
    dls = DataLoaders(LMDataLoader([ids[:1600]], lens=[1600], bs=4, seq_len=10, shuffle=False),
                      LMDataLoader([ids[1600:]], lens=[400], bs=4, seq_len=10, shuffle=False))
    dls.vocab = [f'w{i}' for i in range(30)]
    cfg = {**awd_lstm_lm_config, 'emb_sz': 8, 'n_hid': 16, 'n_layers': 2}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return language_model_learner(dls, AWD_LSTM, config=cfg, pretrained=False)

def _centre(learn, **kw):
    "The landscape (3×3, over every validation batch) and `validate`'s loss on the same batches, after checking nothing changed"
    u,s = Untouched(learn.model),LearnerSnapshot(learn)
    ls = learn.loss_landscape(n=3, n_batches=len(learn.dls.valid), seed=0, progress=False, **kw)
    u.check(); s.check()
    return ls,learn.validate()[0]

def test_language_model_learner():
    "fastai's language model (its `RNNCallback` takes `out[0]`, its `ModelResetter` resets the hidden state): each point from a reset state"
    learn = _lm_learner()
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    ls,valid = _centre(learn)
    assert all(l is not None for r in ls.loss for l in r)
    # the centre is point 5 of 9: without a reset it would start from the hidden state point 4 left
    assert ls.loss[1][1] == pytest.approx(valid, rel=1e-5), (ls.loss[1][1], valid)

class Wrapped(nn.Module):
    "Returns an object holding the logits in `.logits`, as a Hugging Face model returns a `ModelOutput`"
    def __init__(self, m): super().__init__(); self.m = m
    def forward(self, x): return SimpleNamespace(logits=self.m(x))

class Logits(Callback):
    def after_pred(self): self.learn.pred = self.pred.logits

def test_callback_unpacks_output():
    "A callback setting `learn.pred = pred.logits` in `after_pred` applies; a user hook on the model is kept"
    g = torch.Generator().manual_seed(0)
    learn = learner(Wrapped(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))), torch.randn(16, 12, generator=g),
                    y=torch.randint(0, 3, (16,), generator=g), cbs=Logits())
    h = learn.model.m[0].register_forward_hook(lambda m,i,o: None)
    ls,valid = _centre(learn)
    assert ls.loss[1][1] == pytest.approx(valid, rel=1e-6)
    assert len(learn.model.m[0]._forward_hooks) == 1
    h.remove()

class CPUAutocast(Callback):
    "Enters `torch.autocast('cpu', bfloat16)` in `before_batch` and leaves it in `after_loss`, as `MixedPrecision` does on CUDA"
    order = 10
    def __init__(self): self.dtypes = []
    def before_batch(self): self.ac = torch.autocast('cpu', dtype=torch.bfloat16); self.ac.__enter__()
    def after_pred(self): self.dtypes.append(self.learn.pred.dtype); self.learn.pred = self.learn.pred.float()
    def after_loss(self): self.ac.__exit__(None, None, None)

def test_autocast_events_cpu():
    "Each batch of each point runs under the autocast a callback enters in `before_batch`, left in `after_loss`"
    g = torch.Generator().manual_seed(0)
    cb = CPUAutocast()
    learn = learner(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(16, 12, generator=g),
                    y=torch.randint(0, 3, (16,), generator=g), cbs=cb)
    dtypes = cb.dtypes
    ls,valid = _centre(learn)
    assert dtypes[:9 * 4] == [torch.bfloat16] * (9 * 4), Counter(dtypes)     # 9 points × 4 batches, then validate's
    assert not torch.is_autocast_enabled('cpu')
    assert ls.loss[1][1] == pytest.approx(valid, rel=1e-6)
    assert all(p.dtype == torch.float32 for p in learn.model.parameters())

class PredDtype(Callback):
    "Notes the prediction's dtype before `MixedPrecision.after_pred` casts it to float"
    order = 5
    def __init__(self): self.dtypes = []
    def after_pred(self): self.dtypes.append(self.learn.pred.dtype)

@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_mixed_precision_cuda():
    "Under fastai's `MixedPrecision` each point's forward runs in float16 autocast; the scaler and the model come back"
    g = torch.Generator().manual_seed(0)
    cb = PredDtype()
    learn = learner(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(16, 12, generator=g),
                    y=torch.randint(0, 3, (16,), generator=g), cbs=cb).to_fp16()
    learn.dls.to('cuda'); learn.model.cuda()
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    dtypes = cb.dtypes; dtypes.clear()
    ls,valid = _centre(learn)
    assert dtypes[:9 * 4] == [torch.float16] * (9 * 4), Counter(dtypes)
    assert ls.loss[1][1] == pytest.approx(valid, rel=1e-5)

class Events(Callback):
    "Counts the events it is called with"
    def __init__(self): self.seen = Counter()
    def __call__(self, event_name): self.seen[event_name] += 1; return super().__call__(event_name)

def test_recorders_see_nothing(tmp_path, monkeypatch):
    "The `Recorder`, the progress bar and an `ExplorerCallback` recording every batch see no event of a landscape; other callbacks see all"
    learn = digits_learner(cbs=[ExplorerCallback(tmp_path/'run', every=1, valid=True), Events()])
    with learn.no_logging(): learn.fit(1, 1e-2)
    rec,ex = learn.recorder,learn.explorer
    hist = [list(map(list, rec.values)), list(rec.losses), list(rec.iters), list(rec.lrs), rec.final_record]
    counts = (ex.n_steps, ex.n_epochs, ex.n_fits)
    files = {p.name: p.stat().st_size for p in (tmp_path/'run').iterdir()}
    called = Counter()
    for c in (Recorder, ProgressCallback, ExplorerCallback):
        monkeypatch.setattr(c, '__call__', lambda self, e, c=c: called.update([c.__name__]))
    learn.events.seen.clear()
    learn.loss_landscape(n=2, n_batches=2, seed=0, progress=False)
    monkeypatch.undo()
    assert not called, called
    assert learn.events.seen['after_pred'] == 4 * 2 and learn.events.seen['before_validate'] == 4, learn.events.seen
    assert [list(map(list, rec.values)), list(rec.losses), list(rec.iters), list(rec.lrs), rec.final_record] == hist
    assert (ex.n_steps, ex.n_epochs, ex.n_fits) == counts
    now = {p.name: p.stat().st_size for p in (tmp_path/'run').iterdir()}
    assert now.pop('landscape.json') and now == files

class Boom(Callback):
    "Raises in `before_validate` of the third validation phase it sees"
    def __init__(self): self.k = 0
    def before_validate(self):
        self.k += 1
        if self.k == 3: raise RuntimeError('boom at the third point')

def test_restored_after_callback_raises_at_third_point():
    "A callback raising at the third point: the error propagates naming the point; model, RNG and Learner are as before"
    learn = _trained()
    learn.add_cb(Boom())
    learn.pred,learn.loss,learn.xb,learn.yb,learn.dl,learn.epoch,learn.training = object(),object(),(1,),(2,),object(),7,True
    u,s = Untouched(learn.model),LearnerSnapshot(learn)
    with pytest.raises(RuntimeError, match='third') as e: learn.loss_landscape(n=3, seed=0, progress=False)
    assert any('grid point' in n for n in getattr(e.value, '__notes__', [])), e.value
    u.check(); s.check()
    assert learn.recorder.learn is learn
    learn.remove_cb(Boom)
    ls = learn.loss_landscape(n=3, seed=0, progress=False)         # and the Learner still works
    assert ls.loss[1][1] is not None

def test_loss_not_scalar():
    "A loss function that does not reduce is named, with the loss's shape"
    learn = _trained()
    learn.loss_func = nn.CrossEntropyLoss(reduction='none')
    u = Untouched(learn.model)
    with pytest.raises(ValueError, match=r'not a scalar.*shape \(4,\)'): learn.loss_landscape(n=2, seed=0, progress=False)
    u.check()

# ---- what a landscape is evaluated on, and where it is saved (issue 33) ----
def test_default_covers_the_validation_set():
    "By default every validation batch, within a budget of 8: the centre is `validate`'s loss; fewer say they are part"
    learn = digits_learner()
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2)
    nb, bs = len(learn.dls.valid), learn.dls.valid.bs
    assert nb <= 8                                         # the digits' 359 validation samples: 6 batches of 64
    u,s = Untouched(learn.model),LearnerSnapshot(learn)
    ls = learn.loss_landscape(n=3, seed=0, progress=False)
    u.check(); s.check()
    assert ls.evaluated_on == {'batches': nb, 'samples': len(learn.dls.valid_ds), 'whole': True, 'valid_batches': nb}
    assert ls.loss[1][1] == pytest.approx(learn.validate()[0], rel=1e-5)          # the same batches, weights, eval mode
    part = learn.loss_landscape(n=3, n_batches=2, seed=0, progress=False)
    assert part.evaluated_on == {'batches': 2, 'samples': 2 * bs, 'whole': False, 'valid_batches': nb}
    assert 'part of the validation set' in repr(part)
    validate(part.to_dict())
    with pytest.raises(ValueError, match='n_batches must be'): learn.loss_landscape(n=3, n_batches=0, progress=False)

def test_default_budget_on_a_larger_validation_set():
    "A validation set of more than 8 batches: the first 8, and the result says they are part of it"
    learn = digits_learner(bs=16)                            # 359 samples: 23 batches
    ls = learn.loss_landscape(n=2, seed=0, progress=False)
    assert ls.evaluated_on == {'batches': 8, 'samples': 8 * 16, 'whole': False, 'valid_batches': len(learn.dls.valid)}

def test_callback_passed_to_fit_gets_the_landscape(tmp_path, capsys):
    "After `fit(cbs=ExplorerCallback(p))` the landscape goes to `p` and says so; a trajectory asks for the callback"
    cb = ExplorerCallback(tmp_path/'run', every=5, snapshots=True)
    learn = digits_learner()
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2, cbs=cb)
    assert not hasattr(learn, 'explorer') and cb not in learn.cbs       # fastai took it off at the end of the fit
    u,s = Untouched(learn.model),LearnerSnapshot(learn)
    capsys.readouterr()
    ls = learn.loss_landscape(n=3, seed=0, progress=False)
    u.check(); s.check()
    f = tmp_path/'run'/'landscape.json'
    assert ls.path == f and f"saved to {f}" in capsys.readouterr().out and f"saved to {f}" in repr(ls)
    doc = json.loads(f.read_text())
    validate(doc)
    assert doc['loss'] == ls.loss and doc['evaluated_on'] == ls.evaluated_on and doc['evaluated_on']['whole']
    with pytest.raises(ValueError, match=r'fit\(cbs=\.\.\.\).*learn\.add_cb\(cb\)'):
        learn.loss_landscape(n=3, trajectory=True, progress=False)
    u.check(); s.check()
    learn.add_cb(cb)                                      # as the error says: the callback back, its snapshots with it
    ls = learn.loss_landscape(n=3, trajectory=True, progress=False)
    assert len(ls.trajectory) == 2 and ls.path == f and json.loads(f.read_text())['directions'] == 'pca'

def test_without_a_run_folder_nothing_is_written(tmp_path, monkeypatch, capsys):
    "No callback ever recorded a fit (none, or one never fitted): nothing is written, and the result says so"
    monkeypatch.chdir(tmp_path)
    for learn in (digits_learner(), digits_learner(cbs=ExplorerCallback('run'))):
        ls = learn.loss_landscape(n=2, seed=0, progress=False)
        assert ls.path is None and repr(ls).endswith('not saved)'), repr(ls)
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == ''

CHROMIUM = '/usr/bin/chromium'

@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_page_says_what_the_loss_is_on(tmp_path):
    "The card's subtitle says on how many validation samples and batches the loss is, and when on part of the set"
    from playwright.sync_api import sync_playwright, expect
    from test_browser import ARGS, serving
    learn = digits_learner()
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2, cbs=ExplorerCallback(tmp_path/'whole', every=5))
    learn.loss_landscape(n=5, n_batches=2, seed=0, progress=False)
    shutil.copytree(tmp_path/'whole', tmp_path/'part')
    learn.loss_landscape(n=5, seed=0, progress=False)
    shutil.copytree(tmp_path/'whole', tmp_path/'old')             # a file from before `evaluated_on`: nothing new said
    doc = json.loads((tmp_path/'old'/'landscape.json').read_text()); del doc['evaluated_on']
    save_json(doc, tmp_path/'old'/'landscape.json')
    axes = 'around the final weights, along two random filter-normalised directions (seed 0)'
    want = {'whole': f'{axes} · loss on 359 validation samples in 6 batches, the whole validation set',
            'part': f'{axes} · loss on 128 validation samples in 2 of 6 batches, part of the validation set',
            'old': axes}
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page, problems = b.new_page(viewport={'width': 1400, 'height': 900}), []
        page.on('console', lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ('error', 'warning') else None)
        page.on('pageerror', lambda e: problems.append(f"pageerror: {e}"))
        try:
            with serving(page, tmp_path) as srv:
                for run,text in want.items():
                    page.goto(srv.url + f'?run={run}')
                    expect(page.locator('#landscape-sub')).to_have_text(text)
                    expect(page.locator('#landscape-surface')).to_be_visible()
        finally: b.close()
    assert problems == []
