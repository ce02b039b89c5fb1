"""Bug zoo, an eleventh fresh family (issue 45): from a blog post about debugging a training run and from GitHub threads
no other family cites (DeepTab, aestetik, marin, gnina-torch, JAX's documentation, MAR, arcface-pytorch, ml-by-hand).
See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was
ever run, under the tool or not. Cases were chosen for how common the bug is (class codes given to a binary
cross-entropy as targets, the validation rows left in the training loader, augmentation strong enough to erase the
label, a plateau scheduler watching a loss in `max` mode, a loss summed over the batch, a learning rate kept when the
batch was made smaller, a square root at the edge of its domain in a margin head, a split that shuffles before slicing
one side only, weights stored in bfloat16 with no float32 master copy), never for whether the tool catches it. The two
leaky splits leave every statistic of training healthy (only the validation score is wrong); their docstrings say so.
Kinds that no check raises yet, assumed as a correct tool would name them: `valid_leak` (as in `bugs_fresh3`),
`loss_summed` (as in `bugs_fresh_loop`), and a new one, `augmentation_too_strong`. Each bug was checked with plain
fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _small_cnn
from bugs_fresh import _gen


# ---- targets ----
def _cancer():
    "The breast-cancer features standardised and the 0/1 diagnosis, as float `(n, 1)`"
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    x = torch.tensor(d.data, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), torch.tensor(d.target, dtype=torch.float32).unsqueeze(1)

def _positive(t): return ((t == 1) | (t == 7)).float()   # the true class, whether coded 0/1 or 5/7

def _coded_accuracy(out, t):
    "Accuracy of `out > 0` against the true class of targets coded 0/1 (the fix) or 5/7 (the bug)"
    return ((out > 0).float() == _positive(t)).float().mean()

@case("https://github.com/OpenTabular/DeepTab/pull/434",
      "the classifier's binary labels {5, 7} reach `BCEWithLogitsLoss` as they are: targets 5.0 and 7.0, not 0 and 1",
      {'target_range'}, epochs=5, lr=1e-3)
def bce_targets_raw_class_codes(fixed):
    """'fix(classifier): encode class labels to 0..K-1 for training': `fit` kept `classes_ = np.unique(y)` but never mapped
    `y` onto those indices, so raw labels reached the loss: '`{5,7}` Silent. BCE trains against targets 5.0/7.0 --
    perfectly separable data reached 47.75% accuracy vs 100% with `{0,1}`'; the fix maps labels to 0..K-1 with the sorted
    classes. With a target above 1 the binary cross-entropy has no minimum: its gradient pushes every logit up for ever.
    The breast-cancer features standardised, an MLP (30-64-64-1), `BCEWithLogitsLoss`, Adam at 1e-3; the bug codes the
    two classes 5 and 7, the twin 0 and 1. Measured: the loss falls from 0.39 through 0 to -84 in 5 epochs (validation
    -2.7 to -82) at an accuracy fixed at 0.637, the share of the larger class; the twin's falls from 0.69 to 0.09
    (validation 0.15, accuracy 0.96)"""
    x, y = _cancer()
    t = y if fixed else 5 + 2 * y
    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    return Learner(tensor_dls(x, t, bs=32), model, loss_func=nn.BCEWithLogitsLoss(), metrics=_coded_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- data ----
@case("https://github.com/ratschlab/aestetik/pull/12",
      "with a validation split the training loader still wraps the whole dataset: the validation rows are trained on",
      {'valid_leak'}, epochs=8, lr=1e-3)
def train_loader_holds_validation(fixed):
    """'datamodule: use train split subset in train_dataloader': 'When `validation_split > 0`, `setup()` builds
    `self.train_dataset` and `self.val_dataset` via `random_split`, but `train_dataloader` wraps `self.dataset` (the full
    set), so validation samples leak into training'; the fix gives the loader the training subset. Every layer is
    healthy and the run learns: only the validation score is wrong, measured on rows the model has fitted. No per-layer
    statistic can see it. A small sample of the digits (500 rows, 150 of them for validation) so that the model
    overfits, an MLP (64-256-256-10), cross-entropy, Adam at 1e-3; the twin trains on the 350 training rows only.
    Measured after 8 epochs: validation loss 0.046 at an accuracy of 0.987 against the twin's honest 0.165 and 0.947"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    idx = torch.randperm(len(x), generator=_gen(3))[:500]
    xt, yt, xv, yv = _split(x[idx], y[idx], n_valid=150)
    if not fixed: xt, yt = torch.cat([xt, xv]), torch.cat([yt, yv])   # the whole dataset
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/marin-community/marin/pull/2700",
      "the training set is cut from the shuffled data and the validation set from the unshuffled data: most validation rows are also trained on",
      {'valid_leak'}, epochs=8, lr=1e-3)
