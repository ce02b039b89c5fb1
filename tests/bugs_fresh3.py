"""Bug zoo, family 6 (issue 45): a third fresh set of real reports, gathered so that the held-out half has cases nobody here
has tuned on. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever
run under the tool. Cases were chosen for how common the bug is (loss and activation pairings, labels and targets, shapes
that broadcast, NaN in the data, leakage between the splits, augmentation, data order, learning rates, `zero_grad`,
initialisation, evaluation modes, parameters cut off from the gradient), never for whether the tool catches it. Many leave
every per-layer statistic healthy (an ignored class, labels merged by a parser, masks interpolated, batches sorted by class,
a leaky split, augmented validation, a transformer that sees the future): their docstrings say so. Kinds that no check
raises yet, assumed here as a correct tool would name them: `ignored_class`, `unshuffled_batches`, `valid_leak`,
`valid_augmented`, `eval_stats_stale`, `dropout_rate` (and, as in the other families, `labels_misaligned`,
`nonfinite_target`).

Its cases are in two files: this one (the output, the loss, the labels and the data) and `bugs_fresh3_loop.py` (the model,
the training loop, optimisation and evaluation modes). Each was checked with plain fastai before any was run under the tool:
the buggy run shows the reported symptom and the fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _docs, _blobs, _tiny_unet

def _gen(seed=0): return torch.Generator().manual_seed(seed)


# ---- the output and the loss ----
def _ctr(n=6000, n_fields=4, per_field=20, k=4, seed=0):
    "Click logs as the chapter's: one id per categorical field (offset per field), a 0/1 click drawn from a factorisation machine"
    g = _gen(seed)
    x = torch.randint(0, per_field, (n, n_fields), generator=g) + per_field * torch.arange(n_fields)
    v, w = 0.7 * torch.randn(n_fields * per_field, k, generator=g), 0.6 * torch.randn(n_fields * per_field, generator=g)
    e = v[x]
    score = w[x].sum(1) + 0.5 * (e.sum(1) ** 2 - (e ** 2).sum(1)).sum(1)
    return x, (torch.rand(n, generator=g) < torch.sigmoid(2 * (score - score.median()))).float().unsqueeze(1)

class _FM(nn.Module):
    "d2l's factorisation machine: a linear term over feature ids, the pairwise interactions of their embeddings, then `act`"
    def __init__(self, n_feat=80, k=10, sigmoid=True):
        super().__init__()
        self.embedding, self.fc, self.linear_layer = nn.Embedding(n_feat, k), nn.Embedding(n_feat, 1), nn.Linear(1, 1)
        self.act = nn.Sigmoid() if sigmoid else nn.Identity()
        for m in (self.embedding, self.fc): nn.init.xavier_uniform_(m.weight)   # the chapter's `init.Xavier()`
    def forward(self, x):
        e = self.embedding(x)
        inter = 0.5 * (e.sum(1) ** 2 - (e ** 2).sum(1)).sum(1, keepdim=True)
        return self.act(self.linear_layer(self.fc(x).sum(1)) + inter)

@case("https://github.com/d2l-ai/d2l-en/issues/1360",
      "the factorisation machine's forward ends in a sigmoid and its loss applies one again (`from_sigmoid=False`): the sigmoid is applied twice",
      {'output_activation'}, layer='act', epochs=4, lr=0.02)
def fm_sigmoid_then_logits_loss(fixed):
    """'the forward methods outputs a sigmoid value. If so, the loss should be setup as ... from_sigmoid=True'; the maintainer:
    'Setting it to False will lead to a recalculation of the sigmoid function. Another solution is to remove the sigmoid
    function in the forward function' (the twin here). The chapter's FM (embeddings of 10) on synthetic click logs of four
    categorical fields, Adam at its 0.02; the loss on logits is `BCEWithLogitsLoss`"""
    x, y = _ctr()
    return Learner(tensor_dls(x, y, bs=128), _FM(sigmoid=not fixed), loss_func=nn.BCEWithLogitsLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

def _tagged(n=1500, length=16, vocab=200, n_tags=5, seed=0):
    "Token sequences and a tag per token: most words are `O` (tag 0), a fifth of the vocabulary are entity words of tags 1..4"
    g = _gen(seed)
    tag_of = torch.zeros(vocab, dtype=torch.long)
    ent = torch.randperm(vocab, generator=g)[:vocab // 5]
    tag_of[ent] = 1 + torch.arange(len(ent)) % (n_tags - 1)
    x = torch.randint(0, vocab, (n, length), generator=g)
    return x, tag_of[x]

class _Tagger(nn.Module):
    "jiant's tagger head on a small encoder: embeddings, a bidirectional LSTM, a linear layer to the tags at every token"
    def __init__(self, vocab=200, dim=32, hid=32, n_tags=5):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, dim), nn.LSTM(dim, hid, batch_first=True, bidirectional=True), nn.Linear(2 * hid, n_tags)
    def forward(self, x): return self.out(self.rnn(self.emb(x))[0])

def _token_accuracy(out, y): return (out.argmax(-1) == y).float().mean()

@case("https://github.com/nyu-mll/jiant/issues/925",
      "the tagger's cross-entropy takes `ignore_index` = the pad index 0, but 0 is also a real tag: every token of that class is ignored",
      {'ignored_class'}, epochs=3, lr=3e-3)
def tagger_ignores_tag_zero(fixed):
    """'Right now, we put ignore_index as pad_index. I've definitely had it happen where I have 0 as a target class for the
    tagger, and this has led to some wonky runs because the cross_entropy ignores all 0 class in the target' (labelled a bug,
    closed). A BiLSTM tagger on synthetic sentences whose commonest tag, `O`, is class 0; Adam. The loss falls on the other
    tags and no layer misbehaves: only the predictions show that class 0 is never learnt"""
    x, t = _tagged()
    def loss(out, y): return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=-100 if fixed else 0)
    return Learner(tensor_dls(x, t, bs=32), _Tagger(), loss_func=loss, metrics=_token_accuracy, opt_func=torch_opt(torch.optim.Adam))

def _relations(n=1200, length=20, vocab=100, n_rel=6, seed=0):
    "Sentences of 5..20 tokens padded with 0, and per token a multi-hot set of relation labels (a token's relations follow its word); the last column is the mask"
    g = _gen(seed)
    rel_of = (torch.rand(vocab, n_rel, generator=g) < 0.25).float()
    lens = torch.randint(5, length + 1, (n,), generator=g)
    x = torch.randint(1, vocab, (n, length), generator=g)
    mask = (torch.arange(length) < lens.unsqueeze(1)).float()
    x = x * mask.long()
    return x, torch.cat([rel_of[x] * mask.unsqueeze(-1), mask.unsqueeze(-1)], -1)

class _RelTagger(nn.Module):
    "OpenJERE's kind of multi-head relation tagger, scaled down: embeddings, a GRU, a linear layer of one logit per relation"
    def __init__(self, vocab=100, dim=32, hid=48, n_rel=6):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, dim, padding_idx=0), nn.GRU(dim, hid, batch_first=True), nn.Linear(hid, n_rel)
    def forward(self, x): return self.out(self.rnn(self.emb(x))[0])

@case("https://github.com/WindChimeRan/OpenJERE/issues/6",
      "`MaskedBCE` uses `BCEWithLogitsLoss(reduction='mean')`, then multiplies the scalar by the mask: the padded tokens stay in the loss",
      {'padding_in_loss'}, epochs=3, lr=3e-3)
def masked_bce_counts_pads(fixed):
    """'MaskedBCE use torch.nn.BCEWithLogitsLoss, whose reduction argument is set to mean. It means BCEWithLogitsLoss will
    regard pad tokens as usual tokens ... it wouldn't eliminate padding influence using mask'; the printed loss was the same
    with and without the mask. The author: 'Yes, this is a bug. replace the loss with ... reduction='none' could fix it'.
    A GRU relation tagger on synthetic padded sentences, Adam. No layer misbehaves: the pads are in the loss's average"""
    x, y = _relations()
    bce = nn.BCEWithLogitsLoss(reduction='none' if fixed else 'mean')
    def loss(out, y):
        gt, mask = y[..., :-1], y[..., -1:]
        return torch.sum(bce(out, gt).mul(mask)) / torch.sum(mask.expand_as(gt) if fixed else mask)
    return Learner(tensor_dls(x, y, bs=32), _RelTagger(), loss_func=loss, opt_func=torch_opt(torch.optim.Adam))


