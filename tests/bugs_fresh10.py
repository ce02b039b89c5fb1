"""Bug zoo, family 17 (issue 45): a tenth fresh set, from GitHub issues of training repositories (CenterNet, chemprop,
nanoGPT, kornia, a focal-loss package, MONAI's tutorials, Fashion-MNIST, CoCa-pytorch). See `bugzoo.py`. Each case cites
its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever run, under the tool or not.
Cases were chosen for how common the bug is (a trainer that never clears its gradients, a BatchNorm whose running
statistics lag the batches', a learning rate too high for a GPT, a log of a probability that reached 0, a `pow` whose
gradient is infinite at 0, data sorted by class and split without a shuffle, an extractor that detaches the encoder),
never for whether the tool catches it. Two leave every per-layer statistic healthy: a training set of one class (the
loss falls to 0), a validation set of one class (training is sound; only what the validation measures is wrong)."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _small_cnn
from bugs_fresh import _gen
from bugs_fresh_loop import _NoZeroGradPlain


# ---- the loop: no zero_grad ----
def _centre_heatmaps(n=480, size=16, seed=0):
    "Object centres: noisy images with a bright square, and CenterNet's Gaussian heatmap `(1, size, size)` peaking at 1 on it"
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(size * 1.), torch.arange(size * 1.), indexing='ij')
    c = torch.randint(2, size - 2, (n, 2), generator=g)
    x, heat = 0.3 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, 1, size, size)
    for i, (cy, cx) in enumerate(c.tolist()):
        x[i, 0, cy - 1:cy + 2, cx - 1:cx + 2] += 1.
        heat[i, 0] = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 2)
    return x, heat

class _CentreNet(nn.Module):
    "CenterNet's shape, scaled down: a small convolutional backbone and a heatmap head whose sigmoid is clamped to [1e-4, 1 - 1e-4]"
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.hm = nn.Conv2d(32, 1, 1)
        with torch.no_grad(): self.hm.bias.fill_(-2.19)   # CenterNet's prior on the heatmap head
    def forward(self, x): return self.hm(self.body(x)).sigmoid().clamp(1e-4, 1 - 1e-4)

def _centernet_focal(pred, gt):
    "CenterNet's penalty-reduced focal loss on heatmaps: positives where the heatmap is 1, negatives weighted by (1 - gt)^4"
    pos, neg = gt.eq(1).float(), gt.lt(1).float()
    pos_loss = (torch.log(pred) * (1 - pred) ** 2 * pos).sum()
    neg_loss = (torch.log(1 - pred) * pred ** 2 * (1 - gt) ** 4 * neg).sum()
    return -(pos_loss + neg_loss) / pos.sum().clamp(min=1)

@case("https://github.com/xingyizhou/CenterNet/issues/928",
      "a re-organised CenterNet trainer calls `loss.backward()` and `optimizer.step()` but never `optimizer.zero_grad()`",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=6, lr=5e-4)
def centernet_trainer_without_zero_grad(fixed):
    """'loss since 2nd epoch becomes huge and unchanged !!!': re-organising CenterNet's code to train on their own data,
    'The problem is that loss since 2nd epoch becomes huge and unchanged'; the poster's fix: `optimizer.zero_grad()` after
    `optimizer.step()`. CenterNet's heatmap head scaled down (two convolutions, the head's bias at -2.19, the clamped
    sigmoid, the penalty-reduced focal loss) on noisy 16×16 images with one bright square, batches of 4, Adam at 5e-4; the twin clears
    the gradients. Measured: the loss falls to 0.04 within 2 epochs, then jumps (a batch at 5.3; epochs' training losses 0.66,
    0.20, 0.30, 2.19, 1.48, 0.78, validation 0.19, 0.40, 1.36, 1.42, 3.28, 0.02); the twin's falls smoothly to 0.006
    (validation 0.009)"""
    x, h = _centre_heatmaps()
    return Learner(tensor_dls(x, h, bs=4), _CentreNet(), loss_func=_centernet_focal, opt_func=torch_opt(torch.optim.Adam),
                   cbs=[] if fixed else [_NoZeroGradPlain()])


# ---- modes: BatchNorm running statistics that lag ----
def _molecules(n=600, atoms=40, feats=16, seed=0):
    "Synthetic molecules: `atoms` atom-feature vectors each (non-negative, as one-hot features are), a property that sums over them"
    g = _gen(seed)
    x = (torch.rand(n, atoms, feats, generator=g) < 0.3).float() * torch.rand(n, atoms, feats, generator=g) * 3
    w = torch.randn(feats, generator=g)
    y = (torch.tanh(x @ w).sum(1, keepdim=True) - 2.) / 3.
    return x, y

class _SumMPNN(nn.Module):
    "chemprop's shape: a learnt atom encoder, a sum over the atoms (large, positive), a BatchNorm on the readout, a feed-forward head"
    def __init__(self, feats=16, hid=300, track=True):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(feats, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU())
        self.bn = nn.BatchNorm1d(hid, track_running_stats=track)
        self.ffn = nn.Sequential(nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, 1))
    def forward(self, x): return self.ffn(self.bn(self.encoder(x).sum(1)))

@case("https://github.com/chemprop/chemprop/issues/607",
      "a BatchNorm on the molecule readout normalises validation with running statistics that lag the training batches'",
      {'eval_stats_stale'}, layer='bn', epochs=3, lr=1e-3)
def readout_batchnorm_running_stats_lag(fixed):
    """'[BUG] [v2]: training loss much lower than test and validation loss': the readout of chemprop's message passing
    goes through a BatchNorm; a maintainer: 'the running estimates of the mean and variance ... are initialized with a mean
    of 0s and variance of 1s and then updated with a momentum (default 0.1). While the training loop uses the exact batch
    statistics, the validation loop uses the running estimates', and `BatchNorm1d(..., track_running_stats=False)` 'makes
    the big difference between the training loss and val loss go away'. Synthetic molecules of 40 atoms, a summed readout
    of 300 units (chemprop's hidden size), the BatchNorm, a feed-forward head, MSE, Adam at 1e-3, batches of 50 (chemprop's
    default); the twin builds the BatchNorm with `track_running_stats=False`. Measured: training losses 24.1, 14.8, 10.0 over
    3 epochs, validation 5.3, 63.1, 35.3; the twin trains identically (same batches, same statistics) and validates at
    13.2, 2.75, 2.66. No statistic of training differs: only evaluation does"""
    x, y = _molecules()
    return Learner(tensor_dls(x, y, bs=50), _SumMPNN(track=not fixed), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the optimiser: a learning rate too high for a GPT ----
def _text(n=640, block=32, vocab=24, seed=0):
    "Character sequences from a fixed random Markov chain of `vocab` symbols: inputs and next-symbol targets"
    g = _gen(seed)
    trans = torch.softmax(torch.randn(vocab, vocab, generator=g) * 3, 1)
    s = torch.zeros(n, block + 1, dtype=torch.long)
    s[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(block): s[:, t + 1] = torch.multinomial(trans[s[:, t]], 1, generator=g).squeeze(1)
    return s[:, :-1], s[:, 1:]

class _Block(nn.Module):
    "nanoGPT's block: pre-LayerNorm causal self-attention and a GELU MLP, each added back"
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

class _TinyGPT(nn.Module):
    "nanoGPT scaled down: token and position embeddings, 2 blocks, a final LayerNorm, a head tied to the token embedding"
    def __init__(self, vocab=24, block=32, d=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.Sequential(*[_Block(d, heads) for _ in range(layers)])
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for p in self.parameters():
            if p.dim() > 1: nn.init.normal_(p, 0, 0.02)
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x)))

def _lm_loss(logits, y): return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

@case("https://github.com/karpathy/nanoGPT/issues/136",
      "nanoGPT trained at a learning rate too high for its set-up: the loss goes to NaN after a while",
      {'lr_too_high', 'loss_diverging', 'nonfinite_loss'}, epochs=4)
def gpt_learning_rate_too_high(fixed):
    """'Loss becomes nan after training for ~2000 iterations': nanoGPT with a block size of 512 on V100s, 'receiving
    "loss: nan" after training for about 2000 iterations'; the answer: 'Try reducing learning rate'; the poster: 'Confirming
    this works. Thank you.' nanoGPT scaled down (2 blocks of width 64, tied head, weights N(0, 0.02)) on sequences of a
    random Markov chain, AdamW with nanoGPT's betas (0.9, 0.95) and weight decay 0.1, no clipping; the bug's rate 3e-2,
    the twin's 1e-3. Measured: no NaN came at this scale in 64 steps: the loss jumps to 4.9 on the third step, then stays
    at 2.8 to 2.9 (validation 2.88 to 2.58); the twin's falls from 3.19 to 1.43 (validation 1.42)"""
    x, y = _text()
    lr = 1e-3 if fixed else 3e-2
    return Learner(tensor_dls(x, y, bs=32), _TinyGPT(), loss_func=_lm_loss, lr=lr,
                   opt_func=torch_opt(torch.optim.AdamW, betas=(0.9, 0.95), weight_decay=0.1))


