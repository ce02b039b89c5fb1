"""Issue 48: `Run.df` of a long run as one frame built from arrays. It is made from the epoch history's column-wise
scalars (`layouts`, `scalars`), or from the epoch files where the history lacks an epoch, and equals, row for row and
value for value, the frame the epoch files made before (a Python tuple per row: `_reference`), on real runs."""
import shutil, sqlite3
from pathlib import Path
import pandas as pd, pytest
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from fastexplorer import run as run_module
from fastexplorer.cli import digits_learner
from fastexplorer.history import own_stats, walk_tree

def _reference(p:Path)->pd.DataFrame:
    "`Run.df` as d13cb94 made it: each epoch file parsed, a tuple per row, then the root's rows last"
    rows,paths = [],set()
    for e in load_run(p).epochs:
        paths.update(d.get('path') for d in walk_tree(e['tree']))
        for d,st in own_stats(e['tree']):
            for kind,s in st.items():
                for k,v in (s or {}).items():
                    if kind.startswith('custom_') and isinstance(v, dict): v = v.get('mean')
                    if type(v) in (float, int) or v is None: rows.append((e['epoch'], d['path'], d['xtra'].get('class'), kind, k, v))
    d = pd.DataFrame(rows, columns=['epoch', 'layer', 'class', 'kind', 'stat', 'value']).astype({'value': float})
    return root_last(d, root_label(paths)) if len(d) else d

def _rows(d:pd.DataFrame)->list:
    "The frame's rows as plain values, missing ones (NaN, `None`) as `None`"
    return d.astype(object).where(d.notna(), None).values.tolist()

def _fit(learn, n=1):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, 1e-2)

def _reads(monkeypatch)->list:
    "The epoch files read from now on, by name"
    seen,read = [],run_module._read
    monkeypatch.setattr(run_module, '_read', lambda f, kind: (kind == 'epoch' and seen.append(Path(f).name)) or read(f, kind))
    return seen

def _older(p:Path):
    "Make run folder `p`'s history as a fastexplorer before issue 48 wrote it: no `layouts`, no `scalars`, no triggers"
    con = sqlite3.connect(p/'history.sqlite')
    with con: con.executescript('DROP TRIGGER IF EXISTS scalars_rewritten; DROP TRIGGER IF EXISTS scalars_forgotten; '
                          'DROP TABLE IF EXISTS scalars; DROP TABLE IF EXISTS layouts;')
    con.close()

def _check(p:Path, monkeypatch, expect_reads:list):
    "`load_run(p).df` equals `_reference`, its text columns are categoricals, and it read the epoch files `expect_reads`"
    ref = _reference(p)
    with monkeypatch.context() as m:
        reads = _reads(m)
        df = load_run(p).df
    assert reads == expect_reads, reads
    assert list(df.columns) == list(ref.columns) and len(df) == len(ref) > 0
    assert _rows(df) == _rows(ref), 'the same rows, in the same order, with the same values'
    assert [str(t) for t in df.dtypes] == ['int64', 'category', 'category', 'category', 'category', 'float64']
    assert df.layer.cat.categories.tolist() == list(dict.fromkeys(ref.layer)), 'categories as the frame shows them'
    assert _rows(load_run(p).load().df) == _rows(ref), 'the same from the documents a loaded run holds'

RUNS = {'digits': dict(every=5), 'valid': dict(every=5, valid=True),
        'custom': dict(every=2, custom={'zero_frac': lambda t: (t == 0).float().mean()})}

@pytest.mark.parametrize('name', list(RUNS))
def test_df_from_the_history_equals_the_files(name, tmp_path, monkeypatch):
    "The digits CNN, with validation statistics, with custom ones: `.df` from the history, no epoch file read, equal"
    cb = ExplorerCallback(tmp_path/'run', verbose=0, **RUNS[name])
    if name == 'custom': cb.add_stat(lambda g: g.abs().mean(), on='grad', name='gabs')
    _fit(digits_learner(cbs=cb), 2)
    _check(tmp_path/'run', monkeypatch, [])
    if name == 'valid': assert (load_run(tmp_path/'run').df.kind == 'valid_act').any()
    if name == 'custom': assert {'custom_out', 'custom_grad'} <= set(load_run(tmp_path/'run').df.kind)

def test_df_of_older_and_resumed_runs(tmp_path, monkeypatch):
    """A run an older fastexplorer wrote (a history without `scalars`, or none): read from its epoch files; the same run
    resumed: its older epochs from the files, the new one from the history; an epoch rewritten by an older writer: its
    file. Each equal to `_reference`"""
    p = tmp_path/'run'
    _fit(digits_learner(cbs=ExplorerCallback(p, every=5, verbose=0)), 2)
    _older(p)
    _check(p, monkeypatch, ['epoch_0001.json', 'epoch_0002.json'])
    _fit(digits_learner(cbs=ExplorerCallback(p, every=5, resume=True, verbose=0)))
    _check(p, monkeypatch, ['epoch_0001.json', 'epoch_0002.json'])   # epoch 3 from the history
    con = sqlite3.connect(p/'history.sqlite')   # epoch 3 indexed again by a writer that knows no `scalars`
    with con: con.execute("INSERT OR REPLACE INTO epochs SELECT * FROM epochs WHERE epoch = 3")
    con.close()
    _check(p, monkeypatch, ['epoch_0001.json', 'epoch_0002.json', 'epoch_0003.json'])
    q = Path(shutil.copytree(p, tmp_path/'none'))
    for f in q.glob('history.sqlite*'): f.unlink()
    _check(q, monkeypatch, ['epoch_0001.json', 'epoch_0002.json', 'epoch_0003.json'])
