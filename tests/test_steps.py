"The step series: every sampled batch in `steps.sqlite`, equal to independent oracles, readable while training writes, and whole after `kill -9`"
import json, os, random, signal, sqlite3, subprocess, sys, textwrap, threading, time
from pathlib import Path
import numpy as np, pytest, torch
from fastai.callback.core import Callback
from fastai.callback.hook import ActivationStats
from fastexplorer.all import *
from fastexplorer.stepdb import StepWriter, table_stats
from fastexplorer.steps import step_layout
ACT_STATS = table_stats(step_layout(), 'act')   # the step database's activation columns

class _GradNorms(Callback):
    "Records `p.grad.norm()` of every parameter after each backward, by hand"
    order = 100
    def __init__(self, names): self.names,self.norms = names,[]
    def after_backward(self):
        ps = dict(self.learn.model.named_parameters())
        self.norms.append({n: ps[n].grad.norm().item() for n in self.names})

def test_steps_equal_activation_stats_and_hand_grad_norms(tmp_path):
    "With `every=1`, each training batch's activation mean and std equal fastai's `ActivationStats` within 1e-5, and gradient norms equal `p.grad.norm()`, step by step"
    learn = digits_learner(bs=32)
    keys = list(select_layers(learn.model))
    pnames = [n for n,_ in learn.model.named_parameters()]
    afs,spy = ActivationStats(every=None, modules=[learn.model.get_submodule(k) for k in keys]),_GradNorms(pnames)
    learn.add_cbs([afs, spy, ExplorerCallback(tmp_path/'run', every=1)])
    with learn.no_logging(): learn.fit(1, 1e-2)
    n = len(learn.dls.train)
    assert n >= 30 and len(afs.stats) == len(spy.norms) == n
    run = load_run(tmp_path/'run')
    act = run.query_steps(stats=['mean', 'std'], kinds='act').pivot_table(index='step', columns=['layer', 'stat'], values='value')
    assert list(act.index) == list(range(n)), "one row per training step, numbered from 0"
    for i,k in enumerate(keys):
        k = k or 'output'   # the tables' name of the model's root
        np.testing.assert_allclose(act[(k, 'mean')].values, [s[i]['mean'] for s in afs.stats], rtol=1e-5, atol=1e-5, err_msg=k)
        np.testing.assert_allclose(act[(k, 'std')].values, [s[i]['std'] for s in afs.stats], rtol=1e-5, atol=1e-5, err_msg=k)
    g = run.query_steps(stats='norm', kinds='grad').pivot_table(index='step', columns='layer', values='value')
    assert sorted(g.columns) == sorted(pnames)
    for p in pnames: np.testing.assert_allclose(g[p].values, [s[p] for s in spy.norms], rtol=1e-5, err_msg=p)
    loss = run.query_steps(stats='loss')
    assert len(loss) == n and loss.value.notna().all()
    lr = run.query_steps(stats='lr', kinds='hyper')
    assert len(lr) == n and (lr.value == 1e-2).all()

