"A damaged step database (issue 47): every field of a chunk of `act` and `grad`, and of `meta`, damaged, is one `CorruptSteps` naming the file, the table, the series and the steps, through every reader and the server's step routes; a decompression bomb and n=2**31 end in it within 500 MB"
import re, shutil, sqlite3, subprocess, sys, zlib
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
import fastexplorer
from fastexplorer.all import *
from fastexplorer.chunks import CorruptSteps   # also in `fastexplorer.all`
from fastexplorer.cli import main

LAYER,PARAM = '0.0','0.0.weight'   # the series damaged: a chunk of each from step 10 (of 10 rows), in a run of 22 steps
SEEN = {'act': (LAYER, 'layer'), 'grad': (PARAM, 'param')}

@pytest.fixture(scope='module')
def good(tmp_path_factory):
    "One real fit of the digits CNN (one epoch, every batch sampled: chunks of 10, 10 and 2 rows per series)"
    p = tmp_path_factory.mktemp('corrupt')/'good'
    learn = digits_learner(cbs=ExplorerCallback(p, every=1))
    with pytest.MonkeyPatch.context() as mp:   # chunks of 10 rows on a loaded machine too: no flush by the clock
        mp.setattr(fastexplorer.steps, 'FLUSH_SECONDS', float('inf'))
        with learn.no_bar(), learn.no_logging(): learn.fit(1)
    return p