# ---- numerics: a log, and a pow, at 0 ----
class _SoftmaxMLP(nn.Module):
    "An MLP whose last layer is a softmax: the focal-loss package takes probabilities"
    def __init__(self, n_in=64, hid=64, n_out=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hid), nn.ReLU(), nn.Linear(hid, n_out))
        self.softmax = nn.Softmax(dim=-1)
    def forward(self, x): return self.softmax(self.body(x))

def _focal_on_probs(eps=0.0, gamma=2.):
    "The package's `FocalLoss` on probabilities: `-(1 - p_t)^gamma * log(p_t + eps)`, averaged (`eps=0` as it first was)"
    def loss(p, y):
        p_t = p.gather(1, y[:, None]).squeeze(1)
        return (-(1 - p_t) ** gamma * torch.log(p_t + eps)).mean()
    return loss

@case("https://github.com/mathiaszinnen/focal_loss_torch/issues/3",
      "a focal loss takes `torch.log(p_t)` of softmax probabilities: once a true class's probability underflows to 0 the loss is infinite",
      {'nonfinite_loss'}, epochs=4, lr=1e-3)
def focal_loss_log_of_zero_probability(fixed):
    """'Numerical issues with torch.log(p_t)': 'I run into numerical issues with the current implementation. This is due to
    the fact that the logarithm of 0 is not defined'; the proposed `torch.log(p_t + eps)`, and the maintainer: 'I fixed the
    issue using your suggestion!'. The package's usage (a softmax, then `FocalLoss` on the probabilities, at the paper's gamma of 2) on the
    digits' pixels as bytes (0..240, as MNIST's files hold them), an MLP, Adam at 1e-3; the twin adds `eps` (float64's, as the fix does)
    inside the log. Measured: the loss is NaN from the second batch on (175 of 176 batches), accuracy 0.11; the twin's
    falls from 20.6 to 0.41, accuracy 0.91"""
    x, y = digits_raw()
    eps = float(np.finfo(float).eps) if fixed else 0.
    return Learner(tensor_dls(x * 15, y, bs=32), _SoftmaxMLP(), loss_func=_focal_on_probs(eps), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _binary_focal_with_logits(eps_in_pow, alpha=0.25, gamma=0.5, eps=1e-8):
    "kornia's `binary_focal_loss_with_logits` as it was (`eps` in the logs only) or as fixed (`eps` in the `pow` too)"
    def loss(logits, t):
        p, e = logits.sigmoid(), eps if eps_in_pow else 0.
        return (-alpha * torch.pow(1. - p + e, gamma) * t * torch.log(p + eps)
                - (1 - alpha) * torch.pow(p + e, gamma) * (1. - t) * torch.log(1. - p + eps)).mean()
    return loss

@case("https://github.com/kornia/kornia/issues/918",
      "a binary focal loss with gamma < 1 raises `pow` of a probability of exactly 0 or 1: the loss is finite, its gradient NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=8, lr=5e-2)
def binary_focal_pow_nan_gradient(fixed):
    """'NaN gradients on backward pass with focal loss': 'I got `nan` gradients on backward pass when `torch.sig(prediction)`
    equals `1.` or `0.` and `0.<gamma<1.`'; ''nan' occurs during computation of gradients with respect to `torch.pow()`';
    the suggested fix (accepted): `eps` inside `torch.pow` too. The breast-cancer features standardised, a small MLP
    whose logits grow on the easy samples until the sigmoid is exactly 1 in float32, kornia's loss at gamma 0.5, Adam at
    1e-2; the twin puts `eps` in the `pow`. No statistic of the forward pass is NaN: the loss is finite; its gradient is not.
    Measured: the loss falls from 0.26 to 0.03 in the first epoch, then is NaN from the second on (94 of 112 batches);
    the twin's last losses are 0.08 of its first (validation 0.057 to 0.109)"""
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32).unsqueeze(1)
    return Learner(tensor_dls((x - x.mean(0)) / x.std(0), y, bs=32), nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 1)),
                   loss_func=_binary_focal_with_logits(fixed), opt_func=torch_opt(torch.optim.Adam))