def split_after_shuffle_overlaps(fixed):
    """'Fix train and val set overlap bug by splitting before shuffling': 'when splitting a dataset into training and
    validation sets via `num_validation_sequences`, the two sets were overlapping (some samples show up in both sets).
    This happened because during training set construction the dataset was first shuffled and then sliced, while during
    validation set construction the dataset was sliced without shuffling'; the fix slices before shuffling (merged). Every
    layer is healthy and the run learns: only the validation score is wrong. No per-layer statistic can see it. The same
    small sample of the digits (500 rows, the first 150 for validation), the same MLP (64-256-256-10), cross-entropy,
    Adam at 1e-3; the bug's training rows are the shuffled data after its first 150, the twin's the rows after the
    validation slice. Measured: 99 of the 150 validation rows are trained on; after 8 epochs the validation loss is 0.104
    at an accuracy of 0.980 against the twin's honest 0.215 and 0.940"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    idx = torch.randperm(len(x), generator=_gen(3))[:500]
    x, y = x[idx], y[idx]
    xv, yv = x[:150], y[:150]                                            # sliced without shuffling
    order = torch.arange(150, 500) if fixed else torch.randperm(500, generator=_gen(4))[150:]   # the bug: shuffled, then sliced
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Learner(_dls(x[order], y[order], xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

class _Transforms(Callback):
    """The post's transforms on each batch: on training batches (if `aug`) a random crop of 3×3 pixels of the 8×8 image
    (its `RandomCrop(50)` of 128) resized back, a vertical flip half the time, brightness and contrast jittered by ±50%;
    then, on every batch, `Normalize([0.5], [0.5])`"""
    order = 1   # before the model sees the batch
    def __init__(self, aug, crop=3, seed=0): self.aug, self.crop, self.g = aug, crop, torch.Generator().manual_seed(seed)
    def augment(self, x):
        n, s, c = len(x), x.shape[-1], self.crop
        out = torch.empty_like(x)
        for i in range(n):
            r, q = torch.randint(0, s - c + 1, (2,), generator=self.g).tolist()
            out[i] = F.interpolate(x[i:i + 1, :, r:r + c, q:q + c], size=(s, s), mode='bilinear', align_corners=False)[0]
        flip = torch.rand(n, generator=self.g) < 0.5
        out[flip] = out[flip].flip(-2)
        b = 1 + (torch.rand(n, 1, 1, 1, generator=self.g) - 0.5)
        k = 1 + (torch.rand(n, 1, 1, 1, generator=self.g) - 0.5)
        m = out.mean((1, 2, 3), keepdim=True)
        return ((out - m) * k + m) * b
    def before_batch(self):
        x = self.learn.xb[0]
        if self.training and self.aug: x = self.augment(x)
        self.learn.xb = ((x - 0.5) / 0.5,)

@case("https://www.mo4tech.com/image-classification-record-a-sinkhole-binary-classification-network-using-crossentropyloss-loss-has-been-at-0-69-do-not-converge-problem.html",
      "training augmentation so strong (a crop of 39% of the side, vertical flips, colour jitter) that it erases what tells the classes apart: the loss stays at ln 2",
      {'augmentation_too_strong'}, epochs=6, lr=1e-2)
def augmentation_erases_the_label(fixed):
    """'Binary classification network using CrossEntropyLoss: loss has been at 0.69, does not converge': a ResNet-18
    trained from scratch on cats and dogs, `Resize((128, 128))`, `RandomVerticalFlip()`, `RandomCrop(50)`,
    `ColorJitter(brightness=0.5, contrast=0.5, hue=0.5)`, `Normalize(0.5, 0.5)`: 'Loss always stays near 0.69 ... the
    network has not learned anything at all'; the author found 'Are you using too much data enhancement?' in a list of
    pitfalls, commented the augmentations out, 'Then it converges'. The digits 3 against 8 as 8×8 images, a small CNN
    from scratch, cross-entropy, Adam at 1e-2, the post's augmentations scaled to 8×8 on the training batches only; the
    twin only normalises. Every layer can be healthy: the inputs the model trains on no longer hold the label. Measured:
    the training loss stays at 0.71 to 0.69 for 6 epochs (0.96 of its first), validation 0.69 to 0.66; the twin's falls to
    0.51 of its first (validation 0.38, accuracy 0.84)"""
    x, y = _digit_images('unit')
    keep = (y == 3) | (y == 8)
    x, y = x[keep], (y[keep] == 8).long()
    xt, yt, xv, yv = _split(x, y, n_valid=100)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _small_cnn(n_out=2), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_Transforms(aug=not fixed)])


# ---- the optimiser and its schedule ----
class _PlateauScheduler(Callback):
    "`ReduceLROnPlateau(optimizer, mode=..., factor=0.1, patience=0)` stepped on the validation loss after each epoch"
    order = 60
    def __init__(self, mode): self.mode = mode
    def before_fit(self): self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt.opt, mode=self.mode, factor=0.1, patience=0)
    def after_epoch(self): self.sched.step(float(self.recorder.values[-1][1]))

@case("https://github.com/RMeli/gnina-torch/pull/57",
      "a `ReduceLROnPlateau` watching the validation loss is built with `mode='max'`: each epoch the loss falls counts as no improvement and the learning rate is cut",
      {'lr_too_low', 'loss_stalled'}, epochs=6, lr=0.02)
def plateau_scheduler_max_mode_on_loss(fixed):
    """'LR scheduler mode=max -> mode=min': 'The scheduler should be using plateauing based on decreasing losses, not
    increasing -- correct?'; merged 'since it's a simple bugfix'. In `max` mode a loss that falls is a metric that
    stopped rising: every epoch that goes well cuts the learning rate tenfold, and training stalls. The digits as
    standardised vectors, an MLP (64-128-10), cross-entropy, SGD with momentum 0.9 at 0.02, `ReduceLROnPlateau(factor=0.1,
    patience=0)` stepped on the validation loss after each epoch; the twin's scheduler is in `min` mode. Measured: the
    rate is cut tenfold after each epoch from the second on (0.02 to 2e-7 by the sixth) and the validation loss stops at
    0.333 from the third epoch (accuracy 0.933); the twin's keeps 0.02 and reaches 0.142 (accuracy 0.978)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), cbs=[_PlateauScheduler('min' if fixed else 'max')])

