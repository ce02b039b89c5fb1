"Layer selection, depth-idx labels, the probe's call log, custom statistics, raw recorders and `record`, on the model zoo."
import json
from pathlib import Path
import pytest, torch, torchinfo
from torch import nn
import torch.nn.functional as F
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from zoo import ZOO, RAISES, learner, images, Awkward, _gen
from untouched import Untouched
from fastai.callback.core import Callback, CancelBatchException, CancelEpochException, CancelFitException

def _hooks(model):
    return [(n, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for n,m in model.named_modules(remove_duplicate=False)]

def _fit(learn, n=1, lr=0., **kw):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr, **kw)

def _frozen_bn_labelled(n=16, bs=4):
    "The zoo's `frozen_bn` CNN on `n` images with labels `i % 3` (fastai's `fit` puts its BatchNorms in train mode: layer `0` alone is independent of the batch)"
    m = ZOO['frozen_bn']().model
    x,y = images(n=n),torch.arange(n) % 3
    return learner(m, x, y=y, bs=bs),x,y

# ---- selection

def test_select_each_kind_resnet18():
    "Selection by class, glob, index, module, predicate and mixed lists picks exactly the expected modules of resnet18"
    m = ZOO['resnet18_tv']().model
    mods = list(m.named_modules())
    assert list(select_modules(m, nn.Conv2d)) == [p for p,o in mods if type(o) is nn.Conv2d]
    assert len(select_modules(m, nn.Conv2d)) == 20
    assert list(select_modules(m, 'layer1.*.conv?')) == ['layer1.0.conv1', 'layer1.0.conv2', 'layer1.1.conv1', 'layer1.1.conv2']
    assert list(select_modules(m, 'layer2.0.downsample.0')) == ['layer2.0.downsample.0']
    assert list(select_modules(m, [3, -1])) == [mods[3][0], mods[-1][0]] == ['relu', 'fc']
    assert list(select_modules(m, m.layer3[1].bn2)) == ['layer3.1.bn2']
    assert list(select_modules(m, lambda p,o: p.endswith('bn1') and p.count('.') == 2)) == [f'layer{i}.{j}.bn1' for i in range(1, 5) for j in range(2)]
    assert list(select_modules(m, ['fc', nn.MaxPool2d, '1-1'])) == ['conv1', 'maxpool', 'fc']

@pytest.mark.parametrize('name', ['resnet18_tv', 'tabular', 'unet', 'two_parents', 'frozen_bn', 'language_model', 'awkward'])
def test_depth_idx_labels_match_torchinfo(name):
    "Our depth-idx labels name the same modules as torchinfo's `depth-idx` column (summary without input data)"
    m = ZOO[name]().model
    ours = depth_idx_labels(m)
    mods = dict(m.named_modules(remove_duplicate=False))
    rows = torchinfo.summary(m, verbose=0).summary_list
    theirs = {f"{r.depth}-{r.depth_index}": r.module for r in rows}
    assert len(theirs) == len(rows), "torchinfo labels are unique"
    assert ours.keys() == theirs.keys(), name
    for lbl,mod in theirs.items(): assert mods[ours[lbl]] is mod, (name, lbl, ours[lbl])
    # every label selects its module, and the tree carries the same labels
    for lbl,p in ours.items(): assert any(o is mods[p] for o in select_modules(m, lbl).values()), (name, lbl)
    tree = {n.path: n.xtra['depth_idx'] for n in m.to_representation() if n.type != 'Parameter' and 'shared_with' not in n.xtra}
    for p,lbl in tree.items(): assert ours[lbl] == p

def test_unknown_labels_list_close_matches():
    "Unknown paths, globs and labels raise a ValueError listing close matches; wrong kinds a TypeError"
    m = ZOO['resnet18_tv']().model
    with pytest.raises(ValueError, match=r"'layer1\.0\.con1'; close matches: 'layer1\.0\.conv1'"): select_modules(m, 'layer1.0.con1')
    with pytest.raises(ValueError, match=r"no layer with depth-idx label '2-99'.*depth 2 has labels 2-1 to 2-8"): select_modules(m, '2-99')
    with pytest.raises(ValueError, match="matches no module"): select_modules(m, 'layer9.*')
    with pytest.raises(ValueError, match="out of range"): select_modules(m, 1000)
    with pytest.raises(ValueError, match="not a module of this model"): select_modules(m, nn.Linear(2, 2))
    with pytest.raises(TypeError, match="bool"): select_modules(m, True)
    with pytest.raises(TypeError, match="not float"): select_modules(m, 1.5)
    with pytest.raises(ValueError, match="close matches: 'fc'"): record(m, 'fcc')
    with pytest.raises(ValueError, match="close matches: 'fc'"): ForwardOutput('fcc').attach(m)
    assert select_layers(m, nn.LSTM) == {}

