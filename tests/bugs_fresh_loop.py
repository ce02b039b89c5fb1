"""Bug zoo, family 5 (issue 45), its second file: the fresh set's cases of optimisation and the training loop, and those
added in a second pass. See `bugs_fresh.py`."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_vectors, _digit_images, _blobs, _tiny_unet
from bugs_optim import _NoZeroGrad
from bugs_fresh import _gen, _pixels

# ---- optimisation and the training loop ----
def _noisy_blobs(n=200, seed=0):
    "Denoising pairs: noisy images of blobs (noise sd 0.5) and the clean images"
    x, m = _blobs(n=n, seed=seed)
    clean = (m.float() / 2).unsqueeze(1)
    return clean + 0.5 * torch.randn(clean.shape, generator=_gen(seed + 1)), clean

@case("https://github.com/PENGLU-WashU/IMC_Denoise/issues/11",
      "the demo trains DeepSNiF with `train_initial_lr=1`: the loss is NaN from the start",
      {'lr_too_high', 'loss_diverging', 'nonfinite_loss', 'nonfinite'}, epochs=3)
def denoiser_initial_lr_one(fixed):
    """'As your settings, the current initial learning rate is 1, which is too big. Please set train_initial_lr as 1e-3.'
    A two-level U-Net denoiser of synthetic images (DeepSNiF's blind-spot training simplified to clean targets), MSE, Adam"""
    x, y = _noisy_blobs()
    return Learner(tensor_dls(x, y, bs=16), _tiny_unet(n_out=1), loss_func=nn.MSELoss(), lr=1e-3 if fixed else 1.,
                   opt_func=torch_opt(torch.optim.Adam))

def _names(n_per=150, n_classes=6, length=7, n_chars=27, seed=0):
    "Names as one-hot letters `(n, length, n_chars)`: each class (a language) draws its letters from a distribution of its own"
    g, xs, ys = _gen(seed), [], []
    for k in range(n_classes):
        p = torch.rand(n_chars, generator=g) ** 4
        letters = torch.multinomial(p / p.sum(), n_per * length, replacement=True, generator=g).view(n_per, length)
        xs.append(F.one_hot(letters, n_chars).float()); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _CharRNN(nn.Module):
    "The tutorial's RNN: the letter and the hidden state joined, `i2h` and `i2o` linear layers, a log-softmax over the languages"
    def __init__(self, n_chars=27, hid=128, n_out=6):
        super().__init__()
        self.hid, self.i2h, self.i2o = hid, nn.Linear(n_chars + hid, hid), nn.Linear(n_chars + hid, n_out)
    def forward(self, x):
        h = x.new_zeros(x.shape[0], self.hid)
        for t in range(x.shape[1]):
            joined = torch.cat([x[:, t], h], 1)
            h, out = self.i2h(joined), self.i2o(joined)
        return F.log_softmax(out, 1)

class _ModelMadeAgain(Callback):
    "The notebook instantiated the RNN a second time after making the optimiser: the model trained is not the one it holds"
    order = -100
    def before_fit(self):
        torch.manual_seed(1)
        self.learn.model = _CharRNN()   # fastai has already built the optimiser (`create_opt`) on the first one

@case("https://github.com/spro/practical-pytorch/issues/9",
      "the char-RNN is instantiated again after the optimiser was made on the first instance: the model that runs is never updated",
      {'optimizer_groups', 'frozen'}, epochs=4, lr=0.05)
def char_rnn_model_made_twice(fixed):
    """With `optimizer = torch.optim.SGD(rnn.parameters(), lr=0.005)` in place of the manual update, 'loss is big, and loss
    flow up and down, do not diminish'; the author: 'I have the model instantiated twice ... Try moving the optimizer to below
    the second one', fixed in the tutorial. The tutorial's RNN on synthetic one-hot names of six languages, `NLLLoss`, SGD;
    batches of 16 at 0.05 instead of single names at 0.005"""
    x, y = _names()
    return Learner(tensor_dls(x, y, bs=16), _CharRNN(), loss_func=nn.NLLLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD), cbs=[] if fixed else [_ModelMadeAgain()])

