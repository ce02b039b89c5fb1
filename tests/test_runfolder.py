"The run folder's writer (issue 17): one writer at a time, `overwrite` removes only the files a run wrote, every failure ends in a final status, the CLI checks its options first"
import errno, json, os, socket, subprocess, sys, textwrap
from pathlib import Path
import pytest
from fastai.callback.core import Callback
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastexplorer.all import *
from fastexplorer.cli import main

def _fit(learn, n=1, **kw):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, 1e-2, **kw)

def _spy(learn):
    "A list that gets an item for each batch `learn` trains on"
    seen = []
    learn.add_cb(type('Spy', (Callback,), {'before_batch': lambda self: seen.append(1)})())
    return seen

def _our_run(p:Path, epochs=2)->Path:
    "A finished run of `epochs` epochs in `p`, written by `RunWriter`"
    w = RunWriter(p).open('M')
    w.write_representation({'schema': 'fastexplorer/representation', 'version': 1})
    for n in range(1, epochs + 1): w.write_epoch({'schema': 'fastexplorer/epoch', 'version': 1, 'epoch': n})
    w.write_manifest(status='finished'); getattr(w, 'close', lambda: None)()   # (no `close` before issue 17: for checking these tests on it)
    return p

def _snapshot(p:Path)->dict: return {f.name: f.read_bytes() for f in sorted(p.iterdir()) if f.is_file() and f.name != '.lock'}

def _free(p:Path)->bool:
    "Whether run folder `p`'s lock can be taken now"
    try: unlock_run(lock_run(p)); return True
    except RunLockedError: return False

GUARDS = ('one_batch', '_do_epoch', '_call_one')   # the learner's methods HookGuard wraps for a fit

# --- overwrite: only our own files --------------------------------------------------------------------------------

def test_overwrite_refuses_another_tools_run_json(tmp_path):
    "`overwrite=True` on a folder whose `run.json` another tool wrote: refused, naming it, nothing removed"
    p = tmp_path/'run'; p.mkdir()
    (p/'run.json').write_text('{"tool": "another", "runs": 3}')
    (p/'epoch_0001.json').write_text('{"tool": "another"}')
    before = _snapshot(p)
    with pytest.raises(FileExistsError, match="run.json that fastexplorer did not write"): RunWriter(p, overwrite=True).open()
    assert _snapshot(p) == before

@pytest.mark.parametrize('name,beside', [('representation.json', False), ('landscape.json', True), ('epoch_0007.json', True)])
def test_overwrite_keeps_same_named_files_it_did_not_write(name, beside, tmp_path):
    "Another tool's file with one of our names, alone or beside our run: `overwrite` refuses the folder, naming the file, and removes nothing"
    p = _our_run(tmp_path/'run') if beside else tmp_path/'run'
    p.mkdir(exist_ok=True)
    (p/name).write_text('{"made by": "another tool"}')
    before = _snapshot(p)
    with pytest.raises(FileExistsError, match=name.replace('.', r'\.')): RunWriter(p, overwrite=True).open()
    assert _snapshot(p) == before

def test_overwrite_removes_what_the_run_wrote(tmp_path):
    "`overwrite` removes every file the run listed (the step and history databases included) and nothing else"
    p = _our_run(tmp_path/'run')
    (p/'notes.txt').write_text('mine')
    assert {'epoch_0001.json', 'epoch_0002.json', 'epochs.jsonl', 'history.sqlite', 'representation.json'} <= set(os.listdir(p))
    RunWriter(p, overwrite=True).open('M').close()
    assert sorted(os.listdir(p)) == ['.lock', 'notes.txt', 'run.json'] and (p/'notes.txt').read_text() == 'mine'