def test_tree_shows_depth_idx():
    "Module nodes carry `depth_idx` in the JSON (schema-valid) and in the printed tree"
    r = ZOO['frozen_bn']().to_representation()
    d = json.loads(r.to_json())
    validate(d)
    assert r.find('').xtra['depth_idx'] == '0-1' and r.find('7').xtra['depth_idx'] == '1-8'
    assert 'Linear) 1-8 ->' in repr(r)

# ---- the probe's call log

@pytest.mark.parametrize('name', ['resnet18_tv', 'unet', 'text_classifier', 'awkward', 'two_inputs'])
def test_probe_enter_exit_nest(name):
    "Every module's first call lies inside its parent's (enter before, exit after), and events are distinct"
    r = ZOO[name]().to_representation()
    nodes = [n for n in r.find('') if n.type != 'Parameter' and 'shared_with' not in n.xtra]
    ran = [n for n in nodes if n.xtra.get('enter') is not None]
    assert len(ran) > 3
    ev = [e for n in ran for e in (n.xtra['enter'], n.xtra['exit'])]
    assert len(set(ev)) == len(ev)
    for n in ran:
        assert n.xtra['enter'] < n.xtra['exit']
        for c in n.nodes:
            if c.type == 'Parameter' or c.xtra.get('enter') is None or 'shared_with' in c.xtra: continue
            assert n.xtra['enter'] < c.xtra['enter'] < c.xtra['exit'] < n.xtra['exit'], (name, n.path, c.path)
    # the order of first entry agrees with `order`
    by_enter = sorted(ran, key=lambda n: n.xtra['enter'])
    ordered = sorted(ran, key=lambda n: n.xtra['order'])
    assert [n.path for n in by_enter if n.nodes and any(c.type != 'Parameter' for c in n.nodes)] == \
           [n.path for n in ordered if n.nodes and any(c.type != 'Parameter' for c in n.nodes)]

# ---- raw recorders

def test_condition_one_class_mean_as_callback():
    "During `fit`, a per-sample condition keeps the mean output of class 1 only: equal to the mean computed by hand"
    learn,x,y = _frozen_bn_labelled()
    rec = ForwardOutput('0', condition=lambda xb, yb: yb[0] == 1)
    before = _hooks(learn.model)
    _fit(learn, cbs=rec)
    with torch.no_grad(): h = learn.model[0](x)     # lr=0: the convolution is the same at every step
    assert rec.samples == {'0': int((y == 1).sum())}
    torch.testing.assert_close(rec['0'], h[y == 1].double().mean(0))
    assert _hooks(learn.model) == before and 'one_batch' not in learn.__dict__

def test_condition_around_get_preds_and_batch_condition():
    "Around `get_preds`, targets reach the condition; a per-batch bool keeps whole batches"
    learn,x,y = _frozen_bn_labelled()
    m = learn.model
    before = _hooks(m)
    with ForwardPre('7', condition=lambda xb, yb: yb[0] == 2, reduction='sum').hooked(learn) as rec: learn.get_preds()
    assert _hooks(m) == before
    with torch.no_grad(): f = m[:7].eval()(x)
    torch.testing.assert_close(rec['7'], f[y == 2].double().sum(0))
    calls = []
    with ForwardOutput('6', condition=lambda xb, yb: calls.append(yb) or len(calls) % 2 == 1).hooked(learn) as rec2: learn.get_preds()
    assert rec2.samples['6'] == 8 and len(calls) == 4   # batches 1 and 3 of 4

def test_backward_output_matches_autograd():
    "`BackwardOutput` sums the loss gradient w.r.t. a layer's output: (softmax - onehot) / bs, summed over samples"
    x,y = torch.randn(16, 6, generator=_gen()),torch.arange(16) % 3
    learn = learner(Awkward(), x, y=y)
    rec = BackwardOutput('head', reduction='sum')
    before = _hooks(learn.model)
    _fit(learn, cbs=rec)
    with torch.no_grad(): z = learn.model(x)
    g = (F.softmax(z, 1) - F.one_hot(y, 3)) / 4
    assert rec.samples['head'] == 16
    torch.testing.assert_close(rec['head'], g.double().sum(0), rtol=1e-5, atol=1e-6)
    assert _hooks(learn.model) == before

