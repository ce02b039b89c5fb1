"""Bug zoo, family 1: the model's output, the loss and the targets do not fit (and the loss itself). See `bugzoo.py`."""
from bugzoo import *

@case("https://discuss.pytorch.org/t/calculate-loss-between-a-target-in-one-hot-encoded-with-class-probabilities/180148",
      "a hand-written cross-entropy, `log(softmax(out))`, gives an infinite loss once a probability underflows to 0",
      {'nonfinite_loss'}, epochs=1, lr=1e-1)
def log_of_softmax(fixed):
    "The user's loss took the log of a softmax; the fix is `log_softmax` (here: `F.cross_entropy` on the logits)"
    def loss(out, y): return F.nll_loss(torch.log(F.softmax(out * 100, dim=1)), y)
    def fixed_loss(out, y): return F.cross_entropy(out * 100, y)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return Learner(digits_dls(bs=64), model, loss_func=fixed_loss if fixed else loss)

@case("https://techfeed.net/es/456718/ (Stack Overflow mirror: why does a binary Keras CNN always predict 1?)",
      "a binary classifier ends in `Dense(1)` and a softmax: its output is always 1, nothing learns",
      {'constant_output', 'output_classes', 'dead'}, layer='4', epochs=2, lr=1e-2)
def softmax_over_one_unit(fixed):
    "Keras `Dense(1, activation='softmax')` with `binary_crossentropy`; the fix is a sigmoid"
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 1), nn.Sigmoid() if fixed else nn.Softmax(dim=1))
    return Learner(digits_dls(bs=64), model, loss_func=lambda out, y: keras_bce(out.squeeze(1), (y > 4).float()))

# ---- synthetic data the ports need (no downloads): each stands in for the report's data set, at the report's shapes ----
def _gen(seed): return torch.Generator().manual_seed(seed)

def _har_windows(n_per=100, seed=0):
    "Six activities as 9 sensor channels × 128 time steps (UCI HAR's windows): each class its own posture (a mean per channel, as gravity gives) and rhythm, in noise"
    g, freqs, xs, ys = _gen(seed), (1, 2, 3, 5, 8, 12), [], []
    t, posture = torch.arange(128.) / 128, torch.randn(6, 9, 1, generator=g)
    for k,f in enumerate(freqs):
        phase = 2 * math.pi * torch.rand(n_per, 9, 1, generator=g)
        xs.append(posture[k] + torch.sin(2 * math.pi * f * t + phase) + 0.5 * torch.randn(n_per, 9, 128, generator=g))
        ys.append(torch.full((n_per,), k))
    return torch.cat(xs).unsqueeze(2), torch.cat(ys)          # (n, 9, 1, 128), as the report's `view(-1, 9, 1, 128)`

def _digits_x(scale='norm'):
    "The digits as flat vectors: `raw` (0..16), `unit` (0..1, as `ToTensor` or `/255` gives) or `norm` (as `digits_dls`)"
    x, y = digits_raw()
    if scale == 'unit': x = x / 16
    elif scale == 'norm': x = x / 16; x = (x - x.mean()) / x.std()
    return x, y

# ---- the cases ----
@case("https://github.com/jindongwang/Deep-learning-activity-recognition/issues/10",
      "a CNN for activity recognition ends in `F.softmax` and trains under `nn.CrossEntropyLoss`, which applies its own softmax",
      {'output_activation'}, layer='12', epochs=4, lr=0.01)
def softmax_into_cross_entropy(fixed):
    """The user's HAR CNN returned `F.softmax(out)` into `nn.CrossEntropyLoss`; the accepted fix returns the logits.
    Ported at the report's convolutions, SGD (momentum 0.9), lr 0.01 and batch size; its 1000- and 500-unit dense layers scaled to 256 and 128"""
    x, y = _har_windows()
    model = nn.Sequential(nn.Conv2d(9, 32, (1, 9)), nn.ReLU(), nn.MaxPool2d((1, 2), stride=2),
                          nn.Conv2d(32, 64, (1, 9)), nn.ReLU(), nn.MaxPool2d((1, 2), stride=2), nn.Flatten(),
                          nn.Linear(64 * 26, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 6),
                          *([] if fixed else [nn.Softmax(dim=1)]))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9))

