"""Bug zoo, a tenth GitHub family (issue 45): from the issues and pull requests of small research repositories no other
family cites (GaNDLF, torch_brain, rul-adapt, simulated-unsupervised-tensorflow). See `bugzoo.py`. Each case cites its
thread; its truth (`kinds`, `layer`) was written and committed before the case was ever run under the tool. Cases were
chosen for how common the bug is (training metrics scored against labels in another order than the predictions, an
attention mask turned into a bias the wrong way round, a hand-written distance whose square root meets 0, a residual
block whose second convolution reads the block's input so that its first is never trained), never for whether the tool
catches it. The misaligned training metric leaves every statistic of training healthy (the loss and the validation are
right; only the reported training score is wrong): its docstring says so. Each bug was checked with plain fastai before
any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _gen, _digit_images


# ---- evaluation: training metrics against ground truth in the dataset's order ----
class _OverallTrainMetrics(Callback):
    """GaNDLF's overall training metrics: each batch's predicted classes are written into an array at the batch's slice;
    at the epoch's end the array is scored against a ground-truth array. As the bug had it, the ground truth is the
    training set's labels in the dataset's order (`sorted_gt`); as fixed, each batch's own labels go to its slice"""
    order = 90
    def __init__(self, sorted_gt): self.sorted_gt, self.values = sorted_gt, []
    def before_epoch(self):
        ys = torch.stack([y for _, y in self.dls.train.dataset])
        self.gt = ys.clone() if self.sorted_gt else torch.zeros_like(ys)
        self.pred, self.i = torch.full_like(ys, -1), 0
    def after_batch(self):
        if not self.training: return
        bs = len(self.learn.yb[0])
        sl = slice(self.i * bs, (self.i + 1) * bs)
        self.pred[sl] = self.learn.pred.detach().argmax(1)
        if not self.sorted_gt: self.gt[sl] = self.learn.yb[0]
        self.i += 1
    def after_train(self):
        seen = self.pred >= 0   # the rows a `drop_last` loader never reached are left out
        self.values.append(float((self.pred[seen] == self.gt[seen]).float().mean()))

@case("https://github.com/mlcommons/GaNDLF/pull/870",
      "the training loop scores the epoch's predictions, taken in the shuffled loader's order, against the labels in the dataset's order",
      {'labels_misaligned'}, epochs=5, lr=1e-3)
