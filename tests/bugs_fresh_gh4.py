"""Bug zoo, a fourth family from GitHub threads of PyTorch and the training libraries built on it (PyTorch Lightning,
Hugging Face Accelerate, PyTorch's `DistributedSampler` and dropout). See `bugzoo.py`. Each case cites its thread; its
truth (`kinds`, `layer`) was written before the case was ever run under the tool. Cases were chosen for how common the
bug is (a per-batch schedule stepped once per epoch because the trainer was not told its interval, a schedule sized in
true optimiser steps that the wrapper steps once per process, a distributed sampler whose epoch is never set, so that
every epoch sees the batches in the same order, accumulated losses never divided by the number of batches accumulated,
a dropout model asked for predictions without `eval()`), never for whether the tool catches it. Two leave every
per-layer statistic of training healthy: the sampler (the order of the batches is all that is wrong, and at this scale
it costs nothing measurable) and the dropout left on when predicting (only the predictions are wrong); their docstrings
say so. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its thread's
symptom, and its fixed twin trains."""
from fastai.callback.core import Callback, CancelBatchException
from fastai.metrics import accuracy
import math
from bugzoo import *


def _digits_std():
    "The digits as standardised vectors (one mean and one spread over all pixels), integer labels"
    x, y = digits_raw()
    return (x - x.mean()) / x.std(), y

def _mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


# ---- the schedule: a per-batch schedule stepped once an epoch ----
class _TorchSchedule(Callback):
    """A `torch.optim.lr_scheduler` built on the optimiser at the start of the fit by `make(opt, n_batches)` and stepped
    after every optimiser step (`interval='step'`) or after every epoch (`'epoch'`, Lightning's default); with `times` >
    1 each step of the schedule is taken `times` over (Accelerate's prepared scheduler on `times` processes)"""
    order = 60
    def __init__(self, make, interval='step', times=1): self.make, self.interval, self.times = make, interval, times
    def before_fit(self):
        self.sched, self.rates = self.make(self.opt.opt, len(self.dls.train)), []
    def _step(self):
        for _ in range(self.times): self.sched.step()
    def after_step(self):
        self.rates.append(self.opt.opt.param_groups[0]['lr'])
        if self.interval == 'step': self._step()
    def after_epoch(self):
        if self.interval == 'epoch': self._step()

def _cyclic(opt, n):
    "`CyclicLR` from 1e-4 up to 0.1 over two epochs of batches and back (triangular), momentum cycled as torch does"
    return torch.optim.lr_scheduler.CyclicLR(opt, base_lr=1e-4, max_lr=0.1, step_size_up=2 * n)

@case("https://github.com/Lightning-AI/pytorch-lightning/issues/5631",
      "a `CyclicLR` meant to move every batch is returned without `'interval': 'step'`: Lightning steps it once an epoch, and the rate stays near its floor",
      {'lr_too_low'}, epochs=4)
def cyclic_lr_stepped_per_epoch(fixed):
    """'lr_scheduler step() called after every epoch instead of after every batch': 'This leads to a constant learning
    rate per epoch when using for instance the CyclicLR scheduler'; the maintainer answered with the documentation of
    `configure_optimizers` and a fixed notebook: a scheduler that moves per batch is returned as `{'scheduler': ...,
    'interval': 'step'}` (Lightning's default interval is the epoch). A schedule whose cycle is counted in batches,
    stepped once an epoch, barely leaves its base rate. The digits as standardised vectors, an MLP (64-128-10),
    cross-entropy, SGD with momentum 0.9 under `CyclicLR(base_lr=1e-4, max_lr=0.1, step_size_up=` two epochs of
    batches`)`, 4 epochs (one full cycle as meant); the twin steps it after every batch. Measured: the bug's rate is
    1e-4 through the first epoch and 3.5e-3 at most by the fourth; its validation loss goes 2.30, 2.01, 1.50, 0.87
    (accuracy 0.07 to 0.88) and its batch losses end at 0.42 of their first; the twin's rate climbs to 0.1 and back, its
    validation loss goes 0.35 to 0.099 (accuracy 0.89 to 0.978), its batch losses end at 0.020 of their first"""
    x, y = _digits_std()
    return Learner(tensor_dls(x, y, bs=32), _mlp(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), lr=1e-4,
                   cbs=[_TorchSchedule(_cyclic, 'step' if fixed else 'epoch')])


# ---- the schedule: sized in true steps, stepped once per process ----
def _linear_decay(epochs):
    "A linear decay of the rate from its start to 0 over `epochs` epochs of optimiser steps (no warm-up)"
    def make(opt, n):
        total = epochs * n
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0., 1 - s / total))
    return make