def _spots(n=400, size=16, grid=4, seed=0):
    "Detection data, as an SSD's per-cell targets: images of one bright square each, and per grid cell 1 where the object's centre lies (0: background)"
    g = _gen(seed)
    x, cells = 0.3 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, grid, grid, dtype=torch.long)
    for i in range(n):
        r, c = torch.randint(0, size - 4, (2,), generator=g).tolist()
        x[i, 0, r:r + 4, c:c + 4] += 1.5
        cells[i, (r + 2) * grid // size, (c + 2) * grid // size] = 1
    return x, cells

@case("https://github.com/pierluigiferrari/ssd_keras/issues/3",
      "the only object class is given the id 0, which the detector reserves for the background: every target is background",
      {'labels_one_class'}, epochs=3, lr=1e-3)
def object_class_id_zero_is_background(fixed):
    """'I am trying to learn a model with one class ... But the model is always starting from loss=0 and doesn't learn anything';
    the reporter: 'I gave the single class I was using the number 0 (in the csv file), when I changed that to 1 it seems to
    work' ('Glad you resolved the issue'). A small convolutional detector scoring each cell of a 4×4 grid (SSD7's idea without
    anchors or boxes) on synthetic images of one square, cross-entropy over background and object, Adam. No layer misbehaves:
    the labels say there is nothing to find"""
    x, cells = _spots()
    if not fixed: cells = cells * 0   # the object's class id, 0, is the background's
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(32, 2, 1))
    return Learner(tensor_dls(x, cells, bs=32), model, loss_func=nn.CrossEntropyLoss(), opt_func=torch_opt(torch.optim.Adam))


