"""Run folders the reader did not write (issue 47): no reply of the server names a path above the served folder, no file
it or the report opens leads out of it through a link, and storage the reader cannot write hides no step of a run."""
import json, os, shutil, signal, sqlite3, subprocess, sys, tempfile, time
from contextlib import contextmanager
from pathlib import Path
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *
from fastexplorer.run import RunFileError
from test_explorer import get

@pytest.fixture(scope='module')
def good(tmp_path_factory):
    "One small real run, finished: manifest, epoch index, representation, epoch files, step series and history"
    p = tmp_path_factory.mktemp('untrusted')/'good'
    learn = digits_learner(cbs=ExplorerCallback(p, every=5, valid=True))
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2)
    return p

def _get(s, path:str):
    "Status and parsed JSON body of `path` on server `s`, and its text"
    st,body,_ = get(s.url + path)
    return st,json.loads(body),body.decode()

def _no_path_above(text:str, root:Path):
    "Whether `text` names no folder above `root`, the served folder: neither as given nor resolved"
    return all(str(r) not in text for r in (root.absolute(), root.resolve(), root.absolute().parent))

# the requests that read each file of a run folder
READS = {'steps.sqlite': ['steps', 'steps/series?layer=0.0&stats=mean', 'steps/hist?layer=0.0'],
         'history.sqlite': ['epochs', 'history?path=0.0'], 'representation.json': ['representation.json'],
         'landscape.json': ['landscape.json'], 'epoch_0001.json': ['epochs/1'], 'epochs.jsonl': ['run.json']}

def _set_version(f:Path, v:str):
    con = sqlite3.connect(f)
    with con: con.execute("UPDATE meta SET value = ? WHERE key = 'version'", (v,))
    con.close()

@pytest.mark.parametrize('f', ['steps.sqlite', 'history.sqlite'])
@pytest.mark.parametrize('how', ['version', 'garbage', 'cut'])
def test_replies_name_files_from_the_served_folder(good, tmp_path, f, how):
    "A step database or history of another version, or damaged: every reply names it from the served folder, none holds an absolute path"
    p = shutil.copytree(good, tmp_path/'served'/'bad')
    if how == 'version': _set_version(p/f, '99')
    elif how == 'garbage': (p/f).write_bytes(b'not a database, ' * 256)
    else: (p/f).write_bytes((p/f).read_bytes()[:2048])
    root = tmp_path/'served'
    with serve(root, port=0) as s:
        for q in READS[f]:
            st,d,text = _get(s, f'api/runs/bad/{q}')
            assert 400 <= st < 500 and f'bad/{f}' in d['error'], (q, st, d)
            assert _no_path_above(text, root), (q, text)

SECRET = 'FX-OUTSIDE-SECRET-47'

def _linked(good:Path, base:Path, f:str)->Path:
    "A served folder `base/served` whose run `linked` has file `f` as a link to a file outside it, which holds `SECRET`"
    out = shutil.copytree(good, base/'outside')
    secret = {'representation.json': {'schema': SECRET}, 'landscape.json': {'secret': SECRET},
              'epoch_0001.json': {'schema': 'fastexplorer/epoch', 'version': 1, 'epoch': 1, 'secret': SECRET}}
    for k,v in secret.items(): (out/k).write_text(json.dumps(v))
    (out/'epochs.jsonl').write_text(json.dumps({'epoch': 1, 'file': 'epoch_0001.json', 'secret': SECRET}) + '\n')
    (out/'steps.sqlite-wal').write_text(SECRET)
    p = shutil.copytree(good, base/'served'/'linked')
    (p/f).unlink(missing_ok=True)
    (p/f).symlink_to(out/f)
    return base/'served'

LINKED = [*READS, 'steps.sqlite-wal']

@pytest.mark.parametrize('f', LINKED)
def test_server_refuses_a_link_out_of_the_served_folder(good, tmp_path, f):
    "Every file the server reads (JSON, step database and its log, history) that links out of the served folder is refused, named from it"
    root = _linked(good, tmp_path, f)
    with serve(root, port=0) as s:
        for q in READS.get(f) or READS['steps.sqlite']:
            st,d,text = _get(s, f'api/runs/linked/{q}')
            assert st == 404 and f'linked/{f}' in d['error'] and 'outside' in d['error'], (q, st, d)
            assert SECRET not in text and _no_path_above(text, root), (q, text)

@pytest.mark.parametrize('f', [f for f in LINKED if f != 'history.sqlite'])
def test_report_refuses_a_link_out_of_the_reported_folder(good, tmp_path, f):
    "Every file the report reads that links out of the reported folder stops it, naming the file from that folder; nothing is written"
    root = _linked(good, tmp_path, f)
    with pytest.raises(RunFileError, match=f'^linked/{f}: .*outside'):
        report(root, tmp_path/'report.html')
    assert not (tmp_path/'report.html').exists()

