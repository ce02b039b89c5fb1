"""Issue 45: the cause named when the loss or the backward fails (class labels a cross-entropy cannot take, an in-place
operation on a tensor the backward needs), freezes the model's own code made, and a softmax before a cross-entropy in
each of its forms; each from a real case."""
import random
import numpy as np, pytest, torch
import torch.nn.functional as F
from torch import nn
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastai.callback.core import Callback
from fastai.data.block import DataBlock, CategoryBlock
from fastai.data.transforms import ItemGetter, RandomSplitter
from fastexplorer.all import *
from fastexplorer.preflight import *   # `Learner.preflight`
from bugzoo import tensor_dls, digits_raw
from bugs_optim import _XceptionUnit   # the zoo's Xception unit (osmr/imgclsmob#13): an in-place ReLU first

def acted(vs)->list: return [v for v in vs if v['severity'] in ('warning', 'error')]

def _docs(n=600, vocab=200, seed=0):
    "Bag-of-words counts of synthetic documents of three classes (each class favours its own third of the vocabulary)"
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    p = torch.full((n, vocab), 1.); p[torch.arange(n)[:, None], y[:, None] * (vocab // 3) + torch.arange(vocab // 3)] = 4.
    x = torch.stack([torch.bincount(torch.multinomial(r, 40, True, generator=g), minlength=vocab) for r in p]).float()
    return x / 40, y

def _bow(): return nn.Sequential(nn.Linear(200, 32), nn.ReLU(), nn.Linear(32, 3))

# ---- 1. class labels a cross-entropy cannot take ----
def test_labels_from_minus_one_are_named_before_the_loss_error():
    """happy-transformer issue 248: a csv labels its three classes -1, 0 and 1, and `cross_entropy` raises "Target -1 is
    out of bounds". Before: the preflight's only finding was the `loss` error, naming nothing."""
    torch.manual_seed(0)
    x, y = _docs()
    vs = acted(Learner(tensor_dls(x, y - 1), _bow(), loss_func=nn.CrossEntropyLoss()).preflight())
    assert [v['check'] for v in vs] == ['target_classes', 'loss'], vs   # the cause, then the symptom
    assert vs[0]['labels'] == [-1, 0, 1] and '-1, 0, 1' in vs[0]['evidence'] and 'CategoryBlock' in vs[0]['fix'], vs[0]

def test_fastai_category_block_maps_the_same_labels():
    "The fix the verdict names: fastai's `CategoryBlock` maps labels -1, 0, 1 to indices; nothing is said then"
    torch.manual_seed(0)
    x, y = _docs()
    items = list(zip(x, (y - 1).tolist()))
    dblock = DataBlock(blocks=(None, CategoryBlock), get_x=ItemGetter(0), get_y=ItemGetter(1),
                       splitter=RandomSplitter(seed=0))
    dls = dblock.dataloaders(items, bs=32)
    assert acted(Learner(dls, _bow(), loss_func=CrossEntropyLossFlat()).preflight()) == []

def test_the_loss_ignore_index_is_not_a_class():
    """Segmentation masks mark unlabelled pixels 255 and the loss skips them (`ignore_index=255`, as in torchvision's
    segmentation references): no target is out of range. Before: "a target is class 255 but the model has 3 outputs"."""
    torch.manual_seed(0)
    x = torch.randn(64, 1, 8, 8)
    m = (x[:, 0] > 0).long() + (x[:, 0] > 1).long(); m[:, 0, :] = 255   # a border of unlabelled pixels
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1))
    for loss in (nn.CrossEntropyLoss(ignore_index=255), CrossEntropyLossFlat(axis=1, ignore_index=255)):
        assert acted(Learner(tensor_dls(x, m, bs=16), model, loss_func=loss).preflight()) == []
    vs = acted(Learner(tensor_dls(x, m, bs=16), model, loss_func=nn.CrossEntropyLoss()).preflight())
    assert vs[0]['check'] == 'target_classes' and 'class 255' in vs[0]['evidence'], vs