def test_long_fit_keeps_one_histogram_in_a_few(tmp_path, monkeypatch):
    "A fit that samples more training batches than `HIST_STEPS` keeps the histograms of one in `hist_every_for(sampled)`, and every batch's statistics"
    import fastexplorer.stepdb as stepdb
    monkeypatch.setattr(stepdb, 'HIST_STEPS', 8)
    learn = digits_learner(bs=32, cbs=ExplorerCallback(tmp_path/'run', every=1, valid=True))
    with learn.no_logging(): learn.fit(1, 1e-2)
    n,nv = len(learn.dls.train),len(learn.dls.valid)
    k = -(-n // 8)
    assert k >= 4
    run = load_run(tmp_path/'run')
    for layer in ('0.0', 'output'):
        steps,counts = run.step_hist(layer)
        assert steps.tolist() == list(range(0, n, k)) and counts.sum(1).tolist() == [counts[0].sum()] * len(steps)
        assert len(run.step_hist(layer, 'valid')[0]) == nv                   # every validation batch's
        assert len(run.query_steps(layer, 'mean', 'act')) == n               # every training batch's statistics

def test_epoch_files_unchanged_by_steps(tmp_path):
    "The epoch files hold the same statistics with and without the step series"
    docs = []
    for steps in (False, True):
        learn = digits_learner(cbs=ExplorerCallback(tmp_path/str(steps), every=3, valid=True, steps=steps))
        with learn.no_logging(): learn.fit(1, 1e-2)
        docs.append(json.loads((tmp_path/str(steps)/'epoch_0001.json').read_text()))
        assert (tmp_path/str(steps)/'steps.sqlite').exists() == steps
    for d in docs: d.pop('recorder')
    assert docs[0] == docs[1]

def test_second_fit_appends_and_overwrite_replaces(tmp_path):
    "`fine_tune`-style second fits go on with the step count; `overwrite=True` starts a new database"
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5))
    with learn.no_logging(): learn.fit(1, 1e-2); learn.fit(1, 1e-2)
    s = load_run(tmp_path/'run').query_steps(stats='loss')
    n = len(learn.dls.train)
    sampled = list(range(0, n, 5))                                  # one batch in 5 of each epoch
    assert s.step.tolist() == sampled + [n + i for i in sampled] and s.fit.tolist() == [0] * len(sampled) + [1] * len(sampled)
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', every=5, overwrite=True))
    with learn.no_logging(): learn.fit(1, 1e-2)
    assert load_run(tmp_path/'run').query_steps(stats='loss').step.tolist() == list(range(0, n, 5))

SLOW_FIT = textwrap.dedent('''
    import sys, time
    from fastai.callback.core import Callback
    from fastexplorer.all import *
    class Slow(Callback):
        def after_batch(self): time.sleep(0.1)
    learn = digits_learner(cbs=[ExplorerCallback(sys.argv[1], every=1), Slow()])
    with learn.no_logging(): learn.fit(1, 1e-2)
''')

