"`ExplorerCallback` scaled out: two CPU processes under DDP (gloo), bfloat16 autocast, fp16 on CUDA, compiled models."
import json, math, os, socket, subprocess, sys
from pathlib import Path
import numpy as np, pytest, torch
from torch import nn
from fastai.basics import Learner, DataLoaders, DataLoader, MSELossFlat
from fastai.callback.core import Callback
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
import ddp_worker as W

HERE = Path(__file__).parent

def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _launch(out):
    "Run `ddp_worker.py` (two processes) with a timeout, so that a hang fails the test instead of blocking it"
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(HERE.parent), os.environ.get('PYTHONPATH', '')])}
    return subprocess.run([sys.executable, str(HERE/'ddp_worker.py'), str(out), str(_free_port())],
                          capture_output=True, text=True, timeout=240, env=env)

def _fit(learn, n=2, lr=1e-2):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, lr)

def _stats(epoch:dict)->dict:
    "`{path: stats}` of one epoch document"
    res = {}
    def walk(d):
        if 'stats' in d.get('xtra', {}): res[d['path']] = d['xtra']['stats']
        for c in d.get('nodes', []): walk(c)
    walk(epoch['tree'])
    return res

def _close(a, b, path, tol=1e-4):
    "Recursive comparison of two statistics: numbers within `tol` (relative, or absolute near zero), the rest equal"
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))} differ"
        for k in a: _close(a[k], b[k], f"{path}.{k}", tol)
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: lengths {len(a)} and {len(b)}"
        for i,(x,y) in enumerate(zip(a, b)): _close(x, y, f"{path}[{i}]", tol)
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=tol, abs_tol=tol), f"{path}: {a} vs {b}"
    else: assert a == b, f"{path}: {a!r} vs {b!r}"

@pytest.fixture(scope='module')
def ddp_launch(tmp_path_factory):
    "The runs of `ddp_worker.py`, launched once for the tests that read them: `(folder, completed process)`"
    out = tmp_path_factory.mktemp('ddp')
    return out, _launch(out)

@pytest.fixture(scope='module')
def ddp_out(ddp_launch):
    "The folder of the runs that must have finished"
    out,r = ddp_launch
    for k in ('run', 'uneven', 'drift'):
        assert (out/k/'run.json').exists() and load_run(out/k).meta['status'] == 'finished', f"the {k} run failed:\n{r.stderr[-8000:]}"
    return out

def test_ddp_one_set_of_files(ddp_out):
    "Under `distrib_ctx`, rank 0 alone writes: one run folder, valid files, and the epochs say they hold two ranks"
    assert sorted(p.name for p in ddp_out.iterdir()) == ['drift', 'raised', 'run', 'start', 'told', 'uneven'], "a non-zero rank wrote a run folder"
    files = sorted(p.name for p in (ddp_out/'run').iterdir())
    assert files == ['.lock', 'epoch_0001.json', 'epoch_0002.json', 'epochs.jsonl', 'history.sqlite', 'representation.json', 'run.json', 'steps.sqlite'], files   # .lock: the writer's, kept (empty) after the fit
    run = load_run(ddp_out/'run')
    for e in run.epochs: validate(e)
    assert run.meta['status'] == 'finished' and [e['ranks'] for e in run.epochs] == [2, 2]
    assert {k for k in _stats(run.epochs[0]) if '.' not in k} == {'', 'conv', 'act', 'lin', 'side'}, "paths have no `module.` prefix"   # '': the model's output

def test_findings_are_told_by_rank_0_alone(ddp_out):
    "Under DDP at `verbose=2`, rank 0 tells something at each epoch's end (issue 46); rank 1 prints nothing of ours"
    r0,r1 = [(ddp_out/'told'/f'rank{r}.txt').read_text() for r in (0, 1)]
    assert [l.split(':')[1] for l in r0.splitlines() if l.startswith('fastexplorer: epoch')] == [' epoch 1', ' epoch 2'], r0
    assert 'fastexplorer' not in r1, r1