@case("https://github.com/apache/singa/pull/333",
      "the CIFAR-10 example's softmax cross-entropy gradient is summed over the batch, not averaged: steps 100 times too large, the loss stays at 87",
      {'lr_too_high', 'loss_diverging', 'exploding_grad', 'loss_summed'}, epochs=8, lr=0.01)
def cifar_gradients_summed(fixed):
    """'Without replacing gradients with its average over matrix's size, they are going to be too high to maintain a stable
    loss ... The loss stays at around 87 without dropping' (merged). A small AlexNet-like CNN on the digits as images, batches
    of 100, SGD with momentum 0.9; the bug kept as a cross-entropy summed over the batch"""
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    return Learner(tensor_dls(x, y, bs=100), model, loss_func=nn.CrossEntropyLoss(reduction='mean' if fixed else 'sum'),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.9))

def _keywords(n_per=300, frames=40, n_mels=20, seed=0):
    "Keyword spotting data: `(n, frames, n_mels)` filterbank frames, filler or one of two keywords (a pattern at a random time)"
    g, xs, ys = _gen(seed), [], []
    patterns = torch.randn(2, 8, n_mels, generator=g)
    for k in range(3):
        x = torch.randn(n_per, frames, n_mels, generator=g)
        if k:
            for i, s in enumerate(torch.randint(0, frames - 8, (n_per,), generator=g).tolist()): x[i, s:s + 8] += 1.5 * patterns[k - 1]
        xs.append(x); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _KWSGRU(nn.Module):
    "wekws' GRU backbone, scaled down: a linear preprocessing layer, a GRU, a linear classifier at the last frame"
    def __init__(self, n_mels=20, hid=48):
        super().__init__()
        self.pre, self.rnn, self.out = nn.Linear(n_mels, hid), nn.GRU(hid, hid, batch_first=True), nn.Linear(hid, 3)
    def forward(self, x): return self.out(self.rnn(F.relu(self.pre(x)))[0].max(1).values)

@case("https://github.com/wenet-e2e/wekws/pull/73",
      "the keyword-spotting executor calls `optimizer.step()` but never `optimizer.zero_grad()`: gradients accumulate over the run",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=1e-3)
def kws_executor_without_zero_grad(fixed):
    """'I noticed that in the training stage, when optimizer.step() is called, optimizer.zero_grad() is not called'; the merged
    fix adds it before `loss.backward()`. A GRU keyword spotter (max-pooled over frames) on synthetic filterbank features of
    two keywords and filler, Adam"""
    x, y = _keywords()
    return Learner(tensor_dls(x, y, bs=32), _KWSGRU(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_NoZeroGrad()])

class _SpeedupAfterOptimizer(Callback):
    "NNI's `ModelSpeedup` run after the optimiser was made: the pruned convolutions are new modules the optimiser does not hold"
    order = -100
    def before_fit(self): _speedup(self.learn.model)   # fastai has already built the optimiser (`create_opt`)

def _speedup(model, keep=8):
    "Replace `model[0]` (16 filters) and `model[3]` by smaller convolutions holding the `keep` filters of largest L1 norm"
    c1, c2 = model[0], model[3]
    idx = c1.weight.abs().sum((1, 2, 3)).argsort(descending=True)[:keep]
    n1, n2 = nn.Conv2d(c1.in_channels, keep, 3, padding=1), nn.Conv2d(keep, c2.out_channels, 3, padding=1)
    with torch.no_grad():
        n1.weight.copy_(c1.weight[idx]); n1.bias.copy_(c1.bias[idx]); n2.weight.copy_(c2.weight[:, idx]); n2.bias.copy_(c2.bias)
    model[0], model[3] = n1, n2
    return model

@case("https://github.com/microsoft/nni/issues/4521",
      "a pruned model is sped up (its layers replaced by smaller ones) after the optimiser was made: the new layers are never updated",
      {'optimizer_groups', 'frozen'}, epochs=3, lr=1e-3)
def pruned_layers_after_optimizer(fixed):
    """'The parameters are not updated when the pruned model is finetuned': `speedup_model()` replaces the layers, 'so the
    parameters registered in the optimizer are outdated ... an easy way is reinitializing a new optimizer', which solved it.
    A small CNN on the digits, its first convolution pruned from 16 to 8 filters, Adam; the twin speeds up first, then makes
    the optimiser. The head still learns, so the loss falls"""
    x, y = _digit_images()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    if fixed: _speedup(model)
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_SpeedupAfterOptimizer()])

