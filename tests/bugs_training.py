"""Bug zoo, family 2: the data, the optimiser and the flow of gradients. See `bugzoo.py`."""
import math
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *

# ---- what these ports share ----
def _split_dls(x, y, valid_idx, bs=64, seed=0)->DataLoaders:
    "`DataLoaders` whose validation set is `valid_idx` (a split the report made by position), the rest shuffled for training"
    vi = set(int(i) for i in valid_idx)
    ti = [i for i in range(len(x)) if i not in vi]
    def items(ix): return [(x[j], y[j]) for j in ix]
    train = DataLoader(items(ti), bs=bs, shuffle=True, drop_last=True)
    train.rng = random.Random(seed)
    return DataLoaders(train, DataLoader(items(sorted(vi)), bs=bs))

def _onehot_mse(out, y):
    "The quadratic cost of the textbook networks, `½‖a - onehot(y)‖²` summed over outputs, averaged over the batch"
    return 0.5 * ((out - F.one_hot(y, out.shape[1]).float()) ** 2).sum(1).mean()

class _Last(nn.Module):
    "The output of an `nn.LSTM`/`nn.GRU` at the last step of dim 1 (`out[:, -1, :]`, as the reports index it)"
    def forward(self, o): return o[0][:, -1, :]

def _keras_init(model):
    "Initialise as Keras does: Glorot-uniform kernels, zero biases; LSTMs with orthogonal recurrent kernels and a forget-gate bias of 1"
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight); nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LSTM):
            for n, p in m.named_parameters():
                if n.startswith('weight_ih'): nn.init.xavier_uniform_(p)
                elif n.startswith('weight_hh'): nn.init.orthogonal_(p)
                else:
                    nn.init.zeros_(p)
                    if n.startswith('bias_ih'): p.data[m.hidden_size:2 * m.hidden_size] = 1.
        elif isinstance(m, nn.Embedding): nn.init.uniform_(m.weight, -0.05, 0.05)
    return model

class _NoZeroGrad(Callback):
    "The report's training step never cleared the gradients: the optimiser's `zero_grad` does nothing"
    order = -50
    def before_fit(self): self.learn.opt.opt.zero_grad = lambda set_to_none=True: None


@case("https://github.com/keras-team/keras/issues/6914",
      "Keras's mnist_mlp fed raw 0..255 pixels (the `x /= 255` left out): accuracy stuck near 30%",
      {'input_scale'}, epochs=3, lr=1e-3)
def mlp_raw_pixels(fixed):
    "The user ran mnist_mlp.py (512-512 ReLU, dropout 0.2, softmax, RMSprop) on Kaggle's 0..255 pixels; the fix was dividing by 255"
    x, y = digits_raw()
    x = x * (255 / 16)                                  # pixels as the Kaggle csv has them, 0..255
    if fixed: x = x / 255
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(512, 10), nn.Softmax(dim=1))
    return Learner(tensor_dls(x, y, bs=128), _keras_init(model), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.RMSprop, alpha=0.9, eps=1e-7))


@case("https://discuss.pytorch.org/t/neural-network-could-not-learn-on-this-type-of-data-why/96648",
      "a regression of x**3 on raw x from 1 to 3999 (targets up to 6e10): the MLP cannot learn it",
      {'input_scale', 'target_scale'}, epochs=4, lr=1e-3)
def cubic_unscaled_regression(fixed):
    "The user fitted Linear(1,50)-ReLU-Linear(50,1) with Adam and MSE to x**3 on raw x; the accepted fix standardised input and target"
    x = torch.arange(1, 4000).float().unsqueeze(1)
    y = x ** 3
    if fixed: x, y = (x - x.mean()) / x.std(), (y - y.mean()) / y.std()
    model = nn.Sequential(nn.Linear(1, 50), nn.ReLU(), nn.Linear(50, 1))
    return Learner(tensor_dls(x, y, bs=128), model, loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam))


@case("https://github.com/keras-team/keras/issues/3040",
      "a one-weight linear regression on x from 0 to 199 with SGD at lr 1e-3, batch size 1: the weights go to NaN",
      {'lr_too_high', 'loss_diverging', 'nonfinite', 'nonfinite_loss', 'input_scale', 'target_scale'}, epochs=1)