def test_ddp_equals_one_process_over_the_union(ddp_out, tmp_path):
    "Two ranks' epoch files equal one process's whose batches are the unions of theirs: activations, histograms, dead units, gradients, updates"
    # `DistributedDL` gives rank 0 items 0-31 and rank 1 items 32-63 (not shuffled), each in batches of 8. One process
    # taking batches of 16 in `union_order` sees, at step b, rank 0's batch b followed by rank 1's; with a mean loss,
    # its gradient is the average DDP takes, so it follows the same weights. Histograms cover every element
    # (`sample=10**6`), so they are exact counts; validation is split the same way (8 items a rank, one batch of 16).
    single = W.learner(W.union_order(), 2 * W.BS, tmp_path/'single', custom=W.CUSTOM)
    _fit(single)
    one,two = load_run(tmp_path/'single'),load_run(ddp_out/'run')
    for e1,e2 in zip(one.epochs, two.epochs):
        assert e1['sampled'] == e2['sampled'] == {'train': 4, 'valid': 1}
        s1,s2 = _stats(e1),_stats(e2)
        assert set(s1) == set(s2) and 'custom_out' in s2['act'], "the custom statistic was recorded"
        for k in s1:
            # a custom statistic is a value per batch: under DDP, per rank's batch. Its epoch mean over equal halves
            # of a mean-like statistic equals the mean over the unions, and it counts twice the batches
            for kind in ('custom_out', 'custom_valid_out'):
                c1,c2 = s1[k].pop(kind, None),s2[k].pop(kind, None)
                assert (c1 is None) == (c2 is None), (k, kind)
                if c1 is not None:
                    _close(c1['pos_frac']['mean'], c2['pos_frac']['mean'], f"epoch {e1['epoch']} {k} {kind} pos_frac")
                    assert c2['pos_frac']['n'] == 2 * c1['pos_frac']['n'] > 0
            _close(s1[k], s2[k], f"epoch {e1['epoch']} {k}")
    a = _stats(two.epochs[0])['act']['act']
    assert a['n'] == 4 * 16 * 4 * 36 and a['hist_n'] == a['n'] and a['units'] == 4 and 0 in a['dead_units']

def test_ddp_step_series_equal_one_process(ddp_out, tmp_path):
    "Each step of the two ranks' step series equals the one process's step over the union of their batches"
    single = W.learner(W.union_order(), 2 * W.BS, tmp_path/'single', custom=W.CUSTOM)
    _fit(single)
    one,two = load_run(tmp_path/'single').steps,load_run(ddp_out/'run').steps
    keys = ['step', 'epoch', 'split', 'layer', 'kind', 'stat']
    m = one.merge(two, on=keys, how='outer', suffixes=('_one', '_two'), indicator=True)
    assert (m._merge == 'both').all(), f"rows in one series only:\n{m[m._merge != 'both'].head()}"
    assert set(m.kind) == {'act', 'valid_act', 'grad', 'weight', 'loss', 'hyper'} and m.step.nunique() == 9   # 8 training steps; validation after 4 and 8
    m = m[m.kind != 'loss']              # each rank's loss is its half's; their mean is the union's (compared below)
    both = m.value_one.notna() & m.value_two.notna()
    assert (m.value_one.isna() == m.value_two.isna()).all()
    bad = m[both & ~np.isclose(m.value_one, m.value_two, rtol=1e-4, atol=1e-4)]
    assert bad.empty, f"steps differ:\n{bad[keys + ['value_one', 'value_two']].head(10)}"
    l1 = one.query("kind == 'loss' and stat == 'loss'").value.values
    l2 = two.query("kind == 'loss' and stat == 'loss'").value.values
    np.testing.assert_allclose(l1, l2, rtol=1e-4)
    for split in ('train', 'valid'):
        h1,h2 = read_step_hist(tmp_path/'single', 'act', split)[1],read_step_hist(ddp_out/'run', 'act', split)[1]
        assert h1.shape[0] > 0 and (h1 == h2).all(), split

def test_rank0_failing_to_start_stops_every_rank(ddp_out):
    "Rank 0 cannot open its run folder (it holds a run): it raises, and every other rank raises with its message, at once"
    msgs = {p.name: p.read_text() for p in (ddp_out/'start').iterdir()}
    assert sorted(msgs) == ['rank0.txt', 'rank1.txt'], msgs
    assert msgs['rank0.txt'].startswith('FileExistsError') and 'already holds a run' in msgs['rank0.txt']
    assert msgs['rank1.txt'].startswith('RuntimeError') and 'fastexplorer: rank 0 could not start the run' in msgs['rank1.txt']
    assert 'already holds a run' in msgs['rank1.txt']
    run = load_run(ddp_out/'run')
    assert run.meta['status'] == 'finished' and len(run.epochs) == 2, "the existing run is left as it was"

def test_replicas_that_drift_apart_are_an_alert(ddp_out):
    "Under DDP, rank 1 alone edits `lin.weight` after epoch 1's training: epoch 1's alerts name it, an error; the healthy DDP run has none"
    out = ddp_out
    al = load_run(out/'drift').alerts.query("kind == 'replica_drift'")
    assert list(al.epoch) == [1, 2] and set(al.layer) == {'lin'} and set(al.severity) == {'error'}, al
    assert 'lin.weight' in al.message.iloc[0]
    assert 'replica_drift' not in set(load_run(out/'run').alerts.kind)

