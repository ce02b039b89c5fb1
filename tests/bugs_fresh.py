"""Bug zoo, family 5 (issue 45): a fresh set of real reports, gathered after the other families' misses had been studied, so
that the zoo keeps a measure nobody here has tuned on. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`,
`layer`) was written before the case was ever run under the tool. Cases were chosen for how common the bug is (loss and
activation pairings, learning rates, unscaled data, labels, shapes that broadcast, parameters the optimiser never sees,
`zero_grad`, evaluation modes), never for whether the tool catches it. Several leave every per-layer statistic healthy
(labels permuted, masks left unflipped, dropout left on at validation, layers kept in a Python list): their docstrings say so.

Its cases are in two files: this one (the output, loss and targets; evaluation modes; the data) and `bugs_fresh_loop.py`
(optimisation and the training loop, and a second pass)."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _blobs, _tiny_unet
from bugs_optim import _markov_text, _lm_dls

def _gen(seed=0): return torch.Generator().manual_seed(seed)

def _pixels():
    "The digits as `ToTensor` gives MNIST: `(n, 64)` floats from 0 to 1, integer labels"
    x, y = digits_raw()
    return x / 16, y


# ---- the output, the loss and the targets ----
@case("https://discuss.pytorch.org/t/cross-entropy-loss-is-not-decreasing/43814",
      "an MNIST MLP ends in a softmax and trains under `nn.CrossEntropyLoss`, which applies its own: the loss sits near 2.30",
      {'output_activation'}, layer='5', epochs=4, lr=1e-3)
def mnist_mlp_softmax_into_cross_entropy(fixed):
    """The thread's posters fed `softmax(out)` of a ReLU MLP to `nn.CrossEntropyLoss` and saw the loss stay at 2.30 (chance
    for 10 classes); the accepted answers: pass the logits, the loss applies the softmax. Ported on the digits scaled as
    `ToTensor` scales MNIST, two hidden ReLU layers, Adam"""
    x, y = _pixels()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10),
                          *([] if fixed else [nn.Softmax(dim=1)]))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _clicks(n=8000, n_users=100, n_items=50, k=4, seed=0):
    "Implicit feedback: `(user, item)` pairs and a 0/1 click drawn from the sigmoid of a low-rank affinity"
    g = _gen(seed)
    u, v = torch.randn(n_users, k, generator=g), torch.randn(n_items, k, generator=g)
    x = torch.stack([torch.randint(0, n_users, (n,), generator=g), torch.randint(0, n_items, (n,), generator=g)], 1)
    p = torch.sigmoid(2.5 * (u[x[:, 0]] * v[x[:, 1]]).sum(1))
    return x, (torch.rand(n, generator=g) < p).float().unsqueeze(1)

class _TwoTower(nn.Module):
    "Merlin's kind of model: user and item embeddings, an MLP block, a `BinaryOutput` head (a linear unit, then `act`)"
    def __init__(self, n_users=100, n_items=50, dim=16, sigmoid=True):
        super().__init__()
        self.user, self.item = nn.Embedding(n_users, dim), nn.Embedding(n_items, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head, self.act = nn.Linear(32, 1), (nn.Sigmoid() if sigmoid else nn.Identity())
    def forward(self, x): return self.act(self.head(self.mlp(torch.cat([self.user(x[:, 0]), self.item(x[:, 1])], 1))))

@case("https://github.com/NVIDIA-Merlin/models/pull/1175",
      "Merlin's `BinaryOutput` ends in a sigmoid while its default loss is `BCEWithLogitsLoss`: the sigmoid is applied twice",
      {'output_activation'}, layer='act', epochs=3, lr=1e-2)
def binary_output_sigmoid_twice(fixed):
    """'Currently it's `BCEWithLogitsLoss` which means we apply sigmoid twice'; the merged fix makes the default `BCELoss`. The
    twin here keeps the loss on logits and drops the sigmoid (the same pairing). A two-tower click model on synthetic
    implicit feedback, Adam at 1e-2 (the PR gives no learning rate)"""
    x, y = _clicks()
    return Learner(tensor_dls(x, y, bs=128), _TwoTower(sigmoid=not fixed), loss_func=nn.BCEWithLogitsLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

class _LabelLSTM(nn.Module):
    "Obj-GAN's label decoder, scaled down: an embedding, an LSTM, a linear layer to the labels, then `out_act`"
    def __init__(self, vocab=100, emb=32, hid=64, log=False):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, emb), nn.LSTM(emb, hid, batch_first=True), nn.Linear(hid, vocab)
        self.out_act = nn.LogSoftmax(-1) if log else nn.Softmax(-1)
    def forward(self, x): return self.out_act(self.out(self.rnn(self.emb(x))[0]))

@case("https://github.com/jamesli1618/Obj-GAN/issues/30",
      "the box generator's label loss is `NLLLoss` on a softmax, not a log-softmax: the loss is -P, always negative",
      {'output_activation'}, layer='out_act', epochs=2, lr=1e-3)
def label_decoder_nll_on_softmax(fixed):
    """'before use NLLLoss you just use softmax function without torch.log, so the value of lloss is always a negative
    number'; the users who reproduced the paper corrected the label loss from -P to -log P. An LSTM predicting the next label
    of a layout sequence (a synthetic Markov chain over 100 labels), Adam"""
    def nll(out, y): return F.nll_loss(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return Learner(_lm_dls(_markov_text()), _LabelLSTM(log=fixed), loss_func=nll, opt_func=torch_opt(torch.optim.Adam))

def _amplitudes(n=1200, length=64, seed=0):
    "Univariate series `(n, 1, length)`: noisy sines; the target is each one's amplitude, `(n,)` as a 1-d array of labels"
    g = _gen(seed)
    amp, freq, phase = 0.5 + 2 * torch.rand(n, 1, generator=g), 0.05 + 0.2 * torch.rand(n, 1, generator=g), 6.3 * torch.rand(n, 1, generator=g)
    t = torch.arange(length).float()
    x = amp * torch.sin(6.283 * freq * t + phase) + 0.3 * torch.randn(n, length, generator=g)
    return x.unsqueeze(1), amp.squeeze(1)

@case("https://github.com/timeseriesAI/tsai/issues/22",
      "a time-series regressor's outputs are `(16, 1)`, its targets `(16,)`: `MSELoss` broadcasts them to `(16, 16)`",
      {'target_shape', 'output_shape'}, epochs=3, lr=1e-3, fit='fit_one_cycle')
def series_regression_target_broadcast(fixed):
    """The tsai user got 'Using a target size (torch.Size([16])) that is different to the input size (torch.Size([16, 1]))'
    during `fit_one_cycle` and suspected the model was not training; the maintainer: give target and output the same
    shape. A small convolutional regressor (InceptionTime's kind, scaled down) on noisy sines, batches of 16"""
    x, y = _amplitudes()
    model = nn.Sequential(nn.Conv1d(1, 32, 7, padding=3), nn.BatchNorm1d(32), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2),
                          nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 1))
    return Learner(tensor_dls(x, y.unsqueeze(1) if fixed else y, bs=16), model, loss_func=nn.MSELoss())

