"`ExplorerCallback` on the model zoo and against independent oracles: files, hooks, interruptions, statistics."
import json, math
from pathlib import Path
import pytest, torch
from torch import nn
from fastai.callback.core import Callback, CancelFitException
from fastai.callback.hook import ActivationStats
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from zoo import ZOO, RAISES, learner, images

TRAIN = [n for n in ZOO if n not in RAISES | {'lazy'}]

def _hooks(model):
    return [(n, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for n,m in model.named_modules(remove_duplicate=False)]

def _fit(learn, n=2, lr=1e-3, **kw):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr, **kw)

def _validate_folder(path):
    files = sorted(Path(path).glob('*.json'))
    for f in files: validate(json.loads(f.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))))
    return [f.name for f in files]

@pytest.mark.parametrize('name', TRAIN)
def test_zoo_trains_two_epochs(name, tmp_path):
    "Each zoo model trains 2 epochs with the callback: the files validate, and no hook or guard is left"
    learn = ZOO[name]()
    before = _hooks(learn.model)
    cb = ExplorerCallback(tmp_path/'run', every=1, valid=True)
    _fit(learn, cbs=cb)
    assert _validate_folder(tmp_path/'run') == ['epoch_0001.json', 'epoch_0002.json', 'representation.json', 'run.json']
    run = load_run(tmp_path/'run')
    assert run.meta['status'] == 'finished' and len(run.epochs) == 2
    assert _hooks(learn.model) == before and '_do_epoch' not in learn.__dict__
    acts = run.df.query("kind == 'act' and stat == 'mean'")
    assert len(acts) and acts.value.notna().all(), name
    assert len(run.df.query("kind == 'valid_act'")), name

class _Boom(Callback):
    "Raise `exc` at event `at` of the given training batch"
    order = 0
    def __init__(self, exc, at='after_pred', it=1): self.exc,self.at,self.it = exc,at,it
    def __call__(self, event_name):
        if event_name == self.at and getattr(self, 'training', False) and self.learn.iter == self.it and self.learn.epoch == 1:
            raise self.exc
        return super().__call__(event_name)

@pytest.mark.parametrize('exc,status', [(RuntimeError('boom'), 'failed'), (KeyboardInterrupt(), 'cancelled')])
@pytest.mark.parametrize('at', ['before_batch', 'after_pred', 'after_backward'])
def test_interrupted_fit_leaves_no_hooks(exc, status, at, tmp_path):
    "An exception or `KeyboardInterrupt` mid-epoch: no hook left, epoch 1 intact, epoch 2 partial, run marked"
    learn = ZOO['resnet18_tv']()
    before = _hooks(learn.model)
    cb = ExplorerCallback(tmp_path/'run', every=1)
    with pytest.raises(type(exc)): _fit(learn, 3, cbs=[cb, _Boom(exc, at)])
    assert _hooks(learn.model) == before and '_do_epoch' not in learn.__dict__
    _validate_folder(tmp_path/'run')
    run = load_run(tmp_path/'run')
    assert run.meta['status'] == status and type(exc).__name__ in run.meta['error']
    assert [(e['epoch'], e['partial']) for e in run.epochs] == [(1, False), (2, True)]

def test_exception_inside_forward_of_a_hooked_layer(tmp_path):
    "An exception raised by a layer's forward, while our hooks are registered: hooks gone"
    learn = ZOO['frozen_bn']()
    state = {'n': 0}
    def bad(m, i, o):
        state['n'] += 1
        if state['n'] == 5: raise KeyboardInterrupt
    h = learn.model[3].register_forward_hook(bad)
    before = _hooks(learn.model)
    with pytest.raises(KeyboardInterrupt): _fit(learn, 3, cbs=ExplorerCallback(tmp_path/'run', every=1))
    assert _hooks(learn.model) == before
    h.remove()

def test_cancel_fit_marks_epoch_partial(tmp_path):
    "`CancelFitException` mid-epoch: hooks removed, a final file marks the epoch partial, the run is cancelled"
    learn = ZOO['frozen_bn']()
    before = _hooks(learn.model)
    _fit(learn, 3, cbs=[ExplorerCallback(tmp_path/'run', every=1), _Boom(CancelFitException(), 'after_pred')])
    run = load_run(tmp_path/'run')
    assert run.meta['status'] == 'cancelled'
    assert [(e['epoch'], e['partial']) for e in run.epochs] == [(1, False), (2, True)]
    assert _hooks(learn.model) == before