def _summed_ce(out, y):
    "The notebook's loss: minus the sum over the batch of the log-softmax at the target (a sum, not a mean)"
    return -F.log_softmax(out, 1).gather(1, y.unsqueeze(1)).sum()

@case("https://github.com/jax-ml/jax/pull/3113",
      "the documentation's MLP loss sums the cross-entropy over the batch: with larger batches the gradient grows with the batch and explodes",
      {'loss_summed', 'lr_too_high', 'loss_diverging', 'exploding_grad'}, epochs=8)
def summed_loss_large_batch_explodes(fixed):
    """'Correct notebooks for neural networks in docs': 'Loss was calculated using `np.sum` without accounting for the
    number of samples. This worked for the batch size of `128` in combination with the low learning rate but lead to
    exploding gradients for larger batches. `np.mean` is used now with a larger learning rate' (merged). The notebook's
    MLP (ReLU layers of 512, here on the 64 pixels of the digits scaled to [0, 1]), plain SGD at its step size 0.01,
    batches of 256; the twin averages the loss and steps at 0.5. Measured: the summed loss starts at 590, passes 1e3 in
    the second epoch and 4e14 by the sixth, at chance accuracy (0.08 to 0.14); the twin's falls from 2.30 to 0.35
    (accuracy 0.92)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    return Learner(tensor_dls(x / 16, y, bs=256), model, loss_func=nn.CrossEntropyLoss() if fixed else _summed_ce,
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD), lr=0.5 if fixed else 0.01)

@case("https://github.com/KovenYu/MAR/issues/5",
      "the batch is made smaller and the default learning rate kept: the loss turns NaN after a couple of epochs",
      {'lr_too_high', 'loss_diverging'}, epochs=4)
def small_batch_default_lr_nan(fixed):
    """'question about loss': 'the value of LOSS is NAN when I run the code. I only changed the value of batchsize, the rest
    of the parameters all used the default values' (64; NaN 'after 2 epochs'); the author: 'the nan comes out because the
    default learning rate is too large for a small batch size like 64 ... so we need to turn down the lr'. The digits as
    standardised vectors, an MLP (64-256-256-10), cross-entropy, SGD with momentum 0.9 at a rate that suits batches of
    256, run at batches of 8; the twin turns the rate down in proportion. Measured: at batches of 256 the rate 0.5 trains
    (accuracy 0.986 in 20 epochs); at 8 the training loss blows up to 1e5 in the first two epochs and the network ends at
    chance (accuracy 0.11, validation loss 1.1e5) without a NaN (a rate of 1.0 gives the thread's NaN, but diverges at
    256 too); the twin's loss falls to 0.005 of its first (accuracy 0.975)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=8), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), lr=0.5 / 32 if fixed else 0.5)


