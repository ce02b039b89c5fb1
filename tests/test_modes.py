"Training and evaluation modes, and batches too small for a BatchNorm (issue 45, `modes.py`): real small fastai runs on scikit-learn's digits."
import pytest, torch
import torch.nn.functional as F
from torch import nn
from fastai.callback.core import Callback
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
import fastai.callback.progress   # noqa: F401  (`Learner.no_bar`, when this file runs alone)
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from fastexplorer.export import load_run

def _digits():
    "scikit-learn's digits as standardised `(n, 64)` vectors, integer labels"
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32)
    return (x - x.mean()) / x.std(),torch.tensor(d.target)

def _dls(n_train:int, bs:int=64, drop_last:bool=False, images:bool=False)->DataLoaders:
    "Digits: the first `n_train` to train on (shuffled, keeping the last partial batch unless `drop_last`), 300 to validate"
    x,y = _digits()
    if images: x = x.view(-1, 1, 8, 8)
    items = list(zip(x, y))
    train = DataLoader(items[:n_train], bs=bs, shuffle=True, drop_last=drop_last)
    return DataLoaders(train, DataLoader(items[-300:], bs=bs))

class _Cnn(nn.Module):
    "A small CNN with BatchNorm whose `forward` drops out functionally, with `training=True` (SimpleNet's bug) or `self.training`"
    def __init__(self, buggy:bool):
        super().__init__()
        self.buggy,self.body = buggy,nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Linear(16, 10)
    def forward(self, x):
        x = F.adaptive_max_pool2d(self.body(x), 1).flatten(1)
        return self.head(F.dropout(x, 0.2, training=True if self.buggy else self.training))

def _active(path)->list:
    al = load_run(path).alerts
    return list(zip(al.kind, al.layer.fillna(''), al.severity))

@pytest.mark.parametrize('buggy', [True, False])
def test_a_dropout_left_on_in_evaluation_is_named(buggy):
    "SimpleNet's `F.dropout(..., training=True)` in `forward` (github.com/Coderx7/SimpleNet/issues/2): the model's own forward is named; the fix is quiet"
    torch.manual_seed(0)
    learn = Learner(_dls(1400, images=True), _Cnn(buggy), loss_func=nn.CrossEntropyLoss())
    v = {x['check']: x for x in learn.preflight()}
    assert v['eval_nondeterministic']['severity'] == ('warning' if buggy else 'ok'), v['eval_nondeterministic']
    if buggy: assert v['eval_nondeterministic']['layer'] == '' and 'own `forward`' in v['eval_nondeterministic']['evidence']

def test_a_dropout_module_put_back_in_training_is_named():
    "A Dropout module in training mode while the rest evaluates: it is the module named"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10))
    model[2].forward = lambda x: F.dropout(x, 0.5, training=True)   # a dropout that ignores `eval()`, as a user's own module
    v = {x['check']: x for x in Learner(_dls(1400), model, loss_func=nn.CrossEntropyLoss()).preflight()}
    assert (v['eval_nondeterministic']['severity'], v['eval_nondeterministic']['layer']) == ('warning', '2'), v['eval_nondeterministic']

def test_a_language_model_that_keeps_its_hidden_state_is_deterministic():
    "fastai's AWD-LSTM language model carries its hidden state from batch to batch: the second forward starts where the first did"
    from fastai.text.all import AWD_LSTM, awd_lstm_lm_config, get_language_model
    torch.manual_seed(0)
    x = torch.randint(0, 40, (320, 12))
    items = list(zip(x[:, :-1], x[:, 1:]))
    dls = DataLoaders(DataLoader(items[:256], bs=32, shuffle=True, drop_last=True), DataLoader(items[256:], bs=32))
    model = get_language_model(AWD_LSTM, 40, config={**awd_lstm_lm_config, 'emb_sz': 32, 'n_hid': 48, 'n_layers': 2})
    learn = Learner(dls, model, loss_func=lambda o, y: F.cross_entropy(o[0].flatten(0, 1), y.flatten()))
    v = {x['check']: x for x in learn.preflight()}
    assert v['eval_nondeterministic']['severity'] == 'ok', v['eval_nondeterministic']