def test_activation_stats_match_fastai(tmp_path):
    "Per-layer activation mean and std equal fastai's `ActivationStats` over the same (every) batch, within 1e-5"
    learn = digits_learner(cbs=[ActivationStats(every=None), ExplorerCallback(tmp_path/'run', every=1, layers=lambda p, m: has_own_params(m))])
    _fit(learn, 1)
    fa = learn.activation_stats.stats         # one list per batch, one dict per layer (flatten_model order, with params)
    run = load_run(tmp_path/'run')
    layers = [p for p,m in learn.model.named_modules() if has_own_params(m)]
    xb,_ = learn.dls.one_batch()
    sizes = {}
    hs = [m.register_forward_hook(lambda m, i, o, p=p: sizes.__setitem__(p, o.numel())) for p,m in learn.model.named_modules() if p in layers]
    with torch.no_grad(): learn.model(xb)
    for h in hs: h.remove()
    for j,p in enumerate(layers):
        means = torch.tensor([b[j]['mean'] for b in fa], dtype=torch.float64)
        stds = torch.tensor([b[j]['std'] for b in fa], dtype=torch.float64)
        n = sizes[p]                          # every batch has the same size: drop_last
        N = n * len(means); mean = means.mean()
        var = (((n - 1) * stds**2 + n * means**2).sum() - N * mean**2) / (N - 1)
        ours = run.stats(p)[0]
        assert ours['n'] == N, p
        assert math.isclose(ours['mean'], mean.item(), rel_tol=1e-5, abs_tol=1e-6), p
        assert math.isclose(ours['std'], var.sqrt().item(), rel_tol=1e-5), p

class _GradNorms(Callback):
    "Record `p.grad.norm()` of every parameter after each backward"
    order = 60
    def before_fit(self): self.norms = {}
    def after_backward(self):
        for n,p in self.learn.model.named_parameters():
            if p.grad is not None: self.norms.setdefault(n, []).append(p.grad.norm().item())

def test_grad_norms_equal_pytorch(tmp_path):
    "Gradient norms (mean over the sampled steps) equal `p.grad.norm()` after backward"
    spy = _GradNorms()
    learn = digits_learner(cbs=[ExplorerCallback(tmp_path/'run', every=1), spy])
    _fit(learn, 1)
    run = load_run(tmp_path/'run')
    for n,v in spy.norms.items():
        assert math.isclose(run.stats(n, 'grad')[0]['norm'], sum(v) / len(v), rel_tol=1e-5), n

def test_histogram_counts_and_dead_units(tmp_path):
    "Histogram counts sum to the finite element count; the dead units of a hand-built layer and of the ReLU after it are exact"
    class DeadChannels(nn.Module):
        "Channels 1 and 3 of 4 are never positive"
        def forward(self, x):
            return torch.stack([x[:, 0], -x[:, 1].abs() - 0.1, x[:, 2], torch.full_like(x[:, 3], -1.)], 1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), DeadChannels(), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    learn = learner(model, images(n=8, size=8))
    _fit(learn, 1, cbs=ExplorerCallback(tmp_path/'run', every=1, layers=['1', '2']))
    run = load_run(tmp_path/'run')
    # after the custom layer (not a rectifier) only the constant channel 3 is dead: channel 1 varies below zero;
    # after its ReLU, channels 1 and 3 were never positive
    for layer,want in (('1', (4, 1, 0.25, [3], 'constant')), ('2', (4, 2, 0.5, [1, 3], 'never positive'))):
        a = run.stats(layer)[0]
        assert (a['units'], a['dead'], a['dead_frac'], a['dead_units'], a['dead_rule']) == want, layer
        assert sum(a['hist']) == a['hist_n'] == a['n'] - a['nan'] - a['inf'] == 8 * 4 * 8 * 8   # 256 elements a batch: all sampled

