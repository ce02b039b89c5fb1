"""Bug zoo, an eighteenth GitHub family (issue 45): from the issues of training frameworks (PyTorch Lightning, Keras) at
threads no other family cites. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written
before the case was ever run under the tool. Cases were chosen for how common the bug is (gradients clipped while the
mixed-precision loss scale is still in them, an official example that fits on its own validation slice, an official
loop that leaves the model in eval mode after the first validation), never for whether the tool catches it. A
framework's own mechanism (the order in which Lightning's loop clips, unscales and steps; the mode a README's loop
leaves the model in) is reproduced in a plain fastai callback. The leaked validation set and the lost dropout leave
every statistic of training healthy (the runs learn, faster even): their docstrings say so. Each bug was checked with
plain fastai (no fastexplorer) before any run under the tool: it shows its thread's symptom, and its fixed twin
trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *


def _digits_std():
    "The digits, their 64 pixels standardised (one mean and one standard deviation over all pixels), and their labels"
    x, y = digits_raw()
    return (x - x.mean()) / x.std(), y


# ---- the step: gradients clipped while the loss scale is still in them ----
class _NativeAmpClip(Callback):
    """Lightning's native-AMP step with `gradient_clip_val`, in fp32: the loss multiplied by the `GradScaler`'s scale
    (2**16, its initial one) before `backward`, the gradients' total norm clipped to `clip` and divided by the scale
    before the step. As the bug had it (Lightning 1.4), `clip_gradients` runs right after `backward`, on the scaled
    gradients, and `scaler.unscale_` only in the pre-step hook; as fixed (1.4.9), unscale first, then clip. (No fp16
    here: nothing overflows, so the scaler never skips a step nor lowers its scale, as it would not in the first 2,000
    steps of a healthy run)"""
    order = 5
    def __init__(self, scale=2.**16, clip=1.0, unscale_first=True):
        self.scale, self.clip, self.unscale_first = scale, clip, unscale_first
    def before_backward(self): self.learn.loss_grad = self.learn.loss_grad * self.scale
    def _unscale(self):
        for p in self.learn.model.parameters():
            if p.grad is not None: p.grad.div_(self.scale)
    def before_step(self):
        if self.unscale_first: self._unscale()
        torch.nn.utils.clip_grad_norm_(self.learn.model.parameters(), self.clip)
        if not self.unscale_first: self._unscale()

@case("https://github.com/Lightning-AI/pytorch-lightning/issues/9599",
      "with native AMP and `gradient_clip_val`, Lightning clips the gradients before it unscales them: every step is "
      "clipped to the clip value divided by the loss scale (2**16), and the loss barely moves",
      {'lr_too_low', 'loss_stalled'}, epochs=4, lr=0.1)
def amp_clip_before_unscale(fixed):
    """'Clip norm after scaler.unscale_ in native fp16 training': 'I trained a large model using native amp, but the
    loss converged very slow', 'the `clip_gradients` is executed right after backward, but `scaler.unscale_` is
    conducted in pre_optimization_step', 'Currently `gradient_clip_val` may lead to a very flat learning curve if used
    together with native amp'; a maintainer: 'I just checked and it seems you are right', fixed in 1.4.9 (unscale, then
    clip). The scaled gradients are 65,536 times the true ones, so their norm is far above any clip value: clipping
    cuts them to norm 1, and the unscale then leaves a gradient of norm 1/65,536 for the step. The digits standardised,
    an MLP (64-128-128-10, ReLU), cross-entropy, SGD with momentum 0.9 at 0.1, batches of 64, `gradient_clip_val=1.0`;
    the thread does not name its optimiser (under Adam the shrunken gradient would be rescaled, except where it falls
    below Adam's epsilon); the twin unscales before it clips. The per-batch gradients the hooks see after `backward`
    are the scaled ones (2**16 times the true gradient in both programs); only the step is wrong. Measured (seeds 0
    and 1) over 4 epochs (88 steps): no weight moves by more than 5.8e-5 and 7.2e-5 (the twin's by up to 0.52 and
    0.57); the batch losses' median is 2.318 and 2.320 over the first tenth and 2.315 and 2.325 over the last (ratio
    0.999 and 1.002), the validation loss 2.312 and 2.319 at the end (chance is ln 10 = 2.303), the accuracy 0.03 and
    0.07; the twin's validation loss is 0.111 and 0.123 (accuracy 0.96 and 0.97), its batch losses ending at 0.038
    and 0.040 of their first. The thread's run converged 'very slow' rather than not at all: its clip value and
    optimiser are not given; under SGD the whole scale reaches the step"""
    x, y = _digits_std()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   cbs=[_NativeAmpClip(unscale_first=fixed)], opt_func=torch_opt(torch.optim.SGD, momentum=0.9))


# ---- the split: the example trains on the whole set, its validation slice included ----
def _additions(n=3000, seed=0):
    """The addition example's data, scaled down: `n` distinct questions `a+b` with `a`, `b` below 100, a question and
    its mirror `b+a` counted once (the example's `seen` set), shuffled. The question as the one-hot digits of `a` and
    `b` (2 digits each, 40 features); the answer as its 3 digits (hundreds first)"""
    g = torch.Generator().manual_seed(seed)
    pairs = torch.combinations(torch.arange(100), with_replacement=True)          # a <= b: one of each mirror pair
    pairs = pairs[torch.randperm(len(pairs), generator=g)[:n]]
    flip = torch.rand(n, generator=g) < 0.5
    a, b = torch.where(flip, pairs[:, 1], pairs[:, 0]), torch.where(flip, pairs[:, 0], pairs[:, 1])
    digits = torch.stack([a // 10, a % 10, b // 10, b % 10], 1)
    x = F.one_hot(digits, 10).float().flatten(1)
    s = a + b
    return x, torch.stack([s // 100, s // 10 % 10, s % 10], 1)

def _digit_ce(out, y):
    "Cross-entropy of each of the answer's 3 digits, averaged (the example's per-character softmax)"
    return F.cross_entropy(out.view(-1, 10), y.reshape(-1))

def _digit_acc(out, y):
    "The share of the answer's digits predicted right"
    return (out.view(-1, 3, 10).argmax(-1) == y).float().mean()

@case("https://github.com/keras-team/keras/issues/782",
      "the addition example splits off a tenth of its questions for validation, then fits on the whole set: every "
      "validation question is also trained on",
      {'valid_leak'}, epochs=20, lr=1e-3)
def addition_example_fits_on_validation(fixed):
    """'error in addition_rnn example': 'I think on line 151 should be like this: model.fit(X_train, y_train, ...
    validation_data=(X_val, y_val) ...) because X already contains X_val, y_val'; the maintainer: 'Yes, you're right',
    the example's author: 'Can't believe I screwed that up', and the fix was pushed, after which the example needed
    '~100 epochs instead of ~55 to get 99% accuracy': the accuracy it had reported was measured on questions it trained
    on. Every layer is healthy and the run learns; only the validation score is wrong. No per-layer statistic can see
    it. Ported: 3,000 distinct questions `a+b` (a, b < 100, mirrors counted once, as the example's `seen` set does), the
    last tenth for validation as in the example; the question as one-hot digits, the answer as 3 digits each with its
    own softmax (an MLP 40-256-256-30 in place of the example's LSTM encoder-decoder), Adam at 1e-3 (the example's),
    batches of 128; the twin fits on the first nine tenths only. Measured (seeds 0 and 1) after 20 epochs: all 300
    validation questions are trained on; the bug's validation loss is 0.273 and 0.263 at a digit accuracy of 0.938
    and 0.941, below its own last training losses (0.313 and 0.310), while on 300 fresh questions (in neither split)
    the same model scores 0.320 and 0.325 (accuracy 0.897 and 0.898): the validation overstates it; the twin's honest
    validation loss is 0.414 and 0.404 (accuracy 0.882 and 0.884; 0.404 and 0.403 on the fresh questions), its batch
    losses ending at 0.232 and 0.227 of their first (the bug's at 0.178 and 0.176)"""
    x, y = _additions()
    n = len(x) - len(x) // 10
    xv, yv = x[n:], y[n:]
    xt, yt = (x[:n], y[:n]) if fixed else (x, y)                      # the bug: `model.fit(X, y, ...)`
    train = DataLoader(list(zip(xt, yt)), bs=128, shuffle=True, drop_last=True)
    dls = DataLoaders(train, DataLoader(list(zip(xv, yv)), bs=128))
    model = nn.Sequential(nn.Linear(40, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 30))
    return Learner(dls, model, loss_func=_digit_ce, metrics=_digit_acc, opt_func=torch_opt(torch.optim.Adam))


# ---- modes: the loop sets `train()` once, before the first epoch, and validation sets `eval()` ----
class _TrainOnceEvalAfter(Callback):
    """The README's loop: `model.train()` once, before the epochs, and `validate(...)` (which calls `model.eval()`)
    after each. fastai's `TrainEvalCallback` calls `model.train()` at each epoch's start; as the bug had it, every
    epoch after the first trains in the mode the last validation left (`eval()`); as fixed, `model.train()` inside
    the loop. `modes` records the mode of each training batch"""
    order = 20   # after `TrainEvalCallback` (order -10)
    def __init__(self, train_each_epoch): self.train_each_epoch, self.modes = train_each_epoch, []
    def before_train(self):
        if self.epoch > 0 and not self.train_each_epoch: self.model.eval()   # as the last validation left it
    def before_batch(self):
        if self.training: self.modes.append(self.model.training)

class _IgniteMnistNet(nn.Module):
    """ignite's MNIST example `Net`, on 8×8 digits: two convolutions (10 and 20 channels, kernel 3), `Dropout2d` after
    the second, a max-pool and ReLU after each, a hidden layer of 50 with dropout 0.5, `log_softmax` on 10 outputs"""
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 3, padding=1), nn.Conv2d(10, 20, 3, padding=1)
        self.conv2_drop = nn.Dropout2d()
        self.fc1, self.fc2 = nn.Linear(80, 50), nn.Linear(50, 10)
    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.dropout(F.relu(self.fc1(x.flatten(1))), training=self.training)
        return F.log_softmax(self.fc2(x), dim=-1)

@case("https://github.com/pytorch/ignite/issues/746",
      "the README's loop calls `model.train()` once, before its epochs, and `validate()` calls `model.eval()`: every "
      "epoch after the first trains in eval mode, its dropout off",
      {'eval_mode_in_training'}, epochs=10, lr=0.1)
def readme_loop_trains_in_eval_mode(fixed):
    """'Bug in example code on front page': 'In the example code in the `README.md` file the statement `model.train()`
    is outside of the training loop. The function `validate(...)` calls `model.eval()` and the model ends up in eval
    mode for the rest of the training'; the maintainer: 'yes, you are right about that. We need to fix this.' In
    `eval()` the example network's `Dropout2d` and dropout do nothing: from the second epoch on it trains without its
    regulariser, on the same activations it is validated with. The digits as 8×8 images (0..1), ignite's MNIST `Net`
    scaled down (two convolutions with `Dropout2d`, a hidden layer of 50 with dropout 0.5, `log_softmax`), `nll_loss`,
    SGD with momentum 0.5 (the example's) at 0.1 (the example's 0.01 scaled up for 220 steps in place of its 9,380),
    batches of 64 (the example's), 10 epochs; the twin calls `train()` at each epoch's start. A bug no loss curve
    shows as a failure: the run learns either way, and in 10 epochs on the digits it learns faster without its
    regulariser; only the mode of the training batches is wrong. Measured (seeds 0 and 1): 10% of the bug's training
    batches run in `train()` (the first epoch's), every later one in `eval()`; its batch losses fall to 0.035 and
    0.034 of their first and its training loss to 0.19 and 0.18 while its validation loss is 0.120 and 0.081
    (accuracy 0.96 and 0.98); the twin trains in `train()` throughout, its batch losses ending at 0.226 and 0.217 of
    their first, its validation loss 0.232 and 0.137 (accuracy 0.93 and 0.95)"""
    x, y = digits_raw()
    x = ((x - x.mean()) / x.std()).view(-1, 1, 8, 8)   # the example's `Normalize` (MNIST's mean and std)
    return Learner(tensor_dls(x, y, bs=64), _IgniteMnistNet(), loss_func=F.nll_loss, metrics=accuracy,
                   cbs=[_TrainOnceEvalAfter(train_each_epoch=fixed)], opt_func=torch_opt(torch.optim.SGD, momentum=0.5))
