"""Bug zoo, a second fresh family from GitHub threads of training code people run (OFT's KITTI trainer, a question
answering model with a graph network, a Lightning Kaggle pipeline, a PyTorch port of I3D, PyTorch Lightning 1.0.4's
`optimizer_step` hook, a PyTorch port of stacked capsule autoencoders). See `bugzoo.py`. Each case cites its thread; its
truth (`kinds`, `layer`) was written before the case was ever run, under the tool or not. Cases were chosen for how
common the bug is (a multi-task loss of which only one term is optimised, a softmax in the model before
`CrossEntropyLoss`, labels read from the table before it was shuffled and split, TensorFlow's keep probability given to
`nn.Dropout` as its drop probability, an overridden optimiser step that never runs the closure computing the gradients,
a mixture's log-likelihood computed as the log of a sum of exponentials), never for whether the tool catches it. In
two the learner's own loss still falls: the multi-task one optimises the score term (the total, printed as a metric,
stalls) and the softmax one's loss stops at its floor. Kinds that no check may raise yet, assumed as a correct tool would name them: `labels_misaligned` (as in `bugs_data`).
Each bug was checked with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin
trains."""
from fastai.callback.core import Callback, CancelBackwardException
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _digit_images
from bugs_fresh import _gen


# ---- the loss: one term of a multi-task loss optimised ----
def _objects(n=480, size=16, seed=0):
    """Bird's-eye grids with one object each: a bright square of side 2 to 5 at a random place in noise. Targets `(n, 5,
    size, size)`: a Gaussian heatmap of the centre (OFT's score), the centre's offset from each cell in cells and the
    object's log side (position and dimension), and the mask of the cells near the centre where they count"""
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(size * 1.), torch.arange(size * 1.), indexing='ij')
    x, t = 0.3 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, 5, size, size)
    for i in range(n):
        s = int(torch.randint(2, 6, (1,), generator=g))
        r, c = torch.randint(0, size - s + 1, (2,), generator=g).tolist()
        x[i, 0, r:r + s, c:c + s] += 1.
        cy, cx = r + (s - 1) / 2, c + (s - 1) / 2
        d2 = (yy - cy) ** 2 + (xx - cx) ** 2
        t[i, 0] = torch.exp(-d2 / 2)
        t[i, 1], t[i, 2], t[i, 3] = cy - yy, cx - xx, math.log(s)
        t[i, 4] = (d2 <= 2).float()
    return x, t

class _OftHeads(nn.Module):
    "OFT's shape, scaled down: a convolutional body, then a score head and a head for the offsets (position, dimension)"
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.score = nn.Conv2d(32, 1, 1)
        self.offsets = nn.Conv2d(32, 3, 1)
    def forward(self, x):
        h = self.body(x)
        return torch.cat([self.score(h), self.offsets(h)], 1)

def _oft_terms(out, t):
    "The score loss (binary cross-entropy against the heatmap) and the offsets' masked L1 loss"
    score = F.binary_cross_entropy_with_logits(out[:, :1], t[:, :1])
    m = t[:, 4:5]
    offsets = ((out[:, 1:] - t[:, 1:4]).abs() * m).sum() / (3 * m.sum()).clamp(min=1)
    return score, offsets

def _oft_total(out, t):
    "The total the trainer prints: the score loss plus the offsets' loss"
    s, o = _oft_terms(out, t)
    return s + o

def _oft_offsets(out, t): return _oft_terms(out, t)[1]
def _oft_score_only(out, t): return _oft_terms(out, t)[0]

@case("https://github.com/tom-roddick/oft/issues/6",
      "a line left in `compute_loss` from a test makes the trainer optimise the score loss only: the heads for position, dimension and angle get no gradient",
      {'gradient_flow', 'frozen'}, layer='offsets', epochs=6, lr=1e-3)
