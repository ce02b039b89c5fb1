"""Bug zoo, family 6 (issue 45), its second file: the third fresh set's cases of the model, the training loop, optimisation and
evaluation modes, and those added in a second pass. See `bugs_fresh3.py`."""
import math
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _docs, _multilabel, _blobs
from bugs_optim import _markov_text, _lm_dls
from bugs_fresh3 import _gen


# ---- transformers ----
class _PositionalEncoding(nn.Module):
    "The tutorial's sinusoidal positions, added to the scaled embeddings, then dropout"
    def __init__(self, d, length=20, p=0.1):
        super().__init__()
        pos, div = torch.arange(length).float()[:, None], torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe = torch.zeros(length, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer('pe', pe)
        self.drop = nn.Dropout(p)
    def forward(self, x): return self.drop(x + self.pe[:x.shape[1]])

class _TutorialLM(nn.Module):
    "The tutorial's `TransformerModel`, scaled down: scaled embeddings, sinusoidal positions, a transformer encoder, a linear decoder; `causal` passes the square subsequent mask"
    def __init__(self, vocab=100, d=32, heads=2, layers=2, causal=True):
        super().__init__()
        self.d, self.causal, self.emb, self.pos = d, causal, nn.Embedding(vocab, d), _PositionalEncoding(d)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 64, dropout=0.1, batch_first=True), layers)
        self.decoder = nn.Linear(d, vocab)
        for w in (self.emb.weight, self.decoder.weight): nn.init.uniform_(w, -0.1, 0.1)   # the tutorial's `init_weights`
        nn.init.zeros_(self.decoder.bias)
    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        return self.decoder(self.encoder(self.pos(self.emb(x) * math.sqrt(self.d)), mask=mask, is_causal=self.causal))

def _seq_ce(out, y): return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

@case("https://github.com/pytorch/tutorials/pull/2662",
      "the language-model tutorial's transformer runs without the causal mask (`src_mask` is None): every position sees the tokens it must predict",
      {'future_leak'}, epochs=6, lr=5.)
def lm_transformer_without_causal_mask(fixed):
    """Issue #2478, fixed by this merged PR: 'Use nn.Transformer.generate_square_subsequent_mask when src_mask is None', with a
    comment 'saying that this is doing Causal Language Modeling' and why the mask is needed. The tutorial's model, scaled down,
    and its training (SGD at 5.0, gradients clipped at norm 0.5) on a synthetic Markov text whose best loss is the chain's
    entropy, 0.90; batches of 20 sequences of 20 tokens. The validation loss falls below what any causal model can reach; every
    layer is healthy"""
    from fastai.callback.training import GradientClip
    return Learner(_lm_dls(_markov_text()), _TutorialLM(causal=fixed), loss_func=_seq_ce, opt_func=torch_opt(torch.optim.SGD),
                   cbs=[GradientClip(0.5)])

class _TinyBert(nn.Module):
    "A BERT-like sequence classifier, scaled down: token and position embeddings, a LayerNorm, post-norm encoder layers with GELU, the first token's state to a linear head; BERT's N(0, 0.02) initialisation"
    def __init__(self, vocab=500, d=64, heads=4, layers=4, length=21, n_out=3):
        super().__init__()
        self.emb, self.pos, self.norm = nn.Embedding(vocab, d), nn.Embedding(length, d), nn.LayerNorm(d)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation='gelu', batch_first=True), layers)
        self.classifier = nn.Linear(d, n_out)
        for p in self.parameters():
            if p.dim() > 1: nn.init.normal_(p, 0, 0.02)
    def forward(self, x):
        h = self.norm(self.emb(x) + self.pos(torch.arange(x.shape[1])))
        return self.classifier(self.encoder(h)[:, 0])

@case("https://github.com/huggingface/transformers/issues/735",
      "a BERT classifier trained with AdamW at a learning rate of 0.01: it gives the same output for every input",
      {'lr_too_high', 'constant_output'}, epochs=4)