def test_histogram_counts_values_outside_its_range(tmp_path):
    "`hist_out` counts the sampled values below the range and from its high end up, which the edge bins also hold"
    class Pattern(nn.Module):
        "Six fixed values per sample: one below [-10, 10], -10 and 10 on its ends, 30 above"
        def forward(self, x): return x[:, :6] * 0 + x.new_tensor([-20., -10., 0., 9.99, 10., 30.])
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), Pattern(), nn.Linear(6, 2))
    learn = learner(model, images(n=8, size=8))
    _fit(learn, 1, cbs=ExplorerCallback(tmp_path/'run', every=1, layers=['3'], hist_bins=4, hist_range=(-10, 10)))
    a = load_run(tmp_path/'run').stats('3')[0]
    assert a['hist_range'] == [-10, 10], a
    n = a['hist_n'] // 6
    assert n > 0 and a['hist_n'] == a['n'], a
    assert a['hist_out'] == [n, 2 * n], a                     # -20 below; 10 and 30 from the high end up
    assert a['hist'] == [2 * n, 0, n, 3 * n], a               # edge bins include what lies outside: the counts add up

def test_histogram_bins_fit_each_layer_and_stay_for_the_run(tmp_path):
    "Each layer's bins are fitted to its first sampled batch and kept: over epochs, in the step database, and by a resumed run"
    class Scaled(nn.Module):
        "Its input times `k`: layers whose values differ by orders of magnitude"
        def __init__(self, k): super().__init__(); self.k = k
        def forward(self, x): return x * self.k
    def model(): return nn.Sequential(nn.Flatten(), nn.Linear(192, 16), Scaled(1e-3), Scaled(1e3), nn.Linear(16, 2))
    p = tmp_path/'run'
    _fit(learner(model(), images(n=16, size=8)), 2, cbs=ExplorerCallback(p, every=1, layers=['1', '2', '3']))
    run = load_run(p)
    for layer in ('1', '2', '3'):
        (a,b) = run.stats(layer)
        assert a['hist_range'] == b['hist_range'] == run.hist_range(layer) == list(read_hist_ranges(p)[layer]), layer
        lo,hi = a['hist_range']
        assert lo < a['min'] < 0 < a['max'] < hi and hi - lo <= 8 * max(-a['min'], a['max']), (layer, a)   # its own scale
        assert sum(v > 0 for v in a['hist']) >= 10 and sum(a['hist']) == a['hist_n'], (layer, a['hist'])   # spread, all counted
    _fit(learner(model(), images(n=16, size=8)), 1, cbs=ExplorerCallback(p, every=1, layers=['1', '2', '3'], resume=True))
    again = load_run(p)
    assert [again.stats(l)[-1]['hist_range'] for l in ('1', '2', '3')] == [run.hist_range(l) for l in ('1', '2', '3')]
    assert run.meta['hist'] == {'bins': 40, 'range': None}
    steps,counts = again.step_hist('2')
    assert len(steps) == sum(e['sampled']['train'] for e in again.epochs) and (counts.sum(1) > 0).all()   # the first batch too

def test_nan_counted_and_alerted(tmp_path):
    "NaN and Inf are counted, statistics are over the finite values, and the first layer with them is alerted"
    class Poison(nn.Module):
        "Puts one NaN and one Inf into a copy of its input"
        def forward(self, x):
            x = x.detach().clone(); x[0, 0] = float('nan'); x[1, 0] = float('inf')
            return x
    class Net(nn.Module):
        "A side branch goes through `Poison`; the loss does not see it, so training stays finite"
        def __init__(self):
            super().__init__()
            self.lin,self.poison,self.act,self.head = nn.Linear(48, 6),Poison(),nn.ReLU(),nn.Linear(6, 2)
        def forward(self, x):
            h = self.lin(x.flatten(1))
            self.act(self.poison(h))
            return self.head(h)
    learn = learner(Net(), images(n=8, size=4))
    _fit(learn, 1, cbs=ExplorerCallback(tmp_path/'run', every=1, layers=['lin', 'poison', 'act']))
    run = load_run(tmp_path/'run')
    a, b = run.stats('poison')[0], run.stats('act')[0]
    assert (a['nan'], a['inf'], a['n']) == (2, 2, 2 * 4 * 6)      # two training batches of 4 × 6
    fin = a['n'] - 4
    assert a['mean'] is not None and math.isfinite(a['mean']) and a['hist_n'] == fin == sum(a['hist'])
    assert run.alerts.query("source == 'epoch' and kind == 'nonfinite' and stat == 'act'").layer.tolist() == ['poison'], run.alerts
    assert run.alerts.query("source == 'epoch' and kind == 'nonfinite' and stat == 'op'").layer.tolist() == ['poison'], run.alerts   # traced to its op