def multitask_loss_one_term_optimised(fixed):
    """'Loss doesn't decrease': training OFT on KITTI 'the total loss doesn't seem to decrease at all, even after
    training for 23 epochs' (score 23.8, position 2.0e6, dimension 4.0e5); the author: 'I had a line left in from a test
    I was running where only the score loss was being optimised. If you delete the following line from the
    `compute_loss` function in `train.py`, the loss should start decreasing' (fixed in 04f7383). OFT's heads scaled
    down: a small convolutional body on 16×16 grids holding one square, a score head against a Gaussian heatmap of its
    centre and an offsets head (the centre's offset, the log side) under a masked L1, Adam at 1e-3; the bug optimises
    the score term alone (the learner's loss is that term), the total and the offsets' loss are printed as metrics; the
    twin optimises the sum. Only the offsets head is cut off from the gradient: the body still learns from the score,
    and the offsets drift with it. Measured over 6 epochs: the optimised score term falls (0.65 to 0.06, ratio 0.12)
    while on validation the offsets' loss stops at 0.95 to 0.96 and the total at 1.01 to 1.02 from the fourth epoch
    (2.07 after the first); the twin's validation total falls from 0.56 to 0.18 (offsets 0.39 to 0.115), its losses 0.15
    of its first"""
    x, t = _objects()
    return Learner(tensor_dls(x, t, bs=16), _OftHeads(), loss_func=_oft_total if fixed else _oft_score_only,
                   metrics=[_oft_total, _oft_offsets], opt_func=torch_opt(torch.optim.Adam))


# ---- the output: a softmax before CrossEntropyLoss ----
class _CandidateScorer(nn.Module):
    "A scorer over candidates: an MLP, a linear layer giving each candidate a score and (the bug) a softmax over them"
    def __init__(self, softmax):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.out = nn.Linear(128, 10)
        self.softmax = nn.Softmax(-1) if softmax else nn.Identity()
    def forward(self, x): return self.softmax(self.out(self.body(x)))

@case("https://github.com/bowang-lab/Transformer-GCN-QA/pull/32",
      "the model ends in a softmax and its scores go to `CrossEntropyLoss`, which applies its own: the loss has a floor and small gradients",
      {'output_activation'}, layer='softmax', epochs=5, lr=1e-3)
def softmax_before_cross_entropy_candidates(fixed):
    """'Removes erroneous extra softmax': 'Because we didn't realize that `CrossEntropyLoss()` itself implements a
    softmax, we had a second, erroneous softmax at the output of our model. This was (likely) smoothing the final output
    logits resulting in a lesser gradient signal during training'; 'the output layer is a linear and simply returns a
    score over all possible candidates. No need to softmax it' (merged). The digits as standardised vectors, the ten
    classes as the candidates, an MLP (64-128-128-10) scoring them, cross-entropy, Adam at 1e-3; the twin returns the
    scores. Measured over 5 epochs: the training loss cannot go below ln(9 + e) - 1 = 1.46 and stops at 1.51 (0.67 of
    its first), the validation loss at 1.53 (accuracy 0.94: the ranking is learnt, the loss stays high); the twin's
    falls to 0.04 of its first (validation loss 0.13, accuracy 0.96)"""
    x, y = digits_raw()
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), _CandidateScorer(softmax=not fixed),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- the data: labels taken before the table is shuffled ----
def _pathology_split(x, y, fixed, split=0.8, seed=42):
    """`PlantPathologyDataset` as it was: the bug reads the labels from the table as loaded, then shuffles the table and
    keeps its first 80% (or the rest), so that the `i`-th image of the split gets the `i`-th label of the unshuffled
    table; the fix shuffles first and reads the labels from the shuffled split"""
    raw = y.clone()                                       # `self.raw_labels = list(self.data['labels'])`
    order = torch.randperm(len(x), generator=_gen(seed))  # `self.data.sample(frac=1, random_state=...)`
    k = int(split * len(x))
    def part(idx): return x[idx], (y[idx] if fixed else raw[:len(idx)])   # the bug: label `i` is raw row `i`
    return (*part(order[:k]), *part(order[k:]))

@case("https://github.com/Borda/kaggle_image-classify/pull/12",
      "the dataset reads its labels from the table before shuffling and splitting it: images and labels no longer match, in training and validation",
      {'labels_misaligned'}, epochs=5, lr=1e-3)