# ---- numerics ----
class _ArcMargin(nn.Module):
    "arcface-pytorch's `ArcMarginProduct`: cos(θ + m) at the target class, scaled by `s`; the sine as `sqrt(1 - cos²)`"
    def __init__(self, n_in, n_out, s=30., m=0.5, clamp=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        nn.init.xavier_uniform_(self.weight)
        self.s, self.m, self.clamp = s, m, clamp
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th, self.mm = math.cos(math.pi - m), math.sin(math.pi - m) * m
        self.label = None
    def forward(self, x):
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        sq = 1.0 - cosine.pow(2)
        sine = torch.sqrt(sq.clamp(1e-6, 1) if self.clamp else sq)
        phi = cosine * self.cos_m - sine * self.sin_m
        phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        if self.label is None: return self.s * cosine
        one_hot = F.one_hot(self.label, cosine.shape[1]).float()
        return self.s * (one_hot * phi + (1 - one_hot) * cosine)

class _ArcFaceNet(nn.Module):
    "An embedding MLP and the margin head; the head sees the labels during training as the repository's loop passes them"
    def __init__(self, clamp, emb=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, emb))
        self.margin = _ArcMargin(emb, 10, clamp=clamp)
    def forward(self, x): return self.margin(self.body(x))

class _PassLabels(Callback):
    "Give the margin head each training batch's labels (`metric_fc(feature, label)` in the repository's loop)"
    order = 1
    def before_batch(self): self.model.margin.label = self.learn.yb[0] if self.training else None