def test_memory_flat_over_200_batches():
    "With a running reduction the recorder holds the same bytes after 1 and 200 batches; with `None` it grows linearly"
    m = ZOO['frozen_bn']().model.eval()
    g = torch.Generator().manual_seed(0)
    sizes = {}
    for red in ('mean', 'sum', None):
        rec = ForwardOutput(['0', '5'], reduction=red)
        with rec.hooked(m), torch.no_grad():
            m(torch.randn(2, 3, 32, 32, generator=g)); first = rec.nbytes
            for _ in range(199): m(torch.randn(2, 3, 32, 32, generator=g))
        sizes[red] = (first, rec.nbytes)
        assert rec.samples == {'0': 400, '5': 400}
    assert sizes['mean'][0] == sizes['mean'][1] == sizes['sum'][1] > 0
    assert sizes[None][1] == 200 * sizes[None][0]

def test_save_load_equal(tmp_path):
    "Saved `.pt` recordings load back equal, for a running mean and for kept samples; a missing folder is an error"
    m = ZOO['resnet18_tv']().model.eval()
    x = images(n=4)
    for red in ('mean', None):
        rec = ForwardOutput(['layer1.0.conv1', 'fc'], reduction=red, condition=lambda xb, yb: torch.tensor([True, False, True, True]))
        with rec.hooked(m), torch.no_grad(): m(x); m(x)
        f = rec.save(tmp_path/f'rec_{red}.pt')
        d = load_recording(f)
        assert d['samples'] == rec.samples == {'layer1.0.conv1': 6, 'fc': 6}
        for p,v in rec.data.items():
            if red is None: assert len(d['data'][p]) == 2 and all(torch.equal(a, b) for a,b in zip(d['data'][p], v))
            else: assert torch.equal(d['data'][p], v)
        assert d['reduction'] == red and d['recorder'] == 'ForwardOutput'
    with pytest.raises(FileNotFoundError, match="does not exist"): rec.save(tmp_path/'nope'/'r.pt')
    assert not list(tmp_path.glob('.*.tmp'))

def test_apply_and_custom_reduction():
    "`apply` maps over the data; a callable reduction works like `functools.reduce` on each batch's samples"
    m = ZOO['frozen_bn']().model.eval()
    rec = ForwardOutput('7', reduction=lambda acc, x: torch.cat([acc, x]).amax(0, keepdim=True))
    x = images(n=8)
    with rec.hooked(m), torch.no_grad(): m(x[:4]); m(x[4:])
    with torch.no_grad(): out = m(x)
    torch.testing.assert_close(rec['7'], out.amax(0, keepdim=True))
    assert rec.apply(lambda t: t.shape) == {'7': torch.Size([1, 10])}

def test_hooks_removed_on_errors():
    "A failing condition or reduction raises naming it, and leaves no hook, guard or changed state behind"
    learn,x,y = _frozen_bn_labelled()
    before = _hooks(learn.model)
    def picky(xb, yb):
        if picky.n == 2: raise ZeroDivisionError('boom')
        picky.n += 1
        return yb[0] == 0
    picky.n = 0
    with pytest.raises(RuntimeError, match="condition `test_hooks_removed_on_errors.<locals>.picky` of BackwardOutput failed: ZeroDivisionError"):
        _fit(learn, cbs=[BackwardOutput('7', condition=picky), ForwardOutput('0')])
    assert _hooks(learn.model) == before and 'one_batch' not in learn.__dict__
    m = learn.model.eval()
    u = Untouched(m)
    with pytest.raises(RuntimeError, match=r"reduction `.*<lambda>` failed on the output of `3`: IndexError"):
        with ForwardOutput('3', reduction=lambda a, b: torch.cat([a, b], 5)).hooked(m), torch.no_grad(): m(x[:4]); m(x[4:8])
    with pytest.raises(ValueError, match="returned a mask of 3 values for a batch of 4 samples"):
        with ForwardOutput('7', condition=lambda xb, yb: torch.ones(3, dtype=torch.bool)).hooked(m), torch.no_grad(): m(x[:4])
    u.check()

class _Raise(Callback):
    "Raise `exc` in `before_batch` of training batch 2, after every other callback has hooked the model (the last `order`), or let the model raise in it (`armed`)"
    order = 99
    def __init__(self, exc, armed): self.exc,self.armed = exc,armed
    def before_batch(self):
        if not (self.training and self.iter == 2): return
        if isinstance(self.exc, BaseException): raise self.exc
        self.armed['model'] = self.exc == 'model'