def test_steps_readable_while_the_first_epoch_runs(tmp_path):
    "A reader (load_run and the server) sees the first epoch's steps while it is still running"
    path = tmp_path/'run'
    proc = subprocess.Popen([sys.executable, '-c', SLOW_FIT, str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        t = time.monotonic()
        while time.monotonic() - t < 120 and proc.poll() is None:
            if (path/'steps.sqlite').exists():
                run = load_run(path)
                seen.append((len(run.query_steps(stats='loss')), len(run.epochs)))
                if seen[-1][0] >= 10: break
            time.sleep(0.2)
        assert seen and seen[-1][0] >= 10 and seen[-1][1] == 0, f"no steps before the first epoch ended: {seen}, {proc.stderr.read() if proc.poll() is not None else ''}"
    finally:
        proc.kill(); proc.wait()

def test_a_new_step_database_is_never_seen_half_made(tmp_path):
    "A reader polling run folders while their StepWriters start finds no `steps.sqlite` or a whole one, never one without its `meta` (seen as 'no such table: meta' before)"
    reads,errors = 0,[]
    for i in range(60):
        d = tmp_path/str(i); d.mkdir()
        t = threading.Thread(target=lambda: StepWriter(d, stats=step_layout()).con.close()); t.start()
        while t.is_alive():
            if (d/'steps.sqlite').exists():
                reads += 1
                try: read_steps(d)
                except Exception as e: errors.append(repr(e))
        t.join()
        assert read_steps(d).empty and sorted(f.name for f in d.iterdir() if not f.name.startswith('steps.sqlite-')) == ['steps.sqlite']
    assert not errors, f"{len(errors)} of {reads} reads failed: {errors[:3]}"

def _write_forever(path, out:int):
    "A child process: flushes of 10 batches x 50 layers, as the callback makes them, reporting each commit on `out`"
    try:
        w = StepWriter(path, hist_bins=8, stats=step_layout())
        layers,k = [f'layer{i}' for i in range(50)],0
        while True:
            batches = [{'step': k + i, 'fit': 0, 'epoch': 1, 'split': 'train', 'iter': k + i, 'loss': 1.} for i in range(10)]
            act = np.array([[i, j, *range(len(ACT_STATS)), *[1] * 10] for i in range(10) for j in range(50)], dtype=float)
            w.append(batches, layers, act)
            k += 10
            os.write(out, f"{k}\n".encode())           # committed: every batch up to k is in the database
    finally: os._exit(1)

@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_kill_9_leaves_every_flushed_step(tmp_path):
    "`kill -9` of a writer at 20 random moments: the database opens every time and holds every committed flush, whole"
    rnd = random.Random(0)
    for i in range(20):
        path = tmp_path/str(i); path.mkdir()
        r,w = os.pipe()
        pid = os.fork()
        if pid == 0: os.close(r); _write_forever(path, w)
        os.close(w)
        with os.fdopen(r) as f:
            committed = int(f.readline())                       # it has written once
            time.sleep(rnd.uniform(0, 0.3))
            os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
            for line in f.read().split(): committed = int(line)
        con = sqlite3.connect(path/'steps.sqlite')
        assert con.execute('PRAGMA integrity_check').fetchone() == ('ok',)
        nb, = con.execute('SELECT count(*) FROM batches').fetchone()
        na, = con.execute('SELECT coalesce(sum(n), 0) FROM act').fetchone()
        con.close()
        assert nb >= committed and nb % 10 == 0 and na == nb * 50, (i, committed, nb, na)
        assert len(read_steps(path, layers='layer7', stats='mean')) == nb

NAN_FIT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from fastai.callback.core import Callback
    from fastexplorer.all import *
    class SlowNaN(Callback):
        "0.1 s a batch; at training step 5 layer 1.0 outputs NaN, and the moment is written down"
        def before_batch(self):
            if self.training and self.iter == 5:
                self.h = self.model[1][0].register_forward_hook(lambda m, i, o: o * float('nan'))
                Path(sys.argv[2]).write_text(str(time.time()))
        def after_batch(self):
            if getattr(self, 'h', None) is not None: self.h.remove(); self.h = None
            time.sleep(0.1)
    learn = digits_learner(cbs=[ExplorerCallback(sys.argv[1], every=1), SlowNaN()])
    with learn.no_logging(): learn.fit(1, 1e-2)
''')

def test_nan_alert_arrives_within_2s(tmp_path):
    "A NaN at step 5 of the first epoch reaches `run.json` and `load_run(...).alerts` within 2 s, naming the layer that made it"
    path,mark = tmp_path/'run',tmp_path/'injected'
    proc = subprocess.Popen([sys.executable, '-c', NAN_FIT, str(path), str(mark)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    def wait_for(q):
        t = time.monotonic()
        while time.monotonic() - t < 120 and proc.poll() is None:
            if mark.exists() and (path/'run.json').exists():
                a = load_run(path).alerts
                if len(a.query(q)): return time.time(),a
            time.sleep(0.05)
        pytest.fail(f"no alert: {proc.stderr.read() if proc.poll() is not None else 'still running'}")
    try:
        seen,_ = wait_for("kind == 'nonfinite'")                     # the first alert of the NaN, whichever it is
        assert seen - float(mark.read_text()) <= 2, f"the alert took {seen - float(mark.read_text()):.2f} s"
        _,a = wait_for("kind == 'nonfinite' and stat == 'act'")     # the statistics' one follows at the next flush
        first = a.query("kind == 'nonfinite' and stat == 'act'").iloc[0]
        origin = a.query("kind == 'nonfinite' and stat == 'op'")          # the batch run again: the module and the op
        assert len(origin) and origin.iloc[0].layer == '1.0' and 'aten::mul' in origin.iloc[0].message, origin
        assert (first.layer, first.stat, first.epoch, first.step) == ('1.0', 'act', 1, 5), first
        assert load_run(path).epochs == [], "the alert came before the epoch's end"
    finally:
        proc.kill(); proc.wait()