def linear_regression_lr_nan(fixed):
    "The user fitted Dense(1) to y = 2x on raw x with SGD(lr=0.001) and got NaN; he found the learning rate too high (fixed: 1e-5; x stays raw)"
    x = torch.arange(200).float().unsqueeze(1)
    model = _keras_init(nn.Linear(1, 1))
    return Learner(tensor_dls(x, 2 * x, bs=1), model, loss_func=F.mse_loss, lr=1e-5 if fixed else 1e-3, opt_func=torch_opt(torch.optim.SGD))


@case("https://github.com/IBM/aihwkit/issues/446",
      "the simple-layer example never calls `opt.zero_grad()`: gradients pile up over the steps and the loss falls, then climbs back",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=10, lr=0.1)
def simple_layer_without_zero_grad(fixed):
    "examples/01_simple_layer.py trained a 4->2 linear layer with SGD(lr=0.1) on two samples, no `zero_grad`; the fix adds it each step"
    x = torch.tensor([[0.1, 0.2, 0.4, 0.3], [0.2, 0.1, 0.1, 0.3]])
    y = torch.tensor([[1.0, 0.5], [0.7, 0.3]])
    pairs = [(x[0], y[0]), (x[1], y[1])]
    dls = DataLoaders(DataLoader(pairs * 10, bs=2, shuffle=False), DataLoader(pairs, bs=2))   # each step: both samples, as the example
    return Learner(dls, nn.Linear(4, 2), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.SGD),
                   cbs=[] if fixed else [_NoZeroGrad()])


@case("https://github.com/zjunlp/HVPNeT/issues/5",
      "the optimiser's parameter groups list the encoder but not the classifier `fc`: the last layer never trains",
      {'optimizer_groups', 'frozen'}, layer='5', epochs=3, lr=1e-3)
def classifier_left_out_of_optimizer(fixed):
    "HVPNeT's train.py appended the encoder's groups but not those of `fc` (and the CRF); the fix appends them (CRF left out here)"
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    def splitter(m): return [list(m.parameters())] if fixed else [list(m[:5].parameters())]
    return Learner(digits_dls(bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, splitter=splitter,
                   opt_func=torch_opt(torch.optim.AdamW))


class _DivideLrEveryStep(Callback):
    "The user's schedule divided the learning rate by 10 at every step instead of at two fixed steps"
    order = 1
    def before_fit(self): self.lr0 = self.opt.hypers[0]['lr']
    def before_batch(self):
        if self.training: self.opt.set_hyper('lr', self.lr0 * 0.1 ** self.train_iter)

@case("https://github.com/matteo-dunnhofer/imagenet/issues/10",
      "the learning rate is divided by 10 at every step: after a few steps it is ~0 and the loss does not move",
      {'lr_too_low', 'loss_stalled'}, epochs=5, lr=1e-3, every=5)
def lr_divided_every_step(fixed):
    "The user's edit of the AlexNet trainer (momentum SGD, lr 1e-3, wd 5e-4) divided the lr by 10 each step, loss stuck at 8.1; fixed, it trains"
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(256, 10))           # AlexNet's classifier (4096 wide, dropout 0.5); its conv stack dropped for 8x8 digits
    return Learner(digits_dls(bs=16), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, wd=5e-4,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), cbs=[] if fixed else [_DivideLrEveryStep()])


@case("https://github.com/keras-team/keras/issues/8346",
      "images sorted by class and `validation_split=0.2`, which takes the last 20% unshuffled: the validation set is one class the model never sees",
      {'valid_at_chance'}, epochs=5, lr=1e-2)
def validation_split_is_one_class(fixed):
    "The user's 5-class data was in class order and Keras split before shuffling (validation accuracy 0); the fix shuffles before `fit`"
    x, y = digits_raw()
    keep = y < 5
    x, y = (x[keep] / 16).view(-1, 1, 8, 8), y[keep]
    order = torch.argsort(y, stable=True)                       # the data as it was read: class by class
    if fixed: order = order[torch.randperm(len(order), generator=torch.Generator().manual_seed(0))]
    x, y = x[order], y[order]
    n = len(x)
    conv = lambda ni, nf: [nn.Conv2d(ni, nf, 3, padding=1), nn.ReLU()]
    model = nn.Sequential(*conv(1, 32), *conv(32, 32), nn.MaxPool2d(2), nn.Dropout(0.25), *conv(32, 64), *conv(64, 64), nn.MaxPool2d(2),
                          nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 4, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 5), nn.Softmax(dim=1))
    return Learner(_split_dls(x, y, range(n - int(0.2 * n), n), bs=32), _keras_init(model), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, nesterov=True))


