"""Bug zoo, a fifth family from GitHub threads of training repositories (Determined's BERT example, the siamese-triplet
repository, MosaicML's Composer trainer, an event-camera classifier's training code). See `bugzoo.py`. Each case cites
its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever run under the tool. Cases
were chosen for how common the bug is (a linear decay sized for far fewer steps than the run takes, so the rate is 0
almost at once; a distance's square root taken at exactly 0, whose gradient is infinite; a trainer that leaves the model
in `eval()` after computing its training metrics, so that every later microbatch trains in evaluation mode; class
indices taken from each split's folder listing in the order the file system gives it), never for whether the tool
catches it. The label mapping leaves every per-layer statistic of training healthy (only what the validation labels
mean is wrong); its docstring says so. Each bug was checked with plain fastai (no fastexplorer) before any run under
the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.callback.training import GradientAccumulation
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _small_cnn
from bugs_fresh import _gen


def _digits_std():
    "The digits as standardised vectors (one mean and one spread over all pixels), integer labels"
    x, y = digits_raw()
    return (x - x.mean()) / x.std(), y


# ---- the schedule: sized for far fewer steps than the run takes ----
class _LinearWarmupDecay(Callback):
    """`get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=total)` as Hugging Face
    defines it, a `LambdaLR` stepped after every optimiser step: the rate falls linearly from its start to 0 at step
    `total`, and stays 0 after; `total=None` sizes it to the run (epochs × batches), as the fix does"""
    order = 60
    def __init__(self, total=None): self.total = total
    def before_fit(self):
        total = self.total or self.n_epoch * len(self.dls.train)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt.opt, lambda s: max(0., (total - s) / max(1, total)))
        self.rates = []
    def after_step(self):
        self.rates.append(self.opt.opt.param_groups[0]['lr'])
        self.sched.step()

@case("https://github.com/determined-ai/determined/pull/711",
      "a linear decay to 0 is sized for 400 training steps in a run of about 15,000: the rate reaches 0 within the first few percent of the run and learning stops",
      {'lr_too_low', 'loss_stalled'}, epochs=8, lr=1e-3)
def linear_schedule_sized_too_short(fixed):
    """'fix: learning rate scheduler fix for bert squad example': the example's configuration gave the linear schedule
    `num_training_steps: 400`; the author of the fix: 'if this value is too low, we end up with a LR of zero pretty
    quickly, and this was causing the learning to basically stop (validation f1 flatlined at 60-something)'; the fix
    (merged, 'the main fix to achieve parity') sets it to the run's number of optimiser steps, 15000, as Hugging Face's
    script does (it also adds gradient clipping, left out here). Hugging Face's linear schedule without warm-up, stepped
    after every optimiser step. The digits as standardised vectors, an MLP (64-128-128-10), cross-entropy, AdamW at 1e-3
    with the example's `adam_epsilon` 1e-8 and no weight decay, 8 epochs of 44 batches (352 steps); the bug sizes the
    schedule at 9 steps (400/15000 of the run), the twin at 352. Measured: the bug's rate is 0 from the tenth step on;
    its batch losses go from 2.31 to 2.19 in those steps and stay there (0.995 of their first at the end), and the
    validation loss is 2.195 at an accuracy of 0.379 in every one of the 8 epochs; the twin's batch losses fall to 0.044
    of their first, its validation loss to 0.133 (accuracy 0.969)"""
    x, y = _digits_std()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.AdamW, eps=1e-8, weight_decay=0.),
                   cbs=[_LinearWarmupDecay(None if fixed else 9)])


# ---- numerics: the square root of a distance at 0 ----
class _SiameseNet(nn.Module):
    "siamese-triplet's `SiameseNet`: one embedding net (an MLP with PReLUs, 2-d output) applied to each input apart"
    def __init__(self):
        super().__init__()
        self.embedding_net = nn.Sequential(nn.Linear(64, 256), nn.PReLU(), nn.Linear(256, 256), nn.PReLU(),
                                           nn.Linear(256, 2))
    def forward(self, x): return torch.stack([self.embedding_net(x[:, 0]), self.embedding_net(x[:, 1])], 1)

def _contrastive(eps, margin=1.):
    """siamese-triplet's `ContrastiveLoss` on a pair's embeddings `(n, 2, d)` and the target (1: same class): squared
    distances for similar pairs, `relu(margin - sqrt(d + eps))^2` for the others, averaged (`eps=0` as it first was)"""
    def loss(out, t):
        d = (out[:, 1] - out[:, 0]).pow(2).sum(1)
        return (0.5 * (t * d + (1 - t) * F.relu(margin - (d + eps).sqrt()).pow(2))).mean()
    return loss

def _pairs(x, y, n_copies, seed=0):
    """siamese-triplet's training pairs over a set in which the first `n_copies` samples appear twice: for each sample,
    a fair coin picks a positive pair (another index of the same class) or a negative one (an index of another class)"""
    g = _gen(seed)
    x, y = torch.cat([x, x[:n_copies]]), torch.cat([y, y[:n_copies]])
    by_class = [torch.nonzero(y == c).squeeze(1) for c in range(10)]
    others = [torch.nonzero(y != c).squeeze(1) for c in range(10)]
    firsts, seconds, targets = [], [], []
    for i in range(len(x)):
        pos = bool(torch.rand(1, generator=g) < 0.5)
        pool = by_class[int(y[i])] if pos else others[int(y[i])]
        j = i
        while j == i: j = int(pool[torch.randint(len(pool), (1,), generator=g)])   # never the same index
        firsts.append(i); seconds.append(j); targets.append(float(pos))
    return torch.stack([x[firsts], x[seconds]], 1), torch.tensor(targets)

@case("https://github.com/adambielski/siamese-triplet/issues/18",
      "the contrastive loss takes the square root of a squared distance that is exactly 0 for a pair of identical samples: its gradient is infinite and the weights turn NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=6, lr=1e-3)
def contrastive_sqrt_at_zero_distance(fixed):
    """'Siamese loss problem': 'the derivatives suddenly equaled to nan in some iteration. It turns out that it is
    because some of the distances equal to 0 ... and consequently the derivative sqrt(d) to d is nan. I added a small
    smooth constant to solve this problem'; the poster's distances were 0 because 'there are two exactly the same
    samples'; the maintainer: 'Added the epsilon - thanks for catching this'. The loss is finite; its gradient is not
    (0 × ∞ for a similar pair, ∞ × 0 for a dissimilar one), and one NaN gradient makes every weight NaN at the next
    Adam step. The repository's `SiameseNet` and `ContrastiveLoss(margin=1.)` (its embedding net an MLP with PReLUs and
    2-d output, on the digits as standardised vectors), its pairs (a fair coin for a positive or a negative pair, never
    the same index), a training set in which 40 images appear twice, as duplicates do in collected data, Adam at 1e-3,
    batches of 128; the twin adds `eps=1e-9` inside the square root. Measured: the pairs hold one pair of identical
    images (a positive pair of an image and its copy); the first three batch losses are finite (0.21, 0.15, 0.13), every
    later one NaN (63 of 66), every weight NaN at the end, the validation loss NaN in every epoch; without the
    duplicates the same program trains (no NaN, batch losses to 0.32 of their first); the twin's batch losses fall to
    0.26 of their first, its validation loss from 0.071 to 0.047"""
    x, y = _digits_std()
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    pt, tt = _pairs(xt, yt, n_copies=40, seed=1)
    pv, tv = _pairs(xv, yv, n_copies=0, seed=2)
    return Learner(_dls(pt, tt, pv, tv, bs=128), _SiameseNet(), loss_func=_contrastive(1e-9 if fixed else 0.),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- modes: training metrics computed in eval mode, the mode left behind ----
class _TrainMetricsInEval(Callback):
    """Composer's trainer after each training microbatch: the training accuracy is updated in evaluation mode
    (`model.eval()`, no gradients); before the fix the mode was left as it was, so every later microbatch of the epoch
    trained in `eval()` (fastai's `TrainEvalCallback` calls `model.train()` only at each epoch's start); with `restore`
    the model goes back to `train()`, as the fix's evaluation context does"""
    order = 90
    def __init__(self, restore): self.restore, self.modes = restore, []
    def after_batch(self):
        if not self.training: return
        self.modes.append(self.model.training)
        self.model.eval()
        with torch.no_grad(): self.correct = (self.pred.argmax(1) == self.yb[0]).float().mean()
        if self.restore: self.model.train()