# ---- data: sorted by class, split without a shuffle ----
def _sorted_digits(classes):
    "The digits of `classes` as images in 0..1, sorted by class (as files listed folder by folder are)"
    x, y = _digit_images()
    keep = torch.isin(y, torch.tensor(classes))
    x, y = x[keep], y[keep]
    order = torch.argsort(y, stable=True)
    return x[order], y[order]

def _split_dls(x, y, train_idx, valid_idx, bs=8):
    "fastai `DataLoaders` over the samples at `train_idx` (shuffled) and `valid_idx`"
    train = DataLoader([(x[i], y[i]) for i in train_idx.tolist()], bs=bs, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    return DataLoaders(train, DataLoader([(x[i], y[i]) for i in valid_idx.tolist()], bs=bs))

@case("https://github.com/Project-MONAI/tutorials/issues/122",
      "a 2-class classifier trains on the first files (all of the first class) and validates on the last (all of the other)",
      {'labels_one_class'}, epochs=5, lr=3e-3)
def trains_on_first_files_one_class(fixed):
    """'Plain zero accuracy': a 2-class 3D classifier (MONAI's DenseNet tutorial on the poster's MRI folders): 'I'm
    getting lowering loss scores across epochs, but accuracy is always zero'; the answer: 'your training set uses the first
    10 images (presumably from the AD folder), and your validation uses the last 10 images (presumably from DFT). I think
    you're missing a shuffle of the files: `random.shuffle(images)` otherwise you're only training your network with one
    class'; the poster: 'Thanks! Now it's working.' The digits 0 and 1 as 8×8 images sorted by class, a small CNN,
    cross-entropy, Adam at 3e-3; the bug takes the first 40 files to train and the last 40 to validate, the twin shuffles
    the files first and trains on all but the last 40 (the answer's `[:-10]`). No per-layer statistic need look wrong: the
    loss falls to 0 on one class. Measured: the training loss falls from 0.71 to 0.001,
    validation accuracy 0.0 every epoch, validation loss 1.03 to 6.95; the twin validates at accuracy 1.0 from its second
    epoch (loss 0.012)"""
    x, y = _sorted_digits([0, 1])
    idx = torch.randperm(len(x), generator=_gen(0)) if fixed else torch.arange(len(x))
    return Learner(_split_dls(x, y, idx[:-40] if fixed else idx[:40], idx[-40:]), _small_cnn(n_out=2), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/zalandoresearch/fashion-mnist/issues/3",
      "the dataset's files are sorted by class and the loader takes the first 5,000 samples to validate: the validation set is all 0s",
      {'labels_one_class'}, epochs=3, lr=1e-2)
def validation_first_samples_one_class(fixed):
    """'tensorflow's read_data_sets would yield a validation set with the same labels': Fashion-MNIST loaded with
    TensorFlow's MNIST reader, 'the validation set only contain 0 as labels'; the maintainer: 'We didn't shuffle the data
    when storing it, resulting all 0 labels first ... Tensorflow MNIST loader takes the first/last 5000 examples for the
    validation set', fixed by shuffling the files (#5). The digits as 8×8 images sorted by class, a small CNN,
    cross-entropy, Adam at 1e-2; the bug validates on the first 150 (all 0s, 150 of the 178) and trains on the rest, the twin shuffles
    first. Training is sound; only the validation is wrong: it measures one class. Measured: validation accuracy 0.0 over
    3 epochs (the 28 zeros left in training are too few to learn them yet), validation loss 3.8 to 4.1, while the training
    loss falls from 2.31 to 1.29; the twin validates at accuracy 0.10, 0.30, 0.63"""
    x, y = _sorted_digits(list(range(10)))
    n = 150   # 5,000 of 6,000: most of class 0
    idx = torch.randperm(len(x), generator=_gen(0)) if fixed else torch.arange(len(x))
    return Learner(_split_dls(x, y, idx[n:], idx[:n], bs=32), _small_cnn(), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- the architecture: an extractor that detaches the encoder ----
class _Extractor(nn.Module):
    "vit-pytorch's `Extractor` as it was: a forward hook on the encoder's last layer keeps `output.clone().detach()` as the tokens"
    def __init__(self, encoder, layer, detach=True):
        super().__init__()
        self.encoder, self.detach, self.latents = encoder, detach, None
        layer.register_forward_hook(self._hook)
    def _hook(self, module, inp, out):
        self.latents = out.clone().detach() if self.detach else out.clone()
    def forward(self, x):
        self.encoder(x)
        return self.latents

class _CoCaLike(nn.Module):
    "CoCa's image side, scaled down: a convolutional encoder's tokens through the extractor, attention pooling, a head"
    def __init__(self, detach=True, d=32, n_out=10):
        super().__init__()
        conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, d, 3, padding=1), nn.ReLU())
        self.extractor = _Extractor(conv, conv[3], detach)
        self.query = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pool = nn.MultiheadAttention(d, 4, batch_first=True)
        self.head = nn.Linear(d, n_out)
    def forward(self, x):
        tokens = self.extractor(x).flatten(2).transpose(1, 2)   # (batch, 64 positions, d)
        pooled = self.pool(self.query.expand(len(x), -1, -1), tokens, tokens, need_weights=False)[0]
        return self.head(pooled.squeeze(1))