def _initial_condition(n=2048, seed=0):
    "A PINN's initial-condition points: `(x, t=0)` in [-1, 1] × {0} and `u0(x) = -sin(pi x) + 0.3 cos(3 pi x)`, `(n,)` as the framework's dataset gave it"
    x = 2 * torch.rand(n, 1, generator=_gen(seed)) - 1
    return torch.cat([x, torch.zeros(n, 1)], 1), (-torch.sin(3.1416 * x) + 0.3 * torch.cos(9.4248 * x)).squeeze(1)

@case("https://github.com/Photon-AI-Research/NeuralSolvers/issues/20",
      "the initial condition's targets are `(batch,)` and the PINN's predictions `(batch, 1)`: `MSELoss` broadcasts them to `(batch, batch)`",
      {'output_shape', 'target_shape'}, epochs=3, lr=1e-3)
def pinn_initial_condition_broadcast(fixed):
    """'UserWarning: Using a target size (torch.Size([batch_size])) that is different to the input size (torch.Size([batch_size,
    1])) ... Using prediction = model(x).reshape(-1) solves the problem'; the maintainer: 'if you shape your data correctly ...
    it works fine', and the reporter reshaped the dataset's targets (the twin). The framework's fully connected PINN (tanh
    layers) fitting an initial condition `u(x, 0)`, MSE, Adam; the PDE residual term left out"""
    x, u0 = _initial_condition()
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    return Learner(tensor_dls(x, u0.unsqueeze(1) if fixed else u0, bs=64), model, loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the data: NaN, labels, order, leakage, augmentation ----
def _titanic(n=891, seed=0):
    "Titanic's columns as the CSV holds them: class, sex, age (a fifth missing: NaN), siblings, parents, fare; survival"
    g = _gen(seed)
    pclass = torch.randint(1, 4, (n,), generator=g).float()
    sex = (torch.rand(n, generator=g) < 0.35).float()   # 1: female
    age = (30 + 14 * torch.randn(n, generator=g)).clamp(0.5, 80)
    sib, par = torch.randint(0, 4, (n,), generator=g).float(), torch.randint(0, 3, (n,), generator=g).float()
    fare = torch.exp(2.5 + 0.8 * (3 - pclass) + 0.5 * torch.randn(n, generator=g))
    p = torch.sigmoid(2.4 * sex - 0.9 * (pclass - 2) - 0.03 * (age - 30) - 0.2 * sib)
    y = (torch.rand(n, generator=g) < p).long()
    age[torch.rand(n, generator=g) < 0.2] = float('nan')
    return torch.stack([pclass, sex, age, sib, par, fare], 1), y

@case("https://github.com/epfml/disco/issues/615",
      "a refactor dropped the tabular preprocessing: Titanic's rows reach the model with their missing ages as NaN, the loss is NaN at every epoch",
      {'nonfinite_input'}, epochs=8, lr=0.05)
def titanic_rows_with_missing_ages(fixed):
    """'When training on the titanic task ..., the loss is NaN at every epoch. The output of model.predict is only composed of
    NaN values'; 'This commit refactored the data preprocessing structure and dropped support for tabular data preprocessing'
    (closed). An MLP on synthetic Titanic rows (a fifth of the ages missing), a softmax over two classes with
    categorical cross-entropy, SGD; the twin restores a preprocessing: missing ages filled with the median, columns standardised"""
    x, y = _titanic()
    if fixed:
        age = x[:, 2]
        x[:, 2] = torch.where(age.isnan(), age.nanmedian(), age)
        x = (x - x.mean(0)) / x.std(0)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 2))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD))

