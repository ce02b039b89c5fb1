"""Bug zoo: healthy runs of fastai's own training recipes (issue 45), each the digits CNN (`fastexplorer.cli`'s
`digits_cnn` on scikit-learn's digits) trained as fastai's documentation offers: label smoothing, focal loss, MixUp and
CutMix (soft targets mixed inside the loss), gradient accumulation, SGDR's warm restarts, `ReduceLROnPlateau`, the
ranger and LAMB optimisers, SGD with momentum, a strong weight decay, batches of 8; then five more set-ups: an L1
regression (`tabular_learner`), class weights for imbalanced classes, discriminative rates on an unfrozen resnet18, a
long warm-up, one output under `BCEWithLogitsLossFlat`. Each list was written before any of its runs ran under the
tool, and none was left out for what it raised. Each runs 50 training batches or more, in seconds on one CPU core, and
learns (its last losses at most 0.9× its first). Every finding above `info` on them is a
false alarm. See `bugzoo.py`."""
from bugzoo import *
from fastai.losses import CrossEntropyLossFlat, FocalLossFlat, LabelSmoothingCrossEntropyFlat
from fastai.metrics import accuracy
from fastai.optimizer import SGD, ranger, Lamb
from fastexplorer.cli import digits_dls, digits_cnn

def _digits(bs:int=32, **kw):
    "The digits CNN on the digits in batches of `bs`, cross-entropy unless `kw` says otherwise, accuracy as its metric"
    return Learner(digits_dls(bs=bs), digits_cnn(), metrics=accuracy, **{'loss_func': CrossEntropyLossFlat(), **kw})

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_label_smoothing(fixed):
    "fastai's `LabelSmoothingCrossEntropyFlat` (ε 0.1): its floor is above 0, and its chance level its own"
    return _digits(loss_func=LabelSmoothingCrossEntropyFlat())

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_focal_loss(fixed):
    "fastai's `FocalLossFlat` (γ 2): easy samples weigh less, so the loss falls far below a cross-entropy's"
    return _digits(loss_func=FocalLossFlat())

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_mixup(fixed):
    "fastai's `MixUp` callback: pairs of images blended, their losses mixed in the same proportion"
    from fastai.callback.mixup import MixUp
    return _digits(cbs=MixUp())

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_cutmix(fixed):
    "fastai's `CutMix` callback: a patch of one image pasted into another, their losses mixed by its area"
    from fastai.callback.mixup import CutMix
    return _digits(cbs=CutMix())

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_gradient_accumulation(fixed):
    "fastai's `GradientAccumulation(64)`: the optimiser steps once every two batches of 32"
    from fastai.callback.training import GradientAccumulation
    return _digits(cbs=GradientAccumulation(64))

@healthy(epochs=2, lr=None, fit='fit_sgdr', fit_kw={'cycle_len': 1, 'lr_max': 1e-2})
def recipe_sgdr(fixed):
    "`fit_sgdr`: two cosine cycles of 1 and 2 epochs, the rate back at its maximum at each restart"
    return _digits()

@healthy(epochs=5, lr=1e-3, fit='fit')
def recipe_reduce_lr_on_plateau(fixed):
    "fastai's `ReduceLROnPlateau` on the validation loss (patience 1) over a constant rate"
    from fastai.callback.tracker import ReduceLROnPlateau
    return _digits(cbs=ReduceLROnPlateau(monitor='valid_loss', patience=1))

@healthy(epochs=4, lr=1e-2, fit='fit_flat_cos')
def recipe_ranger(fixed):
    "fastai's `ranger` (RAdam with Lookahead) under `fit_flat_cos`, as fastai recommends it"
    return _digits(opt_func=ranger)

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_lamb(fixed):
    "fastai's `Lamb`, a per-layer trust ratio on Adam's steps"
    return _digits(opt_func=Lamb)

@healthy(epochs=6, lr=0.1, fit='fit_one_cycle')
def recipe_sgd_momentum(fixed):
    "fastai's `SGD` with momentum under one-cycle, at 0.1 for 6 epochs: it learns more slowly than Adam"
    return _digits(opt_func=SGD)

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_strong_weight_decay(fixed):
    "Adam with a decoupled weight decay of 0.1, ten times fastai's default"
    return _digits(wd=0.1)

@healthy(epochs=2, lr=3e-3, fit='fit_one_cycle')
def recipe_batches_of_8(fixed):
    "Batches of 8: a noisy loss, its batch statistics (BatchNorm) from 8 samples"
    return _digits(bs=8)

@healthy(epochs=5, lr=1e-2, fit='fit_one_cycle')
def recipe_l1_regression(fixed):
    "`tabular_learner` regression on scikit-learn's diabetes table under `L1LossFlat`, whose chance level is unknown"
    from sklearn.datasets import load_diabetes
    from fastai.tabular.all import tabular_learner, RegressionBlock
    from fastai.losses import L1LossFlat
    from healthy_more import _tabular
    d = load_diabetes(as_frame=True, scaled=False).frame
    d['target'] = (d['target'] / 100).astype('float32')
    dls = _tabular(d, [], ['age', 'bmi', 'bp', 's1', 's2', 's3', 's4', 's5', 's6'], 'target', y_block=RegressionBlock())
    return tabular_learner(dls, layers=[64, 32], loss_func=L1LossFlat())

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_class_weights(fixed):
    """Imbalanced digits (class 0 kept whole, the others at a quarter) under a cross-entropy weighted by inverse class
    frequency, as fastai's forums advise for imbalance"""
    x,y = digits_raw()
    g = torch.Generator().manual_seed(0)
    keep = (y == 0) | (torch.rand(len(y), generator=g) < 0.25)
    x,y = (x[keep] / 16).view(-1, 1, 8, 8),y[keep]
    n = torch.bincount(y, minlength=10).float()
    return Learner(tensor_dls(x, y, bs=32), digits_cnn(), metrics=accuracy,
                   loss_func=CrossEntropyLossFlat(weight=n.sum() / (10 * n)))

@healthy(epochs=3, lr=slice(1e-4, 1e-2), fit='fit_one_cycle', every=10)
def recipe_discriminative_rates(fixed):
    """`healthy.vision_resnet` (`vision_learner`, a torchvision resnet18, random weights) unfrozen and trained with
    discriminative rates, `slice(1e-4, 1e-2)`: the body's groups at a hundredth of the head's"""
    from healthy import vision_resnet   # the healthy set's resnet18 on digits at 16 px
    learn = vision_resnet(fixed)
    learn.unfreeze()
    return learn

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle', fit_kw={'pct_start': 0.5, 'moms': (0.95, 0.85, 0.95)})
def recipe_long_warm_up(fixed):
    "One-cycle with half the run warming up (`pct_start=0.5`) and momentum from 0.95: a slow first half"
    return _digits()

@healthy(epochs=4, lr=1e-2, fit='fit_one_cycle')
def recipe_binary_one_output(fixed):
    "Odd or even digits: one output under `BCEWithLogitsLossFlat`, float targets 0 or 1, `accuracy_multi` its metric"
    from fastai.losses import BCEWithLogitsLossFlat
    from fastai.metrics import accuracy_multi
    x,y = digits_raw()
    m = digits_cnn(); m[-1] = nn.Linear(m[-1].in_features, 1)
    dls = tensor_dls((x / 16).view(-1, 1, 8, 8), (y % 2).float().unsqueeze(1), bs=32)
    return Learner(dls, m, loss_func=BCEWithLogitsLossFlat(), metrics=accuracy_multi)
