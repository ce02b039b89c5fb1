"""Bug zoo: nine more healthy runs (issue 45's healthy set), each a way practitioners train that the set lacked, on data
built here (no downloads, random weights): PyTorch's own `nn.TransformerEncoder`, a GRU regression under fastai's
`GradientClip`, knowledge distillation (`KLDivLoss` on log-probabilities against a teacher's), Poisson regression of
counts (`PoissonNLLLoss`), SimCLR's contrastive loss on two views of each digit, a Hugging Face `BertModel` under a head
of one's own (its pooler never used, so never given a gradient), a classic MLP with dropout 0.5, a BatchNorm-free CNN
(GroupNorm, SiLU) under PyTorch's SGD with Nesterov momentum and fastai's flat-cosine schedule, and an LSTM tagger whose
padded positions are left out of the loss by `ignore_index`. The list was written before any of its runs ran under
the tool, and none was left out for what it raised. Each runs 50 training batches or more, in seconds on one CPU core,
and learns (its last losses at most 0.9× its first, at seeds 0 and 1). Every finding above `info` on them is a false
alarm. See `bugzoo.py`."""
import numpy as np
from bugzoo import *
from fastai.losses import CrossEntropyLossFlat
from fastai.metrics import accuracy
from fastai.callback.training import GradientClip
from healthy_more import HFLogits

def _tokens(n=800, length=16, vocab=40, seed=0):
    "`n` sequences of tokens 5…`vocab`, labelled 1 where token 3 occurs more often than token 4"
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(5, vocab, (n, length), generator=g)
    for t in (3, 4):
        k = torch.randint(0, 4, (n,), generator=g)
        for i in range(n): x[i, torch.randperm(length, generator=g)[:int(k[i])]] = t
    return x, ((x == 3).sum(1) > (x == 4).sum(1)).long()

class _Encoder(nn.Module):
    "Token and position embeddings, PyTorch's `nn.TransformerEncoder`, the mean over positions, a linear classifier"
    def __init__(self, vocab=40, d=32, length=16):
        super().__init__()
        self.emb,self.pos = nn.Embedding(vocab, d),nn.Parameter(torch.randn(1, length, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 2, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.enc,self.head = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),nn.Linear(d, 2)
    def forward(self, x): return self.head(self.enc(self.emb(x) + self.pos).mean(1))

@healthy(epochs=6, lr=3e-3, fit='fit_one_cycle')
def transformer_encoder_classifier(fixed):
    "PyTorch's `nn.TransformerEncoder` (2 layers, 2 heads) classifying token sequences: is token 3 there more than 4?"
    x,y = _tokens()
    return Learner(tensor_dls(x, y, bs=32), _Encoder(), loss_func=CrossEntropyLossFlat(), metrics=accuracy)

class _GRUSum(nn.Module):
    "A GRU over a sequence of numbers, a linear read-out of its last state"
    def __init__(self):
        super().__init__()
        self.rnn,self.out = nn.GRU(1, 32, batch_first=True),nn.Linear(32, 1)
    def forward(self, x): return self.out(self.rnn(x.unsqueeze(-1))[0][:, -1])

@healthy(epochs=5, lr=1e-2, fit='fit_one_cycle')
def gru_sum_regression_clipped(fixed):
    "A GRU regressing the sum of 20 numbers from N(0, 1), scaled by 1/√20, under MSE and fastai's `GradientClip(0.5)`"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 20, generator=g)
    y = (x.sum(1, keepdim=True) / 20 ** 0.5)
    return Learner(tensor_dls(x, y, bs=32), _GRUSum(), loss_func=nn.MSELoss(), cbs=GradientClip(0.5))

def _distil_loss(pred, y, teacher, T=4., alpha=0.7):
    "Hinton's distillation loss: `KLDivLoss` between the softened student and teacher, times T², plus cross-entropy"
    kl = F.kl_div(F.log_softmax(pred / T, 1), F.softmax(teacher / T, 1), reduction='batchmean') * T * T
    return alpha * kl + (1 - alpha) * F.cross_entropy(pred, y)

def _digits_student(): return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def knowledge_distillation(fixed):
    """A small MLP distilled from a wider one trained first on the digits (plain PyTorch, 60 Adam steps): each batch is
    `(x, label, teacher's logits)`"""
    x,y = digits_raw()
    x = x / 16
    g = torch.Generator().manual_seed(1)
    teacher = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(teacher.parameters(), 1e-2)
    for _ in range(60):
        i = torch.randint(0, len(x), (128,), generator=g)
        opt.zero_grad(); F.cross_entropy(teacher(x[i]), y[i]).backward(); opt.step()
    with torch.no_grad(): tl = teacher(x)
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    def dl(k, **kw): return DataLoader([(x[q], y[q], tl[q]) for q in k.tolist()], bs=32, **kw)
    train = dl(idx[360:], shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, dl(idx[:360]))
    dls.n_inp = 1
    return Learner(dls, _digits_student(), loss_func=_distil_loss)