# ---- 2. an in-place operation on a tensor the backward needs ----
def _xception(inplace=True):
    return nn.Sequential(nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()),
                         _XceptionUnit(8, 16, inplace), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

def _digits_learner(model):
    x, y = digits_raw()
    return Learner(tensor_dls((x / 16).view(-1, 1, 8, 8), y, bs=32), model, loss_func=nn.CrossEntropyLoss())

def _flags(model): return {p: m.inplace for p,m in model.named_modules() if hasattr(m, 'inplace')}

def test_the_inplace_relu_that_breaks_the_backward_is_named():
    """osmr/imgclsmob issue 13: Xception's blocks fail at the first backward, "one of the variables needed for gradient
    computation has been modified by an inplace operation". Before: the preflight could not run (a `skipped` verdict),
    and nothing named the module. The flags the search switches are put back; the model is left as it was."""
    torch.manual_seed(0)
    learn = _digits_learner(_xception())
    flags,sd = _flags(learn.model),{k: v.clone() for k,v in learn.model.state_dict().items()}
    vs = acted(learn.preflight())
    assert [(v['check'], v['layer']) for v in vs] == [('gradient_flow', '1.body.0.activ')], vs
    assert 'inplace=False' in vs[0]['fix'] and 'backward' in vs[0]['evidence'], vs[0]
    assert _flags(learn.model) == flags and all(torch.equal(sd[k], v) for k,v in learn.model.state_dict().items())
    assert acted(_digits_learner(_xception(inplace=False)).preflight()) == []   # the accepted fix

def test_a_fit_that_crashes_at_its_first_backward_leaves_the_finding(tmp_path):
    "The user's program stops at its first backward; the run it leaves says which module, in `run.alerts`"
    torch.manual_seed(0)
    learn = _digits_learner(_xception())
    learn.add_cb(ExplorerCallback(tmp_path/'run', preflight=True))
    with pytest.raises(RuntimeError, match='inplace'), learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    al = load_run(tmp_path/'run').alerts
    assert [(a.kind, a.layer) for a in al.itertuples()] == [('gradient_flow', '1.body.0.activ')], al

def test_a_fit_without_preflight_that_crashes_at_its_backward_names_the_module(tmp_path):
    """With `preflight=False` (or a backward the preflight did not see fail), the crash itself is diagnosed on the failing
    batch: the run it leaves names the module, and the model's flags and state are as the crash left them"""
    torch.manual_seed(0)
    learn = _digits_learner(_xception())
    learn.add_cb(ExplorerCallback(tmp_path/'run', preflight=False)); flags = _flags(learn.model)
    with pytest.raises(RuntimeError, match='inplace'), learn.no_bar(), learn.no_logging(): learn.fit(1, 1e-3)
    al = load_run(tmp_path/'run').alerts
    assert [(a.kind, a.layer, a.source) for a in al.itertuples()] == [('gradient_flow', '1.body.0.activ', 'live')], al
    assert _flags(learn.model) == flags

class _Gate(nn.Module):
    "A gated unit of one's own: the gate's product saves `h`, which the forward then scales in place"
    def __init__(self, n=32):
        super().__init__(); self.lin = nn.Linear(64, n)
    def forward(self, x):
        h = self.lin(x); out = h * torch.sigmoid(h)
        h.mul_(0.5)                                  # in place, after `h * …` saved it
        return out + h

def test_an_inplace_call_in_a_forward_of_ones_own_is_named_by_its_module():
    "An in-place tensor method (`mul_`) rather than a module's flag: named by the module whose forward runs it"
    torch.manual_seed(0)
    x, y = digits_raw()
    learn = Learner(tensor_dls(x / 16, y), nn.Sequential(_Gate(), nn.Linear(32, 10)), loss_func=nn.CrossEntropyLoss())
    vs = acted(learn.preflight())
    assert [(v['check'], v['layer'], v['op']) for v in vs] == [('gradient_flow', '0', 'mul_')], vs

