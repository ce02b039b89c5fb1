"""Bug zoo, a nineteenth GitHub family (issue 45): bugs in how the learning rate, its schedule or the optimiser is
set up, from the threads of training libraries and model repositories (transformers, Megatron-LM, ms-swift, research
code) that no other family cites. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was
written before the case was ever run under the tool. Cases were chosen for how common the bug is (a linear decay whose
length was never passed, so that the rate goes through 0 and on below it; a warm-up-then-decay schedule sized on the
examples while the loop runs over more features than that; a discriminator optimiser whose parameter list names one
discriminator twice and the other never; parameter groups built by name prefix that leave a new head out;
mixed-precision master weights copied before the checkpoint was loaded; a one-cycle schedule given one peak for two
groups), never for whether the tool catches it. Two leave the loss curve healthy: the head left out of the groups shows
only in that layer's weights standing still, and the encoder trained ten times faster than meant in no per-layer
statistic at all; their docstrings say so. A library's own mechanism (BertAdam's schedule inside its step, Megatron's
float32 main copies) is reproduced in a small optimiser of the same arithmetic. Each bug was checked with plain fastai
(no fastexplorer) before any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *


def _digits_std():
    "The digits, their 64 pixels standardised (one mean and one standard deviation over all pixels), and their labels"
    x, y = digits_raw()
    return (x - x.mean()) / x.std(), y

def _mlp(n_in=64, hid=128, n_out=10):
    return nn.Sequential(nn.Linear(n_in, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, n_out))


# ---- a linear decay whose length was never passed: the rate goes through 0 and below ----
class _IterLambdaLR(Callback):
    """`torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)` built on the optimiser at the start of the fit and
    stepped after every optimiser step, as the repository's runner does (`optimizer.step(); scheduler.step()` in its
    iteration loop); `make(total_steps)` returns the lambda. `rates` records the rate of each step"""
    order = 60
    def __init__(self, make): self.make, self.rates = make, []
    def before_fit(self):
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt.opt, self.make(self.n_epoch * len(self.dls.train)))
    def after_step(self):
        self.rates.append(self.opt.opt.param_groups[0]['lr'])
        self.sched.step()

def _linear_rule(n_init, n_decay):
    "finetune-anything's `linear` scheduler: the factor is 1 for `n_init` steps, then falls by 1/(n_decay+1) a step"
    return lambda it: 1.0 - max(0, it - n_init) / float(n_decay + 1)

@case("https://github.com/ziqi-jin/finetune-anything/issues/57",
      "the training script never passes the schedule's length to `get_scheduler`: its `linear` rule keeps the defaults "
      "(50 steps flat, 50 of decay), is stepped every iteration, and the rate goes through 0 and on to ever larger "
      "negative values",
      {'loss_diverging'}, epochs=6, lr=0.02)
def linear_decay_defaults_drive_lr_negative(fixed):
    """'Problems with lr scheduler': 'The default args are not passed into get_scheduler in train.py (`max_epoch=1,
    n_epochs_init=50, n_epochs_decay=50`). As a result, `cosine` and `linear` scheduler does not work properly ...
    `linear` will decrease the lr to negative values, causing the loss to explode'; a second user: 'I have the same
    problem'; the fix given: pass the run's length ('set/pass the max_epoch to be train_cfg.max_iter. Then the decay
    will happen gradually across the iteration steps'). The repository's `linear` rule is `1 - max(0, it - 50) / 51`
    in a `LambdaLR` that its runner steps after every `optimizer.step()`: 0 at step 101, -1 at step 152, and so on;
    a negative rate climbs the loss, faster and faster. The digits standardised, an MLP (64-128-128-10) in place of
    SAM's mask decoder, cross-entropy, SGD with momentum 0.9 (the repository's config) at 0.02, batches of 32, 6
    epochs (264 steps); the twin's rule is sized to the run (flat for half of it, then a decay to 0 at its end).
    Measured (seeds 0 and 1, the same course at both): the bug's rate is 0.02 for 50 steps, 0 at step 101 and
    -0.064 at the last step; its validation loss is 0.60 and 0.70 after the first epoch and 0.21 and 0.24 after the
    second (accuracy 0.95 and 0.94), then the batch loss passes 10 at step 123 (rate -0.0086), is NaN from step 136
    on, and the validation loss is 2.8e7 and 3.2e7 after the third epoch and NaN after the last three (accuracy 0.106,
    one class); the twin's rate falls from 0.02 to 3e-4, its validation loss is 0.104 and 0.112 at the end (accuracy
    0.97), its batch losses ending at 0.025 and 0.026 of their first"""
    x, y = _digits_std()
    make = (lambda n: _linear_rule(n // 2, n - n // 2)) if fixed else (lambda n: _linear_rule(50, 50))
    return Learner(tensor_dls(x, y, bs=32), _mlp(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=1e-4), cbs=[_IterLambdaLR(make)])


# ---- BertAdam's warm-up-then-linear schedule past `t_total` ----
def _warmup_linear(x, warmup=0.1, clamp=False):
    """pytorch-pretrained-BERT's `warmup_linear` at progress `x` (step / t_total): `x / warmup` while warming up, then
    `1 - x`, which is negative past `t_total`; as fixed (#327), never below 0"""
    if x < warmup: return x / warmup
    return max(1.0 - x, 0.0) if clamp else 1.0 - x

class _BertAdam(torch.optim.Optimizer):
    """pytorch-pretrained-BERT's `BertAdam`: Adam without bias correction (eps 1e-6), the weight decay added to the
    update, each parameter's gradient clipped to norm 1, and the rate scheduled inside `step`: `lr *
    warmup_linear(step / t_total, warmup)`"""
    def __init__(self, params, lr=1e-3, t_total=1000, warmup=0.1, b1=0.9, b2=0.999, e=1e-6, weight_decay=0.01,
                 max_grad_norm=1.0, clamp=False):
        super().__init__(params, dict(lr=lr, t_total=t_total, warmup=warmup, b1=b1, b2=b2, e=e,
                                      weight_decay=weight_decay, max_grad_norm=max_grad_norm))
        self.clamp, self.rates = clamp, []
    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g['params']:
                if p.grad is None: continue
                st = self.state[p]
                if not st: st['step'], st['m'], st['v'] = 0, torch.zeros_like(p), torch.zeros_like(p)
                grad = p.grad
                if g['max_grad_norm'] > 0: torch.nn.utils.clip_grad_norm_(p, g['max_grad_norm'])
                st['m'].mul_(g['b1']).add_(grad, alpha=1 - g['b1'])
                st['v'].mul_(g['b2']).addcmul_(grad, grad, value=1 - g['b2'])
                update = st['m'] / (st['v'].sqrt() + g['e'])
                if g['weight_decay'] > 0: update += g['weight_decay'] * p
                lr = g['lr'] * _warmup_linear(st['step'] / g['t_total'], g['warmup'], self.clamp)
                p.add_(update, alpha=-lr)
                st['step'] += 1
        self.rates.append(lr)

_W, _STRIDE, _V = 16, 8, 40   # the window (max_seq_length), its stride (doc_stride), the vocabulary

def _documents(n=1200, seed=0):
    """Synthetic reading-comprehension examples: a document of 12 to 32 random tokens (among 2..39) with one answer
    token (id 1) at a random place. Returns the documents (padded with 0) and their lengths"""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(12, 33, (n,), generator=g)
    docs = torch.randint(2, _V, (n, 32), generator=g) * (torch.arange(32)[None] < lens[:, None])
    docs[torch.arange(n), (torch.rand(n, generator=g) * lens).long()] = 1
    return docs, lens

def _features(docs, lens):
    """`convert_examples_to_features` with a sliding window: each document split into windows of 16 tokens every 8
    (the last one aligned to the end); a window's target is the answer's place in it, or 16 if it is not in it (the
    [CLS] position of SQuAD's features). Returns the windows and targets"""
    xs, ys = [], []
    for d, n in zip(docs.tolist(), lens.tolist()):
        starts = list(range(0, max(n - _W, 0) + 1, _STRIDE))
        if starts[-1] + _W < n: starts.append(n - _W)
        a = d.index(1)
        for s in starts:
            xs.append(d[s:s + _W]); ys.append(a - s if s <= a < s + _W else _W)
    return torch.tensor(xs), torch.tensor(ys)

class _Reader(nn.Module):
    "A span classifier, scaled down: token embeddings of 16, flattened, an MLP to the 17 places (16 and [CLS])"
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(_V, 16)
        self.mlp = nn.Sequential(nn.Linear(_W * 16, 128), nn.ReLU(), nn.Linear(128, _W + 1))
    def forward(self, x): return self.mlp(self.emb(x).flatten(1))

@case("https://github.com/huggingface/transformers/issues/324",
      "`t_total` for BertAdam's `warmup_linear` schedule is counted on the training examples while the loop runs over "
      "the windowed features, which are more: past `t_total` the schedule's `1 - x` makes the rate negative",
      {'loss_diverging'}, epochs=8, lr=1e-3)
def bert_warmup_linear_past_t_total(fixed):
    """'warmup_linear for BertAdam and OpenAIAdam': 'if `t_total` is specified incorrectly (too small), learning rate
    becomes negative after t_total for both versions'; a user: 'I just ran into this problem while running BERT on
    large samples from `run_squad.py` ... a really disturbing and hard to catch issue' (the examples' script computed
    `num_train_optimization_steps` from `len(train_examples)`, while each long example becomes several features;
    issue #132 had found the same: 'step could be larger than t_total, then lr becomes negative'); the maintainer
    welcomed the fix, merged in #327 ('fix for negative learning rate after t_total', the schedule held at 0, with a
    warning). The schedule `x / warmup` then `1 - x` at `x = step / t_total` goes through 0 at `t_total` and below it
    after. Ported: 1,200 synthetic documents of 12 to 32 tokens, each with one answer token; the run_squad way of
    features (windows of 16 tokens every 8, the target the answer's place in the window or [CLS] when it is not in
    it), a span classifier (embeddings of 16, an MLP 256-128-17), cross-entropy, BertAdam (no bias correction,
    weight decay 0.01, each gradient clipped to 1) at 1e-3 with a warm-up of 0.1, batches of 32, 8 epochs; the bug's
    `t_total` is examples / batch size × epochs, the twin's schedule is the merged fix (held at 0 past `t_total`).
    Documents are split into training and validation before windowing: no document has features in both. Measured
    (seeds 0 and 1): the 960 training documents make 2,074 features, 64 batches an epoch, 512 steps in all against a
    `t_total` of 240: the bug's rate peaks at 1e-3 after the warm-up, is 0 at step 240, negative from step 241 and
    -1.13e-3 at the last step; its validation loss is 0.025 and 0.047 after the fifth epoch (accuracy 1.0 and 0.996),
    its batch loss bottoms at 0.003 and 0.006 (steps 257 and 195), then climbs to 1,300 to 2,200 in the last batches,
    the validation loss to 2,102 and 2,055 (accuracy 0.315: the [CLS] place for every window); the twin's rate stays
    at 0 past `t_total`, its validation loss is 0.024 and 0.047 at the end (accuracy 1.0 and 0.996), its batch losses
    ending at 0.004 and 0.005 of their first"""
    docs, lens = _documents()
    idx = torch.randperm(len(docs), generator=torch.Generator().manual_seed(0))
    n_val = len(docs) // 5
    xt, yt = _features(docs[idx[n_val:]], lens[idx[n_val:]])
    xv, yv = _features(docs[idx[:n_val]], lens[idx[:n_val]])
    bs, epochs = 32, 8
    t_total = (len(docs) - n_val) // bs * epochs          # `int(len(train_examples) / train_batch_size) * epochs`
    train = DataLoader(list(zip(xt, yt)), bs=bs, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader(list(zip(xv, yv)), bs=bs))
    return Learner(dls, _Reader(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=partial(OptimWrapper, opt=partial(_BertAdam, t_total=t_total, warmup=0.1, clamp=fixed)))


# ---- the discriminators' optimiser lists one discriminator twice and the other never ----
_N = 64   # samples per waveform

def _waveforms(n=2000, seed=0):
    """The discriminator step of a vocoder GAN, its generator held fixed: real waveforms (sums of 1 to 3 sinusoids of
    random frequency, phase and amplitude) labelled 1, and the generator's output labelled 0: other such waveforms
    with the artefacts of an untrained generator (a high-frequency buzz and a periodic click every 8 samples). Returns
    the waveforms `(n, 64)` and the labels"""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(_N).float()
    k = torch.randint(1, 4, (n,), generator=g)
    f = torch.rand(n, 3, generator=g) * 0.15 + 0.02
    ph = torch.rand(n, 3, generator=g) * 2 * math.pi
    amp = torch.rand(n, 3, generator=g) * (torch.arange(3)[None] < k[:, None])
    x = (amp[..., None] * torch.sin(2 * math.pi * f[..., None] * t + ph[..., None])).sum(1)
    y = (torch.rand(n, generator=g) < 0.5).float()
    buzz = 0.3 * torch.sin(2 * math.pi * 0.45 * t + torch.rand(n, 1, generator=g) * 6.3)
    click = 0.8 * ((t + torch.randint(0, 8, (n, 1), generator=g)) % 8 == 0).float()
    x = torch.where(y[:, None] > 0, x, x + buzz + click) + 0.05 * torch.randn(n, _N, generator=g)
    return x, y

class _MRD(nn.Module):
    "A multi-resolution discriminator, scaled down: log-magnitude spectra of frames of 16 and 32 samples, an MLP"
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7 * 9 + 3 * 17, 64), nn.LeakyReLU(0.1), nn.Linear(64, 1))
    def forward(self, x):
        specs = [torch.log1p(torch.fft.rfft(x.unfold(1, w, w // 2), dim=-1).abs()).flatten(1) for w in (16, 32)]
        return self.net(torch.cat(specs, 1))

class _MPD(nn.Module):
    "A multi-period discriminator, scaled down: the waveform folded by period 8 into (8, 8), two convolutions, a score"
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, (3, 1), padding=(1, 0)), nn.LeakyReLU(0.1),
                                 nn.Conv2d(8, 8, (3, 1), padding=(1, 0)), nn.LeakyReLU(0.1), nn.Flatten(),
                                 nn.Linear(8 * 64, 1))
    def forward(self, x): return self.net(x.view(-1, 1, _N // 8, 8))

class _Discriminators(nn.Module):
    "UNIVERSE's GAN discriminators, scaled down: an MRD and an MPD, each scoring each waveform; returns `(n, 2)`"
    def __init__(self):
        super().__init__()
        self.mrd, self.mpd = _MRD(), _MPD()
    def forward(self, x): return torch.cat([self.mrd(x), self.mpd(x)], 1)

def _lsgan_d_loss(out, y):
    "HiFi-GAN's discriminator loss, summed over the discriminators: `(D(real) - 1)^2` and `D(fake)^2`, batch means"
    return ((out - y[:, None]) ** 2).mean(0).sum()

def mpd_accuracy(out, y): return ((out[:, 1] > 0.5).float() == y).float().mean()
def mrd_accuracy(out, y): return ((out[:, 0] > 0.5).float() == y).float().mean()

def _params_disc_typo(m):
    "As the bug had it: `list(self.loss_mrd.parameters()) + list(self.loss_mrd.parameters())`"
    return [list(m.mrd.parameters()) + list(m.mrd.parameters())]

def _params_disc(m): return [list(m.mrd.parameters()) + list(m.mpd.parameters())]

@case("https://github.com/line/open-universe/issues/5",
      "the discriminators' optimiser is given `list(loss_mrd.parameters()) + list(loss_mrd.parameters())`: the MRD's "
      "parameters twice, the MPD's never, so the MPD keeps its initial weights",
      {'optimizer_groups', 'frozen'}, layer='mpd', epochs=6, lr=2e-4)
def disc_optimizer_lists_mrd_twice(fixed):
    """'Parameters of discriminator optimizer': in `universe_gan.py`, 'the code `params_disc =
    list(self.loss_mrd.parameters()) + list(self.loss_mrd.parameters())` seems to have some bugs. If I'm correct, it
    should be: `params_disc = list(self.loss_mrd.parameters()) + list(self.loss_mpd.parameters())`'; the maintainer:
    'Ouch, it looks like the parameters of the mpd are never optimized...'. The MPD still scores every waveform and its
    loss term is still summed into the discriminators' loss; only its weights never move. Ported: the discriminator
    step of a vocoder GAN with its generator held fixed: 2,000 synthetic waveforms of 64 samples, half real (sums of
    sinusoids) and half the generator's (the same with an untrained generator's artefacts: a high-frequency buzz and
    a periodic click), an MRD (log-magnitude spectra at two frame sizes, an MLP) and an MPD (the waveform folded by
    period 8, two convolutions), HiFi-GAN's least-squares discriminator loss summed over both, Adam at 2e-4 (betas
    0.8, 0.99, HiFi-GAN's), batches of 32, 6 epochs; the bug's splitter is the typo, the twin's lists both
    discriminators. The bug's loss still falls (the MRD learns, stepped twice a step as PyTorch's Adam walks a
    parameter listed twice twice): only one module's weights stand still. Measured (seeds 0 and 1): no MPD weight
    moves; its scores stay at -0.04 and -0.06 (spread 0.04) for every validation waveform, so it calls all of them
    generated (accuracy 0.465, the share of generated ones, after every epoch) and its loss term stays at 0.58 and
    0.60, while the MRD's falls to 0.029 and 0.030 (accuracy 0.98); the bug's batch losses end at 0.71 and 0.73 of
    their first; the twin's MPD term falls to 0.22 and 0.21 (accuracy 0.70 and 0.83, MRD term 0.050 and 0.055), its
    batch losses ending at 0.34 of their first at both seeds"""
    x, y = _waveforms()
    return Learner(tensor_dls(x, y, bs=32), _Discriminators(), loss_func=_lsgan_d_loss,
                   metrics=[mrd_accuracy, mpd_accuracy], opt_func=torch_opt(torch.optim.Adam, betas=(0.8, 0.99)),
                   splitter=_params_disc if fixed else _params_disc_typo)


# ---- parameter groups by name prefix leave the classification head out ----
class _TinyVLClassifier(nn.Module):
    """A vision-language model patched for sequence classification, scaled down: a vision tower (`visual`), an aligner
    to the language model's width (`aligner`), the language model (`language_model`), `lm_head` replaced by an
    identity and a new head `score` on top, as the classification patch does"""
    def __init__(self):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128))
        self.aligner = nn.Sequential(nn.Linear(128, 64), nn.GELU(), nn.Linear(64, 64))
        self.language_model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
        self.lm_head = nn.Identity()
        self.score = nn.Linear(64, 10)
    def forward(self, x): return self.score(self.lm_head(self.language_model(self.aligner(self.visual(x)))))

_GROUP_LR = {'visual': 0.1, 'aligner': 1.0}   # `vit_lr` and `aligner_lr` as multiples of the learning rate

def _prefix_groups(model, fixed):
    """ms-swift's optimiser groups with `vit_lr` and `aligner_lr` set: one group per prefix of the architecture's
    vision tower and aligner, and one at the default rate for its language-model prefixes (`language_model`,
    `lm_head`); as fixed (#10151), every remaining trainable parameter joins the default group"""
    named = list(model.named_parameters())
    pick = lambda prefixes: [p for n, p in named if n.split('.')[0] in prefixes]
    groups = [pick(('visual',)), pick(('aligner',)), pick(('language_model', 'lm_head'))]
    if fixed:
        seen = {id(p) for g in groups for p in g}
        groups[-1] += [p for n, p in named if id(p) not in seen and p.requires_grad]
    return groups

class _GroupRates(Callback):
    "The groups' own rates (`vit_lr`, `aligner_lr`, the default), set on the optimiser at the start of the fit"
    order = 1
    def before_fit(self):
        for pg, m in zip(self.opt.opt.param_groups, (_GROUP_LR['visual'], _GROUP_LR['aligner'], 1.0)):
            pg['lr'] = pg['lr'] * m

@case("https://github.com/modelscope/ms-swift/pull/10151",
      "the optimiser's parameter groups are built from the architecture's prefixes (vision tower, aligner, language "
      "model and `lm_head`): the classification head `score`, added by the classification patch, is in none of them "
      "and never trains",
      {'optimizer_groups', 'frozen'}, layer='score', epochs=6, lr=1e-3)
def param_groups_by_prefix_leave_out_head(fixed):
    """'fix(train): include all trainable multimodal parameters': 'Setting `vit_lr` or `aligner_lr` can leave a
    multimodal classification head out of the optimizer. For Qwen2.5-VL, the sequence-classification patch replaces
    `lm_head` with an identity and adds `score`, while the architecture's language-model prefixes still list
    `model.language_model` and `lm_head`. `score.weight` receives gradients but never updates'; the merged fix assigns
    'every remaining trainable parameter the default learning rate'. A head that keeps its random initial weights
    while the body learns to feed it. The digits standardised as the 'images', a vision tower (64-128-128), an
    aligner (128-64-64), a language model (64-64-64), `lm_head` an identity and `score` (64-10), cross-entropy,
    AdamW at 1e-3 with `vit_lr` 1e-4 and `aligner_lr` 1e-3, batches of 32; the bug's groups are by prefix only, the
    twin's add the remaining parameters to the default group. The loss falls either way (the body learns to feed a
    fixed random head): only the head's weights standing still show the bug. Measured (seeds 0 and 1): the bug's
    groups hold 4, 4 and 4 tensors, the twin's 4, 4 and 6; no `score` weight moves in the bug (the twin's by up to
    0.16 and 0.17); the bug's validation loss is 0.359 and 0.279 after 6 epochs (accuracy 0.875 and 0.919), the
    twin's 0.293 and 0.253 (0.908 and 0.928); batch losses end at 0.13 and 0.10 of their first (the twin's at 0.11 and
    0.09)"""
    x, y = _digits_std()
    return Learner(tensor_dls(x, y, bs=32), _TinyVLClassifier(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.AdamW, weight_decay=0.0), cbs=[_GroupRates()],
                   splitter=partial(_prefix_groups, fixed=fixed))


# ---- master weights copied before the checkpoint is loaded ----
class _MasterWeightAdam(torch.optim.Optimizer):
    """Megatron's mixed-precision optimiser, in fp32: it keeps its own float32 "main" copy of every model parameter,
    taken when it is built (`main_param = param.detach().clone().float()`); a step copies the model's gradients onto
    the main copies, runs Adam on them, and copies the main copies back into the model. `reload_model_params` copies
    the model's weights into the main copies again (what Megatron's `load_checkpoint` later called after loading)"""
    def __init__(self, params, main, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        params = list(params)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.main = main   # {model parameter: its main copy}, made when the optimiser was set up
        self.inner = torch.optim.Adam(list(self.main.values()), lr=lr, betas=betas, eps=eps)
    @torch.no_grad()
    def step(self, closure=None):
        for pg in self.param_groups:
            for p in pg['params']:
                m = self.main[p]
                m.grad = None if p.grad is None else p.grad.detach().clone().float()
            self.inner.param_groups[0]['lr'] = pg['lr']
        self.inner.step()
        for pg in self.param_groups:
            for p in pg['params']: p.copy_(self.main[p])

def _main_copies(model):
    "`get_megatron_optimizer(model)`: a float32 main copy of each of the model's parameters, as they are now"
    return {p: p.detach().clone().float() for p in model.parameters()}

def _pretrained(model, x, y, passes=10, seed=0):
    """The checkpoint to fine-tune from: `model` trained for `passes` passes over `x`, `y` (Adam at 1e-3, batches of
    32) in a plain loop; returns its `state_dict`"""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(passes):
        for i in torch.randperm(len(x), generator=g).split(32):
            opt.zero_grad(); F.cross_entropy(model(x[i]), y[i]).backward(); opt.step()
    return {k: v.clone() for k, v in model.state_dict().items()}

@case("https://github.com/NVIDIA/Megatron-LM/issues/174",
      "the optimiser's float32 main copies of the weights are made before the checkpoint is loaded into the model: "
      "the first step copies the random initial weights back into the model and the checkpoint is lost",
      {'pretrained_not_loaded', 'optimizer_groups'}, epochs=3, lr=1e-3)
def optimizer_main_copies_before_checkpoint(fixed):
    """'Optimizer will hold unloaded model weights when model weights but not optimizer states are loaded from a
    checkpoint': 'in the `setup_model_and_optimizer()` function, `optimizer` is built before loading checkpoint and
    holds the parameters of a randomly initialized model. If `args.finetune` is `True`, the model state dict will be
    loaded from the checkpoint, and `optimizer` will be untouched and still have the parameters of the randomly
    initialized model ... after the first parameter update, the parameters of the newly loaded `model` will revert to
    the ones of the randomly initialized model unexpectedly'. Megatron's fix copies the loaded weights into the
    optimizer's main parameters after loading (`load_checkpoint` ends with `optimizer.reload_model_params()` for fp16
    and bf16 runs). Ported without fp16 (the main copies are what matter): the digits standardised, an MLP
    (64-128-128-10) first trained for 10 passes over a third of the training images (the checkpoint), then built
    afresh, its optimiser set up (main copies taken), the checkpoint loaded, and fine-tuned on the other two thirds
    with cross-entropy, Adam at 1e-3, batches of 32, 3 epochs; the twin reloads the main copies after loading. No
    validation image is in either part. Measured (seeds 0 and 1): the checkpoint's validation loss is 0.157 and 0.161
    (accuracy 0.947 and 0.964); the bug's first batch loss is 0.139 and 0.203 (the checkpoint), and after the first
    step the model's weights are 0.35 and 0.32 (largest difference) away from the checkpoint, back at the random
    initialisation: its next batch losses are 2.34 and 2.33 (chance is ln 10 = 2.30), and it trains again from
    scratch to a validation loss of 0.292 and 0.258 (accuracy 0.933 and 0.939), worse than the checkpoint it started
    from; the twin's first step moves no weight by more than 1e-3, its validation loss is 0.111 and 0.120 at the end
    (accuracy 0.978 and 0.969), its batch losses ending at 0.54 and 0.51 of their first"""
    x, y = _digits_std()
    dls = tensor_dls(x, y, bs=32)
    xt = torch.stack([a for a, _ in dls.train.dataset]); yt = torch.stack([b for _, b in dls.train.dataset])
    k = len(xt) // 3
    state = _pretrained(_mlp(), xt[:k], yt[:k])
    train = DataLoader(list(zip(xt[k:], yt[k:])), bs=32, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, dls.valid)
    model = _mlp()                                   # `get_model`: random initial weights
    main = _main_copies(model)                       # `get_megatron_optimizer`: main copies of those
    model.load_state_dict(state)                     # `load_checkpoint(..., finetune=True)`
    if fixed: main = _main_copies(model)             # `optimizer.reload_model_params()`
    return Learner(dls, model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=partial(OptimWrapper, opt=partial(_MasterWeightAdam, main=main)))


# ---- a one-cycle schedule given one `max_lr` for an optimiser of two groups ----
class _OneCycle(Callback):
    """`torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr, epochs, steps_per_epoch, div_factor=25,
    final_div_factor=100)` built at the start of the fit and stepped after every batch, as AdaBins does; `max_lr` a
    number (every group's peak) or a list (one per group). `rates` records each group's rate at each step"""
    order = 60
    def __init__(self, max_lr): self.max_lr, self.rates = max_lr, []
    def before_fit(self):
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt.opt, self.max_lr, epochs=self.n_epoch,
                                                         steps_per_epoch=len(self.dls.train), div_factor=25,
                                                         final_div_factor=100)
    def after_step(self):
        self.rates.append([pg['lr'] for pg in self.opt.opt.param_groups])
        self.sched.step()

class _EncoderDecoder(nn.Module):
    "AdaBins' split, scaled down: a pretrained `encoder` (64-128-128) and a new `decoder` (128-64-10)"
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    def forward(self, x): return self.decoder(self.encoder(x))

def _encoder_decoder_groups(m): return [list(m.encoder.parameters()), list(m.decoder.parameters())]

class _TenthForEncoder(Callback):
    "AdaBins' groups: the encoder's (`get_1x_lr_params`) at a tenth of the rate, the decoder's at the rate"
    order = 1
    def before_fit(self): self.opt.opt.param_groups[0]['lr'] /= 10

@case("https://github.com/shariqfarooq123/AdaBins/issues/44",
      "the encoder's parameter group is built at a tenth of the decoder's rate, but `OneCycleLR` is given a single "
      "`max_lr`: it overwrites every group's rate, and the pretrained encoder is trained at the decoder's rate",
      {'optimizer_groups', 'lr_too_high'}, layer='encoder', epochs=10, lr=1e-2)
def one_cycle_max_lr_overrides_encoder_group(fixed):
    """'Bug in OneCycleLR': 'When the `args.same_lr` flag is set to false, the encoder and decoder are supposed to have
    different learning rates. However, the learning rate is still constant. The OneCycleLR used in this line expects
    a list of lrs to use different learning rates for encoder and decoder. But as an integer is used, the lr is the
    same for both encoder and decoder', printed: both parameter groups with `initial_lr: 1.428e-05`, `max_lr:
    0.000357`; the reporter 'was unable to reach the results obtained in the paper'. `OneCycleLR` sets each group's
    rate from its own `max_lr` list, a number being used for every group: the groups' own rates are discarded.
    Ported: the digits standardised, split into a validation fifth, a small target set of 200 images and the rest (the
    source); an encoder (64-128-128) pretrained on the source for 10 passes (Adam at 1e-3), a new decoder (128-64-10),
    fine-tuned on the target set with cross-entropy, AdamW with weight decay 0.1 (AdaBins') and AdaBins' one-cycle
    (div_factor 25, final_div_factor 100) peaking at 1e-2, batches of 16, 10 epochs; the encoder's group is built at a
    tenth of the rate; the bug passes `max_lr=1e-2`, the twin one `max_lr` per group (1e-3, 1e-2). Nothing fails
    outright: the encoder trains ten times faster than meant and fits the small set at the cost of its pretrained
    features; no per-layer statistic says a rate is wrong. Measured (seeds 0 and 1): the bug's two groups have the
    same rate at every step (4e-4 up to 1e-2 and down to 4e-6), the twin's encoder a tenth of its decoder's; the
    bug's encoder weights move by up to 0.26 at both seeds (the twin's by 0.033 and 0.032); the bug's validation loss
    is 0.172 and 0.197 (accuracy 0.944 and 0.942) for a training loss of 0.021 and 0.017 over the last epoch, the
    twin's 0.153 and 0.136 (accuracy 0.947 and 0.955; training 0.028 and 0.025); batch losses end at 0.004 and 0.002
    of their first (the twin's at 0.009 and 0.008)"""
    x, y = _digits_std()
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    n_val = len(x) // 5
    val, tgt, src = idx[:n_val], idx[n_val:n_val + 200], idx[n_val + 200:]
    model = _EncoderDecoder()
    pre = nn.Sequential(model.encoder, nn.Linear(128, 10))   # the encoder's pretraining head, dropped after
    _pretrained(pre, x[src], y[src])
    train = DataLoader(list(zip(x[tgt], y[tgt])), bs=16, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader(list(zip(x[val], y[val])), bs=64))
    return Learner(dls, model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, splitter=_encoder_decoder_groups,
                   opt_func=torch_opt(torch.optim.AdamW, weight_decay=0.1),
                   cbs=[_TenthForEncoder(), _OneCycle([1e-3, 1e-2] if fixed else 1e-2)])