def bert_classifier_lr_too_high(fixed):
    """'BERT encoding layer produces same output for all inputs during evaluation'; the answer that worked for several users:
    'Changing my learning rate from 0.01 to 5e-5 worked for me' (another: 'had the same output logits ... your solution worked
    for me'). A BERT-like encoder of four layers, trained from scratch here (no pretrained weights), on synthetic documents of
    three topics with a leading [CLS] token, AdamW; the twin lowers the rate to 5e-4, a from-scratch model's counterpart of 5e-5"""
    x, y = _docs(n_per=300, n_classes=3)
    x = torch.cat([torch.zeros(len(x), 1, dtype=torch.long), x], 1)   # [CLS]
    return Learner(tensor_dls(x, y, bs=32), _TinyBert(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   lr=5e-4 if fixed else 0.01, opt_func=torch_opt(torch.optim.AdamW))


# ---- the training loop ----
class _ZeroGradPerEpoch(Callback):
    "The lab's loop: `optimizer.zero_grad()` once per epoch, before the loop over batches; each step adds the epoch's gradients so far"
    order = -50
    def before_fit(self):
        self.zero, self.learn.opt.zero_grad = self.learn.opt.zero_grad, lambda *a, **k: None
    def before_epoch(self): self.zero()
    def after_fit(self): self.learn.opt.zero_grad = self.zero

@case("https://github.com/heartcored98/Standalone-DeepLearning/issues/11",
      "the CIFAR-10 CNN lab calls `optimizer.zero_grad()` once per epoch, not once per batch: gradients accumulate over each epoch",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=1e-3)
def cnn_zero_grad_once_per_epoch(fixed):
    """'You use zero_grad() once per epoch! Shouldn't zero_grad() come before every loss.backward()?' (in Korean); the author:
    he had made that mistake, and fixed the same error in the code of several labs. A small CNN (three convolutions with max
    pooling, two linear layers) on the digits as images stands in for the lab's CIFAR-10 CNN; Adam"""
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 64),
                          nn.ReLU(), nn.Linear(64, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_ZeroGradPerEpoch()])


# ---- evaluation modes ----
def _basic_conv(i, o, momentum):
    "Inception's `BasicConv2d`: a convolution without bias, a BatchNorm (eps 0.001, `momentum` as the port set it), a ReLU"
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o, eps=0.001, momentum=momentum), nn.ReLU())

@case("https://github.com/Cadene/pretrained-models.pytorch/issues/5",
      "the Inception ports build every BatchNorm with `momentum=0`: the running statistics never move, so evaluation normalises with mean 0 and variance 1",
      {'eval_stats_stale'}, epochs=3, lr=1e-3)
