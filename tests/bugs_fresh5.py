"""Bug zoo, family 8 (issue 45): a fifth fresh set of real reports, from GitHub issues and pull requests not used before, so
that the held-out half holds programs nobody here tuned on. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`,
`layer`) was written and committed before the case was ever run under the tool. Cases were chosen for how common the bug
is (a softmax or sigmoid the loss applies again, a ReLU before the log-softmax, shapes that broadcast both ways, targets
out of the loss's range or scale, a softmax over the batch, BatchNorm statistics never updated, data sorted by class,
dropout left on in evaluation, an LSTM fed batch-first without the flag, learning rates too high and too low), never for
whether the tool catches it. Several leave every per-layer statistic healthy (shapes that broadcast, sorted batches, a
dropout drawn at evaluation, an LSTM mixing samples): their docstrings say so. Kinds that no check raises yet are marked
"(assumed)" where used. Keras programs are ported with Keras's initialisation (Glorot-uniform kernels, zero biases) and
Keras's losses. Each port was checked with plain fastai before any run under the tool: the buggy run shows the reported
symptom and the fixed twin trains."""
import itertools
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _keras_init, _blobs, _tiny_unet
from bugs_fresh import _gen

def _digits_std():
    "The digits as `(n, 64)` pixels standardised over the whole set (as MNIST's `Normalize((0.1307,), (0.3081,))`), labels"
    x, y = digits_raw()
    x = x / 16
    return (x - x.mean()) / x.std(), y


# ---- the output and the loss ----
@case("https://github.com/pytorch/pytorch/issues/16045",
      "a linear regression's `(n, 1)` outputs meet `(n,)` targets in `nn.MSELoss`: they broadcast to (n, n), it fits the mean",
      {'output_shape', 'target_shape'}, epochs=3, lr=0.1)
def mse_target_broadcast_linear_regression(fixed):
    """'Bug: fail to throw error when computing loss between tensors with shapes [n, 1] and [n]': `nn.Linear(2, 1)` fits
    y = 10 + 9 x0 - 2 x1 + noise by SGD at 0.1 under `nn.MSELoss`; 'If you leave y.reshape commented out, the correct estimates
    of this straightforward linear regression problem are not found and the loss fails to decrease into a region near the
    global optimum ... Yet, no error is raised'; the fix (and PyTorch's later warning): targets reshaped to `(n, 1)`. Batches of
    32 of 1,000 points here (the report: 100 points, full batch). No per-layer statistic sees it: every layer is healthy"""
    g = _gen(0)
    x = torch.randn(1000, 2, generator=g)
    y = 10 + 9 * x[:, 0] - 2 * x[:, 1] + torch.randn(1000, generator=g)
    return Learner(tensor_dls(x, y.unsqueeze(1) if fixed else y, bs=32), nn.Linear(2, 1), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD))

class _SetRegressor(nn.Module):
    "A graph-level regressor as matsciml's: an MLP on each atom's features, summed over the atoms into one value per graph"
    def __init__(self, n_in=8, hid=64):
        super().__init__()
        self.atom = nn.Sequential(nn.Linear(n_in, hid), nn.SiLU(), nn.Linear(hid, hid), nn.SiLU(), nn.Linear(hid, 1))
    def forward(self, x): return self.atom(x).sum(1).squeeze(-1)   # the readout: shape (n,)

@case("https://github.com/IntelLabs/matsciml/pull/347",
      "a graph readout of shape (n,) meets labels of shape (n, 1) in `nn.MSELoss`: they broadcast to (n, n), it fits the mean",
      {'output_shape', 'target_shape'}, epochs=4, lr=1e-3)