# a fit in another process, as a user who can write: it waits at batch 3 of epoch 0 and batch 0 of epoch 1 (when the
# first epoch's steps are all written) until told to go on
LIVE = '''
import sys, time
from pathlib import Path
import torch
from fastai.callback.core import Callback
from fastai.callback.progress import *
from fastexplorer.all import *
class Pause(Callback):
    order = 100
    def before_batch(self):
        if self.training and self.iter == (3 if self.epoch == 0 else 0) and self.epoch < 2:
            Path(sys.argv[2], f"paused{self.epoch}").touch()
            while not Path(sys.argv[2], f"go{self.epoch}").exists(): time.sleep(0.05)
torch.set_num_threads(1)
learn = digits_learner(cbs=[ExplorerCallback(sys.argv[1], every=1, valid=True), Pause()])
with learn.no_bar(), learn.no_logging(): learn.fit(3, 1e-2)
'''

class LiveFit:
    "A fit in a subprocess writing run folder `p`, paused at an epoch when asked (`at`), killed with SIGKILL when asked"
    def __init__(self, p:Path, sig:Path):
        self.p,self.sig,self.epoch = p,sig,None
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get('PYTHONPATH', '')])}
        self.proc = subprocess.Popen([sys.executable, '-c', LIVE, str(p), str(sig)], env=env)
    def at(self, epoch:int):
        "Let the fit go on until it waits in `epoch`"
        for e in range(0 if self.epoch is None else self.epoch, epoch + 1):
            for _ in range(2400):
                if (self.sig/f'paused{e}').exists(): break
                assert self.proc.poll() is None, f"the fit ended ({self.proc.returncode}) before epoch {e}"
                time.sleep(0.05)
            else: raise TimeoutError(f"the fit did not reach epoch {e}")
            if e < epoch: (self.sig/f'go{e}').touch()
        self.epoch = epoch
        return self
    def kill(self):
        "SIGKILL the fit, as `kill -9` does"
        if self.proc.poll() is None: self.proc.send_signal(signal.SIGKILL); self.proc.wait()
        return self

@pytest.fixture(scope='module')
def world():
    "A folder everybody may read (and only its owner write), for a reader without write permission"
    base = Path(tempfile.mkdtemp(prefix='fx-untrusted-'))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)

@pytest.fixture(scope='module')
def live(world):
    fit = LiveFit(world/'served'/'live', Path(tempfile.mkdtemp(dir=world)))
    yield fit
    fit.kill()

@contextmanager
def cannot_write(*folders:Path):
    """Inside the block this process cannot write `folders`: as root (which file modes do not stop) it acts as user `nobody`
    (real and effective ids, so `os.access` answers for it too), else the folders are made 0o555"""
    if os.geteuid() == 0:
        os.setresgid(65534, 65534, 0); os.setresuid(65534, 65534, 0)
        try: yield
        finally: os.setresuid(0, 0, 0); os.setresgid(0, 0, 0)
        return
    modes = {p: p.stat().st_mode for p in folders}
    for p in folders: p.chmod(0o555)
    try: yield
    finally:
        for p,m in modes.items(): p.chmod(m)

def _listing(p:Path)->dict: return {f.name: f.stat().st_size for f in p.iterdir()}

def test_epochs_before_the_first_epoch_ends(live):
    "Before the first epoch of a live fit ends, `/epochs` says so, not that an older fastexplorer wrote the run"
    live.at(0)
    with serve(live.p.parent, port=0) as s:
        st,d,_ = _get(s, 'api/runs/live/epochs')
    assert st == 404 and 'no epoch' in d['error'] and 'ended yet' in d['error'] and 'older' not in d['error'], d

def test_live_fit_read_without_write_permission(live):
    "A live fit read by a user who cannot write its folder: the steps of the epoch that ended, through `load_run` and the server"
    live.at(1)
    p = live.p
    want = load_run(p).steps                                       # as the writer's user: what the log holds
    assert len(want) and set(want.epoch) == {1}
    with serve(p.parent, port=0) as s:
        _get(s, 'api/runs/live/steps'); _get(s, 'api/runs/live/steps/series?layer=0.0&stats=mean')   # imports done
        before = _listing(p)
        with cannot_write(p):
            assert not os.access(p, os.W_OK)
            got = load_run(p).steps
            st,info,_ = _get(s, 'api/runs/live/steps')
            st2,d,_ = _get(s, 'api/runs/live/steps/series?layer=0.0&stats=mean')
    assert len(got) == len(want), f"{len(got)} rows read without write permission, {len(want)} with"
    assert st == 200 and info['batches'] == step_info(p)['batches'] > 0, info
    assert st2 == 200 and d['steps'] and d['mean']['mean']
    assert _listing(p) == before