# ---- 3. freezes the model's own code made ----
class _Encoder(nn.Module):
    "BYOL-A's audio encoder at small size (conv, BatchNorm, ReLU, pool; two linear layers), with its `set_trainable`"
    def __init__(self, guard=True):
        super().__init__()
        block = lambda ni: [nn.Conv2d(ni, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*block(1), *block(16))
        self.fc = nn.Sequential(nn.Linear(16 * 4, 32), nn.ReLU())
        self.guard = guard
    def set_trainable(self, trainable=False):
        for p in self.parameters():
            if not self.guard or p.requires_grad: p.requires_grad = trainable   # the report's guard
    def forward(self, x): return self.fc(self.features(x).flatten(1))

def _byol(guard=True):
    enc = _Encoder(guard); enc.set_trainable(False); enc.set_trainable(True)   # frozen for a linear evaluation, then "unfrozen"
    return _digits_learner(nn.Sequential(enc, nn.Linear(32, 10)))

def test_an_encoder_that_could_not_be_unfrozen_is_named():
    """nttcslab/byol-a issue 7: `set_trainable(True)` touched only parameters that already required grad, so the encoder
    stayed frozen, at its random initialisation. Before: nothing (a freeze looked deliberate)."""
    torch.manual_seed(0)
    vs = acted(_byol().preflight())
    assert [(v['check'], v['severity'], v['layer']) for v in vs] == [('frozen', 'warning', '0.features.0')], vs
    assert 'never trained' in vs[0]['evidence'], vs[0]
    assert acted(_byol(guard=False).preflight()) == []

def test_a_deliberate_freeze_of_trained_parts_is_only_info():
    "A pretrained encoder (its BatchNorms have seen data) frozen on purpose for a linear evaluation: `info`, no alert"
    torch.manual_seed(0)
    learn = _byol()
    learn.model[0].train()(torch.randn(64, 1, 8, 8))   # statistics from data, as a pretrained encoder has
    vs = learn.preflight()
    assert [v['severity'] for v in vs if v['check'] == 'frozen'] == ['info'] and acted(vs) == [], acted(vs)

class _Classifier(nn.Module):
    "Embeddings the user's code freezes (loaded vectors, say), a body and a head; fastai's groups: body, head"
    def __init__(self, freeze=True):
        super().__init__()
        self.emb = nn.Embedding(17, 8); self.emb.weight.requires_grad_(not freeze)
        self.body = nn.Sequential(nn.Linear(64 * 8, 32), nn.ReLU()); self.head = nn.Linear(32, 10)
    def forward(self, x): return self.head(self.body(self.emb(x).flatten(1)))

def _fine_tune_learner(freeze=True, path=None):
    x, y = digits_raw()
    learn = Learner(tensor_dls(x.long(), y), _Classifier(freeze), loss_func=nn.CrossEntropyLoss(),
                    splitter=lambda m: [[p for p in [*m.emb.parameters(), *m.body.parameters()] if p.requires_grad],
                                        list(m.head.parameters())])
    learn.add_cb(ExplorerCallback(path, preflight=True))
    return learn

def test_fine_tune_unfrozen_stage_says_what_it_cannot_train(tmp_path):
    """`fine_tune` freezes the body (fastai's freeze: nothing said), then unfreezes every group: embeddings the user's code
    froze, outside the groups, stay frozen. Said when `unfreeze` ran, as a warning; before: nothing."""
    torch.manual_seed(0)
    learn = _fine_tune_learner(path=tmp_path/'run')
    with learn.no_bar(), learn.no_logging(): learn.fine_tune(1, 1e-2, freeze_epochs=1)
    al = load_run(tmp_path/'run').alerts
    fr = al[al.kind.eq('frozen')]
    assert [(a.severity, a.layer, a.epoch) for a in fr.itertuples()] == [('warning', 'emb', 2)], al
    assert 'unfreeze' in fr.message.iloc[0], fr.message.iloc[0]
    torch.manual_seed(0)
    learn = _fine_tune_learner(False, tmp_path/'twin')
    with learn.no_bar(), learn.no_logging(): learn.fine_tune(1, 1e-2, freeze_epochs=1)
    al = load_run(tmp_path/'twin').alerts
    assert al[al.kind.eq('frozen')].empty, al

# ---- 4. a softmax before a cross-entropy, in each of its forms ----
class _FnSoftmax(nn.Module):
    "The HAR CNN's way (pytorch forums): `F.softmax` returned from the model's own `forward`"
    def __init__(self, f=F.softmax):
        super().__init__(); self.a,self.b,self.f = nn.Linear(64, 32),nn.Linear(32, 10),f
    def forward(self, x): return self.f(self.b(F.relu(self.a(x))), dim=1)

class _SoftmaxAfterPred(Callback):
    "A callback that turns the predictions into probabilities, as some metrics want, before the loss sees them"
    def after_pred(self): self.learn.pred = self.pred.softmax(-1)

def _mlp(*last): return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10), *last)