def labels_taken_before_shuffle(fixed):
    """'fix dataset shuffle': 'the shuffle was made after taking raw labels :/' (merged, labelled bug). In
    `PlantPathologyDataset.__init__` the labels came from the table as loaded (`self.raw_labels`), then the table was
    shuffled and split 80/20 and the image names taken from the split, while `_prepare_labels` encoded `raw_labels` in
    their old order: the `i`-th image of either split got the `i`-th label of the unshuffled table. The fix shuffles the
    table first and reads the labels from it (a test now checks the names against the labels). The digits as 8×8 images
    in place of the leaves (the 'simple' single-label variant), a small CNN, cross-entropy, Adam at 1e-3. Measured over
    5 epochs: the training loss stays near ln 10 (2.31 to 2.27 as the network starts to memorise, 0.98 of its first),
    the validation loss rises from 2.303 to 2.323 at chance accuracy (0.10 to 0.11); the twin's loss falls to 0.04 of
    its first (validation accuracy 0.94)"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _pathology_split(x, y, fixed)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.Flatten(), nn.Linear(32 * 64, 10))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the model: a keep probability given as a drop probability ----
class _I3DHead(nn.Module):
    "I3D's end, on images: convolutional units, average pooling, `Dropout(dropout_prob)`, a 1×1 convolution to logits"
    def __init__(self, dropout_prob):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout_prob)
        self.logits = nn.Conv2d(64, 10, 1)
    def forward(self, x): return self.logits(self.dropout(self.avg_pool(self.body(x)))).flatten(1)

@case("https://github.com/hassony2/kinetics_i3d_pytorch/issues/6",
      "the port passes TensorFlow's `dropout_keep_prob=1` to `nn.Dropout`, whose argument is the probability of dropping: every feature before the logits is zeroed in training",
      {'dropout_rate'}, layer='dropout', epochs=4, lr=1e-3)
def dropout_keep_prob_as_drop_prob(fixed):
    """'Dropout: opposite meaning?': 'In the code it says `dropout_keep_prob=1` but in the PyTorch documentation `p` is
    the probability of an element to be zeroed'; the author: 'Thank you very much for pointing this out! This is fixed
    by #7' (the model now takes `dropout_prob=0`). With `p=1` the dropout before the logits zeroes every pooled feature
    while training: the logits are the bias alone, whatever the clip, and nothing before the dropout gets a gradient; in
    evaluation the dropout passes everything to a classifier that never learnt. I3D's end on the digits as 8×8 images
    (convolutional units with BatchNorm, average pooling, the dropout, a 1×1 convolution), cross-entropy, Adam at 1e-3;
    the twin drops nothing. Measured over 4 epochs: the training loss stays at 2.31 (ratio 1.00), the validation loss at
    2.33 to 2.34 and the accuracy at chance (0.09 to 0.11); the twin's loss falls to 0.44 of its first (validation loss
    0.99, accuracy 0.87)"""
    x, y = _digit_images('unit')
    return Learner(tensor_dls(x, y, bs=32), _I3DHead(dropout_prob=0. if fixed else 1.), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- the loop: an optimiser step that never runs the closure ----
class _StepWithoutClosure(Callback):
    """Lightning 1.0.4 with `optimizer_step` overridden to call `optimizer.step()` without `closure=optimizer_closure`:
    the closure (training step, `zero_grad`, `backward`) never runs, so the step finds no gradient. fastai computes the
    forward and the loss before the step; this callback cancels the backward that the closure would have run"""
    order = 50
    def before_backward(self): raise CancelBackwardException()

@case("https://github.com/Lightning-AI/pytorch-lightning/issues/4447",
      "an overridden `optimizer_step` calls `optimizer.step()` without the closure: the backward never runs and no weight is ever updated",
      {'gradient_flow', 'frozen'}, epochs=4, lr=1e-3)
def optimizer_step_without_closure(fixed):
    """'In 1.0.4, training_step is never called when optimizer_step is overriden': 'in `1.0.3` I was able to override
    `optimizer_step` in my LightningModule and everything worked fine. But in `1.0.4`, when I override `optimizer_step`
    it causes `training_step` to be skipped'; the fix, from the thread: 'passing optimizer.step the optimizer_closure'
    (the documentation was changed to say so, and Lightning later raised an error when the closure is not run). The
    digits as standardised vectors, an MLP (64-128-128-10), cross-entropy, Adam at 1e-3; the bug's step is called with
    no gradient computed (here the forward and the loss still run, so there is a loss to watch); the twin runs the
    backward. Measured over 4 epochs: the training loss stays at 2.31 (ratio 1.00), the validation loss at 2.3126 in
    every epoch (the weights never change) at an accuracy of 0.025; the twin's loss falls to 0.05 of its first
    (validation accuracy 0.97)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), model, loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_StepWithoutClosure()])