class _ListNet(nn.Module):
    "The report's net: `self.layer` registered, the hidden layers kept in a plain Python list (or, fixed, an `nn.ModuleList`)"
    def __init__(self, num_layers=2, registered=False):
        super().__init__()
        self.layer, self.head = nn.Linear(64, 64), nn.Linear(64, 10)
        hidden = [nn.Linear(64, 64) for _ in range(num_layers)]
        self.list_of_layers = nn.ModuleList(hidden) if registered else hidden
    def forward(self, x):
        x = F.relu(self.layer(x))
        for l in self.list_of_layers: x = F.relu(l(x))
        return self.head(x)

@case("https://github.com/pytorch/pytorch/issues/666",
      "hidden layers kept in a Python list are no submodules: their weights are not in `parameters()`, so they never train",
      {'unregistered_params'}, epochs=4, lr=1e-3)
def layers_in_python_list(fixed):
    """`self.list_of_layers = [nn.Linear(1, 1) for i in range(num_layers)]` is not listed by the module; 'This behaviour is
    expected' (the answer points to `nn.ModuleList`). An MLP on the digits with its two hidden layers in the list, Adam. The
    layers still run, at their random weights, and the registered ones learn around them: no statistic of a registered layer
    sees it"""
    x, y = _digit_vectors()
    return Learner(tensor_dls(x, y, bs=64), _ListNet(registered=fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _bimodal(n=3000, seed=0):
    "A one-dimensional input and a target drawn from one of two branches (`y = x^2` or `y = -x`): a mixture density's task"
    g = _gen(seed)
    x = 2 * torch.rand(n, 1, generator=g) - 1
    branch = torch.rand(n, 1, generator=g) < 0.6
    return x, torch.where(branch, x ** 2, -x) + 0.05 * torch.randn(n, 1, generator=g)

class _MDN(nn.Module):
    "The world model's mixture density head on an MLP: `k` Gaussians' log-weights (log-softmax over `pi_dim`), means, log-scales"
    def __init__(self, k=3, hid=64, pi_dim=-1):
        super().__init__()
        self.k, self.pi_dim = k, pi_dim
        self.body, self.out = nn.Sequential(nn.Linear(1, hid), nn.Tanh(), nn.Linear(hid, hid), nn.Tanh()), nn.Linear(hid, 3 * k)
    def forward(self, x):
        pi, mu, logsigma = self.out(self.body(x)).split(self.k, -1)
        return torch.cat([F.log_softmax(pi, dim=self.pi_dim), mu, logsigma], -1)

def _gmm_loss(out, y):
    "The negative log-likelihood of `y` under the mixture (the world model's `gmm_loss`)"
    logpi, mu, logsigma = out.chunk(3, -1)
    logp = -0.5 * ((y - mu) / logsigma.exp()) ** 2 - logsigma - 0.919
    return -torch.logsumexp(logpi + logp, -1).mean()

@case("https://github.com/ctallec/world-models/issues/10",
      "the MDN-RNN's mixture weights take their log-softmax over the batch dimension, not over the Gaussians: samples mix",
      {'batch_independence'}, epochs=3, lr=1e-3)
def mdn_log_softmax_over_batch(fixed):
    """`logpi = f.log_softmax(pi, dim=-2)` on `(seq_len, bs, gaussians)`: 'Here the softmax is done over the batch dimension of
    pi. Shouldn't the softmax be done over the gaussians dimension'; the author fixed it. A mixture density network of three
    Gaussians on a two-branch one-dimensional task (the world model's recurrence left out), Adam"""
    x, y = _bimodal()
    return Learner(tensor_dls(x, y, bs=32), _MDN(pi_dim=-1 if fixed else 0), loss_func=_gmm_loss,
                   opt_func=torch_opt(torch.optim.Adam))

class _LastOfDim1(nn.Module):
    "The report's `out[:, -1, :]` on an LSTM's output"
    def forward(self, o): return o[0][:, -1, :]

@case("https://github.com/pytorch/pytorch/issues/1538",
      "an MNIST LSTM takes (batch, rows, pixels) with `batch_first` commented out: it runs along the batch, mixing images",
      {'batch_independence'}, epochs=3, lr=1e-2)
def mnist_lstm_batch_first_commented_out(fixed):
    """'I train a simple LSTM to do classifier on MNIST ... whether I use batch_first, I get the different result': the model
    had `# batch_first=True)` and fed `(batch, 28, 28)`; the answer: without it the LSTM reads the batch as the sequence.
    Two LSTM layers of 128, `out[:, -1, :]`, a linear classifier, Adam at 1e-2, batches of 100, on the digits' 8 rows"""
    x, y = _pixels()
    model = nn.Sequential(nn.LSTM(8, 128, 2, batch_first=fixed), _LastOfDim1(), nn.Linear(128, 10))
    return Learner(tensor_dls(x.view(-1, 8, 8), y, bs=100), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- added in a second pass (same rules: truths written before any run) ----
def _rgbd(n=160, size=16, seed=0):
    "RGB-D pairs: images `(n, 3, size, size)` of lit boxes, and their depth maps `(n, size, size)`, without a channel axis"
    g = _gen(seed)
    depth = 2 + 0.1 * torch.randn(n, size, size, generator=g)
    for i in range(n):
        r, c = torch.randint(0, size - 6, (2,), generator=g).tolist()
        depth[i, r:r + 6, c:c + 6] -= 1 + torch.rand(1, generator=g)
    img = torch.stack([3 - depth, 2.5 - depth, 0.3 * torch.randn(n, size, size, generator=g)], 1)
    return img, depth

@case("https://github.com/jiwei0921/CoNet/issues/3",
      "the depth head's output is `(B, 1, H, W)`, the depth map `(B, H, W)`: `smooth_l1_loss` broadcasts them to `(B, B, H, W)`",
      {'output_shape', 'target_shape'}, epochs=4, lr=1e-3)
def depth_target_without_channel(fixed):
    """'UserWarning: Using a target size (torch.Size([2, 256, 256])) that is different to the input size (torch.Size([2, 1,
    256, 256]))' at `F.smooth_l1_loss(pred_depth, depth, reduction='sum')`; the author: 'For target, you can add this code
    target = target.unsqueeze(1)'. A small convolutional depth head on synthetic RGB images of boxes, smooth L1 summed as
    the repository does, Adam, batches of 2 as the report (the truth names the cause in the tool's word, `output_shape`,
    and the assumed `target_shape`)"""
    x, d = _rgbd()
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))
    def loss(out, y): return F.smooth_l1_loss(out, y, reduction='sum') / 256
    return Learner(tensor_dls(x, d.unsqueeze(1) if fixed else d, bs=2), model, loss_func=loss, opt_func=torch_opt(torch.optim.Adam))

def _tracks(n_storms=300, steps=12, seed=0):
    "Hurricane tracks on their raw scales: latitude, longitude, wind (knots), minimum pressure (millibars), every 6 hours"
    g = _gen(seed)
    lat0, lon0 = 12 + 10 * torch.rand(n_storms, 1, generator=g), -40 - 40 * torch.rand(n_storms, 1, generator=g)
    t = torch.arange(steps).float()
    lat = lat0 + 0.4 * t + 0.1 * torch.randn(n_storms, steps, generator=g)
    lon = lon0 - 0.6 * t + 0.1 * torch.randn(n_storms, steps, generator=g)
    wind = (30 + 60 * torch.rand(n_storms, 1, generator=g)) * torch.sin(3.14 * (t + 1) / (steps + 2)) + 3 * torch.randn(n_storms, steps, generator=g)
    pres = 1012 - 0.8 * wind + torch.randn(n_storms, steps, generator=g)
    return torch.stack([lat, lon, wind, pres], -1)

@case("https://github.com/hammad93/hurricane-net/issues/1",
      "an LSTM forecasting hurricane tracks on unscaled features (pressures near 1,000 millibars): the gradient explodes, the tensors go NaN",
      {'input_scale', 'target_scale', 'nonfinite_loss'}, epochs=4, lr=1e-3)
def hurricane_lstm_unscaled(fixed):
    """'Previously, the deep learning model has an exploding gradient because the features were not scaled and the tensors
    converged to NaN. After further analysis, the best way to standardize and scale the features using RobustScaler' (the
    author's own issue, closed). An LSTM reading 6 six-hourly records and forecasting the next 4 (all four features), MSE,
    Adam; the twin scales inputs and targets by median and interquartile range"""
    tr = _tracks()
    if fixed:
        med, q = tr.flatten(0, 1).median(0).values, tr.flatten(0, 1).quantile(torch.tensor([0.25, 0.75]), 0)
        tr = (tr - med) / (q[1] - q[0])
    x, y = tr[:, :6], tr[:, 6:10].flatten(1)
    class TrackLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.out = nn.LSTM(4, 64, batch_first=True), nn.Linear(64, 16)
        def forward(self, x): return self.out(self.rnn(x)[0][:, -1])
    return Learner(tensor_dls(x, y, bs=16), TrackLSTM(), loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

def _court_heatmaps(n=160, size=24, seed=0):
    "Keypoint data: noisy images with a bright spot, and a Gaussian heatmap `(1, size, size)` centred on it"
    g, yy, xx = _gen(seed), *torch.meshgrid(torch.arange(24.), torch.arange(24.), indexing='ij')
    pos = 3 + 18 * torch.rand(n, 2, generator=g)
    heat = torch.exp(-((yy - pos[:, 0, None, None]) ** 2 + (xx - pos[:, 1, None, None]) ** 2) / 8).unsqueeze(1)
    return heat + 0.3 * torch.randn(n, 1, size, size, generator=g), heat

class _NoZeroGradPlain(Callback):
    "The trainer never clears the gradients: fastai's `zero_grad` does nothing (an `OptimWrapper`'s or fastai's own optimiser)"
    order = -50
    def before_fit(self): self.learn.opt.zero_grad = lambda *a, **k: None

@case("https://github.com/yastrebksv/TennisCourtDetector/issues/7",
      "the court detector's trainer calls `optimizer.step()` without ever `optimizer.zero_grad()`: each step adds every past gradient",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=1e-4)
def heatmap_trainer_without_zero_grad(fixed):
    """'Why there is no "optimizer.zero_grad()" in base_trainer.py? There must be smt wrong'; the author: 'You are right, thanks!
    I fixed it.' A small encoder-decoder regressing keypoint heatmaps (TrackNet's kind, scaled down), MSE, Adam at 1e-4"""
    x, h = _court_heatmaps()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))
    return Learner(tensor_dls(x, h, bs=8), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam),
                   cbs=[] if fixed else [_NoZeroGradPlain()])