def readout_against_column_labels(fixed):
    """'Loss broadcasting fix': 'labels come out of the pipeline with an extra dimension (e.g. `[N, 1]`) compared to graph
    readouts. The resulting behavior is actually very different from the intention' (`MSELoss()(y, x)` warns 'Using a target
    size (torch.Size([8, 1])) that is different to the input size (torch.Size([8]))' and gives 0.1454 where 0.0535 was
    meant); merged: outputs reshaped to the labels' shape before the loss. Point sets of 12 'atoms' of 8 features, an
    energy-like label summed over the atoms, an atom-wise MLP summed into a readout, MSE, Adam at 1e-3; the twin reshapes the
    readout to (n, 1). The reverse of pytorch#16045's shapes. No per-layer statistic sees it"""
    g = _gen(0)
    x = torch.randn(2000, 12, 8, generator=g)
    w = torch.randn(8, generator=g)
    y = (torch.tanh(x @ w / 2) + 0.3 * x[..., 0] * x[..., 1]).sum(1, keepdim=True)
    loss = (lambda o, t: F.mse_loss(o.view_as(t), t)) if fixed else nn.MSELoss()
    return Learner(tensor_dls(x, (y - y.mean()) / y.std(), bs=32), _SetRegressor(), loss_func=loss,
                   opt_func=torch_opt(torch.optim.Adam))

class _FedMLP(nn.Module):
    "The federated-learning repository's MLP: `layer_input`, dropout, ReLU, `layer_hidden`, then a softmax (the bug) or none"
    def __init__(self, n_in=64, hid=200, n_out=10, softmax=True):
        super().__init__()
        self.layer_input, self.dropout, self.relu = nn.Linear(n_in, hid), nn.Dropout(), nn.ReLU()
        self.layer_hidden = nn.Linear(hid, n_out)
        self.softmax = nn.Softmax(dim=1) if softmax else nn.Identity()
    def forward(self, x): return self.softmax(self.layer_hidden(self.relu(self.dropout(self.layer_input(x)))))

@case("https://github.com/shaoxiongji/federated-learning/issues/9",
      "an MNIST MLP ends in `nn.Softmax` and trains under `nn.CrossEntropyLoss`, which applies its own log-softmax",
      {'output_activation'}, layer='softmax', epochs=8, lr=0.01)
def mlp_softmax_into_cross_entropy(fixed):
    """'you apply CrossEntropy function after softmax activation. But actually pytorch CrossEntropy function itself takes logit
    as its input. After removing the softmax activation, I'm able to improve the MLP from 90% to 95%'; the maintainer: 'Thx
    again! fixed.' The repository's MLP (a hidden layer of 200, dropout 0.5), SGD at 0.01 with momentum 0.5 as its defaults,
    on the digits standardised as MNIST is; the twin drops the softmax"""
    x, y = _digits_std()
    return Learner(tensor_dls(x, y, bs=32), _FedMLP(softmax=not fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.5))

class _ExampleNet(nn.Module):
    "pytorch/examples' MNIST net for 8×8 digits: two convolutions (the second with `Dropout2d`), `fc1`, dropout, `fc2`"
    def __init__(self, relu_out=True):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 3, padding=1), nn.Conv2d(10, 20, 3, padding=1)
        self.conv2_drop, self.fc1, self.fc2, self.relu_out = nn.Dropout2d(), nn.Linear(80, 50), nn.Linear(50, 10), relu_out
    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.dropout(F.relu(self.fc1(x.flatten(1))), training=self.training)
        x = self.fc2(x)
        return F.log_softmax(F.relu(x) if self.relu_out else x, dim=1)

@case("https://github.com/pytorch/examples/pull/117",
      "the MNIST example rectifies its last layer's outputs before `log_softmax`: negative scores become 0, with no gradient",
      {'output_activation'}, epochs=8, lr=0.01)
