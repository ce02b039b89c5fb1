"""Bug zoo, a thirteenth GitHub family (issue 45): from the issues of time-series, tabular and recommender libraries no
other family cites (GluonTS, RecBole, pytorch-forecasting, pytorch_tabular). See `bugzoo.py`. Each case cites its
thread; its truth (`kinds`, `layer`) was written before the case was ever run under the tool. Cases were chosen for how
common the bug is (windows padded with zeros that a likelihood outside zero's support still scores, raw timestamps fed
to a factorisation machine as float features, a forecaster trained on a series of some hundreds without normalising it,
the target column left among the inputs), never for whether the tool catches it. The target among the inputs leaves
every statistic of training healthy (the run learns, far too well): its docstring says so. Each bug was checked with
plain fastai (no fastexplorer) before any run under the tool: it shows its thread's symptom, and its fixed twin
trains."""
from fastai.metrics import skm_to_fastai, ActivationType
from bugzoo import *
from bugs_data import _gen


# ---- the loss: a window padded with zeros scored by a Gamma likelihood ----
def _padded_windows(n=1500, length=48, window=32, max_pad=16, seed=0):
    """GluonTS's instance splitter with `pick_incomplete=True`, scaled down: series of `length` steps (a random sinusoid
    between 0.4 and 0.6, as the reporter's), a window of `window` steps cut from each at a random start, which for 40%
    of them lies up to `max_pad` steps before the series begins; those steps are padded with 0 and flagged as
    unobserved. Returns the windows `(n, window)` and the observed flags `(n, window)`"""
    g = _gen(seed)
    t = torch.arange(length).float()
    period, phase = 8 + 16 * torch.rand(n, 1, generator=g), 2 * math.pi * torch.rand(n, 1, generator=g)
    series = 0.5 + 0.1 * torch.sin(2 * math.pi * t / period + phase) + 0.005 * torch.randn(n, length, generator=g)
    start = torch.randint(0, length - window + 1, (n,), generator=g)
    pad = torch.where(torch.rand(n, generator=g) < 0.4, torch.randint(1, max_pad + 1, (n,), generator=g), 0)
    w = torch.stack([series[i, int(start[i]):int(start[i]) + window] for i in range(n)])
    observed = (torch.arange(window)[None] >= pad[:, None]).float()
    return w * observed, observed   # the padded steps hold 0

class _DeepARGamma(nn.Module):
    """DeepAR, scaled down: a GRU reads each step's previous value and observed flag and gives the Gamma distribution of
    the next value (shape `a` and rate `b`, each through a softplus)"""
    def __init__(self, hidden=32):
        super().__init__()
        self.rnn, self.proj = nn.GRU(2, hidden, batch_first=True), nn.Linear(hidden, 2)
    def forward(self, x):
        h, _ = self.rnn(x[..., :-1, :])          # the inputs: values and flags up to the last step but one
        return F.softplus(self.proj(h)) + 1e-6   # `(batch, window - 1, 2)`: the Gamma's `a` and `b`

def _gamma_nll(fill_in_support):
    """GluonTS's DeepAR loss with a Gamma output: the Gamma's negative log-likelihood of every next value, averaged with
    the observed flags as weights (`weighted_average`). As the bug had it the padded zeros are scored as they are, and
    `(a - 1)·log 0` is infinite (0 × ∞ = NaN in the average); as fixed (#534) they are first replaced by a point inside
    the Gamma's support (1.0), then weighted out"""
    def loss(out, y):
        target, w = y[:, 1:, 0], y[:, 1:, 1]
        if fill_in_support: target = torch.where(w > 0, target, torch.ones_like(target))
        a, b = out[..., 0], out[..., 1]
        logp = a * torch.log(b) - torch.lgamma(a) + (a - 1) * torch.log(target) - b * target
        return (-logp * w).sum() / w.sum().clamp_min(1.)
    return loss

@case("https://github.com/awslabs/gluonts/issues/519",
      "windows that begin before their series are padded with zeros, and the Gamma likelihood scores those zeros "
      "(outside its support) before the observed-flag weights drop them: the loss is NaN",
      {'padding_in_loss', 'nonfinite_loss', 'target_range'}, epochs=3, lr=1e-3)