class _CCSRegressor(nn.Module):
    "The tutorial's CCS model, scaled down: residue embeddings, an LSTM, a linear output, then `out_act` (a ReLU in the report)"
    def __init__(self, relu=True):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(21, 16, padding_idx=0), nn.LSTM(16, 32, batch_first=True)
        self.out, self.out_act = nn.Linear(32, 1), (nn.ReLU() if relu else nn.Identity())
    def forward(self, x): return self.out_act(self.out(self.rnn(self.emb(x))[0][:, -1]))

def _peptides(n=2000, length=12, seed=0):
    "Peptides (residue ids 1..20, left-padded with 0) and a collisional cross section (residue weights plus length) over its mean"
    g = _gen(seed)
    w = torch.rand(21, generator=g); w[0] = 0
    lens = torch.randint(6, length + 1, (n,), generator=g)
    x = torch.randint(1, 21, (n, length), generator=g)
    x[torch.arange(length) < (length - lens).unsqueeze(1)] = 0
    ccs = w[x].sum(1) + 0.3 * lens
    return x, (ccs / ccs.mean()).unsqueeze(1)

@case("https://github.com/ProteomicsML/ProteomicsML/pull/203",
      "an LSTM regressor of ion mobility ends in a ReLU: its pre-activation is negative and it returns 0 for every peptide",
      {'output_activation', 'dead', 'constant_output'}, layer='out_act', epochs=4, lr=1e-3)