class _NoHookLeft(Callback):
    "Check, before any callback hooks the model, that each batch starts with the model's hooks as they were before the fit"
    order = -99
    def __init__(self, before): self.before,self.seen = before,0
    def before_batch(self):
        assert _hooks(self.learn.model) == self.before, 'a hook of the last batch is left'
        self.seen += 1

EXITS = {'normal end': None, 'CancelBatchException': CancelBatchException(), 'CancelEpochException': CancelEpochException(),
         'CancelFitException': CancelFitException(), 'exception in another callback': RuntimeError('boom'),
         'KeyboardInterrupt': KeyboardInterrupt(), 'exception in the model': 'model'}
RECORDERS = {'ExplorerCallback': lambda p: ExplorerCallback(p, every=1, valid=True),
             'ForwardOutput': lambda p: ForwardOutput(['0', '5'], valid=True), 'BackwardOutput': lambda p: BackwardOutput(['0', '5'], valid=True)}

@pytest.mark.parametrize('exit', EXITS)
@pytest.mark.parametrize('rec', RECORDERS)
def test_every_exit_removes_the_hooks(rec, exit, tmp_path):
    "However a batch or the fit ends, our hooks are gone (each batch starts without them), the user's own hook stays, and the guard is off the learner"
    learn,x,y = _frozen_bn_labelled()
    armed = {'model': False}
    def mine(m, i, o):                                       # the user's own hook: for 'exception in the model', it raises in batch 2
        if armed['model']: armed['model'] = False; raise RuntimeError('the model failed')
    h = learn.model[3].register_forward_hook(mine)
    before = _hooks(learn.model)
    r,spy = RECORDERS[rec](tmp_path/'run'),_NoHookLeft(before)
    cbs = [r, spy, _Raise(EXITS[exit], armed)]
    try: _fit(learn, 2, cbs=cbs)
    except (RuntimeError, KeyboardInterrupt) as e: assert exit in ('exception in another callback', 'KeyboardInterrupt', 'exception in the model'), e
    assert spy.seen >= 3, spy.seen                           # the batches after the exit's were checked too, where there are some
    assert _hooks(learn.model) == before, 'hooks left'
    assert not any(n in learn.__dict__ for n in ('one_batch', '_do_epoch', '_call_one')), 'the guard is left on the learner'
    assert not getattr(r, 'tensor_handles', []), 'tensor hooks left'
    h.remove()

def test_train_valid_flags():
    "As a callback: training batches by default, validation batches with `valid=True`, nothing in `lr_find`"
    learn,x,y = _frozen_bn_labelled()
    tr,both = ForwardOutput('0'),ForwardOutput('0', train=False, valid=True)
    _fit(learn, cbs=[tr, both])
    assert tr.samples['0'] == 16 and both.samples['0'] == 16
    tr.reset()
    assert tr.samples == {} and tr.nbytes == 0

# ---- record()

def test_record_activations_and_postprocess():
    "`record` keeps each label's output of the latest forward (checked by hand), postprocesses on the fly, removes its hooks"
    learn = ZOO['resnet18_tv']()
    m = learn.model.eval()
    u = Untouched(m)
    x = images(n=2)
    with torch.no_grad(), record(learn, '1-1', 'layer4.1.conv2', nn.BatchNorm2d) as r:
        out = m(x)
        acts = r.activations
        assert list(acts)[:2] == ['1-1', 'layer4.1.conv2'] and 'layer3.0.bn1' in acts and 'bn1' in acts
        torch.testing.assert_close(acts['1-1'], m.conv1(x))
        m(x[:1])
        assert r.activations['1-1'].shape[0] == 1     # the latest forward only
    with torch.no_grad(), record(m, 'fc', postprocess=lambda o: torch.zeros_like(o)) as r:
        assert torch.equal(m(x), torch.zeros(2, 10)) and not torch.equal(r.activations['fc'], torch.zeros(2, 10))
    u.check()
    torch.testing.assert_close(m(x), out)