def _item_pairs(n_items=50, n_clusters=5, n_pos=2000, num_ng=4, seed=0):
    "Implicit feedback as Item2Vec trains on it: `(target, context)` pairs, an item with one of its cluster (`item % n_clusters`) labelled 1, and `num_ng` items of other clusters for each, labelled 0"
    g = _gen(seed)
    t = torch.randint(0, n_items, (n_pos,), generator=g)
    c = (t + n_clusters * torch.randint(1, n_items // n_clusters, (n_pos,), generator=g)) % n_items
    nt = t.repeat_interleave(num_ng)
    nc = (nt + torch.randint(1, n_clusters, nt.shape, generator=g) + n_clusters * torch.randint(0, n_items // n_clusters, nt.shape, generator=g)) % n_items
    return torch.cat([torch.stack([t, c], 1), torch.stack([nt, nc], 1)]), torch.cat([torch.ones(n_pos), torch.zeros(n_pos * num_ng)])

class _Item2Vec(nn.Module):
    "daisyRec's Item2Vec: one item embedding shared by target and context, their dot product the score (the buggy one squashed by a sigmoid)"
    def __init__(self, n_items=50, factors=100, sigmoid=True):
        super().__init__()
        self.shared_embedding = nn.Embedding(n_items, factors)
        nn.init.normal_(self.shared_embedding.weight, 0., 0.01)          # daisyRec's `normal` initialiser
        if sigmoid: self.out_act = nn.Sigmoid()
    def forward(self, x):
        out = (self.shared_embedding(x[:, 0]) * self.shared_embedding(x[:, 1])).sum(1)
        return (self.out_act(out) if hasattr(self, 'out_act') else out).view(-1)

@case("https://github.com/AmazingDD/daisyRec/pull/15",
      "Item2Vec squashes its score with a sigmoid and trains it under `BCEWithLogitsLoss`, which applies a second sigmoid: the loss cannot converge",
      {'output_activation'}, layer='out_act', epochs=5, lr=1e-3)
def sigmoid_into_bce_with_logits(fixed):
    "daisyRec's Item2Vec ended in `nn.Sigmoid` under `BCEWithLogitsLoss(reduction='sum')`; the merged fix removes the sigmoid"
    x, y = _item_pairs()
    return Learner(tensor_dls(x, y, bs=256), _Item2Vec(sigmoid=not fixed), loss_func=nn.BCEWithLogitsLoss(reduction='sum'),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/FluxML/model-zoo/issues/8",
      "the MNIST MLP ends in a softmax and trains under `mse` against one-hot labels: a regression loss on class probabilities",
      {'loss_for_classes'}, epochs=6, lr=0.1)
def mse_on_softmax_one_hot(fixed):
    """Flux's model-zoo MLP (`Dense(784, 32, relu), Dense(32, 10), softmax`, SGD 0.1) was trained with `mse(m(x), onehot)`;
    the fix (commit 1b6e872, closing the issue) trains it with `crossentropy(m(x), onehot)`; that commit also moved to ADAM, kept
    at SGD here so that the twin differs by the loss alone. Flux took 200 full-batch steps; here 66 steps of 128"""
    x, y = _digits_x('unit')
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10), nn.Softmax(dim=1))
    def crossentropy(p, y): return -(y * torch.log(p)).sum(1).mean()      # Flux's `crossentropy` on probabilities
    return Learner(tensor_dls(x, F.one_hot(y, 10).float(), bs=128), model, loss_func=crossentropy if fixed else nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD))

@case("https://datascience.stackexchange.com/questions/38604/too-low-accuracy-on-mnist-dataset-using-a-neural-network",
      "a 10-digit classifier ends in one sigmoid unit under `binary_crossentropy` and gets the labels 0..9: the loss goes negative, accuracy stays at chance",
      {'target_range', 'output_classes'}, epochs=4, lr=1e-3)
def sigmoid_unit_for_ten_classes(fixed):
    """Keras `Dense(64, relu)`, `Dense(1, sigmoid)`, `binary_crossentropy`, Adam, batches of 32, a third held out; the accepted
    answer: `Dense(10, softmax)` under `sparse_categorical_crossentropy`. The user fed raw pixels: scaled to [0, 1] in both twins
    here, so that the case holds the output/loss bug alone"""
    x, y = _digits_x('unit')
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), *([nn.Linear(64, 10), nn.Softmax(dim=1)] if fixed else [nn.Linear(64, 1), nn.Sigmoid()]))
    def binary_crossentropy(p, y): return keras_bce(p.squeeze(1), y.float())
    return Learner(tensor_dls(x, y, bs=32, valid_pct=0.33), model, loss_func=keras_ce if fixed else binary_crossentropy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/pytorch/tutorials/issues/1526",
      "the PyTorch basics tutorial's classifier ends in a ReLU: the logits `nn.CrossEntropyLoss` gets can never be negative, dead ones never recover",
      {'output_activation', 'dead'}, layer='5', epochs=5, lr=0.1)