def mnist_relu_before_log_softmax(fixed):
    """'Remove rectifier before softmax': 'As far as I am concerned, `softmax(relu(h_last))` is a very unusual thing to do.
    Removed the rectifier for convergence and didactic purposes' (from the forum thread
    'ReLU in MNIST example'); merged ('thanks!').
    The example's net (two convolutions, `Dropout2d`, `fc1` of 50, dropout, `fc2`), `F.nll_loss`, SGD at 0.01 with momentum
    0.5 as the example, on the 8×8 digits (3×3 kernels, padded), standardised, batches of 16. The rectifier is a functional
    `F.relu` in `forward`: no module of its own to name"""
    x, y = _digits_std()
    return Learner(tensor_dls(x.view(-1, 1, 8, 8), y, bs=16), _ExampleNet(relu_out=not fixed), loss_func=F.nll_loss,
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.5))

class _LightningHead(nn.Module):
    "Lightning's transfer-learning example: a feature extractor, `fc` (256, ReLU, 32, 1), and `torch.sigmoid` in `forward`"
    def __init__(self):
        super().__init__()
        self.feature_extractor = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                                               nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 32), nn.Linear(32, 1))
    def forward(self, x): return torch.sigmoid(self.fc(self.feature_extractor(x)))

@case("https://github.com/Lightning-AI/pytorch-lightning/pull/7096",
      "a binary classifier returns `torch.sigmoid(x)`, is trained under `binary_cross_entropy_with_logits`: two sigmoids",
      {'output_activation'}, epochs=4, lr=1e-3)
def sigmoid_before_bce_with_logits(fixed):
    """'Fixed bug: replaced bce_loss_with_logits with bce_loss' in the computer-vision fine-tuning example, whose `forward`
    converts the logits to probabilities with `torch.sigmoid`; applied twice, every probability lies in [0.5, 0.73] and the
    loss cannot fall below ln 2 for the negatives (the related issue #18272: 'all probability are greater than 0.5'). The
    example's head (`fc`: 256, ReLU, 32, 1) on a small convolutional feature extractor trained from scratch (the example's
    ResNet-50 is pretrained), Adam at 1e-3, digits 0-4 against 5-9; the twin takes the merged fix, `binary_cross_entropy`.
    The sigmoid is a functional call in `forward`: no module of its own to name"""
    x, y = digits_raw()
    x, y = (x / 16).view(-1, 1, 8, 8), (y >= 5).float().unsqueeze(1)
    return Learner(tensor_dls(x, y, bs=32), _LightningHead(),
                   loss_func=F.binary_cross_entropy if fixed else F.binary_cross_entropy_with_logits,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/MicrosoftDocs/pytorchfundamentals/pull/21",
      "the dense MNIST network ends in `nn.LogSoftmax(dim=0)`: it normalises over the batch, not over the ten classes",
      {'batch_independence', 'output_activation'}, layer='2', epochs=4, lr=0.01)
def log_softmax_over_the_batch(fixed):
    """'Code Error, softmax should take the last dimension not the first dimension': Microsoft Learn's PyTorch fundamentals
    train `nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.LogSoftmax(dim=0))` under `nn.NLLLoss` with Adam at 0.01; the PR
    (after the module's issue #4, and a second reader: 'I agree that dim should be -1 for both LogSoftMax and log_softmax') sets
    `dim=-1`. Not merged when read: the fix is the one the PR and PyTorch's documentation give. The digits as `ToTensor` gives
    them (0..1), batches of 64. Each sample's output depends on the whole batch: validated in batches the accuracy looks like
    the fix's, but a digit classified alone gets 0 for every class (about 10% right, against 92% for the fix)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.LogSoftmax(dim=-1 if fixed else 0))
    return Learner(tensor_dls(x / 16, y, bs=64), model, loss_func=nn.NLLLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- targets and labels ----
def _sigmoid_bce(out, y):
    """`nn.BCELoss` of `F.sigmoid(out)` as PyTorch 1.x computed it on the CPU: no check that the targets lie in [0, 1], each
    log clamped at -100 (taken here from `logsigmoid`, so that a saturated sigmoid's gradient stays finite)"""
    return -(y * F.logsigmoid(out).clamp(min=-100) + (1 - y) * F.logsigmoid(-out).clamp(min=-100)).mean()

@case("https://github.com/milesial/Pytorch-UNet/issues/65",
      "a U-Net is trained on its own masks of 0 and 255 under a sigmoid and `nn.BCELoss`: the loss goes negative",
      {'target_range'}, epochs=4, lr=0.1)
def unet_masks_of_255_under_bce(fixed):
    """'Negative Loss': 'I'm now using my own data to train the model, but get negative loss'; the maintainer: 'The **targets**
    (here the true masks) should be between 0 and 1, and you should check that is the case for you. The `normalize` function
    only applies to input images and not the targets' (the answer accepted: 'I see ... thank you'). A two-level U-Net on noisy
    images with bright rectangles, masks of 0 and 255 as image files hold them; the repository's loop then (`F.sigmoid` of the
    logits into `nn.BCELoss`, which did not check its targets), SGD at 0.1 with momentum 0.9 and weight decay 5e-4; the twin
    divides the masks by 255"""
    x, m = _blobs(n=320)
    m = m.float().unsqueeze(1)
    return Learner(tensor_dls(x, m if fixed else 255 * m, bs=16), _tiny_unet(n_out=1), loss_func=_sigmoid_bce,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=5e-4))