@case("https://github.com/pkmital/pycadl/pull/5",
      "the training pipeline divides the image batch by 255 twice: the autoencoder sees (and rebuilds) pixels between 0 and 0.004",
      {'input_scale', 'target_scale'}, epochs=4, lr=1e-3)
def images_divided_by_255_twice(fixed):
    """'The input image batch was being divided by 255 twice before being fed to the model' (merged). DRAW's recurrent
    attention left out: a small convolutional autoencoder with a sigmoid output and binary cross-entropy rebuilding the
    digits (as bytes 0..240), Adam"""
    x, _ = _digit_images(scale='byte')
    x = x / 255 if fixed else x / 255 / 255
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(),
                          nn.Upsample(scale_factor=2), nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid())
    return Learner(tensor_dls(x, x, bs=32), model, loss_func=nn.BCELoss(), opt_func=torch_opt(torch.optim.Adam))

def _frames(n_per=200, size=16, seed=0):
    "Expert demonstrations as a behaviour-cloning set: grey frames `(n, 1, size, size)` as bytes 0..255 (a ball's position), the action (0..3)"
    g, xs, ys = _gen(seed), [], []
    yy, xx = torch.meshgrid(torch.arange(float(size)), torch.arange(float(size)), indexing='ij')
    for a, (dy, dx) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
        c = size / 2 + (size / 4) * torch.tensor([dy, dx]).float() + 2 * torch.randn(n_per, 2, generator=g)
        ball = 200 * torch.exp(-((yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2) / 4)
        xs.append((30 + ball + 20 * torch.rand(n_per, size, size, generator=g)).clamp(0, 255).round().unsqueeze(1)); ys.append(torch.full((n_per,), a))
    return torch.cat(xs), torch.cat(ys)

@case("https://github.com/hill-a/stable-baselines/issues/328",
      "behaviour-cloning pretraining feeds the CNN policy image observations of 0..255: the dataset loader never scales them to 0..1",
      {'input_scale'}, epochs=10, lr=1e-4)
def pretraining_frames_unscaled(fixed):
    """'When using a image env, the image data that gets fed in to the neural network is between 0 and 255'; the maintainer:
    the RL path scales them, and 'The first bug is in dataset.py. I realised that the images get at no point normalized, in
    the image loading chain' (fixed in the PR that followed). A NatureCNN-like policy on synthetic frames of a ball, the
    expert's action as the class, cross-entropy, Adam at `pretrain`'s default 1e-4 for its default 10 epochs. At so small a
    learning rate the unscaled run learns faster here: the harm is in what the policy meets later, scaled, in the RL loop"""
    x, y = _frames()
    model = nn.Sequential(nn.Conv2d(1, 16, 4, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, 4))
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/hunkim/PyTorchZeroToAll/pull/4",
      "the softmax-MNIST example's last linear layer is followed by a ReLU: the logits given to `CrossEntropyLoss` cannot be negative",
      {'output_activation'}, layer='9', epochs=5, lr=0.01)