def ccs_regressor_relu_output(fixed):
    """'I got LSTM network returning constantly 0 for all peptides in validation set. The reason seems to be using ReLU
    activation at the final linear layer. In case of unlucky initialization the (pre-ReLU) output ... can be always or almost
    always negative'; the PR drops the ReLU. An LSTM on synthetic peptides, CCS values over their mean (all positive), MSE,
    Adam; the output bias starts at -2 here, the unlucky initialisation the report describes"""
    torch.manual_seed(0)
    model = _CCSRegressor(relu=not fixed)
    with torch.no_grad(): model.out.bias.fill_(-2.)
    x, y = _peptides()
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))


# ---- evaluation modes ----
class _ScratchDropoutMLP(nn.Module):
    "d2l's dropout MLP from scratch: dropout 0.2 and 0.5 after the hidden layers, on only when training (`train_flag`) or always"
    def __init__(self, always=True):
        super().__init__()
        self.always, self.lin1, self.lin2, self.lin3 = always, nn.Linear(64, 256), nn.Linear(256, 256), nn.Linear(256, 10)
    def forward(self, x):
        on = True if self.always else self.training
        h = F.dropout(F.relu(self.lin1(x)), 0.2, training=on)
        return self.lin3(F.dropout(F.relu(self.lin2(h)), 0.5, training=on))

@case("https://github.com/d2l-ai/d2l-en/issues/1093",
      "the from-scratch dropout MLP keeps its own `is_training` flag constant: dropout stays on when the test accuracy is measured",
      {'train_mode_in_eval', 'eval_nondeterministic'}, epochs=5, lr=0.5)
def scratch_dropout_on_at_test(fixed):
    """'an instance variable `is_training` is defined, but is kept constant during training, so the test accuracy is
    evaluated with dropout enabled'; fixed in #1110 by following `nn.Module.training`. The book's MLP (256 and 256 units,
    dropout 0.2 and 0.5, SGD at 0.5) on the digits instead of Fashion-MNIST. Training is untouched: only the validation runs
    with dropout, and no statistic of a layer in training sees it"""
    x, y = _pixels()
    return Learner(tensor_dls(x, y, bs=64), _ScratchDropoutMLP(always=not fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD))

class _BatchStatsNorm(nn.BatchNorm2d):
    "keras-resnet's `BatchNormalization(freeze=False)` before the fix: `training=True` always, so evaluation uses the batch's statistics"
    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, True, self.momentum, self.eps)

def _resnet_block(c, bn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), bn(c), nn.Conv2d(c, c, 3, padding=1, bias=False), bn(c)
        def forward(self, x): return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
    return Block()

@case("https://github.com/broadinstitute/keras-resnet/pull/47",
      "keras-resnet's unfrozen BatchNormalization was called with `training=True` always: validation normalises with each batch's statistics",
      {'train_mode_in_eval'}, epochs=4, lr=1e-3)
def resnet_batchnorm_always_training(fixed):
    """With `freeze=False` the layer 'was always forced to be in training mode, providing wrong validation results'; after
    the merged fix the author's validation accuracy rose from what no setting had reached before. A small ResNet (a stem, two
    residual blocks) on the digits as images, Adam; validation batches of 32 as training. No statistic of a layer in
    training sees it, and at batches of 32 the validation suffers little here (the report's validation accuracy was far off)"""
    bn = nn.BatchNorm2d if fixed else _BatchStatsNorm
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1, bias=False), bn(32), nn.ReLU(), _resnet_block(32, bn),
                          _resnet_block(32, bn), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the data: scaling, labels, augmentation ----
def _demand(n_days=1500, seed=0):
    "A daily gas demand series around 10,000 units: trend, weekly and yearly seasons, noise"
    g, t = _gen(seed), torch.arange(n_days).float()
    return 10000 + 2 * t + 1500 * torch.sin(6.283 * t / 365) + 400 * torch.sin(6.283 * t / 7) + 150 * torch.randn(n_days, generator=g)

def _windows(s, seq=48, pred=8):
    idx = torch.arange(len(s) - seq - pred)
    return torch.stack([s[i:i + seq] for i in idx]).unsqueeze(-1), torch.stack([s[i + seq:i + seq + pred] for i in idx])