class _Atomwise(nn.Module):
    "A property network (features, two layers of 64, SiLU) whose output module scales by `stddev` and adds `mean` (schnetpack's)"
    def __init__(self, n_in=16, n_out=2, mean=None, stddev=None):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, n_out))
        self.register_buffer('mean', torch.zeros(n_out) if mean is None else mean)
        self.register_buffer('stddev', torch.ones(n_out) if stddev is None else stddev)
    def forward(self, x): return self.net(x) * self.stddev + self.mean

@case("https://github.com/atomistic-machine-learning/schnetpack/issues/336",
      "a network regresses two molecular properties in their raw units (thousands), no mean or spread given: the loss is ~1e8",
      {'target_scale'}, epochs=4, lr=5e-4)
def property_targets_unscaled(fixed):
    """'The value of loss is very large': training several properties at once, 'Although the loss obtained is declining, the
    value is very large' (train loss 438577113 ... 59218379); 'Is it caused by the data not being normalized?'; the
    maintainer: 'you can get the statistics of the dataset with `train_loader.get_statistics(...)`. From that you get the mean
    and std values, which can be given as arguments to the output-modules'. A small property network on synthetic molecular
    descriptors, two targets around -12,000 and 3,000 with spreads of hundreds, MSE, Adam at 5e-4; the twin gives the output
    module the training targets' mean and standard deviation"""
    g = _gen(0)
    x = torch.randn(2000, 16, generator=g)
    w = torch.randn(16, 2, generator=g)
    h = torch.tanh(x @ torch.randn(16, 16, generator=g) / 4) @ w + 0.3 * (x @ w)
    y = torch.stack([-12000 + 300 * h[:, 0], 3000 + 150 * h[:, 1]], 1)
    mean, std = (y.mean(0), y.std(0)) if fixed else (None, None)
    return Learner(tensor_dls(x, y, bs=32), _Atomwise(mean=mean, stddev=std), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the data pipeline, the model's layers and modes, the learning rate ----
def _class_sorted_dls(x, y, bs, shuffle, valid_pct=0.2, seed=0):
    "`DataLoaders` whose training set is in the order of its classes (as FGVC-Aircraft's files are), shuffled only if `shuffle`"
    idx = torch.randperm(len(x), generator=_gen(seed))
    n = int(len(x) * valid_pct)
    tr = idx[n:][torch.argsort(y[idx[n:]], stable=True)]
    train = DataLoader([(x[j], y[j]) for j in tr.tolist()], bs=bs, shuffle=shuffle, drop_last=True)
    train.rng = random.Random(seed)
    return DataLoaders(train, DataLoader([(x[j], y[j]) for j in idx[:n].tolist()], bs=bs))

@case("https://github.com/pytorch/vision/issues/7818",
      "a classifier trains on samples sorted by class, without shuffling: each stretch of batches holds one class",
      {'unshuffled_batches'}, epochs=3, lr=0.01)
def dataset_sorted_by_class_unshuffled(fixed):
    """'AirCraft dataset samples are organized sequentially, which causes much Worse/biased performance unless Dataloader is
    shuffled'; the maintainer: datasets keep their authors' order, and 'where shuffling matters i.e. during training jobs, the
    Dataloader should be used and it shuffles by default'; the reporter's PR and the answer: shuffle the training data. A small
    CNN on the digits in the order of their classes, SGD at 0.01 with momentum 0.9; the twin shuffles. Every layer's statistics
    look healthy"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 4, 10))
    return Learner(_class_sorted_dls((x / 16).view(-1, 1, 8, 8), y, bs=32, shuffle=fixed), model,
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.9))

class _RowLSTM(nn.Module):
    "An LSTM over a sample's rows and a linear layer on its last output, reading `out[:, -1]` as if the batch came first"
    def __init__(self, batch_first):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 64, batch_first=batch_first), nn.Linear(64, 10)
    def forward(self, x): return self.fc(self.lstm(x)[0][:, -1])

@case("https://github.com/AndersonJo/dqn-pytorch/issues/1",
      "batches of shape (batch, seq, feature) go into an `nn.LSTM` built without `batch_first=True`: it runs along the batch",
      {'batch_independence'}, layer='lstm', epochs=4, lr=1e-3)
def lstm_fed_batch_first_without_the_flag(fixed):
    """'Missing batch_first attribute for LSTM model': 'Input to the LSTM from the CNN is of the shape (32, 64, 16). The semantics
    of LSTM input are (seq_len, batch_size, input_size). But the input format is (batch_size, seq_len, input_size). To correct
    it batch_first needs to be passed True ... Astonishing part is model is still learning with this error'; the maintainer:
    'wow! As you said it is astonishing haha :) I will fix this error soon!'. Ported from the DQN to a supervised sequence task:
    each digit's eight rows as eight steps, an LSTM of 64, a linear layer on the last step, Adam at 1e-3. Each sample's output
    depends on the samples before it in the batch; no per-layer statistic sees it"""
    x, y = digits_raw()
    return Learner(tensor_dls((x / 16).view(-1, 8, 8), y, bs=32), _RowLSTM(batch_first=fixed),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))

class _AFMLayer(nn.Module):
    "pytorch-fm's `AttentionalFactorizationMachine`: attention over the pairwise products, dropout on the scores and the sum"
    def __init__(self, dim=16, attn_size=16, dropouts=(0.2, 0.2), fixed=False):
        super().__init__()
        self.attention, self.projection, self.fc = nn.Linear(dim, attn_size), nn.Linear(attn_size, 1), nn.Linear(dim, 1)
        self.dropouts, self.fixed = dropouts, fixed
    def forward(self, x):
        row, col = zip(*itertools.combinations(range(x.shape[1]), 2))
        inner = x[:, list(row)] * x[:, list(col)]
        scores = F.softmax(self.projection(F.relu(self.attention(inner))), dim=1)
        kw = {'training': self.training} if self.fixed else {}   # the bug: `F.dropout`'s `training` defaults to True
        out = F.dropout(torch.sum(F.dropout(scores, p=self.dropouts[0], **kw) * inner, dim=1), p=self.dropouts[1], **kw)
        return self.fc(out)

class _AFM(nn.Module):
    "pytorch-fm's `AttentionalFactorizationMachineModel`: a linear term over the ids, the AFM layer, a sigmoid"
    def __init__(self, n_feat=80, dim=16, fixed=False):
        super().__init__()
        self.embedding, self.linear, self.bias = nn.Embedding(n_feat, dim), nn.Embedding(n_feat, 1), nn.Parameter(torch.zeros(1))
        nn.init.xavier_uniform_(self.embedding.weight)
        self.afm = _AFMLayer(dim, fixed=fixed)
    def forward(self, x): return torch.sigmoid(self.linear(x).sum(1) + self.bias + self.afm(self.embedding(x)))

@case("https://github.com/rixwew/pytorch-fm/issues/21",
      "an attentional factorisation machine calls `F.dropout` without `training=self.training`: dropout stays on in evaluation",
      {'eval_nondeterministic'}, layer='afm', epochs=4, lr=1e-3)
def attention_dropout_left_on_in_eval(fixed):
    """'F.dropout的问题' (the trouble with F.dropout): where the code calls `F.dropout` it needs `training=self.training`,
    'so that model.train() uses dropout and model.eval() does not'; the maintainer: 'Thank you for reporting the bug. I fixed
    it'. The repository's AFM (embeddings of 16, attention of 16, dropouts of 0.2 on the attention scores and on their
    weighted sum), a sigmoid and `nn.BCELoss`, Adam at 1e-3 with weight decay 1e-6, on synthetic click logs of four fields.
    Validation scores a random draw; every layer's statistics look healthy"""
    from bugs_fresh3 import _ctr
    x, y = _ctr()
    return Learner(tensor_dls(x, y, bs=64), _AFM(fixed=fixed), loss_func=nn.BCELoss(),
                   opt_func=torch_opt(torch.optim.Adam, weight_decay=1e-6))

def _pixel_accuracy(out, m): return (out.argmax(1) == m).float().mean()

class _Segmenter(nn.Module):
    "A small fully convolutional segmenter: three 3×3 convolutions, each with BatchNorm (of `momentum`) and ReLU, a 1×1 head"
    def __init__(self, momentum=0.1, n_out=2):
        super().__init__()
        def block(i, o): return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o, momentum=momentum), nn.ReLU()]
        self.body, self.head = nn.Sequential(*block(1, 16), *block(16, 32), *block(32, 32)), nn.Conv2d(32, n_out, 1)
    def forward(self, x): return self.head(self.body(x))