@case("https://github.com/yunjey/pytorch-tutorial/issues/196",
      "`batch_first=True` removed from the LSTM while the input stays (batch, seq, feature): the LSTM runs along the batch, mixing samples",
      {'batch_independence'}, epochs=2, lr=1e-2)
def lstm_batch_first_removed(fixed):
    "The user set `batch_first=False` in the tutorial's MNIST LSTM and got 11% accuracy; the fix keeps `batch_first=True` for (batch, seq, feature)"
    x, y = digits_raw()
    model = nn.Sequential(nn.LSTM(8, 128, 1, batch_first=fixed), _Last(), nn.Linear(128, 10))
    return Learner(tensor_dls((x / 16).view(-1, 8, 8), y, bs=100), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


class _GaborConv1D(nn.Module):
    "LEAF's complex Gabor filterbank: `filters//2` centre frequencies and bandwidths, clipped by a constraint, then a conv1d"
    def __init__(self, filters, kernel_size, no_grad_constraint):
        super().__init__()
        self.n, self.k, self.no_grad = filters // 2, kernel_size, no_grad_constraint
        mu = torch.linspace(0.05, 0.9, self.n) * math.pi                       # centre frequencies, in radians
        self._kernel = nn.Parameter(torch.stack([mu, torch.full((self.n,), 6.)], 1))   # and the gaussians' widths, in samples
        self.register_buffer('t', torch.arange(-(kernel_size // 2), (kernel_size + 1) // 2, dtype=torch.float32))
    def constraint(self, kernel):
        lo, hi = 4 * math.sqrt(2 * math.log(2)) / math.pi, self.k * math.sqrt(2 * math.log(2)) / math.pi
        return torch.stack([kernel[:, 0].clamp(0., math.pi), kernel[:, 1].clamp(lo, hi)], 1)
    def forward(self, x):
        if self.no_grad:                                                        # the report's GaborConstraint.forward
            with torch.no_grad(): kernel = self.constraint(self._kernel)
        else: kernel = self.constraint(self._kernel)
        mu, sigma = kernel[:, :1], kernel[:, 1:]
        gauss = torch.exp(-self.t ** 2 / (2 * sigma ** 2)) / (math.sqrt(2 * math.pi) * sigma)
        filt = torch.stack([gauss * torch.cos(mu * self.t), gauss * torch.sin(mu * self.t)], 1).view(2 * self.n, 1, self.k)
        return F.conv1d(x, filt, padding=self.k // 2)

class _SquaredModulus(nn.Module):
    "LEAF's squared modulus: real² + imaginary² of each complex filter's output"
    def forward(self, x): return 2 * F.avg_pool1d((x ** 2).transpose(1, 2), 2, 2).transpose(1, 2)

class _Log(nn.Module):
    def forward(self, x): return torch.log(x + 1e-5)

@case("https://github.com/denfed/leaf-audio-pytorch/issues/3",
      "LEAF's GaborConstraint clips the filter parameters inside `torch.no_grad()`: the Gabor filterbank gets no gradient and never learns",
      {'gradient_flow'}, layer='0', epochs=4, lr=2e-3)
def gabor_constraint_in_no_grad(fixed):
    "The user saw LEAF's complex-conv weights unchanged after Adam steps; the fix (PR #4) removed the `torch.no_grad()` around the clipping"
    g = torch.Generator().manual_seed(0)
    n, length, freqs = 1200, 256, torch.tensor([0.3, 0.45, 0.6, 0.75])           # four tones (radians per sample) in noise
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(length).float()
    phase = torch.rand(n, 1, generator=g) * 2 * math.pi
    x = torch.sin(freqs[y].unsqueeze(1) * t + phase) + 1.5 * torch.randn(n, length, generator=g)
    model = nn.Sequential(_GaborConv1D(16, 33, no_grad_constraint=not fixed), _SquaredModulus(), nn.AvgPool1d(32, 32), _Log(),
                          nn.Flatten(), nn.Linear(8 * 8, 4))
    return Learner(tensor_dls(x.unsqueeze(1), y, bs=64), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-6, amsgrad=True))


def _questions(n=1600, classes=9, vocab=5000, maxlen=25, seed=0):
    "Synthetic short questions: each holds two keywords of its class among filler words, hashed to ids, padded at the front to `maxlen`"
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    keys = torch.randperm(vocab - 1, generator=g)[:classes * 5].view(classes, 5) + 1
    x = torch.zeros(n, maxlen, dtype=torch.long)
    for i in range(n):
        ln = int(torch.randint(5, 16, (1,), generator=g))
        q = torch.randint(1, vocab, (ln,), generator=g)
        q[torch.randperm(ln, generator=g)[:2]] = keys[y[i], torch.randint(0, 5, (2,), generator=g)]
        x[i, maxlen - ln:] = q
    return x, y

@case("https://github.com/DrexelChatbotGroup/DrexelChatbot/issues/15",
      "`random.shuffle(x)` shuffles the questions but not their labels: no question keeps its label, training and validation stay at chance",
      {'valid_at_chance', 'loss_stalled'}, epochs=10, lr=1e-3)
def questions_shuffled_without_labels(fixed):
    "gac_training_tests.py shuffled x alone before a 50/50 split for its Embedding-LSTM(50)-softmax classifier; the fix shuffles one index list for both"
    x, y = _questions()
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    x, y = x[perm], (y[perm] if fixed else y)
    model = nn.Sequential(nn.Embedding(5000, 64), nn.LSTM(64, 50, batch_first=True), _Last(), nn.Linear(50, 9), nn.Softmax(dim=1))
    return Learner(_split_dls(x, y, range(len(x) // 2), bs=64), _keras_init(model), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.RMSprop, alpha=0.9, eps=1e-7))


@case("https://github.com/MichalDanielDobrzanski/DeepLearningPython/issues/13",
      "the textbook [784,30,10] network with ReLU in place of sigmoid, N(0,1) weights and learning rate 3.0: the ReLUs die, accuracy 9.5%",
      {'dead', 'lr_too_high'}, epochs=4)
def relu_textbook_net_lr_three(fixed):
    "The user swapped sigmoid for ReLU in Nielsen's network.py (eta 3.0, quadratic cost); the answer: learning rate 0.01 and weights scaled by 0.1"
    x, y = digits_raw()
    layers = [nn.Linear(64, 30), nn.ReLU(), nn.Linear(30, 10), nn.ReLU()]
    for l in layers[::2]:
        nn.init.normal_(l.weight); nn.init.normal_(l.bias)
        if fixed: l.weight.data.mul_(0.1); l.bias.data.mul_(0.1)
    return Learner(tensor_dls(x / 16, y, bs=10), nn.Sequential(*layers), loss_func=_onehot_mse, metrics=accuracy,
                   lr=0.01 if fixed else 3.0, opt_func=torch_opt(torch.optim.SGD))


class _AudioNTT(nn.Module):
    "BYOL-A's AudioNTT2020Task6 encoder (three conv blocks, two fc layers, max + mean over time), with its `set_trainable`"
    def __init__(self, n_mels=8, d=64, guard=True):
        super().__init__()
        block = lambda ni: [nn.Conv2d(ni, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*block(1), *block(64), *block(64))
        self.fc = nn.Sequential(nn.Linear(64 * (n_mels // 8), d), nn.ReLU(), nn.Dropout(0.3), nn.Linear(d, d), nn.ReLU())
        self.guard = guard
    def set_trainable(self, trainable=False):
        for p in self.parameters():
            if not self.guard or p.requires_grad: p.requires_grad = trainable  # the report's `if p.requires_grad:` guard
    def forward(self, x):
        x = self.features(x).permute(0, 3, 2, 1)
        x = self.fc(x.reshape(x.shape[0], x.shape[1], -1))
        return x.max(1)[0] + x.mean(1)

@case("https://github.com/nttcslab/byol-a/issues/7",
      "`set_trainable(True)` only touches parameters that already require grad: once frozen, the encoder can never be unfrozen",
      {'frozen', 'gradient_flow'}, epochs=3, lr=1e-3)
def encoder_cannot_be_unfrozen(fixed):
    "BYOL-A's set_trainable skipped parameters with `requires_grad=False`, so unfreezing a frozen encoder did nothing; the fix drops the `if`"
    enc = _AudioNTT(guard=not fixed)
    enc.set_trainable(False)                     # frozen for a linear evaluation first ...
    enc.set_trainable(True)                      # ... then meant to be fine-tuned
    return Learner(digits_dls(bs=64), nn.Sequential(enc, nn.Linear(64, 10)), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
