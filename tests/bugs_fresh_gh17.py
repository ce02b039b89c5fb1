"""Bug zoo, a seventeenth GitHub family (issue 45): from the issues of PyTorch's reference training code
(pytorch/examples, pytorch/vision's references), of fastai and of fastai's book, at threads no other family cites. See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever run under
the tool. Cases were chosen for how common the bug is (a language model's decoder left returning raw logits under
`NLLLoss`, an exponential moving average of the weights that leaves the BatchNorm statistics of its copy at their
initial values, a time-series split whose training set holds sales made after the validation period, a `Normalize`
given to the training DataLoader only), never for whether the tool catches it. The EMA copy is used only to validate
(its statistics are never seen in training), and the leaky split leaves every statistic of training healthy: their
docstrings say so. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows
its thread's symptom, and its fixed twin trains."""
import copy, random
from fastai.callback.core import Callback
from fastai.callback.training import GradientClip
from fastai.metrics import accuracy, rmse
from bugzoo import *
from bugs_data import _gen, _dls


# ---- the output and the loss: NLLLoss on a decoder's raw logits ----
_V, _BPTT = 30, 35   # vocabulary, the sequence length (the example's `--bptt`)

def _markov_text(n_seq=600, seed=0):
    """A synthetic corpus: a Markov chain over 30 tokens whose every token is followed by one of 3 successors (chosen
    per token) with probabilities 0.6, 0.3, 0.1; `n_seq` sequences of 36 tokens, each its own walk. Returns the inputs
    and the next-token targets, `(n_seq, 35)` each"""
    g = _gen(seed)
    succ = torch.stack([torch.randperm(_V, generator=g)[:3] for _ in range(_V)])
    p = torch.tensor([0.6, 0.3, 0.1])
    seq = torch.empty(n_seq, _BPTT + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, _V, (n_seq,), generator=g)
    for t in range(_BPTT):
        k = torch.multinomial(p, n_seq, replacement=True, generator=g)
        seq[:, t + 1] = succ[seq[:, t], k]
    return seq[:, :-1], seq[:, 1:]

class _RNNModel(nn.Module):
    """word_language_model's `RNNModel`, scaled down: an embedding, an LSTM, dropout, a linear decoder over the
    vocabulary. As the bug had it (after the example dropped `CrossEntropyLoss` for `NLLLoss`) the decoder's raw logits
    are returned; as fixed (#732) their `log_softmax`"""
    def __init__(self, ntoken=_V, ninp=32, nhid=64, dropout=0.2, log_softmax=True):
        super().__init__()
        self.encoder, self.rnn = nn.Embedding(ntoken, ninp), nn.LSTM(ninp, nhid, batch_first=True)
        self.drop, self.decoder, self.log_softmax = nn.Dropout(dropout), nn.Linear(nhid, ntoken), log_softmax
    def forward(self, x):
        out = self.decoder(self.drop(self.rnn(self.drop(self.encoder(x)))[0]))
        return F.log_softmax(out, -1) if self.log_softmax else out

def _flat_nll(out, y): return F.nll_loss(out.reshape(-1, out.shape[-1]), y.reshape(-1))

@case("https://github.com/pytorch/examples/issues/734",
      "the word language model's `RNNModel` returns the decoder's raw logits but the loss is `NLLLoss`, which wants "
      "log-probabilities: the loss is minus the target's logit, falls below zero without bound, the perplexity to 0",
      {'output_activation', 'loss_at_init'}, layer='decoder', epochs=6, lr=20.)
def word_lm_nll_on_raw_logits(fixed):
    """'Wrong loss values and perplexity reported in word language model example': 'I get negative loss and 0
    perplexity. My guess it is because the `nn.NLLoss` is being used ... instead of the `nn.CrossEntropyLoss`'; the
    maintainer: '#732 fixes the error' (merged: 'After removal of the CrossEntropyLoss, loss calculation for RNN is
    broken. Currently it's taking NLLLoss of direct RNN output (not the LogSoftmax), resulting in negative losses'; the
    fix makes `RNNModel` return `log_softmax` of the decoder's output). `NLLLoss` on raw logits is minus the mean logit
    of the targets: unbounded below, so every step raises the target logits (the others get no gradient at all) and the
    loss runs off towards minus infinity; `exp` of it, the perplexity, goes to 0. Ported: a synthetic corpus (a Markov
    chain over 30 tokens, each followed by one of 3 successors), 600 sequences of 35 tokens, the example's model scaled
    down (embeddings of 32, an LSTM of 64, dropout 0.2, a linear decoder), its optimiser (plain SGD at lr 20, gradients
    clipped to a norm of 0.25), batches of 20; the hidden state is not carried across batches (each sequence is its own
    walk); the twin's model returns `log_softmax`, as #732 does. Measured (seeds 0 and 1) over 6 epochs (144 steps): the
    first batch loss is -0.04 and -0.02 (chance would be ln 30 = 3.40), and it falls by nearly 9 a step, to -1260 and
    -1252 at the last batch; the validation loss is -195 and -186 after the first epoch and -1268 and -1259 after the
    sixth (the perplexity `exp` of it 0, as reported); the model has learnt little (its most likely next token is right
    for 0.106 of the validation tokens at both seeds); the twin's batch losses start at 3.42 and 3.41 and end at 0.61
    and 0.60 of their first, its validation loss 0.98 and 1.01 (the chain's entropy is 0.90), its next token right for
    0.57 and 0.54 (0.60 at best)"""
    x, y = _markov_text()
    return Learner(tensor_dls(x, y, bs=20), _RNNModel(log_softmax=fixed), loss_func=_flat_nll,
                   opt_func=torch_opt(torch.optim.SGD), cbs=[GradientClip(0.25)])