def _recordings(n_per=120, n_classes=5, length=1024, seed=0):
    "Spoken-digit-like recordings: a class's mix of tones, 0.3 to 1 of the length long, zero-padded to `length`"
    g, xs, ys = _gen(seed), [], []
    t = torch.arange(length).float()
    for k in range(n_classes):
        f = torch.tensor([0.02 + 0.015 * k, 0.11 - 0.01 * k])
        for _ in range(n_per):
            s = torch.sin(6.283 * f[0] * t) + 0.6 * torch.sin(6.283 * f[1] * t + 1) + 0.3 * torch.randn(length, generator=g)
            n = int(length * (0.3 + 0.7 * torch.rand(1, generator=g)))
            xs.append(torch.cat([s[:n], torch.zeros(length - n)])); ys.append(k)
    return torch.stack(xs), torch.tensor(ys)

def _scattering(x, win=64, bands=8):
    "First-order scattering-like coefficients: each window's spectral energy in `bands` bands, `(n, windows * bands)`; exactly 0 over the padding"
    spec = torch.fft.rfft(x.view(x.shape[0], -1, win), dim=-1).abs()[..., 1:]
    return spec.view(*spec.shape[:2], bands, -1).mean(-1).flatten(1)

@case("https://github.com/kymatio/kymatio/pull/72",
      "the 1-D classification example takes the log of scattering coefficients, some exactly zero over the padding: -inf, then NaN after standardising",
      {'nonfinite_input'}, epochs=6, lr=1e-3)
def log_of_zero_scattering(fixed):
    """'For certain signals, we get scattering coefficients that are exactly zero, which means that when we take the
    logarithm, we get inf values, which later turn into nans. We solve this by adding a small constant (1e-6)' (merged). The
    example's pipeline on synthetic zero-padded recordings of five spoken digits: log-scattering features standardised with
    the training set's mean and spread, a logistic regression (`Linear`, log-softmax, NLL), Adam"""
    x, y = _recordings()
    s = _scattering(x)
    s = torch.log(s + 1e-6) if fixed else torch.log(s)
    s = (s - s.mean(0)) / s.std(0)
    model = nn.Sequential(nn.Linear(s.shape[1], 5), nn.LogSoftmax(1))
    return Learner(tensor_dls(s, y, bs=32), model, loss_func=nn.NLLLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))

