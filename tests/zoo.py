"""A zoo of real and awkward models, each wrapped in a fastai `Learner` with a tiny synthetic dataset.

Real models: torchvision resnet18/resnet50, fastai `tabular_learner`, an AWD_LSTM text classifier and language model
(tied weights), `unet_learner` on a resnet18 body, all with random weights. Awkward models follow torchinfo's test
fixtures: leaves returning tuples, dicts and `None`, a module called twice, a module under two parents, a frozen
BatchNorm in eval, an LSTM fed a `PackedSequence`, a lazy module, a forward that raises, and two inputs.
"""
import numpy as np, pandas as pd, torch, torchvision
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastai.tabular.all import TabularDataLoaders, tabular_learner, Categorify, Normalize
from fastai.text.all import AWD_LSTM, awd_lstm_clas_config, awd_lstm_lm_config, get_text_classifier, get_language_model
from fastai.callback.rnn import RNNCallback
from fastai.vision.all import unet_learner, resnet18

def _gen(seed=0): return torch.Generator().manual_seed(seed)

def dls_from(*xs, y=None, bs=4):
    "fastai `DataLoaders` over tensors `xs` (inputs) and `y` (targets), same data for train and valid"
    n = len(xs[0])
    y = torch.zeros(n, dtype=torch.long) if y is None else y
    items = [tuple(x[i] for x in xs) + (y[i],) for i in range(n)]
    return DataLoaders(DataLoader(items, bs=bs, shuffle=True), DataLoader(items, bs=bs))

def images(n=8, c=3, size=32, seed=0): return torch.randn(n, c, size, size, generator=_gen(seed))

def learner(model, *xs, y=None, bs=4, loss_func=None, cbs=None):
    return Learner(dls_from(*xs, y=y, bs=bs), model, loss_func=loss_func or CrossEntropyLossFlat(), cbs=cbs)

# ---- real models ----
def resnet18_tv(): return learner(torchvision.models.resnet18(num_classes=10), images())
def resnet50_tv(): return learner(torchvision.models.resnet50(num_classes=10), images(size=64))

def tabular():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({'a': rng.choice(['x', 'y', 'z'], 64), 'b': rng.choice(['p', 'q'], 64),
                       'c': rng.normal(size=64), 'd': rng.normal(size=64), 't': rng.choice(['yes', 'no'], 64)})
    dls = TabularDataLoaders.from_df(df, cat_names=['a', 'b'], cont_names=['c', 'd'], y_names='t',
                                     procs=[Categorify, Normalize], bs=16, valid_idx=list(range(48, 64)))
    return tabular_learner(dls, layers=[20, 10])

VOCAB = 40
def tokens(n=8, seq=12, seed=0): return torch.randint(2, VOCAB, (n, seq), generator=_gen(seed))

_small = dict(emb_sz=16, n_hid=24, n_layers=2)

def text_classifier():
    "AWD_LSTM classifier; `RNNCallback` takes the logits out of its `(logits, raw, out)` output, as `TextLearner` does"
    model = get_text_classifier(AWD_LSTM, VOCAB, 2, seq_len=6, config={**awd_lstm_clas_config, **_small})
    return learner(model, tokens(), cbs=RNNCallback())

def language_model():
    "AWD_LSTM language model: the decoder's weight is tied to the embedding's"
    model = get_language_model(AWD_LSTM, VOCAB, config={**awd_lstm_lm_config, **_small})
    return learner(model, tokens(), y=tokens(seed=1), cbs=RNNCallback())

def unet():
    xs, ys = images(n=4, size=32), torch.randint(0, 2, (4, 32, 32), generator=_gen(1))
    dls = dls_from(xs, y=ys, bs=2)
    return unet_learner(dls, resnet18, pretrained=False, n_out=2, loss_func=CrossEntropyLossFlat(axis=1))

# ---- awkward models ----
class TupleOut(nn.Module):
    "A leaf returning a nested tuple, like an LSTM's `(out, (h, c))`"
    def forward(self, x): return x, (x.sum(1), x.mean(1))

class DictOut(nn.Module):
    "A leaf returning a dict"
    def forward(self, x): return {'feat': x, 'norm': x.norm(dim=1)}

class NoneOut(nn.Module):
    "A leaf returning `None` (a logging layer, say)"
    def forward(self, x): return None

class Awkward(nn.Module):
    "Tuple, dict and `None` outputs, and a module called twice"
    def __init__(self):
        super().__init__()
        self.lin,self.tup,self.dic,self.none = nn.Linear(6, 6),TupleOut(),DictOut(),NoneOut()
        self.head = nn.Linear(6, 3)
    def forward(self, x):
        x = self.lin(x)
        x, _ = self.tup(x)
        x = self.dic(x)['feat']
        self.none(x)
        return self.head(torch.relu(self.lin(x)))   # `lin` runs twice

def awkward(): return learner(Awkward(), torch.randn(8, 6, generator=_gen()))

class TwoParents(nn.Module):
    "One module registered under two parents, tied weights, and a parameter held by a container"
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.other = nn.Sequential(self.body[0], nn.Tanh())
        self.dec = nn.Linear(8, VOCAB)
        self.dec.weight = self.emb.weight
        self.scale = nn.Parameter(torch.ones(1))
    def forward(self, x): return self.dec(self.other(self.body(self.emb(x)))).mean(1) * self.scale

def two_parents(): return learner(TwoParents(), tokens())

def frozen_bn():
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    learn = learner(m, images())
    m.train(); m[1].eval(); m[1].weight.requires_grad_(False); m[1].bias.requires_grad_(False)
    return learn

class Packed(nn.Module):
    "An LSTM fed a `PackedSequence`"
    def __init__(self):
        super().__init__()
        self.emb,self.lstm,self.head = nn.Embedding(VOCAB, 8),nn.LSTM(8, 16, batch_first=True),nn.Linear(16, 2)
    def forward(self, x):
        lens = (x > 0).sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(self.emb(x), lens, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.head(h[-1])

def packed():
    x = tokens(); x[:, 8:] = 0; x[0, 4:] = 0
    return learner(Packed(), x)

def lazy(): return learner(nn.Sequential(nn.Flatten(), nn.LazyLinear(5), nn.ReLU(), nn.Linear(5, 2)), images(size=4))

class Raises(nn.Module):
    "A model whose forward raises half-way"
    def __init__(self):
        super().__init__()
        self.conv,self.bn,self.fc = nn.Conv2d(3, 4, 3),nn.BatchNorm2d(4),nn.Linear(7, 2)
    def forward(self, x): return self.fc(self.bn(self.conv(x)).flatten(1))   # 4*30*30 features, not 7

def raises(): return learner(Raises(), images())

class TwoInputs(nn.Module):
    "Images and a bool mask as two inputs (`n_inp=2`)"
    def __init__(self):
        super().__init__()
        self.conv,self.pool,self.fc = nn.Conv2d(3, 4, 3, padding=1),nn.AdaptiveAvgPool2d(1),nn.Linear(4 + 5, 2)
    def forward(self, x, mask): return self.fc(torch.cat([self.pool(self.conv(x)).flatten(1), mask.float()], 1))

def two_inputs():
    mask = torch.rand(8, 5, generator=_gen()) > 0.5
    return learner(TwoInputs(), images(), mask)

ZOO = {f.__name__: f for f in [resnet18_tv, resnet50_tv, tabular, text_classifier, language_model, unet, awkward,
                               two_parents, frozen_bn, packed, lazy, raises, two_inputs]}
"Every zoo model's builder, by name"
RAISES = {'raises'}
"Zoo models whose forward raises"