def _flip(b): return b[:len(b) // 2] + bytes([b[len(b) // 2] ^ 0xff]) + b[len(b) // 2 + 1:]

# (column, new value from the old): the ways a field of a chunk is found damaged
BLOB = [('flipped', _flip), ('truncated', lambda b: b[:len(b) // 2]), ('empty', lambda b: b''),
        ('text', lambda b: 'not a blob'), ('integer', lambda b: 7), ('bomb', lambda b: zlib.compress(bytes(2**22), 9))]
INT = [('text', lambda v: 'x'), ('2**40', lambda v: 2**40), ('-1', lambda v: -1)]
FIELDS = {'name': [('text', lambda v: 'x'), ('unknown', lambda v: 10**6)],
          'split': [('unknown', lambda v: 'bogus'), ('integer', lambda v: 7), ('other', lambda v: 'valid')],
          'step': INT, 'batch': INT, 'last_step': INT, 'last_batch': INT,
          'n': [('0', lambda v: 0), ('2**31', lambda v: 2**31), ('2**40', lambda v: 2**40), ('one less', lambda v: v - 1),
                ('text', lambda v: 'x')],
          'rows': BLOB, 'stats': BLOB, 'hist': BLOB}
CASES = [(t, f, how) for t in ('act', 'grad') for f,hows in FIELDS.items() for how,_ in hows if not (t == 'grad' and f == 'hist')]

def _damage(p:Path, t:str, field:str, how:str):
    "Set `field` of the chunk of `SEEN[t]` from step 10 in `p`'s step database as `how` says"
    f = dict(FIELDS[field])[how]
    con = sqlite3.connect(p/'steps.sqlite')
    with con:
        key = (*SEEN[t], 'train', 10)
        q = f"FROM {t} WHERE name = (SELECT id FROM names WHERE path = ? AND kind = ?) AND split = ? AND step = ?"
        v, = con.execute(f"SELECT {field} {q}", key).fetchone()
        assert con.execute(f"UPDATE {t} SET {field} = ? {q.split(' ', 2)[2]}", (f(v), *key)).rowcount == 1
    con.close()

def _readers(t:str, field:str)->dict:
    "The readers that read `field` of table `t`'s chunk of `SEEN[t]`: `{name: call of a run folder}`"
    layer,kind = LAYER if t == 'act' else PARAM,'act' if t == 'act' else 'grad'
    res = {'.steps': lambda p: load_run(p).steps, 'query_steps()': lambda p: load_run(p).query_steps(wide=True)}
    if field == 'name': return res    # moved to another series: only what reads every series meets it
    res = {} if field == 'hist' else {**res, 'query_steps(layer)': lambda p: load_run(p).query_steps(layer)}
    if field == 'split': return res   # moved to another split: what reads both splits meets it
    if field != 'hist': res['step_series'] = lambda p: load_run(p).step_series(layer, kind)
    if t == 'grad': res['step_series(weight)'] = lambda p: load_run(p).step_series(layer, 'weight')   # same chunks
    if t == 'act' and field != 'stats': res['step_hist'] = lambda p: load_run(p).step_hist(layer)
    return res

def _series_url(t:str, field:str)->str:
    return f"hist?layer={LAYER}" if field == 'hist' else f"series?layer={LAYER}&kind=act" if t == 'act' else \
           f"series?layer={PARAM}&kind=grad"

@pytest.fixture(scope='module')
def damaged(good, tmp_path_factory):
    "A folder of runs: `good`, and a copy of it for each case, `c00`… each with one field of one chunk damaged"
    root = tmp_path_factory.mktemp('damaged')
    shutil.copytree(good, root/'good')
    for i,c in enumerate(CASES):
        shutil.copytree(good, root/f'c{i:02d}')
        _damage(root/f'c{i:02d}', *c)
    return root

def _check(e:CorruptSteps, p:Path, t:str, series:str):
    "`e` names the file, the table, the series and the steps"
    msg = str(e)
    assert msg.startswith(f"{p/'steps.sqlite'}: table `{t}`, "), msg
    assert series in msg and 'step' in msg.split(': ', 2)[1], msg

@pytest.mark.parametrize('case', CASES, ids=['-'.join(c) for c in CASES])
def test_a_damaged_chunk_is_named_by_every_reader(damaged, case):
    "Every reader of a damaged field of a chunk raises `CorruptSteps` naming the file, the table, the series and its steps"
    t,field,how = case
    p = damaged/f'c{CASES.index(case):02d}'
    series = f"id 1000000" if (field, how) == ('name', 'unknown') else "id 'x'" if field == 'name' else \
             f"layer `{LAYER}`" if t == 'act' else f"parameter `{PARAM}`"
    for name,read in _readers(t, field).items():
        try: read(p)
        except CorruptSteps as e: _check(e, p, t, series)
        else: raise AssertionError(f"{name} read a damaged chunk without a word")
    assert len(load_run(p).query_steps('4', 'mean', 'act')) == 22, "another series of the run reads as it is"

SERVED = [c for c in CASES if c[1] not in ('name', 'split')]   # the others move a chunk out of the series a route reads

@pytest.mark.parametrize('case', SERVED, ids=['-'.join(c) for c in SERVED])
def test_the_server_answers_a_damaged_series_with_a_422(damaged, case):
    "The server answers the damaged series with a 422 naming the file from the served folder (never its absolute path) and no traceback; the run's other series and the other runs answer"
    from starlette.testclient import TestClient
    t,field,how = case
    run = f'c{CASES.index(case):02d}'
    with TestClient(make_app(damaged, hosts={'testserver'}), raise_server_exceptions=True) as c:
        r = c.get(f'/api/runs/{run}/steps/{_series_url(t, field)}')
        assert r.status_code == 422, (r.status_code, r.text)
        err = r.json()['error']
        assert err.startswith(f"{run}/steps.sqlite: table `{t}`, ") and str(damaged) not in err, err
        for u in ('', '/series?layer=4&kind=act', '/series?layer=4.bias&kind=grad', '/hist?layer=4', '/series?kind=loss'):
            assert c.get(f'/api/runs/{run}/steps{u}').status_code == 200, u
            assert c.get(f'/api/runs/good/steps{u}').status_code == 200, u

META = [('stats', '[1, 2, 3]'), ('stats', '[]'), ('stats', 'not JSON'), ('stats', '{"name": "mean"}'), ('stats', None),
        ('hist_bins', str(10**9)), ('hist_bins', 'x'), ('hist_bins', '0'), ('hist_bins', None), ('hist_lo', 'x'),
        ('hist_lo', '3e999')]   # `hist_lo`: read for a layer without a range of its own (none here: `hist_ranges` emptied)

@pytest.mark.parametrize('key,value', META, ids=[f'{k}={v}' for k,v in META])
def test_a_damaged_meta_is_named_by_every_reader(good, tmp_path, key, value):
    "A damaged `stats`, `hist_bins` or `hist_lo` in `meta` is a `CorruptSteps` of table `meta` from every reader that needs it, and a 422 from the server; `stats = []` no longer reads as a run without statistics"
    from starlette.testclient import TestClient
    p = shutil.copytree(good, tmp_path/'r')
    con = sqlite3.connect(p/'steps.sqlite')
    with con:
        if value is None: con.execute('DELETE FROM meta WHERE key = ?', (key,))
        else: con.execute('UPDATE meta SET value = ? WHERE key = ?', (value, key))
        if key == 'hist_lo': con.execute('DELETE FROM hist_ranges')
    con.close()
    readers = {'step_hist': lambda: load_run(p).step_hist(LAYER)} if key == 'hist_bins' else \
              {'step_hist_series': lambda: step_hist_series(p, LAYER)} if key == 'hist_lo' else \
              {'.steps': lambda: load_run(p).steps, 'query_steps': lambda: load_run(p).query_steps(kinds='act'),
               'step_series': lambda: load_run(p).step_series(PARAM, 'grad')}
    for name,read in readers.items():
        with pytest.raises(CorruptSteps, match=f"^{re.escape(str(p/'steps.sqlite'))}: table `meta`, .*: its `{key}` "): read()
    urls = ['hist?layer=0.0'] if key.startswith('hist') else ['', 'series?layer=0.0&kind=act']
    with TestClient(make_app(tmp_path, hosts={'testserver'}), raise_server_exceptions=True) as c:
        for u in urls:
            r = c.get(f'/api/runs/r/steps/{u}'.rstrip('/'))
            assert r.status_code == 422 and r.json()['error'].startswith('r/steps.sqlite: table `meta`'), (u, r.text)
        assert c.get('/api/runs/r/steps/series?kind=loss').status_code == (200 if key.startswith('hist') else 422)

@pytest.mark.parametrize('case', [('act', 'n', '2**31'), ('act', 'hist', 'flipped'), ('grad', 'stats', 'truncated')],
                         ids=['n', 'hist', 'stats'])
def test_report_names_a_damaged_chunk(damaged, tmp_path, case):
    "`fastexplorer report` on a run with a damaged chunk: one line naming the file, the table and the series, no report written"
    run = damaged/f'c{CASES.index(case):02d}'
    with pytest.raises(SystemExit, match=rf"^fastexplorer report: .*{run.name}/steps\.sqlite: table `{case[0]}`, "):
        main(['report', str(run), '-o', str(tmp_path/'rep.html')])
    assert not (tmp_path/'rep.html').exists()

_UNDER_LIMIT = '''
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2**30 + 2**29, 2**30 + 2**29))   # 1.5 GiB of address space: a 1 GiB array fails
from fastexplorer.run import load_run
from fastexplorer.app import make_app
from starlette.testclient import TestClient
p,layer = sys.argv[1],sys.argv[2]
res = []
for read in (lambda: load_run(p).steps, lambda: load_run(p).step_series(layer),
             lambda: TestClient(make_app(p, hosts={'testserver'})).get(f'/api/runs/~/steps/series?layer={layer}&kind=act')):
    try: r = read(); res.append(r.status_code if hasattr(r, 'status_code') else 'no error')
    except Exception as e: res.append(type(e).__name__)
peak = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))   # this program's (`ru_maxrss` counts
print(res, int(peak.split()[1]) // 1024)                                   # the forked parent's too)
'''

def _bomb()->bytes:
    "A zlib stream of about 1 MiB that inflates to 1 GiB of zeros, made in a moment (each MiB compressed once)"
    c,z = zlib.compressobj(9),bytes(2**20)
    first = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    seg = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    assert seg == c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)   # a full flush forgets the past: every MiB the same
    end = c.flush()
    return first + seg * 1023 + end[:-4] + ((2**30 % 65521) << 16 | 1).to_bytes(4, 'big')   # Adler-32 of 1 GiB of zeros

@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads its peak memory from /proc')
@pytest.mark.parametrize('what', ['bomb', 'n=2**31'])
def test_bomb_and_huge_n_end_in_the_named_error_within_500_MB(good, tmp_path, what):
    "A 1 MiB `stats` blob that inflates to 1 GiB, or a chunk that says it holds 2**31 rows: each reader (`.steps`, `step_series`, the server's series) ends with `CorruptSteps` (the server: 422) under a 1.5 GiB address-space limit, peaking under 500 MB"
    p = shutil.copytree(good, tmp_path/'r')
    col,v = ('stats', _bomb()) if what == 'bomb' else ('n', 2**31)
    if what == 'bomb': assert len(v) < 2**21 and len(zlib.decompressobj().decompress(v, 10)) == 10
    con = sqlite3.connect(p/'steps.sqlite')
    with con: con.execute(f"UPDATE act SET {col} = ? WHERE name = 2 AND split = 'train' AND step = 10", (v,))
    con.close()
    out = subprocess.run([sys.executable, '-c', _UNDER_LIMIT, str(p), LAYER], capture_output=True, text=True, timeout=120,
                         env={'PYTHONPATH': str(Path(fastexplorer.__file__).parents[1]), 'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'})
    assert out.returncode == 0, out.stderr[-2000:]
    res,peak = out.stdout.rsplit(' ', 1)
    assert res == "['CorruptSteps', 'CorruptSteps', 422]" and int(peak) < 500, out.stdout
