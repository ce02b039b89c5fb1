"""Bug zoo, family 5 (issue 45): a fresh set of real reports, gathered after the other families' misses had been studied, so
that the zoo keeps a measure nobody here has tuned on. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`,
`layer`) was written before the case was ever run under the tool. Cases were chosen for how common the bug is (loss and
activation pairings, learning rates, unscaled data, labels, shapes that broadcast, parameters the optimiser never sees,
`zero_grad`, evaluation modes), never for whether the tool catches it. Several leave every per-layer statistic healthy
(labels permuted, masks left unflipped, dropout left on at validation, layers kept in a Python list): their docstrings say so.

Kinds assumed here that no check raises yet (beside those listed in `bugs_data.py`'s docstring): `unregistered_params`
(a forward uses weights that are no parameters of the model)."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_vectors, _digit_images, _blobs, _tiny_unet
from bugs_optim import _NoZeroGrad, _markov_text, _lm_dls, _seq_ce

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


# ---- optimisation and the training loop ----
def _noisy_blobs(n=200, seed=0):
    "Denoising pairs: noisy images of blobs (noise sd 0.5) and the clean images"
    x, m = _blobs(n=n, seed=seed)
    clean = (m.float() / 2).unsqueeze(1)
    return clean + 0.5 * torch.randn(clean.shape, generator=_gen(seed + 1)), clean

@case("https://github.com/PENGLU-WashU/IMC_Denoise/issues/11",
      "the demo trains DeepSNiF with `train_initial_lr=1`: the loss is NaN from the start",
      {'lr_too_high', 'loss_diverging', 'nonfinite_loss', 'nonfinite'}, epochs=3)
def denoiser_initial_lr_one(fixed):
    """'As your settings, the current initial learning rate is 1, which is too big. Please set train_initial_lr as 1e-3.'
    A two-level U-Net denoiser of synthetic images (DeepSNiF's blind-spot training simplified to clean targets), MSE, Adam"""
    x, y = _noisy_blobs()
    return Learner(tensor_dls(x, y, bs=16), _tiny_unet(n_out=1), loss_func=nn.MSELoss(), lr=1e-3 if fixed else 1.,
                   opt_func=torch_opt(torch.optim.Adam))

def _names(n_per=150, n_classes=6, length=7, n_chars=27, seed=0):
    "Names as one-hot letters `(n, length, n_chars)`: each class (a language) draws its letters from a distribution of its own"
    g, xs, ys = _gen(seed), [], []
    for k in range(n_classes):
        p = torch.rand(n_chars, generator=g) ** 4
        letters = torch.multinomial(p / p.sum(), n_per * length, replacement=True, generator=g).view(n_per, length)
        xs.append(F.one_hot(letters, n_chars).float()); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _CharRNN(nn.Module):
    "The tutorial's RNN: the letter and the hidden state joined, `i2h` and `i2o` linear layers, a log-softmax over the languages"
    def __init__(self, n_chars=27, hid=128, n_out=6):
        super().__init__()
        self.hid, self.i2h, self.i2o = hid, nn.Linear(n_chars + hid, hid), nn.Linear(n_chars + hid, n_out)
    def forward(self, x):
        h = x.new_zeros(x.shape[0], self.hid)
        for t in range(x.shape[1]):
            joined = torch.cat([x[:, t], h], 1)
            h, out = self.i2h(joined), self.i2o(joined)
        return F.log_softmax(out, 1)

class _ModelMadeAgain(Callback):
    "The notebook instantiated the RNN a second time after making the optimiser: the model trained is not the one it holds"
    order = -100
    def before_fit(self):
        torch.manual_seed(1)
        self.learn.model = _CharRNN()   # fastai has already built the optimiser (`create_opt`) on the first one

@case("https://github.com/spro/practical-pytorch/issues/9",
      "the char-RNN is instantiated again after the optimiser was made on the first instance: the model that runs is never updated",
      {'optimizer_groups', 'frozen'}, epochs=4, lr=0.05)
def char_rnn_model_made_twice(fixed):
    """With `optimizer = torch.optim.SGD(rnn.parameters(), lr=0.005)` in place of the manual update, 'loss is big, and loss
    flow up and down, do not diminish'; the author: 'I have the model instantiated twice ... Try moving the optimizer to below
    the second one', fixed in the tutorial. The tutorial's RNN on synthetic one-hot names of six languages, `NLLLoss`, SGD;
    batches of 16 at 0.05 instead of single names at 0.005"""
    x, y = _names()
    return Learner(tensor_dls(x, y, bs=16), _CharRNN(), loss_func=nn.NLLLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD), cbs=[] if fixed else [_ModelMadeAgain()])