@case("https://github.com/hiwonjoon/tf-frrn/issues/2",
      "a segmentation network never updates its BatchNorms' running mean and variance: evaluation normalises with 0 and 1",
      {'eval_stats_stale'}, epochs=3, lr=1e-3)
def batchnorm_running_stats_never_updated(fixed):
    """'TensorBoard with good prediction, however, evaluation result is bad': 'The prediction on Tensorboard is pretty descent,
    however, when I try to evaluate the model, the predictions become very noisy and with a very bad accuracy'; the
    maintainer: 'I missed the part where running statistics (mean&stds) for batchnorm is updated. Since batchnorm layer needs
    accumulated mean & std values on evaluation step ... it explains why you get a drastically worse performance on your
    evaluation time. I corrected this bug'. TensorFlow's forgotten update ops are ported as PyTorch BatchNorms of momentum 0
    (their running statistics stay at their initial 0 and 1); a small fully convolutional segmenter of noisy rectangles,
    cross-entropy, Adam at 1e-3; the twin keeps the default momentum. The training losses are the twin's, step for step; the
    validation loss is three times the twin's"""
    x, m = _blobs(n=320)
    return Learner(tensor_dls(x, m, bs=16), _Segmenter(momentum=0.1 if fixed else 0.0), loss_func=nn.CrossEntropyLoss(),
                   metrics=_pixel_accuracy, opt_func=torch_opt(torch.optim.Adam))