@case("https://github.com/huggingface/accelerate/issues/2318",
      "a linear decay sized in the run's true optimiser steps is passed to `accelerator.prepare`, which steps it once per process: on 4 processes the rate reaches 0 a quarter of the way through",
      {'lr_too_low', 'loss_stalled'}, epochs=8, lr=0.02)
def prepared_scheduler_steps_per_process(fixed):
    """'total_num_steps for scheduler': 'Why divide the num_processes when preparing the lr_scheduler? It seems strange
    because I have computed the true total_num_steps before accelerator.prepare()'; the maintainer: 'By default we
    assume a user does not take the effort to compute the true number of steps ... If you are doing this, you can pass
    `step_scheduler_with_optimizer=False` to the `Accelerator` so it will only step once when you want to.' A prepared
    scheduler is stepped `num_processes` times for each optimiser step, so a schedule sized in true steps runs out
    `num_processes` times too soon. One process standing for one of 4: the digits as standardised vectors, an MLP
    (64-128-10), cross-entropy, SGD with momentum 0.9 at 0.02 under a linear decay to 0 over the 8 epochs' steps,
    stepped 4 times per optimiser step; the twin steps it once. Measured: the bug's rate is 0 from a quarter of the way
    through (the end of the second epoch) and its validation loss stays at 0.932 (accuracy 0.838) from the second epoch
    to the eighth; its batch losses stop falling at the quarter, about 0.45 of their first; the twin's
    validation loss falls to 0.186 (accuracy 0.955), its batch losses to 0.073 of their first"""
    x, y = _digits_std()
    return Learner(tensor_dls(x, y, bs=64), _mlp(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9),
                   cbs=[_TorchSchedule(_linear_decay(8), 'step', 1 if fixed else 4)])


# ---- the data: a distributed sampler whose epoch is never set ----
class _EpochSeededLoader(DataLoader):
    """The training loader under `DistributedSampler(shuffle=True)` on one process: the order is a permutation drawn
    from a generator seeded with `seed + epoch`, and `epoch` moves only when `set_epoch` is called"""
    def __init__(self, *args, seed=0, **kw):
        super().__init__(*args, **kw)
        self.seed, self.epoch, self.orders = seed, 0, []
    def set_epoch(self, epoch): self.epoch = epoch
    def get_idxs(self):
        idxs = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + self.epoch)).tolist()
        self.orders.append(idxs)
        return idxs

class _SetEpoch(Callback):
    "`train_sampler.set_epoch(epoch)` at the start of each epoch, as the sampler's documentation asks"
    order = -10
    def before_epoch(self): self.dls.train.set_epoch(self.epoch)

@case("https://github.com/pytorch/pytorch/issues/31771",
      "the training loader's `DistributedSampler` is never told the epoch (`set_epoch`): it draws the same permutation every epoch, so every epoch sees the same batches in the same order",
      {'unshuffled_batches'}, epochs=4)
def distributed_sampler_without_set_epoch(fixed):
    """'DistributedSampler can't shuffle the dataset': 'When using the torch.utils.data.distributed.DistributedSampler
    () function, the data set cannot be shuffled, and each epoch samples the data in the same order' (run with one
    process per node; labelled high priority); the answer, now in the sampler's documentation: call
    `sampler.set_epoch(epoch)` at the start of each epoch, since the sampler seeds its shuffle with the epoch. The
    batches are random within an epoch and identical across epochs, so the gradient noise is the same cycle replayed;
    every per-layer statistic is healthy, only the order is wrong. The digits as standardised vectors, an MLP
    (64-128-10), cross-entropy, Adam at fastai's default, batches of 32, a loader drawing its order as the sampler does;
    the twin sets the epoch. Measured: the bug's 4 epochs draw the very same order of the 1,438 training samples; the
    twin's differ from the second epoch on. The losses barely differ: validation loss 0.236 and accuracy 0.947 after 4
    epochs in both, batch losses ending at 0.108 (bug) and 0.105 (twin) of their first"""
    x, y = _digits_std()
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    n = int(len(x) * 0.2)
    items = lambda i: [(x[j], y[j]) for j in i.tolist()]
    train = _EpochSeededLoader(items(idx[n:]), bs=32, drop_last=True, seed=0)
    dls = DataLoaders(train, DataLoader(items(idx[:n]), bs=32))
    return Learner(dls, _mlp(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam),
                   cbs=[_SetEpoch()] if fixed else [])