@case("https://github.com/apache/singa/pull/333",
      "the CIFAR-10 example's softmax cross-entropy gradient is summed over the batch, not averaged: steps 100 times too large, the loss stays at 87",
      {'lr_too_high', 'loss_diverging', 'exploding_grad'}, epochs=8, lr=0.01)
def cifar_gradients_summed(fixed):
    """'Without replacing gradients with its average over matrix's size, they are going to be too high to maintain a stable
    loss ... The loss stays at around 87 without dropping' (merged). A small AlexNet-like CNN on the digits as images, batches
    of 100, SGD with momentum 0.9; the bug kept as a cross-entropy summed over the batch"""
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    return Learner(tensor_dls(x, y, bs=100), model, loss_func=nn.CrossEntropyLoss(reduction='mean' if fixed else 'sum'),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.9))

def _keywords(n_per=300, frames=40, n_mels=20, seed=0):
    "Keyword spotting data: `(n, frames, n_mels)` filterbank frames, filler or one of two keywords (a pattern at a random time)"
    g, xs, ys = _gen(seed), [], []
    patterns = torch.randn(2, 8, n_mels, generator=g)
    for k in range(3):
        x = torch.randn(n_per, frames, n_mels, generator=g)
        if k:
            for i, s in enumerate(torch.randint(0, frames - 8, (n_per,), generator=g).tolist()): x[i, s:s + 8] += 1.5 * patterns[k - 1]
        xs.append(x); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _KWSGRU(nn.Module):
    "wekws' GRU backbone, scaled down: a linear preprocessing layer, a GRU, a linear classifier at the last frame"
    def __init__(self, n_mels=20, hid=48):
        super().__init__()
        self.pre, self.rnn, self.out = nn.Linear(n_mels, hid), nn.GRU(hid, hid, batch_first=True), nn.Linear(hid, 3)
    def forward(self, x): return self.out(self.rnn(F.relu(self.pre(x)))[0].max(1).values)

@case("https://github.com/wenet-e2e/wekws/pull/73",
      "the keyword-spotting executor calls `optimizer.step()` but never `optimizer.zero_grad()`: gradients accumulate over the run",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=1e-3)
def kws_executor_without_zero_grad(fixed):
    """'I noticed that in the training stage, when optimizer.step() is called, optimizer.zero_grad() is not called'; the merged
    fix adds it before `loss.backward()`. A GRU keyword spotter (max-pooled over frames) on synthetic filterbank features of
    two keywords and filler, Adam"""
    x, y = _keywords()
    return Learner(tensor_dls(x, y, bs=32), _KWSGRU(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_NoZeroGrad()])

class _SpeedupAfterOptimizer(Callback):
    "NNI's `ModelSpeedup` run after the optimiser was made: the pruned convolutions are new modules the optimiser does not hold"
    order = -100
    def before_fit(self): _speedup(self.learn.model)   # fastai has already built the optimiser (`create_opt`)

def _speedup(model, keep=8):
    "Replace `model[0]` (16 filters) and `model[3]` by smaller convolutions holding the `keep` filters of largest L1 norm"
    c1, c2 = model[0], model[3]
    idx = c1.weight.abs().sum((1, 2, 3)).argsort(descending=True)[:keep]
    n1, n2 = nn.Conv2d(c1.in_channels, keep, 3, padding=1), nn.Conv2d(keep, c2.out_channels, 3, padding=1)
    with torch.no_grad():
        n1.weight.copy_(c1.weight[idx]); n1.bias.copy_(c1.bias[idx]); n2.weight.copy_(c2.weight[:, idx]); n2.bias.copy_(c2.bias)
    model[0], model[3] = n1, n2
    return model

@case("https://github.com/microsoft/nni/issues/4521",
      "a pruned model is sped up (its layers replaced by smaller ones) after the optimiser was made: the new layers are never updated",
      {'optimizer_groups', 'frozen'}, epochs=3, lr=1e-3)