class _Denoiser(nn.Module):
    "A DiffRec-style denoiser: its `forward` diffuses the input at a random step, in training and evaluation alike, by design"
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64 + 5, 128), nn.Tanh(), nn.Linear(128, 64))
        self.register_buffer('alpha_bar', torch.tensor([0.9, 0.7, 0.5, 0.3, 0.1]))
    def forward(self, x0):
        t = torch.randint(0, 5, (len(x0),), device=x0.device)
        ab = self.alpha_bar[t].unsqueeze(1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * torch.randn_like(x0)
        return self.net(torch.cat([xt, F.one_hot(t, 5).float()], 1))

def test_a_model_that_samples_by_design_is_not_told_to_turn_it_off():
    "A diffusion denoiser draws its step and noise in evaluation too (github.com/user683/DRGO's `MLP_model.py`): said as `info`, no warning"
    torch.manual_seed(0)
    x,_ = _digits()
    items = list(zip(x, x))
    dls = DataLoaders(DataLoader(items[:1400], bs=64, shuffle=True, drop_last=True), DataLoader(items[1400:], bs=64))
    v = {x['check']: x for x in Learner(dls, _Denoiser(), loss_func=F.mse_loss).preflight()}
    assert v['eval_nondeterministic']['severity'] == 'info' and 'randint' in v['eval_nondeterministic']['evidence'], v['eval_nondeterministic']

class _NoEval(Callback):
    "A validation loop that never calls `model.eval()`: the model is put back in training mode before validating"
    order = 50
    def before_validate(self): self.learn.model.train()

@pytest.mark.parametrize('buggy', [True, False])
def test_validation_in_training_mode_is_named(buggy, tmp_path):
    "VAAL's test loop without `task_model.eval()` (github.com/sinhasam/vaal/issues/2): a BatchNorm and a Dropout in training mode while validating"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10))
    learn = Learner(_dls(1400, drop_last=True), model, loss_func=nn.CrossEntropyLoss(), cbs=[_NoEval()] if buggy else [])
    with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2, cbs=ExplorerCallback(tmp_path/'r', preflight=False))
    found = [a for a in _active(tmp_path/'r') if a[0] == 'train_mode_in_eval']
    assert found == ([('train_mode_in_eval', '1', 'warning')] if buggy else []), found

class _ValidateMidEpoch(Callback):
    "A validation loop run from inside the epoch, every 5 batches, that puts the model in evaluation mode (and back, if fixed)"
    def __init__(self, x, restore:bool): self.x,self.restore = x,restore
    def after_batch(self):
        if not self.training or self.iter % 5: return
        self.learn.model.eval()
        with torch.no_grad(): self.learn.model(self.x)
        if self.restore: self.learn.model.train()

@pytest.mark.parametrize('buggy', [True, False])
def test_training_in_evaluation_mode_is_named(buggy, tmp_path):
    "vsepp's validation inside the epoch never calls `model.train()` after it (github.com/fartashf/vsepp/issues/4)"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10))
    x,_ = _digits()
    learn = Learner(_dls(1400, drop_last=True), model, loss_func=nn.CrossEntropyLoss(),
                    cbs=_ValidateMidEpoch(x[:16], restore=not buggy))
    with learn.no_bar(), learn.no_logging(): learn.fit(2, 1e-2, cbs=ExplorerCallback(tmp_path/'r', preflight=False))
    found = [a for a in _active(tmp_path/'r') if a[0] == 'eval_mode_in_training']
    assert found == ([('eval_mode_in_training', '1', 'warning')] * 2 if buggy else []), found   # said in each epoch

def _bn_head():
    return nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))

def test_a_last_batch_of_one_is_said_before_training_and_when_it_stops_the_fit(tmp_path):
    "fastai issue 1352: the training loader keeps a last batch of 1 sample (1409 = 22×64 + 1, `drop_last=False`) and the head's BatchNorm1d stops the fit"
    torch.manual_seed(0)
    learn = Learner(_dls(1409), _bn_head(), loss_func=nn.CrossEntropyLoss())
    v = {x['check']: x for x in learn.preflight()}
    assert (v['last_batch_one']['severity'], v['last_batch_one']['layer']) == ('error', '1'), v.get('last_batch_one')
    with pytest.raises(ValueError, match='more than 1 value per channel'):
        with learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-2, cbs=ExplorerCallback(tmp_path/'r', preflight=False))
    assert ('last_batch_one', '1', 'error') in _active(tmp_path/'r'), _active(tmp_path/'r')   # said by the crash itself

@pytest.mark.parametrize('drop_last,n', [(True, 1409), (False, 1408)])
def test_no_last_batch_of_one_is_quiet(drop_last, n):
    "The fix (`drop_last=True`, fastai's default for the training loader), or a set that leaves no sample alone: nothing said"
    torch.manual_seed(0)
    v = Learner(_dls(n, drop_last=drop_last), _bn_head(), loss_func=nn.CrossEntropyLoss()).preflight()
    assert 'last_batch_one' not in {x['check'] for x in v}, v