def test_overwrite_of_a_run_from_before_the_file_list(tmp_path):
    "A run folder written before the manifest listed its files: its files (ours by name, JSON ones by content) are replaced"
    p = _our_run(tmp_path/'run')
    m = json.loads((p/'run.json').read_text()); del m['files']; (p/'run.json').write_text(json.dumps(m))
    (p/'snapshot_0001.npy').write_bytes(b'x'); (p/'notes.txt').write_text('mine')
    RunWriter(p, overwrite=True).open('M').close()
    assert sorted(os.listdir(p)) == ['.lock', 'notes.txt', 'run.json']

def test_no_run_json_foreign_epoch_file_not_replaced(tmp_path):
    "No `run.json`, and another tool's `epoch_0001.json`: a fit (without `overwrite`) is refused before training, the file kept"
    p = tmp_path/'run'; p.mkdir()
    (p/'epoch_0001.json').write_text('{"made by": "another tool"}')
    learn = digits_learner(cbs=ExplorerCallback(p))
    seen = _spy(learn)
    with pytest.raises(FileExistsError, match=r'epoch_0001\.json'): _fit(learn)
    assert not seen and (p/'epoch_0001.json').read_text() == '{"made by": "another tool"}' and not (p/'run.json').exists()

# --- one writer at a time -----------------------------------------------------------------------------------------

def test_second_writer_in_this_process_refused(tmp_path):
    "While a writer holds the folder, another (even with `overwrite=True`) is refused with the holder's pid and host"
    p = tmp_path/'run'
    w = RunWriter(p).open('M')
    before = _snapshot(p)
    with pytest.raises(RunLockedError, match=f"process {os.getpid()} on host {socket.gethostname()}"): RunWriter(p, overwrite=True).open()
    assert _snapshot(p) == before
    w.close()
    assert _free(p)

HOLDER = textwrap.dedent('''
    import sys, time
    from fastexplorer.all import *
    w = RunWriter(sys.argv[1]).open('Holder')
    print('ready', flush=True)
    time.sleep(120)
''')