class _TinyCausalLM(nn.Module):
    "A small causal transformer language model: token and position embeddings, two pre-norm layers, a vocabulary head"
    def __init__(self, vocab=32, d=64, length=24):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks, self.norm, self.head = nn.TransformerEncoder(layer, 2), nn.LayerNorm(d), nn.Linear(d, vocab)
        self.register_buffer('mask', nn.Transformer.generate_square_subsequent_mask(length))
    def forward(self, x):
        n = x.shape[1]
        h = self.blocks(self.emb(x) + self.pos(torch.arange(n)), mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.norm(h))

def _walks(n=1200, length=25, vocab=32, seed=0):
    "Token sequences that count up from a random start by a step of 1 or 2 (modulo `vocab`): inputs and the next tokens"
    g = _gen(seed)
    start, step = torch.randint(0, vocab, (n, 1), generator=g), torch.randint(1, 3, (n, 1), generator=g)
    s = (start + step * torch.arange(length)) % vocab
    return s[:, :-1], s[:, 1:]

def _token_ce(out, y): return F.cross_entropy(out.flatten(0, 1), y.flatten())

@case("https://github.com/OpenLMLab/LOMO/issues/50",
      "a language model is trained by LOMO (plain SGD) at 5e-5, a rate chosen as for Adam: the loss does not fall",
      {'lr_too_low'}, epochs=5)