@case("https://github.com/mosaicml/composer/pull/1516",
      "the trainer computes training metrics in `eval()` after each microbatch and never sets `train()` back: every microbatch after an epoch's first trains with BatchNorm on its running statistics",
      {'eval_mode_in_training'}, epochs=6, lr=0.1)
def training_metrics_leave_eval_mode(fixed):
    """'Use eval context': 'Fixes dev regressions. These were caused by the model being in eval mode for all but the
    first microbatch. Now, we set train mode only once (at start of training) and all eval happens within a context
    which automatically cleans up eval mode' (merged: 'thanks for chasing down this bug!'). In `eval()` a BatchNorm
    normalises with its running statistics, which no longer move (only the first microbatch of an epoch updates them),
    so the network trains as if it had no normalisation. The digits as 8×8 images (0..1), a small CNN with BatchNorm
    after each convolution, cross-entropy, SGD with momentum 0.9 at 0.1, batches of 64 split into 2 microbatches of 32
    (gradient accumulation); the twin sets `train()` back after each metric update. Measured: 2% of the bug's
    microbatches train in `train()` (the first of each epoch); its validation loss goes 2.32, 2.31, 2.30, 2.27, 2.25,
    2.12 (accuracy 0.11 to 0.14) and its batch losses end at 0.885 of their first; the twin's validation loss goes 2.00,
    1.36, 0.96, 0.39, 0.46, 0.56 (accuracy 0.25 to 0.91, 0.77 at the end), its batch losses end at 0.090 of their
    first"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _small_cnn(bn=True), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9),
                   cbs=[GradientAccumulation(n_acc=64), _TrainMetricsInEval(restore=fixed)])


# ---- data: class indices from each folder's listing order ----
_NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine')

def _listed_indices(names, listing, sort):
    """Class indices as the dataset made them, `classes = listdir(root)` (the folders in the order `listing` gives) or,
    as fixed, `sorted(listdir(root))`; each sample's label is its folder's position in that list"""
    classes = sorted(listing) if sort else list(listing)
    return torch.tensor([classes.index(n) for n in names])

def _listing(seed):
    "A folder's listing of the class folders: the names in an order of the file system's (here a fixed shuffle)"
    return [_NAMES[i] for i in torch.randperm(10, generator=_gen(seed)).tolist()]

@case("https://github.com/uzh-rpg/rpg_event_representation_learning/issues/2",
      "the training and validation sets each number their classes in the order `listdir` gives their folder, which differs between the two folders: the validation labels are permuted",
      {'labels_misaligned', 'valid_at_chance'}, epochs=6, lr=1e-2)
def class_indices_from_listdir_order(fixed):
    """'Validation accuracy lower than expected.': a commenter 'realized that the train/test label mapping are
    inconsistent' and changed the dataset's `self.classes = listdir(root)` to `sorted(listdir(root))` ('basically fix
    the label mapping to alphabetically'), 'which solves the problem. Now I can get >50% accuracy after 1 epoch';
    another confirmed it as 'the fix to the problem'. `listdir` promises no order, and the training and validation
    folders listed their class folders differently. Training is sound: every layer is healthy and the training loss
    falls; only the validation labels mean other classes. No per-layer statistic can see it. The digits as 8×8 images
    (0..1), each split a folder of class folders named for the digits and listed in its own order, a small CNN,
    cross-entropy, Adam at 1e-2; the twin sorts the listing. Measured: the two listings put no class at the same index;
    the bug's training loss falls as the twin's does (batch losses to 0.34 of their first, the twin's to 0.41) while its
    validation loss rises from 2.31 to 4.47 at an accuracy of 0.07 to 0.11, at chance or below; the twin's validation
    loss falls from 2.27 to 0.84 (accuracy 0.20 to 0.81)"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    nt, nv = [_NAMES[i] for i in yt.tolist()], [_NAMES[i] for i in yv.tolist()]
    dls = _dls(xt, _listed_indices(nt, _listing(11), fixed), xv, _listed_indices(nv, _listing(12), fixed), bs=32)
    return Learner(dls, _small_cnn(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
