"""Bug zoo, a fresh family from GitHub threads of training code (pygoturn, Transformers' GLUE example, Keras's
preprocessing library, pytorch-fcn's trainer, a BERT text classifier, Microsoft's seismic deep learning). See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever run, under
the tool or not. Cases were chosen for how common the bug is (a step decay of the learning rate applied many times over
at each milestone, a regression head of shape `(n, 1)` given targets of shape `(n,)` under a mean squared error, a
softmax in the model before `CrossEntropyLoss`, class indices assigned per split in order of appearance, a model left in
evaluation mode after a validation run in the middle of an epoch, validation sections cut per axis so that they cross
the training sections), never for whether the tool catches it. Three leave the training run itself healthy: class
indices that differ between the splits and a validation set trained on (only the validation is wrong), and dropout
switched off for most of training (no statistic of one batch is wrong). Their docstrings say so. Kinds that no check
raises yet, assumed as a correct tool would name them: `target_shape` and `labels_misaligned` (as in `bugs_data`). Each
bug was checked with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin
trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _docs
from bugs_fresh import _gen


# ---- the optimiser's schedule ----
def _boxes(n=600, size=16, seed=0):
    """Tracking's regression, scaled down: noisy images with one bright rectangle, its corners `(x1, y1, x2, y2)` scaled
    to 0..10 as GOTURN does"""
    g = _gen(seed)
    x, box = 0.3 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, 4)
    for i in range(n):
        r, c = torch.randint(0, size - 6, (2,), generator=g).tolist()
        h, w = torch.randint(3, 7, (2,), generator=g).tolist()
        x[i, 0, r:r + h, c:c + w] += 1.
        box[i] = torch.tensor([c, r, c + w, r + h]) * 10. / size
    return x, box

class _RepeatedStepDecay(Callback):
    """pygoturn's `exp_lr_scheduler`: at every `step`-th optimiser step the rate is multiplied by `gamma`; with `times`
    > 1 the decay is applied once per pass of the loop that gathers the batch, `times` passes for one step"""
    order = 60
    def __init__(self, step, gamma=0.1, times=1): self.step, self.gamma, self.times = step, gamma, times
    def before_fit(self): self.rates = []
    def before_batch(self):
        if not self.training: return
        it = self.learn.train_iter
        if it > 0 and it % self.step == 0:
            lr = self.opt.hypers[-1]['lr'] * self.gamma ** self.times
            self.opt.set_hypers(lr=lr)
        self.rates.append(self.opt.hypers[-1]['lr'])

@case("https://github.com/amoudgl/pygoturn/issues/16",
      "the step decay of the learning rate sits in the loop that gathers a batch: at each milestone the rate is cut tenfold once per pass, three times over",
      {'lr_too_low', 'loss_stalled'}, epochs=6, lr=0.01)
def step_decay_applied_per_pass(fixed):
    """'an error about the use of exp_lr_scheduler': 'when itr > 0 and itr % args.lr_decay_step == 0, the lr should
    become 0.1*lr. However, the lr will continue decreasing until done==1. And the number of decreasing is related with
    batchsize'; the author: 'Yes, you are correct', and moved the decay under `if done:` (commit e865ce6, 'Fixes #16').
    pygoturn gathers its batch of 50 in pieces of 11 samples, two pieces per pass of its loop, and `itr` only moves when
    a batch is done, so the decay runs at the start of about three passes at each milestone. GOTURN's regression scaled
    down: 16×16 noisy images with a bright rectangle, its corners scaled to 0..10, a small CNN, L1 loss, SGD with
    momentum 0.9 at 0.01, the decay every 30 steps (a third of the run's 90); the twin decays once per milestone.
    Measured: the rate falls from 0.01 to 1e-5 at step 30 and to 1e-8 at step 60, and the validation loss stops at 1.82
    to 1.81 from the second epoch on (its batch losses fell to 0.43 of their first before the milestone); the twin's
    rate goes to 1e-3, then 1e-4, and its validation loss keeps falling to 1.538 (batch losses 0.37 of their first)"""
    x, box = _boxes()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                          nn.ReLU(), nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 4))
    return Learner(tensor_dls(x, box, bs=32), model, loss_func=nn.L1Loss(), opt_func=torch_opt(torch.optim.SGD, momentum=0.9),
                   cbs=[_RepeatedStepDecay(30, 0.1, 1 if fixed else 3)])


# ---- the loss and its targets ----
def _diabetes():
    "scikit-learn's diabetes data: ten standardised features and the disease progression standardised, of shape `(n,)`"
    from sklearn.datasets import load_diabetes
    d = load_diabetes()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()

def _mse_flat(out, y): return F.mse_loss(out.view(-1), y.view(-1))   # the metric, and the fix: both sides flattened

@case("https://github.com/huggingface/transformers/issues/11780",
      "a one-output regression head `(n, 1)` is scored by `MSELoss` against labels of shape `(n,)`: the loss broadcasts to `(n, n)` and the model learns the mean",
      {'target_shape'}, epochs=20, lr=1e-3)
def regression_labels_broadcast(fixed):
    """'Unintentional(?) interface change on loss function in models didn't work well for single-column regression': the
    models' forward stopped flattening before `MSELoss`, which 'causes `UserWarning: Using a target size
    (torch.Size([32])) that is different to the input size (torch.Size([32, 1]))` with BERT in glue example code'
    (STS-B); the fix (PR 11785, merged, 'Fix regression in regression') flattens both sides again, after which the GLUE
    scripts 'get the proper results for this task'. Every prediction is compared with every label of the batch, so the
    loss is least when each prediction is the batch's mean label. The diabetes data (ten standardised features, the
    target standardised) stand in for STS-B, an MLP (10-64-64-1) for BERT, batches of 32, Adam at 1e-3; the twin
    flattens. Measured over 20 epochs: the validation's true mean squared error stays at 1.01 to 1.04, the variance of
    the targets (the model predicts their mean), and the batch losses end at 0.96 of their first; the twin's reaches
    0.52 (0.58 at the end, overfitting) and its batch losses fall to 0.46 of their first"""
    x, y = _diabetes()
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=_mse_flat if fixed else nn.MSELoss(), metrics=_mse_flat,
                   opt_func=torch_opt(torch.optim.Adam))

class _SoftmaxHead(nn.Module):
    """BERT's classifier scaled down: the mean of word embeddings, dropout, a linear layer, then (the bug) a softmax in
    `forward`"""
    def __init__(self, softmax, vocab=500, dim=32, n_out=3):
        super().__init__()
        self.emb, self.drop = nn.EmbeddingBag(vocab, dim, mode='mean'), nn.Dropout(0.1)
        self.fc, self.softmax = nn.Linear(dim, n_out), softmax
    def forward(self, x):
        out = self.fc(self.drop(self.emb(x)))
        return out.softmax(-1) if self.softmax else out

def _imbalanced_docs():
    "Three classes of short documents, 600, 120 and 60 of them"
    x, y = _docs(n_per=600)
    keep = torch.cat([torch.arange(600), torch.arange(600, 720), torch.arange(1200, 1260)])
    return x[keep], y[keep]

def _minority_recall(out, y):
    "The share of the two smaller classes' documents predicted as their class"
    m = y > 0
    return (out.argmax(1)[m] == y[m]).float().mean()

@case("https://github.com/illiterate/BertClassifier/issues/2",
      "the classifier ends in a softmax and its outputs go to `CrossEntropyLoss`, which applies its own: the loss falls slowly and the predictions lean to the largest class",
      {'output_activation'}, epochs=20, lr=1e-3)
def softmax_before_cross_entropy(fixed):
    """'CrossEntropyLoss has log_softmax built in; no softmax needs adding at the model's output layer' (translated):
    'the loss falls very slowly in training ... with little data and imbalanced classes the predictions clearly lean to
    the class with the most data'; the cause, 'a softmax twice'; the fix, remove the model's softmax; the author: 'OK,
    thanks for pointing out the mistake, I'll fix it soon' (translated). The outputs bounded in [0, 1] bound the logits
    the loss sees, so its least value is far above 0 and its gradients are small. Three classes of synthetic documents
    (600, 120 and 60), a bag-of-embeddings model with BERT's head (dropout 0.1, a linear layer), cross-entropy, Adam at
    1e-3; the twin returns logits. Measured over 20 epochs: the training loss falls from 1.08 to 0.70 (0.68 of its
    first), validation 0.73 at an accuracy of 0.82, 0.19 of the two smaller classes' documents recalled (none at all in
    epochs 11 to 13); the twin's falls from 1.06 to 0.30 (0.34 of its first), validation 0.37, accuracy 0.85, recall
    0.30"""
    x, y = _imbalanced_docs()
    return Learner(tensor_dls(x, y, bs=32), _SoftmaxHead(softmax=not fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=[accuracy, _minority_recall], opt_func=torch_opt(torch.optim.Adam))


# ---- the data split ----
_NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine')

def _indices(names, sort):
    """Class indices as `flow_from_dataframe` made them: the classes sorted (the fix) or in order of first appearance
    (`unique()`)"""
    classes = sorted(set(names)) if sort else list(dict.fromkeys(names))
    return torch.tensor([classes.index(n) for n in names])

@case("https://github.com/keras-team/keras-preprocessing/pull/98",
      "the training and validation generators each number the classes in their own order of first appearance: the validation labels are permuted",
      {'labels_misaligned', 'valid_at_chance'}, epochs=6, lr=1e-3)
def class_indices_per_split(fixed):
    """'Sort classes in DataFrameIterator': with `classes` not given, `flow_from_dataframe` found the classes with
    pandas's `unique`, which 'would return the unique values in order of appearance. Therefore, in scenarios where we
    have separate dataframes for training/validation/test it might result in inconsistent class indices mapping' (the
    PR's example: `{'cat': 0, 'dog': 1}` for training, `{'cat': 1, 'dog': 0}` for validation); merged, the classes are
    sorted. Training is sound: every layer is healthy and the training loss falls; only the validation labels mean other
    classes. The digits as standardised vectors with their labels as class names, split at random, each split's names
    turned into indices in its own order of appearance, an MLP (64-128-10), cross-entropy, Adam at 1e-3; the twin sorts
    the names. Measured: the training loss falls to 0.07 of its first as the twin's does, while the validation loss
    rises from 2.9 to 7.1 at an accuracy of 0.006 to 0.022, below chance; the twin's validation loss is 0.15 at an
    accuracy of 0.983"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    nt, nv = [_NAMES[i] for i in yt.tolist()], [_NAMES[i] for i in yv.tolist()]
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    dls = _dls(xt, _indices(nt, fixed), xv, _indices(nv, fixed), bs=32)
    return Learner(dls, model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- modes ----
class _ValidateMidEpoch(Callback):
    """pytorch-fcn's trainer: every `every` iterations, a validation pass (`model.eval()`, no gradients) in the middle
    of the training epoch; the fix returns the model to training mode after it (`model.train()` is otherwise only called
    at the start of each epoch, by fastai's `TrainEvalCallback` here)"""
    order = 5
    def __init__(self, every, restore): self.every, self.restore = every, restore
    def before_fit(self): self.it, self.in_eval = 0, []
    def before_batch(self):
        if not self.training: return
        if self.it > 0 and self.it % self.every == 0:
            self.model.eval()
            with torch.no_grad():
                for xb, yb in self.dls.valid: self.model(xb)
            if self.restore: self.model.train()
        self.it += 1
        self.in_eval.append(not self.model.training)

@case("https://github.com/wkentaro/pytorch-fcn/pull/56",
      "a validation run in the middle of an epoch puts the model in `eval()` and nothing puts it back: dropout is off for the rest of each epoch",
      {'eval_mode_in_training'}, epochs=40, lr=1e-3)
def eval_mode_after_mid_epoch_validation(fixed):
    """'Return to train mode after validation': 'Validation can occur before end of epoch, which sets model mode to
    eval. Training will have no effect until end of the epoch'; the author: 'thanks! d10dd30 should fix this' (the
    trainer calls `model.train()` after validating). FCN's dropout (0.5 after fc6 and fc7) is what the evaluation mode
    turns off: no statistic of one batch is wrong, the model trains without its regulariser. A small sample
    of the digits (300 training rows, 300 for validation), an MLP with FCN's two dropouts (64-256-256-10),
    cross-entropy, Adam at 1e-3, validation every 3 iterations, an epoch being 9 (pytorch-fcn validates every 4000
    iterations, not at an epoch's end); the twin returns to training mode. Measured over 40 epochs: 99% of the training
    batches run in evaluation mode (the twin's none), and the training loss falls ten times as far as the twin's (to
    0.002 of its first against 0.021); on these data the lost regulariser costs nothing measurable at the end
    (validation loss 0.14 at an accuracy of 0.95 for both), so the symptom here is the mode itself, as in the thread"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    idx = torch.randperm(len(x), generator=_gen(5))[:600]
    xt, yt, xv, yv = _split(x[idx], y[idx], n_valid=300)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 256), nn.ReLU(),
                          nn.Dropout(0.5), nn.Linear(256, 10))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_ValidateMidEpoch(3, restore=fixed)])


# ---- the data split, again ----
def _grid_split(fixed, rows=20, cols=25, edge=0.1):
    """Indices of a `rows`×`cols` grid of samples split as the F3 script split its volume: the sections within `edge` of
    each end, inlines (rows) and crosslines (columns) apart, for validation; the others for training. The bug's training
    set is every cell of a training inline or crossline; the fix's, the cells on neither kind of validation section"""
    i, j = torch.arange(rows * cols) // cols, torch.arange(rows * cols) % cols
    er, ec = max(1, round(edge * rows)), max(1, round(edge * cols))
    vr, vc = (i < er) | (i >= rows - er), (j < ec) | (j >= cols - ec)
    valid = vr | vc
    train = ~(vr | vc) if fixed else ~vr | ~vc
    return train.nonzero().view(-1), valid.nonzero().view(-1)

@case("https://github.com/microsoft/seismic-deeplearning/issues/233",
      "validation sections are cut from each end of the volume for inlines and crosslines apart: the cells where a validation inline crosses a training crossline are in both sets",
      {'valid_leak'}, epochs=8, lr=1e-3)
def validation_sections_cross_training(fixed):
    """'Dutch F3 validation data partially overlaps with training data, leads to overly inflated validation results in
    Tensorboard': 'the way the validation data is extracted involves taking 10% off each end of the volume for
    validation. However, since this is done for inline and crossline separately, we get an overlap region which is used
    for both training and validation'; labelled a show-stopper bug, closed with the fix in the data preparation (PR
    200). Every layer is healthy and the run learns: only the validation score is wrong. No per-layer statistic can see
    it. 500 digits laid out as a 20×25 grid of cells (inlines × crosslines), validation the 2 inlines and 2 crosslines
    at each end, standardised vectors, an MLP (64-256-256-10), cross-entropy, Adam at 1e-3; the twin trains only on
    cells that no validation section holds (336 of them, against the bug's 484). Measured: 148 of the 164 validation
    cells are trained on; after 8 epochs the validation loss is 0.043 at an accuracy of 0.988 against the twin's honest
    0.193 and 0.939 (part of that gap is the twin's smaller training set)"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    idx = torch.randperm(len(x), generator=_gen(3))[:500]
    x, y = x[idx], y[idx]
    t, v = _grid_split(fixed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Learner(_dls(x[t], y[t], x[v], y[v], bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
