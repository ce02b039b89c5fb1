"Issue 48: a series' chunk in `steps.sqlite` grows across flushes to `CHUNK_ROWS` rows, and reads back as written: after epochs, a resumed fit, a forgotten epoch, and by a reader while the fit writes"
import copy, sqlite3, threading
import numpy as np, pytest, torch
from torch import nn
from fastai.callback.core import Callback
from fastai.callback.progress import ProgressCallback  # `Learner.no_bar`
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastexplorer.all import *
import fastexplorer.stepdb as stepdb
from fastexplorer.chunks import CHUNK_ROWS
from fastexplorer.stepdb import StepWriter, chunk_cols, forget_steps_after, hist_bins, step_stats, table_wide, unpack_chunks
from fastexplorer.steps import step_layout
_LAYOUT = step_layout()   # the statistics a fit records

def _mlp_learner(blocks:int=4, batches:int=2):
    "bench/longrun.py's run, small: an MLP of `blocks` Linear layers, epochs of `batches` training batches and one validation batch"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), *[m for _ in range(blocks - 1) for m in (nn.ReLU(), nn.Linear(16, 16))],
                          nn.ReLU(), nn.Linear(16, 1))
    x = torch.randn(batches * 32, 8); y = x[:, :1] * 2 + 0.1 * torch.randn(batches * 32, 1)
    ds = [(x[i], y[i]) for i in range(len(x))]
    return Learner(DataLoaders(DataLoader(ds, bs=32, shuffle=True), DataLoader(ds[:32], bs=32)), model,
                   loss_func=nn.MSELoss(), lr=1e-3)

def _fit(path, epochs:int, cbs=(), **kw):
    learn = _mlp_learner()
    with learn.no_bar(), learn.no_logging():
        learn.fit(epochs, cbs=[ExplorerCallback(path, every=1, valid=True, preflight=False, verbose=0, **kw), *cbs])

@pytest.fixture
def spy(monkeypatch):
    "Every `StepWriter.append` of the test, its arguments copied: `(writer's first batch id, hist_every, trained, args)`"
    calls,append = [],StepWriter.append
    def rec(self, *args, **kw):
        calls.append((self.batches, self.hist_every, self.trained, copy.deepcopy(args), copy.deepcopy(kw)))
        return append(self, *args, **kw)
    monkeypatch.setattr(StepWriter, 'append', rec)
    return calls

def _tables(path)->dict:
    "`{table: (its chunk rows in key order, unpacked)}` of the step database in run folder `path`"
    con = sqlite3.connect(f"file:{path/'steps.sqlite'}?mode=ro", uri=True)
    try:
        held,bins,out = step_stats(con),hist_bins(con),{}
        for t in ('act', 'grad'):
            rows = con.execute(f"SELECT {chunk_cols('stats', *(['hist'] if t == 'act' else []))} FROM {t} "
                               'ORDER BY name, split, step, batch').fetchall()
            out[t] = rows,unpack_chunks(rows, table_wide(held, t), bins if t == 'act' else None, con, t)
        out['names'] = dict(con.execute('SELECT id, path FROM names'))
        out['epoch'] = dict(con.execute('SELECT id, epoch FROM batches'))
        return out
    finally: con.close()

def _sizes(rows)->dict:
    "`{(name, split): [rows of each chunk]}`"
    by = {}
    for r in rows: by.setdefault(r[:2], []).append(r[6])
    return by

def _expected(calls:list)->dict:
    """What the writer was handed, a row per series and batch: `{(table, path, batch): (split, step, values, hist or
    None where not kept)}`, `hist` kept as the writer's `hist_every` says"""
    out = {}
    for b0,every,trained,(batches, layers, act, params, grad),_ in calls:
        nth = trained + np.cumsum([b.get('split', 'train') == 'train' for b in batches]) - 1
        for t,paths,a in (('act', layers, act), ('grad', params, grad)):
            if a is None: continue
            n = len(stepdb.table_stats(_LAYOUT, t))
            for r in np.asarray(a):
                i,b = int(r[0]),batches[int(r[0])]
                keep = t == 'act' and (b['split'] != 'train' or nth[i] % every == 0)
                out[t, paths[int(r[1])], b0 + i] = (b['split'], b['step'], r[2:2 + n], r[2 + n:] if keep else None)
    return out