class _TinyInformer(nn.Module):
    "An Informer-like forecaster, scaled down: a value embedding, a transformer encoder layer, a linear projection to the horizon"
    def __init__(self, seq=48, pred=8, d=32):
        super().__init__()
        self.embed, self.pos = nn.Linear(1, d), nn.Parameter(0.02 * torch.randn(seq, d))
        self.encoder = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.05, batch_first=True)
        self.proj = nn.Linear(seq * d, pred)
    def forward(self, x): return self.proj(self.encoder(self.embed(x) + self.pos).flatten(1))

@case("https://github.com/zhouhaoyi/Informer2020/issues/251",
      "an Informer forecaster trained on raw demand values around 10,000, neither inputs nor targets standardised: the loss becomes NaN",
      {'input_scale', 'target_scale', 'nonfinite_loss'}, epochs=3, lr=1e-4)
def forecaster_on_raw_demand(fixed):
    """'When the input values are kind of large (in the 10,000 range ...) and if I input these values into the Informer
    without any normalization/standardization, I get nan loss during training. However, if I ... standardize the train set,
    then I do not encounter this issue.' A one-layer transformer encoder forecasting 8 days from 48, MSE, Adam at Informer's
    1e-4; the twin standardises inputs and targets with the training series' mean and spread"""
    s = _demand()
    if fixed: s = (s - s[:1200].mean()) / s[:1200].std()
    x, y = _windows(s)
    return Learner(tensor_dls(x, y, bs=32), _TinyInformer(), loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

def _flchain(n=3000, seed=0):
    "Survival data shaped like `flchain`: age, sex, sample year, kappa, lambda, creatinine on their raw scales; times and events"
    g = _gen(seed)
    age, sex = 50 + 40 * torch.rand(n, generator=g), (torch.rand(n, generator=g) < 0.5).float()
    year = 1995 + torch.randint(0, 9, (n,), generator=g).float()
    kappa, lam = 0.5 + 2 * torch.rand(n, generator=g), 0.5 + 2.5 * torch.rand(n, generator=g)
    creat = 0.6 + 0.8 * torch.rand(n, generator=g)
    x = torch.stack([age, sex, year, kappa, lam, creat], 1)
    risk = 0.1 * (age - 70) + 1.5 * (kappa + lam - 3) + 1.0 * (creat - 1)
    time = -torch.log(torch.rand(n, generator=g)) * torch.exp(-risk) * 10
    event = (torch.rand(n, generator=g) < 0.7).float()
    return x, torch.stack([time, event], 1)

def _cox_loss(risk, y):
    "DeepSurv's negative partial log-likelihood, as its code computes it: `log(cumsum(exp(risk)))` over the batch sorted by time"
    order = torch.argsort(y[:, 0], descending=True)
    risk, event = risk.view(-1)[order], y[order, 1]
    log_risk = torch.log(torch.cumsum(torch.exp(risk), 0))
    return -((risk - log_risk) * event).sum() / event.sum().clamp(min=1)

@case("https://github.com/jaredleekatzman/DeepSurv/issues/14",
      "DeepSurv fitted on `flchain`'s raw columns (ages near 70, years near 2000): the risk's exponential overflows, the loss is NaN",
      {'input_scale', 'nonfinite_loss'}, epochs=10, lr=1e-3)
def deepsurv_raw_features(fixed):
    """The users trained DeepSurv on `aids2` and `flchain` and got a first training loss of 2.8e10, then NaN, and a
    concordance of 0.5; the answer that worked: normalise the features (scikit-learn's `MinMaxScaler`). DeepSurv's MLP (25
    SELU units, dropout), its Cox loss with `log(cumsum(exp(risk)))`, Adam here; batches of 128 sorted by time in the loss"""
    x, y = _flchain()
    if fixed: x = (x - x.min(0).values) / (x.max(0).values - x.min(0).values)
    model = nn.Sequential(nn.Linear(6, 25), nn.SELU(), nn.Dropout(0.1), nn.Linear(25, 25), nn.SELU(), nn.Linear(25, 1))
    return Learner(tensor_dls(x, y, bs=128), model, loss_func=_cox_loss, opt_func=torch_opt(torch.optim.Adam))

def _gait(n_per=150, n_classes=5, length=50, seed=0):
    "Gait recordings shaped like ground-reaction forces: `(n, 2, length)` curves whose shape depends on the class (a clinical condition)"
    g, xs, ys = _gen(seed), [], []
    t = torch.linspace(0, 1, length)
    for k in range(n_classes):
        base = torch.stack([torch.sin(3.14 * t) * (1 + 0.4 * k), torch.sin(6.28 * t + 0.6 * k) * (0.5 + 0.2 * k)])
        xs.append(base + 0.25 * torch.randn(n_per, 2, length, generator=g)); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

@case("https://github.com/sebastian-lapuschkin/explaining-deep-clinical-gait-classification/pull/2",
      "the labels are put through a permutation other than the samples': each recording carries another one's class",
      {'labels_misaligned', 'valid_at_chance', 'loss_stalled'}, epochs=5, lr=1e-3)
def gait_labels_permuted_apart(fixed):
    """'found the bug breaking predictions. wrong permutation of labels.' (merged): the data and the labels were reordered
    apart. A 1-d CNN on synthetic two-channel gait curves of five classes, Adam. Every layer behaves: the model fits noise,
    and only the labels' relation to the inputs shows it"""
    x, y = _gait()
    perm = torch.randperm(len(x), generator=_gen(1))
    x = x[perm]
    y = y[perm] if fixed else y[torch.randperm(len(y), generator=_gen(2))]
    model = nn.Sequential(nn.Conv1d(2, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 5))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

class _FlipImagesOnly(Callback):
    "fastai 0.7's random flips and dihedral turns before the fix: applied to the image, not to its mask (`tfm_y` ignored)"
    order, masks_too = -5, False
    def __init__(self, masks_too=False): self.masks_too = masks_too
    def before_batch(self):
        if not self.training: return
        x, m = self.learn.xb[0], self.learn.yb[0]
        flip = torch.rand(x.shape[0]) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        if self.masks_too: m = torch.where(flip[:, None, None], m.flip(-1), m)
        self.learn.xb, self.learn.yb = (x,), (m,)

@case("https://github.com/fastai/fastai/issues/245",
      "random flips are applied to the images but not to their masks: half the training masks no longer fit their image",
      {'labels_misaligned'}, epochs=4, lr=1e-3)
def segmentation_flip_image_only(fixed):
    """The Data Science Bowl user found `RandomFlip`, `RandomDihedral` and `RandomRotate` 'not respecting' the masks (fastai
    0.7's `tfm_y`) and sent a fix. Nuclei-like blobs (placed away from the centre, so a flip moves them), a two-level U-Net,
    cross-entropy over two classes, Adam. No statistic of a layer sees it: the targets are wrong for half the batch"""
    x, m = _blobs(n=240, seed=3)
    return Learner(tensor_dls(x, m, bs=16), _tiny_unet(), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_FlipImagesOnly(masks_too=fixed)])

