"""Bug zoo, an eighth family from GitHub threads of training code, threads no other family cites (VAME, pytorch_warmup,
Keras, MMVAE, PAM). See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the
case was ever run under the tool. Cases were chosen for how common the bug is and for the kinds the zoo holds few of (a
step schedule whose 'off' switch decays the rate to zero, a step schedule whose exponent has the wrong sign, gradients
cleared between `backward()` and `step()`, half-precision weights with Adam's default epsilon, an optimiser given the
encoder's parameters only, a VAE loss that averages one term and sums the other), never for whether the tool catches it.
The collapsed VAE's loss falls and its layers are healthy (only what its code carries is wrong); its docstring says so.
Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its thread's symptom,
and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _small_cnn
from bugs_fresh import _gen


# ---- the schedule: a step decay with gamma 0 ----
def _trajectories(n=800, steps=24, feats=4, seed=0):
    "Pose-like time series: each feature a sine of its own frequency and phase, with noise, `(n, steps, feats)`"
    g = _gen(seed)
    t = torch.linspace(0, 1, steps)[None, :, None]
    f = 1 + 3 * torch.rand(n, 1, feats, generator=g)
    p = 2 * math.pi * torch.rand(n, 1, feats, generator=g)
    return torch.sin(2 * math.pi * f * t + p) + 0.05 * torch.randn(n, steps, feats, generator=g)

class _TrajectoryAE(nn.Module):
    "VAME's autoencoder of trajectories scaled down to an MLP: the flattened window to a latent of `z`, and back"
    def __init__(self, steps=24, feats=4, hid=128, z=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(steps * feats, hid), nn.ReLU(), nn.Linear(hid, z))
        self.decoder = nn.Sequential(nn.Linear(z, hid), nn.ReLU(), nn.Linear(hid, steps * feats))
    def forward(self, x): return self.decoder(self.encoder(x)).view_as(x)

class _StepLR(Callback):
    "`StepLR(optimizer, step_size, gamma)` built at the start of the fit, stepped after each epoch"
    order = 60
    def __init__(self, step_size, gamma): self.step_size, self.gamma = step_size, gamma
    def before_fit(self): self.sched = torch.optim.lr_scheduler.StepLR(self.opt.opt, self.step_size, self.gamma)
    def after_epoch(self): self.sched.step()

@case("https://github.com/LINCellularNeuroscience/VAME/issues/26",
      "with the scheduler switched off the trainer still builds `StepLR(step_size=100, gamma=0)`: after its first 100 epochs the learning rate is 0 and training stops",
      {'lr_too_low', 'loss_stalled'}, epochs=10, lr=5e-4)
def steplr_gamma_zero_when_off(fixed):
    """'Bug when scheduler turned off': 'When the 'scheduler' parameter is turned off, the learning rate decreases to 0
    after 100 epochs ... `scheduler = StepLR(optimizer, step_size=100, gamma=0, last_epoch=-1)` with optimizer_scheduler
    deactivated, gamma should be 1, not 0'; a maintainer: 'You are absolutely right, this is a bug we need to fix.'
    VAME's autoencoder of pose trajectories scaled down to an MLP (windows of 24 steps of 4 features, noisy sines, to a
    latent of 8 and back), MSE, Adam at VAME's 5e-4, batches of 32; the step of 100 epochs (of VAME's 500) scaled to 3
    of 10; the twin's gamma is 1, as the issue asks. Measured: the validation loss falls from 0.493 to 0.447 in the
    first 3 epochs, then the rate is 0, no weight moves, and it stays at 0.4473 for the 7 epochs left (the per-batch
    losses' last over first 0.88, all of it from the first 3 epochs); the twin's keeps falling, to 0.350 (loss ratio
    0.65)"""
    x = _trajectories()
    return Learner(tensor_dls(x, x, bs=32), _TrajectoryAE(), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_StepLR(3, 1.0 if fixed else 0.0)])


# ---- the schedule: a step decay whose exponent has the wrong sign ----
def _sr_pairs():
    "Super-resolution pairs from the digits: 4×4 images (2×2 averages) as inputs, the 8×8 images (0..1) as targets"
    x, _ = _digit_images('unit')
    return F.avg_pool2d(x, 2), x

class _ResBlock(nn.Module):
    "EDSR's residual block: convolution, ReLU, convolution, added back"
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))
    def forward(self, x): return x + self.body(x)

class _TinyEDSR(nn.Module):
    "EDSR scaled down: a head convolution, residual blocks, a ×2 pixel-shuffle upsampler, a tail convolution"
    def __init__(self, c=16, blocks=2):
        super().__init__()
        self.head = nn.Conv2d(1, c, 3, padding=1)
        self.body = nn.Sequential(*[_ResBlock(c) for _ in range(blocks)])
        self.up = nn.Sequential(nn.Conv2d(c, 4 * c, 3, padding=1), nn.PixelShuffle(2))
        self.tail = nn.Conv2d(c, 1, 3, padding=1)
    def forward(self, x):
        h = self.head(x)
        return self.tail(self.up(h + self.body(h)))

class _StepDecay(Callback):
    "The repository's schedule, set before each epoch: `base * gamma ** (epoch // n_steps)` (`sign=-1`: its bug's)"
    order = 60
    def __init__(self, gamma, n_steps, sign): self.gamma, self.n_steps, self.sign = gamma, n_steps, sign
    def before_fit(self): self.base = self.opt.opt.param_groups[0]['lr']
    def before_epoch(self):
        lr = self.base * self.gamma ** (self.sign * (self.epoch // self.n_steps))
        for g in self.opt.opt.param_groups: g['lr'] = lr

@case("https://github.com/SYSU-SAIL/PAM/issues/4",
      "the step schedule raises gamma = 0.1 to minus the step count: instead of falling tenfold every `n_steps` epochs the learning rate grows tenfold",
      {'lr_too_high', 'loss_diverging'}, epochs=8, lr=1e-3)
def step_schedule_exponent_sign(fixed):
    """'a problem with the default learning configuration': '`lr = cfg.lr * (cfg.gamma ** -(epoch // cfg.n_steps))`,
    cfg.gamma = 0.1, so the lr might become larger during training?'; the author: 'this bug has been fixed'. A small
    EDSR-like network (a head, 2 residual blocks, a ×2 pixel-shuffle upsampler) trained to restore the 8×8 digits from
    their 4×4 averages, L1 loss, Adam at 1e-3, the schedule's period scaled to 2 epochs of 8; the twin's exponent is
    `+(epoch // n_steps)`. Measured: the rate goes 1e-3, 1e-2, 0.1, 1.0 by pairs of epochs; the validation loss falls
    from 0.146 to 0.104 in the first 4 epochs, then the loss blows up when the rate reaches 0.1 (training batches near
    1e4, validation 947 after the fifth epoch, 140 after the eighth; the per-batch losses' last over first 880); the
    twin's falls to 0.67 of its first (validation 0.125)"""
    x, y = _sr_pairs()
    return Learner(tensor_dls(x, y, bs=32), _TinyEDSR(), loss_func=nn.L1Loss(), opt_func=torch_opt(torch.optim.Adam),
                   cbs=[_StepDecay(0.1, 2, 1 if fixed else -1)])


# ---- the loop: gradients cleared between backward and step ----
class _ZeroGradBeforeStep(Callback):
    "The thread's loop, `loss.backward(); optimizer.zero_grad(); optimizer.step()`: gradients cleared before the step"
    order = 50
    def after_backward(self): self.learn.opt.zero_grad()

@case("https://github.com/Tony-Y/pytorch_warmup/issues/12",
      "the loop calls `optimizer.zero_grad()` between `loss.backward()` and `optimizer.step()`: every step sees no gradient and no weight moves",
      {'frozen', 'gradient_flow'}, epochs=4, lr=1e-2)
def zero_grad_between_backward_and_step(fixed):
    """'Why did my learning rate drop from the initial lr': 'In every batch, I execute `loss.backward()
    optimizer.zero_grad() optimizer.step()` ... It doesn't have a warm up process'; the maintainer: 'Your code does not
    optimize model parameters at all because `optimizer.zero_grad()` is called after `loss.backward()`' (closed). The
    library's EMNIST example scaled down: the digits as 8×8 images, a small CNN, AdamW at the example's 1e-2 with weight
    decay 0.01 (the warm-up, which only shapes the rate, left out), the bug's loop clearing the gradients (to `None`, as
    `zero_grad()` does) after the backward pass; the twin clears them after the step, as fastai does. Measured: not one
    weight changes in 4 epochs, the loss stays at 2.31 (1.00 of its first; validation 2.307) at an accuracy of 0.083;
    the twin's falls to 0.51 of its first (validation 1.09, accuracy 0.66)"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _small_cnn(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.AdamW, weight_decay=0.01),
                   cbs=[] if fixed else [_ZeroGradBeforeStep()])


# ---- precision: half-precision weights and Adam's epsilon ----
def _l1_half(out, y):
    "The L1 loss computed in float16, as under Keras's `set_floatx('float16')`; its value cast to float for fastai"
    return F.l1_loss(out, y).float()

@case("https://github.com/keras-team/keras/issues/11832",
      "the model is trained wholly in float16 with Adam's default epsilon (1e-7): the second-moment estimates underflow, the steps blow up and the loss goes to inf and NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=2, lr=1e-3)
def float16_adam_default_epsilon(fixed):
    """'Infinity loss when training EDSR-SuperRes model with float16': 'I can't train the model when I set my FP to 16
    ... The model does converge when training with float32 ... When I train with float16, the loss goes down for about
    10 mini-batches and then it suddenly start go up until I get 'nan' and 'inf' values'; the poster: 'Solved: need to
    set - `K.set_epsilon(1e-4)`' (closed). Keras's Adam takes its epsilon from `K.epsilon()`, 1e-7; in float16 a squared
    gradient below 6e-8 is 0, so a step divides by about epsilon alone. The EDSR-like network of
    `step_schedule_exponent_sign`, narrower (8 channels, 1 residual block), its weights, inputs and loss in float16
    (`set_floatx('float16')`), L1 loss, Adam at Keras's 1e-3 with eps 1e-7; the twin's eps is 1e-4. Measured: after the
    first step 3127 of the 3657 second-moment entries are 0 while their first moments are not, and the largest weight
    jumps from 0.35 to 46; the loss is 0.31 on the first batch and NaN on every batch after (the thread saw about 10
    batches fall first); the twin's falls to 0.62 of its first (validation 0.118), all finite"""
    x, y = _sr_pairs()
    model = _TinyEDSR(c=8, blocks=1).half()   # float16 convolutions are slow on a CPU: a narrower net
    return Learner(tensor_dls(x.half(), y.half(), bs=32), model, loss_func=_l1_half,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-4 if fixed else 1e-7))


# ---- a VAE: the optimiser's parameters, the loss's reductions ----
class _VAE(nn.Module):
    "MMVAE's shared VAE scaled down: an MLP encoder to a mean and a log-variance, a sample, an MLP decoder"
    def __init__(self, n_in=64, hid=128, z=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_in, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU())
        self.mu, self.logvar = nn.Linear(hid, z), nn.Linear(hid, z)
        self.decoder = nn.Sequential(nn.Linear(z, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, n_in))
    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if self.training else mu
        return self.decoder(z), mu, logvar

def _kl(mu, logvar): return -0.5 * (1 + logvar - mu ** 2 - logvar.exp())   # per sample and latent unit

def _elbo(out, x):
    "The per-sample negative ELBO: squared error summed over the features, KL over the latent, both batch means"
    rec, mu, logvar = out
    return ((rec - x) ** 2).sum(1).mean() + _kl(mu, logvar).sum(1).mean()

def _mixed_reductions(out, x):
    "MMVAE's loss before the fix: `F.mse_loss` (a mean over every element) plus the KL summed over batch and latent"
    rec, mu, logvar = out
    return F.mse_loss(rec, x) + _kl(mu, logvar).sum()

def _expression(n=1500, genes=64, programs=6, seed=0):
    "Expression-like profiles: each cell a random mix of a few gene programs, log-transformed, with noise, `(n, genes)`"
    g = _gen(seed)
    basis = torch.rand(programs, genes, generator=g) * (torch.rand(programs, genes, generator=g) < 0.3)
    mix = torch.rand(n, programs, generator=g) ** 2
    return torch.log1p(4 * mix @ basis) + 0.05 * torch.randn(n, genes, generator=g)

def _encoder_only(m): return [list(m.encoder.parameters()) + list(m.mu.parameters()) + list(m.logvar.parameters())]

@case("https://github.com/zdebruine/MMVAE/issues/39",
      "the shared VAE's optimiser is given the encoder's parameters only: the decoder keeps its random initial weights",
      {'optimizer_groups', 'frozen'}, layer='decoder', epochs=10, lr=1e-3)
def vae_optimizer_encoder_only(fixed):
    """'Shared VAE Optimizer Only Given Encoder Parameters': 'The optimizer for the shared VAE potion of the model is
    only being given the parameters of the encoder portion and not both the encoder & decoder portions'; fixed by the
    merged PR #41, 'Updated the VAE optimizer init to pass all its parameters instead of just the encoders'. A VAE
    (64-128-128 to a latent of 8, and back) on synthetic expression profiles (mixes of 6 gene programs,
    log-transformed), the per-sample negative ELBO, Adam at 1e-3; the bug's optimiser holds the encoder and its two
    heads only (fastai's `splitter`), the twin's every parameter. Measured over 10 epochs: no decoder weight changes and
    the loss stays at 44 to 45 (1.01 of its first; validation 45.0, a squared error of 0.70 per gene, worse than
    decoding every cell to the average profile, 0.139); the twin's falls to 0.58 of its first (validation 7.19, 0.091
    per gene)"""
    x = _expression()
    return Learner(tensor_dls(x, x, bs=32), _VAE(), loss_func=_elbo, opt_func=torch_opt(torch.optim.Adam),
                   **({} if fixed else {'splitter': _encoder_only}))

@case("https://github.com/zdebruine/MMVAE/pull/19",
      "the VAE's reconstruction term is `F.mse_loss` (a mean over every element) while its KL is summed over the batch and the latent: the KL outweighs it and the posterior collapses",
      {'loss_summed', 'constant_output', 'ignores_input'}, epochs=10, lr=1e-3)
def vae_mean_reconstruction_summed_kl(fixed):
    """'fix loss calculation for VAE': 'Current implement of KL are scale over sum ... But MSE are scale over mean by
    default `F.mse_loss(predicted, target)`. This lead to imbalance between KL loss and MSE loss ... KL Loss easily drop
    to 0 at few epoch' (merged). The same VAE and data as `vae_optimizer_encoder_only`, Adam at 1e-3; the twin sums the
    squared error over the features and averages both terms over the batch, as the fix does for the reconstruction. The
    loss falls (0.59 of its first) and no layer misbehaves: what is wrong is that the latent code carries nothing.
    Measured: the KL is 0.0005 per sample after the first epoch and 0.0000 after the tenth, and every cell is decoded to
    the same profile (the outputs' spread across the validation cells 0.00013 against the targets' 0.35), its squared
    error 0.143 per gene, that of the average profile (0.139); in the twin the KL grows to 1.34, the spread to 0.145,
    and the error falls to 0.091 (its loss ratio 0.58)"""
    x = _expression()
    return Learner(tensor_dls(x, x, bs=32), _VAE(), loss_func=_elbo if fixed else _mixed_reductions,
                   opt_func=torch_opt(torch.optim.Adam))