def test_silent_outside_fit(tmp_path):
    "`lr_find`, `get_preds` and `validate` write nothing"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run'))
    with learn.no_bar(), learn.no_logging():
        learn.get_preds(); assert not (tmp_path/'run').exists(), 'get_preds'
        learn.validate(); assert not (tmp_path/'run').exists(), 'validate'
        learn.lr_find(num_it=5, show_plot=False); assert not (tmp_path/'run').exists(), 'lr_find'
    assert not any(m._forward_hooks for m in learn.model.modules())

@pytest.mark.parametrize('bad', ['file', 'unwritable'])
def test_bad_path_fails_before_training(bad, tmp_path):
    "A run folder that is a file or cannot be written fails in `before_fit`, before any batch"
    import os
    if bad == 'file': p = tmp_path/'f'; p.touch(); target = p
    else:
        if os.geteuid() == 0: pytest.skip('root can write anywhere')
        p = tmp_path/'ro'; p.mkdir(); p.chmod(0o500); target = p/'run'
    learn = digits_learner(cbs=ExplorerCallback(target))
    seen = []
    learn.add_cb(type('Spy', (Callback,), {'before_batch': lambda self: seen.append(1)})())
    with pytest.raises((NotADirectoryError, PermissionError, OSError), match=str(p.name)): _fit(learn, 1)
    assert not seen and '_do_epoch' not in learn.__dict__

def test_existing_run_not_clobbered(tmp_path):
    "A folder holding another run is an error unless `overwrite=True`; other files survive an overwrite"
    _fit(digits_learner(cbs=ExplorerCallback(tmp_path/'run')), 1)
    (tmp_path/'run'/'notes.txt').write_text('mine')
    with pytest.raises(FileExistsError, match='already holds a run'): _fit(digits_learner(cbs=ExplorerCallback(tmp_path/'run')), 1)
    _fit(digits_learner(cbs=ExplorerCallback(tmp_path/'run', overwrite=True)), 1)
    assert (tmp_path/'run'/'notes.txt').read_text() == 'mine'

def test_fine_tune_appends_and_records_fits(tmp_path):
    "Several fits on one Learner (`fine_tune`: frozen, then unfrozen) append epochs and record each fit's trainable count"
    learn = ZOO['unet']()
    learn.add_cb(ExplorerCallback(tmp_path/'run', every=2))
    with learn.no_bar(), learn.no_logging(): learn.fine_tune(2, freeze_epochs=1)
    run = load_run(tmp_path/'run')
    assert [e['epoch'] for e in run.epochs] == [1, 2, 3] and [e['fit'] for e in run.epochs] == [0, 1, 1]
    f0, f1 = run.meta['fits']
    assert f1['trainable'] == f1['params'] == sum(p.numel() for p in set(learn.model.parameters()))
    frozen = ZOO['unet']()
    frozen.freeze()
    assert f0['trainable'] == sum(p.numel() for p in set(frozen.model.parameters()) if p.requires_grad) < f1['trainable']

def test_memory_flat_over_batches(tmp_path):
    "The epoch accumulators do not grow with the number of batches"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=1))
    _fit(learn, 1)
    from fastexplorer.stats import _ACC
    cb = learn.explorer
    assert cb.act.rows == [] and cb.act.acc.shape == (len(cb.keys), len(_ACC) + cb.hist_bins + 2)

def test_load_run_roundtrip(tmp_path):
    "`load_run` gives back the trees, the recorder rows and a long DataFrame"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5))
    _fit(learn, 2)
    run = load_run(tmp_path/'run')
    assert run.representation.get_dict() == json.loads((tmp_path/'run'/'representation.json').read_text())
    assert list(run.recorder.index) == [1, 2] and {'train_loss', 'valid_loss', 'accuracy', 'lr'} <= set(run.recorder.columns)
    df = run.df
    assert set(df.kind) == {'act', 'weight', 'grad'} and set(df.epoch) == {1, 2}
    assert df.query("layer == '4.weight' and kind == 'weight' and stat == 'update_ratio'").value.gt(0).all()
    assert run.hist('0.2').shape == (40, 2)