class _KimCNN(nn.Module):
    "Kim's sentence CNN, scaled down: word embeddings, convolutions of widths 3, 4, 5 max-pooled over time, dropout, a linear layer"
    def __init__(self, vocab=500, dim=32, n_filters=16, n_out=14):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList([nn.Conv1d(dim, n_filters, w) for w in (3, 4, 5)])
        self.drop, self.out = nn.Dropout(0.5), nn.Linear(3 * n_filters, n_out)
    def forward(self, x):
        e = self.emb(x).transpose(1, 2)
        return self.out(self.drop(torch.cat([F.relu(c(e)).max(-1).values for c in self.convs], 1)))

@case("https://github.com/harvardnlp/sent-conv-torch/issues/21",
      "the preprocessing reads a label as the first character of the line: with 14 classes, classes 10 to 13 all become class 1",
      {'labels_misaligned', 'output_classes'}, epochs=5, lr=3e-3)
def labels_read_as_first_character(fixed):
    """'The preprocessing code assumes that the class label is of one character. This fails (without notice) with more than 10
    classes. It only takes the first character of the class' (`y = int(line[0]) + 1`); the maintainers pushed the reporter's
    fix, which splits the label off the words. Kim's CNN on synthetic documents of 14 topics, Adam. No layer misbehaves: the
    model learns the merged labels, and four topics are never predicted"""
    x, y = _docs(n_per=150, n_classes=14)
    if not fixed: y = torch.tensor([int(str(int(k))[0]) for k in y])
    return Learner(tensor_dls(x, y, bs=32), _KimCNN(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/Deci-AI/super-gradients/issues/416",
      "the training loader is built with `shuffle=False` over data stored class by class: every batch holds a single class",
      {'unshuffled_batches'}, epochs=2, lr=0.01)
def train_batches_sorted_by_class(fixed):
    """'By default, it does not pass shuffle=True to the dataloader, so SequentialSampler gets instantiated. In training on
    Imagenet it makes NN see only examples of a single class which quickly throws it out of the minima. Passing shuffle=True
    to the dataloader params solves the issue' (fixed). torchvision's ResNet-18 (random weights, 10 classes) on the digits
    sorted by class as an image folder lists them, SGD with Nesterov momentum 0.9 and weight decay 1e-4. No layer misbehaves
    in a way its statistics show: each batch is one class"""
    from torchvision.models import resnet18
    x, y = _digit_images()
    xt, yt, xv, yv = _split(x, y)
    order = torch.argsort(yt, stable=True)
    xt, yt = xt[order].expand(-1, 3, -1, -1), yt[order]
    train = DataLoader([(xt[i], yt[i]) for i in range(len(xt))], bs=64, shuffle=fixed, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(xv[i].expand(3, -1, -1), yv[i]) for i in range(len(xv))], bs=64))
    return Learner(dls, resnet18(weights=None, num_classes=10), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, nesterov=True, weight_decay=1e-4))

def _clusters(n_items=300, n_windows=5, n_features=40, n_classes=4, seed=0):
    "Gene clusters, each expanded into `n_windows` rows (context windows: the cluster's features plus a little noise); a class per cluster, weakly tied to its features"
    g = _gen(seed)
    centres = torch.randn(n_classes, n_features, generator=g)
    y = torch.randint(0, n_classes, (n_items,), generator=g)
    items = 0.35 * centres[y] + torch.randn(n_items, n_features, generator=g)
    x = items.repeat_interleave(n_windows, 0) + 0.1 * torch.randn(n_items * n_windows, n_features, generator=g)
    return x, y.repeat_interleave(n_windows), torch.arange(n_items).repeat_interleave(n_windows)

