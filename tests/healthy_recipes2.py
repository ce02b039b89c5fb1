"""Bug zoo: six more healthy runs (issue 64), each a common way fastai practitioners train, on data built here (no
downloads, random weights): a timm RegNet by name through `vision_learner`, a tiny DistilBERT classifier (Hugging Face
config) behind an `after_pred` callback taking `.logits`, a 1-d CNN on synthetic time series, one-cycle with
`EarlyStoppingCallback` and `SaveModelCallback`, a Siamese network on pairs of digits (two inputs), a model with two
heads (the digit and its parity) under the sum of their losses. The list was written before any of its runs ran under
the tool, and none was left out for what it raised. Each runs 50 training batches or more, in seconds on one CPU core,
and learns (its last losses at most 0.9× its first, at seeds 0 and 1). Every finding above `info` on them is a false
alarm. See `bugzoo.py`."""
import numpy as np
from bugzoo import *
from fastai.losses import CrossEntropyLossFlat, BCEWithLogitsLossFlat
from fastai.metrics import accuracy, accuracy_multi
from healthy_more import _ROOT, HFLogits, digits_image_dls

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle', every=10)
def digits_regnet(fixed):
    """timm's `regnetx_002` (grouped convolutions, random weights) by name through `vision_learner`, on digit PNGs at
    32 px: 90 batches, loss ratio 0.52 and 0.37 at seeds 0 and 1, validation accuracy 0.57 and 0.65, 6 to 8 s"""
    from fastai.vision.all import vision_learner
    return vision_learner(digits_image_dls(size=32), 'regnetx_002', pretrained=False, metrics=accuracy)

@healthy(epochs=6, lr=5e-3, fit='fit_one_cycle')
def distilbert_classifier(fixed):
    """A tiny DistilBERT classifier (Hugging Face config, random weights) behind an `after_pred` callback taking
    `.logits`: whether token 3 occurs anywhere in a sequence of 16 (DistilBERT's head reads the first position's state):
    96 batches, loss ratio 0.002 and 0.005 at seeds 0 and 1, validation accuracy 1.0 (in 4 epochs, seed 1's ratio was
    0.80)"""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    g = torch.Generator().manual_seed(0)
    x,y = torch.randint(4, 60, (640, 16), generator=g),torch.randint(0, 2, (640,), generator=g)
    x[y == 1, torch.randint(0, 16, (int(y.sum()),), generator=g)] = 3
    cfg = DistilBertConfig(vocab_size=60, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32,
                           num_labels=2, dropout=0.1, attention_dropout=0.1, seq_classif_dropout=0.1)
    return Learner(tensor_dls(x, y, bs=32), DistilBertForSequenceClassification(cfg), loss_func=CrossEntropyLossFlat(),
                   cbs=HFLogits(), metrics=accuracy)

def _series(n=1200, length=64, seed=0):
    "`n` noisy series of `length` steps, a sine, a square wave, a sawtooth or a random walk (the class), standardised"
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    y = rng.integers(0, 4, n)
    f,ph = rng.uniform(1 / 20, 1 / 6, (n, 1)),rng.uniform(0, 2 * np.pi, (n, 1))
    w = 2 * np.pi * f * t + ph
    x = np.stack([np.sin(w), np.sign(np.sin(w)), (w / np.pi) % 2 - 1, np.cumsum(rng.normal(0, 0.3, (n, length)), 1)], 1)
    x = x[np.arange(n), y] + rng.normal(0, 0.3, (n, length))
    x = (x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)
    return torch.tensor(x, dtype=torch.float32).unsqueeze(1), torch.tensor(y)

@healthy(epochs=3, lr=3e-3, fit='fit_one_cycle')
def series_cnn1d(fixed):
    """A 1-d CNN (`Conv1d`, BatchNorm, ReLU, global average pooling) classifying synthetic time series into 4 shapes:
    90 batches, loss ratio 0.12 and 0.17 at seeds 0 and 1, validation accuracy 0.99"""
    def block(i, o): return nn.Sequential(nn.Conv1d(i, o, 5, padding=2), nn.BatchNorm1d(o), nn.ReLU(), nn.MaxPool1d(2))
    m = nn.Sequential(block(1, 16), block(16, 32), block(32, 32), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                      nn.Linear(32, 4))
    x,y = _series()
    return Learner(tensor_dls(x, y, bs=32), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=15, lr=1e-2, fit='fit_one_cycle')