def _signs(n_per=120, n_classes=8, seed=0):
    "Traffic-sign-like images as a file holds them: `(n, 3, 16, 16)` uint8 values 0..255; each class a coloured shape on a background"
    g, xs, ys = _gen(seed), [], []
    yy, xx = torch.meshgrid(torch.arange(16.), torch.arange(16.), indexing='ij')
    for k in range(n_classes):
        colour = torch.tensor([(k * 37) % 256, (k * 91) % 256, (k * 53 + 60) % 256]).float()
        shape = (((yy - 8) ** 2 + (xx - 8) ** 2) < (10 + 4 * (k % 4)) ** 1.2).float() if k < 4 else ((yy - xx).abs() < 2 + k % 4).float()
        img = 60 + shape * (colour[:, None, None] - 60)
        xs.append((img + 40 * torch.randn(n_per, 3, 16, 16, generator=g)).clamp(0, 255).to(torch.uint8)); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

@case("https://github.com/udacity/CarND-Traffic-Sign-Classifier-Project/pull/46",
      "the suggested normalisation `(x - 128) / 128` is computed on uint8 pixels: `x - 128` wraps around, dark pixels become bright",
      {'input_scale'}, epochs=4, lr=1e-3)
def uint8_normalisation_overflow(fixed):
    """'The old version is not working. Only achieved 75% accuracy with old function. It looks the problem is the data type
    overflow.' LeNet on synthetic traffic signs held as uint8, Adam. The wrapped inputs lie between 0 and 2 with a plausible
    spread: a check of their scale may see nothing wrong (the truth is the normalisation, the nearest kind there is)"""
    x, y = _signs()
    x = (x.float() - 128) / 128 if fixed else (x - 128).float() / 128     # uint8 arithmetic wraps modulo 256
    model = nn.Sequential(nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 2 * 2, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 8))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