def deepar_gamma_scores_zero_padding(fixed):
    """'DeepAR sequence padding with zeros leads to `nan` loss in Gamma and Beta distributions': 'When training a
    `DeepAREstimator` some of the input is randomly set to 0. This is especially apparent for distributions where `0`
    is not in the support of the distribution'; the reporter's data lay in [0.4, 0.6], yet the log-probability was
    taken of zeros (the instance splitter pads windows that start before the series, and only the loss weights mark
    them); fixed by #534, 'Distribution dependent loss masking', which fills the padded steps with a value inside the
    distribution's support before the loss is taken. A weight of 0 does not help: `0 × ∞` is NaN. Ported: 1,500 windows
    of 32 steps cut from sinusoids between 0.4 and 0.6, 40% of them starting up to 16 steps before their series (padded
    with 0, flagged unobserved), a DeepAR-like GRU (inputs: the previous value and its flag) giving a Gamma's shape and
    rate through softplus, GluonTS's weighted negative log-likelihood, Adam at 1e-3 (DeepAR's default), batches of 32;
    the twin replaces the padded targets with 1.0 before the log-probability. Measured (seeds 0 and 1): the first batch
    holding a padded window (the first batch of all, at both seeds) has a NaN loss, the gradients and then the weights
    are NaN, and every later batch loss and the validation loss of all 3 epochs are NaN (14 of the first batch's 32
    windows are padded; its `a` and `b` are finite, 0.76 and 0.82 on average at seed 0, 0.60 and 0.65 at seed 1, and
    with `a < 1` the log-probability of a padded 0 is +∞); the twin's batch losses fall from a median of 0.56 and 0.67
    over the first tenth to -0.25 over the last (negative log-likelihoods of a density: `loss_ratio` -0.45 and -0.37),
    its validation loss from 0.26 and 0.46 to -0.27 at both seeds"""
    w, observed = _padded_windows()
    x = torch.stack([w, observed], -1)
    return Learner(tensor_dls(x, x, bs=32), _DeepARGamma(), loss_func=_gamma_nll(fill_in_support=fixed),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the inputs: raw timestamps and counts as a factorisation machine's float fields ----
_TOKENS, _FLOATS = (100, 50, 2, 5), 4   # users, items, genders, customer levels; age, holding days, rate, timestamp

def _interactions(n=6000, seed=0):
    """A RecBole CTR dataset as the reporter's, synthetic: token fields (user, item, the user's gender and level) and
    float fields as the file has them: the user's age (20 to 70), the product's holding days (30 to 720), its expected
    rate (0.01 to 0.05) and the interaction's timestamp in seconds (2021, about 1.6e9). A click's log-odds are a
    user-item affinity plus terms in the age, the rate and the level; about 26% are clicks. Returns the fields as one
    float tensor `(n, 8)` (the tokens first, as exact integers) and the labels `(n,)` as floats"""
    g = _gen(seed)
    nu, ni = _TOKENS[0], _TOKENS[1]
    u, i = torch.randint(0, nu, (n,), generator=g), torch.randint(0, ni, (n,), generator=g)
    gender, level = torch.randint(0, 2, (nu,), generator=g), torch.randint(0, 5, (nu,), generator=g)
    age, days = 20 + 50 * torch.rand(nu, generator=g), 30 + 690 * torch.rand(ni, generator=g)
    rate = 0.01 + 0.04 * torch.rand(ni, generator=g)
    ts = 1.6094592e9 + 3.15e7 * torch.rand(n, generator=g)
    pu, qi = torch.randn(nu, 4, generator=g), torch.randn(ni, 4, generator=g)
    logit = ((pu[u] * qi[i]).sum(1) - 0.06 * (age[u] - 45) + 80 * (rate[i] - 0.03) + 0.5 * (level[u] - 2.) - 2.)
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    x = torch.stack([u.float(), i.float(), gender[u].float(), level[u].float(), age[u], days[i], rate[i], ts], 1)
    return x, y

def _min_max(x, n_tokens=4):
    "RecBole's `normalize_all: True`: every float field scaled to [0, 1] by its minimum and maximum"
    f = x[:, n_tokens:]
    lo, hi = f.min(0).values, f.max(0).values
    return torch.cat([x[:, :n_tokens], (f - lo) / (hi - lo)], 1)

class _DeepFM(nn.Module):
    """RecBole's DeepFM, scaled down: every field embedded (a token field by lookup, a float field as its value times a
    learnt vector, as RecBole embeds float fields), a first-order term (a weight per token, a weight times each float),
    the factorisation machine's pairwise interactions of the embeddings, and an MLP over them; the sum is the click's
    logit"""
    def __init__(self, tokens=_TOKENS, n_float=_FLOATS, d=10, hidden=(128, 128), p=0.2):
        super().__init__()
        self.n_tok = len(tokens)
        self.emb = nn.ModuleList([nn.Embedding(t, d) for t in tokens])
        self.float_emb = nn.Parameter(torch.empty(n_float, d))
        self.first = nn.ModuleList([nn.Embedding(t, 1) for t in tokens])
        self.float_first = nn.Parameter(torch.empty(n_float))
        self.bias = nn.Parameter(torch.zeros(1))
        layers, n_in = [], (self.n_tok + n_float) * d
        for h in hidden: layers += [nn.Dropout(p), nn.Linear(n_in, h), nn.ReLU()]; n_in = h
        self.mlp, self.out = nn.Sequential(*layers), nn.Linear(n_in, 1)
        for e in list(self.emb) + list(self.first): nn.init.xavier_normal_(e.weight)   # RecBole's `_init_weights`
        nn.init.xavier_normal_(self.float_emb); nn.init.normal_(self.float_first, std=0.1)
    def forward(self, x):
        tok, val = x[:, :self.n_tok].long(), x[:, self.n_tok:]
        e = torch.cat([torch.stack([m(tok[:, j]) for j, m in enumerate(self.emb)], 1),
                       val[..., None] * self.float_emb[None]], 1)   # `(batch, fields, d)`
        first = sum(m(tok[:, j]) for j, m in enumerate(self.first))[:, 0] + (val * self.float_first).sum(1) + self.bias
        fm = 0.5 * (e.sum(1) ** 2 - (e ** 2).sum(1)).sum(1)
        return first + fm + self.out(self.mlp(e.flatten(1)))[:, 0]

def _auc():
    "The validation AUC of the click probabilities (the sigmoid of the logits, as RecBole's `predict` gives them)"
    from sklearn.metrics import roc_auc_score
    return skm_to_fastai(roc_auc_score, activation=ActivationType.Sigmoid, flatten=True)

@case("https://github.com/RUCAIBox/RecBole/issues/1109",
      "a DeepFM is given its float fields raw (a timestamp of 1.6e9 seconds, ages, day counts): the factorisation "
      "machine's logits are astronomically large, every prediction is saturated, and the AUC stays at 0.5",
      {'input_scale'}, epochs=5, lr=1e-3)
def deepfm_float_fields_not_normalized(fixed):
    """'新数据集训练过程，loss一直没有变换，auc也为0.5' (on a new dataset the loss never changes and the AUC is 0.5): DeepFM on the
    reporter's own CTR data, whose `.inter` holds `timestamp:float` values of 1627776000000000000 and whose user and
    item files hold floats such as ages (40.0), holding days (364.0) and rates (0.04268). The maintainer: the many
    float fields 'may differ widely in distribution', normalise them, 'set `normalize_all: True` in the yaml'; the
    reporter: 'it was indeed the distribution; after normalising, no problem' (closed). RecBole embeds a float field
    as its value times a learnt vector, so a timestamp of 1.6e9 makes the factorisation machine's pairwise products
    (of it with every other field) enormous. Ported: 6,000 synthetic interactions (100 users, 50 products; tokens:
    user, product, gender, level; floats: age, holding days, rate, a 2021 timestamp in seconds), clicks drawn from a
    user-product affinity and terms in age, rate and level (26% positive); RecBole's DeepFM scaled down (embeddings
    of 10, an MLP of 128-128 with dropout 0.2), `BCEWithLogitsLoss`, Adam at RecBole's default 1e-3, batches of 64,
    5 epochs; the twin min-max scales the four float fields to [0, 1] as `normalize_all` does. No layer is wrong:
    the inputs are. Measured (seeds 0 and 1): the validation logits have a median size of 2e10 and 1e10, not one
    validation probability lies between 0.01 and 0.99, and the validation AUC stays at 0.48 to 0.52 over the 5
    epochs (0.52 at the end at both seeds); the batch losses fall from 9e10 and 1e10 to 8e9 and 5e9 and the
    validation loss ends at 7e9 and 4e9 (the thread's loss 'never changes', ours only stays astronomical); the
    twin's validation AUC rises from 0.66 and 0.70 to 0.74 and 0.73 (validation loss 0.51), its batch losses ending
    at 0.63 and 0.72 of their first"""
    x, y = _interactions()
    if fixed: x = _min_max(x)
    return Learner(tensor_dls(x, y, bs=64), _DeepFM(), loss_func=nn.BCEWithLogitsLoss(), metrics=_auc(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the target: a forecaster trained on a series of some hundreds, not normalised ----
def _minute_windows(n_series=20, length=600, enc=36, dec=6, n=3000, seed=0):
    """pytorch-forecasting's `TimeSeriesDataSet`, scaled down: minute prices of `n_series` symbols (each a random walk
    of steps of 0.5 around its own level of 100 to 500, plus an hourly swing of 2), cut into windows of `enc` encoder
    steps and `dec` steps to predict. Inputs `(n, enc, 5)`: the price, the hour's sine and cosine (known covariates),
    and the symbol's mean and standard deviation over the series (what a `GroupNormalizer` keeps as the target scale);
    targets `(n, dec)`: the next prices, raw"""
    g = _gen(seed)
    t = torch.arange(length).float()
    level = 100 + 400 * torch.rand(n_series, 1, generator=g)
    walk = torch.cumsum(0.5 * torch.randn(n_series, length, generator=g), 1)
    price = level + walk + 2 * torch.sin(2 * math.pi * t / 60)
    center, scale = price.mean(1), price.std(1)
    starts = length - enc - dec + 1
    k = torch.randperm(n_series * starts, generator=g)[:n]   # distinct windows: none in both splits
    s, start = k // starts, k % starts
    idx = start[:, None] + torch.arange(enc + dec)[None]
    w = price[s[:, None], idx]
    hour = 2 * math.pi * idx[:, :enc].float() / 60
    x = torch.stack([w[:, :enc], hour.sin(), hour.cos(), center[s, None].expand(n, enc),
                     scale[s, None].expand(n, enc)], -1)
    return x, w[:, enc:]

class _LSTMForecaster(nn.Module):
    """An LSTM over the encoder steps (the price and the hour's sine and cosine) and a linear head giving the `dec` next
    prices from its last state. As the bug had it the price goes in and comes out raw; as fixed (the target
    normaliser) it goes in as `(price - mean) / std` of its symbol and the output is rescaled by the same"""
    def __init__(self, normalize, hidden=32, dec=6):
        super().__init__()
        self.normalize = normalize
        self.rnn, self.head = nn.LSTM(3, hidden, batch_first=True), nn.Linear(hidden, dec)
    def forward(self, x):
        price, center, scale = x[..., :1], x[:, :1, 3], x[:, :1, 4]
        if self.normalize: price = (price - center[..., None]) / scale[..., None]
        h, _ = self.rnn(torch.cat([price, x[..., 1:3]], -1))
        out = self.head(h[:, -1])
        return out * scale + center if self.normalize else out

@case("https://github.com/sktime/pytorch-forecasting/issues/1",
      "a forecaster is trained on minute prices of about 300 fed in and predicted raw: the LSTM's gates saturate on "
      "the inputs and the outputs crawl up from 0, far below the targets",
      {'input_scale', 'target_scale'}, epochs=3, lr=1e-3)
def forecaster_target_not_normalized(fixed):
    """Training the Temporal Fusion Transformer on the reporter's minute data (symbols' prices `T`, 36 steps encoded, 6
    predicted): 'The target value is about 300 and prediction is about 0 point something' (the reporter took it for a
    plot left unscaled). The maintainer: 'The plotting functionality is not broken', but '1. The network has probably
    not trained for long enough 2. To train, timeseries should be normalized (I think almost all networks require
    this) for faster convergence and better generalisation. I am working on this normalization'; then 'Give it another
    try. I fixed a couple of issues including target normalization' (#2, 'Adding normalization to target', merged;
    closed). Ported: 3,000 windows of minute prices of 20 symbols (random walks around levels of 100 to 500 with an
    hourly swing), 36 steps in and 6 out, an LSTM (32 units) over the price and the hour's sine and cosine with a linear
    head, an L1 loss (the median's part of the quantile loss), Adam at 1e-3, batches of 64; the twin normalises each
    symbol's price by its mean and standard deviation (a `GroupNormalizer`) and rescales the output. The windows are
    distinct (as first ported they were drawn with replacement, so some sat in both splits: a leak the report did not
    have). Measured (seeds 0 and 1): on a validation batch after 3 epochs the LSTM's gate pre-activations have a median
    size of 18 and 19 (78% and 83% beyond 5), and the predictions average 2.9 against targets averaging 252; the
    validation loss goes from 265 to 263, the batch losses end at 0.98 and 0.99 of their first; the twin's validation
    loss falls from 3.0 and 2.8 to 1.03, its batch losses ending at 0.31 and 0.32 of their first"""
    x, y = _minute_windows()
    return Learner(tensor_dls(x, y, bs=64), _LSTMForecaster(normalize=fixed), loss_func=nn.L1Loss(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the inputs: the target column left among the continuous features ----
def _diabetes(with_target:bool):
    """scikit-learn's diabetes table (442 patients, 10 measurements; the target a disease progression score of 25 to
    346), the continuous columns standardised as pytorch_tabular's `normalize_continuous_features` does. With
    `with_target` the target is one of the continuous columns as well, as in the report"""
    from sklearn.datasets import load_diabetes
    d = load_diabetes()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32)
    if with_target: x = torch.cat([x, y[:, None]], 1)
    return (x - x.mean(0)) / x.std(0), y[:, None]

def _category_embedding_model(n_in):
    """pytorch_tabular's `CategoryEmbeddingModel` with its defaults and no categorical columns: a BatchNorm over the
    continuous inputs (`batch_norm_continuous_input`), layers 128-64-32 with ReLU, a linear head"""
    return nn.Sequential(nn.BatchNorm1d(n_in), nn.Linear(n_in, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

def _r2(out, y): return 1 - ((out - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()

@case("https://github.com/pytorch-tabular/pytorch_tabular/issues/21",
      "the target column is also listed in `continuous_cols`: the network is given the answer among its inputs and "
      "learns to copy it",
      {'future_leak'}, epochs=60, lr=1e-3)
def tabular_target_among_inputs(fixed):
    """'The target variable leaks the results....': with `DataConfig(target=['result'], continuous_cols=num_cols,
    ...)`, 'The neural network just copies the value from result'; the reporter found why: 'aha it was also in the
    num_cols' (closed; 'maybe i will add an assertion later'). The fix drops the target from the input columns. The
    inputs hold the label itself, so the network learns to copy one input, and its validation score measures nothing
    it could do on new rows (whose target is unknown). Every layer is healthy and the run learns, far too well: no
    per-layer statistic can see it; the kind nearest in the vocabulary is `future_leak` (the inputs carry what is to be
    predicted). Ported: scikit-learn's diabetes table (10 measurements, the progression score as target), the
    continuous columns standardised, pytorch_tabular's `CategoryEmbeddingModel` defaults (BatchNorm on the continuous
    inputs, 128-64-32 ReLU), MSE on the raw target, Adam at 1e-3, batches of 64 (pytorch_tabular's default), 60
    epochs; the bug appends the target to the continuous columns, the twin leaves it out. Measured (seeds 0 and 1):
    the validation R² reaches 0.95 and 0.94 and is still climbing (validation MSE 262 and 328), where the twin's,
    without the answer, levels off at 0.41 and 0.42 (MSE 3352 and 3321); both train, the bug's batch losses ending at
    0.014 and 0.015 of their first, the twin's at 0.10"""
    x, y = _diabetes(with_target=not fixed)
    return Learner(tensor_dls(x, y, bs=64), _category_embedding_model(x.shape[1]), loss_func=nn.MSELoss(), metrics=_r2,
                   opt_func=torch_opt(torch.optim.Adam))