def relu_on_logits(fixed):
    """The tutorial's `NeuralNetwork` (784-512-512-10, a ReLU after every `Linear`, the last included), plain SGD, batches of 64;
    the fix (pytorch/tutorials#1644) removes the final ReLU. The tutorial's lr of 1e-3 ran ~9,400 steps; ~110 steps here need 0.1"""
    x, y = _digits_x('unit')
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10), *([] if fixed else [nn.ReLU()]))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=nn.CrossEntropyLoss(), opt_func=torch_opt(torch.optim.SGD))

def _topic_docs(n_per=500, n_classes=4, vocab=1000, length=30, p_topic=0.3, seed=0):
    "Short documents of four classes (AG News's four): each word a class's topic word with chance `p_topic`, else any word"
    g, xs, ys = _gen(seed), [], []
    topics = torch.randperm(vocab, generator=g)[:n_classes * 50].view(n_classes, 50)
    for k in range(n_classes):
        words = torch.randint(0, vocab, (n_per, length), generator=g)
        topical = torch.rand(n_per, length, generator=g) < p_topic
        words[topical] = topics[k][torch.randint(0, 50, (int(topical.sum()),), generator=g)]
        xs.append(words); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys), 0.4 * torch.randn(vocab, 300, generator=g)   # the last: frozen 300-d word vectors (GloVe's place)

class _FastText(nn.Module):
    "The repository's fastText: frozen word vectors averaged, `fc1` (300→10), `fc2` (10→4), then its final activation"
    def __init__(self, word_embeddings, hidden_size=10, output_size=4, log=False):
        super().__init__()
        self.embeddings = nn.Embedding.from_pretrained(word_embeddings, freeze=True)
        self.fc1 = nn.Linear(word_embeddings.shape[1], hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1) if log else nn.Softmax(dim=1)
    def forward(self, x): return self.softmax(self.fc2(self.fc1(self.embeddings(x).mean(1))))

@case("https://github.com/AnubhavGupta3377/Text-Classification-Models-Pytorch/issues/9",
      "the text classifiers end in `nn.Softmax` and train under `nn.NLLLoss`, which wants log-probabilities: the loss is minus a probability, always negative",
      {'output_activation', 'loss_at_init'}, layer='softmax', epochs=5, lr=0.5)
def softmax_into_nll_loss(fixed):
    """The repository's models feed `nn.Softmax` to `nn.NLLLoss` (the issue: 'the loss is always negative'); the fix the issue
    points to is `log_softmax`. Ported: its fastText (SGD at 0.5, batches of 128), on synthetic four-class documents"""
    x, y, vectors = _topic_docs()
    return Learner(tensor_dls(x, y, bs=128), _FastText(vectors, log=fixed), loss_func=nn.NLLLoss(), opt_func=torch_opt(torch.optim.SGD))