def mnist_logits_through_relu(fixed):
    """'Remove relu in the final layer' (merged: 'Great!'): the lecture's net returned `F.relu(self.l5(x))` into
    `nn.CrossEntropyLoss`. Its five linear layers (520, 320, 240, 120 units, then 10) on the digits' 64 pixels instead of
    784, normalised as its `transforms.Normalize` does, SGD at 0.01 with momentum 0.5; batches of 16 (not 64), so that 1,437
    images give enough steps"""
    x, y = _digit_vectors()
    sizes = (64, 520, 320, 240, 120, 10)
    layers = [m for i, o in zip(sizes[:-1], sizes[1:]) for m in (nn.Linear(i, o), nn.ReLU())]
    return Learner(tensor_dls(x, y, bs=16), nn.Sequential(*(layers if not fixed else layers[:-1])),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.5))

def _bev_offsets(n=200, size=12, seed=0):
    "Bird's-eye grids `(n, 2, size, size)` of occupancy and height, and per-cell box offsets `(n, 2, size, size)` in [-1, 1] to the nearest car"
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(float(size)), torch.arange(float(size)), indexing='ij')
    cars = size * torch.rand(n, 2, generator=g)
    occ = torch.exp(-((yy - cars[:, 0, None, None]) ** 2 + (xx - cars[:, 1, None, None]) ** 2) / 3)
    x = torch.stack([occ + 0.1 * torch.randn(n, size, size, generator=g), occ * (1 + torch.rand(n, 1, 1, generator=g))], 1)
    off = torch.stack([(cars[:, 0, None, None] - yy) / size, (cars[:, 1, None, None] - xx) / size], 1)
    return x, off

@case("https://github.com/tsinghua-rll/VoxelNet-tensorflow/issues/10",
      "the region proposal network's last convolution (the box regression map) ends in a ReLU: its offsets cannot be negative",
      {'output_activation', 'target_range'}, layer='6', epochs=4, lr=1e-3)
def rpn_regression_through_relu(fixed):
    """'I notice you use the relu layer for the last layer of RPN which predicts class score and regression ... if you want to
    shrink your anchor, you must have some negative prediction in regression'; fixed in the author's commit. A small
    convolutional RPN's regression branch on synthetic bird's-eye grids, per-cell offsets in [-1, 1], smooth L1, Adam"""
    x, off = _bev_offsets()
    model = nn.Sequential(nn.Conv2d(2, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                          nn.ReLU(), nn.Conv2d(32, 2, 1), *([] if fixed else [nn.ReLU()]))
    return Learner(tensor_dls(x, off, bs=16), model, loss_func=nn.SmoothL1Loss(), opt_func=torch_opt(torch.optim.Adam))