@case("https://github.com/HUST-NingKang-Lab/BGC-Prophet/issues/8",
      "each cluster is expanded into 5 context-window rows and the split is made by row: windows of one cluster land in both training and validation",
      {'valid_leak'}, epochs=6, lr=1e-3)
def split_by_row_not_by_cluster(fixed):
    """'This splits individual rows rather than BGCs. Since the 5 context windows of the same BGC are shuffled independently,
    they can be distributed across both the training and test sets'; the author: 'Great catch! You are absolutely right that
    the row-level split causes data leakage.' An MLP classifier on synthetic clusters whose classes are weakly tied to their
    features, Adam; the twin splits by cluster. Every layer is healthy and the run learns: only the validation score is
    inflated, by near-copies of training rows"""
    x, y, item = _clusters()
    perm = torch.randperm(len(x), generator=_gen(1))
    if fixed:
        held = torch.randperm(int(item.max()) + 1, generator=_gen(1))[:60]
        valid = torch.isin(item, held)
        xt, yt, xv, yv = x[~valid], y[~valid], x[valid], y[valid]
    else: xt, yt, xv, yv = x[perm[300:]], y[perm[300:]], x[perm[:300]], y[perm[:300]]
    model = nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 4))
    return Learner(_dls(xt, yt, xv, yv), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))

def _categorical_ce(out, onehot):
    "Keras's categorical cross-entropy on a softmax over the class axis, against one-hot masks (a pixel matching no class contributes nothing)"
    return -(onehot * F.log_softmax(out, 1)).sum(1).mean()

@case("https://github.com/divamgupta/image-segmentation-keras/issues/11",
      "the segmentation masks are resized with `cv2.resize`'s default bilinear interpolation: borders get values between classes (an invented class 1 between 0 and 2)",
      {'labels_misaligned'}, epochs=4, lr=3e-3)
def masks_resized_bilinear(fixed):
    """'In the function getSegmentationArr in LoadBatches.py, I think that you need to use cv2.resize(img, (width, height),
    cv2.INTER_NEAREST) instead of the default one ... This may introduce labels that do not exist in the original image'; the
    author: 'Thanks for pointing out. Could you send a pull request for this?'. Images and masks of blobs of classes 1 and 2
    (on 0), both halved in size; the masks one-hot encoded by equality as `getSegmentationArr` does (a value of 0.5 matches no
    class, a 1 between 0 and 2 becomes class 1); a two-level U-Net, softmax with categorical cross-entropy, Adam. No layer
    misbehaves: the targets are wrong along every border"""
    x, m = _blobs(n=240, size=32, n_classes=3, seed=4)
    x = F.interpolate(x, scale_factor=0.5, mode='bilinear')
    m = F.interpolate(m[:, None].float(), scale_factor=0.5, mode='nearest' if fixed else 'bilinear')[:, 0]
    onehot = torch.stack([(m == c).float() for c in range(3)], 1)
    return Learner(tensor_dls(x, onehot, bs=16), _tiny_unet(n_out=3), loss_func=_categorical_ce, opt_func=torch_opt(torch.optim.Adam))

class _ShiftFlip(Callback):
    "The CIFAR augmentation (a random crop of the image padded by 1, a horizontal flip), on the training batches or, as in the report, on every batch"
    order = -5
    def __init__(self, valid_too=True): self.valid_too = valid_too
    def before_batch(self):
        if not (self.training or self.valid_too): return
        x = self.learn.xb[0]
        n, (h, w) = x.shape[0], x.shape[-2:]
        pad = F.pad(x, (1, 1, 1, 1))
        dy, dx = torch.randint(0, 3, (2,)).tolist()
        x = pad[..., dy:dy + h, dx:dx + w]
        flip = torch.rand(n) < 0.5
        self.learn.xb = (torch.where(flip[:, None, None, None], x.flip(-1), x),)