@case("https://github.com/skorch-dev/skorch/issues/481",
      "the module ends in a softmax and the loss takes `torch.log` of it: under RMSprop a probability underflows to 0, the loss turns infinite, then NaN",
      {'nonfinite_loss'}, epochs=5, lr=0.03)
def log_of_softmax_output(fixed):
    """skorch's MNIST example (`hidden` 784→98, ReLU, dropout 0.5, `output`, softmax; batches of 128) with the optimiser switched
    to RMSprop and the learning rate changed, as the issue did; `get_loss` took `torch.log(y_pred)`: the merged fix (#491) takes
    `torch.log(y_pred + eps)`"""
    x, y = _digits_x('unit')
    model = nn.Sequential(nn.Linear(64, 98), nn.ReLU(), nn.Dropout(0.5), nn.Linear(98, 10), nn.Softmax(dim=-1))
    def get_loss(y_pred, y_true):
        return F.nll_loss(torch.log(y_pred + torch.finfo(y_pred.dtype).eps) if fixed else torch.log(y_pred), y_true)
    return Learner(tensor_dls(x, y, bs=128), model, loss_func=get_loss, opt_func=torch_opt(torch.optim.RMSprop))

def _house_prices(n=800, n_feat=188, seed=0):
    "Ames-like data: 188 standardised features, sale prices in dollars (lognormal, median about $166,000)"
    from sklearn.datasets import make_regression
    x, z = make_regression(n_samples=n, n_features=n_feat, n_informative=40, noise=5., random_state=seed)
    x, z = (x - x.mean(0)) / x.std(0), (z - z.mean()) / z.std()
    return torch.tensor(x, dtype=torch.float32), torch.tensor(np.exp(12.02 + 0.4 * z), dtype=torch.float32).unsqueeze(1)

@case("https://github.com/rstudio-conf-2020/dl-keras-tf/issues/9",
      "a house-price regression trains under `mean_squared_error` on prices in dollars (up to ~$755,000): the loss starts near 3e10 and SGD blows up to NaN",
      {'loss_at_init', 'target_range', 'target_scale'}, epochs=3, lr=0.1)
def unscaled_price_targets(fixed):
    """The workshop's Ames model (`Dense(128, relu)`, `Dense(1)`, SGD at 0.1, batches of 16, 20% validation) under `mse`; the
    accepted explanation: the squared dollar errors explode, hence the instructions' `msle`"""
    x, y = _house_prices()
    def msle(p, y): return F.mse_loss(torch.log(p.clamp(min=1e-7) + 1), torch.log(y.clamp(min=1e-7) + 1))   # as Keras computes it
    model = nn.Sequential(nn.Linear(188, 128), nn.ReLU(), nn.Linear(128, 1))
    return Learner(tensor_dls(x, y, bs=16), model, loss_func=msle if fixed else nn.MSELoss(), opt_func=torch_opt(torch.optim.SGD))

def _stock_windows(n_days=732, seq_len=7, scale_y=True, seed=0):
    "Google-like daily stock data (Open, High, Low, Volume, Close), MinMax-scaled as the repository does; the target the next Close, raw or scaled"
    g = _gen(seed)
    close = 550 * torch.exp(torch.cumsum(0.012 * torch.randn(n_days, generator=g), 0))
    open_ = close * (1 + 0.005 * torch.randn(n_days, generator=g))
    high = torch.maximum(open_, close) * (1 + 0.004 * torch.rand(n_days, generator=g))
    low = torch.minimum(open_, close) * (1 - 0.004 * torch.rand(n_days, generator=g))
    vol = 1.5e6 * torch.exp(0.3 * torch.randn(n_days, generator=g))
    raw = torch.stack([open_, high, low, vol, close], 1)
    mn, mx = raw.min(0).values, raw.max(0).values
    norm = (raw - mn) / (mx - mn + 1e-7)
    x = torch.stack([norm[i:i + seq_len] for i in range(n_days - seq_len)])
    y = (norm if scale_y else raw)[seq_len:, -1:]
    return x, y