def train_metrics_ground_truth_unshuffled(fixed):
    """'Made train batches order same as gt': 'there is a bug with the training pipeline, where the data and ground
    truth label are getting shuffled separately'; the merged workaround turned the training loader's shuffle off, and
    the fix it points to (#868, 'Turning shuffle back on in the PR with fix') builds the ground-truth array from each
    batch's labels, 'sorted in the same order as predictions and as train_dataloader'. The model, its loss and its
    validation are sound: only the overall training metrics compare each prediction with another sample's label. No
    per-layer statistic can see it. The digits as standardised vectors, an MLP (64-128-10), cross-entropy, Adam at 1e-3,
    a shuffled training loader; a callback fills GaNDLF's two arrays and scores them after each epoch (`values`); the
    twin writes each batch's labels into the ground truth beside its predictions. Measured (seeds 0 and 1): the reported
    training accuracy stays at 0.09 to 0.10 over 5 epochs while the validation accuracy reaches 0.94 and 0.96; the twin
    reports 0.62 and 0.60 after the first epoch, 0.95 and 0.96 after the fifth. Both runs train the same (batch losses
    end at 0.08 of their first)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), model, loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam),
                   cbs=[_OverallTrainMetrics(sorted_gt=not fixed)])


# ---- a mask the wrong way round ----
def _unit_sets(n=1200, n_units=16, n_classes=4, length=32, seed=0):
    """Variable-length sets of unit tokens (ids 1..`n_units`, 0 for padding), padded to `length` so every row has
    padding; half of a sample's tokens come from its class's group of units, half from all units"""
    g = _gen(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    x = torch.zeros(n, length, dtype=torch.long)
    per = n_units // n_classes
    for i in range(n):
        k = int(torch.randint(6, length - 7, (1,), generator=g))
        own = 1 + y[i] * per + torch.randint(0, per, (k,), generator=g)
        anyu = 1 + torch.randint(0, n_units, (k,), generator=g)
        x[i, :k] = torch.where(torch.rand(k, generator=g) < 0.5, own, anyu)
    return x, y

class _MaskedCrossAttention(nn.Module):
    """torch_brain's cross-attention as its xformers path computed it: a boolean context mask (True: take part) turned
    into an additive bias, `-inf` where the mask is False (fixed) or, as the bug had it, where it is True"""
    def __init__(self, d, heads=2, fixed=True):
        super().__init__()
        self.q, self.k, self.v, self.out = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.heads, self.fixed = heads, fixed
    def forward(self, xq, xc, mask):
        b, h = xc.shape[0], self.heads
        def split(t): return t.unflatten(-1, (h, -1)).transpose(1, 2)   # (B, N, D) -> (B, H, N, D/H)
        q, k, v = split(self.q(xq).expand(b, -1, -1)), split(self.k(xc)), split(self.v(xc))
        bias = mask.float().masked_fill(mask.logical_not() if self.fixed else mask, float('-inf'))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias[:, None, None, :])
        return self.out(o.transpose(1, 2).flatten(-2))

class _LatentReader(nn.Module):
    "POYO's shape, scaled down: unit embeddings, learnt latent queries cross-attending to the tokens, a linear readout"
    def __init__(self, fixed, n_units=16, d=32, n_latent=4, n_classes=4):
        super().__init__()
        self.emb = nn.Embedding(n_units + 1, d, padding_idx=0)
        self.latents = nn.Parameter(torch.randn(1, n_latent, d))
        self.attn = _MaskedCrossAttention(d, fixed=fixed)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(n_latent * d, n_classes))
    def forward(self, x): return self.head(self.attn(self.latents, self.emb(x), x != 0))

@case("https://github.com/neuro-galaxy/torch_brain/pull/74",
      "the context mask is turned into an attention bias the wrong way round: the latents attend to the padding only, never to the tokens",
      {'ignores_input', 'constant_output'}, layer='attn', epochs=5, lr=3e-3)
def attention_mask_inverted_to_padding(fixed):
    """'Bugfix: Inverted mask in `xformers` rotary attention forward': 'The mask to bias transformation in
    `rotary_attn_xformers_func` is currently the opposite of what it should be'; the bias was
    `attn_mask.float().masked_fill(attn_mask, float("-inf"))`, the fix masks `attn_mask.logical_not()`; 'It wasn't
    learning at all when the mask was flipped (train loss wouldn't go down)' (merged). With the bias inverted every real
    token gets `-inf` and only the padding takes part: the output no longer depends on the input. Sets of 6 to 24 unit
    tokens (16 units; half of a sample's tokens from its class's 4 units) padded to 32 so that every row has padding (a
    row with none would be all `-inf`, NaN), unit embeddings with a zero padding vector, 4 learnt latents
    cross-attending to the tokens (2 heads, width 32, no rotary embedding: the bug is in the bias alone), a linear
    readout, cross-entropy, Adam at 3e-3; the twin masks the padding. Measured (seeds 0 and 1): the loss stays at ln 4
    (1.39; batch losses end at 1.00 of their first, validation 1.39), every sample gets the same output (its spread over
    a validation batch below 1e-8) and the accuracy is the share of the class it names (0.22 to 0.25); the twin's loss
    falls to 0.06 of its first (validation 0.11 and 0.12, accuracy 0.97 and 0.96)"""
    x, y = _unit_sets()
    return Learner(tensor_dls(x, y, bs=32), _LatentReader(fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- numerics: a square root at 0 in a hand-written distance ----
def _degradation(n=600, sensors=4, window=30, seed=0):
    """Run-to-failure windows of two domains: sensors drift up as the remaining useful life (RUL, capped at 125, /125)
    runs out, plus noise; the target domain's sensors are rescaled and offset. Both domains' windows, the source's
    RUL"""
    g = _gen(seed)
    def windows(scale, shift):
        rul = torch.randint(0, 200, (n,), generator=g).float()
        t = rul[:, None] + torch.arange(window - 1, -1, -1.)          # the RUL at each step of the window
        w = torch.rand(sensors, generator=g) + 0.5
        x = torch.exp(-t[:, None, :] / 60) * w[None, :, None] * 3 + 0.2 * torch.randn(n, sensors, window, generator=g)
        return x * scale + shift, (rul.clamp(max=125) / 125)[:, None]
    xs, ys = windows(1., 0.)
    xt, _ = windows(1.5, 0.5)
    return torch.stack([xs, xt], 1), ys

class _AdaptNet(nn.Module):
    "A 1-d convolutional feature extractor shared by both domains and a RUL regressor; keeps both domains' features"
    def __init__(self, sensors=4, feats=16):
        super().__init__()
        self.extractor = nn.Sequential(nn.Conv1d(sensors, 16, 5), nn.ReLU(), nn.Conv1d(16, 16, 5), nn.ReLU(),
                                       nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, feats), nn.ReLU())
        self.regressor = nn.Linear(feats, 1)
    def forward(self, x):
        fs, ft = self.extractor(x[:, 0]), self.extractor(x[:, 1])
        self.feats = fs, ft
        return self.regressor(fs)

def _mmd(source, target, eps, num_kernels=5):
    """rul-adapt's `MaximumMeanDiscrepancyLoss`: pairwise distances `sqrt((x - y)**2 + eps).sum(-1)` (`eps=0` as the bug
    had it) over both batches, Gaussian kernels whose bandwidths come from the mean distance, and the discrepancy,
    the mean of `s2s + t2t - 2 * s2t`"""
    feats = torch.cat([source, target])
    d = torch.sqrt((feats[:, None] - feats[None, :]) ** 2 + eps).sum(-1)
    n = len(feats)
    bw = (n * n - n) / d.detach().sum() / 2 ** (num_kernels // 2)
    k = sum(torch.exp(-d * bw * 2 ** i) for i in range(num_kernels)) / num_kernels
    b = len(source)
    return (k[:b, :b] + k[b:, b:] - 2 * k[:b, b:]).mean()

def _rul_mmd_loss(model, eps):
    "The regression loss on the source domain plus the MMD between the two domains' features"
    def loss(pred, y): return F.mse_loss(pred, y) + _mmd(*model.feats, eps=eps)
    return loss

@case("https://github.com/tilman151/rul-adapt/pull/22",
      "a hand-written pairwise distance takes `sqrt((x - y)**2)`: on the diagonal (each feature against itself) the square root meets 0 and its gradient is NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=3, lr=1e-3)
def mmd_distance_sqrt_of_zero(fixed):
    """'fix: introduce epsilon for pairwise euclidean': 'Gradient of euclidean distance is not defined for a distance of
    zero. Introducing an epsilon solves the issue' (merged; the commit adds a test that the MMD's backward gives no
    NaN). The library's MMD compares the concatenated source and target features with themselves, so the distance
    matrix's diagonal is always 0: the forward pass is finite, the backward pass of `sqrt` there is `inf * 0`, NaN, and
    the first step writes NaN into every weight of the extractor (the regressor's gradient, from the MSE alone, stays
    finite). Synthetic run-to-failure windows (4 sensors, 30 steps, RUL capped at 125 and scaled to [0, 1]) from a
    source domain and a rescaled target domain, a 1-d CNN extractor shared by both, a linear regressor, MSE on the
    source plus the library's 5-kernel MMD between the two domains' features, Adam at 1e-3; the twin adds the fix's
    `1e-7` under the root. Measured (seeds 0 and 1): the first batch's loss is finite (0.91 and 0.76), the 44 after it
    NaN, and so is the validation; the twin's falls to 0.67 and 0.59 of its first (validation 0.48 and 0.40, from 0.69
    and 0.57 after the first epoch)"""
    x, y = _degradation()
    model = _AdaptNet()
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=_rul_mmd_loss(model, 1e-7 if fixed else 0.),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- a layer never trained: a residual block's second convolution reads the block's input ----
class _ResBlock(nn.Module):
    """SimGAN's `resnet_block`: conv1 (ReLU), conv2 (no activation), the input added back, a ReLU. As the bug had it,
    conv2 reads the block's input rather than conv1's output (`skip_conv1`): conv1 runs, but its output is never used"""
    def __init__(self, c, skip_conv1):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)
        self.skip_conv1 = skip_conv1
    def forward(self, x):
        h = F.relu(self.conv1(x))
        return F.relu(x + self.conv2(x if self.skip_conv1 else h))

class _ResNetSmall(nn.Module):
    "A stem convolution, two of the repository's residual blocks, global pooling, a linear head"
    def __init__(self, skip_conv1, c=16, n_out=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU())
        self.blocks = nn.Sequential(_ResBlock(c, skip_conv1), _ResBlock(c, skip_conv1))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, n_out))
    def forward(self, x): return self.head(self.blocks(self.stem(x)))

@case("https://github.com/carpedm20/simulated-unsupervised-tensorflow/pull/12",
      "each residual block's second convolution is applied to the block's input instead of the first convolution's output: the first convolution never gets a gradient",
      {'gradient_flow', 'frozen'}, epochs=6, lr=3e-3)
def resnet_block_conv1_output_unused(fixed):
    """'Update layers.py': 'fixed a mistake in layers/resnet_block': `conv2d(inputs, ...)` for the block's second
    convolution became `conv2d(layer, ...)`; the author: 'Wow thanks. This was a serious mistake. I definitely should
    retrain the model and update the results' (merged). With the bug every block's conv1 is computed and thrown away:
    nothing it outputs reaches the loss, so its weights never get a gradient and never change, and each block is one
    convolution deep. The repository's block (two 3×3 convolutions of 64 channels, here 16, the input added back, ReLU)
    twice in a small classifier of the digits as 8×8 images (0..1), cross-entropy, Adam at 3e-3; the twin's conv2 reads
    conv1's output. Measured (seeds 0 and 1) over 6 epochs: both blocks' conv1 weights end exactly as they began (the
    twin's move by as much as 0.45 to 0.57); the batch losses end at 0.46 and 0.40 of their first (validation 1.10 and
    0.86, accuracy 0.61 and 0.73) against the twin's 0.21 and 0.25 (validation 0.50 and 0.64, accuracy 0.86 and 0.80)"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _ResNetSmall(skip_conv1=not fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))