def test_act_row_layouts_and_dtypes():
    "Channels-last, non-contiguous, bfloat16, int and bool tensors reduce like their float32 contiguous selves"
    from fastexplorer.reduce import act_row, ElementSampler, _ROW
    SUM = _ROW['sum']
    WHOLE = [_ROW[k] for k in ('nan', 'finite', 'sample_n', 'sum')]                   # what does not depend on the sampled elements
    REST = [_ROW[k] for k in ('m2', 'abssum', 'min', 'max', 'mean_b', 'near_zero')]
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    ref = act_row(x, ElementSampler())
    assert torch.allclose(act_row(x.to(memory_format=torch.channels_last), ElementSampler()), ref)
    assert torch.allclose(act_row(x.transpose(2, 3), ElementSampler())[WHOLE], ref[WHOLE])
    bf = act_row(x.bfloat16(), ElementSampler())
    assert torch.allclose(bf[REST], act_row(x.bfloat16().float(), ElementSampler())[REST])
    assert act_row(torch.tensor([True, False, True]), ElementSampler())[SUM] == 2    # sum of a bool output
    assert act_row(torch.arange(5), ElementSampler())[SUM] == 10

def test_unsupported_outputs_never_raise():
    "Empty, one-element, complex, `None` and string outputs are skipped or reduced without raising"
    from fastexplorer.stats import ActStats
    st = ActStats(5, 'cpu')
    m = nn.Identity()
    for i,o in enumerate([torch.zeros(0, 3), torch.ones(1), torch.ones(2, dtype=torch.complex64), None, 'text']): st.add(i, m, o)
    st.end()
    res = st.finish(['empty', 'one', 'complex', 'none', 'str'])
    assert list(res) == ['one'] and res['one']['std'] is None and res['one']['mean'] == 1.0

def test_failed_epoch_write_cleans_up(tmp_path):
    "A failure writing an epoch file (disk full, say) propagates, leaves no guard or hook, and marks the run failed"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=1))
    before = _hooks(learn.model)
    cb = learn.explorer
    def full(doc): raise OSError(28, 'No space left on device')
    orig = RunWriter.write_epoch
    RunWriter.write_epoch = lambda self, doc, **kw: full(doc)
    try:
        with pytest.raises(OSError, match='No space'): _fit(learn, 2)
    finally: RunWriter.write_epoch = orig
    assert _hooks(learn.model) == before and '_do_epoch' not in learn.__dict__
    assert load_run(tmp_path/'run').meta['status'] == 'failed'
    _fit(learn, 1)                                   # the next fit works normally and appends
    assert load_run(tmp_path/'run').meta['status'] == 'finished' and '_do_epoch' not in learn.__dict__

def test_update_ratio_oracle_and_zero_init():
    "`update_ratio` is `|Δw| / |w|` of each step, by hand; a bias that is exactly zero before a step has no ratio for it"
    from fastexplorer.params import ParamStats
    w = nn.Parameter(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))
    b = nn.Parameter(torch.zeros(5))
    ps = ParamStats([w, b])
    expected = []
    for step in range(3):
        ps.snapshot()
        w0 = w.detach().clone()
        with torch.no_grad(): w.add_(0.1 * (step + 1)); b.add_(0.5)
        expected.append(float((w.detach() - w0).norm() / w0.norm()))
        ps.updates()
    res = ps.finish(['w', 'b'])
    assert abs(res['w']['weight']['update_ratio'] - sum(expected) / 3) < 1e-6
    assert abs(res['w']['weight']['update_max'] - max(expected)) < 1e-6
    assert res['w']['weight']['update_steps'] == 3
    # b: 0 -> 0.5 (no ratio: it was zero), 0.5 -> 1 (ratio 1), 1 -> 1.5 (ratio 0.5); not 1e12
    assert abs(res['b']['weight']['update_ratio'] - 0.75) < 1e-9 and res['b']['weight']['update_max'] == 1.0
    only_zero = ParamStats([nn.Parameter(torch.zeros(3))])
    only_zero.snapshot(); only_zero.updates()
    assert only_zero.finish(['z'])['z']['weight']['update_ratio'] is None