def _check_reads_back(path, calls:list):
    "Every row the writer was handed reads back from the chunks: split, step, statistics (float32 but counts), which histograms were kept and their counts"
    exp,got = _expected(calls),_tables(path)
    for t in ('act', 'grad'):
        rows,u = got[t]
        wide = table_wide(_LAYOUT, t)
        h = iter(u['hist']) if t == 'act' else None
        seen = set()
        for j in range(len(u['batch'])):
            k = (t, got['names'][int(u['name'][j])], int(u['batch'][j]))
            split,step,values,hist = exp[k]
            assert (u['split'][j], u['step'][j]) == (split, step), k
            v = np.where(wide, values, values.astype(np.float32).astype(np.float64))
            np.testing.assert_array_equal(u['values'][j], v, err_msg=str(k))
            if t == 'act': assert bool(u['kept'][j]) == (hist is not None), k   # `grad` has no histograms
            if hist is not None: assert next(h).tolist() == hist.astype(np.int64).tolist(), k
            seen.add(k)
        assert seen == {k for k in exp if k[0] == t}, f"{t}: rows written but not read back, or read twice"

def test_short_epochs_fill_chunks_of_chunk_rows(tmp_path):
    "Epochs of 2 training batches and a validation batch, flushed at each epoch's end: a series' rows fill chunks of `CHUNK_ROWS` rows (a chunk of 2, and of 1, per flush before); only its last rows, fewer, are a chunk per flush until they fill one"
    _fit(tmp_path/'run', 40)                          # 80 training rows and 40 validation rows a layer
    got,total = _tables(tmp_path/'run'),{'train': 80, 'valid': 40}
    for t in ('act', 'grad'):
        sizes = _sizes(got[t][0])
        assert {s for _,s in sizes} == ({'train', 'valid'} if t == 'act' else {'train'})
        for (_,s),ns in sizes.items():
            full = total[s] // CHUNK_ROWS
            assert ns[:full] == [CHUNK_ROWS] * full and sum(ns[full:]) == total[s] % CHUNK_ROWS, f"{t}, {s}: {ns}"

def test_rows_read_back_as_written_across_flushes_and_epochs(tmp_path, spy, monkeypatch):
    "Statistics, histograms, which histograms were kept (1 in `hist_every`, counted across flushes), batches and splits read back from chunks that grew over 30 epochs' flushes as the callback handed them over"
    monkeypatch.setattr(stepdb, 'HIST_STEPS', 8)      # 60 training batches sampled: 1 histogram in 8 kept
    _fit(tmp_path/'run', 30)
    assert len(spy) >= 30 and {c[1] for c in spy} == {8}
    _check_reads_back(tmp_path/'run', spy)
    assert max(n for ns in _sizes(_tables(tmp_path/'run')['act'][0]).values() for n in ns) == CHUNK_ROWS

def test_same_chunks_as_one_flush(tmp_path):
    "Batches written in flushes of 1 to 33 batches make the very chunks of `CHUNK_ROWS` rows (byte for byte) that one flush of them all makes, whatever the flushes' sizes; every row reads back the same"
    rng,layout = np.random.default_rng(0),_LAYOUT
    na,ng = len(stepdb.table_stats(layout, 'act')),len(stepdb.table_stats(layout, 'grad'))
    metas = [{'step': s // 3 * 2 + (s % 3 > 0), 'fit': 0, 'epoch': 1 + s // 12, 'split': 'valid' if s % 3 == 2 else 'train',
              'iter': s} for s in range(120)]
    act = np.array([[i, l, *rng.normal(size=na), *rng.integers(0, 50, 6)] for i in range(120) for l in range(3)])
    grad = np.array([[i, p, *rng.normal(size=ng)] for i in range(120) if metas[i]['split'] == 'train' for p in range(2)])
    def part(x, a, b):   # the rows of batches a to b, their batch index counted from a
        x = x[(x[:, 0] >= a) & (x[:, 0] < b)].copy()
        x[:, 0] -= a
        return x
    def write(d, cuts):
        d.mkdir()
        w = StepWriter(d, hist_bins=4, hist_range=(-1, 1), stats=layout, hist_every=3)
        for a,b in zip([0, *cuts], [*cuts, 120]):
            w.append(metas[a:b], ['a', 'b', 'c'], part(act, a, b), ['a.weight', 'a.bias'], part(grad, a, b))
        w.close()
        return _tables(d)
    one,many = write(tmp_path/'one', []),write(tmp_path/'many', [1, 2, 5, 15, 16, 49, 82, 87])
    for t in ('act', 'grad'):
        full = lambda d: [r for r in d[t][0] if r[6] == CHUNK_ROWS]
        assert full(one) and full(one) == full(many), t
        o,m = one[t][1],many[t][1]
        for c in o:
            np.testing.assert_array_equal(o[c], m[c], err_msg=f"{t}: {c}")
    assert max(n for ns in _sizes(many['act'][0]).values() for n in ns) == CHUNK_ROWS

