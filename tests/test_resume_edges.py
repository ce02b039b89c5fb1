"Issue 47, point 6: a resumed run over a damaged folder, a full disk, a bad path, and the preflight on a model or loss that cannot train: each refused before training, saying what is wrong and where."
import errno, json, shutil, sqlite3
from pathlib import Path
import pytest, torch
import torch.nn.functional as F
from torch import nn
from fastai.callback.core import Callback
from fastai.callback.progress import *   # noqa: F403  (Learner.no_bar)
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastexplorer.all import *
from fastexplorer.cli import digits_learner, digits_dls, digits_cnn
from untouched import Untouched

def _fit(learn, n=1):
    with learn.no_bar(), learn.no_logging(): learn.fit(n, 1e-2)

def _spy(learn)->list:
    "A list that gets an item for each batch `learn` trains on"
    seen = []
    learn.add_cb(type('Spy', (Callback,), {'before_batch': lambda self: seen.append(1)})())
    return seen

def _resume(p:Path):
    "Resume the run in `p` for one epoch, as a user does in a new session; `(error, batches trained)`"
    learn = digits_learner(cbs=ExplorerCallback(p, every=5, resume=True, verbose=0))
    seen = _spy(learn)
    with pytest.raises(Exception) as e: _fit(learn)
    return e.value,len(seen)

def _files(p:Path)->dict:
    "The run's files and their bytes (the lock and SQLite's journals aside)"
    return {f.name: f.read_bytes() for f in sorted(p.iterdir()) if f.name != '.lock' and not f.name.endswith(('-wal', '-shm'))}

@pytest.fixture(scope='module')
def finished(tmp_path_factory)->Path:
    "A finished run of two epochs on the digits, with its step database and epoch history"
    p = tmp_path_factory.mktemp('finished')/'run'
    _fit(digits_learner(cbs=ExplorerCallback(p, every=5, verbose=0)), 2)
    return p

def _copy(finished:Path, tmp_path:Path)->Path: return Path(shutil.copytree(finished, tmp_path/'run'))

# --- resume over a damaged last epoch file -----------------------------------------------------------------------

DAMAGE = {'truncated': lambda f: f.write_bytes(f.read_bytes()[:100]), 'empty': lambda f: f.write_bytes(b''),
          'not_json': lambda f: f.write_text('<html>503 Service Unavailable</html>'),
          'another_schema': lambda f: f.write_text(json.dumps({'schema': 'other/tool', 'version': 1, 'epoch': 2})),
          'deleted': lambda f: f.unlink()}

@pytest.mark.parametrize('damage', list(DAMAGE))
def test_resume_refuses_a_damaged_last_epoch_file(finished, tmp_path, damage):
    """The last epoch file of a run cut by a copy (or deleted): a resumed fit went on (appending epochs after one that
    `load_run(p).df` can never read) or failed with a bare `JSONDecodeError` after rewriting `run.json`. Now it is refused
    at `before_fit`, naming the file, before a batch is trained or a file written"""
    p = _copy(finished, tmp_path)
    DAMAGE[damage](p/'epoch_0002.json')
    held = _files(p)
    e,trained = _resume(p)
    assert str(p/'epoch_0002.json') in str(e) and '`resume` cannot go on from epoch 2' in str(e), e
    assert trained == 0 and _files(p) == held, 'refused before anything is trained or written'
    assert [x['epoch'] for x in load_run(p).meta['epochs']] == [1, 2]

def test_resume_goes_on_with_the_last_epoch_files_findings(finished, tmp_path):
    "The healthy twin: a last epoch file intact, the run resumed, its epochs 1 to 3 all readable"
    p = _copy(finished, tmp_path)
    _fit(digits_learner(cbs=ExplorerCallback(p, every=5, resume=True, verbose=0)))
    run = load_run(p)
    assert [x['epoch'] for x in run.meta['epochs']] == [1, 2, 3] and sorted(run.df.epoch.unique()) == [1, 2, 3]

# --- resume over a history of another version --------------------------------------------------------------------

def test_resume_refuses_a_history_of_another_version_before_training(finished, tmp_path):
    """`history.sqlite` written by another version: refused only after a whole epoch had trained, leaving an unlisted
    `epoch_0003.json`. Now refused at `before_fit`, as a `steps.sqlite` of another version is"""
    p = _copy(finished, tmp_path)
    con = sqlite3.connect(p/'history.sqlite')
    with con: con.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    con.close()
    held = _files(p)
    e,trained = _resume(p)
    assert str(p/'history.sqlite') in str(e) and 'version 99' in str(e), e
    assert trained == 0 and not (p/'epoch_0003.json').exists() and _files(p).keys() == held.keys()
    assert _files(p)['run.json'] == held['run.json']

# --- a full disk when the fit starts -----------------------------------------------------------------------------

def test_a_full_disk_when_the_run_folder_is_locked_names_the_folder(tmp_path, monkeypatch):
    """A disk already full when the fit starts: the lock file's `pid@host` cannot be written, and `lock_run` raised a
    bare `OSError: [Errno 28] No space left on device`. Now the error names the run folder and says the disk is full"""
    import fastexplorer.export as ex
    def full(f):   # the write of `pid@host`, as a full disk meets it
        f.seek(0); f.truncate()
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(ex, '_write_owner', full)
    p = tmp_path/'run'
    learn = digits_learner(cbs=ExplorerCallback(p, verbose=0))
    seen = _spy(learn)
    with pytest.raises(OSError) as e: _fit(learn)
    assert e.value.errno == errno.ENOSPC and str(p) in str(e.value) and 'the disk is full' in str(e.value), e.value
    assert not seen and not p.exists(), 'nothing trained, no folder left behind'