@pytest.mark.parametrize('shm', [True, False], ids=['with-shm', 'without-shm'])
def test_killed_run_on_read_only_storage_shows_its_log(live, world, tmp_path, shm):
    "A run killed with SIGKILL, its steps still in `steps.sqlite-wal`, copied where the reader cannot write: every step is read"
    live.at(1).kill()
    assert (live.p/'steps.sqlite-wal').stat().st_size > 0, 'the steps are in the log'
    ref = shutil.copytree(live.p, tmp_path/'ref')                  # a writable copy: what the run holds
    want = load_run(ref).steps
    assert len(want) and load_run(ref).step_series('0.0', stats='mean').shape[0]
    root = world/f'copied-{shm}'
    p = shutil.copytree(live.p, root/'run')
    if not shm: (p/'steps.sqlite-shm').unlink()
    before = _listing(p)
    with serve(root, port=0) as s:
        with cannot_write(p):
            assert not os.access(p, os.W_OK)
            got = load_run(p).steps
            series = load_run(p).step_series('0.0', stats='mean')
            st,info,_ = _get(s, 'api/runs/run/steps')
            st2,d,_ = _get(s, 'api/runs/run/steps/series?layer=0.0&stats=mean')
    assert len(got) == len(want), f"{len(got)} rows read on read-only storage, {len(want)} from a writable copy"
    assert len(series) and st == 200 and info['batches'] == step_info(ref)['batches'] > 0, info
    assert st2 == 200 and d['mean']['mean'], d
    assert _listing(p) == before, 'nothing written beside the run'

def test_reading_a_finished_run_leaves_nothing_behind(good, tmp_path):
    "Reading a finished run (Python and the server) in a folder the reader may write leaves no `-wal` or `-shm` file"
    p = shutil.copytree(good, tmp_path/'served'/'run')
    before = _listing(p)
    run = load_run(p)
    assert len(run.steps) and len(run.step_series('0.0')) and run.hist_range('0.0')
    with serve(p.parent, port=0) as s:
        for q in [*READS['steps.sqlite'], *READS['history.sqlite']]: assert _get(s, f'api/runs/run/{q}')[0] == 200, q
    assert _listing(p) == before

@pytest.mark.parametrize('layer,status', [('group 99999999999999999999', 200), ('group 7', 200), ('group x', 400), ('   ', 400),
                                          ('group -1', 400), ('group 0', 200)])
def test_hyper_groups_out_of_range(good, layer, status, capfd):
    "A parameter group no run can hold is an empty series, as any group the run has not; a name that is no group a 400 naming it; never a 500"
    with serve(good.parent, port=0) as s:
        st,d,_ = _get(s, f'api/runs/good/steps/series?kind=hyper&layer={layer.replace(" ", "%20")}')
    assert st == status, (layer, st, d)
    if st == 400: assert repr(layer) in d['error'] and 'group N' in d['error'], d
    else: assert (d['n'] > 0) == (layer == 'group 0'), d
    assert 'Traceback' not in capfd.readouterr().err

@contextmanager
def _legacy(s):
    "A client of the original websocket on server `s`, connected and sent the run's representation"
    ws_client = pytest.importorskip('websockets.sync.client')
    from fastexplorer.legacy import LEGACY_ORIGIN, LEGACY_EVENTS
    with ws_client.connect(s.url.replace('http://', 'ws://') + 'ws?run=good', origin=LEGACY_ORIGIN, open_timeout=10) as ws:
        ws.send('{"type": "CONNECTED"}')
        assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['data']
        yield ws

def test_legacy_websocket_skips_deep_nesting(good, capfd):
    "The original client's websocket: 100,000 nested `[` are skipped like any message that is not JSON; no traceback"
    from fastexplorer.legacy import LEGACY_EVENTS
    with serve(good.parent, port=0, legacy_client=True) as s, _legacy(s) as ws:
        ws.send('[' * 100_000)
        ws.send(json.dumps({'type': 'socket/sendEvent', 'payload': {'event': 'NOPE'}}))
        assert json.loads(ws.recv(timeout=10))['type'] == LEGACY_EVENTS['invalid']   # the socket answers on
    err = capfd.readouterr().err
    assert 'Traceback' not in err and 'RecursionError' not in err, err[-3000:]

def test_legacy_websocket_text_not_utf8(good, capfd):
    "A text frame that is not UTF-8 closes that socket (1007) with one line in the log, no traceback; the next client is served"
    with serve(good.parent, port=0, legacy_client=True) as s:
        with _legacy(s) as ws:
            ws.send(b'\xff\xfe not UTF-8', text=True)
            with pytest.raises(Exception): ws.recv(timeout=5)
            assert ws.close_code == 1007, ws.close_code
        with _legacy(s): pass
    err = capfd.readouterr().err
    assert 'Traceback' not in err and 'UnicodeDecodeError' not in err and 'not in UTF-8' in err, err[-3000:]

def test_report_cli_names_a_link_out(good, tmp_path):
    "`fastexplorer report` on a folder whose run links out of it: a one-line error naming the file from that folder"
    from fastexplorer.cli import main
    root = _linked(good, tmp_path, 'landscape.json')
    with pytest.raises(SystemExit, match=r'^fastexplorer report: linked/landscape\.json: a link to a file outside'):
        main(['report', str(root), '-o', str(tmp_path/'rep.html')])
    assert not (tmp_path/'rep.html').exists()