def test_uneven_batch_counts_do_not_hang(ddp_out):
    "Ranks that saw and sampled different numbers of batches, one never calling a layer, still meet once per epoch and sum what they saw"
    run = load_run(ddp_out/'uneven')
    assert run.meta['status'] == 'finished' and len(run.epochs) == 2
    for e in run.epochs:
        assert e['ranks'] == 2 and e['sampled'] == {'train': 3, 'valid': 0}   # the maximum: rank 0 sampled 3, rank 1 one
        s = _stats(e)
        assert s['conv']['act']['n'] == (3 + 1) * W.BS * 4 * 36, "elements of both ranks' sampled batches"
        assert s['side']['act']['n'] == 3 * W.BS * 3, "`side` ran on rank 0 only"
        assert s['side']['act']['units'] == 3 and s['act']['act']['units'] == 4

def test_a_rank_that_raises_ends_the_run(ddp_launch):
    "Rank 1 raising mid-epoch under DDP: the launch ends (no hang: within the timeout) with rank 1's error"
    out,r = ddp_launch
    assert r.returncode != 0 and 'boom on rank 1' in r.stderr, r.stderr[-3000:]
    assert load_run(out/'raised').meta['status'] == 'running', "rank 0 was ended by the launcher while it waited for rank 1"

def _tiny(path, cbs=(), **kw):
    "One process, the worker's model and data"
    learn = W.learner(range(W.N), W.BS, path, **kw)
    for cb in cbs: learn.add_cb(cb)
    return learn

class CPUAutocast(Callback):
    "Mixed precision on the CPU: bfloat16 autocast for the forward and the loss, as fastai's `MixedPrecision` does on CUDA"
    order = 10
    def before_batch(self): self.ctx = torch.autocast('cpu', dtype=torch.bfloat16); self.ctx.__enter__()
    def after_pred(self): assert self.pred.dtype == torch.bfloat16, "autocast is on"
    def after_loss(self): self.ctx.__exit__(None, None, None)

def test_bf16_autocast_on_cpu(tmp_path):
    "bfloat16 activations: statistics finite, accumulated in float64, and within bfloat16 precision of a float32 run"
    seen = {}
    class Check(Callback):
        order = ExplorerCallback.order + 1
        def after_pred(self):
            if self.training: seen['dtypes'] = (self.explorer.act.acc.dtype, self.explorer.pstats.gsum.dtype)
    runs = []
    for i,cbs in enumerate([[], [CPUAutocast(), Check()]]):
        learn = _tiny(tmp_path/f'r{i}', cbs)
        _fit(learn, 1, 0.)   # the same weights throughout: only the precision differs
        runs.append(_stats(load_run(tmp_path/f'r{i}').epochs[0]))
    assert seen['dtypes'] == (torch.float64, torch.float64)
    f32,b16 = runs
    for k in ('conv', 'act', 'lin'):
        for s in ('mean', 'std', 'abs_mean', 'max'):
            v = b16[k]['act'][s]
            assert v is not None and math.isfinite(v) and math.isclose(v, f32[k]['act'][s], rel_tol=3e-2, abs_tol=1e-2), (k, s, v, f32[k]['act'][s])
        assert b16[k]['act']['n'] == f32[k]['act']['n'] and b16[k]['act']['nan'] == b16[k]['act']['inf'] == 0
    for k in ('conv.weight', 'lin.weight'):
        assert math.isclose(b16[k]['grad']['norm'], f32[k]['grad']['norm'], rel_tol=5e-2), k

def _counting_backend():
    "A `torch.compile` backend running the traced graph as it is, counting how often it runs"
    calls = {'n': 0}
    def backend(gm, inputs):
        def run(*args):
            calls['n'] += 1
            return gm.forward(*args)
        return run
    return backend, calls

def test_compiled_model_records_every_sampled_batch(tmp_path):
    "A compiled model whose graph was traced without hooks: sampled batches run eagerly with hooks, the others compiled"
    ref = _tiny(tmp_path/'ref', every=2, valid=False)
    _fit(ref, 1, 1e-2)
    backend,calls = _counting_backend()
    torch._dynamo.reset()
    learn = _tiny(tmp_path/'comp', every=2, valid=False)
    learn.model = torch.compile(learn.model, backend=backend)
    learn.model.train(); learn.model(torch.zeros(2, 1, 6, 6))   # traced (and cached) with no hook in place
    assert calls['n'] == 1
    _fit(learn, 1, 1e-2)
    # 8 training batches, 4 sampled (eager) and 4 not: the compiled graph ran for these, and validation's 2
    # (eval mode traces a second graph)
    assert calls['n'] == 1 + 4 + 2, calls
    s0,s1 = _stats(load_run(tmp_path/'ref').epochs[0]),_stats(load_run(tmp_path/'comp').epochs[0])
    assert set(s1) == set(s0) and {k for k in s1 if '.' not in k} == {'', 'conv', 'act', 'lin', 'side'}, "paths have no `_orig_mod.` prefix"
    for k in ('conv', 'act', 'lin', 'side'): _close(s0[k]['act'], s1[k]['act'], k, 1e-5)
    assert s1['conv']['act']['calls'] == 4
    assert not learn.model._orig_mod.conv._forward_hooks