# --- a path with a null byte -------------------------------------------------------------------------------------

def test_a_path_with_a_null_byte_is_refused_by_the_constructor():
    "`ExplorerCallback(path='a\\0b')` failed at `before_fit` with 'embedded null byte', naming no argument"
    with pytest.raises(ValueError, match='`path` must be a folder path without a null byte'): ExplorerCallback('a\0b')
    with pytest.raises(ValueError, match='`path`'): ExplorerCallback(Path('runs')/'a\0b')

# --- the preflight on a program that cannot train ----------------------------------------------------------------

class _Wrapped(nn.Module):
    "The digits CNN (seed 0) wrapped in a module of one's own, whose `forward` each case writes"
    def __init__(self):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0); self.body = digits_cnn()

class _ForgotReturn(_Wrapped):
    "A `forward` that computes the output and forgets to return it"
    def forward(self, x): out = self.body(x)   # noqa: F841

def _checked(learn)->dict:
    "The preflight's verdicts on `learn`, by check, the model left exactly as it was"
    u = Untouched(learn.model)
    vs = learn.preflight()
    u.check()
    return {v['check']: v for v in vs}

def _errors(vs:dict)->list: return [k for k,v in vs.items() if v['severity'] == 'error']

def test_preflight_on_a_forward_that_returns_none():
    "A `forward` without `return`: the preflight crashed in its own check (`'NoneType' object has no attribute 'detach'`)"
    vs = _checked(Learner(digits_dls(), _ForgotReturn(), loss_func=CrossEntropyLossFlat()))
    assert _errors(vs) == ['output'] and "the model's forward returns None" in vs['output']['evidence'], vs

def test_preflight_on_a_loss_that_is_not_reduced():
    """`CrossEntropyLossFlat(reduction='none')`, one loss per sample: torch's "only one element tensors can be converted
    to Python scalars" came out of the preflight. Now: the loss's shape, and the fix (reduce it)"""
    learn = digits_learner()
    learn.loss_func = CrossEntropyLossFlat(reduction='none')
    vs = _checked(learn)
    bs = learn.dls.train.bs
    assert _errors(vs) == ['loss'] and f"a tensor of shape ({bs},), not a scalar" in vs['loss']['evidence'], vs
    assert '`.mean()`' in vs['loss']['fix']

def test_preflight_on_a_model_with_no_parameters():
    """A baseline with nothing to learn (the digits' pixels pooled to 10 scores): torch's "element 0 of tensors does not
    require grad" came out of the preflight. Now: the model has no parameters to train"""
    model = nn.Sequential(nn.Flatten(), nn.AdaptiveAvgPool1d(10))
    vs = _checked(Learner(digits_dls(), model, loss_func=CrossEntropyLossFlat()))
    assert _errors(vs) == ['gradient_flow'] and 'the model has no parameters to train' in vs['gradient_flow']['evidence']

def _sharp_ce(o, y):
    "A cross-entropy written by hand, the log of a sharpened softmax: its zeros make `0 * log 0`, NaN, from the first batch"
    p = F.softmax(o * 1e4, dim=1)
    return -(F.one_hot(y, o.shape[1]) * torch.log(p)).sum(1).mean()

def test_a_loss_that_is_nan_at_step_0_is_one_error_about_the_loss():
    """A loss that is NaN at step 0 from finite outputs: two errors, the second (`gradient_flow`) blaming the layers,
    whose gradients are NaN only because the loss is. Now one error, about the loss"""
    learn = digits_learner()
    learn.loss_func = _sharp_ce
    vs = _checked(learn)
    assert _errors(vs) == ['nonfinite_loss'] and 'the loss is nan' in vs['nonfinite_loss']['evidence'], vs

class _NoGradForward(_Wrapped):
    "The digits CNN run under `torch.no_grad` in the model's own `forward` (a feature extractor frozen the wrong way)"
    def forward(self, x):
        with torch.no_grad(): return self.body(x)

def test_preflight_on_a_forward_run_under_no_grad():
    """The same error from torch ("element 0 of tensors does not require grad") when the parameters exist but the forward
    cuts them off: now the gradient check says where their gradient stops"""
    vs = _checked(Learner(digits_dls(), _NoGradForward(), loss_func=CrossEntropyLossFlat()))
    g = vs['gradient_flow']
    assert g['severity'] == 'warning' and 'run under `torch.no_grad`' in g['evidence'] and g['cut']['module'] == 'body.0.0', g

def test_a_full_disk_when_the_folder_is_checked_is_not_called_a_permission(tmp_path, monkeypatch):
    """A disk with no room left for a file when the run folder is checked: it was called 'not writable'
    (`PermissionError`), sending the user after permissions. Now the folder is named and the disk said to be full"""
    import fastexplorer.export as ex
    def full(*args, **kwargs): raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(ex.tempfile, 'TemporaryFile', full)
    p = tmp_path/'run'
    learn = digits_learner(cbs=ExplorerCallback(p, verbose=0))
    seen = _spy(learn)
    with pytest.raises(OSError) as e: _fit(learn)
    assert not isinstance(e.value, PermissionError) and str(p) in str(e.value) and 'the disk is full' in str(e.value)
    assert not seen