# ---- evaluation: an EMA of the weights whose BatchNorm statistics are never averaged ----
def _bn_mlp(d=64, hidden=128, n_out=10, depth=3):
    "An MLP of `depth` Linear-BatchNorm-ReLU blocks and a linear head"
    layers, i = [], d
    for _ in range(depth): layers += [nn.Linear(i, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]; i = hidden
    return nn.Sequential(*layers, nn.Linear(hidden, n_out))

class _EMA(nn.Module):
    """The classification reference's `ExponentialMovingAverage` as #4381 made it, scaled down: a deep copy of the
    network whose weights follow `decay·avg + (1 - decay)·param` after each step (`AveragedModel.update_parameters` of
    PyTorch 1.9, which averaged `parameters()` only and left the copy's buffers as they were copied; PyTorch now keeps
    them in sync). As the bug had it only the parameters are averaged; as fixed (#4406) the whole state dict,
    BatchNorm's running statistics included (PyTorch's `use_buffers=True` today)"""
    def __init__(self, net, decay=0.99, buffers=True):
        super().__init__()
        self.module, self.decay, self.buffers_too = copy.deepcopy(net).requires_grad_(False), decay, buffers
    def forward(self, x): return self.module(x)
    @torch.no_grad()
    def update_parameters(self, net):
        pairs = (zip(self.module.state_dict().values(), net.state_dict().values()) if self.buffers_too
                 else zip(self.module.parameters(), net.parameters()))
        for avg, p in pairs:
            if avg.is_floating_point(): avg.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
            else: avg.copy_(p)

class _WithEMA(nn.Module):
    """The reference's `--model-ema`: the network trains, its `_EMA` is what is evaluated (in training the network
    answers, in evaluation its average); the average's copies of the parameters take no gradient"""
    def __init__(self, net, decay=0.99, buffers=True):
        super().__init__()
        self.net, self.ema = net, _EMA(net, decay, buffers)
    def forward(self, x): return self.net(x) if self.training else self.ema(x)

class _UpdateEMA(Callback):
    "The reference's `model_ema.update_parameters(model)` after each optimiser step"
    def after_step(self): self.learn.model.ema.update_parameters(self.learn.model.net)

@case("https://github.com/pytorch/vision/issues/4391",
      "the classification reference's EMA of the weights averages the parameters only: its BatchNorm layers keep the "
      "running statistics of the initial copy, and the EMA model that is evaluated scores far below the network",
      {'eval_stats_stale'}, epochs=6, lr=0.1)
def ema_without_batchnorm_buffers(fixed):
    """'Investigate Exponential Moving Average result in classification script': the maintainer's run with `--model-ema`
    printed, epoch after epoch, the model's accuracy rising ('Acc@1 5.300', '16.598', '24.016' ...) and the EMA model's
    at chance ('Acc@1 0.126', '0.120', '0.122' ... on 1,000 classes); the fix, #4406 'Added update_parameters to EMA to
    fix calculation' ('Resolves #4391'), averages the whole state dict, BatchNorm's running means and variances included
    (the reviewer: 'Ideally the base class should include all state not just the params'; PyTorch's `AveragedModel` has
    since gained `use_buffers`). `AveragedModel` deep-copies the network once and, without its buffers, its BatchNorm
    layers normalise with the statistics of that copy (mean 0, variance 1) for ever, while the averaged weights expect
    the real ones. Nothing is wrong in training: the network the optimiser sees is healthy; only the copy that is
    evaluated normalises with stale statistics. Ported: the digits (pixels in [0, 1], as `ToTensor` gives them), an MLP
    of three Linear-BatchNorm-ReLU blocks of 128 and a head, SGD with momentum 0.9 at 0.1, batches of 32, an EMA of
    decay 0.99 updated after each step and used for validation; the twin averages the buffers too (`use_buffers=True`).
    Measured (seeds 0 and 1) over 6 epochs (264 steps): training is the same step for step in both (the batch losses end
    at 0.064 and 0.045 of their first), and the network itself scores 0.961 and 0.986 on the validation digits; the EMA
    that is validated keeps running means of 0 and variances of 1 in its BatchNorm layers (the network's first layer has
    means of 0.37 and 0.41 in magnitude, variances 0.26 and 0.27), and its validation accuracy is 0.76 and 0.56 after
    the sixth epoch (falling from 0.86 and 0.65 at its best), its validation loss rising from 0.78 and 1.19 to 0.97 and
    2.20; the twin's EMA scores 0.992 and 0.986, its validation loss 0.053 and 0.050. Not the thread's chance with three
    BatchNorm layers (a ResNet has dozens): a large gap all the same"""
    x, y = digits_raw()
    model = _WithEMA(_bn_mlp(), buffers=fixed)
    return Learner(tensor_dls(x / 16, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), cbs=[_UpdateEMA()])


# ---- the split: a time series whose training set runs past its validation period ----
def _auctions(n=4000, seed=0):
    """Synthetic auction sales over 40 months (January of year 0 to April of year 3, as the bulldozers run to April
    2012): each sale has 6 machine attributes (N(0, 1)), its year, month and elapsed month; its log price is a fixed
    function of the attributes, plus a market level, plus noise of 0.1. The market rises by 0.02 a month until October
    of year 2, then turns down by 0.12 a month (a downturn, as markets have), with monthly wobbles of 0.03. Returns the
    inputs (the attributes, the month standardised, the elapsed months standardised), the log prices `(n, 1)`, and the
    sales' years and months"""
    g = _gen(seed)
    t = torch.randint(0, 40, (n,), generator=g)
    year, month = t // 12, t % 12 + 1
    m = torch.arange(40).float()
    level = torch.where(m <= 33, 0.02 * m, 0.66 - 0.12 * (m - 33)) + 0.03 * torch.randn(40, generator=g)
    a = torch.randn(n, 6, generator=g)
    w = torch.randn(6, generator=g) * 0.5
    y = a @ w + 0.3 * torch.tanh(a[:, 0] * a[:, 1]) + level[t] - 0.5 + 0.1 * torch.randn(n, generator=g)
    x = torch.cat([a, ((month.float() - 6.5) / 3.5)[:, None], ((t.float() - 19.5) / 11.5)[:, None]], 1)
    return x, y[:, None], year, month

@case("https://github.com/fastai/fastbook/issues/325",
      "the bulldozers' time split keeps in training every sale of a month before October, of any year: the sales of "
      "January to April of the last year, after the validation period, are trained on, and validation is too kind",
      {'future_leak'}, epochs=8, lr=3e-3)
def time_split_trains_on_later_sales(fixed):
    """'09_tabular: wrong splitting of training/validation set': 'The validation set of the bulldozer dataset is
    supposed to contain the six-month period from November 2011 to April 2012. However, the split condition in the book
    does not do this: `cond = (df.saleYear<2011) | (df.saleMonth<10)`. This moves only the last three months of 2011
    into the validation set, and January to April 2012 are used as training data. This leads to a unfairly improved
    performance for both the random forest and the neural network!'; Jeremy Howard: 'Many thanks - we'll aim to fix this
    if we do a 2nd edition of the book' (a reader: 'It's a pretty big error (leakage)'); the fix, PR #337, keeps in
    training only the sales before November 2011 (not merged, as it changes the chapter's conclusions, which is the
    point). A model validated on months that lie between its training months interpolates the market of the validation
    period from both sides, and its validation error says nothing of how it will predict the future. Every statistic of
    training is healthy: only which rows are in which split is wrong. Ported: 4,000 synthetic sales over 40 months (year
    0 to April of year 3; a log price from 6 machine attributes plus a market level that moves month by month, rising,
    then turning down from November of year 2: the port puts a change of the market at the start of the intended
    validation period, so that what the later sales teach matters), the book's inputs (the attributes, the sale month
    and the elapsed months), an MLP (8-200-100-1, as the book's `layers=[500,250]` scaled down), mean squared error,
    Adam at 3e-3, batches of 64; the bug's split is the book's (validation: October to December of year 2), the twin's
    PR #337's (validation: November of year 2 to April of year 3, training: every earlier sale). Measured (seeds 0 and
    1; the data drawn with seed 0): the bug's split trains on 3,693 sales, 378 of them after the validation period, and
    validates on 307; the twin's trains on 3,420 and validates on 580. Both train (batch losses ending at 0.31 and 0.31
    of their first for the bug, 0.39 and 0.44 for the twin); the bug's validation RMSE is 0.19 and 0.16 after the eighth
    epoch (0.16 to 0.21 over the last five), the twin's 0.59 and 0.57 (0.53 to 0.64): the book's split reports an error
    a third of that of predicting the months after the training data. On the two months both splits validate on
    (November and December of year 2), the bug's model, which has seen the sales after them, errs by 0.22 and 0.17, the
    twin's by 0.25 and 0.24"""
    x, y, year, month = _auctions()
    train = (year < 2) | ((year == 2) & (month < 11)) if fixed else (year < 2) | (month < 10)
    model = nn.Sequential(nn.Linear(8, 200), nn.ReLU(), nn.Linear(200, 100), nn.ReLU(), nn.Linear(100, 1))
    return Learner(_dls(x[train], y[train], x[~train], y[~train], bs=64), model, loss_func=nn.MSELoss(),
                   metrics=rmse, opt_func=torch_opt(torch.optim.Adam))


# ---- the validation inputs: a Normalize that only the training DataLoader got ----
def _image_dls(x, y, normalise_valid, bs=64, valid_pct=0.2, seed=0):
    """fastai `DataLoaders` over images `x` and labels `y`, split at random (`seed`), with `Normalize` (the training
    images' mean and standard deviation) as the training loader's `after_batch`, and as the validation loader's only if
    `normalise_valid`"""
    idx = torch.randperm(len(x), generator=_gen(seed))
    n = int(len(x) * valid_pct)
    tr, va = idx[n:], idx[:n]
    mean, std = x[tr].mean(), x[tr].std()
    def norm(b): return ((b[0] - mean) / std, *b[1:])
    def items(i): return [(x[j], y[j]) for j in i.tolist()]
    train = DataLoader(items(tr), bs=bs, shuffle=True, drop_last=True, after_batch=norm)
    train.rng = random.Random(seed)
    valid = DataLoader(items(va), bs=bs, **({'after_batch': norm} if normalise_valid else {}))
    return DataLoaders(train, valid)

def _small_cnn(n_out=10):
    "A small CNN for 8×8 images: three Conv-BatchNorm-ReLU blocks, average pooling, a BatchNorm head"
    def block(i, o, s): return [nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 16, 1), *block(16, 32, 2), *block(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.BatchNorm1d(64), nn.Linear(64, n_out))

@case("https://github.com/fastai/fastai/issues/3281",
      "`cnn_learner(normalize=True)` adds `Normalize` to the training DataLoader only: the network trains on "
      "normalised images and is validated on raw ones",
      {'valid_input_shift'}, epochs=5, lr=3e-3, fit='fit_one_cycle')
def learner_normalizes_training_set_only(fixed):
    """'Normalizing through the Learner only normalizes the training set': 'When passing `normalize=True` to a
    `cnn_learner` and not normalizing the DataLoaders, fastai doesn't normalize the validation set' (with a notebook,
    and `show_results` showing gray images as a result); the reporter found it fixed on GitHub's master by PR #3268
    (another user: 'I encountered the same issue when using fastai in kaggle kernel (2.2.7)'). The PR: 'Previously
    dls.train.after_batch.fs == dls.valid.after_batch.fs, so adding a transform to the training dataloader automatically
    added it to the validation dataloader. Removing that requirement caused validation to break'; it adds
    `DataLoaders.add_tfms`, which gives the transforms to every loader. In 2.2.7 `Normalize.from_stats` went into the
    training DataLoader's `after_batch` alone, so the validation images reached the network in the scale of the raw
    pixels while it had learnt on standardised ones. Nothing is wrong in training itself. Ported: the digits as 1×8×8
    images with pixels in [0, 1] (as `IntToFloatTensor` gives them), `Normalize` with the training images' mean and
    standard deviation (0.31 and 0.38; the port has no pretrained statistics), a small CNN with BatchNorm (three
    Conv-BN-ReLU blocks of 16, 32, 64 channels, pooling, a BatchNorm head, as `cnn_learner`'s), `fit_one_cycle` at 3e-3
    for 5 epochs, batches of 64; the bug normalises the training loader only, the twin both. Measured (seeds 0 and 1):
    training is the same step for step in both (110 steps, the batch losses ending at 0.025 and 0.021 of their first);
    the bug's validation accuracy is 0.24 and 0.60 after the fifth epoch (0.18 to 0.25 and 0.56 to 0.73 over the five),
    its validation loss 1.95 and 1.16 against a last training loss near 0.05; the twin's validation accuracy is 0.989
    and 0.981, its validation loss 0.094 and 0.092"""
    x, y = digits_raw()
    return Learner(_image_dls((x / 16).view(-1, 1, 8, 8), y, normalise_valid=fixed), _small_cnn(),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))