def pruned_layers_after_optimizer(fixed):
    """'The parameters are not updated when the pruned model is finetuned': `speedup_model()` replaces the layers, 'so the
    parameters registered in the optimizer are outdated ... an easy way is reinitializing a new optimizer', which solved it.
    A small CNN on the digits, its first convolution pruned from 16 to 8 filters, Adam; the twin speeds up first, then makes
    the optimiser. The head still learns, so the loss falls"""
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    if fixed: _speedup(model)
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_SpeedupAfterOptimizer()])

class _ListNet(nn.Module):
    "The report's net: `self.layer` registered, the hidden layers kept in a plain Python list (or, fixed, an `nn.ModuleList`)"
    def __init__(self, num_layers=2, registered=False):
        super().__init__()
        self.layer, self.head = nn.Linear(64, 64), nn.Linear(64, 10)
        hidden = [nn.Linear(64, 64) for _ in range(num_layers)]
        self.list_of_layers = nn.ModuleList(hidden) if registered else hidden
    def forward(self, x):
        x = F.relu(self.layer(x))
        for l in self.list_of_layers: x = F.relu(l(x))
        return self.head(x)

@case("https://github.com/pytorch/pytorch/issues/666",
      "hidden layers kept in a Python list are no submodules: their weights are not in `parameters()`, so they never train",
      {'unregistered_params'}, epochs=4, lr=1e-3)