def sgd_language_model_adam_sized_lr(fixed):
    """'小学习率问题' (the small learning rate problem): 'I trained with a small learning rate of 5e-5 on nearly ten thousand
    samples of a special format, and the loss does not fall; is something set wrong?'; the maintainer: 'this is because the
    learning rate is too small; try setting it to the 1e-2 or 1e-3 level' (LOMO updates each parameter as SGD does, without
    Adam's scaling). A small causal transformer trained from scratch (LOMO fine-tunes a pretrained LLM) on sequences that
    count up by a step of 1 or 2, next-token cross-entropy, plain SGD at 5e-5; the twin at 1e-2"""
    x, y = _walks()
    return Learner(tensor_dls(x, y, bs=32), _TinyCausalLM(), loss_func=_token_ce, lr=1e-2 if fixed else 5e-5,
                   opt_func=torch_opt(torch.optim.SGD))

def _activity(n=1800, length=64, n_classes=6, seed=0):
    "Three-channel sensor series `(n, 3, length)` of `n_classes` activities (a frequency and an amplitude per channel), noisy"
    g = _gen(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    freq, amp = 1 + torch.rand(n_classes, 3, generator=g) * 4, 0.5 + torch.rand(n_classes, 3, generator=g)
    t = torch.arange(length) / length * 2 * math.pi
    phase = 2 * math.pi * torch.rand(n, 3, 1, generator=g)
    x = amp[y].unsqueeze(-1) * torch.sin(freq[y].unsqueeze(-1) * t + phase) + 0.5 * torch.randn(n, 3, length, generator=g)
    return x, y

@case("https://github.com/NLeSC/mcfly/issues/43",
      "mcfly's generated CNNs for sensor data are trained by Adam at a learning rate above 0.03: they stop learning at once",
      {'lr_too_high'}, epochs=4)
def sensor_cnn_learning_rate_too_high(fixed):
    """'find out why learning stops sometimes': 'Sometimes learning stops with a completely stable accuracy and loss on val and
    test set ... it's clearly visible that the last 2 models don't learn. Theses two models have a learning rate of >0.03 and
    none of the other models have such a high learning rate. So my suspicion is that the high learning rate has to do with it'
    (closed with the learning rate's range lowered). mcfly's CNN (BatchNorm on the input; convolutions with BatchNorm and ReLU;
    a dense layer; softmax; categorical cross-entropy; Adam) on synthetic three-channel activity series, at 0.1; the twin
    at 1e-3"""
    x, y = _activity()
    model = nn.Sequential(nn.BatchNorm1d(3), nn.Conv1d(3, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(),
                          nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 64, 64), nn.ReLU(), nn.Linear(64, 6), nn.Softmax(dim=1))
    for m in model.modules():   # Keras's initialisation (Glorot-uniform kernels, zero biases), convolutions in 1-d too
        if isinstance(m, (nn.Linear, nn.Conv1d)): nn.init.xavier_uniform_(m.weight); nn.init.zeros_(m.bias)
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=keras_ce, metrics=accuracy, lr=1e-3 if fixed else 0.1,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7))