# ---- numerics: a log of a sum of exponentials ----
class _TemplateMixture(nn.Module):
    """A mixture of `k` templates per image, as a part capsule autoencoder's image likelihood: from the image, mixing
    logits and `k` reconstructions; every pixel a Gaussian around its template's value with a learnt scale"""
    def __init__(self, k=4, n_pix=64):
        super().__init__()
        self.k = k
        self.enc = nn.Sequential(nn.Linear(n_pix, 128), nn.ReLU(), nn.Linear(128, 32), nn.ReLU())
        self.templates = nn.Linear(32, k * n_pix)
        self.mixing = nn.Linear(32, k)
        self.log_scale = nn.Parameter(torch.zeros(n_pix))
    def forward(self, x):
        h = self.enc(x)
        return torch.cat([self.templates(h), self.mixing(h), self.log_scale.expand(len(x), -1)], 1)

def _mixture_terms(out, x, k=4):
    "Per image and template: the pixels' Gaussian log-densities summed over the pixels, and the mixing logits"
    n = x.shape[1]
    mu, logits, ls = out[:, :k * n].view(-1, k, n), out[:, k * n:k * n + k], out[:, -n:]
    logp = (-0.5 * ((x.unsqueeze(1) - mu) / ls.exp().unsqueeze(1)) ** 2 - ls.unsqueeze(1)
            - 0.5 * math.log(2 * math.pi)).sum(-1)
    return logp, logits

def _mixture_nll_naive(out, x):
    "The repository's `log_prob`: mixing logits normalised by `exp().sum().log()`, the mixture by `exp().sum().log()`"
    logp, logits = _mixture_terms(out, x)
    mix = logits - logits.exp().sum(1, keepdim=True).log()
    return -(logp + mix).exp().sum(1).log().mean()

def _mixture_nll_stable(out, x):
    "The fix: both normalisations by `torch.logsumexp`"
    logp, logits = _mixture_terms(out, x)
    mix = logits - torch.logsumexp(logits, 1, keepdim=True)
    return -torch.logsumexp(logp + mix, 1).mean()

@case("https://github.com/mlberkeley/scae-pytorch/pull/4",
      "a mixture's log-likelihood is computed as `exp().sum().log()`: once an image's summed log-density leaves float32's range for `exp` the sum is 0 (or inf), the loss infinite, then NaN",
      {'nonfinite_loss'}, epochs=10, lr=1e-2)
def mixture_log_sum_exp_overflow(fixed):
    """'fix loss nan bug by using logsumexp()': 'the reason why the loss value goes to NAN after several epochs is that
    the EXP operation will cause the inf value when calculating log_prob(). So i tried the safe logsumexp(). The problem
    sovled' (merged; the issue, #2: 'loss going to nan after 26 epochs', 'loss=inf' in the log, gradient clipping did
    not help). `MixtureDistribution.log_prob` summed the pixels' log-densities per template, added the mixing
    log-probabilities and took `logits.exp().sum(dim=1).log()`; the fix takes `torch.logsumexp` there and in
    `mixing_log_prob`. The digits scaled to [0, 1] as 64 pixels, an encoder giving 4 templates and mixing logits, a
    learnt scale per pixel, the mixture's negative log-likelihood, Adam at 1e-2. As the scales of the pixels that are
    nearly always blank shrink, an image with ink on one of them gets a summed log-density below -103 for every
    template: `exp` gives 0 and the log -inf (a well-fit image above 88 would overflow the same way). Measured over 10
    epochs: the loss falls from 66.6 to -70, is inf at batch 383 of 440 (the ninth epoch) and NaN from then on, weights
    included; the twin's is the same until then and keeps falling to -75, finite throughout (its ratio negative: it
    trains)"""
    x, _ = digits_raw()
    x = x / 16
    return Learner(tensor_dls(x, x, bs=32), _TemplateMixture(),
                   loss_func=_mixture_nll_stable if fixed else _mixture_nll_naive, opt_func=torch_opt(torch.optim.Adam))