@healthy(epochs=5, lr=3e-3, fit='fit_one_cycle')
def poisson_counts(fixed):
    """Counts from a Poisson whose log-rate is a smooth function of 8 features, an MLP giving the log-rate, under
    `nn.PoissonNLLLoss(log_input=True)`"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1200, 8, generator=g)
    rate = torch.exp(0.5 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * torch.tanh(x[:, 2] * x[:, 3]) + 1.)
    y = torch.poisson(rate, generator=g).unsqueeze(1)
    m = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    return Learner(tensor_dls(x, y, bs=32), m, loss_func=nn.PoissonNLLLoss(log_input=True))

class _TwoViews(nn.Module):
    "SimCLR's set-up: one encoder and projection head on both views; the output is both views' codes, stacked"
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
        self.proj = nn.Sequential(nn.ReLU(), nn.Linear(64, 32))
    def forward(self, a, b): return torch.stack([self.proj(self.enc(a)), self.proj(self.enc(b))], 1)

def _nt_xent(z, y, t=0.5):
    "SimCLR's NT-Xent: each view's positive is the other view of its image, among the batch's 2N−1 other codes"
    z = F.normalize(z.flatten(0, 1), dim=1)
    n = len(z)
    s = (z @ z.t() / t).masked_fill(torch.eye(n, dtype=torch.bool, device=z.device), -1e9)
    return F.cross_entropy(s, torch.arange(n, device=z.device) ^ 1)

@healthy(epochs=4, lr=3e-3, fit='fit_one_cycle')
def simclr_digits(fixed):
    """Self-supervised: SimCLR's contrastive loss on two augmented views of each digit (pixel noise, a random shift of
    one pixel), no labels used in the loss"""
    x,y = digits_raw()
    x = (x / 16).view(-1, 8, 8)
    g = torch.Generator().manual_seed(0)
    def view():
        s = torch.randint(-1, 2, (len(x), 2), generator=g)
        v = torch.stack([torch.roll(im, (int(a), int(b)), (0, 1)) for im,(a,b) in zip(x, s)])
        return (v + 0.1 * torch.randn(v.shape, generator=g)).flatten(1)
    a,b = view(),view()
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    def dl(k, **kw): return DataLoader([(a[q], b[q], y[q]) for q in k.tolist()], bs=64, **kw)
    train = dl(idx[320:], shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    return Learner(DataLoaders(train, dl(idx[:320], drop_last=True)), _TwoViews(), loss_func=_nt_xent)

class _BertHead(nn.Module):
    "A Hugging Face `BertModel` (its pooler kept, as `from_pretrained` builds it) and a head of one's own on `[CLS]`"
    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=32)
        self.bert,self.drop,self.head = BertModel(cfg),nn.Dropout(0.1),nn.Linear(32, 2)
    def forward(self, x): return self.head(self.drop(self.bert(input_ids=x).last_hidden_state[:, 0]))

@healthy(epochs=8, lr=3e-3, fit='fit_one_cycle')
def bert_own_head_pooler_unused(fixed):
    """A `BertModel` under a classifier of one's own on the `[CLS]` position's last hidden state: the model's pooler
    is never used, so it gets no gradient, as in many fine-tuning scripts"""
    x,y = _tokens()
    return Learner(tensor_dls(x, y, bs=32), _BertHead(), loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=8, lr=3e-3, fit='fit_one_cycle')
def mlp_dropout_half(fixed):
    "The classic MLP with dropout 0.5 after each hidden layer (Hinton et al.), on the digits"
    x,y = digits_raw()
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(256, 10))
    return Learner(tensor_dls(x / 16, y, bs=32), m, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=4, lr=5e-2, fit='fit_flat_cos')
def groupnorm_cnn_nesterov(fixed):
    """A CNN without BatchNorm (GroupNorm of 4 groups, SiLU) on the digits, under PyTorch's SGD with Nesterov momentum
    0.9 through `OptimWrapper`, fastai's flat-then-cosine schedule"""
    x,y = digits_raw()
    def block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU())
    m = nn.Sequential(block(1, 16), block(16, 32), nn.MaxPool2d(2), block(32, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(32, 10))
    return Learner(tensor_dls((x / 16).view(-1, 1, 8, 8), y, bs=32), m, loss_func=CrossEntropyLossFlat(),
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, nesterov=True), metrics=accuracy)

class _Tagger(nn.Module):
    "An embedding (index 0 the padding), a bidirectional LSTM, a tag for each position"
    def __init__(self, vocab=30, tags=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, 32, padding_idx=0)
        self.rnn,self.out = nn.LSTM(32, 32, batch_first=True, bidirectional=True),nn.Linear(64, tags)
    def forward(self, x): return self.out(self.rnn(self.emb(x))[0])

@healthy(epochs=6, lr=1e-2, fit='fit_one_cycle')
def lstm_tagger_padded(fixed):
    """Sequence tagging: sentences of 4 to 20 tokens padded to 20 with token 0, each token tagged by its word class
    (tokens 1–9, 10–19, 20–29) unless it follows token 1 (then tag 0); padded positions tagged −100, which
    `CrossEntropyLossFlat`'s `ignore_index` leaves out of the loss"""
    g = torch.Generator().manual_seed(0)
    n,L = 1000,20
    x = torch.randint(1, 30, (n, L), generator=g)
    t = x // 10
    t[:, 1:][x[:, :-1] == 1] = 0
    lens = torch.randint(4, L + 1, (n,), generator=g)
    pad = torch.arange(L)[None] >= lens[:, None]
    x[pad],t[pad] = 0,-100
    return Learner(tensor_dls(x, t, bs=32), _Tagger(), loss_func=CrossEntropyLossFlat(ignore_index=-100, axis=-1))