class _AttentionGRU(nn.Module):
    "The repository's attention model: a GRU over the window, attention scores from each state and the last input, a sigmoid output"
    def __init__(self, x_dim=5, h_dim=10):
        super().__init__()
        self.gru = nn.GRU(x_dim, h_dim, batch_first=True)
        self.att1, self.att2 = nn.Linear(h_dim + x_dim, h_dim), nn.Linear(h_dim, 1)
        self.out, self.act = nn.Linear(h_dim, 1), nn.Sigmoid()
    def forward(self, x):
        hs, _ = self.gru(x)
        e = self.att2(torch.tanh(self.att1(torch.cat([hs, x[:, -1:].expand(-1, x.shape[1], -1)], 2))))
        return self.act(self.out((torch.softmax(e, dim=1) * hs).sum(1)))

@case("https://github.com/jsyoon0823/Time-series-prediction/issues/3",
      "the attention model's output is a sigmoid but the regression targets are stock prices in dollars: it can never reach them, and saturates",
      {'target_range', 'saturated'}, epochs=3, lr=0.01)
def sigmoid_output_raw_prices(fixed):
    """The issue: regression targets must lie in [0, 1] since the output is `tf.nn.sigmoid`; the maintainer's fix, MinMax-scale
    them. Ported: GRU (h_dim 10), attention, sigmoid, RMSE loss, Adam at 0.01, batches of 32, windows of 7 days"""
    x, y = _stock_windows(scale_y=fixed)
    def rmse(p, y): return torch.sqrt(F.mse_loss(p, y))
    return Learner(tensor_dls(x, y, bs=32), _AttentionGRU(), loss_func=rmse, opt_func=torch_opt(torch.optim.Adam))

def _class_images(n_per, n_classes, size=32, seed=0):
    "Noisy colour images whose class shows as a brighter channel (class k: channel k % 3, in its own half of the image for k > 2)"
    g, xs, ys = _gen(seed), [], []
    for k in range(n_classes):
        x = 0.5 * torch.randn(n_per, 3, size, size, generator=g)
        x[:, k % 3] += 0.8 if k < 3 else 0.
        if k >= 3: x[:, k % 3, :size // 2] += 1.6
        xs.append(x); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

@case("https://github.com/frgfm/holocron/pull/118",
      "a binary classifier's last layer is a bare `Linear(32, 1)` but the loss is `nn.BCELoss`, which wants probabilities: its outputs leave [0, 1] and the loss fails",
      {'loss', 'output_activation'}, epochs=3, lr=1e-3)
def bce_on_logits(fixed):
    """The test's model (`Conv2d(3, 32, 3)`, ReLU, global average pooling, `Linear(32, 1)`), Adam, batches of 8, under
    `nn.BCELoss`; the reviewer's fix, adopted: `nn.BCEWithLogitsLoss`"""
    x, y = _class_images(80, 2)
    model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1))
    return Learner(tensor_dls(x, y.float().unsqueeze(1), bs=8), model, loss_func=nn.BCEWithLogitsLoss() if fixed else nn.BCELoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/Justin-A/DeepLearning101/issues/15",
      "a ResNet18 gets `fc = nn.Linear(num_ftrs, 2)` but the image folders hold 3 classes: `IndexError: Target 2 is out of bounds`",
      {'target_classes'}, layer='fc', epochs=2, lr=1e-3)
def fewer_outputs_than_classes(fixed):
    """The book's transfer-learning example (ResNet18 from scratch, `fc` with 2 outputs, Adam at 1e-3, batches of 32) on a folder
    that had become 3 classes; the fix that worked: `nn.Linear(num_ftrs, 3)`. Images 32×32 here, not 224×224"""
    from torchvision.models import resnet18
    x, y = _class_images(40, 3)
    model = resnet18(weights=None)
    model.fc = nn.Linear(model.fc.in_features, 3 if fixed else 2)
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), opt_func=torch_opt(torch.optim.Adam))