def layers_in_python_list(fixed):
    """`self.list_of_layers = [nn.Linear(1, 1) for i in range(num_layers)]` is not listed by the module; 'This behaviour is
    expected' (the answer points to `nn.ModuleList`). An MLP on the digits with its two hidden layers in the list, Adam. The
    layers still run, at their random weights, and the registered ones learn around them: no statistic of a registered layer
    sees it"""
    x, y = _digit_vectors()
    return Learner(tensor_dls(x, y, bs=64), _ListNet(registered=fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _bimodal(n=3000, seed=0):
    "A one-dimensional input and a target drawn from one of two branches (`y = x^2` or `y = -x`): a mixture density's task"
    g = _gen(seed)
    x = 2 * torch.rand(n, 1, generator=g) - 1
    branch = torch.rand(n, 1, generator=g) < 0.6
    return x, torch.where(branch, x ** 2, -x) + 0.05 * torch.randn(n, 1, generator=g)

class _MDN(nn.Module):
    "The world model's mixture density head on an MLP: `k` Gaussians' log-weights (log-softmax over `pi_dim`), means, log-scales"
    def __init__(self, k=3, hid=64, pi_dim=-1):
        super().__init__()
        self.k, self.pi_dim = k, pi_dim
        self.body, self.out = nn.Sequential(nn.Linear(1, hid), nn.Tanh(), nn.Linear(hid, hid), nn.Tanh()), nn.Linear(hid, 3 * k)
    def forward(self, x):
        pi, mu, logsigma = self.out(self.body(x)).split(self.k, -1)
        return torch.cat([F.log_softmax(pi, dim=self.pi_dim), mu, logsigma], -1)

def _gmm_loss(out, y):
    "The negative log-likelihood of `y` under the mixture (the world model's `gmm_loss`)"
    logpi, mu, logsigma = out.chunk(3, -1)
    logp = -0.5 * ((y - mu) / logsigma.exp()) ** 2 - logsigma - 0.919
    return -torch.logsumexp(logpi + logp, -1).mean()

@case("https://github.com/ctallec/world-models/issues/10",
      "the MDN-RNN's mixture weights take their log-softmax over the batch dimension, not over the Gaussians: samples mix",
      {'batch_independence'}, epochs=3, lr=1e-3)
def mdn_log_softmax_over_batch(fixed):
    """`logpi = f.log_softmax(pi, dim=-2)` on `(seq_len, bs, gaussians)`: 'Here the softmax is done over the batch dimension of
    pi. Shouldn't the softmax be done over the gaussians dimension'; the author fixed it. A mixture density network of three
    Gaussians on a two-branch one-dimensional task (the world model's recurrence left out), Adam"""
    x, y = _bimodal()
    return Learner(tensor_dls(x, y, bs=32), _MDN(pi_dim=-1 if fixed else 0), loss_func=_gmm_loss,
                   opt_func=torch_opt(torch.optim.Adam))

class _LastOfDim1(nn.Module):
    "The report's `out[:, -1, :]` on an LSTM's output"
    def forward(self, o): return o[0][:, -1, :]

@case("https://github.com/pytorch/pytorch/issues/1538",
      "an MNIST LSTM takes (batch, rows, pixels) with `batch_first` commented out: it runs along the batch, mixing images",
      {'batch_independence'}, epochs=3, lr=1e-2)
def mnist_lstm_batch_first_commented_out(fixed):
    """'I train a simple LSTM to do classifier on MNIST ... whether I use batch_first, I get the different result': the model
    had `# batch_first=True)` and fed `(batch, 28, 28)`; the answer: without it the LSTM reads the batch as the sequence.
    Two LSTM layers of 128, `out[:, -1, :]`, a linear classifier, Adam at 1e-2, batches of 100, on the digits' 8 rows"""
    x, y = _pixels()
    model = nn.Sequential(nn.LSTM(8, 128, 2, batch_first=fixed), _LastOfDim1(), nn.Linear(128, 10))
    return Learner(tensor_dls(x.view(-1, 8, 8), y, bs=100), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- added in a second pass (same rules: truths written before any run) ----
def _rgbd(n=160, size=16, seed=0):
    "RGB-D pairs: images `(n, 3, size, size)` of lit boxes, and their depth maps `(n, size, size)`, without a channel axis"
    g = _gen(seed)
    depth = 2 + 0.1 * torch.randn(n, size, size, generator=g)
    for i in range(n):
        r, c = torch.randint(0, size - 6, (2,), generator=g).tolist()
        depth[i, r:r + 6, c:c + 6] -= 1 + torch.rand(1, generator=g)
    img = torch.stack([3 - depth, 2.5 - depth, 0.3 * torch.randn(n, size, size, generator=g)], 1)
    return img, depth

@case("https://github.com/jiwei0921/CoNet/issues/3",
      "the depth head's output is `(B, 1, H, W)`, the depth map `(B, H, W)`: `smooth_l1_loss` broadcasts them to `(B, B, H, W)`",
      {'output_shape', 'target_shape'}, epochs=4, lr=1e-3)
def depth_target_without_channel(fixed):
    """'UserWarning: Using a target size (torch.Size([2, 256, 256])) that is different to the input size (torch.Size([2, 1,
    256, 256]))' at `F.smooth_l1_loss(pred_depth, depth, reduction='sum')`; the author: 'For target, you can add this code
    target = target.unsqueeze(1)'. A small convolutional depth head on synthetic RGB images of boxes, smooth L1 summed as
    the repository does, Adam, batches of 2 as the report (the truth names the cause in the tool's word, `output_shape`,
    and the assumed `target_shape`)"""
    x, d = _rgbd()
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))
    def loss(out, y): return F.smooth_l1_loss(out, y, reduction='sum') / 256
    return Learner(tensor_dls(x, d.unsqueeze(1) if fixed else d, bs=2), model, loss_func=loss, opt_func=torch_opt(torch.optim.Adam))

def _tracks(n_storms=300, steps=12, seed=0):
    "Hurricane tracks on their raw scales: latitude, longitude, wind (knots), minimum pressure (millibars), every 6 hours"
    g = _gen(seed)
    lat0, lon0 = 12 + 10 * torch.rand(n_storms, 1, generator=g), -40 - 40 * torch.rand(n_storms, 1, generator=g)
    t = torch.arange(steps).float()
    lat = lat0 + 0.4 * t + 0.1 * torch.randn(n_storms, steps, generator=g)
    lon = lon0 - 0.6 * t + 0.1 * torch.randn(n_storms, steps, generator=g)
    wind = (30 + 60 * torch.rand(n_storms, 1, generator=g)) * torch.sin(3.14 * (t + 1) / (steps + 2)) + 3 * torch.randn(n_storms, steps, generator=g)
    pres = 1012 - 0.8 * wind + torch.randn(n_storms, steps, generator=g)
    return torch.stack([lat, lon, wind, pres], -1)

@case("https://github.com/hammad93/hurricane-net/issues/1",
      "an LSTM forecasting hurricane tracks on unscaled features (pressures near 1,000 millibars): the gradient explodes, the tensors go NaN",
      {'input_scale', 'target_scale', 'nonfinite_loss'}, epochs=4, lr=1e-3)
def hurricane_lstm_unscaled(fixed):
    """'Previously, the deep learning model has an exploding gradient because the features were not scaled and the tensors
    converged to NaN. After further analysis, the best way to standardize and scale the features using RobustScaler' (the
    author's own issue, closed). An LSTM reading 6 six-hourly records and forecasting the next 4 (all four features), MSE,
    Adam; the twin scales inputs and targets by median and interquartile range"""
    tr = _tracks()
    if fixed:
        med, q = tr.flatten(0, 1).median(0).values, tr.flatten(0, 1).quantile(torch.tensor([0.25, 0.75]), 0)
        tr = (tr - med) / (q[1] - q[0])
    x, y = tr[:, :6], tr[:, 6:10].flatten(1)
    class TrackLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.out = nn.LSTM(4, 64, batch_first=True), nn.Linear(64, 16)
        def forward(self, x): return self.out(self.rnn(x)[0][:, -1])
    return Learner(tensor_dls(x, y, bs=16), TrackLSTM(), loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

def _court_heatmaps(n=160, size=24, seed=0):
    "Keypoint data: noisy images with a bright spot, and a Gaussian heatmap `(1, size, size)` centred on it"
    g, yy, xx = _gen(seed), *torch.meshgrid(torch.arange(24.), torch.arange(24.), indexing='ij')
    pos = 3 + 18 * torch.rand(n, 2, generator=g)
    heat = torch.exp(-((yy - pos[:, 0, None, None]) ** 2 + (xx - pos[:, 1, None, None]) ** 2) / 8).unsqueeze(1)
    return heat + 0.3 * torch.randn(n, 1, size, size, generator=g), heat

class _NoZeroGradPlain(Callback):
    "The trainer never clears the gradients: fastai's `zero_grad` does nothing (an `OptimWrapper`'s or fastai's own optimiser)"
    order = -50
    def before_fit(self): self.learn.opt.zero_grad = lambda *a, **k: None

@case("https://github.com/yastrebksv/TennisCourtDetector/issues/7",
      "the court detector's trainer calls `optimizer.step()` without ever `optimizer.zero_grad()`: each step adds every past gradient",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=1e-4)
def heatmap_trainer_without_zero_grad(fixed):
    """'Why there is no "optimizer.zero_grad()" in base_trainer.py? There must be smt wrong'; the author: 'You are right, thanks!
    I fixed it.' A small encoder-decoder regressing keypoint heatmaps (TrackNet's kind, scaled down), MSE, Adam at 1e-4"""
    x, h = _court_heatmaps()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))
    return Learner(tensor_dls(x, h, bs=8), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam),
                   cbs=[] if fixed else [_NoZeroGradPlain()])