# ---- gradient accumulation: the accumulated losses never divided ----
class _Accumulate(Callback):
    """Lightning's `accumulate_grad_batches=n`: the optimiser steps (and the gradients are zeroed) once every `n`
    batches; with `mean` each batch's loss is divided by `n` before its backward pass, so that the step sees the mean
    gradient of the `n` batches, not their sum"""
    order, run_valid = 5, False
    def __init__(self, n, mean): self.n, self.mean = n, mean
    def before_fit(self): self.count = 0
    def after_loss(self):
        if self.mean: self.learn.loss_grad = self.learn.loss_grad / self.n
    def before_step(self):
        self.count += 1
        if self.count % self.n: raise CancelBatchException()   # no step and no zero_grad: the gradients add up

@case("https://github.com/Lightning-AI/pytorch-lightning/issues/87",
      "with `accumulate_grad_batches` the trainer calls `backward` on each batch's loss undivided: the step takes the sum of the accumulated gradients, n times the mean",
      {'loss_summed', 'lr_too_high'}, epochs=4, lr=0.1)
def accumulated_losses_not_divided(fixed):
    """'Incorrect Implementation for Accumulating Batch Gradients in Trainer': 'The loss from the output needs to be
    divided by accumulate_grad_batches before loss.backward() is run, otherwise the overall magnitude of the gradient
    could be up to N times greater for a simulated batch size N times bigger than the actual'; the maintainer: 'good
    find, i see the bug', and the division was moved before the backward pass. With plain SGD the summed gradient is the
    mean's step at N times the rate. The digits as standardised vectors, an MLP (64-128-10), cross-entropy, SGD with
    momentum 0.9 at 0.1 (a rate for the mean gradient of the accumulated batch), batches of 8 accumulated over 8 (a
    batch of 64); the twin divides each loss by 8. Measured: the bug's training loss rises in the second epoch (epoch
    means 0.77, 0.99, 0.76, 0.75), its validation loss goes 0.33, 0.69, 0.48, 0.59 (accuracy 0.91, 0.87, 0.86, 0.89);
    the twin's validation loss falls from 0.23 to 0.082 (accuracy 0.936 to 0.975) and its batch losses end at 0.010 of
    their first (the bug's at 0.19)"""
    x, y = _digits_std()
    return Learner(tensor_dls(x, y, bs=8), _mlp(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), cbs=[_Accumulate(8, mean=fixed)])


# ---- modes: predictions made with dropout still on ----
class _PredictInTrainMode(Callback):
    "The thread's prediction: the model is never put in evaluation mode, so dropout stays on when it predicts"
    order = 0   # after fastai's TrainEvalCallback, which calls `model.eval()` before validation
    def before_validate(self): self.model.train()

def _waves(n=1024, seed=0):
    "`x` uniform on [-pi, pi] (one feature), targets `sin(x)` and `cos(x)`"
    x = (torch.rand(n, 1, generator=torch.Generator().manual_seed(seed)) * 2 - 1) * math.pi
    return x, torch.cat([torch.sin(x), torch.cos(x)], 1)

@case("https://github.com/pytorch/pytorch/issues/1207",
      "a regression MLP with dropout predicts without `model.eval()`: dropout stays on and the predicted sine and cosine are noisy",
      {'train_mode_in_eval', 'eval_nondeterministic'}, epochs=6, lr=3e-3)
def dropout_left_on_when_predicting(fixed):
    """'Dropout noise in regression': 'When I use the dropout layer in torch.nn.Dropout(). I found that it has much
    noise when predicting very simple cosine and the sine function ... While I use keras in both theano backend or
    tensorflow backend, they can predict them perfectly'; a reply: 'Are you remembering to disable dropout at test /
    inference time? Try calling `.train(mode=False)`', and the maintainer: 'this certainly looks like you didn't put
    dropout in eval mode with `.train(False)` or `.eval()`'. Keras turns dropout off when it predicts; PyTorch only in
    evaluation mode. An MLP (1-128-128-2, ReLU, dropout 0.5 after each hidden layer) regressing `sin(x)` and `cos(x)` on
    [-pi, pi], mean squared error, Adam at 3e-3, batches of 32; validation run in training mode as the thread's
    prediction was; the twin validates in evaluation mode, as fastai does. Training is untouched (it always runs with
    dropout): only the predictions are wrong, and differ from one call to the next. Measured: training is the same in
    both (batch losses ending at 0.25 and 0.27 of their first); the bug's validation loss per epoch is 0.175, 0.127,
    0.107, 0.100, 0.071, 0.090 against the twin's 0.076, 0.042, 0.039, 0.053, 0.047, 0.031; validating the bug's final
    model three times gives 0.075, 0.089, 0.087 (the twin's 0.0306 each time), and two passes of predictions differ by
    0.25 on average"""
    x, y = _waves()
    model = nn.Sequential(nn.Linear(1, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 128), nn.ReLU(),
                          nn.Dropout(0.5), nn.Linear(128, 2))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam),
                   cbs=[] if fixed else [_PredictInTrainMode()])