CUDA = pytest.param('cuda', marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')])

@pytest.fixture(params=['cpu', CUDA])
def amp_learner(request):
    """`_tiny` on each device, for fastai's `MixedPrecision`: on the CPU its autocast and loss scaler are pointed at the CPU
    (it names CUDA), so its loss-scaling paths run on any machine, and on a GPU as users run them"""
    dev = request.param
    if dev == 'cpu': request.getfixturevalue('fastai_amp_on_cpu')
    def make(path, **kw):
        learn = _tiny(path, **kw)
        learn.dls.to(dev); learn.model.to(dev)
        return learn
    return make

def test_fp16_gradient_stats_are_unscaled(tmp_path, amp_learner):
    "Under `to_fp16`, gradient norms are those of the true gradients: `p.grad.norm() / scale`, computed by hand"
    seen = []
    class ByHand(Callback):
        order = ExplorerCallback.order - 1   # after MixedPrecision scaled, before the explorer reads
        def after_backward(self):
            if self.training and self.iter == 0:
                sc = self.learn.scaler.get_scale()
                seen.append((sc, float(self.learn.model.lin.weight.grad.float().norm()) / sc))
    # fastai's default scale, 2**16, overflows this model's float16 weight gradients at once: its first steps are
    # skipped (the next test), and their gradients left out
    learn = amp_learner(tmp_path/'r', every=1000).to_fp16(init_scale=2.**8)
    learn.add_cb(ByHand())
    _fit(learn, 1, 1e-3)
    e = load_run(tmp_path/'r').epochs[0]
    g = _stats(e)['lin.weight']['grad']
    assert seen[0][0] > 1 and g is not None and g['steps'] == 1, (seen, e['amp'])
    assert math.isclose(g['norm'], seen[0][1], rel_tol=1e-3), (g['norm'], seen[0])
    assert e['amp']['dtype'] == 'float16' and e['amp']['skipped_steps'] == 0 and e['amp']['loss_scale'] > 1

def test_fp16_overflow_steps_are_counted_and_left_out(tmp_path, amp_learner):
    "A loss scale so large the fp16 gradients overflow: the steps are skipped, counted, and their Inf gradients not recorded"
    learn = amp_learner(tmp_path/'r', every=1)
    learn.to_fp16(init_scale=2.**60, growth_interval=10**6)   # halved after each overflow: 8 steps are not enough
    w0 = learn.model.lin.weight.detach().clone()
    _fit(learn, 1, 1e-3)
    e = load_run(tmp_path/'r').epochs[0]
    assert e['amp']['skipped_steps'] == 8, e['amp']
    assert torch.equal(learn.model.lin.weight.detach(), w0), "every step was skipped"
    s = _stats(e)
    assert s['lin.weight']['grad'] is None, "the skipped steps' gradients are not statistics"
    assert not [a for a in e['alerts'] if a['kind'] == 'nonfinite' and a['stat'] == 'grad']
    validate(e)

def test_bf16(tmp_path, amp_learner):
    "`to_bf16`: no scaler, nothing skipped, statistics finite"
    learn = amp_learner(tmp_path/'r', every=2).to_bf16()
    _fit(learn, 1, 1e-3)
    e = load_run(tmp_path/'r').epochs[0]
    assert e['amp'] == {'dtype': 'bfloat16', 'skipped_steps': 0, 'loss_scale': None}
    a = _stats(e)['conv']['act']
    assert math.isfinite(a['mean']) and a['nan'] == a['inf'] == 0

def test_fp16_overflow_is_traced_to_the_cast(tmp_path, amp_learner):
    """Inputs a million times too large: float16's cast of them makes Inf in the first layer. The tracer runs the batch
    again in the autocast it ran in, so it finds that cast (in float32 nothing overflows) and says what to do"""
    class Huge(Callback):
        order = 0   # before `MixedPrecision` enters its autocast
        def before_batch(self): self.learn.xb = (self.xb[0] * 1e6,)
    learn = amp_learner(tmp_path/'r', cbs=[Huge()], every=1).to_fp16()
    _fit(learn, 1, 1e-3)
    origin = [a for a in load_run(tmp_path/'r').epochs[0]['alerts'] if a['kind'] == 'nonfinite' and a['stat'] == 'op']
    assert len(origin) == 1 and origin[0]['op'] == 'aten::_to_copy' and origin[0]['layer'] == 'conv', origin
    assert 'the cast to float16' in origin[0]['message'] and '`learn.to_bf16()`' in origin[0]['hint'], origin[0]