@pytest.mark.parametrize('form', ['F.softmax', 'torch.softmax', 'Sequential', 'after_pred'])
@pytest.mark.parametrize('loss', [nn.CrossEntropyLoss(), CrossEntropyLossFlat()])
def test_a_softmax_before_a_cross_entropy_is_named_in_each_form(form, loss):
    "Probabilities into a loss that applies its own softmax: named whether a module, a function or a callback makes them"
    torch.manual_seed(0)
    x, y = digits_raw()
    model = {'F.softmax': lambda: _FnSoftmax(), 'torch.softmax': lambda: _FnSoftmax(torch.softmax),
             'Sequential': lambda: _mlp(nn.Softmax(dim=1)), 'after_pred': lambda: _mlp()}[form]()
    learn = Learner(tensor_dls(x / 16, y), model, loss_func=loss, cbs=[_SoftmaxAfterPred()] if form == 'after_pred' else [])
    vs = acted(learn.preflight())
    assert [v['check'] for v in vs][:1] == ['output_activation'] and vs[0]['severity'] == 'error', vs
    if form == 'Sequential': assert vs[0]['layer'] == '3', vs[0]
    assert acted(Learner(tensor_dls(x / 16, y), _mlp(), loss_func=loss).preflight()) == []   # the logits: quiet

def _one_hot_ce(out, y): return F.cross_entropy(out, y.argmax(1))   # one-hot targets to indices, in a loss of one's own

@pytest.mark.parametrize('loss', [_one_hot_ce, lambda out, y: F.cross_entropy(out, y.argmax(1), label_smoothing=0.1)])
def test_a_softmax_before_a_cross_entropy_of_ones_own_is_named(loss):
    """A loss with no telling name (a function of one's own around `F.cross_entropy`, one-hot targets turned to indices in
    it): its graph takes a `log_softmax` of the output, so the output's softmax is a second one. Before: nothing, the
    loss's kind unknown. Its logits twin and a loss that takes probabilities (`nll_loss` of their log) stay quiet."""
    torch.manual_seed(0)
    x, y = digits_raw()
    t = F.one_hot(y, 10).float()
    vs = acted(Learner(tensor_dls(x / 16, t), _mlp(nn.Softmax(dim=1)), loss_func=loss).preflight())
    assert [(v['check'], v['layer']) for v in vs] == [('output_activation', '3')], vs
    assert acted(Learner(tensor_dls(x / 16, t), _mlp(), loss_func=loss).preflight()) == []
    def log_of_probs(out, t): return F.nll_loss(torch.log(out.clamp_min(1e-7)), t.argmax(1))
    assert acted(Learner(tensor_dls(x / 16, t), _mlp(nn.Softmax(dim=1)), loss_func=log_of_probs).preflight()) == []