# ---- the statistics' columns are found by name

# private layouts: a step's rows follow the order the statistics are declared in (`step_row_columns`, `PARAM_STEP_STATS`)
LAYOUTS = {'_ROW': 'reduce', '_ACC': 'stats', '_RAW': 'stats', '_GRAD_ROW': 'params', '_GSUM': 'params', 'CUSTOM_COLUMNS': 'custom'}

def _rotate_layouts(monkeypatch):
    "Put the columns of every named layout in another order (each one column on, so that none keeps its place), in every module holding it"
    import importlib, sys
    from fastcore.basics import val2idx
    for name,owner in LAYOUTS.items():
        old = getattr(importlib.import_module(f'fastexplorer.{owner}'), name)
        names = list(old)
        new = val2idx(names[1:] + names[:1])
        for m in [m for k,m in list(sys.modules.items()) if k.startswith('fastexplorer') and getattr(m, name, None) is old]:
            monkeypatch.setattr(m, name, new)

class _PoisonValid(Callback):
    "NaN in a few inputs of the second validation batch: its statistics take the masked path"
    def before_batch(self):
        if not self.training and self.iter == 1:
            x = self.xb[0].clone(); x[:2] = float('nan'); self.learn.xb = (x,)

class _TwoRanks:
    "`torch.distributed` as seen by two ranks that recorded the same batches: a sum doubles, a maximum stays"
    ReduceOp = torch.distributed.ReduceOp
    def get_world_size(self, group=None): return 2
    def all_gather_object(self, out, o, group=None): out[:] = [o, o]
    def all_reduce(self, t, op, group=None):
        if op == self.ReduceOp.SUM: t.mul_(2)

def _zeros(t): return (t == 0).float().mean()
def _rms(g): return g.pow(2).mean().sqrt()