def test_record_layer_never_ran():
    "A recorded layer that does not run in a forward is an error naming it; postprocess keys are checked"
    m = ZOO['two_parents']().model
    class Partial(nn.Module):
        def __init__(self, tp): super().__init__(); self.tp = tp
        def forward(self, x): return self.tp.body(self.tp.emb(x))
    p = Partial(m)
    with record(p, 'tp.emb', 'tp.dec', '2-3') as r:
        with pytest.raises(RuntimeError, match=r"never ran in this forward of Partial: 'tp.dec', '2-3' \(tp.other\)"): p(torch.zeros(2, 3, dtype=torch.long))
    assert _hooks(p) == [(n, 0, 0, 0) for n,_ in p.named_modules(remove_duplicate=False)]
    with pytest.raises(KeyError, match="close matches: 'tp.emb'"): record(p, 'tp.emb', postprocess={'tp.em': abs})

# ---- custom statistics

def test_custom_stats_oracle_and_files(tmp_path):
    "Custom output and weight statistics: per-epoch means equal hand computations; files validate; `Run.df` lists them"
    learn,x,y = _frozen_bn_labelled()
    cb = ExplorerCallback(tmp_path/'run', every=1, layers=['0', '7'], updates=False,
                          custom={'m': lambda t: t.mean(), 'q': CustomStat(lambda t: {'lo': t.min().item(), 'hi': t.max()}, on='in')})
    cb.add_stat(lambda w: w.norm(), on='weight', name='norm').add_stat(lambda g: {'rms': g.pow(2).mean().sqrt()}, on='grad', name='g')
    _fit(learn, cbs=cb)
    for f in (tmp_path/'run').glob('*.json'): validate(json.loads(f.read_text()))
    run = load_run(tmp_path/'run')
    with torch.no_grad(): h = learn.model[0](x)
    s = run.stats('0', 'custom_out')[0]['m']
    assert s['n'] == 4 and s['nonfinite'] == 0
    assert abs(s['mean'] - h.double().mean().item()) < 1e-6           # equal batches: mean of batch means
    w = run.stats('7.weight', 'custom_weight')[0]['norm']
    assert abs(w['mean'] - learn.model[7].weight.norm().item()) < 1e-6 and w['min'] == w['max']
    df = run.df[run.df.kind.str.startswith('custom')]
    assert set(zip(df.layer, df.kind, df.stat)) >= {('0', 'custom_out', 'm'), ('7', 'custom_in', 'q.lo'), ('7', 'custom_in', 'q.hi'),
                                                   ('7.weight', 'custom_weight', 'norm'), ('7.bias', 'custom_grad', 'g.rms')}

def test_custom_stat_error_names_function_and_layer(tmp_path):
    "A custom statistic that raises stops the fit with its name and layer; no hook or guard is left, the run is marked failed"
    learn,x,y = _frozen_bn_labelled()
    before = _hooks(learn.model)
    def bad(t): return {'x': t.view(-1, 7).mean()}
    cb = ExplorerCallback(tmp_path/'run', every=1, custom=[CustomStat(bad, on='in')])
    with pytest.raises(RuntimeError, match="custom statistic `bad` failed on the input of `0`: RuntimeError"):
        _fit(learn, cbs=cb)
    assert _hooks(learn.model) == before and '_do_epoch' not in learn.__dict__
    assert load_run(tmp_path/'run').meta['status'] == 'failed'
    with pytest.raises(TypeError, match="returned a str"):
        _fit(learn, cbs=ExplorerCallback(tmp_path/'run2', every=1, custom={'s': lambda t: 'x'}))
    with pytest.raises(ValueError, match="two custom statistics are named 'm'"): ExplorerCallback(custom=[CustomStat(abs, name='m'), CustomStat(abs, name='m')])

def test_backward_output_as_context_manager():
    "Around a plain forward and backward, `BackwardOutput` gets d(sum)/d(output) = 1 per element; its tensor hooks go on exit"
    m = ZOO['frozen_bn']().model.eval()
    x = images(n=6)
    rec = BackwardOutput(['5', '7'], reduction='sum', condition=lambda xb, yb: torch.arange(6) < 4)
    with rec.hooked(m):
        (m(x) * 3).sum().backward()
        assert len(rec.tensor_handles) == 2
    assert rec.tensor_handles == [] and rec.samples == {'5': 4, '7': 4}
    torch.testing.assert_close(rec['7'], torch.full((10,), 12., dtype=torch.float64))
    torch.testing.assert_close(rec['5'], (3 * m[7].weight.sum(0) * 4).double().reshape(8, 1, 1), rtol=1e-5, atol=1e-6)
    m.zero_grad()
    (m(x)).sum().backward()                 # after the block: nothing more is recorded
    assert rec.samples == {'5': 4, '7': 4}