def test_a_resumed_fit_starts_new_chunks_and_reads_back(tmp_path, spy):
    "A second fit (a new writer on the database, as a resumed run has) leaves the first fit's chunks as they were and starts its own; everything reads back"
    p = tmp_path/'run'
    _fit(p, 20)
    before = _tables(p)
    _fit(p, 20, resume=True)
    after = _tables(p)
    for t in ('act', 'grad'):
        rows = after[t][0]
        assert set(before[t][0]) <= set(rows), f"{t}: the first fit's chunks changed"
        first = min(b for b,e in after['epoch'].items() if e > 20)   # the resumed fit's first batch
        assert all(r[3] >= first or r[5] < first for r in rows), f"{t}: a chunk holds rows of both fits"
        assert max(max(ns) for ns in _sizes(rows).values()) == CHUNK_ROWS, f"{t}: chunks do not grow past a flush"
    _check_reads_back(p, spy)

def test_forgetting_epochs_repacks_a_chunk_that_spans_them(tmp_path):
    "`forget_steps_after` cuts a chunk that grew over several epochs at the epoch kept last: what stays reads back as before"
    p = tmp_path/'run'
    _fit(p, 20)
    before = _tables(p)
    rows = before['act'][0]
    assert any(before['epoch'][r[3]] <= 10 < before['epoch'][r[5]] for r in rows), "no chunk spans epochs 10 and 11"
    forget_steps_after(p, 10)
    after = _tables(p)
    for t in ('act', 'grad'):
        u,v = before[t][1],after[t][1]
        keep = np.array([before['epoch'][b] <= 10 for b in u['batch'].tolist()])
        for c in ('name', 'split', 'batch', 'step', 'kept', 'values'): np.testing.assert_array_equal(v[c], u[c][keep], err_msg=c)
        if t == 'act': np.testing.assert_array_equal(v['hist'], u['hist'][keep[u['kept']]])
        assert all(after['epoch'][r[5]] <= 10 for r in after[t][0])

def _read_whole(f)->bool:
    "Read step database `f` in one snapshot, as a reader would while the fit writes: each series must hold the batches `batches` holds, in whole chunks; whether there was a database to read"
    if not f.exists(): return False
    con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    try:
        con.execute('BEGIN')   # one snapshot: the batches and the chunks of the same transactions
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone(): return False
        held,bins = step_stats(con),hist_bins(con)
        ids = {s: set(i for i, in con.execute('SELECT id FROM batches WHERE split = ?', (s,))) for s in ('train', 'valid')}
        for t in ('act', 'grad'):
            rows = con.execute(f"SELECT {chunk_cols('stats', *(['hist'] if t == 'act' else []))} FROM {t}").fetchall()
            u = unpack_chunks(rows, table_wide(held, t), bins if t == 'act' else None, con, t)
            for n,s in set(zip(u['name'].tolist(), u['split'].tolist())):
                got = u['batch'][(u['name'] == n) & (u['split'] == s)].tolist()
                assert sorted(got) == sorted(ids[s]) and len(set(got)) == len(got), (t, n, s, sorted(got)[-3:])
        con.execute('COMMIT')
        return True
    finally: con.close()

class _Reader(Callback):
    "Reads the step database after every batch while the writer's thread writes"
    order = 100
    def __init__(self, path): self.path,self.reads = path,0
    def after_batch(self): self.reads += _read_whole(self.path/'steps.sqlite')

class _Watched:
    "The writer's connection, read by another after each of its statements (the transaction not yet committed)"
    def __init__(self, con, f): self.con,self.f,self.reads = con,f,0
    def __getattr__(self, k): return getattr(self.con, k)
    def __enter__(self): return self.con.__enter__()
    def __exit__(self, *a): return self.con.__exit__(*a)
    def _then_read(self, r):
        self.reads += _read_whole(self.f)
        return r
    def execute(self, *a): return self._then_read(self.con.execute(*a))
    def executemany(self, *a): return self._then_read(self.con.executemany(*a))

def test_a_reader_during_the_fit_sees_whole_chunks(tmp_path, monkeypatch):
    "A reader while the fit writes (the page's reads) finds each series' chunks whole and holding exactly the batches written with them: read after every batch, and between every two statements of the writer's transactions (where a chunk replaced outside the transaction that fills it would show)"
    cons,connect = [],stepdb.connect_steps
    def watched(fname, readonly=False):
        con = connect(fname, readonly)
        if not readonly: cons.append(con := _Watched(con, tmp_path/'run'/'steps.sqlite'))
        return con
    monkeypatch.setattr(stepdb, 'connect_steps', watched)
    r = _Reader(tmp_path/'run')
    _fit(tmp_path/'run', 25, cbs=[r])
    assert r.reads >= 60 and sum(c.reads for c in cons) >= 100, (r.reads, [c.reads for c in cons])
    assert max(n for ns in _sizes(_tables(tmp_path/'run')['act'][0]).values() for n in ns) == CHUNK_ROWS