def _layout_results(path, monkeypatch)->dict:
    "What each reader of the statistics' columns gives, keyed by the statistics' names: a fit's files, two ranks combined, live alerts"
    import sqlite3
    from fastexplorer import stats, reduce, distributed
    from fastexplorer.alerts import LiveAlerts, DEAD_AFTER
    res,g,lin,relu = {},torch.Generator().manual_seed(0),nn.Linear(6, 6),nn.ReLU()
    # one row of each path (finite; NaN and Inf masked), by name
    x = torch.randn(64, 6, generator=g); y = x.clone(); y[0, :2] = float('nan'); y[1, 0] = float('inf')
    for t in (x, y):
        r = reduce.act_row(t, reduce.ElementSampler(), bins=8, lo=-4, hi=4)
        res.setdefault('rows', []).append(({k: r[i].item() for k,i in reduce._ROW.items()}, r[len(reduce._ROW):].tolist()))
    # gradients with NaN and Inf, and an update, of one step
    ps = ParamStats([w := nn.Parameter(torch.randn(3, 4, generator=g))], steps=True)
    w.grad = torch.randn(3, 4, generator=g); w.grad[0, :2] = float('nan'); w.grad[1, 1] = float('inf'); w.grad[2] = 0
    ps.grads(); ps.snapshot()
    with torch.no_grad(): w.add_(1.)
    ps.updates()
    from fastexplorer.params import _GRAD_STEP
    res['params'] = ps.finish(['w']),{k: ps.step[0, i].item() for k,i in _GRAD_STEP.items()}
    # a fit: activation (the masked path on the poisoned validation batch), gradient, update, custom and step statistics, alerts
    torch.manual_seed(0)
    learn = digits_learner(cbs=[ExplorerCallback(path, every=1, valid=True).add_stat(_zeros).add_stat(_rms, on='grad'), _PoisonValid()])
    _fit(learn, 1)
    run = load_run(path)
    res['epoch'] = run.epochs[0]['tree'],run.epochs[0]['alerts'],run.meta.get('live_alerts')
    res['step hists'] = {(l, sp): [a.tolist() for a in run.step_hist(l, sp)] for l in step_info(path)['layers'] for sp in ('train', 'valid')}
    res['step values'] = [(d := run.query_steps(kinds=k, wide=True)).astype(object).where(d.notna(), None).to_dict('records')
                          for k in ('act', 'valid_act', 'grad')]   # NaN as None: equal to itself
    assert all(res['step values']) and any(a['stat'] == 'valid_act' for a in res['epoch'][1])
    # two ranks that recorded the same batches: the sums double, the calls (a maximum over ranks) stay
    st,cs = stats.ActStats(2, 'cpu', bins=8, hist_range=(-4, 4)),CustomStats()
    for _ in range(2):
        x = torch.randn(16, 6, generator=g)
        st.add(0, lin, x); st.add(1, relu, x.relu(), x); st.add(1, relu, (x - 1).relu(), x); st.end()   # `relu` is called twice
        cs.add(CustomStat(torch.mean, name='m'), 'custom_out', 'a', x)
    with monkeypatch.context() as mp:
        mp.setattr(distributed, 'dist', _TwoRanks())
        distributed.all_reduce_stats([st]); distributed.all_reduce_custom(cs)
    res['ranks'] = st.finish(['a', 'b']),cs.finish()
    a = res['ranks'][0]['a']
    assert (a['n'], a['calls'], res['ranks'][1]['a']['custom_out']['m']['n']) == (2 * 2 * 96, 2, 4), res['ranks']
    # the step series of two ranks' parts of one batch
    parts = []
    for _ in range(2):
        st = stats.ActStats(2, 'cpu', bins=8, steps=True)
        x = torch.randn(8, 6, generator=g); st.add(0, lin, x); st.add(1, relu, x.relu(), x)
        parts.append([distributed.on_host(({'step': 0, 'epoch': 1, 'split': 'train', 'iter': 0}, st.end(), None, None, None))])
    (_,row,*_), = distributed.combine_steps(parts)
    cols = stats.step_row_columns()
    res['combined'] = {k: row[:, i].tolist() for i,k in enumerate(cols)},row[:, len(cols):].tolist()
    # live alerts: the dead layers, leaving out one that held NaN
    st = stats.ActStats(2, 'cpu')
    for i in range(DEAD_AFTER):
        x = -torch.rand(4, 3, generator=g); y = x.clone()
        if i == 0: y[0, 0] = float('nan')
        st.add(0, relu, relu(y), y); st.add(1, relu, relu(x), x); st.end()
    la = LiveAlerts({'a': 0, 'b': 1})
    la.check([{'step': DEAD_AFTER - 1, 'split': 'train'}], None, None, ['a', 'b'], [], 1, st)
    res['live'] = la.alerts
    assert [a['layer'] for a in la.alerts] == ['b'], la.alerts
    return res

def test_columns_are_read_by_name(tmp_path, monkeypatch):
    "Every reader finds the statistics' columns by name: with each named layout in another order, every result is the same"
    want = _layout_results(tmp_path/'one', monkeypatch)
    _rotate_layouts(monkeypatch)
    from fastexplorer.reduce import _ROW
    from fastexplorer.stats import _ACC
    assert list(_ROW)[0] == 'finite' and list(_ACC)[-1] == 'n'       # the rotation took
    got = _layout_results(tmp_path/'two', monkeypatch)
    for k in want: assert got[k] == want[k], k

def test_a_diverging_regression_warns_nothing_and_counts_units_in_float64(tmp_path):
    """Unscaled price targets (issue 46; the bug zoo's `unscaled_price_targets`: MSE on dollars, SGD at 0.1 blows up): a
    layer's unit extrema reach float32's ±3e38 before NaN, and the fit raises no RuntimeWarning of ours ("overflow in subtract")"""
    import warnings
    from bugzoo import cases
    learn = cases()['unscaled_price_targets'].build(False)
    with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)   # numpy's overflow warning: an error in our hook, named in the run
        _fit(learn, 3, 0.1, cbs=ExplorerCallback(tmp_path/'run', every=1, preflight=True))
    assert load_run(tmp_path/'run').meta['status'] == 'finished'
    big = (torch.tensor([3e38, 2e38, 5.]), torch.tensor([-3e38, -1e38, 5.]))   # a unit 6e38 wide overflows float32
    assert units_stats([(*big, 1)])[0]['dead_units'] == [2] and dead_mask(*big).tolist() == [False, False, True]