def mlp_early_stopping(fixed):
    """One-cycle with `EarlyStoppingCallback` (validation loss, `min_delta` 0.01, patience 3) and `SaveModelCallback`
    (the best epoch's weights reloaded at the end) on an MLP over digits, the models saved in a temporary folder: it
    stopped after 14 and 13 of its 15 epochs (308 and 286 batches) at seeds 0 and 1, loss ratio 0.017 and 0.018,
    validation accuracy 0.98"""
    from fastai.callback.tracker import EarlyStoppingCallback, SaveModelCallback
    x,y = digits_raw()
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    return Learner(tensor_dls(x / 16, y, bs=64), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy, path=_ROOT,
                   cbs=[EarlyStoppingCallback(monitor='valid_loss', min_delta=0.01, patience=3),
                        SaveModelCallback(monitor='valid_loss')])

class _Siamese(nn.Module):
    "One shared encoder on both inputs, a head on the absolute difference of their codes: one logit, same digit or not"
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
        self.head = nn.Linear(32, 1)
    def forward(self, a, b): return self.head((self.enc(a) - self.enc(b)).abs())

@healthy(epochs=4, lr=3e-3, fit='fit_one_cycle')
def digits_siamese(fixed):
    """A Siamese network on pairs of digits (two inputs, a batch `(a, b, same)`), half of them the same digit, under
    `BCEWithLogitsLossFlat`: 160 batches, loss ratio 0.62 and 0.59 at seeds 0 and 1, validation accuracy 0.79"""
    x,y = digits_raw()
    x = x / 16
    g = torch.Generator().manual_seed(0)
    i = torch.randint(0, len(x), (1600,), generator=g)
    same = torch.rand(1600, generator=g) < 0.5
    by = [torch.nonzero(y == c).squeeze(1) for c in range(10)]
    j = torch.tensor([by[int(y[a])][torch.randint(0, len(by[int(y[a])]), (1,), generator=g)].item() if s
                      else int(torch.randint(0, len(x), (1,), generator=g)) for a,s in zip(i.tolist(), same.tolist())])
    t = (y[i] == y[j]).float().unsqueeze(1)
    idx = torch.randperm(1600, generator=g)
    def dl(k, **kw): return DataLoader([(x[i[q]], x[j[q]], t[q]) for q in k.tolist()], bs=32, **kw)
    train = dl(idx[320:], shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    return Learner(DataLoaders(train, dl(idx[:320])), _Siamese(), loss_func=BCEWithLogitsLossFlat(),
                   metrics=accuracy_multi)

class _TwoHeads(nn.Module):
    "A shared CNN body and two heads: the digit (10 logits) and its parity (2 logits)"
    def __init__(self):
        super().__init__()
        def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
        self.body = nn.Sequential(block(1, 16), block(16, 32), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.digit,self.parity = nn.Linear(128, 10),nn.Linear(128, 2)
    def forward(self, x):
        h = self.body(x)
        return self.digit(h), self.parity(h)

def _two_losses(pred, digit, parity):
    "The sum of the two heads' cross-entropies"
    return F.cross_entropy(pred[0], digit) + F.cross_entropy(pred[1], parity)

def _digit_accuracy(pred, digit, parity): return (pred[0].argmax(1) == digit).float().mean()

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def digits_two_heads(fixed):
    """Multi-target: a CNN with two heads (the digit, and odd or even) on digits, the batch `(x, digit, parity)`, its
    loss the sum of the two cross-entropies, the digit's accuracy its metric: 176 batches, loss ratio 0.041 and 0.034 at
    seeds 0 and 1, the digit's validation accuracy 0.98"""
    x,y = digits_raw()
    x = (x / 16).view(-1, 1, 8, 8)
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    def dl(k, **kw): return DataLoader([(x[q], y[q], y[q] % 2) for q in k.tolist()], bs=32, **kw)
    train = dl(idx[360:], shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, dl(idx[:360]))
    dls.n_inp = 1
    return Learner(dls, _TwoHeads(), loss_func=_two_losses, metrics=_digit_accuracy)