def test_second_writer_in_another_process_refused(tmp_path):
    "A fit with `overwrite=True` on a folder another process is writing: refused before training, naming that process; free once it ends"
    p = tmp_path/'run'
    proc = subprocess.Popen([sys.executable, '-c', HOLDER, str(p)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'ready'
        before = _snapshot(p)
        learn = digits_learner(cbs=ExplorerCallback(p, overwrite=True))
        seen = _spy(learn)
        with pytest.raises(RunLockedError, match=f"process {proc.pid} on host {socket.gethostname()}"): _fit(learn)
        assert not seen and _snapshot(p) == before and json.loads((p/'run.json').read_text())['model'] == 'Holder'
    finally: proc.kill(); proc.wait()
    assert _free(p)                                         # the OS dropped the killed holder's lock

def test_run_replaced_between_fits_is_not_mixed(tmp_path):
    "Another writer replaces the run between two fits of one callback: the second fit is refused instead of mixing the two runs"
    p = tmp_path/'run'
    learn = digits_learner(cbs=ExplorerCallback(p, every=10))
    _fit(learn)
    assert _free(p)                                          # released at the end of the fit
    RunWriter(p, overwrite=True).open('Other').close()
    with pytest.raises(FileExistsError, match='no longer holds this run'): _fit(learn)
    m = read_manifest(p)
    assert m['model'] == 'Other' and m['epochs'] == [] and not any(n in learn.__dict__ for n in GUARDS)

# --- failures end in a final status -------------------------------------------------------------------------------

def _no_space(*args, **kwargs): raise OSError(errno.ENOSPC, 'No space left on device')

def test_disk_full_before_the_fit(tmp_path, monkeypatch):
    "A full disk when the run starts: an error naming the file, and no empty folder left"
    p = tmp_path/'run'
    learn = digits_learner(cbs=ExplorerCallback(p))
    seen = _spy(learn)
    monkeypatch.setattr(os, 'fsync', _no_space)
    with pytest.raises(OSError, match='No space left') as e: _fit(learn)
    assert e.value.errno == errno.ENOSPC and str(p/'run.json') in str(e.value)
    assert not seen and not p.exists() and not any(n in learn.__dict__ for n in GUARDS)

def test_failed_epoch_write_ends_failed_and_next_fit_keeps_numbering(tmp_path, monkeypatch):
    "An epoch file that cannot be written: the run ends `failed` with the error naming the file; the next fit writes that epoch number"
    import fastexplorer.export as ex
    p = tmp_path/'run'
    learn = digits_learner(cbs=ExplorerCallback(p, every=10))
    real = ex.atomic_write
    def full(fname, text):
        if Path(fname).name.startswith('epoch_'): _no_space()
        return real(fname, text)
    monkeypatch.setattr(ex, 'atomic_write', full)
    with pytest.raises(OSError, match=r'epoch_0001\.json'): _fit(learn)
    m = read_manifest(p)
    assert m['status'] == 'failed' and 'No space left' in m['error'] and 'epoch_0001.json' in m['error'] and _free(p)
    monkeypatch.setattr(ex, 'atomic_write', real)
    _fit(learn)
    m = read_manifest(p)
    assert [e['file'] for e in m['epochs']] == ['epoch_0001.json'] and m['status'] == 'finished'

class _Raise(Callback):
    "Raise in `after_epoch`, before or after `ExplorerCallback` by `order`"
    def __init__(self, order): self.order = order
    def after_epoch(self): raise RuntimeError('boom in after_epoch')

@pytest.mark.parametrize('order', [0, 100])
def test_other_callback_raising_in_after_epoch(order, tmp_path):
    "Another callback raising in `after_epoch`: the run ends `failed` with its error, no guard stays on the Learner, the folder is free"
    p = tmp_path/'run'
    learn = digits_learner(cbs=[ExplorerCallback(p, every=10), _Raise(order)])
    with pytest.raises(RuntimeError, match='boom'): _fit(learn, 2)
    m = read_manifest(p)
    assert m['status'] == 'failed' and m['error'].startswith('RuntimeError') and 'boom in after_epoch' in m['error']
    assert not any(n in learn.__dict__ for n in GUARDS) and _free(p)
    assert [(e['epoch'], e['partial']) for e in m['epochs']] == [(1, order == 0)]   # written whole if ours ran first

def test_crashed_run_marked_failed_and_temporaries_removed(tmp_path):
    "A writer killed mid-run (its lock free, `running` left): `repair_run` marks it failed; the next open removes its temporaries"
    p = _our_run(tmp_path/'run')
    w = RunWriter(p, resume=True).open('M')
    (p/'.epoch_0003.jsonk2j4h1x9.tmp').write_text('{"sch')            # a write killed midway
    (p/'.notes.txt.tmp').write_text('mine')                            # not one of ours
    unlock_run(w.lock)                                                 # as the OS does when the process dies
    assert read_manifest(p)['status'] == 'running'
    assert repair_run(p) and not repair_run(p)
    m = read_manifest(p)
    assert m['status'] == 'failed' and f"({os.getpid()}@{socket.gethostname()}) ended without closing the run" in m['error']
    assert sorted(f.name for f in p.iterdir() if f.name.startswith('.')) == ['.lock', '.notes.txt.tmp']

def test_resume_goes_on_with_the_numbering(tmp_path):
    "`resume=True`: a new callback on a run goes on with its epoch and step numbers and its list of fits"
    p = tmp_path/'run'
    _fit(digits_learner(cbs=ExplorerCallback(p, every=5)), 2)
    steps = load_run(p).query_steps(stats='loss').step.tolist()
    learn = digits_learner(cbs=ExplorerCallback(p, every=5, resume=True))
    _fit(learn)
    run = load_run(p)
    assert [e['epoch'] for e in run.meta['epochs']] == [1, 2, 3] and len(run.meta['fits']) == 2 and run.meta['fits'][1]['first_epoch'] == 3
    after = run.query_steps(stats='loss').step.tolist()
    assert after[:len(steps)] == steps and after[len(steps)] == 2 * len(learn.dls.train) and after == sorted(after)
    with pytest.raises(ValueError, match='`resume` must be False'): ExplorerCallback(p, overwrite=True, resume=True)
    with pytest.raises(FileNotFoundError, match='no run to resume'): _fit(digits_learner(cbs=ExplorerCallback(tmp_path/'new', resume=True)))

# --- the command line ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('opt,val', [('epochs', '-1'), ('lr', 'nan'), ('lr', '0'), ('every', '0'), ('bs', '0'), ('seed', '-1'), ('port', '70000')])
def test_demo_option_checked_before_writing(opt, val, tmp_path):
    "A bad `demo` option is an error naming it and what it may be, before anything is written"
    with pytest.raises(SystemExit, match=f"--{opt} must be"): main(['demo', '--no-serve', '--path', str(tmp_path/'run'), f'--{opt}', val])
    assert list(tmp_path.iterdir()) == []

def test_demo_epochs_0_replaces_the_run(tmp_path):
    "`demo --epochs 0` on a folder holding a run replaces it: no epoch of the old run is left beside the new tree"
    p = _our_run(tmp_path/'run', epochs=3)
    assert main(['demo', '--no-serve', '--path', str(p), '--epochs', '0']) == 0
    m = read_manifest(p)
    assert m['epochs'] == [] and m['status'] == 'finished' and not list(p.glob('epoch_*.json'))
    assert json.loads((p/'representation.json').read_text())['schema'] == 'fastexplorer/representation'

def test_demo_refuses_a_folder_with_anothers_files(tmp_path):
    "`demo --path` on a run folder holding another tool's `epoch_0007.json`: a one-line error naming it, the folder untouched"
    p = _our_run(tmp_path/'run')
    (p/'epoch_0007.json').write_text('{"made by": "another tool"}')
    before = _snapshot(p)
    with pytest.raises(SystemExit, match=r'epoch_0007\.json'): main(['demo', '--no-serve', '--path', str(p), '--epochs', '0'])
    assert _snapshot(p) == before

@pytest.mark.parametrize('name', ['run.json', 'epoch_0001.json', 'steps.sqlite'])
def test_report_refuses_a_run_files_name(name, tmp_path):
    "`report -o RUN/run.json` would replace the run's own manifest: refused, naming `--output`"
    p = _our_run(tmp_path/'run')
    before = _snapshot(p)
    with pytest.raises(SystemExit, match='--output must be'): main(['report', str(p), '-o', str(p/name)])
    assert _snapshot(p) == before

@pytest.mark.parametrize('parent,why', [('nope/deeper', 'does not exist'), ('a_file', 'is not a folder')])
def test_report_names_a_missing_output_folder(parent, why, tmp_path):
    "`report -o /nonexistent/dir/r.html` (issue 46): the error names that folder, never our temporary file `.r.html….tmp`"
    p = _our_run(tmp_path/'run'); (tmp_path/'a_file').write_text('')
    with pytest.raises(SystemExit) as e: main(['report', str(p), '-o', str(tmp_path/parent/'r.html')])
    msg = str(e.value)
    assert f"the folder {str(tmp_path/parent)!r} {why}" in msg and '.tmp' not in msg, msg

def test_report_names_a_read_only_output_folder(tmp_path, monkeypatch):
    "`report -o` into a folder that cannot be written (a read-only mount, simulated: the tests run as root): a one-line error naming it"
    import errno, fastexplorer.formats as fmt
    p = _our_run(tmp_path/'run'); real = os.open; (tmp_path/'out').mkdir()
    def ro(f, *a, **kw):
        if os.path.dirname(f) == str(tmp_path/'out'): raise OSError(errno.EROFS, 'Read-only file system', f)
        return real(f, *a, **kw)
    monkeypatch.setattr(fmt.os, 'open', ro)
    with pytest.raises(SystemExit, match=r"the folder '.*out' cannot be written in: Read-only file system"):
        main(['report', str(p), '-o', str(tmp_path/'out'/'r.html')])