@case("https://github.com/pkmital/pycadl/pull/5",
      "the training pipeline divides the image batch by 255 twice: the autoencoder sees (and rebuilds) pixels between 0 and 0.004",
      {'input_scale', 'target_scale'}, epochs=4, lr=1e-3)
def images_divided_by_255_twice(fixed):
    """'The input image batch was being divided by 255 twice before being fed to the model' (merged). DRAW's recurrent
    attention left out: a small convolutional autoencoder with a sigmoid output and binary cross-entropy rebuilding the
    digits (as bytes 0..240), Adam"""
    x, _ = _digit_images(scale='byte')
    x = x / 255 if fixed else x / 255 / 255
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=2), nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid())
    return Learner(tensor_dls(x, x, bs=32), model, loss_func=nn.BCELoss(), opt_func=torch_opt(torch.optim.Adam))

def _frames(n_per=200, size=16, seed=0):
    "Expert demonstrations as a behaviour-cloning set: grey frames `(n, 1, size, size)` as bytes 0..255 (a ball's position), the action (0..3)"
    g, xs, ys = _gen(seed), [], []
    yy, xx = torch.meshgrid(torch.arange(float(size)), torch.arange(float(size)), indexing='ij')
    for a, (dy, dx) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
        c = size / 2 + (size / 4) * torch.tensor([dy, dx]).float() + 2 * torch.randn(n_per, 2, generator=g)
        ball = 200 * torch.exp(-((yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2) / 4)
        xs.append((30 + ball + 20 * torch.rand(n_per, size, size, generator=g)).clamp(0, 255).round().unsqueeze(1)); ys.append(torch.full((n_per,), a))
    return torch.cat(xs), torch.cat(ys)

@case("https://github.com/hill-a/stable-baselines/issues/328",
      "behaviour-cloning pretraining feeds the CNN policy image observations of 0..255: the dataset loader never scales them to 0..1",
      {'input_scale'}, epochs=10, lr=1e-4)
def pretraining_frames_unscaled(fixed):
    """'When using a image env, the image data that gets fed in to the neural network is between 0 and 255'; the maintainer:
    the RL path scales them, and 'The first bug is in dataset.py. I realised that the images get at no point normalized, in
    the image loading chain' (fixed in the PR that followed). A NatureCNN-like policy on synthetic frames of a ball, the
    expert's action as the class, cross-entropy, Adam at `pretrain`'s default 1e-4 for its default 10 epochs. At so small a
    learning rate the unscaled run learns faster here: the harm is in what the policy meets later, scaled, in the RL loop"""
    x, y = _frames()
    model = nn.Sequential(nn.Conv2d(1, 16, 4, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, 4))
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/hunkim/PyTorchZeroToAll/pull/4",
      "the softmax-MNIST example's last linear layer is followed by a ReLU: the logits given to `CrossEntropyLoss` cannot be negative",
      {'output_activation'}, layer='9', epochs=5, lr=0.01)