@case("https://github.com/lucidrains/CoCa-pytorch/issues/6",
      "the image encoder's tokens come through an extractor that detaches them: the encoder gets no gradient and never learns",
      {'frozen', 'gradient_flow'}, epochs=4, lr=3e-3)
def extractor_detaches_image_encoder(fixed):
    """'Extractor in vit_pytorch will detach the tensor': 'The cloned tensor in `Extractor` will be detached. So gradient may
    not propagate back to image encoder'; the author: 'Yes you are right, should be fixed in 0.35.8 of vit-pytorch!'; the
    poster: 'The bug is fixed.' CoCa's image side scaled down (a two-layer convolutional encoder whose last layer is hooked
    as vit-pytorch's `Extractor` hooks it, attention pooling by one learnt query, a linear head) classifying the digits
    (CoCa's contrastive and captioning losses left out: cross-entropy), Adam at 3e-3; the twin's hook keeps
    `output.clone()`. Only the encoder's layers are wrong (their gradients are None: they are frozen by accident); the
    pooling and head learn on random features. Measured: the encoder's weights never change (their `.grad` is None); the
    loss stays at 2.30 for 2 epochs, then falls to 2.02 (validation accuracy 0.08, 0.15, 0.21, 0.34); the twin's falls to
    1.16 (accuracy 0.09, 0.35, 0.57, 0.71)"""
    x, y = _digit_images()
    return Learner(tensor_dls(x, y, bs=32), _CoCaLike(detach=not fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