def _tiny_densenet(growth=12, n_out=10):
    "A DenseNet, scaled down: a stem, a dense block of three BN-ReLU-conv layers whose outputs are concatenated, a transition, a linear head"
    class Dense(nn.Module):
        def __init__(self, c): super().__init__(); self.f = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, growth, 3, padding=1, bias=False))
        def forward(self, x): return torch.cat([x, self.f(x)], 1)
    c = 2 * growth
    return nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), Dense(c), Dense(c + growth), Dense(c + 2 * growth),
                         nn.BatchNorm2d(c + 3 * growth), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c + 3 * growth, n_out))

@case("https://github.com/gpleiss/efficient_densenet_pytorch/issues/51",
      "the augmentation (random crops and flips) is attached before the train/valid split, so the validation images are augmented too",
      {'valid_augmented', 'eval_nondeterministic'}, epochs=4, lr=3e-3)
def validation_images_augmented(fixed):
    """'Just found out that transformation was applied prior to train val split, effectively augmenting validation set'; the
    author: 'Thanks for the catch. This has been updated'. A small DenseNet on the digits as images, the demo's crop-and-flip
    augmentation, Adam. Training is untouched and no layer misbehaves: validation scores a random draw of augmented images"""
    x, y = _digit_images()
    return Learner(tensor_dls(x, y, bs=64), _tiny_densenet(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_ShiftFlip(valid_too=not fixed)])

def _sensor_series(n=800, steps=24, n_feat=5, p_missing=0.05, seed=0):
    "Multivariate series `(n, steps, n_feat)` of smooth sensor readings, with `p_missing` of the values missing (NaN) as recorded"
    g = _gen(seed)
    t = torch.arange(steps).float()
    x = torch.sin(0.3 * t[None, :, None] * (1 + torch.rand(n, 1, n_feat, generator=g)) + 6.3 * torch.rand(n, 1, n_feat, generator=g))
    x = x + 0.1 * torch.randn(n, steps, n_feat, generator=g)
    x[torch.rand(n, steps, n_feat, generator=g) < p_missing] = float('nan')
    return x

def _imputation_set(x, fill_intact=True, seed=0):
    "SAITS-style training pairs: inputs with 20% more values hidden (zeros, with the observed mask), targets `X_intact` and the mask of hidden values"
    g = _gen(seed)
    observed = ~x.isnan()
    hide = observed & (torch.rand(x.shape, generator=g) < 0.2)
    xin = torch.where(observed & ~hide, x, torch.zeros(()))
    intact = torch.nan_to_num(x) if fill_intact else x
    return torch.cat([xin, (observed & ~hide).float()], -1), torch.stack([intact, hide.float()], -1)

def _masked_mse(out, y):
    "The imputation loss: the squared error on the artificially hidden values only (`(out - X_intact)² · mask`)"
    intact, mask = y[..., 0], y[..., 1]
    return ((out - intact) ** 2 * mask).sum() / mask.sum().clamp(min=1)

@case("https://github.com/WenjieDu/PyPOTS/issues/232",
      "the validation set's `X_intact` keeps its originally missing values as NaN: the masked loss multiplies NaN by 0 and the validation loss is NaN",
      {'nonfinite_target'}, epochs=4, lr=1e-3)
def imputation_valid_targets_nan(fixed):
    """'For all imputation models, when X_intact in the val set contains missing data, the training procedure will have NaN val
    loss, and this will lead to an error after the training is finished' (the maintainer's own bug report, fixed). A small
    imputer (an MLP over the flattened series and its mask, SAITS's task without its attention) on synthetic sensor series with
    5% missing, the masked MSE, Adam. Training is untouched: its targets are filled, only the validation targets hold NaN"""
    x = _sensor_series()
    (xt, yt), (xv, yv) = _imputation_set(x[:640]), _imputation_set(x[640:], fill_intact=fixed, seed=1)
    class Imputer(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(24 * 10, 256), nn.ReLU(), nn.Linear(256, 24 * 5))
        def forward(self, x): return self.net(x).view(-1, 24, 5)
    return Learner(_dls(xt, yt, xv, yv), Imputer(), loss_func=_masked_mse, opt_func=torch_opt(torch.optim.Adam))