@case("https://github.com/ronghuaiyang/arcface-pytorch/issues/91",
      "the ArcFace head computes the sine as `sqrt(1 - cos²)` without a clamp: at cos² = 1 (or a rounding above it) the square root gives NaN",
      {'nonfinite'}, layer='margin', epochs=6, lr=1e-2)
def arcface_sqrt_at_domain_edge(fixed):
    """'Request to avoid loss to NaN': 'change the minimum value of the square root to the epsilon ... `sine =
    torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(1e-6, 1))` ... The differential function of √x, 1/(2√x), becomes `inf`
    near x=0, i.e., an exploding gradient. This results in a loss of `nan` as reported in #81'. The repository's
    `ArcMarginProduct` (s=30, m=0.5) on an MLP embedding of the digits (2 dimensions, so that features meet their class
    weights quickly: at 3 no cosine came near 1 in 6 epochs), cross-entropy, Adam at 1e-2; the twin clamps as the issue
    asks. Measured: the loss is NaN from the fourth batch on; the twin's falls to 0.29 of its first (accuracy 0.40 to 0.52:
    2 dimensions hold 10 classes poorly)"""
    x, y = digits_raw()
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), _ArcFaceNet(clamp=fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam), cbs=[_PassLabels()])


# ---- precision ----
def _ids(n=3000, fields=4, per_field=20, seed=0):
    "Rows of one categorical id per field (offset per field) and a 0/1 label drawn from a hidden value per id"
    g = _gen(seed)
    x = torch.randint(0, per_field, (n, fields), generator=g) + per_field * torch.arange(fields)
    w = torch.randn(fields * per_field, generator=g)
    return x, (w[x].sum(1) > 0).long()

class _EmbeddingClassifier(nn.Module):
    "An embedding per id (PyTorch's N(0, 1) initialisation), concatenated over the fields, and a linear head"
    def __init__(self, n_ids=80, fields=4, d=8, bf16=False, autocast=False):
        super().__init__()
        self.emb, self.head, self.autocast = nn.Embedding(n_ids, d), nn.Linear(fields * d, 2), autocast
        if bf16: self.to(torch.bfloat16)
    def forward(self, x):
        with torch.autocast('cpu', dtype=torch.bfloat16, enabled=self.autocast):
            return self.head(self.emb(x).flatten(1)).float()

@case("https://github.com/workofart/ml-by-hand/pull/85",
      "the weights are kept in bfloat16 with no float32 master copy: Adam's small updates round back to the stored value and weights near 1 never move",
      {'frozen'}, layer='emb', epochs=12, lr=6e-4)
def bf16_weights_without_master_copy(fixed):
    """'Create FP32 master copy of weights for mixed-precision training': 'weights and activations were in bf16 (this is
    ok), but gradients were also produced + accumulated in bf16. Also, Adam optimizer's update was computed in fp32
    internally but written back to bf16. If we use our learning rate of 6e-4, each weight update step ... is
    `round_bf16(0.9994) = 1.0` ... Each step independently rounds back to 1, so after 100 times it's still 1.0'; measured
    there: 'pre-fix (bf16 storage, no master): 0 / 768 moved; post-fix (fp32 master + bf16 copy): 603 / 768 moved' (merged).
    Categorical ids (4 fields of 20) whose label is the sign of a sum of hidden per-id values, an embedding of 8 per id
    (PyTorch initialises it N(0, 1), so its weights sit near 1 where bfloat16's step is 2^-7) and a linear head,
    cross-entropy, Adam at the PR's 6e-4; the bug stores the whole model in bfloat16, the twin keeps float32 weights and
    computes in bfloat16 under autocast. Measured over 12 epochs: 80% of the embedding's weights never change (all of
    the head's do) and the validation loss falls only from 0.70 to 0.57 (accuracy 0.71); in the twin every weight moves
    and the validation loss reaches 0.48 (accuracy 0.78)"""
    x, y = _ids()
    model = _EmbeddingClassifier(bf16=not fixed, autocast=fixed)
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