def batchnorm_momentum_zero(fixed):
    """'Both Inception models initialize BatchNorm with ... momentum=0. Setting momentum to 0 prevents the running mean and var
    from being updated during training. When training one of these models on a different dataset, this causes a significant
    discrepancy between train and eval modes'; the reporter: 'I removed all the extra parameters and used the Pytorch defaults.
    Worked fine' (PyTorch's default momentum is 0.1; the issue is closed). Three of Inception's
    `BasicConv2d` blocks and a linear head on the digits as images (0..1), Adam. In training every BatchNorm uses the batch's
    statistics and no layer misbehaves: only evaluation does"""
    x, y = _digit_images()
    m = 0.1 if fixed else 0.
    model = nn.Sequential(_basic_conv(1, 32, m), nn.MaxPool2d(2), _basic_conv(32, 64, m), _basic_conv(64, 64, m),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the model ----
class _AGCN(nn.Module):
    "A-GCN's head, scaled down: an adaptive label graph `softmax(theta(Z) phi(Z)ᵀ)` over the labels' word vectors, a two-layer GCN making each label's classifier, applied to the image features"
    def __init__(self, n_feat=60, n_labels=6, emb=32, d=64, detach=True):
        super().__init__()
        self.detach, self.backbone = detach, nn.Sequential(nn.Linear(n_feat, d), nn.ReLU())
        self.register_buffer('words', torch.randn(n_labels, emb, generator=_gen(7)))
        self.theta, self.phi = nn.Linear(emb, 16), nn.Linear(emb, 16)
        self.gc1, self.gc2 = nn.Linear(emb, 48), nn.Linear(48, d)
    def forward(self, x):
        adj = torch.softmax(self.theta(self.words) @ self.phi(self.words).T, -1)
        if self.detach: adj = adj.detach()
        w = self.gc2(F.leaky_relu(adj @ self.gc1(self.words), 0.2))
        return self.backbone(x) @ (adj @ w).T

@case("https://github.com/queenie88/A-GCN/issues/4",
      "the adaptive adjacency matrix is `.detach()`ed in the forward: the two matrices that compute it (theta, phi) never receive a gradient",
      {'gradient_flow'}, epochs=4, lr=1e-3)
def adjacency_detached_from_graph(fixed):
    """'If adj is detached from the computation graph, how could the two weight matrices be updated (i.e. W_phi, W_theta)?';
    the authors: 'You are right, the .detech() should be removed. We forget to modify this code, but now we have updated it.'
    A-GCN's label-graph head on an MLP backbone, on scikit-learn's synthetic multi-label data (six labels), the multi-label
    soft-margin loss, Adam. The rest of the model learns, so the loss falls; theta and phi keep their random weights"""
    x, y = _multilabel()
    return Learner(tensor_dls(x, y.float(), bs=32), _AGCN(detach=not fixed), loss_func=nn.MultiLabelSoftMarginLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

class _TinyDeepLab(nn.Module):
    "DeepLab v3+'s decoder end, scaled down: a backbone, ASPP branches (1×1, two dilated 3×3, image pooling) concatenated, a 1×1 projection with BatchNorm and ReLU, `drop`, a 1×1 classifier"
    def __init__(self, p=0.1, n_out=2, c=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.aspp = nn.ModuleList([nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 3, padding=2, dilation=2), nn.Conv2d(c, c, 3, padding=4, dilation=4)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1))
        self.project = nn.Sequential(nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.drop, self.classifier = nn.Dropout(p), nn.Conv2d(c, n_out, 1)
    def forward(self, x):
        h = self.backbone(x)
        feats = [F.relu(b(h)) for b in self.aspp] + [F.relu(self.pool(h)).expand_as(h)]
        return self.classifier(self.drop(self.project(torch.cat(feats, 1))))

@case("https://github.com/bonlime/keras-deeplab-v3-plus/issues/4",
      "the port's dropout after the concat projection is `Dropout(0.9)`: the original's `keep_prob=0.9` became a rate, 90% of the features are dropped",
      {'dropout_rate'}, layer='drop', epochs=4, lr=1e-3)
def dropout_rate_from_keep_prob(fixed):
    """'I believe it should be: Dropout(0.1). Orig TF repo: concat_logits = slim.dropout(concat_logits, keep_prob=0.9, ...).
    Keep prob means that we keep 0.9 of probabilities'; the author: 'You are right. Fixed it.' DeepLab v3+'s ASPP and
    projection, scaled down, segmenting synthetic blobs, cross-entropy, Adam. Dropout at 0.9 leaves the layers' statistics
    plausible (a tenth of the features, scaled by ten)"""
    x, m = _blobs(n=240, seed=5)
    return Learner(tensor_dls(x, m, bs=16), _TinyDeepLab(p=0.1 if fixed else 0.9), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

class _ADFLinear(nn.Linear):
    "The ADF `Linear` as the repository had it: `reset_parameters` overridden away, so its weight and bias keep the zeros they were allocated with"
    def reset_parameters(self):
        nn.init.zeros_(self.weight)
        nn.init.zeros_(self.bias)

@case("https://github.com/mattiasegu/uncertainty_estimation_deep_learning/pull/7",
      "the ADF `Linear` layer dropped `reset_parameters`: every weight and bias of the network starts at zero, so no hidden unit ever moves",
      {'gradient_flow', 'constant_output'}, epochs=4, lr=1e-3)
def linear_layers_initialised_to_zero(fixed):
    """'I noticed the weights and biases of the ADF Linear layer implementation get initialized with mostly zeroes for me. I
    fixed this by restoring the original reset_parameters method from torch.nn.Linear'; the author: 'No real reason why this
    was removed, thanks for letting me know!' (merged). The repository's classifier reduced to its mean path (no variance
    propagation): an MLP of three such layers with ReLUs on the digits, Adam. With every weight at zero the hidden units
    output zero and get no gradient: only the last bias learns, the class frequencies"""
    from bugs_data import _digit_vectors
    x, y = _digit_vectors()
    lin = nn.Linear if fixed else _ADFLinear
    model = nn.Sequential(lin(64, 128), nn.ReLU(), lin(128, 64), nn.ReLU(), lin(64, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- added in a second pass (same rules: truths written before any run under the tool) ----
def _shapes(n_per=100, n_points=128, seed=0):
    "Point clouds `(n, 3, n_points)` of four shape classes (sphere, cube surface, cylinder, cone), scaled and placed at random; class labels"
    g, xs, ys = _gen(seed), [], []
    for k in range(4):
        u, v = torch.rand(n_per, n_points, generator=g), torch.rand(n_per, n_points, generator=g)
        if k == 0: p = F.normalize(torch.randn(n_per, 3, n_points, generator=g), dim=1)
        elif k == 1:
            p = 2 * torch.rand(n_per, 3, n_points, generator=g) - 1
            face = torch.randint(0, 3, (n_per, n_points), generator=g)
            p.scatter_(1, face[:, None], torch.sign(p.gather(1, face[:, None])))
        else:
            r = torch.ones_like(u) if k == 2 else 1 - v
            p = torch.stack([r * torch.cos(6.283 * u), r * torch.sin(6.283 * u), 2 * v - 1], 1)
        scale = 0.5 + torch.rand(n_per, 1, 1, generator=g)
        xs.append(p * scale + 3 * torch.randn(n_per, 3, 1, generator=g)); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

def _unit_sphere(p):
    "The dataset's normalisation: zero mean, then divided by the largest distance from the centre (0/0 for a cloud of one point)"
    p = p - p.mean(-1, keepdim=True)
    return p / p.norm(dim=1).max(-1).values[:, None, None]

@case("https://github.com/fxia22/pointnet.pytorch/issues/58",
      "one model of the custom dataset is a single point repeated: the zero-mean, unit-sphere normalisation divides 0 by 0 and its points are NaN",
      {'nonfinite_input'}, epochs=2, lr=1e-3)
def point_cloud_normalised_to_nan(fixed):
    """'after training around 10-20 batches of examples, the loss goes into NAN'; the maintainer: 'Can you also make sure your
    data doesn't have nan?'; the reporter: 'there were NAN's in the input to the network. These NaN's were generated after the
    Zero Mean and Normalization step for one model only. For time being I have removed that particular model from the dataset
    and was able to train.' PointNet's classifier, scaled down (shared 1×1 convolutions with BatchNorm, a max pool, two linear
    layers), on synthetic point clouds of four shapes, one of them degenerate; Adam. The twin leaves that model out"""
    x, y = _shapes()
    x[37] = x[37, :, :1]   # a degenerate model: every point the same
    if fixed: x, y = torch.cat([x[:37], x[38:]]), torch.cat([y[:37], y[38:]])
    model = nn.Sequential(nn.Conv1d(3, 32, 1), nn.BatchNorm1d(32), nn.ReLU(), nn.Conv1d(32, 64, 1), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
    return Learner(tensor_dls(_unit_sphere(x), y, bs=16), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _housing(n=4000, seed=0):
    "California-housing-like districts on their raw scales: income, age, rooms, bedrooms, population, occupancy, latitude, longitude; value in $100,000s"
    g = _gen(seed)
    inc = (torch.exp(1.3 + 0.45 * torch.randn(n, generator=g))).clamp(0.5, 15)
    age, rooms = 1 + 51 * torch.rand(n, generator=g), (4 + 0.6 * inc + torch.randn(n, generator=g)).clamp(1, 12)
    beds, pop = 1 + 0.1 * torch.randn(n, generator=g), torch.exp(7.2 + 0.7 * torch.randn(n, generator=g))
    occ, lat = (2 + torch.rand(n, generator=g) * 2), 32 + 10 * torch.rand(n, generator=g)
    lon = -124 + 10 * torch.rand(n, generator=g)
    value = 0.45 * inc + 0.01 * age - 0.25 * (lat - 36).abs() - 0.2 * (occ - 3) + 0.1 * torch.randn(n, generator=g)
    return torch.stack([inc, age, rooms, beds, pop, occ, lat, lon], 1), value.clamp(0.15, 5).unsqueeze(1)

class _WideAndDeep(nn.Module):
    "The book's wide & deep regressor: features 0-4 go wide, 2-7 deep (two dense layers of 30), both joined before the output; `norm` standardises each input as the fix's `Normalization` layers"
    def __init__(self, mean=None, std=None):
        super().__init__()
        self.register_buffer('mean', torch.zeros(8) if mean is None else mean)
        self.register_buffer('std', torch.ones(8) if std is None else std)
        self.deep, self.output = nn.Sequential(nn.Linear(6, 30), nn.ReLU(), nn.Linear(30, 30), nn.ReLU()), nn.Linear(5 + 30, 1)
    def forward(self, x):
        x = (x - self.mean) / self.std
        return self.output(torch.cat([x[:, :5], self.deep(x[:, 2:])], 1))

@case("https://github.com/ageron/handson-ml3/pull/20",
      "the book's wide & deep regressor feeds the housing features unnormalised (populations in thousands, longitudes near -120)",
      {'input_scale'}, epochs=4, lr=1e-3)
def wide_and_deep_unnormalised(fixed):
    """'I noticed the wide and deep example is using non-normalized inputs which leads to performance degradation'; the author:
    'Oh great catch, thanks a lot!' (merged; the twin standardises both inputs with the training set's statistics). The chapter's
    wide & deep model on synthetic California-like districts, MSE, Adam at 1e-3 as the book, batches of 64"""
    x, y = _housing()
    mean, std = (x[:3200].mean(0), x[:3200].std(0)) if fixed else (None, None)
    return Learner(tensor_dls(x, y, bs=64), _WideAndDeep(mean, std), loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

class _TemporalConv(nn.Module):
    "A long-sequence classifier, scaled down (ViS4mer's S4 blocks replaced by dilated temporal convolutions): frame features in, a class out"
    def __init__(self, n_in=8, hid=32, n_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(n_in, hid, 3, padding=1), nn.GELU(), nn.Conv1d(hid, hid, 3, padding=2, dilation=2), nn.GELU(),
                                 nn.Conv1d(hid, hid, 3, padding=4, dilation=4), nn.GELU(), nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(hid, n_out))
    def forward(self, x): return self.net(x.transpose(1, 2))

@case("https://github.com/md-mohaiminul/ViS4mer/issues/4",
      "`ReduceLROnPlateau` keeps its default mode `min` while it is stepped with the validation accuracy: the rate is cut whenever accuracy rises",
      {'lr_too_low'}, epochs=8, lr=1e-3)
def plateau_scheduler_wrong_mode(fixed):
    """'ReduceLROnPlateau by default assumes a min metric ... In LVU tasks it used for accuracy metric, but the mode is not
    changed. Is this expected?'; the author: 'That's a very good observation. I guess it was not intended. You can try changing
    the mode of ReduceLROnPlateau to max.' A temporal classifier of frame features (the digits read as sequences of eight rows),
    fastai's Adam (decoupled weight decay, as AdamW), fastai's `ReduceLROnPlateau` on the validation accuracy with patience 1 and
    factor 5; `comp=np.less` is PyTorch's mode `min`. No layer misbehaves: the steps shrink while the model is still learning"""
    import numpy as np
    from fastai.callback.tracker import ReduceLROnPlateau
    from bugs_data import _digit_vectors
    x, y = _digit_vectors()
    x = x.view(-1, 8, 8)   # each digit read as a sequence of 8 rows
    sched = ReduceLROnPlateau(monitor='accuracy', comp=np.greater if fixed else np.less, patience=1, factor=5.)
    return Learner(tensor_dls(x, y, bs=32), _TemporalConv(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy, cbs=[sched])