def mnist_logits_through_relu(fixed):
    """'Remove relu in the final layer' (merged: 'Great!'): the lecture's net returned `F.relu(self.l5(x))` into
    `nn.CrossEntropyLoss`. Its five linear layers (520, 320, 240, 120 units, then 10) on the digits' 64 pixels instead of
    784, normalised as its `transforms.Normalize` does, SGD at 0.01 with momentum 0.5; batches of 16 (not 64), so that 1,437
    images give enough steps"""
    x, y = _digit_vectors()
    sizes = (64, 520, 320, 240, 120, 10)
    layers = [m for i, o in zip(sizes[:-1], sizes[1:]) for m in (nn.Linear(i, o), nn.ReLU())]
    return Learner(tensor_dls(x, y, bs=16), nn.Sequential(*(layers if not fixed else layers[:-1])),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.5))

def _bev_offsets(n=200, size=12, seed=0):
    "Bird's-eye grids `(n, 2, size, size)` of occupancy and height, and per-cell box offsets `(n, 2, size, size)` in [-1, 1] to the nearest car"
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(float(size)), torch.arange(float(size)), indexing='ij')
    cars = size * torch.rand(n, 2, generator=g)
    occ = torch.exp(-((yy - cars[:, 0, None, None]) ** 2 + (xx - cars[:, 1, None, None]) ** 2) / 3)
    x = torch.stack([occ + 0.1 * torch.randn(n, size, size, generator=g), occ * (1 + torch.rand(n, 1, 1, generator=g))], 1)
    off = torch.stack([(cars[:, 0, None, None] - yy) / size, (cars[:, 1, None, None] - xx) / size], 1)
    return x, off

@case("https://github.com/tsinghua-rll/VoxelNet-tensorflow/issues/10",
      "the region proposal network's last convolution (the box regression map) ends in a ReLU: its offsets cannot be negative",
      {'output_activation', 'target_range'}, layer='6', epochs=4, lr=1e-3)
def rpn_regression_through_relu(fixed):
    """'I notice you use the relu layer for the last layer of RPN which predicts class score and regression ... if you want to
    shrink your anchor, you must have some negative prediction in regression'; fixed in the author's commit. A small
    convolutional RPN's regression branch on synthetic bird's-eye grids, per-cell offsets in [-1, 1], smooth L1, Adam"""
    x, off = _bev_offsets()
    model = nn.Sequential(nn.Conv2d(2, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                          nn.ReLU(), nn.Conv2d(32, 2, 1), *([] if fixed else [nn.ReLU()]))
    return Learner(tensor_dls(x, off, bs=16), model, loss_func=nn.SmoothL1Loss(), opt_func=torch_opt(torch.optim.Adam))
